"""What the PostgreSQL store costs a host: decisions per second with its grants in
PostgreSQL, and the journal's cost per call against SQLite's.

1. **Grants.** Every call of a tool that asks is answered by an ``allow_always`` grant; the
   grant store is ``MemoryGrantStore``, ``SqliteGrantStore`` or ``PostgresGrantStore``
   (whose lookup reads the grants' change counter in the database: rule R12). Decisions
   (whole calls through the pipeline, no-op handler, ``MemoryJournal``) per second, at 1,
   4 and 16 sessions calling at once on one host.
2. **Journal.** The same calls (a tool the evaluator allows) with ``MemoryJournal``,
   ``SqliteJournal`` (``normal``) and ``PostgresJournal`` (``normal``: each call's
   ``tool_started`` is committed before its handler runs, with the records before it, in
   one statement; concurrent calls share commits), in interleaved blocks so that machine
   noise hits every sink alike: the median and p99 per call with one session, and the
   time per call with 16 sessions calling at once (commits shared).

    python benchmarks/bench_postgres.py [--url postgresql://...] [--calls 4000] [--json]

The database is ``$CLEARANCE_TEST_POSTGRES`` (default the local test server); the
benchmark works in a schema of its own and drops it.

One run (defaults; PostgreSQL 15 on the same shared 2-vCPU VM, load average about 2.5):
decisions per second 5,400 / 5,500 / 7,100 at 1 / 4 / 16 sessions with PostgresGrantStore
(SqliteGrantStore 13,900 / 25,400 / 21,900; each lookup is a round trip for R12, on the
event loop); PostgresJournal 384 us per call at the median with one session (SQLite 37:
10x, one commit round trip per call, which batching cannot share when calls come one at a
time) and 143 us per call with 16 sessions (SQLite 64: 2.2x, commits shared).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

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


async def noop(arguments: dict[str, Any], ctx: CallContext) -> str:
    return "ok"


def registry() -> ToolRegistry:
    reg = ToolRegistry()
    reg.register(
        "app", [Tool("asked", noop, input_schema=SCHEMA), Tool("free", noop, input_schema=SCHEMA)]
    )
    return reg


EVALUATOR = LocalEvaluator(allow=["app.free"], ask=["app.asked"])


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


async def latencies(harness: Harness, session: Any, calls: int, into: list[float]) -> None:
    for n in range(calls):
        start = time.perf_counter()
        await session.call_tool("app__free", {"n": n})
        into.append((time.perf_counter() - start) * 1e6)


async def journal_part(url: str, calls: int, block: int) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        makers: dict[str, Callable[[], Journal]] = {
            "MemoryJournal": MemoryJournal,
            "SqliteJournal (normal)": lambda: SqliteJournal(Path(tmp) / "journal.db"),
            "PostgresJournal (normal)": lambda: PostgresJournal(url, host="bench"),
        }
        harnesses: dict[str, Harness] = {}
        sessions: dict[str, Any] = {}
        times: dict[str, list[float]] = {name: [] for name in makers}
        stack = contextlib.AsyncExitStack()
        for name, make in makers.items():
            harness = Harness(registry(), evaluator=EVALUATOR, journal=make())
            harnesses[name] = await stack.enter_async_context(harness)
            sessions[name] = await harnesses[name].create_session(principal=ALICE)
            await latencies(harnesses[name], sessions[name], 200, [])  # warm up
        for _ in range(max(1, calls // block)):
            for name in makers:
                await latencies(harnesses[name], sessions[name], block, times[name])
                flush = getattr(harnesses[name].journal, "flush", None)
                if flush is not None:
                    await flush()  # the writer's queue, untimed, before the next sink
        concurrent = {}
        for name in makers:
            per_second = await rate(harnesses[name], "app__free", 16, calls)
            concurrent[name] = 1e6 / per_second
        await stack.aclose()  # the harnesses, last first
    base = statistics.median(times["MemoryJournal"])
    sqlite = statistics.median(times["SqliteJournal (normal)"])
    rows = []
    for name, measured in times.items():
        median = statistics.median(measured)
        rows.append(
            {
                "sink": name,
                "median us": median,
                "p99 us": percentile(measured, 0.99),
                "added median us": median - base,
                "x SQLite (median)": median / sqlite,
                "us/call, 16 sessions": concurrent[name],
                "x SQLite (16 sessions)": concurrent[name] / concurrent["SqliteJournal (normal)"],
            }
        )
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    headers = list(rows[0])
    cells = [
        [f"{v:,.1f}" if isinstance(v, float) else str(v) for v in row.values()] for row in rows
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
        grants = await grants_part(url, args.calls)
        journal = await journal_part(url, args.calls, args.block)
    finally:
        database.run(
            "drop the schema", lambda c: c.execute(f"DROP SCHEMA {schema} CASCADE".encode())
        )
        database.close()
    return {"grants (decisions per second)": grants, "journal": journal}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=DEFAULT_URL, help="the PostgreSQL server")
    parser.add_argument("--calls", type=int, default=4000, help="calls per measurement")
    parser.add_argument("--block", type=int, default=250, help="calls per interleaved block")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    results = anyio.run(run, args)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for title, rows in results.items():
        print(f"\n{title}\n")
        print(table(rows))


if __name__ == "__main__":
    main()
