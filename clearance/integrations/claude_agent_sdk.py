"""The Claude Agent SDK adapter: clearance decides every tool call Claude Code makes.

(Longer than the ~500 lines a module should hold, on purpose: about 90 of them are this
manual, and the rest is one concept, the adapter whose hooks decide and record each call;
the tool declarations live in :mod:`clearance.integrations.claude_code_tools`.)

``pip install 'clearance[claude-agent-sdk]'``. Importing this module without the SDK raises
:class:`~clearance.errors.MissingExtraError`.

::

    from claude_agent_sdk import query
    from clearance.integrations.claude_agent_sdk import ClaudeAgentAdapter
    from clearance.integrations.claude_code_tools import claude_code_tools

    registry.register("claude", claude_code_tools(workspace))
    async with Harness(registry, evaluator=CedarEvaluator.from_directory("policies")) as h:
        session = await h.create_session(principal=Principal("User", "alice"))
        adapter = ClaudeAgentAdapter(session, on_ask=ask_in_my_ui)
        async for message in query(prompt="...", options=adapter.options(cwd=workspace)):
            ...

**The tools.** Claude Code runs its built-in tools itself. They are declared to clearance
as the ``claude`` toolset (:mod:`clearance.integrations.claude_code_tools`): input schemas
and canonical facts (``Bash.command`` a command, ``Read``/``Write``/``Edit`` ``file_path`` a
path under the workspace, ``WebFetch.url`` a url...), so Cedar policies and local rules are
written for ``claude.bash``, ``claude.read``... Claude Code's names reach them through
:data:`~clearance.integrations.claude_code_tools.CLAUDE_CODE_NAMES`; ``names=`` adds more
(an MCP tool ``mcp__github__create_issue`` to a clearance tool ``github.create_issue`` you
declared). A tool with no clearance name is denied (the journal says: unknown tool).

**Where the decision is made: a ``PreToolUse`` hook on every tool.** The SDK's
``can_use_tool`` callback only runs when Claude Code would prompt: never for a tool its own
rules allow (``allowed_tools``, ``acceptEdits``, ``bypassPermissions``, reads inside the
working directory), never in ``dontAsk`` mode. A ``PreToolUse`` hook with no matcher runs
for every call, whatever the permission mode, so the hook is where
:meth:`ClaudeAgentAdapter.pre_tool_use` calls ``session.authorize`` (schema, facts,
guardrails, evaluator, grants, asks, the journal's ``call_decided``; the tool use id is the
call id) and answers:

- allowed: ``permissionDecision: "allow"`` with ``updatedInput``, the canonical arguments
  in Claude Code's field names (:func:`~clearance.integrations.claude_code_tools.to_claude_input`:
  absolute resolved paths, the command as one quoted argv run in the workspace), so that
  Claude Code runs exactly what was authorized. ``Read`` of ``./link/a.md`` with
  ``link -> docs`` runs as ``<workspace>/docs/a.md``. Claude Code's own deny and ask rules
  still apply after an allow (they can only refuse more);
- denied: ``permissionDecision: "deny"`` with the message clearance gives the model;
- asked: clearance's ask, answered before the hook returns, by ``on_ask=`` (installed as
  the session's ``on_permission_ask``: it gets the ask with Claude Code's tool name and
  tool use id; the journal's ``permission_decided`` names ``decided_by`` and
  ``via="claude-agent-sdk"``), or else the session's own callback or ``permission_asks()``
  stream. With nobody to answer, the call is denied with the ask's id in the message and
  the ask stays open (``harness.answer_ask``, ``clearance asks approve``). Claude Code
  gives the model's retry a new tool use id, so the ask is stored under the adapter's
  :attr:`~ClaudeAgentAdapter.resume_key` (Claude Code's session id) rather than the tool
  use id: the retry of the same tool with the same canonical arguments, in that Claude
  session, finds the answer (``allow_once`` runs it once; ``allow_session`` and
  ``allow_always`` make their grant, which covers later calls too). ``wait=True`` waits
  for an answer from anywhere instead of denying. An answer given elsewhere while
  ``on_ask`` still waits settles the call at once (``on_ask`` is cancelled). The hook's
  timeout is the harness's ``ask_timeout`` plus a margin.

The matchers are ``on_failure="block"``: a hook that fails or times out blocks the call.
:meth:`ClaudeAgentAdapter.can_use_tool` (also installed by :meth:`ClaudeAgentAdapter.options`)
answers the prompts Claude Code still makes (its own ask rules) from the hook's decision,
and authorizes a call itself when it is used alone.

**A ``can_use_tool`` of the host's own.** Options given to :meth:`ClaudeAgentAdapter.options`
may carry the host's own ``can_use_tool`` (an approval UI written for Claude Code): it keeps
working beside the adapter. clearance decides every call first; when clearance asks, that
callback is asked, with Claude Code's tool name, the input the model gave and a
``ToolPermissionContext`` (``tool_use_id``, ``agent_id``, ``decision_reason``: clearance's
reason), and its answer is the ask's answer (``PermissionResultAllow``: ``allow_once``,
journaled ``via="claude-agent-sdk"``; ``PermissionResultDeny``: ``deny`` with its message).
A call Claude Code itself prompts for (its own ask rules) that clearance allowed without
asking goes to the callback too, as it did before the adapter: both must allow it. An
allow that changes the input denies the call (clearance approves a call as it was asked).

**Results: a ``PostToolUse`` hook.** :meth:`ClaudeAgentAdapter.post_tool_use` reports the
tool's output with ``session.record_result`` (the journal's ``tool_started`` and
``tool_finished``, the result guardrails). When a result guardrail changed or withheld it,
the hook returns ``updatedToolOutput``, which Claude Code puts in place of the output
before the model sees it. Claude Code accepts a replacement for a built-in tool only when it
matches that tool's output schema, and keeps the original otherwise; so the adapter keeps
the original's shape: a redaction that left it (strings redacted in place, as
``SecretScanner(action="redact")`` does) is sent as is; anything else is a text put in that
shape (its first text field holds it, other texts are emptied, numbers zeroed, lists
emptied, variant tags such as ``type`` kept; ``Read`` gets a text result): for a value a
guardrail replaced, that value's text; for a block, ``[withheld by clearance: ...]``.
``PostToolUseFailure`` records the failure.
A call whose output arrives without an authorization, or with other input than the one
authorized, is recorded as failed (when it can be), its output withheld and the run stopped
(``continue: false``).

What it cannot do:

- The replacement is Claude Code's to apply: it was checked against the SDK's wire protocol
  here, not against Claude Code itself (the tests do not run it). Other ``PostToolUse``
  hooks that rewrite output run beside this one on the original output, and the last
  rewrite wins: leave redaction to clearance's result guardrails.
- What Claude Code keeps outside the conversation (its transcript files, output it saved to
  disk for a large result) is not covered.
- Bash runs one program per call (see :func:`~clearance.integrations.claude_code_tools.bash_line`):
  pipes and ``&&`` are passed as words. A background command's later output comes through
  ``TaskOutput``/``BashOutput``, which are tools of their own.
- A call Claude Code refuses after clearance allowed it (its own deny rule, an interrupt)
  has its ``call_decided`` and no start.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, cast

from clearance.integrations._extras import framework_import_error

try:
    import claude_agent_sdk
    from claude_agent_sdk import (
        CanUseTool,
        ClaudeAgentOptions,
        HookContext,
        HookInput,
        HookJSONOutput,
        HookMatcher,
        PermissionResult,
        PermissionResultAllow,
        PermissionResultDeny,
        PreToolUseHookSpecificOutput,
        ToolPermissionContext,
    )
except ImportError as exc:
    raise framework_import_error(
        exc, "claude-agent-sdk", feature="the Claude Agent SDK adapter"
    ) from exc

from clearance.harness.approvals import (
    Answer,
    PermissionAsk,
    PermissionDecision,
    coerce_decision,
)
from clearance.harness.outcomes import CallOutcome
from clearance.harness.tools import normalize_result
from clearance.integrations.claude_code_tools import (
    CLAUDE_CODE_NAMES,
    from_claude_input,
    to_claude_input,
)

if TYPE_CHECKING:
    from claude_agent_sdk.types import HookEvent

    from clearance.harness.session import Session

if "on_failure" not in getattr(HookMatcher, "__dataclass_fields__", {}):
    # Without it a hook that fails or times out counts as no decision, and Claude Code goes
    # on to run the call: the adapter would fail open.
    raise ImportError(
        "clearance.integrations.claude_agent_sdk needs a claude-agent-sdk whose HookMatcher "
        f"has on_failure (so that a failing hook blocks the call); "
        f"{claude_agent_sdk.__version__} is installed: pip install -U claude-agent-sdk"
    )

__all__ = ["VIA", "ClaudeAgentAdapter", "ClaudeAsk", "ClaudeAskCallback"]

log = logging.getLogger("clearance")

VIA = "claude-agent-sdk"
"""How the journal names answers given through this adapter's ``on_ask``."""

_HOOK_MARGIN = 30.0
"""Seconds a hook gets beyond the harness's ``ask_timeout`` (for the journal and guardrails)."""


@dataclass(frozen=True, slots=True)
class ClaudeAsk:
    """An ask about one of Claude's tool calls, handed to the adapter's ``on_ask``."""

    ask: PermissionAsk
    """Clearance's ask: the tool's qualified name, the canonical arguments (withheld values
    masked), the reason, the policies that asked and the grant scopes an answer may take."""
    tool_name: str
    """Claude Code's name for the tool (``"Bash"``)."""
    tool_use_id: str
    agent_id: str | None = None
    """The subagent making the call (None on the main thread)."""


ClaudeAskCallback = Callable[
    [ClaudeAsk], "Answer | PermissionDecision | Awaitable[Answer | PermissionDecision]"
]
"""``on_ask``: returns ``allow_once``, ``allow_session``, ``allow_always``, ``deny`` or a
``PermissionDecision`` (with ``decided_by``: who answered), sync or async."""


@dataclass(frozen=True, slots=True)
class _Verdict:
    allowed: bool
    message: str = ""
    sdk_input: dict[str, Any] | None = None


@dataclass(slots=True)
class _Running:
    """A call the adapter allowed whose output has not come back yet."""

    sdk_name: str
    original: dict[str, Any]
    """What the model asked for."""
    sdk_input: dict[str, Any]
    """What Claude Code was told to run."""
    checks: int = 0
    """Further checks made while it runs (``WebFetch`` checks each redirect as a call)."""


class ClaudeAgentAdapter:
    """Clearance in front of the Claude Agent SDK's tools, for one session.

    Args:
        session: the clearance session every call is authorized and recorded in.
        names: more Claude Code tool names to clearance qualified names, over
            :data:`~clearance.integrations.claude_code_tools.CLAUDE_CODE_NAMES`.
        on_ask: answers clearance's asks (see :class:`ClaudeAsk`), as the session's
            ``on_permission_ask``; the answers are journaled with
            ``via="claude-agent-sdk"``. Without it (and without a ``can_use_tool`` of the
            host's own given to :meth:`options`) the session's own callback or ask stream
            answers.
        wait: passed to ``session.authorize``: with nobody here to answer, ``True`` waits
            for an answer from anywhere (``clearance asks approve``...) up to the harness's
            ``ask_timeout``; otherwise the call is denied and its ask stays open.
        hook_timeout: seconds Claude Code waits for a hook (default: ``ask_timeout`` plus 30).

    Raises:
        ValueError: ``names`` maps to a tool the session does not have, or ``on_ask`` is
            given for a session that has an ``on_permission_ask`` already.
    """

    def __init__(
        self,
        session: Session,
        *,
        names: Mapping[str, str] | None = None,
        on_ask: ClaudeAskCallback | None = None,
        wait: bool | None = None,
        hook_timeout: float | None = None,
    ) -> None:
        extra = dict(names or {})
        missing = [f"{k} -> {v}" for k, v in extra.items() if v not in session.tools]
        if missing:
            raise ValueError(f"names map to tools the session does not have: {missing}")
        if on_ask is not None and session.on_permission_ask is not None:
            raise ValueError(
                "the session already has an on_permission_ask callback: pass on_ask to one of them"
            )
        self.session = session
        self.names: dict[str, str] = {**CLAUDE_CODE_NAMES, **extra}
        self.on_ask = on_ask
        self.wait = wait
        self._asking: dict[str, tuple[str, str | None, Any]] = {}
        """Claude Code's tool name, the subagent and the input the model gave, by call id,
        while a call is decided."""
        self._host_can_use_tool: CanUseTool | None = None
        """The host's own ``can_use_tool`` (given to :meth:`options`): it answers asks."""
        self._host_answered: set[str] = set()
        """The tool use ids whose ask the host's ``can_use_tool`` allowed (not asked again
        when Claude Code prompts for the call)."""
        if on_ask is not None:
            session.on_permission_ask = self._answer
        self.hook_timeout = (
            hook_timeout if hook_timeout is not None else session.harness.ask_timeout + _HOOK_MARGIN
        )
        self._running: dict[str, _Running] = {}
        self._claude_session: str | None = None
        """Claude Code's session id, from the hooks (what a stored answer is found by)."""

    # -- wiring ---------------------------------------------------------------------------

    def hooks(self) -> dict[HookEvent, list[HookMatcher]]:
        """The hook matchers to put first in ``ClaudeAgentOptions.hooks``."""
        return {
            "PreToolUse": [
                HookMatcher(
                    hooks=[self.pre_tool_use], timeout=self.hook_timeout, on_failure="block"
                )
            ],
            "PostToolUse": [
                HookMatcher(
                    hooks=[self.post_tool_use], timeout=self.hook_timeout, on_failure="block"
                )
            ],
            "PostToolUseFailure": [
                HookMatcher(hooks=[self.post_tool_use_failure], timeout=self.hook_timeout)
            ],
            "UserPromptSubmit": [
                HookMatcher(hooks=[self.user_prompt_submit], timeout=self.hook_timeout)
            ],
        }

    def options(self, base: ClaudeAgentOptions | None = None, **fields: Any) -> ClaudeAgentOptions:
        """``ClaudeAgentOptions`` (``base`` with ``fields`` set) with this adapter's hooks first
        and its ``can_use_tool``.

        A ``can_use_tool`` the options already have is the host's own: clearance decides
        first, and that callback answers clearance's asks and the prompts Claude Code makes
        for calls clearance allowed (see the module docstring).

        Raises:
            ValueError: the options have a ``can_use_tool`` and the adapter an ``on_ask``, or
                the session an ``on_permission_ask`` (one of them answers asks), or another
                adapter's ``can_use_tool``.
        """
        options = replace(base, **fields) if base is not None else ClaudeAgentOptions(**fields)
        own = options.can_use_tool
        if own is not None and own != self.can_use_tool:
            if getattr(own, "__self__", None).__class__ is ClaudeAgentAdapter:
                raise ValueError("the options have another ClaudeAgentAdapter's can_use_tool")
            if self.on_ask is not None or (
                self.session.on_permission_ask is not None
                and self.session.on_permission_ask != self._answer
            ):
                raise ValueError(
                    "the options' can_use_tool would answer clearance's asks, and so would "
                    "the adapter's on_ask or the session's on_permission_ask: give one of them"
                )
            self._host_can_use_tool = own
            self.session.on_permission_ask = self._answer
        hooks: dict[HookEvent, list[HookMatcher]] = dict(options.hooks or {})
        for event, matchers in self.hooks().items():
            hooks[event] = [*matchers, *hooks.get(event, [])]
        return replace(options, can_use_tool=self.can_use_tool, hooks=hooks)

    # -- the SDK's callbacks --------------------------------------------------------------

    async def user_prompt_submit(
        self, hook_input: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        """The ``UserPromptSubmit`` hook: the user's prompt enters the session's provenance
        (its values are the user's: ``context.provenance``)."""
        data = cast(Mapping[str, Any], hook_input)
        prompt = data.get("prompt")
        if data.get("hook_event_name") == "UserPromptSubmit" and isinstance(prompt, str):
            self.session.add_user_message(prompt)
        return {}

    async def pre_tool_use(
        self, hook_input: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        """The ``PreToolUse`` hook: authorize the call, allow it with the canonical input or
        deny it with clearance's message."""
        data = cast(Mapping[str, Any], hook_input)
        if data.get("hook_event_name") != "PreToolUse":
            return {}
        claude_session = data.get("session_id")
        if isinstance(claude_session, str) and claude_session:
            self._claude_session = claude_session
        verdict = await self._check(
            str(data.get("tool_name", "")),
            data.get("tool_input"),
            str(data.get("tool_use_id") or tool_use_id or ""),
            turn_id=data.get("prompt_id"),
            agent_id=data.get("agent_id"),
        )
        if verdict.allowed:
            allow: PreToolUseHookSpecificOutput = {
                "hookEventName": "PreToolUse",
                "permissionDecision": "allow",
                "permissionDecisionReason": "allowed by clearance",
            }
            if verdict.sdk_input is not None:
                allow["updatedInput"] = verdict.sdk_input
            return {"hookSpecificOutput": allow}
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": verdict.message,
            }
        }

    async def can_use_tool(
        self, tool_name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResult:
        """``can_use_tool``: Claude Code asks about a call. One the hook allowed is allowed
        with the input it authorized (another input for it is denied); any other call is
        authorized here."""
        tool_use_id = context.tool_use_id or ""
        running = self._running.get(tool_use_id) if tool_use_id else None
        if running is not None:
            if running.sdk_name == tool_name and tool_input in (
                running.sdk_input,
                running.original,
            ):
                return await self._host_also_allows(tool_name, running, context)
            return PermissionResultDeny(
                message="clearance: this call's input changed after it was authorized"
            )
        verdict = await self._check(
            tool_name, tool_input, tool_use_id, turn_id=None, agent_id=context.agent_id
        )
        if verdict.allowed and verdict.sdk_input is not None:
            return PermissionResultAllow(updated_input=verdict.sdk_input)
        return PermissionResultDeny(message=verdict.message or "denied by clearance")

    async def _host_also_allows(
        self, tool_name: str, running: _Running, context: ToolPermissionContext
    ) -> PermissionResult:
        """Claude Code prompts for a call clearance allowed: allowed with the input
        clearance authorized, unless the host's own ``can_use_tool`` (not yet asked about
        this call) refuses it, or allows other input."""
        allow = PermissionResultAllow(updated_input=dict(running.sdk_input))
        tool_use_id = context.tool_use_id or ""
        if self._host_can_use_tool is None or tool_use_id in self._host_answered:
            return allow
        result = await self._host_can_use_tool(tool_name, dict(running.sdk_input), context)
        if isinstance(result, PermissionResultDeny):
            return result
        if not isinstance(result, PermissionResultAllow):
            return PermissionResultDeny(message="clearance: can_use_tool gave no answer")
        if result.updated_input is not None and result.updated_input != running.sdk_input:
            return PermissionResultDeny(message=_CHANGED)
        return replace(allow, updated_permissions=result.updated_permissions)

    async def post_tool_use(
        self, hook_input: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        """The ``PostToolUse`` hook: record the output (result guardrails, journal) and, when
        the model may not see it as it is, replace it."""
        data = cast(Mapping[str, Any], hook_input)
        if data.get("hook_event_name") != "PostToolUse":
            return {}
        tid = str(data.get("tool_use_id") or tool_use_id or "")
        sdk_name = str(data.get("tool_name", ""))
        response = data.get("tool_response")
        running = self._running.pop(tid, None)
        if running is None:
            log.error("%s ran (tool use %r) without clearance's authorization", sdk_name, tid)
            return _withhold(sdk_name, response, "clearance did not authorize this call", stop=True)
        ran_with = data.get("tool_input")
        if ran_with is not None and ran_with not in (running.sdk_input, running.original):
            why = "the tool ran with other input than clearance authorized"
            log.error("%s (tool use %r): %s", sdk_name, tid, why)
            try:
                await self.session.record_result(tid, error=RuntimeError(why))
            except Exception as exc:
                log.error("recording %r failed: %r", tid, exc)
            return _withhold(sdk_name, response, why, stop=True)
        try:
            outcome = await self.session.record_result(tid, result=response)
        except Exception as exc:
            # The result guardrails did not run: the model may not see the output.
            log.error("recording the result of %r failed: %r", tid, exc)
            return _withhold(sdk_name, response, "the result could not be checked")
        return _model_output(sdk_name, response, outcome)

    async def post_tool_use_failure(
        self, hook_input: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        """The ``PostToolUseFailure`` hook: record the failure (or the interrupt)."""
        data = cast(Mapping[str, Any], hook_input)
        tid = str(data.get("tool_use_id") or tool_use_id or "")
        if self._running.pop(tid, None) is None:
            return {}
        try:
            if data.get("is_interrupt"):
                await self.session.record_result(tid, status="cancelled")
            else:
                await self.session.record_result(tid, error=str(data.get("error") or "failed"))
        except Exception as exc:
            log.error("recording the failure of %r failed: %r", tid, exc)
        return {}

    # -- deciding -------------------------------------------------------------------------

    async def _check(
        self,
        sdk_name: str,
        tool_input: Any,
        tool_use_id: str,
        *,
        turn_id: str | None,
        agent_id: str | None,
    ) -> _Verdict:
        """Authorize one call (never raises: a failure denies it, R1)."""
        try:
            return await self._authorize(
                sdk_name, tool_input, tool_use_id, turn_id=turn_id, agent_id=agent_id
            )
        except Exception as exc:
            log.exception("clearance could not authorize %s (tool use %r)", sdk_name, tool_use_id)
            return _Verdict(
                False, f"clearance could not authorize this call ({type(exc).__name__})"
            )

    async def _authorize(
        self,
        sdk_name: str,
        tool_input: Any,
        tool_use_id: str,
        *,
        turn_id: str | None,
        agent_id: str | None,
    ) -> _Verdict:
        running = self._running.get(tool_use_id) if tool_use_id else None
        call_id: str | None = tool_use_id or None
        if running is not None:
            if sdk_name != running.sdk_name:
                return _Verdict(False, f"clearance: tool use {tool_use_id} is another call")
            # The call is running and Claude Code checks a step of it (WebFetch asks about
            # each page it fetches with the fetch's tool use id and only the url): a call
            # of its own, with the running call's other arguments.
            running.checks += 1
            call_id = f"{tool_use_id}/{running.checks}"
            if isinstance(tool_input, dict):
                tool_input = {**running.original, **tool_input}
        name = self.names.get(sdk_name, sdk_name)  # an unknown name stays unknown: denied
        arguments = (
            from_claude_input(sdk_name, tool_input) if isinstance(tool_input, dict) else tool_input
        )
        if call_id is not None:
            self._asking[call_id] = (sdk_name, agent_id, tool_input)
        try:
            auth = await self.session.authorize(
                name,
                arguments,
                call_id=call_id,
                turn_id=turn_id,
                wait=self.wait,
                resume_key=self.resume_key,
            )
        finally:
            if call_id is not None:
                self._asking.pop(call_id, None)
        if not auth.allowed:
            return _Verdict(False, auth.message or "denied by clearance")
        assert auth.arguments is not None and auth.qualified_name is not None
        tool = self.session.tools[auth.qualified_name]
        sdk_input = to_claude_input(sdk_name, auth.arguments, root=tool.root)
        if running is not None:
            # WebFetch refuses a rewritten page check: the url it fetches is allowed as
            # given (its canonical form was checked).
            return _Verdict(True, sdk_input=None if sdk_name == "WebFetch" else sdk_input)
        self._running[auth.call_id] = _Running(
            sdk_name, dict(tool_input) if isinstance(tool_input, dict) else {}, sdk_input
        )
        return _Verdict(True, sdk_input=sdk_input)

    @property
    def resume_key(self) -> str:
        """What a stored ask of this adapter's calls is found again by, in place of the
        tool use id (which Claude Code makes anew for every retry): Claude Code's session
        id (clearance's session id before a hook gave it), with the principal, the tool
        and the canonical arguments. An answer given elsewhere to a call the hook denied
        as pending reaches the model's retry of that very call, once."""
        return f"{VIA}:{self._claude_session or 'clearance-' + self.session.id}"

    async def _answer(self, ask: PermissionAsk) -> PermissionDecision:
        """The session's ``on_permission_ask``: ``on_ask`` (or the host's ``can_use_tool``)
        answers, through this adapter. (A failure or a bad answer denies the call: the
        session's ask handling, R1.)"""
        sdk_name, agent_id, tool_input = self._asking.get(
            ask.call_id, (ask.qualified_name, None, None)
        )
        if self.on_ask is None:
            return await self._ask_host(ask, sdk_name, agent_id, tool_input)
        answer: Any = self.on_ask(ClaudeAsk(ask, sdk_name, ask.call_id, agent_id))
        if inspect.isawaitable(answer):
            answer = await answer
        decision = coerce_decision(answer)
        return replace(decision, via=decision.via or VIA)

    async def _ask_host(
        self, ask: PermissionAsk, sdk_name: str, agent_id: str | None, tool_input: Any
    ) -> PermissionDecision:
        """Clearance's ask, put to the host's own ``can_use_tool`` as Claude Code would put
        a prompt to it: its allow is ``allow_once``, its deny a ``deny`` with its message."""
        assert self._host_can_use_tool is not None
        context = ToolPermissionContext(suggestions=[], tool_use_id=ask.call_id, agent_id=agent_id)
        if hasattr(context, "decision_reason"):  # claude-agent-sdk 0.2.x: why it is asked
            context = replace(context, decision_reason=f"clearance asks: {ask.reason}")
        given = dict(tool_input) if isinstance(tool_input, Mapping) else {}
        result = await self._host_can_use_tool(sdk_name, given, context)
        if isinstance(result, PermissionResultDeny):
            return PermissionDecision("deny", message=result.message or None, via=VIA)
        if not isinstance(result, PermissionResultAllow):
            raise TypeError(f"can_use_tool returned {result!r}, not a PermissionResult")
        if result.updated_input is not None and result.updated_input != given:
            return PermissionDecision("deny", message=_CHANGED, via=VIA)
        self._host_answered.add(ask.call_id)
        return PermissionDecision("allow_once", via=VIA)


_CHANGED = (
    "clearance: can_use_tool allowed other input than the call asked about; clearance "
    "approves a call as it was asked"
)

# -- what the model sees ----------------------------------------------------------------

_KEEP = frozenset({"type", "mode", "status", "kind", "subtype"})
"""Keys whose text is a variant's tag, kept when a result is withheld (a replacement with
another tag would not match the tool's output schema and would be refused)."""


def _model_output(sdk_name: str, response: Any, outcome: CallOutcome) -> HookJSONOutput:
    """The hook output for a recorded result: nothing when the model may see it as it is,
    else ``updatedToolOutput`` in the tool's output shape."""
    try:
        before = normalize_result(response).to_json()
    except Exception:
        before = None
    if (
        outcome.status in ("ok", "error")
        and outcome.result is not None
        and outcome.result.to_json() == before
    ):
        return {}
    if isinstance(response, str):
        return _replace_output(outcome.text)
    if outcome.status in ("ok", "error") and outcome.result is not None:
        redacted = outcome.result.structured_content
        if redacted != response and _same_shape(response, redacted):
            return _replace_output(redacted)
        # Reshaped by a guardrail: its text, in the tool's shape.
        return _replace_output(_in_shape(sdk_name, response, outcome.text))
    return _withhold(sdk_name, response, outcome.message or "a result guardrail withheld it")


def _replace_output(value: Any) -> HookJSONOutput:
    return {"hookSpecificOutput": {"hookEventName": "PostToolUse", "updatedToolOutput": value}}


def _withhold(sdk_name: str, response: Any, why: str, *, stop: bool = False) -> HookJSONOutput:
    """Replace the output with ``[withheld by clearance: why]``; ``stop`` ends the run."""
    output = cast(
        dict[str, Any],
        _replace_output(_in_shape(sdk_name, response, f"[withheld by clearance: {why}]")),
    )
    if stop:
        output["continue_"] = False
        output["stopReason"] = f"clearance stopped the run: {why}"
    return cast(HookJSONOutput, output)


def _in_shape(sdk_name: str, response: Any, text: str) -> Any:
    """``text`` as the tool's output: the original's shape (keys, JSON types, tags), its
    first text field (or list of texts) holding ``text``, every other text empty, numbers 0,
    other lists empty. ``Read`` gets a text result; an MCP tool (whose output may be any
    value) and a text output get the text itself."""
    if sdk_name.startswith("mcp__") or not isinstance(response, dict | list):
        return text
    if sdk_name == "Read":
        file = response.get("file") if isinstance(response, dict) else None
        path = file.get("filePath") if isinstance(file, dict) else None
        return {
            "type": "text",
            "file": {
                "filePath": path if isinstance(path, str) else "",
                "content": text,
                "numLines": 1,
                "startLine": 1,
                "totalLines": 1,
            },
        }
    placed = False

    def fill(value: Any, key: str | None) -> Any:
        nonlocal placed
        if isinstance(value, dict):
            return {k: fill(v, k) for k, v in value.items()}
        if isinstance(value, list):
            if value and not placed and all(isinstance(v, str) for v in value):
                placed = True
                return [text]
            return []
        if isinstance(value, str):
            if key in _KEEP:
                return value
            if not placed:
                placed = True
                return text
            return ""
        if isinstance(value, bool) or value is None:
            return value
        if isinstance(value, int | float):
            return 0
        return ""

    return fill(response, None)


def _same_shape(a: Any, b: Any, key: str | None = None) -> bool:
    """Whether ``b`` has ``a``'s keys, lengths and JSON types (and its tags)."""
    if isinstance(a, dict):
        return (
            isinstance(b, dict)
            and a.keys() == b.keys()
            and all(_same_shape(a[k], b[k], k) for k in a)
        )
    if isinstance(a, list):
        return (
            isinstance(b, list)
            and len(a) == len(b)
            and all(_same_shape(x, y) for x, y in zip(a, b, strict=True))
        )
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool)
    if isinstance(a, int | float):
        return isinstance(b, int | float)
    if isinstance(a, str):
        return isinstance(b, str) and (key not in _KEEP or a == b)
    return a is None and b is None
