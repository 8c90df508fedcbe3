"""Decision time against the number of grants one principal holds on one tool (issue 38).

A call that policy puts to a person (``ask``) is first put to the principal's grants. Each
row fills a store with N exact grants of ``alice`` on ``files.write_file`` (other
arguments), plus the one that covers the timed calls, and times ``session.call_tool``
decisions covered by it (median of the per-call mean over rounds, microseconds):

- ``scan``: the lookup before issue 38, every grant of the principal and tool tried in
  turn (each exact grant re-hashing the call's arguments);
- ``indexed``: ``MemoryGrantStore`` now (exact grants found by the hash of the arguments);
- ``sqlite``: ``SqliteGrantStore`` now (the change-counter query, the lookup off the event
  loop);
- ``reload full`` / ``reload feed``: one lookup right after another connection added a
  grant to the SQLite file, reading every row again (before) or only the rows the change
  feed names (now);
- ``postgres``, ``pg full``, ``pg feed``: the same three for ``PostgresGrantStore`` on the
  server of ``--url`` (a schema of its own, dropped at the end; ``--url ''`` leaves
  PostgreSQL out). Its notices are turned off for the reload columns, so that the lookup
  timed is the one that reads the change.

    python benchmarks/bench_grant_lookup.py [--calls 200] [--sizes 10,1000,10000,100000]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

from clearance import (
    Grant,
    GrantScope,
    Harness,
    MemoryGrantStore,
    MemoryJournal,
    Principal,
    SqliteGrantStore,
    Tool,
    ToolRegistry,
)
from clearance.harness.grants import GrantStore
from clearance.policy import LocalEvaluator

DEFAULT_URL = os.environ.get("CLEARANCE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
PRINCIPAL = 'User::"alice"'
TOOL = "files.write_file"
HIT = {"path": "src/hit.py", "content": "x"}


class ScanStore(MemoryGrantStore):
    """The lookup before issue 38: every grant of the principal and tool, in order."""

    def find(
        self, principal: str, tool: str, arguments: Mapping[str, Any], session_id: str
    ) -> Grant | None:
        now = time.time()
        for grant in self.list(principal=principal, tool=tool):
            if grant.covers(principal, tool, arguments, session_id, now):
                return grant
        return None


def grants(n: int) -> list[Grant]:
    made = [
        Grant(f"g_{k}", PRINCIPAL, TOOL, GrantScope.exact({"path": f"src/{k}.py"}), "always")
        for k in range(n)
    ]
    return [*made, Grant("g_hit", PRINCIPAL, TOOL, GrantScope.exact(HIT), "always")]


def fill(store: GrantStore, n: int) -> None:
    rows = [(g.grant_id, json.dumps(g.to_json())) for g in grants(n)]
    if isinstance(store, SqliteGrantStore):
        with store._lock:  # one transaction: adding 100,000 grants one by one takes minutes
            store._db.execute("BEGIN IMMEDIATE")
            store._db.executemany("INSERT INTO grants VALUES (?, ?)", rows)
            store._db.execute("COMMIT")
        store.list()  # loaded
    elif hasattr(store, "database"):  # PostgresGrantStore: one statement
        schema = store.database.schema
        store.database.run(
            "fill",
            lambda conn: conn.execute(
                f"INSERT INTO {schema}.grants (grant_id, body) "
                "SELECT * FROM unnest(%s::text[], %s::text[])",
                ([r[0] for r in rows], [r[1] for r in rows]),
            ),
        )
        store.list()  # loaded
    else:
        for grant in grants(n):
            store.add(grant)


async def noop(arguments: dict[str, Any], ctx: Any) -> str:
    return "ok"


async def decision_us(store: GrantStore, calls: int, rounds: int = 5) -> float:
    registry = ToolRegistry()
    schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "additionalProperties": False,
    }
    registry.register("files", [Tool("write_file", noop, input_schema=schema)])
    harness = Harness(
        registry,
        evaluator=LocalEvaluator(ask=["files.write_file"]),
        journal=MemoryJournal(),
        grant_store=store,
    )
    times = []
    async with harness:
        session = await harness.create_session(principal=Principal("User", "alice"))
        for r in range(rounds):
            t = time.perf_counter()
            for k in range(calls):
                outcome = await session.call_tool("files__write_file", HIT, call_id=f"c{r}.{k}")
                if not outcome.ok or outcome.grant != "g_hit":
                    raise SystemExit(f"a benchmark call was not allowed by its grant: {outcome}")
            times.append((time.perf_counter() - t) / calls * 1e6)
    return statistics.median(times)


def reload_us(store: Any, other: Any, full: bool) -> float:
    times = []
    for k in range(5):
        other.add(Grant(f"g_new{full}{k}", PRINCIPAL, TOOL, GrantScope.exact({"k": k}), "always"))
        if full:  # as before: the whole table read again
            if isinstance(store, SqliteGrantStore):
                store._seq = None
            else:
                store._version = None
        t = time.perf_counter()
        store.find(PRINCIPAL, TOOL, HIT, "s")
        times.append((time.perf_counter() - t) * 1e6)
    return statistics.median(times)


async def postgres_row(url: str, n: int, calls: int) -> list[float]:
    """``postgres``, ``pg full`` and ``pg feed`` for ``n`` grants, in a schema of its own."""
    from clearance.harness.grants_postgres import PostgresGrantStore
    from clearance.harness.postgres import PostgresDatabase

    schema = "bench_" + secrets.token_hex(4)
    sep = "&" if "?" in url else "?"
    database = PostgresDatabase(f"{url}{sep}schema={schema}")
    database.migrate()
    # The other host only writes (load=False: a notice does not make it read the table).
    store, other = PostgresGrantStore(database), PostgresGrantStore(database, load=False)
    try:
        fill(store, n)
        row = [await decision_us(store, calls)]
        store._unsubscribe()  # the lookup timed reads the change, not the listener
        row.append(reload_us(store, other, full=True))
        row.append(reload_us(store, other, full=False))
        return row
    finally:
        store.close()
        other.close()
        database.run("drop the schema", lambda c: c.execute(f"DROP SCHEMA {schema} CASCADE"))
        database.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--sizes", default="10,1000,10000,100000")
    parser.add_argument("--url", default=DEFAULT_URL, help="the PostgreSQL server ('': none)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"decision time per call (us, median of 5 rounds of {args.calls} calls)")
    header: tuple[str, ...] = ("grants", "scan", "indexed", "sqlite", "reload full", "reload feed")
    if args.url:
        header += ("postgres", "pg full", "pg feed")
    print("".join(f"{h:>13}" for h in header))
    for n in sizes:
        scan, indexed = ScanStore(), MemoryGrantStore()
        fill(scan, n)
        fill(indexed, n)
        scan_calls = max(5, min(args.calls, 20_000_000 // (n * 50 + 1)))
        row = [await decision_us(scan, scan_calls), await decision_us(indexed, args.calls)]
        with tempfile.TemporaryDirectory() as tmp:
            store = SqliteGrantStore(Path(tmp) / "g.db")
            other = SqliteGrantStore(Path(tmp) / "g.db")
            try:
                fill(store, n)
                row.append(await decision_us(store, args.calls))
                row.append(reload_us(store, other, full=True))
                row.append(reload_us(store, other, full=False))
            finally:
                store.close()
                other.close()
        if args.url:
            row += await postgres_row(args.url, n, args.calls)
        print(f"{n:>13,}" + "".join(f"{v:>13,.0f}" for v in row), flush=True)


if __name__ == "__main__":
    anyio.run(main)
