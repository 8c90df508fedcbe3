"""R7: every call that entered the pipeline has exactly one ``call_decided``; a call that
started has exactly one ``tool_started`` and one ``tool_finished``; a call that never
started has neither. In every sink, under cancellation, timeouts, failures and asks.

Random mixes of calls run concurrently, each kind in its own session (so that none waits
for another) except the queued kinds, which wait behind a blocked call of their session.
Blocked calls end by cancelling the caller or by closing their session. The PostgreSQL
journal (a schema of its own on the test server per example) is held to the same rule as
the files. Crashes are in ``tests/harness/test_journal_crash.py`` (a real process killed
with SIGKILL).
"""

from __future__ import annotations

import functools
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from postgres_support import fresh_schema

from clearance import (
    CallContext,
    CallToolResult,
    ClosedError,
    Harness,
    Journal,
    JournalEvent,
    MemoryJournal,
    PermissionAsk,
    Principal,
    Tool,
    ToolRegistry,
)
from clearance.harness.journal import Durability, JsonlJournal, SqliteJournal
from clearance.policy import LocalEvaluator

pytestmark = pytest.mark.anyio

ALICE = Principal("User", "alice")
SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer"}, "answer": {"type": "string"}},
    "required": ["n"],
    "additionalProperties": False,
}

# kind -> (tool alias, how it ends: the tool_finished status, or None when it never starts)
KINDS: dict[str, tuple[str, str | None]] = {
    "ok": ("t__ok", "ok"),
    "domain_error": ("t__domain", "error"),
    "fails": ("t__fails", "failed"),
    "timeout": ("t__slow", "timeout"),
    "denied": ("t__denied", None),
    "ask_allow": ("t__asked", "ok"),
    "ask_deny": ("t__asked", None),
    "invalid_arguments": ("t__ok", None),
    "unknown_tool": ("t__nope", None),
    "blocked_cancel": ("t__block", "cancelled"),
    "blocked_close": ("t__block", "cancelled"),
    "queued_cancel": ("t__ok", "cancelled"),
    "queued_close": ("t__ok", "cancelled"),
}
BLOCKING = {"blocked_cancel", "blocked_close", "queued_cancel", "queued_close"}


class World:
    """The tools, and the events their handlers set."""

    def __init__(self) -> None:
        self.started: dict[int, anyio.Event] = {}

    def registry(self) -> ToolRegistry:
        async def ok(arguments: dict[str, Any], ctx: CallContext) -> str:
            await ctx.progress("working")
            return "done"

        async def domain(arguments: dict[str, Any], ctx: CallContext) -> CallToolResult:
            return CallToolResult("no such thing", is_error=True)

        def fails(arguments: dict[str, Any], ctx: CallContext) -> str:
            raise RuntimeError("boom")

        async def slow(arguments: dict[str, Any], ctx: CallContext) -> str:
            await anyio.sleep_forever()
            raise AssertionError("unreachable")

        async def block(arguments: dict[str, Any], ctx: CallContext) -> str:
            self.started[arguments["n"]].set()
            await anyio.sleep_forever()
            raise AssertionError("unreachable")

        registry = ToolRegistry()
        registry.register(
            "t",
            [
                Tool("ok", ok, input_schema=SCHEMA),
                Tool("domain", domain, input_schema=SCHEMA),
                Tool("fails", fails, input_schema=SCHEMA),
                Tool("slow", slow, input_schema=SCHEMA, timeout=0.01),
                Tool("block", block, input_schema=SCHEMA),
                Tool("denied", ok, input_schema=SCHEMA),
                Tool("asked", ok, input_schema=SCHEMA),
            ],
        )
        return registry


def evaluator() -> LocalEvaluator:
    return LocalEvaluator(
        allow=["t.ok", "t.domain", "t.fails", "t.slow", "t.block"],
        ask=["t.asked"],
        deny=["t.denied"],
    )


@contextmanager
def sink_place(kind: str) -> Iterator[str]:
    """Where a sink of ``kind`` lives for one example: a fresh directory, or for
    ``postgres`` a fresh schema's URL (dropped on exit), and for ``postgres+start_log``
    that URL and a directory for the start log (``"URL DIR"``)."""
    if kind == "postgres":
        with fresh_schema() as (url, _):
            yield url
    elif kind == "postgres+start_log":
        with fresh_schema() as (url, _), tempfile.TemporaryDirectory() as tmp:
            yield f"{url} {tmp}"
    else:
        with tempfile.TemporaryDirectory() as tmp:
            yield tmp


def open_sink(kind: str, place: str, durability: Durability) -> Journal:
    if kind == "postgres":
        from clearance.harness.journal import PostgresJournal

        return PostgresJournal(place, host="r7-host", durability=durability)
    if kind == "postgres+start_log":
        from clearance.harness.journal import PostgresJournal

        url, log_dir = place.split(" ")
        # The start log is for "normal" only.
        return PostgresJournal(url, host="r7-host", start_log=Path(log_dir) / "starts")
    directory = Path(place)
    if kind == "jsonl":
        return JsonlJournal(directory / "journal.jsonl", durability=durability)
    if kind == "sqlite":
        return SqliteJournal(directory / "journal.db", durability=durability)
    return MemoryJournal()


def answer(ask: PermissionAsk) -> Any:
    return ask.arguments.get("answer", "deny")


async def run_calls(harness: Harness, world: World, kinds: list[str]) -> None:
    """Run every call at once; end the blocked ones once everything else has ended."""
    pending = [k not in BLOCKING for k in kinds].count(True)
    others_done = anyio.Event()
    scopes: dict[int, anyio.CancelScope] = {}
    sessions: dict[int, Any] = {}

    async def one(n: int, kind: str, session: Any, arguments: dict[str, Any]) -> None:
        nonlocal pending
        alias, _ = KINDS[kind]
        with anyio.CancelScope() as scope:
            scopes[n] = scope
            await session.call_tool(alias, arguments, call_id=f"c{n}")
        if kind not in BLOCKING:
            pending -= 1
            if pending == 0:
                others_done.set()

    queued_started: dict[str, anyio.Event] = {
        f"c{n + 10_000}": anyio.Event() for n, k in enumerate(kinds) if k.startswith("queued")
    }
    records = harness.events()

    async def watch() -> None:
        # A queued call's tool_started is out once its append returned; then it waits for
        # the session lock (a journal that awaits a commit is not "blocked" to anyio).
        async for item in records:
            if item.type == "tool_started" and item.call_id in queued_started:
                queued_started[item.call_id].set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        for n, kind in enumerate(kinds):
            session = await harness.create_session(principal=ALICE, on_permission_ask=answer)
            sessions[n] = session
            arguments: dict[str, Any] = {"n": n}
            if kind == "invalid_arguments":
                arguments = {"n": "not a number"}
            elif kind.startswith("ask_"):
                arguments["answer"] = "allow_once" if kind == "ask_allow" else "deny"
            if kind.startswith("queued"):
                # A blocked mutating call first: this one waits behind it, never starting.
                world.started[n] = anyio.Event()
                tg.start_soon(one, n, "blocked_" + kind.split("_")[1], session, {"n": n})
                await world.started[n].wait()
                arguments = {"n": n}
                n_queued = n + 10_000
                sessions[n_queued] = session
                tg.start_soon(one, n_queued, kind, session, arguments)
                continue
            if kind.startswith("blocked"):
                world.started[n] = anyio.Event()
            tg.start_soon(one, n, kind, session, arguments)
        with anyio.fail_after(10):
            for event in world.started.values():
                await event.wait()
            if pending:
                await others_done.wait()
            for event in queued_started.values():
                await event.wait()
            await anyio.wait_all_tasks_blocked()
        for n, kind in enumerate(kinds):
            if kind.endswith("_cancel"):
                scopes[n].cancel()
                if n + 10_000 in scopes:
                    scopes[n + 10_000].cancel()
            elif kind.endswith("_close"):
                await sessions[n].aclose()
        await records.aclose()


def expected_calls(kinds: list[str]) -> dict[str, str | None]:
    """call id -> the expected tool_finished status (None: never starts)."""
    expected: dict[str, str | None] = {}
    for n, kind in enumerate(kinds):
        if kind.startswith("queued"):
            expected[f"c{n}"] = "cancelled"  # the blocked call in front of it
            expected[f"c{n + 10_000}"] = "cancelled"
        else:
            expected[f"c{n}"] = KINDS[kind][1]
    return expected


def check_r7(
    events: list[JournalEvent], expected: dict[str, str | None], *, per_session: bool = False
) -> None:
    """``per_session``: ``seq`` counts each session's records (1, 2, 3... without gaps), as
    in the journal several hosts share; else it counts the journal's."""
    if per_session:
        by_session: dict[str, list[int]] = {}
        for event in events:
            by_session.setdefault(event.session_id, []).append(event.seq)
        for session_id, seqs in by_session.items():
            assert seqs == list(range(1, len(seqs) + 1)), (session_id, seqs)
    else:
        seqs = [e.seq for e in events]
        assert seqs == sorted(set(seqs)), "seq must be unique and increasing"
    by_call: dict[str, list[JournalEvent]] = {}
    for event in events:
        if event.call_id is not None:
            by_call.setdefault(event.call_id, []).append(event)
    assert set(by_call) == set(expected)
    for call_id, status in expected.items():
        records = by_call[call_id]
        counts = Counter(e.type for e in records)
        assert counts["call_decided"] == 1, (call_id, counts)
        decided = next(e for e in records if e.type == "call_decided")
        if status is None:
            assert counts["tool_started"] == 0 and counts["tool_finished"] == 0, (call_id, counts)
            assert decided.data["outcome"] != "dispatched"
            continue
        assert decided.data["outcome"] == "dispatched", (call_id, decided.data)
        assert counts["tool_started"] == 1 and counts["tool_finished"] == 1, (call_id, counts)
        started = next(e for e in records if e.type == "tool_started")
        finished = next(e for e in records if e.type == "tool_finished")
        assert decided.seq < started.seq < finished.seq
        assert finished.data["status"] == status, (call_id, finished.data)


@pytest.mark.parametrize("sink", ["memory", "jsonl", "sqlite", "postgres", "postgres+start_log"])
@settings(max_examples=max(10, settings().max_examples // 2))
@given(
    kinds=st.lists(st.sampled_from(sorted(KINDS)), min_size=1, max_size=10),
    durability=st.sampled_from(["normal", "full", "off"]),
)
async def test_r7_one_end_per_call(sink: str, kinds: list[str], durability: Durability) -> None:
    world = World()
    with sink_place(sink) as place:
        journal = open_sink(sink, place, durability)
        async with Harness(world.registry(), evaluator=evaluator(), journal=journal) as harness:
            await run_calls(harness, world, kinds)
        if isinstance(journal, MemoryJournal):
            events = journal.events()
        else:
            # What is on disk, through a fresh open: a clean close leaves nothing to
            # recover, so reopening must not add an ``interrupted`` record either.
            reopened = open_sink(sink, place, durability)
            try:
                events = list(reopened.events())
            finally:
                await reopened.aclose()
            assert not [e for e in events if e.data.get("status") == "interrupted"]
            if sink == "postgres+start_log":
                assert not (Path(place.split(" ")[1]) / "starts").exists()  # removed
        check_r7(events, expected_calls(kinds), per_session=sink.startswith("postgres"))


@pytest.mark.parametrize("sink", ["memory", "sqlite"])
async def test_r7_cancelled_before_it_could_start(sink: str, tmp_path: Path) -> None:
    asked = anyio.Event()

    async def never_answers(ask: PermissionAsk) -> Any:
        asked.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    journal = open_sink(sink, str(tmp_path), "normal")
    async with Harness(World().registry(), evaluator=evaluator(), journal=journal) as harness:
        session = await harness.create_session(principal=ALICE, on_permission_ask=never_answers)
        async with anyio.create_task_group() as tg:
            tg.start_soon(functools.partial(session.call_tool, "t__asked", {"n": 1}, call_id="c1"))
            with anyio.fail_after(5):
                await asked.wait()
            tg.cancel_scope.cancel()
        events = list(journal.events(call_id="c1"))
    assert [e.type for e in events].count("call_decided") == 1
    assert not [e for e in events if e.type in ("tool_started", "tool_finished")]


@pytest.mark.parametrize(
    ("sink", "durability"),
    [
        ("memory", "normal"),
        ("sqlite", "normal"),
        ("sqlite", "full"),
        ("jsonl", "full"),
        ("postgres", "normal"),
        ("postgres", "full"),
        ("postgres+start_log", "normal"),
    ],
)
@settings(max_examples=max(10, settings().max_examples // 2))
@given(
    calls=st.integers(min_value=1, max_value=40),
    close_after=st.integers(min_value=0, max_value=20),
    read_only=st.booleans(),
)
@example(calls=40, close_after=1, read_only=True)
@example(calls=40, close_after=1, read_only=False)
async def test_r7_close_while_calls_are_being_decided(
    sink: str, durability: Durability, calls: int, close_after: int, read_only: bool
) -> None:
    """A session closed after any number of its calls' records (while the others wait for
    their writes, with a journal that makes them wait): once ``aclose`` returns no handler
    of the session starts, and every call still has exactly one end."""
    closed = False
    late: list[int] = []

    async def work(arguments: dict[str, Any], ctx: CallContext) -> str:
        if closed:
            late.append(arguments["n"])
        await anyio.lowlevel.checkpoint()
        return "done"

    registry = ToolRegistry()
    registry.register("t", [Tool("work", work, input_schema=SCHEMA, read_only=read_only)])
    with sink_place(sink) as place:
        journal = open_sink(sink, place, durability)
        async with Harness(registry, evaluator=LocalEvaluator(allow=["t.*"]), journal=journal) as h:
            session = await h.create_session(principal=ALICE)
            records = h.events()
            refused: set[str] = set()  # calls that came after the close (never entered)

            async def one(n: int) -> None:
                try:
                    await session.call_tool("t__work", {"n": n}, call_id=f"c{n}")
                except ClosedError:
                    refused.add(f"c{n}")

            async with anyio.create_task_group() as tg:
                for n in range(calls):
                    tg.start_soon(one, n)
                seen = 0
                with anyio.fail_after(10):
                    if close_after:
                        async for _ in records:
                            seen += 1
                            if seen >= min(close_after, 3 * calls):  # 3 records a call
                                break
                    await session.aclose()
                closed = True
                await records.aclose()
        if isinstance(journal, MemoryJournal):
            events = journal.events()
        else:
            reopened = open_sink(sink, place, durability)
            try:
                events = list(reopened.events())
            finally:
                await reopened.aclose()
    assert late == []
    assert events[-1].type == "session_closed"
    by_call: dict[str, Counter[str]] = {}
    for event in events:
        if event.call_id is not None:
            by_call.setdefault(event.call_id, Counter())[event.type] += 1
    assert set(by_call) == {f"c{n}" for n in range(calls)} - refused
    for call_id, counts in by_call.items():
        assert counts["call_decided"] == 1, (call_id, counts)
        assert counts["tool_started"] == counts["tool_finished"] <= 1, (call_id, counts)
