"""The one runner of guardrails, for both stages: it runs a guardrail under its timeout,
records its outcome, and says what to enforce (an advisory guardrail's outcome is recorded,
never enforced; a guardrail that raises or times out blocks the call, rule R1)."""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from clearance.guardrails.base import (
    ArgumentGuardrail,
    GuardrailContext,
    GuardrailOutcome,
    ResultGuardrail,
)
from clearance.harness._redaction import scrub

__all__ = ["FAILED", "check_guardrail", "check_guardrail_now", "run_guardrail"]

FAILED: Any = object()
"""What :func:`check_guardrail` returns for an enforcing guardrail that raised or timed out."""

Diagnose = Callable[[BaseException, str], None]


async def run_guardrail(
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


async def check_guardrail(
    guard: Any,
    value: Any,
    ctx: GuardrailContext,
    entries: list[dict[str, Any]],
    *,
    secret_values: set[str],
    diagnose: Diagnose,
) -> tuple[Any, dict[str, Any]]:
    """Run one guardrail (either stage) and record its outcome in ``entries``.

    Returns the outcome to enforce; ``None`` when there is nothing to enforce (an
    advisory guardrail, or one that failed while advisory); :data:`FAILED` when it raised
    or timed out and is enforcing (the caller blocks: R1).
    """
    checked = check_guardrail_now(
        guard, value, ctx, entries, secret_values=secret_values, diagnose=diagnose
    )
    if isinstance(checked, tuple):
        return checked
    return await checked


def check_guardrail_now(
    guard: Any,
    value: Any,
    ctx: GuardrailContext,
    entries: list[dict[str, Any]],
    *,
    secret_values: set[str],
    diagnose: Diagnose,
) -> tuple[Any, dict[str, Any]] | Awaitable[tuple[Any, dict[str, Any]]]:
    """:func:`check_guardrail` without a coroutine for a sync check (the common case):
    the same ``(outcome, entry)``, or, when the check must be awaited (an async check, a
    guardrail with only ``run()``), an awaitable of it. The guardrail's check is called
    once either way; what it raises, returns or overruns is recorded as
    :func:`check_guardrail` records it."""
    entry: dict[str, Any] = {"name": guard.name, "advisory": guard.advisory}
    entries.append(entry)
    settle = getattr(guard, "settle", None)
    if settle is None:  # a duck-typed guardrail with only run()
        return _finish(guard, run_guardrail(guard, value, ctx), ctx, entry, secret_values, diagnose)
    try:
        started = time.perf_counter()
        outcome = guard.check(value, ctx)
        # An outcome is no awaitable: the common answer skips the ABC check.
        if type(outcome) is not GuardrailOutcome and inspect.isawaitable(outcome):
            return _finish(
                guard, _settle_async(guard, settle, outcome), ctx, entry, secret_values, diagnose
            )
        if guard.timeout is not None and time.perf_counter() - started > guard.timeout:
            raise TimeoutError(f"guardrail {guard.name!r} took longer than {guard.timeout:g}s")
        outcome = settle(outcome)
    except Exception as exc:
        return _failed(guard, exc, ctx, entry, diagnose)
    return _recorded(guard, outcome, entry, secret_values)


async def _settle_async(guard: Any, settle: Any, outcome: Awaitable[Any]) -> Any:
    """An async check's outcome, awaited under the guardrail's timeout, then settled."""
    if guard.timeout is None:
        return settle(await outcome)
    with anyio.fail_after(guard.timeout):
        result = await outcome
    return settle(result)


async def _finish(
    guard: Any,
    running: Awaitable[Any],
    ctx: GuardrailContext,
    entry: dict[str, Any],
    secret_values: set[str],
    diagnose: Diagnose,
) -> tuple[Any, dict[str, Any]]:
    try:
        outcome = await running
    except Exception as exc:
        return _failed(guard, exc, ctx, entry, diagnose)
    return _recorded(guard, outcome, entry, secret_values)


def _failed(
    guard: Any, exc: Exception, ctx: GuardrailContext, entry: dict[str, Any], diagnose: Diagnose
) -> tuple[Any, dict[str, Any]]:
    entry.update(action="error", error=type(exc).__name__)
    diagnose(exc, f"{ctx.stage} guardrail {guard.name}")
    return (None if guard.advisory else FAILED), entry


def _recorded(
    guard: Any, outcome: Any, entry: dict[str, Any], secret_values: set[str]
) -> tuple[Any, dict[str, Any]]:
    entry["action"] = outcome.action
    if outcome.message:
        entry["message"] = scrub(outcome.message, secret_values)
    if outcome.action == "redact":
        entry["pointers"] = list(outcome.pointers)
    return (None if guard.advisory else outcome), entry
