"""How long the commands a person runs again and again take to answer (issue 34).

Each command runs as a real subprocess (the installed ``clearance`` entry point, as a
person types it) against a real SQLite store: a journal of a few hundred calls, grants
and pending asks, all in one file as a host leaves them, named with ``--db`` or, for
``asks list (config)``, by the ``clearance.toml`` of the directory. Wall time from start to exit,
``--runs`` times each, interleaved so that load on the machine hits every command alike;
``python -c pass`` is the floor (the interpreter alone). The target is under 0.3 s.

    python benchmarks/bench_cli_startup.py [--runs 20]

Issue 34, 15 runs each at load average about 3.5 on the shared 2-core VM, medians in ms,
before (every verb and the whole harness imported by any command) and after (a verb's
modules imported when it is used, the packages' names when first read):

| command | before | after |
|---------|--------|-------|
| python -c pass | 26 | 18-20 |
| clearance --help | 654 | 50-55 |
| clearance asks list | 597 | 115-116 |
| clearance grants list | 585 | 101-102 |
| clearance journal | 595 | 143-144 |
| asks list (config) | 557 | 128-132 |
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

from benchmarks._bench import percentile
from clearance import Harness, Principal, SqliteGrantStore, SqliteJournal, Tool, ToolRegistry
from clearance.harness.ask_store_sqlite import SqliteAskStore
from clearance.policy import LocalEvaluator

PATH = {
    "type": "object",
    "properties": {"path": {"type": "string"}},
    "required": ["path"],
    "additionalProperties": False,
}
CALLS = 300
GRANTS = 20
ASKS = 10


async def fill(db: Path) -> None:
    """A host's store: ``CALLS`` allowed reads, ``GRANTS`` writes approved for always
    (one grant each), ``ASKS`` deletes waiting for a person."""
    registry = ToolRegistry()
    registry.register(
        "notes",
        [
            Tool("read", lambda args, ctx: "text", input_schema=PATH, read_only=True),
            Tool("write", lambda args, ctx: "written", input_schema=PATH),
            Tool("delete", lambda args, ctx: "deleted", input_schema=PATH),
        ],
    )
    evaluator = LocalEvaluator(allow=["notes.read"], ask=["notes.write", "notes.delete"])
    asks = SqliteAskStore(db)
    async with Harness(
        registry,
        evaluator=evaluator,
        journal=SqliteJournal(db),
        grant_store=SqliteGrantStore(db),
        ask_store=asks,
    ) as harness:
        session = await harness.create_session(
            principal=Principal("User", "alice"), on_permission_ask=lambda _: "allow_always"
        )
        for i in range(CALLS):
            assert (await session.call_tool("notes__read", {"path": f"f{i}"})).ok
        for i in range(GRANTS):
            assert (await session.call_tool("notes__write", {"path": f"w{i}"})).ok
        waiting = await harness.create_session(principal=Principal("User", "bob"))
        for i in range(ASKS):
            assert (await waiting.authorize("notes__delete", {"path": f"d{i}"})).pending
    asks.close()


def commands(db: Path) -> dict[str, list[str]]:
    entry = shutil.which("clearance")
    if entry is None:
        sys.exit("the clearance entry point is not on PATH (pip install -e .)")
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "clearance --help": [entry, "--help"],
        "clearance asks list": [entry, "asks", "list", "--db", str(db)],
        "clearance grants list": [entry, "grants", "list", "--db", str(db)],
        "clearance journal": [entry, "journal", "--db", str(db)],
        # Without --db: the store named by ./clearance.toml (read, nothing built).
        "asks list (config)": [entry, "asks", "list"],
    }


def run_once(argv: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, check=False)
    took = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed: {done.stderr.decode(errors='replace')}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="runs of each command")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        db = where / "clearance.db"
        anyio.run(fill, db)
        (where / "clearance.toml").write_text(
            f'[journal]\npath = "{db.name}"\n[evaluator]\nkind = "noop"\n'
        )
        table = commands(db)
        times: dict[str, list[float]] = {name: [] for name in table}
        for argv in table.values():  # once each, untimed: warm the file cache
            run_once(argv, where)
        for _ in range(args.runs):
            names = list(table)
            random.shuffle(names)
            for name in names:
                times[name].append(run_once(table[name], where))
    print(f"{args.runs} runs each, {os.cpu_count()} cores; wall time of a subprocess, ms\n")
    print(f"{'command':<24} {'median':>8} {'p90':>8} {'max':>8}")
    for name, samples in times.items():
        ms = [s * 1000 for s in samples]
        print(f"{name:<24} {statistics.median(ms):8.1f} {percentile(ms, 0.9):8.1f} {max(ms):8.1f}")


if __name__ == "__main__":
    main()
