"""The second way in: a host that runs its own tools reports the run of a call that
``authorize`` allowed (``record_result``, or ``execution`` around its own run); clearance
journals the start and the end and applies the result guardrails (rule R7: one start and one
end per run; a result for a call that was not allowed is refused).

An allowed authorization is checked again when the call comes to run (rule R12):
``execution`` and ``run_authorized`` refuse one that no longer holds, because it was not
used within the harness's ``authorization_ttl`` (``expired``) or the grant that allowed it
no longer covers the call (``revoked``: a fresh lookup in the grant store, so a revocation
made in another process counts; a store that cannot be read counts as revoked). The refused
authorization is withdrawn: an ``authorization_withdrawn`` record, no ``tool_started``, and
its call id is free to be decided again. ``record_result`` reports a run that already
happened and checks nothing (hosts that can should run inside ``execution``)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal

import anyio

from clearance.errors import ClosedError, NotAuthorizedError, StaleAuthorizationError
from clearance.harness._call_state import CallState
from clearance.harness._redaction import scrub, visible
from clearance.harness._running import Running
from clearance.harness.outcomes import CallOutcome
from clearance.harness.tools import ResultError, normalize_result

if TYPE_CHECKING:
    from clearance.harness.session import Session

__all__ = ["Execution", "HostRuns", "Withdrawal"]

Withdrawal = Literal["expired", "revoked", "withdrawn"]
"""Why an allowed authorization was withdrawn before it was used."""

_WITHDRAWN: dict[str, str] = {
    "expired": "the call's authorization expired before it ran (not used within {ttl} "
    "seconds); it did not run: decide it again",
    "revoked": "the grant that allowed this call no longer covers it (revoked before the "
    "call ran); it did not run",
    "withdrawn": "the call's authorization was withdrawn before it ran; it did not run",
}


class HostRuns(Running):
    """Recording the runs of host-run calls (see the module docstring)."""

    def _authorized(self, session: Session, call_id: str) -> CallState:
        call = session.authorized.get(call_id)
        if call is None:
            raise NotAuthorizedError(call_id)
        return call

    def stale(self, call: CallState) -> Withdrawal | None:
        """Why the allowed, unused authorization of ``call`` no longer holds, if it does
        not (see the module docstring)."""
        harness = self.harness
        if time.monotonic() - call.authorized_at > harness.authorization_ttl:
            return "expired"
        if call.grant is None:
            return None
        tool = call.tool
        assert tool is not None
        principal = call.view.principal if call.view is not None else call.session.principal_text
        try:
            found = harness.grants.find(
                principal, tool.qualified_name, call.arguments, call.session.id
            )
        except Exception as exc:  # fail closed: an unreadable store authorizes nothing
            self._diagnose(call, exc, stage="grant")
            return "revoked"
        return None if found is not None else "revoked"

    async def withdraw(self, session: Session, call_id: str, reason: Withdrawal) -> str:
        """Withdraw the allowed, unused authorization of ``call_id``: it is dropped, the
        journal records ``authorization_withdrawn`` and the call id is free to be decided
        again. Returns what the model may be shown.

        Raises:
            NotAuthorizedError: no such authorization (never allowed, or already used).
        """
        call = self._authorized(session, call_id)
        del session.authorized[call_id]
        session.call_ids.discard(call_id)
        message = _WITHDRAWN[reason].format(ttl=f"{self.harness.authorization_ttl:g}")
        grant = call.grant.grant_id if call.grant is not None else None
        if self.telemetry is not None:
            self.telemetry.end(call, "denied", call.record.get("decision"), ())
        try:
            await self._record(
                call,
                "authorization_withdrawn",
                {
                    **call.identity(),
                    "reason": reason,
                    "grant": grant,
                    "message": message,
                    "correlation_id": call.correlation_id,
                },
            )
        except Exception as exc:  # nothing runs either way: the withdrawal stands
            self._diagnose(call, exc, stage="journal")
        return message

    @asynccontextmanager
    async def execution(self, session: Session, call_id: str) -> AsyncIterator[Execution]:
        """Record the run of an authorized call around the host's own execution: the start
        on entry, the end (with result guardrails) on exit; see ``Session.execution``."""
        call = self._authorized(session, call_id)
        stale = self.stale(call)
        if stale is not None:
            message = await self.withdraw(session, call_id, stale)
            raise StaleAuthorizationError(call_id, stale, message)
        del session.authorized[call_id]
        execution = Execution(call)
        await self._start(call)
        started = time.perf_counter()
        try:
            yield execution
        except BaseException as exc:
            cancelled = isinstance(exc, anyio.get_cancelled_exc_class())
            if not cancelled:
                self._diagnose(call, exc, stage="host")
            with anyio.CancelScope(shield=True):
                execution.outcome = await self._end_run(
                    call,
                    "cancelled" if cancelled else "failed",
                    None,
                    "the call was cancelled"
                    if cancelled
                    else f"the tool failed (correlation id {call.correlation_id})",
                    started,
                )
            raise
        if not execution.reported:
            execution.outcome = await self._end_run(
                call, "failed", None, "the host reported no result", started
            )
            return
        execution.outcome = await self._finish_host_result(
            call, execution.value, execution.error, execution.status, started
        )

    async def record_result(
        self,
        session: Session,
        call_id: str,
        result: Any = None,
        *,
        error: BaseException | str | None = None,
        status: str | None = None,
    ) -> CallOutcome:
        """Record the end of an authorized call that the host ran; see
        ``Session.record_result``."""
        call = self._authorized(session, call_id)
        del session.authorized[call_id]
        await self._start(call)
        return await self._finish_host_result(call, result, error, status, time.perf_counter())

    async def _start(self, call: CallState) -> None:
        """Write the ``tool_started`` of a host-run call (the host already ran it, or is about
        to: the start is on record before the end, R7)."""
        call.started_written = True
        await self._record(
            call,
            "tool_started",
            {
                **call.identity(),
                "arguments": call.view.shown_arguments
                if call.view is not None
                else visible(call.arguments, call.withheld),
                "correlation_id": call.correlation_id,
                "host": True,
            },
        )

    async def _finish_host_result(
        self,
        call: CallState,
        value: Any,
        error: BaseException | str | None,
        status: str | None,
        started: float,
    ) -> CallOutcome:
        if error is not None:
            if isinstance(error, BaseException):
                self._diagnose(call, error, stage="host")
            return await self._end_run(
                call,
                "failed",
                None,
                f"the tool failed (correlation id {call.correlation_id})",
                started,
            )
        if status in ("cancelled", "timeout", "failed"):
            return await self._end_run(call, status, None, f"the call ended: {status}", started)  # type: ignore[arg-type]
        try:
            result = normalize_result(value)
        except ResultError as exc:
            self._diagnose(call, exc, stage="result")
            message = scrub(f"the tool returned an invalid result: {exc}", call.secrets)
            return await self._end_run(call, "failed", None, message, started)
        return await self._end_run(
            call, "error" if result.is_error or status == "error" else "ok", result, None, started
        )


class Execution:
    """A host's run of an authorized call (``async with session.execution(call_id) as run``).

    Report what the tool returned with :meth:`result` (or a failure with :meth:`fail`);
    when the block ends, the run is journaled and result guardrails run, and
    :attr:`outcome` holds what the model may see. An exception that leaves the block is
    recorded as a failure (and goes on).
    """

    def __init__(self, call: CallState) -> None:
        self._call = call
        self.value: Any = None
        self.error: BaseException | str | None = None
        self.status: str | None = None
        self.reported = False
        self.outcome: CallOutcome | None = None

    @property
    def call_id(self) -> str:
        return self._call.call_id

    @property
    def arguments(self) -> dict[str, Any]:
        """The authorized, canonical arguments to run the tool with (a copy)."""
        return self._call.handler_arguments()

    def result(self, value: Any, *, status: str | None = None) -> None:
        """What the tool returned (a string, JSON value, ``CallToolResult``...)."""
        if self.reported:
            raise ClosedError(f"call {self.call_id!r}: a result was already reported")
        self.value, self.status, self.reported = value, status, True

    def fail(self, error: BaseException | str) -> None:
        """The tool failed (the model sees a generic failure with a correlation id)."""
        if self.reported:
            raise ClosedError(f"call {self.call_id!r}: a result was already reported")
        self.error, self.reported = error, True
