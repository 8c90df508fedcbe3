"""What a durable journal adds to a tool call.

Runs the real pipeline (a no-op async handler, the local evaluator, one session per sink)
with each sink in the same process, interleaving blocks of calls so that machine noise
hits every sink alike, and prints the per-call latency (median, p99) and the cost each
sink adds over ``MemoryJournal``. Between blocks, untimed, a ``SqliteJournal`` commits
what it has queued, so that its writer thread does not compete for the GIL during the
next sink's block. ``SqliteJournal (normal, os.write)`` is the default sink with its
start log written by ``os.write``, which releases the GIL, for comparison with the
write it uses (see ``write_holding_gil`` in ``clearance/harness/journal/_start_log.py``).
A second table prices the write path's pieces: building a ``JournalEvent``, encoding it, and (for comparison; the write path
never does it) validating it with the pydantic models.

    python benchmarks/bench_journal.py [--calls 20000] [--block 500] [--full] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from clearance import CallContext, Harness, MemoryJournal, Principal, Tool, ToolRegistry
from clearance.harness.journal import (
    Journal,
    JournalEvent,
    JsonlJournal,
    SqliteJournal,
    encode_data,
    parse_event,
)
from clearance.harness.journal._start_log import write_all
from clearance.policy import LocalEvaluator

SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}},
    "required": ["path"],
    "additionalProperties": False,
}


async def noop(arguments: dict[str, Any], ctx: CallContext) -> str:
    return "ok"


def registry() -> ToolRegistry:
    reg = ToolRegistry()
    reg.register("files", [Tool("read_file", noop, input_schema=SCHEMA, read_only=True)])
    return reg


def sqlite_os_write(path: Path) -> SqliteJournal:
    """The default SqliteJournal, its start log written with a plain ``os.write``."""
    journal = SqliteJournal(path)
    assert journal._start_log is not None
    journal._start_log.write = write_all
    return journal


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def settle(journal: Journal) -> None:
    """Wait until a sink with a writer thread has written everything."""
    if isinstance(journal, SqliteJournal):
        await journal.flush()


async def measure(
    sinks: dict[str, Callable[[], Journal]], calls: int, block: int
) -> dict[str, list[float]]:
    """Per-call latencies (seconds) for each sink, in interleaved blocks."""
    latencies: dict[str, list[float]] = {name: [] for name in sinks}
    harnesses = {
        name: Harness(registry(), evaluator=LocalEvaluator(allow=["files.*"]), journal=make())
        for name, make in sinks.items()
    }
    sessions = {
        name: await h.create_session(principal=Principal("User", "bench"))
        for name, h in harnesses.items()
    }
    counter = 0
    try:
        for session in sessions.values():  # warm up every path first
            for _ in range(200):
                counter += 1
                await session.call_tool(
                    "files__read_file", {"path": "a.txt"}, call_id=f"w{counter}"
                )
        while any(len(v) < calls for v in latencies.values()):
            for name, session in sessions.items():
                record = latencies[name]
                for _ in range(min(block, calls - len(record))):
                    counter += 1
                    t0 = time.perf_counter()
                    out = await session.call_tool(
                        "files__read_file", {"path": "a.txt"}, call_id=f"c{counter}"
                    )
                    record.append(time.perf_counter() - t0)
                    assert out.ok, out
                # Untimed: a sink's writer thread must not spill its backlog into the
                # next sink's block (its GIL use would be charged to that sink).
                await settle(harnesses[name].journal)
    finally:
        for h in harnesses.values():
            await h.aclose()
    return latencies


async def throughput(
    sinks: dict[str, Callable[[], Journal]], sessions: int, calls: int
) -> dict[str, float]:
    """Wall-clock microseconds per call with ``sessions`` sessions calling at once (the
    writer then commits several calls' records together)."""
    per_call: dict[str, float] = {}
    for name, make in sinks.items():
        async with Harness(
            registry(), evaluator=LocalEvaluator(allow=["files.*"]), journal=make()
        ) as harness:

            async def worker(w: int, harness: Harness = harness) -> None:
                session = await harness.create_session(principal=Principal("User", "bench"))
                for i in range(calls // sessions):
                    await session.call_tool("files__read_file", {"path": "a"}, call_id=f"{i}")

            t0 = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for w in range(sessions):
                    tg.start_soon(worker, w)
            per_call[name] = (time.perf_counter() - t0) / (calls // sessions * sessions) * 1e6
    return per_call


def parts() -> list[tuple[str, float]]:
    """Microseconds per operation for the pieces of the write path."""
    data: dict[str, Any] = {
        "tool": "files__read_file",
        "qualified_name": "files.read_file",
        "model_alias": "files__read_file",
        "principal": 'User::"bench"',
        "arguments": {"path": "a.txt"},
        "schema": {"valid": True, "error": None},
        "guardrails": [],
        "verdict": {
            "effect": "allow",
            "reasons": ["allow:files.*"],
            "annotations": {},
            "errors": [],
            "message": None,
            "evaluator": "local",
        },
        "decision": "allow",
        "reasons": ["allow:files.*"],
        "grant": None,
        "outcome": "dispatched",
        "message": None,
        "correlation_id": "0123456789ab",
        "timing_us": {"validate": 3, "guardrails": 1, "evaluate": 9, "total": 20},
    }
    event = JournalEvent("call_decided", "s_0123456789abcdef", "t1", "c1", data, seq=1)
    ops: list[tuple[str, Callable[[], object]]] = [
        ("build a JournalEvent", lambda: JournalEvent("call_decided", "s", "t", "c", data)),
        ("encode call_decided (write path)", lambda: encode_data(data)),
        ("validate call_decided (pydantic; not on the write path)", lambda: parse_event(event)),
    ]
    results = []
    for label, op in ops:
        n = 20_000
        t0 = time.perf_counter()
        for _ in range(n):
            op()
        results.append((label, (time.perf_counter() - t0) / n * 1e6))
    return results


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    lines = [
        "  ".join(
            str(c).rjust(w) if i else str(c).ljust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in [headers, *rows]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000, help="calls per sink (default 20000)")
    parser.add_argument("--block", type=int, default=500, help="calls per interleaved block")
    parser.add_argument(
        "--full", action="store_true", help='also SqliteJournal(durability="full") (fsyncs)'
    )
    parser.add_argument(
        "--sessions", type=int, default=16, help="sessions calling at once (default 16)"
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()

    def sinks(directory: Path) -> dict[str, Callable[[], Journal]]:
        directory.mkdir()
        made: dict[str, Callable[[], Journal]] = {
            "MemoryJournal": MemoryJournal,
            "SqliteJournal (normal, default)": lambda: SqliteJournal(directory / "normal.db"),
            "SqliteJournal (normal, os.write)": lambda: sqlite_os_write(directory / "os.db"),
            "SqliteJournal (off)": lambda: SqliteJournal(directory / "off.db", durability="off"),
            "JsonlJournal (normal)": lambda: JsonlJournal(directory / "normal.jsonl"),
        }
        if args.full:
            made["SqliteJournal (full)"] = lambda: SqliteJournal(
                directory / "full.db", durability="full"
            )
        return made

    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        latencies = anyio.run(measure, sinks(directory / "sequential"), args.calls, args.block)
        concurrent = anyio.run(
            throughput, sinks(directory / "concurrent"), args.sessions, args.calls
        )

    base = latencies["MemoryJournal"]
    base_p50, base_p99 = statistics.median(base), percentile(base, 0.99)
    results: list[dict[str, Any]] = []
    for name, values in latencies.items():
        p50, p99 = statistics.median(values), percentile(values, 0.99)
        results.append(
            {
                "sink": name,
                "calls": len(values),
                "median_us": p50 * 1e6,
                "p99_us": p99 * 1e6,
                "added_median_us": (p50 - base_p50) * 1e6,
                "added_p99_us": (p99 - base_p99) * 1e6,
            }
        )
    micro = parts()
    if args.json:
        print(
            json.dumps(
                {
                    "per_call": results,
                    "concurrent_us_per_call": concurrent,
                    "write_path_us": dict(micro),
                },
                indent=2,
            )
        )
        return
    print(f"Per call through the pipeline ({args.calls} calls per sink, interleaved blocks)\n")
    print(
        table(
            ["sink", "calls", "median us", "p99 us", "added median us", "added p99 us"],
            [
                [
                    r["sink"],
                    str(r["calls"]),
                    f"{r['median_us']:.1f}",
                    f"{r['p99_us']:.1f}",
                    f"{r['added_median_us']:+.1f}",
                    f"{r['added_p99_us']:+.1f}",
                ]
                for r in results
            ],
        )
    )
    base_c = concurrent["MemoryJournal"]
    print(f"\n{args.sessions} sessions calling at once ({args.calls} calls per sink)\n")
    print(
        table(
            ["sink", "wall us per call", "added us"],
            [[name, f"{us:.1f}", f"{us - base_c:+.1f}"] for name, us in concurrent.items()],
        )
    )
    print("\nThe write path's pieces\n")
    print(table(["operation", "us each"], [[label, f"{us:.2f}"] for label, us in micro]))


if __name__ == "__main__":
    main()
