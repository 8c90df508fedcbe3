"""The one runner of guardrails, for both stages: it runs a guardrail under its timeout,
records its outcome, and says what to enforce (an advisory guardrail's outcome is recorded,
never enforced; a guardrail that raises or times out blocks the call, rule R1)."""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import Any

import anyio

from clearance.guardrails.base import ArgumentGuardrail, GuardrailContext, ResultGuardrail
from clearance.harness._redaction import scrub

__all__ = ["FAILED", "run_guardrail", "check_guardrail"]

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
    entry: dict[str, Any] = {"name": guard.name, "advisory": guard.advisory}
    entries.append(entry)
    try:
        outcome = await run_guardrail(guard, value, ctx)
    except Exception as exc:
        entry.update(action="error", error=type(exc).__name__)
        diagnose(exc, f"{ctx.stage} guardrail {guard.name}")
        return (None if guard.advisory else FAILED), entry
    entry["action"] = outcome.action
    if outcome.message:
        entry["message"] = scrub(outcome.message, secret_values)
    if outcome.action == "redact":
        entry["pointers"] = list(outcome.pointers)
    return (None if guard.advisory else outcome), entry
