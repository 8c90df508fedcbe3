"""PydanticAI: every tool call of an agent goes through a clearance session.

::

    from pydantic_ai import Agent, DeferredToolRequests
    from clearance.integrations.pydantic_ai import ClearanceToolset, deferred_results, register_toolset

    tools = register_toolset(registry, "files", [read_file, send_mail], root=workspace,
                             facts={"read_file": {"/path": "path"}})
    async with Harness(registry, evaluator=evaluator) as harness:
        session = await harness.create_session(principal=Principal("User", "alice"))
        toolset = ClearanceToolset(tools, session=session)
        agent = Agent(model, toolsets=[toolset], output_type=[str, DeferredToolRequests])
        result = await toolset.run(agent, "...")          # the prompt is the user's (R14)
        while isinstance(result.output, DeferredToolRequests):   # asks nobody here answered
            answers = {call.tool_call_id: "allow_session" for call in result.output.approvals}
            result = await agent.run(message_history=result.all_messages(),
                                     deferred_tool_results=deferred_results(result.output, answers, by="alice"))

Only the host's prompt is the user's (rule R14): :meth:`ClearanceToolset.run` records it
with ``session.add_user_message``, then runs the agent. The toolset reads no user from the
run's messages: a delegated agent's prompt (``await other.run(task)`` inside a tool) is
written by a model, so a user prompt the host did not give is recorded as a tool's
(``tool:agent-input``), never as hers; system prompts are not read (the host gives its
instructions through the session).

:class:`ClearanceToolset` wraps the toolset the agent would use. Each call is authorized
(``session.authorize``: schema, canonical facts, guardrails, evaluator, grants, asks):

- allowed: the tool runs once, with the *canonical* arguments (a path fact's resolved path,
  not what the model wrote), inside ``session.execution``: the journal records its start and
  end, and result guardrails decide what the model sees;
- denied: the tool does not run; the model sees the denial (a ``ToolDenied`` return); so
  too when the authorization no longer holds as the tool comes to run (its grant revoked
  meanwhile, or expired: rule R12);
- asked, and the session has an ``on_permission_ask`` callback or a ``permission_asks()``
  listener: they answer, in-process;
- asked, and nobody here can answer: the call becomes a PydanticAI deferred call that needs
  approval (``ApprovalRequired``). The run ends with ``DeferredToolRequests``; its
  ``metadata[tool_call_id]["clearance"]`` shows the ask (reason, masked arguments, facts,
  grant ``suggestions``). The ask waits in the harness's ask store, so it may be answered in
  another process or after a restart too (``clearance asks approve``).

The host answers in ``DeferredToolResults``: :func:`deferred_results` turns answers
(``True``/``False``, ``"allow_once"``/``"allow_session"``/``"allow_always"``/``"deny"``, or
``{"decision": ..., "scope": i, "by": ..., "message": ...}``) into results that carry the
answer back to this toolset, which gives it to the ask (journaled with ``via="pydantic-ai"``
and who answered) and then decides the call again with the same call id. A plain
``approvals={id: True}`` is taken as ``allow_once`` too (with ``metadata={id: {"clearance":
answer}}`` as that answer); a plain ``False``/``ToolDenied`` never reaches the toolset
(PydanticAI answers it itself), so the call does not run but its ask stays open: use
:func:`deferred_results` to have the denial recorded. An ask answered outside PydanticAI
(``clearance asks approve``, the inbox) resumes with :func:`resume_results`, which answers
nothing: the toolset applies the answer the ask store holds, once.

Not covered: a tool that defers *itself* (raises ``ApprovalRequired``/``CallDeferred`` from
its body) ends its clearance run there, and its approved retry is refused as a reused call id
(it never runs twice). ``requires_approval=True`` tools work: PydanticAI asks for them before
the toolset is called, and clearance decides the approved call as any other. A
``ToolReturn``'s extra ``content`` (a separate user message) is dropped: only the guarded
``return_value`` reaches the model.
"""

from __future__ import annotations

from clearance.integrations._extras import framework_import_error

try:
    import pydantic_ai  # noqa: F401  (the optional extra: checked before anything uses it)
except ImportError as exc:
    raise framework_import_error(exc, "pydantic-ai") from exc

import os
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

try:
    from pydantic_ai import Agent, AgentRunResult, RunContext
    from pydantic_ai.exceptions import ApprovalRequired, ModelRetry
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ToolReturn,
        UserPromptPart,
    )
    from pydantic_ai.tools import (
        AgentDepsT,
        DeferredToolRequests,
        DeferredToolResults,
        Tool,
        ToolApproved,
        ToolDenied,
    )
    from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, WrapperToolset
    from pydantic_ai.toolsets.abstract import ToolsetTool
    from pydantic_core import to_jsonable_python
except ImportError as exc:
    raise framework_import_error(exc, "pydantic-ai") from exc

from clearance.errors import AskError, StaleAuthorizationError
from clearance.harness.outcomes import Authorization
from clearance.harness.session import Session
from clearance.harness.tools import ToolRegistry
from clearance.integrations._host import (
    DeclaredTools,
    ToolSpec,
    answer_ask,
    ask_payload,
    declare_tools,
    framework_names,
    model_value,
    open_ask_id,
    parse_answer,
    qualified_name,
    record_replayed,
)

__all__ = ["VIA", "ClearanceToolset", "deferred_results", "register_toolset", "resume_results"]

VIA = "pydantic-ai"
"""How the journal names answers given through PydanticAI's deferred tool results."""

_KEY = "clearance"
_FROM_STORE = "answered_in_store"


def register_toolset(
    registry: ToolRegistry,
    namespace: str,
    tools: FunctionToolset[Any] | Sequence[Tool[Any] | Any],
    *,
    names: Mapping[str, str] | None = None,
    root: str | os.PathLike[str] | None = None,
    facts: Mapping[str, Mapping[str, Any]] | None = None,
    read_only: Collection[str] = (),
    sensitive: Mapping[str, Sequence[str]] | None = None,
    annotations: Mapping[str, Mapping[str, Any]] | None = None,
) -> DeclaredTools[FunctionToolset[Any]]:
    """Declare PydanticAI function tools in a clearance registry, under ``namespace``.

    Each tool is declared with its PydanticAI name, description and parameters' JSON
    Schema. The options are keyed by the PydanticAI tool name: ``facts`` (how arguments
    are interpreted: ``{"read_file": {"/path": "path"}}``, resolved against ``root``),
    ``read_only``, ``sensitive`` (JSON pointers withheld from the journal and asks),
    ``annotations``, and ``names`` for a tool whose name is not ``[a-z0-9_-]``.

    Returns:
        The toolset (``tools`` itself, or a ``FunctionToolset`` of the tools given) with
        each tool's PydanticAI name -> clearance qualified name: give it to
        :class:`ClearanceToolset` in place of the toolset (``ClearanceToolset(declared,
        session=session)``), so that each tool is listed once.

    Raises:
        ToolRegistrationError: a bad option, or the registry refused a declaration.
        TypeError: ``tools`` is neither a ``FunctionToolset`` nor a sequence of tools.
    """
    if isinstance(tools, FunctionToolset):
        toolset = tools
    elif isinstance(tools, Sequence) and not isinstance(tools, str):
        toolset = FunctionToolset(list(tools))
    else:
        raise TypeError("tools must be a FunctionToolset or a sequence of tools or functions")
    specs = [
        ToolSpec(
            tool.name,
            tool.tool_def.description or "",
            dict(tool.tool_def.parameters_json_schema),
        )
        for tool in toolset.tools.values()
    ]
    mapping = declare_tools(
        registry,
        namespace,
        specs,
        framework="pydantic-ai",
        names=names,
        root=root,
        facts=facts,
        read_only=read_only,
        sensitive=sensitive,
        annotations=annotations,
    )
    return DeclaredTools(toolset, mapping)


@dataclass(init=False)
class ClearanceToolset(WrapperToolset[AgentDepsT]):
    """A toolset whose every call goes through a clearance session (see the module
    docstring).

    Args:
        wrapped: what :func:`register_toolset` returned (the toolset it declared, with its
            names), or the toolset the agent would use otherwise.
        session: the clearance session the calls belong to (its principal, grants, asks).
        namespace: for a toolset given as it is: the clearance namespace its tools were
            declared under: the tool ``read_file`` is ``namespace.read_file``.
        names: for a toolset given as it is: PydanticAI name -> clearance qualified name,
            for tools declared under other names.
        by: who answers asks through this agent's deferred results, when an answer does
            not say (recorded in the journal).

    Raises:
        TypeError: ``namespace`` or ``names`` beside a ``DeclaredTools``.
    """

    session: Session = field(kw_only=True)
    namespace: str | None = field(default=None, kw_only=True)
    names: Mapping[str, str] = field(default_factory=dict, kw_only=True)
    by: str | None = field(default=None, kw_only=True)
    _seen: set[str] = field(default_factory=set, init=False, repr=False)
    """The keys of the run's user prompts already recorded in the session's provenance
    as a tool's (rule R14)."""

    def __init__(
        self,
        wrapped: DeclaredTools[FunctionToolset[Any]] | AbstractToolset[AgentDepsT],
        *,
        session: Session,
        namespace: str | None = None,
        names: Mapping[str, str] | None = None,
        by: str | None = None,
    ) -> None:
        # Written out (not the dataclass's): a DeclaredTools names the toolset and its
        # clearance names at once. ``dataclasses.replace`` (PydanticAI's
        # ``visit_and_replace``) calls it with the fields as keywords.
        toolset, self.namespace, self.names = framework_names(
            wrapped, namespace, names, wrapper="ClearanceToolset"
        )
        self.wrapped = toolset
        self.session = session
        self.by = by
        self._seen = set()

    async def run(
        self,
        agent: Agent[AgentDepsT, Any],
        user_prompt: str | Sequence[Any] | None = None,
        **options: Any,
    ) -> AgentRunResult[Any]:
        """``agent.run(user_prompt, **options)``, with ``user_prompt`` recorded as the
        user's own words first (``session.add_user_message``; the text parts of a
        sequence). Only the host's prompt is the user's (rule R14): a prompt PydanticAI
        shows the tools later (a delegated agent's, written by a model) is not."""
        self._user_prompt(user_prompt)
        return await agent.run(user_prompt, **options)

    def run_sync(
        self,
        agent: Agent[AgentDepsT, Any],
        user_prompt: str | Sequence[Any] | None = None,
        **options: Any,
    ) -> AgentRunResult[Any]:
        """:meth:`run` from synchronous code: ``agent.run_sync(user_prompt, **options)``,
        with ``user_prompt`` recorded as the user's first. The harness is opened with
        :class:`~clearance.integrations.BlockingHarness`, on the loop ``agent.run_sync``
        runs on."""
        self._user_prompt(user_prompt)
        return agent.run_sync(user_prompt, **options)

    def _user_prompt(self, user_prompt: str | Sequence[Any] | None) -> None:
        if isinstance(user_prompt, str):
            self.session.add_user_message(user_prompt)
        elif user_prompt is not None:
            for part in user_prompt:
                if isinstance(part, str) and part:
                    self.session.add_user_message(part)

    async def call_tool(
        self,
        name: str,
        tool_args: dict[str, Any],
        ctx: RunContext[AgentDepsT],
        tool: ToolsetTool[AgentDepsT],
    ) -> Any:
        call_id = ctx.tool_call_id
        if not call_id:
            raise RuntimeError(f"PydanticAI called {name!r} without a tool call id")
        # The run's user prompts count as a tool's (rule R14): a delegated agent's prompt
        # was written by a model. The user's own enter through ``run``.
        record_replayed(self.session, self._seen, _replayed(ctx.messages))
        clearance_name = qualified_name(name, namespace=self.namespace, names=self.names)
        auth = await self._authorize(clearance_name, tool_args, ctx, call_id)
        if auth.pending:
            assert auth.ask_id is not None
            raise ApprovalRequired(
                metadata={
                    _KEY: ask_payload(
                        self.session.harness, auth.ask_id, call_id=call_id, tool=clearance_name
                    )
                }
            )
        if not auth.allowed:
            return ToolDenied(auth.message or "the call was denied")
        assert auth.arguments is not None
        # What runs is what was authorized (R6, R11): the canonical arguments, typed again
        # by the tool's own validator.
        arguments = tool.args_validator.validate_python(
            auth.arguments, context=ctx.validation_context
        )
        retry = False
        try:
            async with self.session.execution(call_id) as run:
                try:
                    result = await super().call_tool(name, arguments, ctx, tool)
                except ModelRetry as exc:
                    # The retry message is the tool's output too: result guardrails see it.
                    retry = True
                    run.result(exc.message, status="error")
                else:
                    if isinstance(result, ToolReturn):
                        result = result.return_value
                    run.result(to_jsonable_python(result))
        except StaleAuthorizationError as exc:
            # Checked again as it comes to run (rule R12): expired, or its grant revoked.
            return ToolDenied(exc.message)
        outcome = run.outcome
        assert outcome is not None
        if retry:
            raise ModelRetry(outcome.text)
        return model_value(outcome)

    async def _authorize(
        self,
        name: str,
        tool_args: dict[str, Any],
        ctx: RunContext[AgentDepsT],
        call_id: str,
    ) -> Authorization:
        """Authorize the call; a host approval of this call's open ask answers it first."""
        arguments = to_jsonable_python(tool_args)
        turn_id = getattr(ctx, "run_id", None)
        metadata = ctx.tool_call_metadata
        carried = metadata.get(_KEY) if isinstance(metadata, Mapping) else None
        if isinstance(carried, Mapping) and carried.get(_FROM_STORE) is True:
            # resume_results: the answer is the one in the ask store (the CLI, an inbox);
            # the host's approval here only resumes the run and answers nothing.
            return await self.session.authorize(name, arguments, call_id=call_id, turn_id=turn_id)
        asked = open_ask_id(self.session, name, call_id) if ctx.tool_call_approved else None
        auth = await self.session.authorize(name, arguments, call_id=call_id, turn_id=turn_id)
        if auth.pending and asked is not None and auth.ask_id == asked:
            # The host approved this very ask (same call id and arguments) through
            # PydanticAI: that is the answer, with the one its metadata carries, if any.
            answer = parse_answer(carried if carried is not None else True, by=self.by)
            await answer_ask(self.session.harness, asked, answer, via=VIA)
            auth = await self.session.authorize(name, arguments, call_id=call_id, turn_id=turn_id)
        return auth


def resume_results(
    requests: DeferredToolRequests,
    others: Mapping[str, bool | ToolApproved | ToolDenied] | None = None,
) -> DeferredToolResults:
    """The ``DeferredToolResults`` that resume a run whose clearance asks are answered
    outside PydanticAI (``clearance asks approve``/``deny`` in another process, the inbox,
    ``harness.answer_ask``): each clearance call is handed back to
    :class:`ClearanceToolset`, which decides it again and applies the answer the ask store
    holds, once. They answer nothing themselves: a call whose ask is still open comes back
    deferred (the same ask), an allowed one runs, a denied one is shown its denial. A
    replayed resume (the same history and results again, after the call ran) finds no
    answer left: the call is deferred again and does not run twice.

    Args:
        requests: the ``DeferredToolRequests`` the paused run ended with.
        others: the answers of the deferred calls that are not clearance's (the tools'
            own ``requires_approval``).

    Raises:
        AskError: a deferred call that is not clearance's has no answer in ``others``,
            or ``others`` names a call that is not among the requests.
    """
    others = dict(others or {})
    pending = {call.tool_call_id for call in requests.approvals}
    unknown = sorted(set(others) - pending)
    if unknown:
        raise AskError(f"no approval is requested for tool call {unknown[0]!r}")
    approvals: dict[str, bool | ToolApproved | ToolDenied] = {}
    metadata: dict[str, dict[str, Any]] = {}
    for call_id in sorted(pending):
        if _KEY in (requests.metadata.get(call_id) or {}):
            approvals[call_id] = ToolApproved()
            metadata[call_id] = {_KEY: {_FROM_STORE: True}}
        elif call_id in others:
            approvals[call_id] = others[call_id]
        else:
            raise AskError(
                f"tool call {call_id!r} was not deferred by clearance: answer it in others"
            )
    return DeferredToolResults(approvals=approvals, metadata=metadata)


def deferred_results(
    requests: DeferredToolRequests,
    answers: Mapping[str, Any],
    *,
    by: str | None = None,
) -> DeferredToolResults:
    """The ``DeferredToolResults`` that answer ``requests``.

    ``answers`` maps a tool call id to its answer. For a call that clearance asked about
    (its ``requests.metadata`` has a ``"clearance"`` entry) the answer is ``True``,
    ``False``, ``"allow_once"``, ``"allow_session"``, ``"allow_always"``, ``"deny"``,
    ``ToolApproved()``/``ToolDenied(message)``, or ``{"decision": ..., "scope": i, "by":
    ..., "message": ...}`` (``scope`` indexes the ask's ``suggestions``); it travels back
    to :class:`ClearanceToolset`, which answers the ask and decides the call again (a
    denial is then recorded, and the model sees clearance's denial). Other deferred calls
    get their answers as given (``True``/``False``/``ToolApproved``/``ToolDenied``).

    Raises:
        AskError: an answer names a call that is not among the requests, an answer is not
            valid, a clearance call's ``ToolApproved`` has ``override_args``, or a call
            that needs approval has no answer.
    """
    approvals: dict[str, bool | ToolApproved | ToolDenied] = {}
    metadata: dict[str, dict[str, Any]] = {}
    pending = {call.tool_call_id for call in requests.approvals}
    unknown = sorted(set(answers) - pending)
    if unknown:
        raise AskError(f"no approval is requested for tool call {unknown[0]!r}")
    for call_id in sorted(pending):
        if call_id not in answers:
            raise AskError(f"tool call {call_id!r} needs an answer")
        value = answers[call_id]
        ours = _KEY in (requests.metadata.get(call_id) or {})
        if not ours:
            if not isinstance(value, bool | ToolApproved | ToolDenied):
                raise AskError(
                    f"tool call {call_id!r} was not deferred by clearance: answer it with "
                    "True, False, ToolApproved or ToolDenied"
                )
            approvals[call_id] = value
            continue
        if isinstance(value, ToolApproved):
            if value.override_args is not None:
                raise AskError(
                    f"tool call {call_id!r}: clearance asked about its arguments; approve "
                    "them as they are (override_args would be another call)"
                )
            value = True
        elif isinstance(value, ToolDenied):
            value = {"decision": "deny", "message": value.message}
        answer = parse_answer(value, by=by)
        # The answer rides back to the toolset on an approval: only there can the call be
        # decided again and its denial recorded. Nothing runs unless clearance allows it.
        approvals[call_id] = ToolApproved()
        metadata[call_id] = {
            _KEY: {
                "decision": answer.decision,
                "scope": answer.scope,
                "by": answer.by,
                "message": answer.message,
            }
        }
    return DeferredToolResults(approvals=approvals, metadata=metadata)


def _replayed(messages: Sequence[ModelMessage]) -> Iterator[tuple[str, str]]:
    """The user prompts of a run's messages, as ``record_replayed`` takes them: each text
    part of a prompt, as the host would have given it."""
    for index, message in enumerate(messages):
        if not isinstance(message, ModelRequest):
            continue
        for part_index, part in enumerate(message.parts):
            if not isinstance(part, UserPromptPart):
                continue
            content = part.content
            texts = (
                [content]
                if isinstance(content, str)
                else [c for c in content if isinstance(c, str)]
            )
            for text_index, text in enumerate(texts):
                yield text, f"{index}:{part_index}:{text_index}:{hash(text)}"
