"""The pipeline: the only place that orders the stages of a tool call.

::

    resolve tool -> reject reused call id -> validate arguments -> canonical facts
      -> argument guardrails -> evaluator                     (Harness.decide stops here)
      -> [grant store / ask] -> journal call_decided
      -> journal tool_started -> dispatch -> normalize result    (session.call_tool)
         or: the host runs the tool, then record_result            (session.authorize)
      -> result guardrails -> journal tool_finished -> outcome for the model

Two ways in, one pipeline: ``session.call_tool`` (clearance runs the handler) and
``session.authorize`` + ``session.record_result`` for hosts that run their tools
themselves; both pass every stage above, in this order, once per call. Every failure before
dispatch ends the call denied or blocked, with a correlation id, and the handler never runs
(rule R1). Evaluators and guardrails return values; only this module turns them into
outcomes. The stages live in :mod:`clearance.harness._stages`, ``_approval``, ``_running``
and ``_host_runs``; this module is the order.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio

from clearance.harness._approval import Approval, what_asks
from clearance.harness._call_state import CallState, elapsed_us, new_correlation_id
from clearance.harness._host_runs import Execution, HostRuns
from clearance.harness._redaction import scrub, visible, visible_provenance
from clearance.harness._stages import Stages
from clearance.harness.cancellation import CallHandle
from clearance.harness.outcomes import Authorization, CallOutcome, Decision, OutcomeStatus
from clearance.harness.scrub import scrub_json

if TYPE_CHECKING:
    from clearance.harness.session import Harness, Session
    from clearance.provenance import Provenance

__all__ = ["CallOutcome", "Decision", "Execution", "OutcomeStatus", "Pipeline"]

log = logging.getLogger("clearance")


class Pipeline(Stages, Approval, HostRuns):
    """Runs calls for a :class:`~clearance.harness.session.Harness`: the stages
    (:mod:`~clearance.harness._stages`), the approval (:mod:`~clearance.harness._approval`),
    the run (:mod:`~clearance.harness._running`) and the host's reports
    (:mod:`~clearance.harness._host_runs`), in the order this class gives them."""

    def __init__(self, harness: Harness) -> None:
        super().__init__(harness)

    # -- clearance runs the tool ----------------------------------------------------------

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
        call = self._new_call(session, name, arguments, call_id, turn_id)
        # From here until its handler ends the call can be cancelled by Session.aclose,
        # and until it has ended the close waits for it: once aclose returns, no handler
        # of the session starts, and every call has its one end on record (R7).
        call.running = running = CallHandle()
        session._enter()
        session.running.add(running)
        try:
            ended = await self._guarded(call, context, host=False)
            if ended is not None:
                return ended
            return await self._run(call)
        finally:
            session.running.discard(running)
            session._leave()

    # -- the host runs the tool -----------------------------------------------------------

    async def authorize(
        self,
        session: Session,
        name: str,
        arguments: Any,
        *,
        call_id: str | None = None,
        turn_id: str | None = None,
        context: Mapping[str, Any] | None = None,
        wait: bool | None = None,
        resume_key: str | None = None,
    ) -> Authorization:
        """Every stage up to dispatch, as :meth:`call` runs them, for a host that runs the
        tool itself; see ``Session.authorize``."""
        call = self._new_call(session, name, arguments, call_id, turn_id)
        call.host, call.wait, call.resume_key = True, wait, resume_key
        call.running = running = CallHandle()
        session._enter()
        session.running.add(running)
        try:
            ended = await self._guarded(call, context, host=True)
        finally:
            session.running.discard(running)
            session._leave()
        if ended is not None and call.pending:
            # The same call may be tried again (the call id stays free) once answered.
            session.call_ids.discard(call.call_id)
            tool = call.tool
            assert tool is not None
            return Authorization(
                status="pending",
                call_id=call.call_id,
                tool=tool.model_alias,
                qualified_name=tool.qualified_name,
                message=ended.message,
                decision="ask",
                reasons=ended.reasons,
                correlation_id=call.correlation_id,
                ask_id=call.record.get("ask", {}).get("ask_id"),
                outcome=ended,
            )
        if ended is not None:
            return Authorization(
                status="denied",
                call_id=call.call_id,
                tool=ended.tool,
                qualified_name=ended.qualified_name,
                message=ended.message,
                decision=ended.decision,
                reasons=ended.reasons,
                correlation_id=call.correlation_id,
                grant=ended.grant,
                ask_id=call.record.get("ask", {}).get("ask_id"),
                answered_by=call.record.get("ask", {}).get("answered_by"),
                outcome=ended,
            )
        tool = call.tool
        assert tool is not None
        call.authorized_at = time.monotonic()
        session.authorized[call.call_id] = call
        return Authorization(
            status="allowed",
            call_id=call.call_id,
            tool=tool.model_alias,
            qualified_name=tool.qualified_name,
            arguments=call.handler_arguments(),
            decision=call.record.get("decision"),
            reasons=tuple(call.record.get("reasons", ())),
            correlation_id=call.correlation_id,
            grant=call.record.get("grant"),
            ask_id=call.record.get("ask", {}).get("ask_id"),
            answered_by=call.record.get("ask", {}).get("answered_by"),
        )

    async def run_authorized(self, session: Session, call_id: str) -> CallOutcome:
        """Run an authorized call as :meth:`call` runs it (a slot in the harness's queue,
        ``tool_started``, the handler, result guardrails, ``tool_finished``); see
        ``Session.run_authorized``."""
        call = self._authorized(session, call_id)
        stale = self.stale(call)
        if stale is not None:
            message = await self.withdraw(session, call_id, stale)
            return self._outcome(
                call, "denied", message, call.record.get("decision"), call.record.get("reasons", ())
            )
        del session.authorized[call_id]
        call.running = running = CallHandle()
        session._enter()
        session.running.add(running)
        try:
            try:
                ended = await self._admit(call)
            except Exception as exc:
                return await self._failed(call, exc)
            except BaseException as exc:
                return await self._interrupted(call, running, exc)
            if ended is not None:
                return ended
            return await self._run(call)
        finally:
            session.running.discard(running)
            session._leave()

    # -- deciding only --------------------------------------------------------------------

    async def decide(
        self,
        session: Session,
        name: str,
        arguments: Any,
        *,
        context: Mapping[str, Any] | None = None,
        provenance: Provenance | None = None,
        with_provenance: bool = True,
        caller: Mapping[str, Any] | None = None,
    ) -> Decision:
        """Run every stage before the ask (resolve, schema, facts, argument guardrails,
        evaluator) and say what would happen, without asking or running anything, and
        without journaling unless ``caller`` is given (see :meth:`_answered`);
        ``provenance``: the ledger to describe the call against (default: the session's);
        ``with_provenance``: see ``Harness.decide``."""
        call_id = "decide" if caller is None else "pdp_" + secrets.token_hex(8)
        call = self._new_call(session, name, arguments, call_id, None)
        call.dry = True  # nothing is recorded (see Recorder._end_early)
        call.ledger = provenance
        ended = await self._decide(call, context or {}, dry=True)
        call.timing["total"] = elapsed_us(call.t0)
        record = call.record
        view = call.view
        if ended is None:
            assert call.verdict is not None and view is not None
            asking = what_asks(call.verdict, call.guard_asks)
            if asking is not None:  # reported, not put
                outcome = "ask"
                # As the ask would show it: without withheld values (R8).
                message = scrub(asking[1], call.secrets) or asking[1]
                record.update(stage="ask", decision="ask", reasons=asking[0], message=message)
            else:
                outcome = "allow"
                record.update(stage="evaluator", decision="allow", reasons=call.verdict.reasons)
        else:
            outcome = {"invalid": "invalid", "blocked": "blocked"}.get(ended.status, "deny")
            if record.get("decision") == "error":
                outcome = "error"
        decision = Decision(
            outcome=outcome,  # type: ignore[arg-type]
            stage=record.get("stage", "evaluator"),
            reasons=tuple(record.get("reasons", ())),
            message=record.get("message"),
            verdict=record.get("verdict"),
            guardrails=list(record.get("guardrails", [])),
            schema=record.get("schema"),
            timing_us=dict(call.timing),
            arguments=_shown_arguments(call),
            qualified_name=call.tool.qualified_name if call.tool else None,
            shadow=record.get("shadow"),
            facts=_shown_facts(call),
            provenance=scrub_json(visible_provenance(call.provenance, call.withheld), call.secrets)
            if call.provenance is not None and with_provenance
            else None,
        )
        if caller is not None:
            await self._answered(call, decision, caller)
        return decision

    async def _answered(
        self, call: CallState, decision: Decision, caller: Mapping[str, Any]
    ) -> None:
        """Journal a decision answered to another enforcement point (``clearance pdp``):
        one ``call_decided`` record of outcome ``answered``, naming its ``caller``, as a
        call's decision is recorded (arguments, schema, facts, the provenance read, the
        verdict). Nothing follows it: the caller runs the call or not.

        Raises:
            Exception: the journal failed (the caller answers the evaluation as failed)."""
        data = self._decided(
            call, "answered", decision.message, call.record.get("decision"), decision.reasons, None
        )
        data["caller"] = dict(caller)
        await self._record(call, "call_decided", data)

    # -- the order ------------------------------------------------------------------------

    def _new_call(
        self,
        session: Session,
        name: str,
        arguments: Any,
        call_id: str | None,
        turn_id: str | None,
    ) -> CallState:
        return CallState(
            session,
            call_id if call_id is not None else "call_" + secrets.token_hex(6),
            turn_id,
            name,
            arguments,
            new_correlation_id(),
            time.perf_counter(),
        )

    async def _decide(
        self, call: CallState, context: Mapping[str, Any], *, dry: bool = False
    ) -> CallOutcome | None:
        """The stages that decide, in order; the outcome when the call ends in one of them.
        A dry run (``decide``) claims no call id and stops before the approval.

        The stages that never wait run as plain calls; only guardrails, the evaluator and
        an approval are awaited, and only when there is something to await."""
        early = self._resolve(call)
        if early is None and not dry:
            early = self._claim_call_id(call)
        if early is None:
            early = self._validate(call)
        if early is None:
            early = self._canonicalize(call)
        if early is not None:
            return await self._end_early(call, early.status, early.message, stage=early.stage)
        tool = call.tool
        assert tool is not None
        guards = self._argument_guards_of(tool)
        if guards:
            ended = await self._guard_arguments(call, guards)
            if ended is not None:
                return ended
        else:
            self._no_argument_guardrails(call)
        ended = await self._evaluate(call, context)
        if ended is not None or dry:
            return ended
        verdict = call.verdict
        assert verdict is not None
        if verdict.effect == "allow" and not call.guard_asks:
            self._approved(call, verdict)
            return None
        return await self._approve(call)

    async def _guarded(
        self, call: CallState, context: Mapping[str, Any] | None, *, host: bool
    ) -> CallOutcome | None:
        """Decide, then admit (clearance runs the tool) or authorize (the host does); the
        outcome when the call ends before running. A bug in a stage, or a cancellation,
        still ends the call exactly once (R1, R7)."""
        running = call.running
        assert running is not None
        if self.telemetry is not None:
            self.telemetry.begin(call)
        try:
            if self.harness.unjournaled:
                await self.journal_harness_records()
            if call.session.unjournaled:
                await self._journal_messages(call.session)
            ended = await self._decide(call, context or {})
            if ended is not None:
                return ended
            if host:
                return await self._authorize_host(call)
            return await self._admit(call)
        except Exception as exc:  # a bug in a stage: fail closed (R1), never escape
            return await self._failed(call, exc)
        except BaseException as exc:
            return await self._interrupted(call, running, exc)

    async def _failed(self, call: CallState, exc: Exception) -> CallOutcome:
        self._diagnose(call, exc, stage="pipeline")
        if call.admitted:
            self.dispatcher.release()
            call.admitted = False
        not_run = (
            f"the pipeline failed; the call was not run (correlation id {call.correlation_id})"
        )
        if call.started_written:  # the start is on record: end it, do not run
            await self._finished(call, "failed", None, "the pipeline failed", time.perf_counter())
            return self._outcome(call, "failed", not_run, "error", ())
        if call.decided_written:
            return self._outcome(call, "denied", not_run, "error", ())
        return await self._end_early(
            call,
            "denied",
            "the pipeline failed; the call was not run",
            stage=call.record.get("stage", "pipeline"),
            decision="error",
        )

    async def _interrupted(
        self, call: CallState, running: CallHandle, exc: BaseException
    ) -> CallOutcome:
        """Cancelled while deciding (an ask, an async guardrail or evaluator, a journal
        write): the call still ends exactly once (R7), then the cancellation goes on,
        unless it was the session's close (then the call ends ``cancelled``)."""
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
            raise exc
        return ended or self._outcome(
            call,
            "cancelled",
            f"the session closed; the call was not run (correlation id {call.correlation_id})",
            call.record.get("decision"),
            (),
        )

    async def _authorize_host(self, call: CallState) -> CallOutcome | None:
        """The host runs the call: write its ``call_decided`` (outcome ``authorized``)."""
        session = call.session
        if session.closed:
            return await self._end_early(
                call,
                "cancelled",
                "the session closed before the call could run",
                stage="dispatch",
                decision=call.record.get("decision", "allow"),
                reasons=call.record.get("reasons", ()),
            )
        running = call.running
        if running is not None:
            running.hold()
        try:
            data = self._decided(
                call,
                "authorized",
                None,
                call.record["decision"],
                call.record.get("reasons", ()),
                call.grant,
            )
            await self._record(call, "call_decided", data)
        except Exception as exc:
            if running is not None:
                running.unhold()
                running.quiet = True
            self._diagnose(call, exc, stage="journal")
            return self._outcome(
                call,
                "denied",
                f"the journal failed; the call was not run (correlation id {call.correlation_id})",
                "error",
                (),
            )
        call.record["grant"] = call.grant.grant_id if call.grant else None
        if running is not None:
            await running.release()
        return None

    async def _admit(self, call: CallState) -> CallOutcome | None:
        """Clearance runs the call: a slot in the harness's queue, then ``call_decided``
        and ``tool_started`` together."""
        session = call.session
        decision = call.record["decision"]
        reasons = call.record.get("reasons", ())
        if session.closed:
            return await self._end_early(
                call,
                "cancelled",
                "the session closed before the call could run",
                stage="dispatch",
                decision=decision,
                reasons=reasons,
            )
        # Admission: refuse at once rather than queue without bound.
        if not self.dispatcher.admit():
            return await self._end_early(
                call,
                "overloaded",
                "the harness is overloaded; try again later",
                stage="dispatch",
                decision=decision,
                reasons=reasons,
            )
        call.admitted = True
        running = call.running
        if running is not None:
            # call_decided and tool_started go out together: a close meanwhile lands
            # after both, and the call then ends cancelled without running (R7).
            running.hold()
        # Both records are written here, under the hold above (not through _record: two
        # coroutines less, and the hold already does what _record's would).
        publish = self.harness.hub.publish
        try:
            if not call.decided_written:  # an authorized call has its call_decided already
                data = self._decided(call, "dispatched", None, decision, reasons, call.grant)
                event, waiting = self._write(call, "call_decided", data)
                if waiting is not None:
                    event = (await waiting) or event
                publish(event)
            call.started_written = True
            view = call.view
            assert view is not None
            event, waiting = self._write(
                call,
                "tool_started",
                {
                    **call.names,
                    "arguments": view.shown_arguments,
                    "correlation_id": call.correlation_id,
                },
            )
            if waiting is not None:
                event = (await waiting) or event
            publish(event)
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
        call.record["grant"] = call.grant.grant_id if call.grant else None
        if running is not None:
            if running.requested:  # closed meanwhile: the cancellation lands here
                await running.release()
            else:
                running.holds -= 1
        return None


def _shown_arguments(call: CallState) -> dict[str, Any] | None:
    """The arguments ``decide`` reports: the view's, or for a call refused before its view
    was made, those known then, scrubbed the same way (R8)."""
    if call.view is not None:
        return call.view.shown_arguments
    if not isinstance(call.arguments, dict):
        return None
    shown: dict[str, Any] = scrub_json(visible(call.arguments, call.withheld), call.secrets)
    return shown


def _shown_facts(call: CallState) -> dict[str, Any] | None:
    """The facts ``decide`` reports (see :func:`_shown_arguments`)."""
    if call.view is not None:
        return call.view.shown_facts
    if call.facts is None:
        return None
    facts: dict[str, Any] = scrub_json(call.record.get("facts") or {}, call.secrets)
    return facts
