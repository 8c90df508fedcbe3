"""What it costs a grant lookup to see other processes' revocations (rule R12).

``SqliteGrantStore.find`` runs one query of the file's grant change counter before its
in-memory lookup, and reloads the grants when another connection changed them. This
prints, measured in the same run, the per-``find`` cost of:

- ``MemoryGrantStore``: the in-memory lookup alone (what ``SqliteGrantStore`` did before
  R12, when it read the file only at open);
- ``SqliteGrantStore``: the same lookup plus the counter query, on a file of its own and
  on a file shared with a ``SqliteJournal`` that commits between lookups (the CLI's
  default layout: both in ``clearance.db``);
- a lookup right after another connection added a grant (a reload, which parses only
  the rows that changed), by grant count.

    python benchmarks/bench_grants.py [--lookups 20000] [--grants 1000]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from clearance import Grant, GrantScope, MemoryGrantStore, SqliteGrantStore
from clearance.harness.grants import GrantStore

PRINCIPAL = 'User::"alice"'
TOOL = "files.write_file"
HIT = {"path": "src/a.py", "content": "x"}
MISS = {"path": "lib/a.py", "content": "x"}


def fill(store: GrantStore, others: int) -> None:
    store.add(Grant("g_hit", PRINCIPAL, TOOL, GrantScope.prefix_of("/path", "src/"), "always"))
    for n in range(others):
        scope = GrantScope.tool()
        store.add(Grant(f"g_{n}", f'User::"u{n}"', TOOL, scope, "always"))


def per_call_us(fn: Callable[[], object], n: int, rounds: int = 7) -> tuple[float, float]:
    """(median, min) over rounds of the mean time per call, in microseconds."""
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        times.append((time.perf_counter() - t) / n * 1e6)
    return statistics.median(times), min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lookups", type=int, default=20000)
    parser.add_argument("--grants", type=int, default=1000)
    args = parser.parse_args()
    n = args.lookups
    with tempfile.TemporaryDirectory() as tmp:
        memory = MemoryGrantStore()
        fill(memory, args.grants)
        own = SqliteGrantStore(Path(tmp) / "grants.db")
        fill(own, args.grants)
        shared_path = Path(tmp) / "clearance.db"
        shared = SqliteGrantStore(shared_path)
        fill(shared, args.grants)
        # Another connection writing other tables of the file between lookups, as the
        # journal's writer does.
        writer = sqlite3.connect(shared_path, isolation_level=None)
        writer.execute("CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY, data TEXT)")

        def shared_find(arguments: dict[str, str], n: int) -> tuple[float, float]:
            """Each find timed alone, after a commit of the other connection."""
            times = []
            for _ in range(n):
                writer.execute("INSERT INTO events (data) VALUES ('x')")
                t = time.perf_counter()
                shared.find(PRINCIPAL, TOOL, arguments, "s1")
                times.append((time.perf_counter() - t) * 1e6)
            return statistics.median(times), min(times)

        rows: list[tuple[str, str, float, float]] = []
        for label, arguments in (("hit", HIT), ("miss", MISS)):
            for name, store in (("MemoryGrantStore", memory), ("SqliteGrantStore", own)):
                med, low = per_call_us(
                    lambda s=store, a=arguments: s.find(PRINCIPAL, TOOL, a, "s1"), n
                )
                rows.append((name, label, med, low))
            rows.append(("SqliteGrantStore, shared file *", label, *shared_find(arguments, n // 4)))
        print(f"find() per call, {args.grants + 1} persisted grants, {n} lookups")
        print(f"{'store':34} {'call':5} {'median us':>10} {'min us':>8} {'over memory':>12}")
        base = {label: med for name, label, med, _ in rows if name == "MemoryGrantStore"}
        for name, label, med, low in rows:
            print(f"{name:34} {label:5} {med:10.2f} {low:8.2f} {med - base[label]:+12.2f}")
        print("* each find timed alone (median of single calls), after a commit by another")
        print("  connection to the same file, as the journal's writer makes")

        print("\nfind() right after another connection added a grant (a reload)")
        print(f"{'grants':>8} {'median us':>10}")
        for count in (10, 100, 1000, 10000):
            path = Path(tmp) / f"reload-{count}.db"
            store, other = SqliteGrantStore(path), SqliteGrantStore(path)
            fill(store, count - 1)
            times = []
            for k in range(20):
                other.add(Grant(f"g_x{k}", PRINCIPAL, "t.x", GrantScope.tool(), "always"))
                t = time.perf_counter()
                store.find(PRINCIPAL, TOOL, HIT, "s1")
                times.append((time.perf_counter() - t) * 1e6)
            print(f"{count:8} {statistics.median(times):10.0f}")
            store.close()
            other.close()
        writer.close()
        own.close()
        shared.close()


if __name__ == "__main__":
    main()
