"""The guardrail runner without a coroutine for sync checks (issue 18): what it records
and enforces is what the awaited runner records and enforces, and a check runs once."""

from __future__ import annotations

import time
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from clearance.guardrails import ArgumentGuardrail, GuardrailContext, GuardrailOutcome
from clearance.harness._guards import FAILED, check_guardrail, check_guardrail_now
from clearance.types import Principal

pytestmark = pytest.mark.anyio

CTX = GuardrailContext("t.x", "t__x", Principal("User", "u"), "s", None, "c", "arguments")


class Counting(ArgumentGuardrail):
    def __init__(self, answer: Any, *, asynchronous: bool = False, **options: Any) -> None:
        super().__init__(**options)
        self.answer, self.asynchronous, self.calls = answer, asynchronous, 0

    def _answer(self) -> Any:
        if isinstance(self.answer, BaseException):
            raise self.answer
        if self.answer == "slow":
            time.sleep(0.02)
            return GuardrailOutcome.allow()
        return self.answer

    def check(self, value: Any, ctx: GuardrailContext) -> Any:
        self.calls += 1
        if not self.asynchronous:
            return self._answer()

        async def later() -> Any:
            await anyio.lowlevel.checkpoint()
            if self.answer == "hang":
                await anyio.sleep(10)
            return self._answer()

        return later()


class RunOnly:
    """A duck-typed guardrail with only run()."""

    name, advisory, timeout, calls = "run-only", False, None, 0

    async def run(self, value: Any, ctx: GuardrailContext) -> GuardrailOutcome:
        self.calls += 1
        return GuardrailOutcome.block("no")


ANSWERS: list[Any] = [
    GuardrailOutcome.allow(),
    GuardrailOutcome.block("secret-ish"),
    GuardrailOutcome.redact(["/a"]),
    GuardrailOutcome.ask("why"),
    "not an outcome",
    ValueError("boom"),
    "slow",
]


async def both(make: Any) -> tuple[Any, Any]:
    """(outcome, entries, diagnosed) from each runner, on fresh guardrails."""
    results = []
    for runner in ("now", "awaited"):
        guard = make()
        entries: list[dict[str, Any]] = []
        diagnosed: list[tuple[str, str]] = []

        def diagnose(exc: BaseException, stage: str, into: Any = diagnosed) -> None:
            into.append((type(exc).__name__, stage))

        if runner == "now":
            checked = check_guardrail_now(
                guard, {"a": 1}, CTX, entries, secret_values={"secret"}, diagnose=diagnose
            )
            if guard.calls == 1 and not getattr(guard, "asynchronous", True):
                assert isinstance(checked, tuple)  # a sync check: no coroutine
            if not isinstance(checked, tuple):
                checked = await checked
        else:
            checked = await check_guardrail(
                guard, {"a": 1}, CTX, entries, secret_values={"secret"}, diagnose=diagnose
            )
        outcome, entry = checked
        assert entry is entries[-1] and guard.calls == 1
        results.append((outcome, entries, diagnosed))
    return results[0], results[1]


@pytest.mark.parametrize("answer", ANSWERS, ids=repr)
@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize("advisory", [False, True])
async def test_the_sync_runner_records_and_enforces_as_the_awaited_one(
    answer: Any, asynchronous: bool, advisory: bool
) -> None:
    timeout = 0.01 if answer == "slow" and not asynchronous else 5.0
    now, awaited = await both(
        lambda: Counting(answer, asynchronous=asynchronous, advisory=advisory, timeout=timeout)
    )
    assert now == awaited
    outcome, entries, diagnosed = now
    if isinstance(answer, GuardrailOutcome):
        assert outcome == (None if advisory else answer)
        assert entries[0]["action"] == answer.action and not diagnosed
        message = answer.message and answer.message.replace("secret", "[REDACTED]")
        assert entries[0].get("message") == message
    elif answer == "slow" and asynchronous:  # an async check is timed on its await only
        assert outcome == (None if advisory else GuardrailOutcome.allow())
    else:  # raised, not an outcome, or overran its timeout: recorded as an error, R1
        assert outcome is (None if advisory else FAILED)
        expected = {"slow": "TimeoutError", "not an outcome": "TypeError"}.get(answer, "ValueError")
        assert entries[0]["action"] == "error" and entries[0]["error"] == expected
        assert diagnosed == [(expected, "arguments guardrail Counting")]


async def test_an_async_check_past_its_timeout_fails_closed() -> None:
    now, awaited = await both(lambda: Counting("hang", asynchronous=True, timeout=0.05))
    assert now == awaited
    assert now[0] is FAILED and now[1][0]["error"] == "TimeoutError"


async def test_a_guardrail_with_only_run_is_awaited() -> None:
    now, awaited = await both(RunOnly)
    assert now == awaited
    assert now[0] == GuardrailOutcome.block("no") and now[1][0]["action"] == "block"
