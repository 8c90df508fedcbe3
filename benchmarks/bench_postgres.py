"""What the PostgreSQL store costs a host: decisions per second with its grants in
PostgreSQL, and the journal's cost per call against SQLite's.

1. **Grants.** Every call of a tool that asks is answered by an ``allow_always`` grant; the
   grant store is ``MemoryGrantStore``, ``SqliteGrantStore`` or ``PostgresGrantStore``
   (whose lookup reads the grants' change counter in the database: rule R12). Decisions
   (whole calls through the pipeline, no-op handler, ``MemoryJournal``) per second, at 1,
   4 and 16 sessions calling at once on one host.
2. **Journal.** The same calls (a tool the evaluator allows) with ``MemoryJournal``,
   ``SqliteJournal`` and ``PostgresJournal`` (without and with ``start_log``), all
   ``normal``, at 1, 4 and 16 sessions
   calling at once, in interleaved blocks (a new order each round) so that machine noise
   hits every sink alike. Per sink and level: ``us/call``, the block's wall time per call
   (the median over the rounds, and their range): what a call costs the host; and each
   call's own time (median, p99). At one session the call median is the figure (the wall
   time per call is a mean, and takes every stall of a loaded machine); with several
   sessions a PostgreSQL call waits while the others run, so its own time is about
   ``sessions`` times its cost, and ``us/call`` is the figure to compare. ``us/call to
   commit`` adds the wait for the block's last commit (the flush between blocks): what
   the background commits cost when nothing else runs meanwhile.

   What each awaits before the handler runs (the durability notion compared): both
   promise that a handler never runs unrecorded if this process crashes right after.
   ``SqliteJournal`` gets there without leaving the event loop thread: the start (with
   the records before it) is one ``write`` into the operating system's page cache (its
   start log); the commit comes later. ``PostgresJournal`` waits until the start (with
   the records before it) is committed on the server, a round trip and an ``INSERT``
   (``synchronous_commit=off``), so the start survives this host vanishing for good,
   which SQLite's does not. Since issue 34 the event loop sends it itself while the
   writer thread waits (no hand-over to the thread and back), and the starts of other
   sessions queued while a batch is in flight go together in the next one (group
   commit). At one session nothing can share that commit: its floor is one round trip
   plus the server's insert.
   ``PostgresJournal(start_log=PATH)`` makes SQLite's promise (a process crash is
   survived, the loss of the host's disk is not): the start goes into a local start log
   with one ``write``, the commit comes later. That row is the like-for-like comparison.

    python benchmarks/bench_postgres.py [--url postgresql://...] [--calls 4000] [--json]

The database is ``$CLEARANCE_TEST_POSTGRES`` (default the local test server); the
benchmark works in a schema of its own and drops it.

Grants, one run (defaults; PostgreSQL 15 on the same shared 2-vCPU VM, load average about
2.5): decisions per second 5,400 / 5,500 / 7,100 at 1 / 4 / 16 sessions with
PostgresGrantStore (SqliteGrantStore 13,900 / 25,400 / 21,900; each lookup is a round trip
for R12, on the event loop).

Journal, three runs of ``--part journal --calls 4800`` (load average 5.2-5.4 from other
jobs; ranges over the runs): one session, call median PostgresJournal 269-305 us against
SqliteJournal 42-44 (6.5-6.9x; it was 337-344, 8.0-8.2x, before the prepared multi-row
INSERT and the writer's linger after a commit, measured in turn with it); us/call at 4
sessions 276-403 (2.5-3.9x SQLite), at 16 sessions 253-306 (1.9-2.6x). The 2x target
is met at none of them on this loaded machine; the note above says why one session
cannot meet it. A prototype that commits an awaited start on the event loop itself (the
writer's connection driven without the thread when it is idle; not in the code) gave
180-200 us at one session against 250-300 through the thread, in the same runs.

Journal with ``start_log``, six runs of ``--part journal --calls 4800``, the four sinks
interleaved (load average 6.4-8.6 from other jobs; ranges over the runs), PostgresJournal
(normal, start_log) against SqliteJournal (normal): call median 40-50 us against 38-52
(1.0-1.1x) at 1 session, 40-53 against 38-52 (1.1-1.2x) at 4, 41-52 against 38-48
(1.1x) at 16; us/call 106-158 against 89-169 (0.9-1.7x), 96-183 against 100-174
(0.8-1.3x), 88-205 against 76-162 (0.8-1.6x); us/call to commit 205-257 against 149-266
at 1 session, 164-272 against 194-269 at 4, 174-238 against 174-277 at 16. The 2x target
is met at every level. In the same runs the server-commit default: call median 270-438
us at 1 session (7.1-10.8x SQLite), us/call 278-579 at 16 (3.0-3.9x).

Issue 34, the server-commit default sent from the event loop with group commit, against
the writer thread alone (the code before it), two runs each of ``--part journal --calls
3600``, interleaved (load average about 15 from other jobs; "x" is against SQLite in the
same run):

| sessions | call median, before | after | us/call x SQLite, before | after |
|----------|---------------------|-------|--------------------------|-------|
| 1 | 278-289 us (7.0-7.2x) | 188-195 us (4.7-4.9x) | 5.7-12.2x | 3.1-4.1x |
| 4 | 827-863 us | 699-730 us | 5.6-14.8x | 2.1-2.6x |
| 16 | 3,872-5,716 us | 2,054-2,243 us | 4.1-5.2x | 1.5-2.3x |

One more pair at load average about 4: call median at one session 242 -> 189 us (4.8x
-> 3.7x SQLite's 50), us/call 4.6x -> 3.6x; at 16 sessions us/call 2.2x -> 1.7x.

The call median at one session is one round trip, the server's insert and the call
itself: here a bare ``SELECT 1`` round trip takes about 30 us and the three-row insert
about 65 us, against SQLite's whole call of 40 us, so the 3x target at one session is
not met on this machine; at 16 sessions the 2x target is met in one run of two. Dropping
an index would not change it: the server's part of the insert is about 26 us with or
without ``events_session_call`` (``EXPLAIN ANALYZE``).

A call that waits for no commit (SQLite, or PostgreSQL with a start log) never yields to
the event loop when its handler does not: the sessions above then ran one after another,
not interleaved. ``--yields`` makes the handler yield once, so they interleave (then a
call's own time is about ``sessions`` times its cost, as for PostgreSQL without a start
log). Three runs with ``--yields`` (load 5.2-5.7): start_log against SQLite, us/call
96-151 against 109-157 (0.9-1.0x) at 1 session, 124-140 against 93-124 (1.1-1.5x) at 4,
122-169 against 78-144 (1.1-1.5x) at 16; call median 1.1x, 1.1x, 1.1-1.2x. The
server-commit default: us/call 574-628 (3.7-5.5x) at 1, 319-466 (3.1-4.1x) at 4,
266-322 (2.2-3.4x) at 16.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import secrets
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel

from clearance import (
    CallContext,
    Grant,
    GrantScope,
    Harness,
    MemoryGrantStore,
    MemoryJournal,
    Principal,
    SqliteGrantStore,
    SqliteJournal,
    Tool,
    ToolRegistry,
)
from clearance.harness.grants import GrantStore
from clearance.harness.grants_postgres import PostgresGrantStore
from clearance.harness.journal import Journal, PostgresJournal
from clearance.harness.postgres import PostgresDatabase
from clearance.policy import LocalEvaluator

ALICE = Principal("User", "alice")
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}}
DEFAULT_URL = os.environ.get("CLEARANCE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


YIELDS = False
"""``--yields``: the handler yields to the event loop once (a checkpoint)."""


async def noop(arguments: dict[str, Any], ctx: CallContext) -> str:
    if YIELDS:
        await anyio.lowlevel.checkpoint()
    return "ok"


def registry() -> ToolRegistry:
    reg = ToolRegistry()
    reg.register(
        "app", [Tool("asked", noop, input_schema=SCHEMA), Tool("free", noop, input_schema=SCHEMA)]
    )
    return reg


EVALUATOR = LocalEvaluator(allow=["app.free"], ask=["app.asked"])
LEVELS = (1, 4, 16)
"""Sessions calling at once on one host."""
SQLITE = "SqliteJournal (normal)"
POSTGRES = "PostgresJournal (normal)"
POSTGRES_LOG = "PostgresJournal (normal, start_log)"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def rate(harness: Harness, tool: str, sessions: int, calls: int) -> float:
    """Calls per second with ``sessions`` sessions calling at once, ``calls`` in all."""
    opened = [await harness.create_session(principal=ALICE) for _ in range(sessions)]
    each = max(1, calls // sessions)

    async def worker(session: Any) -> None:
        for n in range(each):
            outcome = await session.call_tool(tool, {"n": n})
            assert outcome.ok, outcome

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for session in opened:
            tg.start_soon(worker, session)
    elapsed = time.perf_counter() - start
    for session in opened:
        await session.aclose()
    return each * sessions / elapsed


async def grants_part(url: str, calls: int) -> list[dict[str, Any]]:
    grant = Grant("g_bench", str(ALICE), "app.asked", GrantScope.tool(), "always")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        stores: dict[str, Callable[[], GrantStore]] = {
            "MemoryGrantStore": MemoryGrantStore,
            "SqliteGrantStore": lambda: SqliteGrantStore(Path(tmp) / "grants.db"),
            "PostgresGrantStore": lambda: PostgresGrantStore(url),
        }
        for name, make in stores.items():
            store = make()
            store.add(grant)
            row: dict[str, Any] = {"store": name}
            async with Harness(
                registry(), evaluator=EVALUATOR, grant_store=store, journal=MemoryJournal()
            ) as harness:
                await rate(harness, "app__asked", 4, 200)  # warm up
                for sessions in (1, 4, 16):
                    label = f"{sessions} session{'s' if sessions > 1 else ''}"
                    row[label] = await rate(harness, "app__asked", sessions, calls)
            close = getattr(store, "close", None)
            if close is not None:
                close()
            rows.append(row)
    return rows


async def timed_calls(sessions: list[Any], each: int, into: list[float], first: int) -> float:
    """``each`` calls in every session of ``sessions`` at once (the sessions call
    together, each call after the previous one of its session); each call's time in
    microseconds into ``into``; the wall time in seconds."""

    async def worker(session: Any) -> None:
        for n in range(first, first + each):
            start = time.perf_counter()
            outcome = await session.call_tool("app__free", {"n": n})
            into.append((time.perf_counter() - start) * 1e6)
            assert outcome.ok, outcome

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for session in sessions:
            tg.start_soon(worker, session)
    return time.perf_counter() - start


async def journal_part(url: str, calls: int, block: int) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        makers: dict[str, Callable[[], Journal]] = {
            "MemoryJournal": MemoryJournal,
            SQLITE: lambda: SqliteJournal(Path(tmp) / "journal.db"),
            POSTGRES: lambda: PostgresJournal(url, host="bench"),
            POSTGRES_LOG: lambda: PostgresJournal(
                url, host="bench-log", start_log=Path(tmp) / "bench-log.starts"
            ),
        }
        harnesses: dict[str, Harness] = {}
        sessions: dict[tuple[str, int], list[Any]] = {}
        times: dict[tuple[str, int], list[float]] = {}
        costs: dict[tuple[str, int], list[float]] = {}
        flushed: dict[tuple[str, int], list[float]] = {}
        stack = contextlib.AsyncExitStack()
        for name, make in makers.items():
            harness = Harness(registry(), evaluator=EVALUATOR, journal=make())
            harnesses[name] = await stack.enter_async_context(harness)
            for level in LEVELS:
                key = (name, level)
                opened = [await harness.create_session(principal=ALICE) for _ in range(level)]
                sessions[key], times[key], costs[key], flushed[key] = opened, [], [], []
                await timed_calls(opened, max(1, 200 // level), [], 0)  # warm up
        order = list(makers)
        rng = random.Random(7)
        n = 1000
        for _ in range(max(1, calls // block)):
            for level in LEVELS:
                rng.shuffle(order)  # a burst of load hits every sink alike
                for name in order:
                    key = (name, level)
                    each = block // level
                    wall = await timed_calls(sessions[key], each, times[key], n)
                    n += each
                    costs[key].append(wall / (each * level) * 1e6)
                    flush = getattr(harnesses[name].journal, "flush", None)
                    started = time.perf_counter()
                    if flush is not None:
                        await flush()  # the writer's queue, before the next sink
                    wall += time.perf_counter() - started
                    flushed[key].append(wall / (each * level) * 1e6)
        await stack.aclose()  # the harnesses, last first
    rows = []
    for level in LEVELS:
        base = statistics.median(costs[("MemoryJournal", level)])
        sqlite = statistics.median(costs[(SQLITE, level)])
        sqlite_latency = statistics.median(times[(SQLITE, level)])
        for name in makers:
            key = (name, level)
            cost = statistics.median(costs[key])
            latency = statistics.median(times[key])
            rows.append(
                {
                    "sink": name,
                    "sessions": level,
                    "us/call": cost,
                    "rounds": f"{min(costs[key]):,.0f}-{max(costs[key]):,.0f}",
                    "added us/call": cost - base,
                    "us/call to commit": statistics.median(flushed[key]),
                    "x SQLite": cost / sqlite,
                    "call median us": latency,
                    "call p99 us": percentile(times[key], 0.99),
                    "x SQLite (call median)": latency / sqlite_latency,
                }
            )
    return rows


TARGETS = {1: 3.0, 4: None, 16: 2.0}
"""Issue 34: the server-commit default within 3x of SQLite at one session, 2x at 16."""


def ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The server-commit default against SQLite, side by side, per level: what a call
    costs the host (``us/call``) and each call's own time (the median)."""
    found = {(row["sink"], row["sessions"]): row for row in rows}
    out = []
    for level in LEVELS:
        sqlite, postgres = found[(SQLITE, level)], found[(POSTGRES, level)]
        target = TARGETS.get(level)
        out.append(
            {
                "sessions": level,
                "SQLite us/call": sqlite["us/call"],
                "PostgreSQL us/call": postgres["us/call"],
                "x (us/call)": postgres["us/call"] / sqlite["us/call"],
                "SQLite call median": sqlite["call median us"],
                "PostgreSQL call median": postgres["call median us"],
                "x (call median)": postgres["call median us"] / sqlite["call median us"],
                "target": "-" if target is None else f"{target:.0f}x",
            }
        )
    return out


def table(rows: list[dict[str, Any]]) -> str:
    headers = list(rows[0])
    cells = [
        [f"{v:,.1f}" if isinstance(v, float) else f"{v}" for v in row.values()] for row in rows
    ]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
    lines = [
        "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |",
        "|" + "|".join("-" * (w + 2) for w in widths) + "|",
    ]
    lines.extend(
        "| "
        + " | ".join(
            (v.ljust(w) if i == 0 else v.rjust(w))
            for i, (v, w) in enumerate(zip(c, widths, strict=True))
        )
        + " |"
        for c in cells
    )
    return "\n".join(lines)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    schema = "bench_" + secrets.token_hex(4)
    sep = "&" if "?" in args.url else "?"
    url = f"{args.url}{sep}schema={schema}"
    database = PostgresDatabase(url)
    database.migrate()
    try:
        results: dict[str, Any] = {}
        if args.part in ("all", "grants"):
            results["grants (decisions per second)"] = await grants_part(url, args.calls)
        if args.part in ("all", "journal"):
            journal = await journal_part(url, args.calls, args.block)
            results["journal (per call)"] = journal
            results["journal: the server-commit default against SQLite"] = ratios(journal)
    finally:
        database.run(
            "drop the schema", lambda c: c.execute(f"DROP SCHEMA {schema} CASCADE".encode())
        )
        database.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=DEFAULT_URL, help="the PostgreSQL server")
    parser.add_argument("--calls", type=int, default=4000, help="calls per measurement")
    parser.add_argument(
        "--block", type=int, default=240, help="calls per interleaved block (a multiple of 16)"
    )
    parser.add_argument(
        "--part", choices=("all", "grants", "journal"), default="all", help="what to measure"
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument(
        "--yields",
        action="store_true",
        help="the handler yields once (else a call that waits for no commit never yields)",
    )
    args = parser.parse_args()
    global YIELDS
    YIELDS = args.yields
    results = anyio.run(run, args)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for title, rows in results.items():
        print(f"\n{title}\n")
        print(table(rows))


if __name__ == "__main__":
    main()
