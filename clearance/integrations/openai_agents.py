"""The OpenAI Agents SDK: the SDK runs the tools, clearance decides and records every call.

(Longer than the ~500 lines a module should hold, on purpose: about 90 of them are this
manual, and the rest is one concept, the guard that answers the SDK's approval, invocation
and resume hooks; split, its halves would only make sense together.)

::

    from agents import Agent, Runner, function_tool
    from clearance.integrations.openai_agents import AgentsGuard, register_function_tools

    tools = register_function_tools(registry, "files", [read_file], root=workspace,
                                    facts={"read_file": {"/path": "path"}})
    async with Harness(registry, evaluator=evaluator) as harness:
        session = await harness.create_session(principal=Principal("User", "alice"))
        guard = AgentsGuard(session, approver="alice")
        agent = Agent(name="coder", model=model,
                      tools=guard.wrap(tools) + guard.function_tools())
        result = await guard.run(agent, "Summarize the docs")   # the input is the user's
        while result.interruptions:                       # clearance asked: a person answers
            state = result.to_state()
            for item in result.interruptions:
                print(guard.pending_ask(item))            # reason, canonical facts, scopes
                await guard.answer(state, item, "allow_session")   # or state.approve(item)
            result = await Runner.run(agent, state)

Who the user is
---------------

Only the host's input is the user's (rule R14): :meth:`AgentsGuard.run` (or
``run_streamed``) records the run's input with ``session.add_user_message``, then starts
``Runner.run``. The guard reads no user from the SDK: its ``turn_input`` holds, in the
user's role, text a model wrote (an ``Agent.as_tool()`` sub-agent's input), so a user-role
item the host did not give is recorded as a tool's (``tool:agent-input``), never as hers.
A run started with ``Runner.run`` directly has no user values unless the host called
``session.add_user_message`` first.

How a call goes
---------------

*Tools.* :meth:`AgentsGuard.wrap` takes the SDK ``FunctionTool`` objects the agent would
use (``@function_tool`` ones included) and returns copies the model sees under the same
names; each must be declared in the registry first (:func:`register_function_tools`, with
its facts, read-only flag and withheld arguments), so that policies, guardrails and asks
know it. :meth:`AgentsGuard.function_tools` turns the session's own clearance tools into
SDK tools named by their model alias (``files__read_file``).

*Deciding: ``needs_approval``.* The SDK asks a tool's ``needs_approval`` about every call
it holds no approval decision for, before running it. There the guard authorizes the call
once: ``session.authorize(name, arguments, call_id=<the SDK's call id>, wait=False)``
(schema, canonical facts, argument guardrails, evaluator, grants, the journal's
``call_decided``).

- allowed or denied: ``False``; the SDK invokes the tool, which finds that authorization;
- an ask: the authorization comes back *pending*, the ask stored in the harness's ask
  store; ``True``, so the SDK interrupts the run and ``result.interruptions`` holds the call.

*Running: ``on_invoke_tool``.* The tool body is the only place the tool runs, and only for
an allowed authorization of that call id, that tool and those arguments. An SDK tool gets
``Authorization.arguments``, the canonical ones (a path fact's resolved path, not what the
model wrote), inside ``session.execution``, so the journal records its start and end and
the result guardrails decide what comes back; a clearance tool runs through
``session.run_authorized`` (its handler, as ``session.call_tool`` runs it). The model sees
the outcome's text, so a redacted or blocked result never reaches it. A denied call does
not run: the model sees the denial.

An allowed or denied call is evaluated once. An asked call is evaluated again when its
answer comes (the same call id, so the pipeline applies the stored answer once, and a deny
added meanwhile still wins).

An allowed call is checked again as it runs (rule R12): one whose grant was revoked, or
whose authorization expired (the harness's ``authorization_ttl``), between
``needs_approval`` and the tool body is decided again there, and does not run unless that
decision allows it (an ask it makes waits in the store: the model is told so).

*Answering.* A person answers an interruption in the SDK:

- ``state.approve(item)``: ``allow_once``;
- ``state.approve(item, always_approve=True)``: ``allow_always`` (``allow_session`` with
  ``AgentsGuard(session, always_approve="allow_session")``): a grant for that call's exact
  arguments;
- ``state.reject(item)``: ``deny``;
- ``await guard.answer(state, item, decision, scope=...)``: any clearance answer, with a
  scope from the ask's suggestions (the SDK has no session-wide approval: this is the way to
  answer ``allow_session``). It approves or rejects the item in the SDK *for that call
  only*, so later calls come back to clearance, whose grants then decide.

When the run resumes, the guard gives the answer to the stored ask
(``harness.answer_ask(ask_id, ..., by=approver, via="openai-agents")``) and authorizes the
call again with the same call id: the pipeline applies the answer once (creating the grant
of an ``allow_session``/``allow_always``) and the journal's ``call_decided`` and
``permission_decided`` say who answered and through what. An approved call is answered when
the SDK invokes it; a rejected one (the SDK never invokes it) when the resumed run lists its
tools (``is_enabled``). Because the ask lives in the ask store, a run paused with
``RunState.to_json()`` can resume in another process (with a shared ``SqliteAskStore``),
and the ask can be answered elsewhere too (``clearance asks approve``): the call runs only
if clearance's answer and the SDK's both allow it. Answered there alone, the run resumes
with ``guard.run(agent, state)``, which first tells the SDK those answers
(:meth:`AgentsGuard.settle`: an interruption the SDK holds no decision for is approved for
that call only, or rejected). An SDK approval answers the ask its interruption showed, once:
a saved, approved ``RunState`` resumed again after the call ran does not run it again.

*What an SDK ``always_approve`` does not cover.* The SDK then approves every later call of
that tool in the run without asking ``needs_approval``. clearance does not widen the
answer that way: its grant covers the approved call's arguments. A later call that
clearance would ask about and no grant covers was never shown to anyone, so the guard does
not answer it: it does not run, the model is told it needs approval, and its ask waits in
the store (answering it ``allow_session`` or ``allow_always`` lets a retry through).
:meth:`AgentsGuard.answer` avoids the case: it never makes an SDK approval sticky.

Not covered: a call the SDK rejects by itself (``always_reject``, or arguments that are not
a JSON object, which it sends for approval without asking ``needs_approval``) is decided by
clearance only when the SDK invokes it. An SDK tool's image or file output reaches the
model as its JSON description, not as an image.
"""

from __future__ import annotations

from clearance.integrations._extras import framework_import_error

try:
    import agents  # the optional extra: checked before anything uses it
    import agents.tool
except ImportError as exc:
    raise framework_import_error(exc, "openai-agents") from exc

import copy
import dataclasses
import inspect
import json
import os
import secrets
import time
import weakref
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

import pydantic
from agents import (
    Agent,
    FunctionTool,
    RunContextWrapper,
    Runner,
    RunResult,
    RunResultStreaming,
    RunState,
    ToolOutputText,
)
from agents import Tool as SdkTool
from agents.items import ToolApprovalItem
from agents.tool_context import ToolContext

from clearance.errors import AskError, StaleAuthorizationError
from clearance.harness.approvals import ANSWERS, Answer, GrantScope, PermissionDecision
from clearance.harness.ask_store import StoredAsk
from clearance.harness.outcomes import Authorization
from clearance.harness.session import Session
from clearance.harness.tools import Tool, ToolRegistry
from clearance.integrations._host import (
    DeclaredTools,
    ToolSpec,
    declare_tools,
    framework_names,
    open_ask_id,
    qualified_name,
    record_replayed,
    undeclared,
)

__all__ = ["VIA", "AgentsGuard", "register_function_tools"]

VIA = "openai-agents"
"""How answers given through the SDK are journaled (``via``)."""

_ALWAYS = ("allow_always", "allow_session")
_RUNNABLE = ("callback", "mcp")
"""The sources of tools whose handlers clearance runs (not framework declarations)."""


def register_function_tools(
    registry: ToolRegistry,
    namespace: str,
    tools: Iterable[FunctionTool],
    *,
    names: Mapping[str, str] | None = None,
    root: str | os.PathLike[str] | None = None,
    facts: Mapping[str, Mapping[str, Any]] | None = None,
    read_only: Collection[str] = (),
    sensitive: Mapping[str, Sequence[str]] | None = None,
    annotations: Mapping[str, Mapping[str, Any]] | None = None,
) -> DeclaredTools[list[FunctionTool]]:
    """Declare SDK function tools in a clearance registry, under ``namespace``.

    Each declaration has the tool's name, description and JSON Schema; the per-tool
    options are keyed by the SDK tool's name: ``facts`` (``{"read_file": {"/path":
    "path"}}``, with ``root``), ``read_only``, ``sensitive`` (withheld argument pointers),
    ``annotations``, and ``names`` for an SDK name that is not ``[a-z0-9_-]``. The SDK
    runs the tool (through :meth:`AgentsGuard.wrap`); a call of the declaration through
    ``session.call_tool`` fails instead of running it.

    Returns:
        The tools and their qualified names (SDK name -> qualified name), for
        :meth:`AgentsGuard.wrap`: ``guard.wrap(declared)`` (each tool is listed once).

    Raises:
        TypeError: an item is not an SDK ``FunctionTool``.
        ToolRegistrationError: an option names a tool that is not given, a name does not
            fit clearance's rules, or the registry refuses a declaration.
    """
    tools = list(tools)
    specs = []
    for tool in tools:
        if not isinstance(tool, FunctionTool):
            raise TypeError(f"register_function_tools takes SDK FunctionTools, not {tool!r}")
        specs.append(ToolSpec(tool.name, tool.description, copy.deepcopy(tool.params_json_schema)))
    mapping = declare_tools(
        registry,
        namespace,
        specs,
        framework=VIA,
        names=names,
        root=root,
        facts=facts,
        read_only=read_only,
        sensitive=sensitive,
        annotations=annotations,
    )
    return DeclaredTools(tools, mapping)


@dataclass(slots=True)
class _Call:
    """One SDK tool call as the guard follows it, by the SDK's call id."""

    tool: Tool
    sdk_name: str
    """The name the SDK and the model know the tool by (its approvals are keyed by it)."""
    arguments: Any
    """What the model sent (parsed): the call id stands for these arguments only."""
    auth: Authorization
    interrupted: bool = False
    """The guard had the SDK interrupt the run for it: a person was shown this call."""
    settling: bool = False

    def is_for(self, tool: Tool, arguments: Any) -> bool:
        """Whether this is the call of ``tool`` with ``arguments`` (what was authorized)."""
        return self.tool is tool and self.arguments == arguments


class AgentsGuard:
    """Puts an Agents SDK agent's tool calls through one clearance session.

    Args:
        session: the clearance session whose principal the agent acts for.
        approver: who answers the SDK's approvals (a person's name), journaled as the
            answer's ``by``; ``via`` is always ``"openai-agents"``.
        always_approve: what ``state.approve(item, always_approve=True)`` answers:
            ``"allow_always"`` (a persisted grant) or ``"allow_session"``.

    Raises:
        ValueError: ``always_approve`` is neither of those.
    """

    def __init__(
        self,
        session: Session,
        *,
        approver: str | None = None,
        always_approve: Literal["allow_always", "allow_session"] = "allow_always",
    ) -> None:
        if not isinstance(session, Session):
            raise TypeError(f"AgentsGuard needs a clearance Session, not {session!r}")
        if always_approve not in _ALWAYS:
            raise ValueError(
                f"always_approve is 'allow_always' or 'allow_session', not {always_approve!r}"
            )
        if approver is not None and not isinstance(approver, str):
            raise TypeError(f"approver is a name, not {type(approver).__name__}")
        self.session = session
        self.approver = approver
        self.always_approve: Answer = always_approve
        self._calls: dict[str, _Call] = {}
        self._swept: weakref.WeakSet[RunContextWrapper[Any]] = weakref.WeakSet()
        self._seen: set[str] = set()
        """The keys of the user-role input items already recorded in the session's
        provenance as a tool's (:mod:`clearance.provenance`, rule R14)."""

    # -- the run: the host's entry point --------------------------------------------------

    async def run(
        self, agent: Agent[Any], input: str | list[Any] | RunState[Any, Any], **options: Any
    ) -> RunResult:
        """``Runner.run(agent, input, **options)``, with ``input`` recorded as the user's
        own words first (:meth:`user_input`). Resuming a paused run (``input`` a
        ``RunState``) records nothing, and first tells the SDK the answers given in the
        ask store meanwhile (:meth:`settle`)."""
        self.user_input(input)
        if isinstance(input, RunState):
            self.settle(input)
        return await Runner.run(agent, input, **options)

    def run_streamed(
        self, agent: Agent[Any], input: str | list[Any] | RunState[Any, Any], **options: Any
    ) -> RunResultStreaming:
        """``Runner.run_streamed(agent, input, **options)``, with ``input`` recorded as the
        user's own words first (:meth:`user_input`); a ``RunState`` is settled first
        (:meth:`settle`)."""
        self.user_input(input)
        if isinstance(input, RunState):
            self.settle(input)
        return Runner.run_streamed(agent, input, **options)

    def run_sync(
        self, agent: Agent[Any], input: str | list[Any] | RunState[Any, Any], **options: Any
    ) -> RunResult:
        """:meth:`run` from synchronous code: ``Runner.run_sync(agent, input, **options)``,
        with ``input`` recorded as the user's first and a ``RunState`` settled first. The
        harness is opened with :class:`~clearance.integrations.BlockingHarness`, on the
        loop ``Runner.run_sync`` runs on."""
        self.user_input(input)
        if isinstance(input, RunState):
            self.settle(input)
        return Runner.run_sync(agent, input, **options)

    def settle(self, state: RunState[Any, Any]) -> list[ToolApprovalItem]:
        """Tell the SDK the answers given in clearance's ask store (``clearance asks
        approve``/``deny``, the inbox, ``harness.answer_ask``) to the interruptions of a
        paused run: an interruption the SDK holds no decision for is approved, for that
        call only, when its ask was allowed, and rejected when it was denied. An
        interruption the host already approved or rejected in the SDK keeps that
        decision (the call runs only if both allow it); one whose ask is still pending
        stays an interruption. :meth:`run` and :meth:`run_streamed` call it; call it
        before ``Runner.run(agent, state)`` otherwise.

        Returns:
            The interruptions it settled.
        """
        settled: list[ToolApprovalItem] = []
        for item in state.get_interruptions():
            if _sdk_approval(state, item) is not None:
                continue
            ask = self.pending_ask(item)
            if ask is None or ask.status != "answered" or ask.decision is None:
                continue
            if ask.decision.decision == "deny":
                state.reject(item, rejection_message=ask.decision.message)
            else:
                state.approve(item)
            settled.append(item)
        return settled

    def user_input(self, input: str | list[Any] | RunState[Any, Any]) -> None:
        """Record a run's input as the user's (``session.add_user_message``): a string,
        or the text of each ``user`` item of an input list (``system``/``developer``
        items as the application's instructions). Only the host's input is the user's
        (rule R14): what the SDK replays to the tools later (a sub-agent's input,
        written by a model) is not (see the module docstring)."""
        if isinstance(input, str):
            self.session.add_user_message(input)
            return
        if isinstance(input, RunState):
            return
        for item in input:
            role, text = _message(item)
            if text and role == "user":
                self.session.add_user_message(text)
            elif text and role in ("system", "developer"):
                self.session.add_message("system", text)

    # -- the tools the agent gets ---------------------------------------------------------

    def wrap(
        self,
        tools: DeclaredTools[list[FunctionTool]] | Iterable[FunctionTool],
        *,
        namespace: str | None = None,
        names: Mapping[str, str] | None = None,
    ) -> list[SdkTool]:
        """Copies of SDK function tools whose calls clearance decides and records.

        Each copy keeps the tool's name, schema, guardrails and timeout; the tool runs
        only with an allowed authorization, with the canonical arguments.

        Args:
            tools: what :func:`register_function_tools` returned (the tools it declared,
                with their names), or SDK tools declared with it.
            namespace: for tools given as a list: the namespace they were declared under.
            names: for tools given as a list: SDK name -> qualified name, for tools
                declared under other names.

        Raises:
            TypeError: an item is not an SDK ``FunctionTool``, or ``namespace``/``names``
                beside a ``DeclaredTools``.
            UnknownToolError: a tool is not declared (the message says why: not at all,
                or under another namespace than the one given), or not one this session's
                agent may call.
        """
        tools, namespace, names = framework_names(
            tools, namespace, names, wrapper="AgentsGuard.wrap"
        )
        wrapped: list[SdkTool] = []
        for tool in tools:
            if not isinstance(tool, FunctionTool):
                raise TypeError(f"AgentsGuard.wrap takes SDK FunctionTools, not {tool!r}")
            name = qualified_name(tool.name, namespace=namespace, names=names)
            declared = self._session_tool(name, tool.name, namespace)
            copied = copy.copy(tool)
            copied.on_invoke_tool = self._invoker(declared, tool.name, tool)
            copied.needs_approval = self._approval_check(declared, tool.name, tool.needs_approval)
            copied.is_enabled = self._enabled_check(tool.is_enabled)
            # What the model gets is clearance's outcome text (after result guardrails), not
            # the tool's typed output: no output schema to hold it to.
            _untyped(copied)
            wrapped.append(copied)
        return wrapped

    def function_tools(self, names: Iterable[str] | None = None) -> list[SdkTool]:
        """SDK tools for the session's clearance tools, named by their model alias; the
        handlers run as ``session.call_tool`` runs them (limits, timeout, cancellation,
        progress).

        Args:
            names: qualified names or aliases; default: every tool of the session's agent
                that clearance runs itself (``source`` ``"callback"`` or ``"mcp"``; not the
                declarations of framework tools, which come through :meth:`wrap`).

        Raises:
            UnknownToolError: a name is not one of the session's tools.
        """
        if names is None:
            selected = [t for t in self.session.selected_tools if t.source in _RUNNABLE]
        else:
            selected = [self._session_tool(name) for name in names]
        return [
            FunctionTool(
                name=tool.model_alias,
                description=tool.description,
                params_json_schema=copy.deepcopy(dict(tool.input_schema)),
                on_invoke_tool=self._invoker(tool, tool.model_alias, None),
                # clearance validates the arguments; a strict schema would make every
                # property required.
                strict_json_schema=False,
                needs_approval=self._approval_check(tool, tool.model_alias, False),
                is_enabled=self._enabled_check(True),
            )
            for tool in selected
        ]

    def _session_tool(
        self, name: str, sdk_name: str | None = None, namespace: str | None = None
    ) -> Tool:
        tool = self.session.tools.get(name)
        if tool is None:
            raise undeclared(
                self.session,
                name,
                sdk_name or name,
                namespace=namespace,
                declare="register_function_tools(registry, namespace, tools)",
            )
        return tool

    # -- deciding: needs_approval ---------------------------------------------------------

    def _approval_check(
        self, tool: Tool, sdk_name: str, own: bool | Callable[..., Any]
    ) -> Callable[[RunContextWrapper[Any], dict[str, Any], str], Awaitable[bool]]:
        async def needs_approval(
            ctx: RunContextWrapper[Any], arguments: dict[str, Any], call_id: str
        ) -> bool:
            # The turn's user-role input counts as a tool's (rule R14): the SDK gives a
            # sub-agent's input, which a model wrote, the user's role.
            record_replayed(self.session, self._seen, _replayed(ctx.turn_input))
            call = await self._authorized(tool, sdk_name, arguments, call_id)
            if not call.is_for(tool, arguments):
                return False  # the tool refuses to run it: see _invoke
            if call.auth.pending:
                call.interrupted = True
                return True
            if call.auth.allowed and own is not False:
                # The SDK tool's own approval rule still applies to what clearance allows.
                value = own(ctx, arguments, call_id) if callable(own) else own
                return bool(await value if inspect.isawaitable(value) else value)
            return False

        return needs_approval

    async def _authorized(self, tool: Tool, sdk_name: str, arguments: Any, call_id: str) -> _Call:
        """The call's authorization: decided once, again only when its ask was answered."""
        call = self._calls.get(call_id)
        if call is None:
            auth = await self._authorize(tool, arguments, call_id)
            call = self._calls[call_id] = _Call(tool, sdk_name, arguments, auth)
        elif call.auth.pending and call.is_for(tool, arguments) and self._answered(call):
            call.auth = await self._authorize(tool, arguments, call_id)
        return call

    async def _authorize(self, tool: Tool, arguments: Any, call_id: str) -> Authorization:
        return await self.session.authorize(
            tool.qualified_name, arguments, call_id=call_id, wait=False
        )

    def _answered(self, call: _Call) -> bool:
        """Whether the call's stored ask is no longer pending (answered here or elsewhere)."""
        assert call.auth.ask_id is not None
        stored = self.session.harness.ask_store.get(call.auth.ask_id)
        return stored is None or stored.status != "pending"

    # -- running: on_invoke_tool ----------------------------------------------------------

    def _invoker(
        self, tool: Tool, sdk_name: str, sdk_tool: FunctionTool | None
    ) -> Callable[[ToolContext[Any], str], Awaitable[Any]]:
        async def on_invoke_tool(ctx: ToolContext[Any], raw: str) -> str:
            return await self._invoke(tool, sdk_name, sdk_tool, ctx, raw)

        return on_invoke_tool

    async def _invoke(
        self,
        tool: Tool,
        sdk_name: str,
        sdk_tool: FunctionTool | None,
        ctx: ToolContext[Any],
        raw: str,
    ) -> str:
        call_id = ctx.tool_call_id
        arguments = _parse(raw)
        call = self._calls.get(call_id)
        if call is None:
            # needs_approval was not asked here: the SDK holds an approval for the tool
            # (an always_approve), or the run resumed in another process.
            asked_before = open_ask_id(self.session, tool.qualified_name, call_id)
            call = await self._authorized(tool, sdk_name, arguments, call_id)
            call.interrupted = asked_before is not None and asked_before == call.auth.ask_id
            if call.auth.pending and not call.interrupted and self._approved_once(ctx, call):
                # The SDK approved this very call id, yet no ask of it was open: a saved
                # RunState resumed again after its approval was applied (the call ran). That
                # approval answered the ask it was shown with, once: the ask this replay
                # just raised was shown to nobody, so it is withdrawn, not left for a later
                # replay to take the old approval as its answer.
                assert call.auth.ask_id is not None
                self.session.harness.ask_store.withdraw(call.auth.ask_id, "replayed approval")
                self._calls.pop(call_id, None)
                return (
                    f"call {call_id} was approved once, for an earlier run, and that approval "
                    "was used; it did not run again"
                )
        elif not call.is_for(tool, arguments):
            # A call id stands for one invocation: another tool or other arguments under it
            # were never authorized.
            return (
                f"refused: call {call_id} is not the tool call that was authorized under "
                "that id; it did not run"
            )
        if call.auth.pending:
            await self._answer_from_sdk(ctx, call)
        auth = call.auth
        if auth.pending:
            return (
                f"this call needs a person's approval (ask {auth.ask_id}) and has none; it did "
                "not run"
            )
        if auth.allowed and not self.session.holds(call_id) and call_id in self.session.authorized:
            # Decided a while ago (rule R12): its grant was revoked or it expired since.
            # Decided again; an ask that comes of it cannot interrupt the run from here.
            await self.session.withdraw(call_id)
            call.auth = auth = await self._authorize(call.tool, call.arguments, call_id)
            if auth.pending:
                return (
                    f"this call's authorization no longer held and it needs a person's "
                    f"approval now (ask {auth.ask_id}); it did not run"
                )
        if not auth.allowed:
            self._calls.pop(call_id, None)
            return auth.outcome.text if auth.outcome is not None else auth.message or "denied"
        try:
            return await self._run(call, sdk_tool, ctx)
        except StaleAuthorizationError as exc:
            return exc.message  # checked again as it came to run (rule R12)
        finally:
            self._calls.pop(call_id, None)

    async def _answer_from_sdk(self, ctx: RunContextWrapper[Any], call: _Call) -> None:
        """Give the SDK's approval of a pending call to its ask, then decide it again."""
        if not self._answered(call):
            decision = self._sdk_decision(ctx, call)
            if decision is None:
                return
            await self._give(call, decision)
        call.auth = await self._authorize(call.tool, call.arguments, call.auth.call_id)

    def _approved_once(self, ctx: RunContextWrapper[Any], call: _Call) -> bool:
        """Whether the SDK approved this call id itself (not the tool as a whole)."""
        if ctx.is_tool_approved(call.sdk_name, call.auth.call_id) is not True:
            return False
        return not _approved_as_a_whole(ctx, call.sdk_name)

    def _sdk_decision(self, ctx: RunContextWrapper[Any], call: _Call) -> PermissionDecision | None:
        """The clearance answer an SDK approval of this call stands for, if any."""
        if not call.interrupted:
            # No interruption showed this ask to anyone (a saved, approved RunState resumed
            # again after its call ran: the call asks anew, and that approval was for the
            # ask it was shown with, applied once already).
            return None
        if ctx.is_tool_approved(call.sdk_name, call.auth.call_id) is not True:
            return None
        if not _approved_as_a_whole(ctx, call.sdk_name):
            answer: Answer = "allow_once"  # approved for this call: its item was shown
        else:
            answer = self.always_approve
        return PermissionDecision(answer, decided_by=self.approver, via=VIA)

    async def _give(self, call: _Call, decision: PermissionDecision) -> None:
        assert call.auth.ask_id is not None
        try:
            await self.session.harness.answer_ask(
                call.auth.ask_id, decision, by=decision.decided_by, via=VIA
            )
        except AskError:
            pass  # answered meanwhile elsewhere (clearance asks): that answer stands

    async def _run(self, call: _Call, sdk_tool: FunctionTool | None, ctx: ToolContext[Any]) -> str:
        auth = call.auth
        if sdk_tool is None:
            # A clearance tool: clearance runs its handler as call_tool would (limits,
            # timeout, cancellation, progress), with the authorized arguments.
            return (await self.session.run_authorized(auth.call_id)).text
        arguments = auth.arguments
        assert arguments is not None
        async with self.session.execution(auth.call_id) as run:
            try:
                run.result(await _run_sdk_tool(sdk_tool, ctx, arguments))
            except Exception as exc:
                run.fail(exc)  # the model sees a failure with a correlation id, not the error
        assert run.outcome is not None
        return run.outcome.text

    # -- answers --------------------------------------------------------------------------

    def _enabled_check(
        self, own: bool | Callable[..., Any]
    ) -> Callable[[RunContextWrapper[Any], Any], Awaitable[bool]]:
        async def is_enabled(ctx: RunContextWrapper[Any], agent: Any) -> bool:
            await self._sweep(ctx)
            value = own(ctx, agent) if callable(own) else own
            return bool(await value if inspect.isawaitable(value) else value)

        return is_enabled

    async def _sweep(self, ctx: RunContextWrapper[Any]) -> None:
        """Deny the asks of calls the SDK rejected: it never invokes them, and a run lists
        its tools (here) before it goes on."""
        for call in list(self._calls.values()):
            if not call.auth.pending or call.settling:
                continue
            if ctx.is_tool_approved(call.sdk_name, call.auth.call_id) is not False:
                continue
            call.settling = True
            try:
                if not self._answered(call):
                    await self._give(
                        call, PermissionDecision("deny", decided_by=self.approver, via=VIA)
                    )
                call.auth = await self._authorize(call.tool, call.arguments, call.auth.call_id)
            finally:
                call.settling = False
            if not call.auth.pending:
                self._calls.pop(call.auth.call_id, None)
        if ctx not in self._swept:
            # Once per run: asks of this principal left by an earlier process.
            self._swept.add(ctx)
            await self._sweep_store(ctx)

    async def _sweep_store(self, ctx: RunContextWrapper[Any]) -> None:
        principal = str(self.session.principal)
        for ask in self.session.harness.pending_asks():
            tool = self.session.tools.get(ask.tool)
            if ask.principal != principal or tool is None or ask.call_id in self._calls:
                continue
            names = {tool.model_alias, tool.name}
            if any(ctx.is_tool_approved(name, ask.call_id) is False for name in names):
                decision = PermissionDecision("deny", decided_by=self.approver, via=VIA)
                try:
                    await self.session.harness.answer_ask(
                        ask.ask_id, decision, by=self.approver, via=VIA
                    )
                except AskError:
                    pass

    def pending_ask(self, item: ToolApprovalItem) -> StoredAsk | None:
        """The clearance ask behind an interruption (its reason, the canonical arguments
        and facts, the grant scopes it offers, and its ``status``: ``answered`` once it
        was answered elsewhere, ``clearance asks approve``), to show the person; None
        when the interruption is not clearance's (the SDK tool's own ``needs_approval``)
        or its ask was applied already."""
        call_id = _call_id(item)
        harness = self.session.harness
        call = self._calls.get(call_id)
        if call is not None and call.auth.ask_id is not None:
            return harness.ask_store.get(call.auth.ask_id)
        principal = str(self.session.principal)
        for ask in harness.pending_asks():
            if ask.call_id == call_id and ask.principal == principal:
                return ask
        # Answered meanwhile, not yet applied (this guard did not ask: a restored run).
        oldest = time.time() - harness.pending_ask_ttl
        for ask in harness.ask_store.answered():
            if (
                ask.call_id == call_id
                and ask.principal == principal
                and ask.tool in self.session.tools
                and ask.created_at >= oldest
            ):
                return ask
        return None

    async def answer(
        self,
        state: RunState[Any, Any],
        item: ToolApprovalItem,
        decision: Answer | PermissionDecision,
        *,
        scope: GrantScope | None = None,
        by: str | None = None,
        message: str | None = None,
    ) -> None:
        """Answer an interruption with any clearance answer, then approve or reject it in
        the SDK for this call only (never an SDK ``always_approve``: later calls come back
        to clearance, whose grants decide them).

        Args:
            state: the paused run's state (``result.to_state()``).
            item: one of ``result.interruptions``.
            decision: ``allow_once``, ``allow_session``, ``allow_always``, ``deny``, or a
                ``PermissionDecision``.
            scope: for ``allow_session``/``allow_always``: one of the ask's
                ``suggestions`` (``guard.pending_ask(item).suggestions``; default: the
                exact call).
            by: who answered (default: the guard's ``approver``).
            message: for the record; with ``deny``, also what the model is told.

        Raises:
            AskError: the decision is not one of the four answers, or the scope is not one
                of the ask's suggestions or goes with an answer that creates no grant.
                Nothing is answered then.
        """
        if isinstance(decision, PermissionDecision):
            answer = decision
        elif isinstance(decision, str) and decision in ANSWERS:
            answer = PermissionDecision(decision, scope=scope, message=message)
        else:
            raise AskError(f"an answer is one of {', '.join(ANSWERS)}, not {decision!r}")
        ask = self.pending_ask(item)
        if answer.scope is not None:
            if answer.decision not in ("allow_session", "allow_always"):
                raise AskError(
                    f"a scope goes with allow_session or allow_always, not {answer.decision}"
                )
            if ask is None or answer.scope not in ask.suggestions:
                raise AskError(
                    "the scope is not one of the ask's suggestions "
                    "(guard.pending_ask(item).suggestions)"
                )
        who = by or answer.decided_by or self.approver
        if ask is not None and ask.status == "pending":
            await self.session.harness.answer_ask(ask.ask_id, answer, by=who, via=VIA)
        if answer.decision == "deny":
            state.reject(item, rejection_message=answer.message)
        else:
            state.approve(item)


# -- what the SDK keeps to itself --------------------------------------------------------------
# The SDK has no public way to say these; each is read in one place, and fails loudly, naming
# the SDK's version, when what it reads changes (tests/integrations/test_openai_agents.py
# checks each against the installed SDK).


def _untyped(tool: FunctionTool) -> None:
    """Make a copied SDK tool's output untyped: the model gets clearance's outcome text,
    which the tool's output type (``FunctionTool._output_type_adapter``, which the SDK uses
    to validate and serialize an output) would refuse.

    Raises:
        RuntimeError: this SDK version's FunctionTool has no such field.
    """
    if "_output_type_adapter" not in {f.name for f in dataclasses.fields(tool)}:
        raise RuntimeError(
            f"openai-agents {agents.__version__}: FunctionTool has no _output_type_adapter; "
            "clearance cannot untype a wrapped tool's output (its outcome text would be "
            "checked against the tool's output type)"
        )
    tool.output_json_schema = None
    tool._output_type_adapter = None


_HANDLED = getattr(agents.tool, "_DEFAULT_FAILURE_HANDLED_ATTR", None)


def _failed_in_sdk(ctx: ToolContext[Any]) -> bool:
    """Whether the SDK's default error handler turned an exception of the tool into its
    output (``@function_tool`` does, unless given ``failure_error_function=None``): the
    SDK marks the tool's context so (``agents.tool._DEFAULT_FAILURE_HANDLED_ATTR``).

    Raises:
        RuntimeError: this SDK version has no such mark.
    """
    if not isinstance(_HANDLED, str):
        raise RuntimeError(
            f"openai-agents {agents.__version__}: the SDK no longer marks a tool failure it "
            "turned into text (_DEFAULT_FAILURE_HANDLED_ATTR); clearance cannot record it"
        )
    return getattr(ctx, _HANDLED, False) is True


def _approved_as_a_whole(ctx: RunContextWrapper[Any], sdk_name: str) -> bool:
    """Whether the SDK approves every call of the tool (``always_approve``): asked about a
    call id nobody used, ``is_tool_approved`` answers for the tool, not for a call."""
    return ctx.is_tool_approved(sdk_name, "clearance-probe-" + secrets.token_hex(8)) is True


def _sdk_approval(state: RunState[Any, Any], item: ToolApprovalItem) -> bool | None:
    """The SDK's own decision on an interruption: True, False, or None (none yet).

    ``RunState`` keeps its run context (where ``approve``/``reject`` write) private; this
    is the one place that reads it, and it fails loudly, naming the SDK's version, when
    that changes.

    Raises:
        RuntimeError: this SDK version keeps no readable approvals in a ``RunState``.
    """
    context = getattr(state, "_context", None)
    check = getattr(context, "is_tool_approved", None)
    if context is None:
        return None  # a state without a context holds no approvals
    if not callable(check):
        raise RuntimeError(
            f"openai-agents {agents.__version__}: a RunState's approvals cannot be read "
            "(RunState._context.is_tool_approved is gone); clearance cannot tell whether an "
            "interruption was answered in the SDK"
        )
    return cast("bool | None", check(item.tool_name or item.name or "", _call_id(item)))


def _call_id(item: ToolApprovalItem) -> str:
    call_id = item.call_id
    if not isinstance(call_id, str) or not call_id:
        raise AskError(f"the interruption {item!r} has no call id")
    return call_id


def _parse(raw: str) -> Any:
    """The model's arguments as JSON, or the raw text (which the pipeline refuses)."""
    try:
        return json.loads(raw)
    except (TypeError, ValueError):
        return raw


async def _run_sdk_tool(
    tool: FunctionTool, ctx: ToolContext[Any], arguments: dict[str, Any]
) -> Any:
    """Run an SDK tool with the authorized arguments: its input and its context's record of
    the call both carry them, never the model's spelling."""
    raw = json.dumps(arguments, ensure_ascii=False)
    tool_call = ctx.tool_call.model_copy(update={"arguments": raw}) if ctx.tool_call else None
    tool_ctx = ToolContext.from_agent_context(
        ctx,
        ctx.tool_call_id,
        tool_call=tool_call,
        agent=ctx.agent,
        tool_name=ctx.tool_name,
        tool_arguments=raw,
        tool_namespace=ctx.tool_namespace,
        run_config=ctx.run_config,
    )
    output = await tool.on_invoke_tool(tool_ctx, raw)
    if _failed_in_sdk(tool_ctx):
        # The tool raised and the SDK's default error handler made the exception a text
        # for the model: a failure, recorded as one (the text, which may carry what the
        # exception said, goes to diagnostics, not to the model).
        raise _SdkToolFailure(str(output))
    return _as_result(output)


class _SdkToolFailure(RuntimeError):
    """An SDK tool raised; its message is the text the SDK's error handler made of it."""


def _as_result(output: Any) -> Any:
    """An SDK tool's output as a clearance result: text stays text, SDK output models
    become their JSON, anything else its ``str()`` (as the SDK itself does)."""
    if isinstance(output, ToolOutputText):
        return output.text
    if output is None or isinstance(output, str | int | float | bool | dict):
        return output
    if isinstance(output, pydantic.BaseModel):
        return output.model_dump(mode="json", exclude_none=True)
    if isinstance(output, list | tuple):
        return [_as_result(part) for part in output]
    return str(output)


def _message(item: Any) -> tuple[str | None, str]:
    """The role and text of an input item (``(None, "")`` for an item that is not a
    message)."""
    if not isinstance(item, Mapping):
        return None, ""
    role = item.get("role")
    content = item.get("content")
    if isinstance(content, str):
        return role, content
    if isinstance(content, list):
        return role, "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and part.get("type") in ("input_text", "text")
        )
    return role, ""


def _replayed(items: Any) -> list[tuple[str, str]]:
    """The user-role messages of a turn's input items, as ``record_replayed`` takes them."""
    if isinstance(items, str):
        return [(items, f"input:{hash(items)}")]
    found: list[tuple[str, str]] = []
    for index, item in enumerate(items or ()):
        role, text = _message(item)
        if role == "user":
            found.append((text, f"{index}:{hash(text)}"))
    return found
