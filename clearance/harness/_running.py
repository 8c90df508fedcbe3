"""Running a call's handler, and ending a run: a slot in the harness's queue, the handler
under its timeout and cancellation, the result normalized, result guardrails, and the run's
one ``tool_finished`` (rule R7), whoever ran the tool."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import anyio

from clearance import _pointer
from clearance.guardrails.base import GuardrailContext
from clearance.harness._call_state import CallState, elapsed_us
from clearance.harness._guards import FAILED, check_guardrail_now
from clearance.harness._provenance import remember_result
from clearance.harness._recorder import Recorder
from clearance.harness._records import result_from_json
from clearance.harness._redaction import scrub
from clearance.harness.outcomes import CallOutcome, OutcomeStatus
from clearance.harness.tools import (
    CallContext,
    CallToolResult,
    ResultError,
    Tool,
    normalize_result,
)

__all__ = ["Running"]


class Running(Recorder):
    """Runs handlers and ends runs (see the module docstring)."""

    def __init__(self, harness: Any) -> None:
        super().__init__(harness)
        self._result_guards: dict[str, tuple[Any, ...]] = {}

    async def _run(self, call: CallState) -> CallOutcome:
        """Dispatch an admitted call; always writes exactly one ``tool_finished``."""
        tool, session = call.tool, call.session
        assert tool is not None
        ctx = CallContext.for_call(
            session.id,
            call.turn_id,
            call.call_id,
            tool.qualified_name,
            tool.model_alias,
            session.principal,
            self,
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
                        result = CallToolResult(raw) if type(raw) is str else normalize_result(raw)
                        status = "error" if result.is_error else "ok"
                    except ResultError as exc:
                        status = "failed"
                        message = scrub(f"the tool returned an invalid result: {exc}", call.secrets)
                        self._diagnose(call, exc, stage="result")
            finally:
                session.running.discard(running)
                self.dispatcher.release()
                ctx.finish()
                if call.secrets:
                    self._withheld.pop((session.id, call.call_id), None)
            if cancelled:
                status, message, result = "cancelled", "the call was cancelled", None
            finished = True
            return await self._end_run(call, status, result, message, call.started_at or started)
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

    async def _end_run(
        self,
        call: CallState,
        status: OutcomeStatus,
        result: CallToolResult | None,
        message: str | None,
        started: float,
    ) -> CallOutcome:
        """Result guardrails, then the call's one ``tool_finished``; the outcome."""
        ran_status = status
        if result is not None:
            tool = call.tool
            assert tool is not None
            guards = self._result_guards_of(tool)
            if guards:
                t = time.perf_counter()
                status, result, message = await self._guard_result(call, result, guards)
                call.timing["result_guardrails"] = elapsed_us(t)
            if result is not None and (status == "ok" or status == "error"):
                # What the model is about to read enters the session's provenance.
                remember_result(
                    call.session.provenance,
                    tool.qualified_name,
                    call.call_id,
                    result,
                    lambda exc: self._diagnose(call, exc, stage="provenance"),
                    call.arguments,
                )
        await self._finished(
            call,
            ran_status if status == "blocked" else status,
            result,
            message,
            started,
            result_blocked=status == "blocked",
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
        self, call: CallState, tool: Tool, ctx: CallContext
    ) -> tuple[OutcomeStatus, Any, str | None]:
        """Wait for a slot, then run the handler; the slot is released however it ends."""
        lock = call.session.lock
        dispatcher = self.dispatcher
        if not dispatcher.try_acquire_slot(tool, lock):
            await dispatcher.acquire_slot(tool, lock)
        try:
            running = call.running
            if running is not None and running.requested:
                # The session closed before the handler could start (a backend where the
                # close only flags the call): it never starts.
                return "cancelled", None, "the call was cancelled"
            call.started_at = time.perf_counter()
            if call.trace is not None:  # the handler runs in the call's dispatch span
                assert self.telemetry is not None
                return await self.telemetry.dispatch(call, self._invoke, call, tool, ctx)
            if tool.timeout is None and tool.is_async:  # the common case, in this frame
                try:
                    return "ok", await tool.handler(call.dispatch_arguments, ctx), None
                except Exception as exc:
                    return self._handler_failed(call, ctx, exc)
            return await self._invoke(call, tool, ctx)
        finally:
            dispatcher.release_slot(tool, lock)

    async def _invoke(
        self, call: CallState, tool: Tool, ctx: CallContext
    ) -> tuple[OutcomeStatus, Any, str | None]:
        deadline: anyio.CancelScope | None = None
        try:
            if tool.timeout is None:
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
                return self._handler_failed(call, ctx, exc)
        ctx.cancel()
        return "timeout", None, f"the call timed out after {tool.timeout:g}s"

    def _handler_failed(
        self, call: CallState, ctx: CallContext, exc: Exception
    ) -> tuple[OutcomeStatus, Any, str | None]:
        """A handler raised: the diagnostics get the exception, the model a generic
        failure (or ``cancelled``, when the call was cancelled meanwhile)."""
        self._diagnose(call, exc, stage="handler")
        if ctx.cancelled:
            return "cancelled", None, "the call was cancelled"
        return "failed", None, f"the tool failed (correlation id {call.correlation_id})"

    def _result_guards_of(self, tool: Tool) -> tuple[Any, ...]:
        """The result guardrails that apply to ``tool``, in order (found once per tool)."""
        guards = self._result_guards.get(tool.qualified_name)
        if guards is None:
            guards = self._result_guards[tool.qualified_name] = tuple(
                g for g in self.harness.result_guardrails if g.applies_to(tool.qualified_name)
            )
        return guards

    async def _guard_result(
        self, call: CallState, result: CallToolResult, guards: tuple[Any, ...]
    ) -> tuple[OutcomeStatus, CallToolResult | None, str | None]:
        """The result guardrails, in order: the result the model sees, or why it is
        withheld."""
        tool, session = call.tool, call.session
        assert tool is not None
        gctx = GuardrailContext(
            tool.qualified_name,
            tool.model_alias,
            session.principal,
            session.id,
            call.turn_id,
            call.call_id,
            "result",
            session.provenance,
        )
        value = result.to_json()
        entries: list[dict[str, Any]] = []
        call.record["result_guardrails"] = entries

        def diagnose(exc: BaseException, stage: str) -> None:
            self._diagnose(call, exc, stage=stage)

        for guard in guards:
            # A sync check (most are) is run and recorded without a coroutine.
            checked = check_guardrail_now(
                guard, value, gctx, entries, secret_values=call.secrets, diagnose=diagnose
            )
            if not isinstance(checked, tuple):
                checked = await checked
            outcome = checked[0]
            if outcome is FAILED:
                return (
                    "blocked",
                    None,
                    f"result guardrail {guard.name!r} failed; the result was withheld "
                    f"(correlation id {call.correlation_id})",
                )
            if outcome is None:
                continue
            if outcome.action == "block":
                return (
                    "blocked",
                    None,
                    f"the result was withheld by guardrail {guard.name!r}: "
                    f"{scrub(outcome.message, call.secrets)}",
                )
            if outcome.action == "redact":
                value = _pointer.redact(value, outcome.pointers)
            elif outcome.action == "replace":
                value = outcome.value
        try:
            final = result_from_json(value)
        except (ResultError, KeyError, TypeError) as exc:
            self._diagnose(call, exc, stage="result guardrails")
            return (
                "blocked",
                None,
                "result guardrails produced an invalid result "
                f"(correlation id {call.correlation_id})",
            )
        return ("error" if final.is_error else "ok"), final, None
