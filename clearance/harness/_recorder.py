"""How a call's steps reach the journal and the diagnostics callback, and how a call that
ends early gets its one ``call_decided`` (rule R7) and the outcome the model sees."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import anyio

from clearance._limits import json_fault
from clearance.harness._call_state import CallState
from clearance.harness._records import result_reference
from clearance.harness._redaction import scrub, scrub_record, visible
from clearance.harness.grants import Grant
from clearance.harness.journal import Journal, JournalEvent
from clearance.harness.outcomes import CallOutcome, OutcomeStatus
from clearance.harness.scrub import scrub_json, scrub_text
from clearance.harness.telemetry import Telemetry
from clearance.harness.tools import CallContext, CallToolResult

if TYPE_CHECKING:
    from clearance.harness.session import Harness, Session

__all__ = ["Early", "Recorder"]

log = logging.getLogger("clearance")


Appender = Callable[[JournalEvent], Awaitable[Any] | None]
"""A journal's ``append_now`` (``None`` when recorded, else an awaitable that finishes
recording), or its ``append`` (always an awaitable)."""


def _append_now(journal: Journal) -> Appender | None:
    """``journal.append_now`` when it belongs with ``journal.append`` (see
    ``Recorder._appender``), else None."""
    owners = {}
    for name in ("append", "append_now"):
        if name in getattr(journal, "__dict__", ()):
            return None  # replaced on the instance
        owners[name] = next((c for c in type(journal).__mro__ if name in vars(c)), None)
    if owners["append_now"] is None or owners["append_now"] is not owners["append"]:
        return None
    now: Appender = getattr(journal, "append_now")  # noqa: B009 (not every sink has it)
    return now


class Early(NamedTuple):
    """How a stage that never waits ends a call that will not run: the pipeline gives it
    to :meth:`Recorder._end_early`, which records the call's one ``call_decided``."""

    status: OutcomeStatus
    message: str
    stage: str


class Recorder:
    """Writes a call's records (the base of the pipeline's stages)."""

    def __init__(self, harness: Harness) -> None:
        self.harness = harness
        self.dispatcher = harness.dispatcher
        self._withheld: dict[tuple[str, str], set[str]] = {}
        """(session id, call id) -> withheld values, while a handler that was given some
        runs (for its progress records)."""
        self._journal: Journal | None = None
        self._append: Appender = harness.journal.append
        self.telemetry: Telemetry | None = harness.telemetry
        """Where calls are traced (None: telemetry off, each hook one ``is None`` test)."""

    def _appender(self, journal: Journal) -> Appender:
        """How records are appended to ``journal``: its ``append_now`` when it has one
        (most records then need no coroutine at all), else its ``append``.

        ``append_now`` is used only where it is the same sink's as ``append``: defined
        by the class that defines ``append``, neither replaced on the instance. A sink
        that changes ``append`` (a subclass that fails, filters or forwards records)
        inherits an ``append_now`` that knows nothing of it, and bypassing its ``append``
        could run a handler whose start was never recorded (R1)."""
        self._append = _append_now(journal) or journal.append
        self._journal = journal
        return self._append

    def _write(
        self, call: CallState, type_: Any, data: dict[str, Any]
    ) -> tuple[JournalEvent, Awaitable[Any] | None]:
        """Build a call's record (withheld values scrubbed) and start appending it: the
        event, and ``None`` when it is recorded, else what to await to finish. The caller
        holds the call (see :meth:`_record`) and publishes the event once recorded."""
        if call.secrets:
            data = scrub_record(data, call.secrets)
        event = JournalEvent(type_, call.session.id, call.turn_id, call.call_id, data)
        journal = self.harness.journal
        append = self._append if journal is self._journal else self._appender(journal)
        return event, append(event)

    async def _record(self, call: CallState, type_: Any, data: dict[str, Any]) -> JournalEvent:
        running = call.running
        if running is None or running.task is None:
            event, waiting = self._write(call, type_, data)
            if waiting is not None:
                event = (await waiting) or event
            self.harness.hub.publish(event)
            return event
        # A write is never cancelled halfway (the record may be on disk already): a close
        # that comes meanwhile takes effect once the write is done (see CallHandle).
        running.holds += 1
        try:
            event, waiting = self._write(call, type_, data)
            if waiting is not None:
                event = (await waiting) or event
        except BaseException:
            running.holds -= 1
            raise
        self.harness.hub.publish(event)
        if running.requested:  # a close came meanwhile: delivered now, if this was the last hold
            await running.release()
        else:
            running.holds -= 1
        return event

    def _decided(
        self,
        call: CallState,
        outcome: str,
        message: str | None,
        decision: str | None,
        reasons: Sequence[str],
        grant: Grant | None,
    ) -> dict[str, Any]:
        """The call's ``call_decided`` record, to write with :meth:`_record` next (the call
        counts as decided from here: a failure to write it still ends the call)."""
        timing = call.timing
        timing["total"] = int((time.perf_counter() - call.t0) * 1_000_000)
        record = call.record
        view = call.view
        if view is not None:
            arguments: Any = view.shown_arguments
        else:  # refused before its view was made: what was known then, scrubbed alike
            arguments = call.arguments
            if type(arguments) is not dict:
                arguments = None
            elif call.withheld:
                arguments = visible(arguments, call.withheld)
        if grant is not None:
            grant_id: str | None = grant.grant_id
        else:
            ask = record.get("ask")
            grant_id = ask.get("grant") if ask is not None else None
        data = {
            **call.names,
            "principal": call.session.principal_text,
            "arguments": arguments,
            **record,
            "decision": decision,
            "reasons": list(reasons),
            "grant": grant_id,
            "outcome": outcome,
            "message": message,
            "correlation_id": call.correlation_id,
            "timing_us": timing.copy(),
            "host": self.harness.host,
        }
        record["decision"] = decision
        call.decided_written = True
        return data

    async def _end_early(
        self,
        call: CallState,
        status: OutcomeStatus,
        message: str,
        *,
        stage: str,
        decision: str | None = None,
        reasons: Sequence[str] = (),
        outcome: str | None = None,
    ) -> CallOutcome:
        """End a call that will not run: its one ``call_decided`` (``outcome`` in the
        record, default the status) and the outcome the model sees."""
        call.record["stage"] = stage
        message = scrub(message, call.secrets) or status
        if call.dry:
            call.record.update(decision=decision, reasons=reasons, message=message)
            return self._outcome(call, status, message, decision, reasons)
        if outcome == "pending" and call.pending_recorded:
            # The same call tried again while its ask waits: its pending is on record.
            call.decided_written = True
            return self._outcome(
                call, status, f"{message} (correlation id {call.correlation_id})", decision, reasons
            )
        running = call.running
        if running is not None:
            running.hold()  # the call ends here: a close meanwhile has nothing to cancel
        try:
            with anyio.CancelScope(shield=True):
                data = self._decided(call, outcome or status, message, decision, reasons, None)
                await self._record(call, "call_decided", data)
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
        call: CallState,
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
            **call.names,
            "status": status,
            "duration_us": int((time.perf_counter() - started) * 1_000_000),
            "correlation_id": call.correlation_id,
        }
        if message:
            data["message"] = message
        if result_blocked:
            data["result_blocked"] = True
        if result is not None:
            data["result"] = result_reference(result)
        guardrails = call.record.get("result_guardrails")
        if guardrails:
            data["result_guardrails"] = guardrails
        try:
            await self._record(call, "tool_finished", data)
        except Exception as exc:
            self._diagnose(call, exc, stage="journal")
        if call.trace is not None:
            assert self.telemetry is not None
            record = call.record
            decision = record.get("decision")
            self.telemetry.end(
                call, status, decision, record.get("reasons", ()), result_blocked=result_blocked
            )

    def _outcome(
        self,
        call: CallState,
        status: OutcomeStatus,
        message: str | None,
        decision: str | None,
        reasons: Sequence[str],
        result: CallToolResult | None = None,
    ) -> CallOutcome:
        if call.trace is not None:  # a call that ends without running (else _finished)
            assert self.telemetry is not None
            self.telemetry.end(call, status, decision, reasons)
        names = call.names
        record = call.record
        grant = record.get("grant")
        if not grant and "ask" in record:
            grant = record["ask"].get("grant")
        return CallOutcome(
            call.call_id,
            names["tool"],
            names["qualified_name"],
            names["model_alias"],
            status,
            result,
            message,
            call.correlation_id,
            decision,
            reasons if type(reasons) is tuple else tuple(reasons),
            grant,
        )

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

    async def journal_harness_records(self) -> None:
        """Journal the harness's own records waiting to be written (policy reloads)."""
        pending = self.harness.unjournaled
        while pending:
            await self.harness.journal.append(pending.popleft())

    async def _journal_messages(self, session: Session) -> None:
        """Journal the messages and results the host gave ``session`` since its last call
        (``message_added``; ``Harness(journal_messages=True)``), before the call is
        decided: a journal export gives each call the conversation it was decided in. A
        content no store can hold is recorded as ``unrecorded`` with the reason."""
        pending, session.unjournaled = session.unjournaled, []
        for data in pending:
            fault = json_fault(data.get("content"))
            if fault is not None:
                data = {k: v for k, v in data.items() if k != "content"}
                data["unrecorded"] = f"the content {fault}"
            await self.harness.journal.append(
                JournalEvent("message_added", session.id, None, None, data)
            )

    def _diagnose(self, call: CallState, exc: BaseException, *, stage: str) -> None:
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
