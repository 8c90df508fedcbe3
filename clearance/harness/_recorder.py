"""How a call's steps reach the journal and the diagnostics callback, and how a call that
ends early gets its one ``call_decided`` (rule R7) and the outcome the model sees."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio

from clearance.harness._call_state import CallState, elapsed_us
from clearance.harness._records import result_reference
from clearance.harness._redaction import scrub, scrub_record, visible
from clearance.harness.grants import Grant
from clearance.harness.journal import JournalEvent
from clearance.harness.outcomes import CallOutcome, OutcomeStatus
from clearance.harness.scrub import scrub_json, scrub_text
from clearance.harness.tools import CallContext, CallToolResult

if TYPE_CHECKING:
    from clearance.harness.session import Harness

__all__ = ["Recorder"]

log = logging.getLogger("clearance")


class Recorder:
    """Writes a call's records (the base of the pipeline's stages)."""

    def __init__(self, harness: Harness) -> None:
        self.harness = harness
        self.dispatcher = harness.dispatcher
        self._withheld: dict[tuple[str, str], set[str]] = {}
        """(session id, call id) -> withheld values, while a handler that was given some
        runs (for its progress records)."""

    async def _record(self, call: CallState, type_: Any, data: dict[str, Any]) -> JournalEvent:
        if call.secrets:
            data = scrub_record(data, call.secrets)
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
        call: CallState,
        outcome: str,
        message: str | None,
        decision: str | None,
        reasons: Sequence[str],
        grant: Grant | None,
    ) -> None:
        call.timing["total"] = elapsed_us(call.t0)
        data = {
            **call.identity(),
            "principal": str(call.session.principal),
            "arguments": visible(call.arguments, call.withheld)
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
        running = call.running
        if running is not None:
            running.hold()  # the call ends here: a close meanwhile has nothing to cancel
        try:
            with anyio.CancelScope(shield=True):
                await self._decided(call, outcome or status, message, decision, reasons, None)
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
            **call.identity(),
            "status": status,
            "duration_us": elapsed_us(started),
            "correlation_id": call.correlation_id,
        }
        if message:
            data["message"] = message
        if result_blocked:
            data["result_blocked"] = True
        if result is not None:
            data["result"] = result_reference(result)
        if call.record.get("result_guardrails"):
            data["result_guardrails"] = call.record["result_guardrails"]
        try:
            await self._record(call, "tool_finished", data)
        except Exception as exc:
            self._diagnose(call, exc, stage="journal")

    def _outcome(
        self,
        call: CallState,
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
