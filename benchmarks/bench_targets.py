"""Every performance target of issue 18 beside its comparison, measured in one run.

Run: ``python benchmarks/bench_targets.py`` (``--quick`` for a shorter run; ``--only
pipeline,cedar,...`` for some parts; ``--json``). Prints each part's figures, then one
table: target, figure, comparison, met or missed.

Every figure is a median over calls with distinct arguments (a new path, text or command
each call), taken in interleaved rounds where there is something to compare against in
the same process (see ``_bench.py``), so that a burst of load on the shared machine hits
both sides alike. The parts, and what each reuses:

* ``pipeline``: ``session.call_tool`` with local rules (schema, evaluator, MemoryJournal)
  at 3 and 1,000 rules beside toolwarden's wrapped call and tollgate's ``execute_async``;
  what ``SqliteJournal``, ``PathScope`` and ``SecretScanner`` (2 KB text argument) add
  over the plain call in the same rounds (``bench_pipeline.py``'s parts 1 and 2).
* ``cedar``: ``call_tool`` with ``CedarEvaluator`` at 1, 100, 10,000 and 100,000
  policies (``--quick``: 1, 100 and 10,000), each beside ``cedarpy.is_authorized`` on the
  whole set and the Cedar floor (cedarpy's lowest-level call on the two policies about
  the tool: what one Cedar decision costs under any library), after checking the sliced
  decisions against the whole set (R10); ``bench_scaling.py``'s measurement, Cedar
  contenders only.
* ``replay``: ``clearance.tuning.replay`` of a generated corpus (``bench_replay.py``'s, a
  distinct argument in every call) with local rules and with Cedar, 1 and 2 jobs.
* ``gateway``: an MCP call through ``clearance gateway`` against the same call made
  directly to the upstream server (``bench_gateway.py``, echo upstream, stdio).
* ``memory``: 10,000 open sessions in one harness (each has made one call), in a fresh
  process: the growth of its resident memory, with 1 and with 1,001 registered tools.
* ``growth``: ``call_tool`` with ``SqliteJournal`` on a database that holds 1,000,000
  journaled calls (``--quick``: 100,000) against the same call on a fresh database, in
  interleaved rounds, and both against the cost measured before the database was filled.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_gateway
import bench_pipeline
import bench_replay
import bench_scaling
from _bench import Contender, Summary, interleave, summarize
from _peers import local_rules

from clearance import Harness, Principal, SqliteJournal
from clearance.policy import LocalEvaluator
from clearance.tuning import replay

PARTS = ("pipeline", "cedar", "replay", "gateway", "memory", "growth")
FLAT = 1.15
"""A cost is "flat" when the larger case costs at most this many times the smaller."""


@dataclass
class Row:
    target: str
    figure: str
    comparison: str
    met: bool
    why: str = ""
    """What the figure is (when the table's words are not enough)."""


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# -- pipeline: local rules beside the peers, and what each option adds --------------------


def pipeline_part(quick: bool) -> list[Row]:
    rounds = 6 if quick else 20
    block = 300 if quick else 500
    say(f"pipeline: call_tool beside toolwarden and tollgate ({rounds} rounds) ...")
    peers, missing = anyio.run(bench_pipeline.peers_part, rounds, block)
    with tempfile.TemporaryDirectory() as folder:
        say(f"pipeline: what SqliteJournal, PathScope, SecretScanner add ({rounds} rounds) ...")
        added = anyio.run(bench_pipeline.additions_part, rounds, block, Path(folder))
    print("call_tool, local rules: one allowed read_file, new arguments each call (us)")
    table(peers)
    if missing:
        print(f"(not installed: {', '.join(missing)}; pip install -e '.[bench]')")
    print("what each option adds, same rounds (us)")
    table(added)
    by = {s.name: s for s in peers}
    small = by["clearance call_tool, 3 rules"]
    large = by["clearance call_tool, 1000 rules"]
    rows = [
        Row(
            "call_tool, local rules <= 10 us",
            f"{small.median:.1f} / {large.median:.1f} us",
            "at 3 / 1,000 rules",
            max(small.median, large.median) <= 10,
            f"best round {small.low:.1f} / {large.low:.1f} us",
        ),
        Row(
            "  flat from 3 to 1,000 rules",
            f"{large.median / small.median:.2f}x",
            f"<= {FLAT}x",
            large.median <= small.median * FLAT,
        ),
    ]
    for peer, label in (
        ("toolwarden wrapped", "toolwarden wrapped call"),
        ("tollgate execute_async", "tollgate execute_async"),
    ):
        if f"{peer}, 3" not in by:
            rows.append(Row(f"  below {label}", "not installed", "", False))
            continue
        theirs = by[f"{peer}, 3"], by[f"{peer}, 1000"]
        rows.append(
            Row(
                f"  below {label}",
                f"{small.median:.1f} / {large.median:.1f} us",
                f"{theirs[0].median:.1f} / {theirs[1].median:.1f} us",
                small.median < theirs[0].median and large.median < theirs[1].median,
            )
        )
    plain = {s.name: s for s in added}
    for name, limit, base in (
        ("SqliteJournal", 10, "plain"),
        ("text + SecretScanner", 15, "text (2 KB)"),
        ("PathScope", 8, "plain"),
    ):
        extra = plain[name].median - plain[base].median
        rows.append(
            Row(
                f"{name.removeprefix('text + ')} adds <= {limit} us",
                f"{extra:+.1f} us",
                f"over {plain[base].median:.1f} us ({base})",
                extra <= limit,
            )
        )
    return rows


def table(summaries: list[Summary]) -> None:
    print(f"  {'':38}{'median':>8}{'p99':>9}{'round medians':>16}{'calls':>8}")
    for s in summaries:
        print(f"  {s.name:38}{s.median:>8.1f}{s.p99:>9.1f}{s.range_text():>16}{s.calls:>8}")
    print()


# -- Cedar at 1 to 100,000 policies -------------------------------------------------------


def cedar_part(quick: bool) -> list[Row]:
    sizes = (1, 100, 10_000) if quick else (1, 100, 10_000, 100_000)
    rounds = 5 if quick else 10
    rows: list[Row] = []
    print("call_tool with Cedar, beside cedarpy on the whole set and the Cedar floor (us)")
    with tempfile.TemporaryDirectory() as folder:
        for size in sizes:
            say(f"cedar: {size:,} policies ({rounds} rounds) ...")
            # measure_size runs Cedar with 1 policy when asked for 3 rules (its smallest)
            summaries = anyio.run(
                _cedar_size, 3 if size == 1 else size, rounds, quick, Path(folder)
            )
            by = {s.name.split("|")[0]: s for s in summaries}
            table([by["clearance Cedar"], by["cedarpy whole set"], by["Cedar floor"]])
            ours, whole, floor = by["clearance Cedar"], by["cedarpy whole set"], by["Cedar floor"]
            rows.append(
                Row(
                    f"call_tool, Cedar <= 25 us at {size:,}",
                    f"{ours.median:.1f} us",
                    f"floor {floor.median:.1f}; cedarpy whole set {whole.median:,.0f}",
                    ours.median <= 25,
                    f"best round {ours.low:.1f} us; R10 checked",
                )
            )
    if quick:
        rows.append(Row("call_tool, Cedar at 100,000", "not run", "--quick stops at 10,000", False))
    return rows


async def _cedar_size(rules: int, rounds: int, quick: bool, folder: Path) -> list[Summary]:
    # Blocks of about 20 ms even with --quick (fewer rounds instead): enough calls of
    # the cheap contenders for a median.
    return await bench_scaling.measure_size(rules, rounds, False, folder, cedar_only=True)


# -- replay ---------------------------------------------------------------------------------


def replay_part(quick: bool) -> list[Row]:
    calls = 50_000 if quick else 200_000
    rounds = 2 if quick else 5
    fd, path = tempfile.mkstemp(suffix=".jsonl", prefix="clearance-bench-")
    os.close(fd)
    configs = [(name, jobs) for name in ("local", "cedar") for jobs in (1, 2)]
    rates: dict[tuple[str, int], list[float]] = {c: [] for c in configs}
    cpu_rates: dict[tuple[str, int], list[float]] = {c: [] for c in configs}
    factories = {"local": bench_replay.local_harness, "cedar": bench_replay.cedar_harness}
    rng = random.Random(7)
    try:
        bench_replay.generate(path, calls)
        for r in range(rounds):
            rng.shuffle(configs)
            for name, jobs in configs:
                say(f"replay: round {r + 1}, {name}, {jobs} job(s) ...")
                before = _cpu_seconds()
                report = replay(path, factories[name], jobs=jobs)
                used = _cpu_seconds() - before
                rates[name, jobs].append(report.calls_per_second)
                cpu_rates[name, jobs].append(report.calls / used)
    finally:
        os.unlink(path)
    print(
        f"replay: {calls:,} calls, each with distinct arguments, {rounds} interleaved rounds"
        " (calls per second: median of rounds, range; per CPU second of all processes)"
    )
    rate = {c: statistics.median(v) for c, v in rates.items()}
    for name, jobs in sorted(rates):
        low, high = min(rates[name, jobs]), max(rates[name, jobs])
        per_cpu = statistics.median(cpu_rates[name, jobs])
        print(
            f"  {name:6} jobs {jobs}: {rate[name, jobs]:>9,.0f}/s ({low:,.0f}-{high:,.0f});"
            f" {per_cpu:>9,.0f} per CPU second"
        )
    print(f"  (machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f})")
    print()
    rows = []
    for name, label, limit in (("local", "local rules", 60_000), ("cedar", "Cedar", 30_000)):
        one, two = rate[name, 1], rate[name, 2]
        rows.append(
            Row(
                f"replay, {label} >= {limit:,}/s",
                f"{one:,.0f}/s",
                f"1 job; {statistics.median(cpu_rates[name, 1]):,.0f} per CPU second",
                one >= limit,
            )
        )
        rows.append(
            Row(
                "  near-linear with --jobs",
                f"{two / one:.2f}x",
                f"2 jobs {two:,.0f}/s on {os.cpu_count()} shared cores",
                two / one >= 1.7,
                "met at >= 1.7x",
            )
        )
    return rows


def _cpu_seconds() -> float:
    """CPU time of this process and of its waited-for children (replay's workers)."""
    me, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


# -- gateway ---------------------------------------------------------------------------------


def gateway_part(quick: bool) -> list[Row]:
    calls = 400 if quick else 2_000
    say(f"gateway: {calls} calls each way ...")
    results = anyio.run(bench_gateway.run, calls, 10, "echo")
    direct = sorted(results["direct"])
    through = sorted(results["gateway"])
    d, g = direct[len(direct) // 2], through[len(through) // 2]
    print("MCP call over stdio, echo upstream, official mcp client (ms)")
    print(f"  direct {d:.3f}   through the gateway {g:.3f}   added {g - d:.3f}")
    cpu = results.get("gateway_cpu")
    if cpu:
        print(f"  gateway process CPU per call: {cpu[0]:.3f} ms")
    upstream_cpu = results.get("upstream_cpu")
    if upstream_cpu:
        print(
            f"  upstream server CPU per direct call (the SDK's server side): {upstream_cpu[0]:.3f} ms"
        )
    print()
    return [
        Row(
            "gateway adds <= 0.5 ms",
            f"{g - d:+.3f} ms",
            f"over a direct call, {d:.3f} ms",
            g - d <= 0.5,
            (f"gateway CPU {cpu[0]:.3f} ms/call" if cpu else "")
            + (f"; an SDK server alone {upstream_cpu[0]:.3f}" if upstream_cpu else ""),
        )
    ]


# -- memory: open sessions -----------------------------------------------------------------


def memory_part(quick: bool) -> list[Row]:
    rows = []
    print("10,000 open sessions in one harness, each after one call (fresh process)")
    for tools in (1, 1_001):
        say(f"memory: 10,000 sessions, {tools:,} tools ...")
        out = subprocess.run(
            [sys.executable, __file__, "--child-sessions", str(tools)],
            capture_output=True,
            text=True,
            check=True,
        )
        found = json.loads(out.stdout)
        grown = found["after"] - found["before"]
        print(
            f"  {tools:>5,} tools: resident {found['before']:.0f} MB -> {found['after']:.0f} MB"
            f" (+{grown:.0f} MB, {grown * 1024 / found['sessions']:.1f} KB a session)"
        )
        rows.append(
            Row(
                f"10,000 sessions <= 200 MB ({tools:,} tools)",
                f"{grown:.0f} MB",
                f"harness before: {found['before']:.0f} MB",
                grown <= 200,
                "resident memory added (SqliteJournal)",
            )
        )
    print()
    return rows


def resident_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


async def child_sessions(tools: int, sessions: int = 10_000) -> dict[str, float]:
    """In a fresh process: a harness (SqliteJournal), ``sessions`` sessions, one call each."""
    import gc

    logging.disable(logging.WARNING)
    with tempfile.TemporaryDirectory() as folder:
        journal = SqliteJournal(Path(folder) / "sessions.db")
        rules = local_rules(1000 if tools > 1 else 2)
        harness = Harness(
            bench_pipeline.registry(others=tools > 1),
            evaluator=LocalEvaluator(**rules),
            journal=journal,
        )
        async with harness:
            warm = await harness.create_session(principal=Principal("User", "warm"))
            await warm.call_tool("files__read_file", {"path": "src/a.py"}, call_id="c")
            await journal.flush()
            gc.collect()
            before = resident_mb()
            opened = []
            for i in range(sessions):
                session = await harness.create_session(principal=Principal("User", f"u{i}"))
                outcome = await session.call_tool(
                    "files__read_file", {"path": f"src/{i}.py"}, call_id="c"
                )
                assert outcome.ok, outcome.text
                opened.append(session)
            await journal.flush()
            gc.collect()
            after = resident_mb()
            assert len(harness.sessions) == sessions + 1
    return {"before": before, "after": after, "sessions": sessions}


# -- growth: SqliteJournal per-call cost as the database grows ------------------------------


class SqliteCall:
    """``call_tool`` with a SqliteJournal, a new session every 10,000 calls (a session's
    call ids are kept for its lifetime)."""

    def __init__(self, path: Path) -> None:
        self.journal = SqliteJournal(path)
        self.harness = Harness(
            bench_pipeline.registry(),
            evaluator=LocalEvaluator(**local_rules(2)),
            journal=self.journal,
        )
        self.session: Any = None
        self.made = 0

    async def start(self, stack: AsyncExitStack) -> None:
        await stack.enter_async_context(self.harness)

    async def call(self, n: int) -> None:
        if self.made % 10_000 == 0:
            if self.session is not None:
                await self.session.aclose()
            self.session = await self.harness.create_session(principal=Principal("User", "al"))
        self.made += 1
        arguments = {"path": f"src/app/{n}.py", "limit": n}
        outcome = await self.session.call_tool("files__read_file", arguments, call_id=f"c{n}")
        if not outcome.ok:
            raise SystemExit(f"a benchmark call was refused: {outcome.text}")

    async def between(self) -> None:
        await self.journal.flush()


def growth_part(quick: bool) -> list[Row]:
    fill = 100_000 if quick else 1_000_000
    rounds = 6 if quick else 15
    with tempfile.TemporaryDirectory() as folder:
        summaries = anyio.run(_growth, Path(folder), fill, rounds)
    start_big, start_fresh, after_big, after_fresh, seconds, rows_held = summaries
    print(f"call_tool with SqliteJournal as the database grows (us; {fill:,} calls filled)")
    table([start_big, start_fresh, after_big, after_fresh])
    print(f"  filling took {seconds:.0f} s; the database then held {rows_held:,} records")
    print()
    ratio = after_big.median / after_fresh.median
    return [
        Row(
            f"SqliteJournal flat to {fill:,} calls",
            f"{after_big.median:.1f} us",
            f"fresh db {after_fresh.median:.1f} us (same rounds); at start {start_big.median:.1f}",
            ratio <= FLAT,
            f"{ratio:.2f}x a fresh db; met at <= {FLAT}x",
        )
    ]


async def _growth(
    folder: Path, fill: int, rounds: int
) -> tuple[Summary, Summary, Summary, Summary, float, int]:
    big, fresh = SqliteCall(folder / "big.db"), SqliteCall(folder / "fresh.db")
    async with AsyncExitStack() as stack:
        await big.start(stack)
        await fresh.start(stack)
        say(f"growth: before filling ({rounds} rounds) ...")
        first = [Contender("empty db", big.call, big.between)]
        first.append(Contender("fresh db (start)", fresh.call, fresh.between))
        await interleave(first, rounds=rounds, block=300)
        say(f"growth: filling {fill:,} calls ...")
        t = time.perf_counter()
        n = first[0].counter
        for _ in range(fill):
            n += 1
            await big.call(n)
            if n % 10_000 == 0:
                await big.journal.flush()
        await big.journal.flush()
        seconds = time.perf_counter() - t
        held = _records(big.journal)
        say(f"growth: after filling ({rounds} rounds) ...")
        second = [Contender(f"db with {fill:,} calls", big.call, big.between)]
        second[0].counter = n
        second.append(Contender("fresh db (after)", fresh.call, fresh.between))
        second[1].counter = first[1].counter
        await interleave(second, rounds=rounds, block=300)
    a, b = (summarize(c) for c in first)
    c, d = (summarize(c) for c in second)
    return a, b, c, d, seconds, held


def _records(journal: SqliteJournal) -> int:
    import sqlite3

    with sqlite3.connect(journal.path) as db:
        return int(db.execute("SELECT count(*) FROM events").fetchone()[0])


# -- the table ---------------------------------------------------------------------------------


def report(rows: list[Row], quick: bool, seconds: float) -> None:
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(
        f"Targets (issue 18), {when}, {'--quick, ' if quick else ''}{seconds:.0f} s; "
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f} (a shared machine: medians)"
    )
    width = max(len(r.target) for r in rows)
    fig = max(len(r.figure) for r in rows)
    comp = max(len(r.comparison) for r in rows)
    print(f"{'target':{width}}  {'figure':>{fig}}  {'comparison':{comp}}  result")
    for r in rows:
        verdict = "met" if r.met else "MISSED"
        note = f"  ({r.why})" if r.why else ""
        print(f"{r.target:{width}}  {r.figure:>{fig}}  {r.comparison:{comp}}  {verdict}{note}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and sizes")
    parser.add_argument("--only", default=",".join(PARTS), help=f"parts among {PARTS}")
    parser.add_argument("--json", action="store_true", help="the table as JSON too")
    parser.add_argument("--child-sessions", type=int, help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.child_sessions is not None:
        print(json.dumps(anyio.run(child_sessions, options.child_sessions)))
        return 0
    logging.disable(logging.WARNING)  # most of the 1,000 other tools are ungoverned
    chosen = [p.strip() for p in options.only.split(",") if p.strip()]
    unknown = set(chosen) - set(PARTS)
    if unknown:
        parser.error(f"unknown part(s): {', '.join(sorted(unknown))}")
    start = time.perf_counter()
    rows: list[Row] = []
    parts = {
        "pipeline": pipeline_part,
        "cedar": cedar_part,
        "replay": replay_part,
        "gateway": gateway_part,
        "memory": memory_part,
        "growth": growth_part,
    }
    for name in PARTS:
        if name in chosen:
            rows += parts[name](options.quick)
    report(rows, options.quick, time.perf_counter() - start)
    if options.json:
        print(json.dumps([asdict(r) for r in rows], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
