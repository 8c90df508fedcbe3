"""The pipeline: the only place that orders the stages of a tool call.

::

    resolve tool -> reject reused call id -> check and validate arguments
      -> argument guardrails -> evaluator -> [grant store / ask] -> admit
      -> journal call_decided, tool_started -> dispatch -> normalize result
      -> result guardrails -> journal tool_finished -> outcome for the model

Every failure before dispatch ends the call denied or blocked, with a correlation id, and
the handler never runs (rule R1). Evaluators and guardrails return values; only this
module turns them into outcomes.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio

from clearance import _pointer
from clearance.facts.base import FactError
from clearance.facts.declared import apply_facts
from clearance.guardrails.base import (
    ArgumentGuardrail,
    GuardrailContext,
    GuardrailOutcome,
    ResultGuardrail,
)
from clearance.harness.approvals import (
    Grant,
    PermissionAsk,
    grant_from_answer,
    suggest_scopes,
)
from clearance.harness.journal import JournalEvent
from clearance.harness.scrub import scrub_json, scrub_text
from clearance.harness.shape import check_shape as _check_shape
from clearance.harness.tools import CallContext, CallToolResult, ResultError, Tool, normalize_result
from clearance.policy.base import AuthorityEvaluator, AuthzRequest, Verdict, evaluate

if TYPE_CHECKING:
    from clearance.harness.session import Harness, Session

__all__ = ["CallOutcome", "Decision", "OutcomeStatus", "Pipeline"]

log = logging.getLogger("clearance")

OutcomeStatus = Literal[
    "ok", "error", "failed", "cancelled", "timeout", "denied", "blocked", "invalid", "overloaded"
]

Diagnostics = Callable[[str, BaseException, Mapping[str, Any]], None]


@dataclass(slots=True)
class CallOutcome:
    """How a call ended, as the application and the model see it.

    ``status`` is ``ok`` or ``error`` (the handler ran; ``error`` is a domain error it
    reported), ``failed`` (it raised), ``cancelled``, ``timeout``, or, for calls that never
    ran, ``denied`` (evaluator or ask), ``blocked`` (guardrail), ``invalid`` (unknown tool,
    reused call id, bad arguments) or ``overloaded``.
    """

    call_id: str
    tool: str
    """The tool's model alias (the name as given when the tool is unknown)."""
    qualified_name: str | None
    model_alias: str | None
    status: OutcomeStatus
    result: CallToolResult | None = None
    """What the handler returned, after result guardrails (None when it did not run)."""
    message: str | None = None
    correlation_id: str = ""
    decision: str | None = None
    """The authorization decision: ``allow``, ``deny``, ``ask`` (then answered) or ``error``."""
    reasons: tuple[str, ...] = ()
    grant: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def is_error(self) -> bool:
        return self.status != "ok"

    @property
    def text(self) -> str:
        """What a text-only model sees."""
        if self.result is not None and self.status in ("ok", "error"):
            return self.result.text
        return self.message or self.status

    def to_model(self) -> dict[str, Any]:
        """The result as MCP-style content for a model API."""
        if self.result is not None and self.status in ("ok", "error"):
            body = self.result.to_json()
            body["is_error"] = self.status != "ok"
            return body
        return {
            "content": [{"type": "text", "text": self.text}],
            "structured_content": None,
            "is_error": True,
        }


@dataclass(slots=True)
class Decision:
    """What the pipeline would do with a call, without running it (``Harness.decide``).

    ``outcome`` is ``allow``, ``ask``, ``deny``, ``error`` (the evaluator failed: enforced
    as deny), ``blocked`` (a guardrail) or ``invalid`` (unknown tool, bad arguments).
    ``stage`` names the stage that decided.
    """

    outcome: Literal["allow", "ask", "deny", "error", "blocked", "invalid"]
    stage: str
    reasons: tuple[str, ...] = ()
    message: str | None = None
    verdict: dict[str, Any] | None = None
    guardrails: list[dict[str, Any]] = field(default_factory=list)
    schema: dict[str, Any] | None = None
    timing_us: dict[str, int] = field(default_factory=dict)
    arguments: dict[str, Any] | None = None
    qualified_name: str | None = None
    shadow: dict[str, Any] | None = None
    facts: dict[str, Any] | None = None
    """The canonical facts the evaluator saw (withheld arguments' facts left out)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "stage": self.stage,
            "reasons": list(self.reasons),
            "message": self.message,
            "verdict": self.verdict,
            "guardrails": self.guardrails,
            "schema": self.schema,
            "timing_us": self.timing_us,
            "arguments": self.arguments,
            "qualified_name": self.qualified_name,
            "shadow": self.shadow,
            "facts": self.facts,
        }


@dataclass(slots=True)
class _Call:
    """Working state of one call while it moves through the stages."""

    session: Session
    call_id: str
    turn_id: str | None
    name: str
    arguments: Any
    correlation_id: str
    t0: float
    tool: Tool | None = None
    withheld: set[str] = field(default_factory=set)
    secrets: set[str] = field(default_factory=set)
    record: dict[str, Any] = field(default_factory=dict)
    timing: dict[str, int] = field(default_factory=dict)
    dry: bool = False
    """Decide only: no journal, no call-id bookkeeping, no asks, no dispatch."""
    decided_written: bool = False
    started_at: float = 0.0
    """When the handler got its slot (for the duration in tool_finished)."""
    dispatch_arguments: Any = None
    """The handler's own copy of the final arguments (see ``_decide``)."""
    admitted: bool = False
    started_written: bool = False
    facts: dict[str, Any] | None = None
    """The canonical facts of the declared arguments (R11), once computed."""
    running: _Running | None = None
    """The handle ``Session.aclose`` cancels the call through (None when deciding only)."""

    def identity(self) -> dict[str, Any]:
        """The tool's names for records: a fresh dict each time (records own their data)."""
        tool = self.tool
        if tool is None:
            return {"tool": self.name, "qualified_name": None, "model_alias": None}
        return {
            "tool": tool.model_alias,
            "qualified_name": tool.qualified_name,
            "model_alias": tool.model_alias,
        }


_current_task = asyncio.current_task
_CLOSED = "clearance: the session closed"


def this_task() -> asyncio.Task[Any] | None:
    """The running asyncio task; None on another backend (calls there hold cancel scopes)."""
    try:
        return _current_task()
    except RuntimeError:  # no asyncio loop running
        return None


class _Running:
    """A call between entering the pipeline and the end of its handler, as
    ``Session.aclose`` cancels it.

    On asyncio the call's own task is cancelled natively (``Task.cancel``) and the
    cancellation is taken back (``Task.uncancel``) where the call catches it: an anyio
    cancel scope per call costs about 4 us, a fifth of the pipeline's whole budget. anyio
    lets native cancellations pass through its scopes untouched, shielded ones included,
    so a journal write must not be cancelled natively: a cancellation requested while the
    call ``holds`` (writes its records) waits, and is delivered when the last hold is
    released (see ``Pipeline._record``), before the call can take another step. A
    ``quiet`` call is not cancelled at all: the close itself ends it (an ask the close
    answers, a call that is already ending); it still cannot start its handler, because
    admission and dispatch check ``requested``. Elsewhere (trio) the handler runs in an
    anyio cancel scope, and a call closed before it got that far stops at those checks.
    """

    __slots__ = ("delivered", "holds", "quiet", "requested", "scope", "task")

    def __init__(self) -> None:
        self.task = this_task()
        self.scope: anyio.CancelScope | None = None
        self.requested = False
        self.delivered = False
        self.holds = 0
        self.quiet = False

    def cancel(self) -> None:
        if self.requested:
            return
        self.requested = True
        if self.scope is not None:
            self.scope.cancel()
        elif self._pending():
            self._deliver()

    def _pending(self) -> bool:
        return (
            self.requested
            and not self.delivered
            and not self.holds
            and not self.quiet
            and self.task is not None
            and self.scope is None
        )

    def _deliver(self) -> None:
        assert self.task is not None
        self.delivered = True
        self.task.cancel(_CLOSED)

    def hold(self) -> None:
        """Defer cancellation until the matching :meth:`release` (or :meth:`unhold`)."""
        self.holds += 1

    def unhold(self) -> None:
        """End a :meth:`hold` without delivering anything (the call ends anyway)."""
        self.holds -= 1

    async def release(self) -> None:
        """End a :meth:`hold`; a cancellation requested meanwhile is delivered here, when
        the last hold ends."""
        self.holds -= 1
        if self._pending():
            self._deliver()
            await asyncio.sleep(0)  # raises CancelledError here, not at some later await

    def caught(self) -> bool:
        """Whether a CancelledError the call caught is this handle's own (then it is taken
        back); False means it came from elsewhere and must go on."""
        if not self.delivered or self.task is None or self.scope is not None:
            return False
        # Another cancellation landed too (the caller's): take ours back, let that one go on.
        return self.task.uncancel() == 0


def _copy_json(value: Any) -> Any:
    """A deep copy of a JSON value (dicts, lists, scalars): several times faster than
    ``copy.deepcopy``, which matters on every call."""
    if type(value) is dict:
        return {k: _copy_json(v) for k, v in value.items()}
    if type(value) is list:
        return [_copy_json(v) for v in value]
    return value


_NO_FACTS: Mapping[str, Any] = {}
"""The facts of a tool that declares none (shared: requests never change it)."""

_FAILED: Any = object()
"""A guardrail raised or timed out (see ``Pipeline._check``)."""


def _us(start: float) -> int:
    return int((time.perf_counter() - start) * 1_000_000)


_CORRELATION_PREFIX = secrets.token_hex(3)
_correlation_counter = itertools.count(1)


def new_correlation_id() -> str:
    """A short id unique within the process (random prefix + counter): it joins what the
    model sees to the diagnostics and the journal; it is not a secret."""
    return f"{_CORRELATION_PREFIX}{next(_correlation_counter):06x}"


class Pipeline:
    """Runs calls for a :class:`~clearance.harness.session.Harness`."""

    def __init__(self, harness: Harness) -> None:
        self.harness = harness
        self.dispatcher = harness.dispatcher
        self._argument_guards: dict[str, tuple[Any, ...]] = {}
        self._result_guards: dict[str, tuple[Any, ...]] = {}
        self._withheld: dict[tuple[str, str], set[str]] = {}
        """(session id, call id) -> withheld values, while a handler that was given some
        runs (for its progress records)."""

    # -- the call -----------------------------------------------------------------------

    async def call(
        self,
        session: Session,
        name: str,
        arguments: Any,
        *,
        call_id: str | None = None,
        turn_id: str | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> CallOutcome:
        call = _Call(
            session=session,
            call_id=call_id if call_id is not None else "call_" + secrets.token_hex(6),
            turn_id=turn_id,
            name=name,
            arguments=arguments,
            correlation_id=new_correlation_id(),
            t0=time.perf_counter(),
        )
        # From here until its handler ends the call can be cancelled by Session.aclose,
        # and until it has ended the close waits for it: once aclose returns, no handler
        # of the session starts, and every call has its one end on record (R7).
        call.running = running = _Running()
        session._enter()
        session.running.add(running)
        try:
            return await self._call(call, context)
        finally:
            session.running.discard(running)
            session._leave()

    async def _call(self, call: _Call, context: Mapping[str, Any] | None) -> CallOutcome:
        running = call.running
        assert running is not None
        try:
            decided = await self._decide(call, context or {})
        except Exception as exc:  # a bug in a stage: fail closed (R1), never escape
            self._diagnose(call, exc, stage="pipeline")
            if call.admitted:
                self.dispatcher.release()
                call.admitted = False
            if call.started_written:  # the start is on record: end it, do not run
                await self._finished(
                    call, "failed", None, "the pipeline failed", time.perf_counter()
                )
                return self._outcome(
                    call,
                    "failed",
                    f"the pipeline failed; the call was not run (correlation id {call.correlation_id})",
                    "error",
                    (),
                )
            if call.decided_written:
                return self._outcome(
                    call,
                    "denied",
                    f"the pipeline failed; the call was not run (correlation id {call.correlation_id})",
                    "error",
                    (),
                )
            return await self._end_early(
                call,
                "denied",
                "the pipeline failed; the call was not run",
                stage=call.record.get("stage", "pipeline"),
                decision="error",
            )
        except BaseException as exc:
            # Cancelled while deciding (an ask, an async guardrail or evaluator, a journal
            # write): the call still ends exactly once (R7), then the cancellation goes on,
            # unless it was the session's close (then the call ends ``cancelled``).
            call.session.running.discard(running)  # ending: nothing left to cancel
            closed = isinstance(exc, asyncio.CancelledError) and running.caught()
            running.quiet = True
            ended: CallOutcome | None = None
            with anyio.CancelScope(shield=True):
                if not call.decided_written:
                    ended = await self._end_early(
                        call,
                        "cancelled",
                        "the call was cancelled before it could run",
                        stage=call.record.get("stage", "cancelled"),
                    )
                elif call.started_written:
                    await self._finished(
                        call, "cancelled", None, "the call was cancelled", time.perf_counter()
                    )
            if call.admitted:
                self.dispatcher.release()
            if not closed:
                raise
            return ended or self._outcome(
                call,
                "cancelled",
                f"the session closed; the call was not run (correlation id {call.correlation_id})",
                call.record.get("decision"),
                (),
            )
        if decided is not None:
            return decided
        return await self._run(call)

    async def decide(
        self,
        session: Session,
        name: str,
        arguments: Any,
        *,
        context: Mapping[str, Any] | None = None,
    ) -> Decision:
        """Run every stage before dispatch (resolve, schema, argument guardrails, evaluator)
        and say what would happen, without journaling, asking or running anything."""
        call = _Call(
            session=session,
            call_id="decide",
            turn_id=None,
            name=name,
            arguments=arguments,
            correlation_id=new_correlation_id(),
            t0=time.perf_counter(),
            dry=True,
        )
        ended = await self._decide(call, context or {})
        call.timing["total"] = _us(call.t0)
        record = call.record
        if ended is None:
            outcome = "ask" if record.get("decision") == "ask" else "allow"
        else:
            outcome = {"invalid": "invalid", "blocked": "blocked"}.get(ended.status, "deny")
            if record.get("decision") == "error":
                outcome = "error"
        return Decision(
            outcome=outcome,  # type: ignore[arg-type]
            stage=record.get("stage", "evaluator"),
            reasons=tuple(record.get("reasons", ())),
            message=record.get("message"),
            verdict=record.get("verdict"),
            guardrails=list(record.get("guardrails", [])),
            schema=record.get("schema"),
            timing_us=dict(call.timing),
            arguments=self._visible(call, call.arguments)
            if isinstance(call.arguments, dict)
            else None,
            qualified_name=call.tool.qualified_name if call.tool else None,
            shadow=record.get("shadow"),
            facts=record.get("facts") if call.facts is not None else None,
        )

    async def _decide(self, call: _Call, context: Mapping[str, Any]) -> CallOutcome | None:
        """Every stage before dispatch. Returns the outcome when the call ends here."""
        session, h = call.session, self.harness
        # Resolve: the name must be a selected tool of this session's agent.
        tool = session.tools.get(call.name)
        if tool is None:
            known = call.name in h.registry
            msg = (
                f"tool {call.name!r} is not available to this agent"
                if known
                else f"unknown tool {call.name!r}"
            )
            return await self._end_early(call, "invalid", msg, stage="resolve")
        call.tool = tool
        call.withheld.update(tool.sensitive)
        # A call id names one call for the session's lifetime.
        if not isinstance(call.call_id, str) or not call.call_id:
            return await self._end_early(
                call, "invalid", "call_id must be a non-empty string", stage="call_id"
            )
        if call.dry:
            pass
        elif call.call_id in session.call_ids:
            call.record["duplicate_call_id"] = True
            return await self._end_early(
                call,
                "invalid",
                f"call id {call.call_id!r} was already used in this session",
                stage="call_id",
            )
        else:
            session.call_ids.add(call.call_id)

        # Arguments: a JSON object of bounded size and depth, valid against the schema.
        t = time.perf_counter()
        problem = _check_shape(call.arguments, h.max_argument_bytes, h.max_argument_depth)
        if problem is None:
            call.secrets.update(_values_at(call.arguments, call.withheld))
            problem = _schema_problem(tool, call.arguments, call.withheld, call.secrets)
        call.timing["validate"] = _us(t)
        call.record["schema"] = {"valid": problem is None, "error": _scrub(problem, call.secrets)}
        if problem is not None:
            return await self._end_early(
                call, "invalid", f"invalid arguments: {problem}", stage="schema"
            )
        arguments: dict[str, Any] = call.arguments

        # Canonical facts (R11): each declared argument takes its canonical value, once;
        # every stage from here on, and the handler, sees that value.
        if tool.declared_facts:
            t = time.perf_counter()
            ended = await self._facts(call, arguments, stage="facts")
            call.timing["facts"] = _us(t)
            if isinstance(ended, CallOutcome):
                return ended
            arguments = ended

        # Argument guardrails, in order; a replace feeds the next one.
        asks: list[tuple[str, str]] = []
        guards = self._argument_guards.get(tool.qualified_name)
        if guards is None:
            guards = self._argument_guards[tool.qualified_name] = tuple(
                g for g in h.argument_guardrails if g.applies_to(tool.qualified_name)
            )
        if guards:
            t = time.perf_counter()
            ended = await self._argument_guardrails(call, guards, asks)
            call.timing["guardrails"] = _us(t)
            if isinstance(ended, CallOutcome):
                return ended
            arguments = ended
        else:
            call.record["guardrails"] = []
            call.timing["guardrails"] = 0
        call.arguments = arguments
        # The handler gets its own copy, taken now: whatever the evaluator, a shadow
        # evaluator, an ask answerer or the caller later does to this dict, the handler
        # runs exactly the arguments that were validated and authorized (R2, R6).
        call.dispatch_arguments = _copy_json(arguments)

        # Authority: the evaluator sees exactly the arguments the handler will get (R2).
        t = time.perf_counter()
        request = AuthzRequest(
            session.principal,
            tool.info,
            arguments,
            session.info(call.turn_id),
            context,
            call.facts if call.facts is not None else _NO_FACTS,
        )
        evaluator = session.evaluator
        try:
            verdict = evaluator.evaluate(request)
            if type(verdict) is not Verdict:  # async evaluators, or a wrong answer
                verdict = await _settle_verdict(evaluator, verdict)
            failed = False
            verdict_record = _verdict_record(verdict, failed, call.secrets)
        except Exception as exc:
            self._diagnose(call, exc, stage="evaluator")
            verdict = Verdict(
                "deny",
                errors=(f"{type(exc).__name__}",),
                message="the authority evaluator failed",
                evaluator=_evaluator_name(evaluator),
            )
            failed = True
            verdict_record = _verdict_record(verdict, failed, call.secrets)
        call.timing["evaluate"] = _us(t)
        call.record["verdict"] = verdict_record
        if h.shadow_evaluator is not None:
            call.record["shadow"] = await self._shadow(call, request, verdict)
        # Only "allow" and "ask" go on; anything else is a deny (R4).
        if verdict.effect != "allow" and verdict.effect != "ask":
            reason = _scrub(verdict.message, call.secrets) or (
                "denied by " + ", ".join(verdict.reasons) if verdict.reasons else "denied"
            )
            return await self._end_early(
                call,
                "denied",
                reason,
                stage="evaluator",
                decision="error" if failed else "deny",
                reasons=verdict.reasons,
            )

        # Ask: a matching grant answers; otherwise a person or the app does.
        grant: Grant | None = None
        if verdict.effect == "ask" or asks:
            t = time.perf_counter()
            policies = tuple(verdict.reasons if verdict.effect == "ask" else ()) + tuple(
                g for g, _ in asks
            )
            why = (
                "; ".join(
                    ([verdict.message] if verdict.effect == "ask" and verdict.message else [])
                    + [r for _, r in asks]
                )
                or "approval required"
            )
            if call.dry:
                call.record.update(stage="ask", decision="ask", reasons=policies, message=why)
                return None
            try:
                allowed, grant = await self._ask(
                    call, arguments, _scrub(why, call.secrets) or why, policies
                )
            except Exception as exc:  # the journal or grant store failed: fail closed (R1)
                self._diagnose(call, exc, stage="ask")
                call.record.setdefault("ask", {})["message"] = "the approval could not be recorded"
                allowed, grant = False, None
            call.timing["ask"] = _us(t)
            if not allowed:
                return await self._end_early(
                    call,
                    "denied",
                    call.record["ask"].get("message") or "the approval was denied",
                    stage="ask",
                    decision="ask",
                    reasons=policies,
                )

        if call.dry:
            call.record.update(stage="evaluator", decision="allow", reasons=verdict.reasons)
            return None
        if session.closed:
            return await self._end_early(
                call,
                "cancelled",
                "the session closed before the call could run",
                stage="dispatch",
                decision="allow",
                reasons=verdict.reasons,
            )
        # Admission: refuse at once rather than queue without bound.
        if not self.dispatcher.admit():
            return await self._end_early(
                call,
                "overloaded",
                "the harness is overloaded; try again later",
                stage="dispatch",
                decision="allow",
                reasons=verdict.reasons,
            )
        call.admitted = True
        running = call.running
        if running is not None:
            # call_decided and tool_started go out together: a close meanwhile lands
            # after both, and the call then ends cancelled without running (R7).
            running.hold()
        try:
            await self._decided(
                call,
                "dispatched",
                None,
                "allow" if verdict.effect == "allow" else "ask",
                verdict.reasons,
                grant,
            )
            call.started_written = True
            await self._record(
                call,
                "tool_started",
                {
                    **call.identity(),
                    "arguments": self._visible(call, arguments),
                    "correlation_id": call.correlation_id,
                },
            )
        except Exception as exc:
            if running is not None:
                running.unhold()
                running.quiet = True
            call.admitted = False
            self.dispatcher.release()
            self._diagnose(call, exc, stage="journal")
            return self._outcome(
                call,
                "denied",
                f"the journal failed; the call was not run (correlation id {call.correlation_id})",
                "error",
                (),
            )
        call.record["reasons"] = verdict.reasons
        call.record["grant"] = grant.grant_id if grant else None
        if running is not None:
            await running.release()
        return None

    async def _argument_guardrails(
        self, call: _Call, guards: tuple[Any, ...], asks: list[tuple[str, str]]
    ) -> dict[str, Any] | CallOutcome:
        """Run the argument guardrails; the final arguments, or the outcome that ends the call."""
        tool, session, h = call.tool, call.session, self.harness
        assert tool is not None
        arguments: dict[str, Any] = call.arguments
        outcomes: list[dict[str, Any]] = []
        call.record["guardrails"] = outcomes
        gctx = GuardrailContext(
            tool.qualified_name,
            tool.model_alias,
            session.principal,
            session.id,
            call.turn_id,
            call.call_id,
            "arguments",
        )
        for guard in guards:
            outcome, entry = await self._check(call, guard, arguments, gctx, outcomes)
            if outcome is _FAILED:
                return await self._end_early(
                    call,
                    "blocked",
                    f"guardrail {guard.name!r} failed; the call was blocked",
                    stage="guardrail",
                )
            if outcome is None:
                continue
            if outcome.action == "block":
                return await self._end_early(
                    call,
                    "blocked",
                    f"blocked by guardrail {guard.name!r}: {_scrub(outcome.message, call.secrets)}",
                    stage="guardrail",
                )
            if outcome.action == "redact":
                call.withheld.update(outcome.pointers)
                call.secrets.update(_values_at(arguments, outcome.pointers))
            elif outcome.action == "ask":
                asks.append((guard.name, outcome.message or f"guardrail {guard.name} asks"))
            elif outcome.action == "replace":
                problem = _check_shape(outcome.value, h.max_argument_bytes, h.max_argument_depth)
                if problem is None:
                    problem = _schema_problem(tool, outcome.value, call.withheld, call.secrets)
                if problem is not None:
                    entry["error"] = "replacement invalid"
                    return await self._end_early(
                        call,
                        "blocked",
                        f"guardrail {guard.name!r} produced arguments the schema rejects: "
                        f"{_scrub(problem, call.secrets)}",
                        stage="guardrail",
                    )
                removed = {t for _, t in _pointer.iter_strings(arguments)} - {
                    t for _, t in _pointer.iter_strings(outcome.value)
                }
                if tool.declared_facts:
                    # A rewrite is canonicalized like the call itself (R11).
                    canonical = await self._facts(
                        call, outcome.value, stage="guardrail", guard=guard.name
                    )
                    if isinstance(canonical, CallOutcome):
                        entry["error"] = "replacement cannot be canonicalized"
                        return canonical
                    outcome = GuardrailOutcome.replace(canonical)
                arguments = outcome.value
                # Records made from here on (a later block, a failure) show the rewrite,
                # and whatever it rewrote away never surfaces in a message (R8).
                call.arguments = arguments
                call.secrets.update(t for t in removed if t)
                call.secrets.update(_values_at(arguments, call.withheld))
        return arguments

    async def _facts(
        self, call: _Call, arguments: dict[str, Any], *, stage: str, guard: str | None = None
    ) -> dict[str, Any] | CallOutcome:
        """Canonicalize the declared facts of ``arguments`` (R11); the canonical arguments,
        or the outcome that ends the call when one cannot be canonicalized (R1)."""
        tool = call.tool
        assert tool is not None
        try:
            canonical, facts = apply_facts(tool.declared_facts, arguments)
            # The canonical value must still be one the tool accepts (a resolved path may
            # be longer than the schema allows, say): never hand the handler anything else.
            problem = _schema_problem(tool, canonical, call.withheld, call.secrets)
        except FactError as exc:
            problem = exc.reason
        if problem is not None:
            call.record["facts"] = {"error": _scrub(problem, call.secrets)}
            if guard is not None:
                return await self._end_early(
                    call,
                    "blocked",
                    f"guardrail {guard!r} produced arguments that cannot be canonicalized: "
                    f"{_scrub(problem, call.secrets)}",
                    stage=stage,
                )
            # A refusal of what the call would act on, not a malformed call: ``blocked``,
            # as a guardrail's refusal is.
            return await self._end_early(
                call, "blocked", f"refused: {_scrub(problem, call.secrets)}", stage=stage
            )
        call.facts = facts
        call.arguments = canonical
        if call.withheld:
            call.secrets.update(_values_at(canonical, call.withheld))
        call.record["facts"] = self._visible_facts(call, facts)
        return canonical

    @staticmethod
    def _withheld_deciding(call: _Call, deciding: tuple[str, ...]) -> list[str]:
        """The deciding arguments a person would be shown only as ``[REDACTED]``."""
        if not call.withheld or not deciding:
            return []
        hidden = {(_pointer.parse(p) or ("*",))[0] for p in call.withheld}
        return [name for name in deciding if name in hidden or "*" in hidden]

    def _visible_facts(self, call: _Call, facts: Mapping[str, Any]) -> dict[str, Any]:
        """The facts records may show: none of a withheld argument (R8)."""
        if not call.withheld:
            return dict(facts)
        hidden = {(_pointer.parse(p) or ("*",))[0] for p in call.withheld}
        if "*" in hidden:
            return {}
        return {k: v for k, v in facts.items() if k not in hidden}

    async def _run(self, call: _Call) -> CallOutcome:
        """Dispatch an admitted call; always writes exactly one ``tool_finished``."""
        tool, session = call.tool, call.session
        assert tool is not None
        ctx = CallContext(
            session_id=session.id,
            turn_id=call.turn_id,
            call_id=call.call_id,
            qualified_name=tool.qualified_name,
            model_alias=tool.model_alias,
            principal=session.principal,
            pipeline=self,
        )
        status: OutcomeStatus = "failed"
        result: CallToolResult | None = None
        message: str | None = None
        started = time.perf_counter()
        finished = False
        running = call.running
        assert running is not None
        if call.secrets:
            self._withheld[session.id, call.call_id] = call.secrets
        try:
            try:
                cancelled = False
                try:
                    if running.task is None:  # not asyncio: an anyio cancel scope
                        running.scope = anyio.CancelScope()
                        with running.scope:
                            status, raw, message = await self._dispatch(call, tool, ctx)
                        cancelled = running.scope.cancelled_caught
                    else:
                        status, raw, message = await self._dispatch(call, tool, ctx)
                except asyncio.CancelledError:
                    if not running.caught():
                        raise
                    cancelled = True
                else:
                    if running.delivered and running.task is not None and running.scope is None:
                        # The handler swallowed our cancellation: take the request back so
                        # that the task's cancel count stays true for everyone else.
                        running.task.uncancel()
                if not cancelled and status == "ok":
                    try:
                        result = normalize_result(raw)
                        status = "error" if result.is_error else "ok"
                    except ResultError as exc:
                        status = "failed"
                        message = _scrub(
                            f"the tool returned an invalid result: {exc}", call.secrets
                        )
                        self._diagnose(call, exc, stage="result")
            finally:
                session.running.discard(running)
                self.dispatcher.release()
                ctx._done = True
                self._withheld.pop((session.id, call.call_id), None)
            if cancelled:
                status, message, result = "cancelled", "the call was cancelled", None
            ran_status = status
            if result is not None:
                status, result, message = await self._guard_result(call, status, result)
            finished = True
            await self._finished(
                call,
                ran_status if status == "blocked" else status,
                result,
                message,
                call.started_at or started,
                result_blocked=status == "blocked",
            )
        finally:
            if not finished:  # cancelled from outside: still end the call exactly once (R7)
                with anyio.CancelScope(shield=True):
                    await self._finished(
                        call,
                        "cancelled",
                        None,
                        "the call was cancelled",
                        call.started_at or started,
                    )
        return self._outcome(
            call,
            status,
            message,
            call.record.get("decision", "allow"),
            call.record.get("reasons", ()),
            result,
        )

    async def _dispatch(
        self, call: _Call, tool: Tool, ctx: CallContext
    ) -> tuple[OutcomeStatus, Any, str | None]:
        """Wait for a slot, then run the handler; the slot is released however it ends."""
        lock = call.session.lock
        if not self.dispatcher.try_acquire_slot(tool, lock):
            await self.dispatcher.acquire_slot(tool, lock)
        try:
            if call.running is not None and call.running.requested:
                # The session closed before the handler could start (a backend where the
                # close only flags the call): it never starts.
                return "cancelled", None, "the call was cancelled"
            call.started_at = time.perf_counter()
            return await self._invoke(call, tool, ctx)
        finally:
            self.dispatcher.release_slot(tool, lock)

    async def _invoke(
        self, call: _Call, tool: Tool, ctx: CallContext
    ) -> tuple[OutcomeStatus, Any, str | None]:
        deadline: anyio.CancelScope | None = None
        try:
            if tool.timeout is None:
                if tool.is_async:  # the common case, one coroutine less
                    return "ok", await tool.handler(call.dispatch_arguments, ctx), None
                return (
                    "ok",
                    await self.dispatcher.call_handler(tool, call.dispatch_arguments, ctx),
                    None,
                )
            with anyio.move_on_after(tool.timeout) as deadline:
                return (
                    "ok",
                    await self.dispatcher.call_handler(tool, call.dispatch_arguments, ctx),
                    None,
                )
        except Exception as exc:
            if deadline is None or not deadline.cancel_called:
                self._diagnose(call, exc, stage="handler")
                if ctx.cancelled:
                    return "cancelled", None, "the call was cancelled"
                return "failed", None, f"the tool failed (correlation id {call.correlation_id})"
        ctx.cancel()
        return "timeout", None, f"the call timed out after {tool.timeout:g}s"

    async def _guard_result(
        self, call: _Call, status: OutcomeStatus, result: CallToolResult
    ) -> tuple[OutcomeStatus, CallToolResult | None, str | None]:
        tool, session, h = call.tool, call.session, self.harness
        assert tool is not None
        guards = self._result_guards.get(tool.qualified_name)
        if guards is None:
            guards = self._result_guards[tool.qualified_name] = tuple(
                g for g in h.result_guardrails if g.applies_to(tool.qualified_name)
            )
        if not guards:
            return status, result, None
        gctx = GuardrailContext(
            tool.qualified_name,
            tool.model_alias,
            session.principal,
            session.id,
            call.turn_id,
            call.call_id,
            "result",
        )
        value = result.to_json()
        entries: list[dict[str, Any]] = []
        call.record["result_guardrails"] = entries
        for guard in guards:
            outcome, _ = await self._check(call, guard, value, gctx, entries)
            if outcome is _FAILED:
                return (
                    "blocked",
                    None,
                    f"result guardrail {guard.name!r} failed; the result was withheld (correlation id {call.correlation_id})",
                )
            if outcome is None:
                continue
            if outcome.action == "block":
                return (
                    "blocked",
                    None,
                    f"the result was withheld by guardrail {guard.name!r}: "
                    f"{_scrub(outcome.message, call.secrets)}",
                )
            if outcome.action == "redact":
                value = _pointer.redact(value, outcome.pointers)
            elif outcome.action == "replace":
                value = outcome.value
        try:
            final = _result_from_json(value)
        except (ResultError, KeyError, TypeError) as exc:
            self._diagnose(call, exc, stage="result guardrails")
            return (
                "blocked",
                None,
                f"result guardrails produced an invalid result (correlation id {call.correlation_id})",
            )
        return ("error" if final.is_error else "ok"), final, None

    async def _check(
        self,
        call: _Call,
        guard: Any,
        value: Any,
        gctx: GuardrailContext,
        entries: list[dict[str, Any]],
    ) -> tuple[Any, dict[str, Any]]:
        """Run one guardrail (either stage) and record its outcome in ``entries``.

        Returns the outcome to enforce; ``None`` when there is nothing to enforce (an
        advisory guardrail, or one that failed while advisory); ``_FAILED`` when it
        raised or timed out and is enforcing (the caller blocks: R1).
        """
        entry: dict[str, Any] = {"name": guard.name, "advisory": guard.advisory}
        entries.append(entry)
        try:
            outcome = await _run_guardrail(guard, value, gctx)
        except Exception as exc:
            entry.update(action="error", error=type(exc).__name__)
            self._diagnose(call, exc, stage=f"{gctx.stage} guardrail {guard.name}")
            return (None if guard.advisory else _FAILED), entry
        entry["action"] = outcome.action
        if outcome.message:
            entry["message"] = _scrub(outcome.message, call.secrets)
        if outcome.action == "redact":
            entry["pointers"] = list(outcome.pointers)
        return (None if guard.advisory else outcome), entry

    # -- asks ---------------------------------------------------------------------------

    async def _ask(
        self, call: _Call, arguments: dict[str, Any], reason: str, policies: tuple[str, ...]
    ) -> tuple[bool, Grant | None]:
        tool, session, h = call.tool, call.session, self.harness
        assert tool is not None
        principal = str(session.principal)
        # A grant's scope must constrain every field that decides what the call does.
        deciding = tuple(f.field for f in tool.declared_facts)
        path_fields = (
            tuple(f.field for f in tool.declared_facts if f.kind.name == "path")
            if deciding
            else None
        )
        other_facts = tuple(f.field for f in tool.declared_facts if f.kind.name != "path")
        record: dict[str, Any] = {"reason": reason, "policies": list(policies)}
        call.record["ask"] = record
        grant = h.grants.find(principal, tool.qualified_name, arguments, session.id)
        if grant is not None:
            record.update(answer="grant", grant=grant.grant_id)
            return True, grant
        blind = self._withheld_deciding(call, deciding)
        if blind:
            # Nobody approves what they cannot see (issue 19): a deciding argument that is
            # withheld (sensitive, or redacted by a guardrail) cannot be shown, so the
            # call is not put to a person at all.
            record.update(
                answer="deny",
                how="unshowable",
                message="this call needs approval, but what decides it ("
                + ", ".join(f"/{name}" for name in blind)
                + ") is withheld and cannot be shown to a person; denied",
            )
            return False, None
        ask = PermissionAsk(
            ask_id="ask_" + secrets.token_hex(6),
            session_id=session.id,
            turn_id=call.turn_id,
            call_id=call.call_id,
            tool=tool.model_alias,
            qualified_name=tool.qualified_name,
            model_alias=tool.model_alias,
            principal=principal,
            arguments=self._visible(call, arguments),
            reason=reason,
            policies=policies,
            deciding=deciding,
            facts=self._visible_facts(call, call.facts or {}),
            suggestions=suggest_scopes(
                arguments,
                withheld=call.withheld,
                path_fields=path_fields,
                other_facts=other_facts,
            ),
        )
        record["ask_id"] = ask.ask_id
        await self._record(call, "permission_asked", {**call.identity(), **ask.to_json()})
        running = call.running
        if running is not None and session.on_permission_ask is None:
            # Closing the session answers an ask that waits in the stream ("closed":
            # denied, as documented), so the close need not cancel this call; an ask
            # callback may never return, so a call waiting for one is cancelled.
            running.quiet = True
        decision, how = await session.answer(ask)
        if session.closed and decision is not None:
            # Answered, but the session closed meanwhile: no grant may outlive it (R5).
            decision, how = None, "closed"
        record.update(answer=decision.decision if decision else "deny", how=how)
        if decision is not None and decision.message:
            record["message"] = _scrub(decision.message, call.secrets)
        new_grant: Grant | None = None
        if decision is not None and decision.decision != "deny":
            try:
                new_grant = grant_from_answer(
                    ask, decision, arguments, path_fields=path_fields, other_facts=other_facts
                )
                if new_grant is not None:
                    h.grants.add(new_grant)
                    record["grant_created"] = new_grant.to_json(public=True)
            except Exception as exc:
                self._diagnose(call, exc, stage="grant")
                decision, record["answer"] = None, "deny"
                record["message"] = "the answer could not be applied; denied"
        allowed = decision is not None and decision.decision != "deny"
        if allowed and running is not None:
            running.quiet = False  # answered before any close: cancellable again
        if not allowed and "message" not in record:
            record["message"] = {
                "timeout": "nobody answered the approval request in time; denied",
                "closed": "the session closed before the approval was answered; denied",
                "unanswerable": "this call needs approval and no one is set up to answer; denied",
                "error": "the approval callback failed; denied",
            }.get(how, "the approval was denied")
        await self._record(
            call,
            "permission_decided",
            {
                **call.identity(),
                "ask_id": ask.ask_id,
                "answer": record["answer"],
                "how": how,
                "grant": new_grant.grant_id if new_grant else None,
            },
        )
        return allowed, new_grant

    # -- records ------------------------------------------------------------------------

    def _visible(self, call: _Call, arguments: Any) -> Any:
        return _pointer.redact(arguments, sorted(call.withheld)) if call.withheld else arguments

    async def _record(self, call: _Call, type_: Any, data: dict[str, Any]) -> JournalEvent:
        if call.secrets:
            data = _scrub_record(data, call.secrets)
        event = JournalEvent(type_, call.session.id, call.turn_id, call.call_id, data)
        running = call.running
        if running is None or running.task is None:
            event = await self.harness.journal.append(event)
            self.harness.hub.publish(event)
            return event
        # A write is never cancelled halfway (the record may be on disk already): a close
        # that comes meanwhile takes effect once the write is done (see _Running).
        running.hold()
        try:
            event = await self.harness.journal.append(event)
        except BaseException:
            running.unhold()
            raise
        self.harness.hub.publish(event)
        await running.release()
        return event

    async def _decided(
        self,
        call: _Call,
        outcome: str,
        message: str | None,
        decision: str | None,
        reasons: Sequence[str],
        grant: Grant | None,
    ) -> None:
        call.timing["total"] = _us(call.t0)
        data = {
            **call.identity(),
            "principal": str(call.session.principal),
            "arguments": self._visible(call, call.arguments)
            if isinstance(call.arguments, dict)
            else None,
            **call.record,
            "decision": decision,
            "reasons": list(reasons),
            "grant": grant.grant_id if grant else call.record.get("ask", {}).get("grant"),
            "outcome": outcome,
            "message": message,
            "correlation_id": call.correlation_id,
            "timing_us": dict(call.timing),
        }
        call.record["decision"] = decision
        call.decided_written = True
        await self._record(call, "call_decided", data)

    async def _end_early(
        self,
        call: _Call,
        status: OutcomeStatus,
        message: str,
        *,
        stage: str,
        decision: str | None = None,
        reasons: Sequence[str] = (),
    ) -> CallOutcome:
        call.record["stage"] = stage
        message = _scrub(message, call.secrets) or status
        if call.dry:
            call.record.update(decision=decision, reasons=reasons, message=message)
            return self._outcome(call, status, message, decision, reasons)
        running = call.running
        if running is not None:
            running.hold()  # the call ends here: a close meanwhile has nothing to cancel
        try:
            with anyio.CancelScope(shield=True):
                await self._decided(call, status, message, decision, reasons, None)
        except Exception as exc:
            self._diagnose(call, exc, stage="journal")
        finally:
            if running is not None:
                running.unhold()
                running.quiet = True
        return self._outcome(
            call, status, f"{message} (correlation id {call.correlation_id})", decision, reasons
        )

    async def _finished(
        self,
        call: _Call,
        status: str,
        result: CallToolResult | None,
        message: str | None,
        started: float,
        *,
        result_blocked: bool = False,
    ) -> None:
        """Write the call's one ``tool_finished``. Its status is how the handler ended
        (``ok | error | failed | cancelled | timeout``); a result withheld by a result
        guardrail is marked ``result_blocked`` beside it."""
        data: dict[str, Any] = {
            **call.identity(),
            "status": status,
            "duration_us": _us(started),
            "correlation_id": call.correlation_id,
        }
        if message:
            data["message"] = message
        if result_blocked:
            data["result_blocked"] = True
        if result is not None:
            data["result"] = _result_reference(result)
        try:
            await self._record(call, "tool_finished", data)
        except Exception as exc:
            self._diagnose(call, exc, stage="journal")

    def _outcome(
        self,
        call: _Call,
        status: OutcomeStatus,
        message: str | None,
        decision: str | None,
        reasons: Sequence[str],
        result: CallToolResult | None = None,
    ) -> CallOutcome:
        ident = call.identity()
        return CallOutcome(
            call_id=call.call_id,
            tool=ident["tool"],
            qualified_name=ident["qualified_name"],
            model_alias=ident["model_alias"],
            status=status,
            result=result,
            message=message,
            correlation_id=call.correlation_id,
            decision=decision,
            reasons=tuple(reasons),
            grant=call.record.get("grant") or call.record.get("ask", {}).get("grant"),
        )

    async def _shadow(
        self, call: _Call, request: AuthzRequest, enforced: Verdict
    ) -> dict[str, Any]:
        shadow = self.harness.shadow_evaluator
        assert shadow is not None
        try:
            verdict = await evaluate(shadow, request)
        except Exception as exc:
            self._diagnose(call, exc, stage="shadow evaluator")
            return {"effect": "error", "agrees": False}
        return {
            "effect": verdict.effect,
            "reasons": list(verdict.reasons),
            "agrees": verdict.effect == enforced.effect,
        }

    async def progress(self, ctx: CallContext, message: str, data: dict[str, Any] | None) -> None:
        # A handler may report the withheld values it was given: they are scrubbed (R8).
        withheld = self._withheld.get((ctx.session_id, ctx.call_id), ())
        event = JournalEvent(
            "tool_progress",
            ctx.session_id,
            ctx.turn_id,
            ctx.call_id,
            {
                "tool": ctx.model_alias,
                "qualified_name": ctx.qualified_name,
                "model_alias": ctx.model_alias,
                "message": scrub_text(str(message), withheld),
                "data": scrub_json(data, withheld),
            },
        )
        try:
            event = await self.harness.journal.append(event)
        except Exception as exc:
            log.warning("journal failed to record progress: %s", scrub_text(str(exc), withheld))
            return
        self.harness.hub.publish(event)

    def _diagnose(self, call: _Call, exc: BaseException, *, stage: str) -> None:
        info = {
            "call_id": call.call_id,
            "session_id": call.session.id,
            "tool": call.name,
            "stage": stage,
        }
        callback = self.harness.diagnostics
        if callback is None:
            # The log is a record too: the exception is shown without withheld values (R8).
            log.warning(
                "%s failed in call %s (correlation id %s): %s",
                stage,
                call.call_id,
                call.correlation_id,
                scrub_text(repr(exc), call.secrets),
            )
            return
        try:
            callback(call.correlation_id, exc, info)
        except Exception as failure:
            # Not log.exception: the traceback's messages could carry withheld values.
            log.warning(
                "the diagnostics callback failed (correlation id %s): %s",
                call.correlation_id,
                scrub_text(repr(failure), call.secrets),
            )


async def _run_guardrail(
    guard: ArgumentGuardrail | ResultGuardrail, value: Any, ctx: GuardrailContext
) -> Any:
    """Run one guardrail under its timeout. A sync check cannot be interrupted (it runs on
    the event loop), so one that overran its timeout is failed after it returns: either
    way the call is blocked (R1)."""
    settle = getattr(guard, "settle", None)
    if settle is None:  # a duck-typed guardrail with only run()
        if guard.timeout is None:
            return await guard.run(value, ctx)
        with anyio.fail_after(guard.timeout):
            return await guard.run(value, ctx)
    started = time.perf_counter()
    outcome = guard.check(value, ctx)
    if inspect.isawaitable(outcome):
        # Only an async check can be interrupted; the deadline is set for it alone (a
        # cancel scope per sync check would cost more than most checks).
        if guard.timeout is None:
            outcome = await outcome
        else:
            with anyio.fail_after(guard.timeout):
                outcome = await outcome
    elif guard.timeout is not None and time.perf_counter() - started > guard.timeout:
        raise TimeoutError(f"guardrail {guard.name!r} took longer than {guard.timeout:g}s")
    return settle(outcome)


async def _settle_verdict(evaluator: AuthorityEvaluator, value: Any) -> Verdict:
    if inspect.isawaitable(value):
        value = await value
    if not isinstance(value, Verdict) or value.effect not in ("allow", "deny", "ask"):
        raise TypeError(f"{_evaluator_name(evaluator)} returned {value!r}, not a Verdict")
    return value


def _evaluator_name(evaluator: AuthorityEvaluator) -> str:
    return str(getattr(evaluator, "name", type(evaluator).__name__))


def _verdict_record(verdict: Verdict, failed: bool, secrets_: set[str]) -> dict[str, Any]:
    return {
        "effect": "error" if failed else verdict.effect,
        "reasons": list(verdict.reasons),
        "annotations": dict(verdict.annotations),
        "errors": [_scrub(e, secrets_) for e in verdict.errors],
        "message": _scrub(verdict.message, secrets_),
        "evaluator": verdict.evaluator,
    }


def _schema_problem(
    tool: Tool, arguments: Any, withheld: Any = (), secret_values: set[str] | None = None
) -> str | None:
    """The first few schema violations, safe to show: a violation at or under a withheld
    pointer names only the place, and every message is scrubbed before it is shortened
    (a shortened secret would no longer match itself)."""
    validator = tool.validator
    if validator.is_valid(arguments):
        return None
    errors = list(validator.iter_errors(arguments))[:3]
    parts = []
    for err in errors:
        tokens = [str(p) for p in err.instance_path]
        where = "/" + "/".join(tokens)
        if any(_under_pointer(tokens, pointer) for pointer in withheld):
            parts.append(f"{where}: invalid (value withheld)")
            continue
        message = _scrub(err.message, secret_values or set()) or ""
        parts.append(f"{where}: {_shorten(message)}")
    return "; ".join(parts) or "does not match the schema"


def _under_pointer(tokens: list[str], pointer: str) -> bool:
    """Whether the instance path ``tokens`` is at, under or above ``pointer`` (``*`` matches
    any token). Above counts too: an error about an object names its withheld members."""
    want = _pointer.parse(pointer)
    return all(w == "*" or w == t for w, t in zip(want, tokens, strict=False))


def _shorten(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _values_at(document: Any, pointers: Any) -> set[str]:
    found: set[str] = set()
    for pointer in pointers:
        for _, value in _pointer.find(document, pointer):
            for _, text in _pointer.iter_strings(value):
                if text:
                    found.add(text)
            if isinstance(value, int | float) and not isinstance(value, bool):
                found.add(str(value))
    return found


def _scrub(text: str | None, secret_values: set[str]) -> str | None:
    """Remove withheld values from a message (rule R8; see ``clearance.harness.scrub``)."""
    if text is None or not secret_values:
        return text
    return scrub_text(text, secret_values)


_RECORD_NAMES = frozenset(
    (
        *("tool", "qualified_name", "model_alias", "principal"),
        *("session_id", "turn_id", "call_id", "correlation_id", "ask_id", "grant"),
        *("status", "outcome", "decision", "answer", "how", "duration_us", "timing_us"),
    )
)
"""Fields of a call's records that clearance fills in (names, ids, statuses, timings):
never scrubbed, so that a short withheld value cannot garble what joins records together."""


def _scrub_record(data: dict[str, Any], secret_values: set[str]) -> dict[str, Any]:
    """A call's record without withheld values anywhere in it (R8): arguments, messages,
    results (a tool may echo what it was given), structured content."""
    scrubbed: dict[str, Any] = scrub_json(data, secret_values, keep=_RECORD_NAMES)
    return scrubbed


def _result_reference(result: CallToolResult) -> dict[str, Any]:
    """What the journal keeps of a result: text and structure, images by reference."""
    import hashlib

    body = result.to_json()
    content = body["content"]
    if not any(block.get("type") == "image" for block in content):
        return body  # a fresh copy already; text and structure are kept as they are
    blocks: list[dict[str, Any]] = []
    for block in content:
        if block.get("type") == "image":
            data = str(block.get("data", ""))
            blocks.append(
                {
                    "type": "image",
                    "mimeType": block.get("mimeType"),
                    "sha256": hashlib.sha256(data.encode()).hexdigest(),
                    "base64_chars": len(data),
                }
            )
        else:
            blocks.append(block)
    return {
        "content": blocks,
        "structured_content": result.structured_content,
        "is_error": result.is_error,
    }


def _result_from_json(value: Any) -> CallToolResult:
    if isinstance(value, CallToolResult):
        return value
    if not isinstance(value, dict):
        return normalize_result(value)
    return normalize_result(
        CallToolResult(
            content=value.get("content") or (),
            structured_content=value.get("structured_content"),
            is_error=bool(value.get("is_error", False)),
        )
    )
