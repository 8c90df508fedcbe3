"""Closing a session while its calls are still being decided (issue 12, item 11).

``Session.aclose()`` must not return while an admitted call can still start its handler:
once it returns, no handler of the session starts, and every call that entered the
pipeline still has exactly one end in the journal (R7).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from support import ALICE

from clearance import CallContext, Harness, SqliteJournal, Tool, ToolRegistry
from clearance.guardrails.base import ArgumentGuardrail, GuardrailOutcome
from clearance.policy import AuthzRequest, NoopEvaluator, Verdict

pytestmark = pytest.mark.anyio

SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer"}},
    "required": ["n"],
    "additionalProperties": False,
}
CALLS = 80


class Probe:
    """Handlers that note whether they started after ``aclose()`` returned."""

    def __init__(self) -> None:
        self.closed_returned = False
        self.started: list[int] = []
        self.started_after_close: list[int] = []

    def registry(self) -> ToolRegistry:
        async def work(arguments: dict[str, Any], ctx: CallContext) -> str:
            self.started.append(arguments["n"])
            if self.closed_returned:
                self.started_after_close.append(arguments["n"])
            await anyio.sleep(0.001)
            return "done"

        def work_sync(arguments: dict[str, Any], ctx: CallContext) -> str:
            self.started.append(arguments["n"])
            if self.closed_returned:
                self.started_after_close.append(arguments["n"])
            return "done"

        registry = ToolRegistry()
        registry.register(
            "t",
            [
                Tool("read", work, input_schema=SCHEMA, read_only=True),
                Tool("write", work, input_schema=SCHEMA),
                Tool("read_sync", work_sync, input_schema=SCHEMA, read_only=True),
            ],
        )
        return registry


def check_one_end_per_call(db: Path, call_ids: set[str]) -> Counter[str]:
    """R7 on what is on disk; returns the tool_finished statuses."""
    journal = SqliteJournal(db, durability="full")
    try:
        events = list(journal.events())
    finally:
        journal.close()
    by_call: dict[str, list[Any]] = {}
    for event in events:
        if event.call_id is not None:
            by_call.setdefault(event.call_id, []).append(event)
    assert set(by_call) == call_ids
    statuses: Counter[str] = Counter()
    for call_id, records in by_call.items():
        counts = Counter(e.type for e in records)
        assert counts["call_decided"] == 1, (call_id, counts)
        assert counts["tool_started"] == counts["tool_finished"] <= 1, (call_id, counts)
        assert not [e for e in records if e.data.get("status") == "interrupted"]
        finished = [e for e in records if e.type == "tool_finished"]
        statuses.update(e.data["status"] for e in finished)
    assert [e.type for e in events][-1] == "session_closed"
    return statuses


@pytest.mark.parametrize("tool", ["t__read", "t__write", "t__read_sync"])
async def test_close_waits_for_calls_still_being_decided(tool: str, tmp_path: Path) -> None:
    """80 calls in flight, most of them waiting for their fsynced ``call_decided``."""
    probe = Probe()
    db = tmp_path / "journal.db"
    outcomes: dict[str, str] = {}
    async with Harness(
        probe.registry(),
        evaluator=NoopEvaluator(),
        journal=SqliteJournal(db, durability="full"),
    ) as harness:
        session = await harness.create_session(principal=ALICE)
        records = harness.events()
        async with anyio.create_task_group() as tg:

            async def one(n: int) -> None:
                outcome = await session.call_tool(tool, {"n": n}, call_id=f"c{n}")
                outcomes[f"c{n}"] = outcome.status

            for n in range(CALLS):
                tg.start_soon(one, n)
            with anyio.fail_after(10):
                async for item in records:  # the first record is out: the rest are queued
                    if item.type == "call_decided":
                        break
                await session.aclose()
            probe.closed_returned = True
            await records.aclose()
        assert probe.started_after_close == []
    assert len(outcomes) == CALLS
    # Every call ended: those that started before the close ran or were cancelled.
    assert set(outcomes.values()) <= {"ok", "cancelled"}
    assert "cancelled" in outcomes.values()
    statuses = check_one_end_per_call(db, set(outcomes))
    assert sum(statuses.values()) >= len(probe.started)


async def test_close_cancels_calls_waiting_in_an_async_evaluator(tmp_path: Path) -> None:
    """A call held up before dispatch (a slow evaluator) does not hold up the close, and
    never runs after it."""
    probe = Probe()
    entered = anyio.Event()
    release = anyio.Event()

    class Slow:
        name = "slow"

        async def evaluate(self, request: AuthzRequest) -> Verdict:
            entered.set()
            await release.wait()
            return Verdict("allow")

    db = tmp_path / "journal.db"
    async with Harness(
        probe.registry(), evaluator=Slow(), journal=SqliteJournal(db, durability="full")
    ) as harness:
        session = await harness.create_session(principal=ALICE)
        outcomes: list[str] = []
        async with anyio.create_task_group() as tg:

            async def one() -> None:
                outcomes.append((await session.call_tool("t__read", {"n": 1}, call_id="c1")).status)

            tg.start_soon(one)
            with anyio.fail_after(5):
                await entered.wait()
                await session.aclose()
            probe.closed_returned = True
            release.set()
    assert outcomes == ["cancelled"]
    assert probe.started == []
    assert check_one_end_per_call(db, {"c1"}) == Counter()


async def test_close_cancels_calls_waiting_in_an_async_guardrail(tmp_path: Path) -> None:
    probe = Probe()
    entered = anyio.Event()

    async def slow(arguments: dict[str, Any], ctx: Any) -> GuardrailOutcome:
        entered.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    db = tmp_path / "journal.db"
    async with Harness(
        probe.registry(),
        evaluator=NoopEvaluator(),
        argument_guardrails=[ArgumentGuardrail(slow, tools="t.*", name="slow")],
        journal=SqliteJournal(db, durability="full"),
    ) as harness:
        session = await harness.create_session(principal=ALICE)
        outcomes: list[str] = []
        async with anyio.create_task_group() as tg:

            async def one() -> None:
                outcomes.append((await session.call_tool("t__read", {"n": 1}, call_id="c1")).status)

            tg.start_soon(one)
            with anyio.fail_after(5):
                await entered.wait()
                await session.aclose()
    assert outcomes == ["cancelled"]
    assert probe.started == []
    assert check_one_end_per_call(db, {"c1"}) == Counter()


async def test_caller_cancellation_during_close_still_propagates(tmp_path: Path) -> None:
    """The close's own cancellation becomes a ``cancelled`` outcome; the caller's own
    cancellation is not swallowed with it."""
    probe = Probe()
    entered = anyio.Event()

    class Slow:
        name = "slow"

        async def evaluate(self, request: AuthzRequest) -> Verdict:
            entered.set()
            await anyio.sleep_forever()
            raise AssertionError("unreachable")

    db = tmp_path / "journal.db"
    reached_after = False
    async with Harness(
        probe.registry(), evaluator=Slow(), journal=SqliteJournal(db, durability="full")
    ) as harness:
        session = await harness.create_session(principal=ALICE)
        async with anyio.create_task_group() as tg:

            async def one() -> None:
                nonlocal reached_after
                await session.call_tool("t__read", {"n": 1}, call_id="c1")
                await anyio.lowlevel.checkpoint()  # the caller's cancellation lands here
                reached_after = True

            tg.start_soon(one)
            with anyio.fail_after(5):
                await entered.wait()
            tg.cancel_scope.cancel()
            await session.aclose()
    assert not reached_after
    assert check_one_end_per_call(db, {"c1"}) == Counter()


async def test_close_cancels_a_call_allowed_through_the_ask_stream_and_queued(
    tmp_path: Path,
) -> None:
    """An ask answered in the stream, then a wait for a harness-wide slot held by another
    session: the close cancels the wait instead of waiting for that other session."""
    probe = Probe()
    hold_started = anyio.Event()

    async def hold(arguments: dict[str, Any], ctx: CallContext) -> str:
        hold_started.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    registry = probe.registry()
    registry.register("h", [Tool("hold", hold, input_schema=SCHEMA)])

    class AskForReads:
        name = "ask-reads"

        def evaluate(self, request: AuthzRequest) -> Verdict:
            return Verdict("ask" if request.tool.qualified_name == "t.read" else "allow")

    db = tmp_path / "journal.db"
    async with Harness(
        registry,
        evaluator=AskForReads(),
        journal=SqliteJournal(db, durability="full"),
        max_concurrency=1,
    ) as harness:
        holder = await harness.create_session(principal=ALICE)
        session = await harness.create_session(principal=ALICE)
        outcomes: list[str] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(holder.call_tool, "h__hold", {"n": 0})
            with anyio.fail_after(5):
                await hold_started.wait()

            async def answer() -> None:
                async for ask in session.permission_asks():
                    await ask.respond("allow_once")

            tg.start_soon(answer)
            await anyio.wait_all_tasks_blocked()

            async def one() -> None:
                outcomes.append((await session.call_tool("t__read", {"n": 1}, call_id="c1")).status)

            tg.start_soon(one)
            records = harness.events()
            with anyio.fail_after(5):
                async for item in records:
                    if item.type == "tool_started" and item.call_id == "c1":
                        break
                await anyio.wait_all_tasks_blocked()
                await session.aclose()
            probe.closed_returned = True
            await records.aclose()
            tg.cancel_scope.cancel()
    assert outcomes == ["cancelled"]
    assert probe.started == []
