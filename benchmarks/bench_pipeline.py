"""What one tool call costs through clearance, beside toolwarden and tollgate, in one run.

Run: ``python benchmarks/bench_pipeline.py`` (``--quick`` for a short run, ``--json``).
toolwarden and tollgate come with the ``bench`` extra (``pip install -e '.[bench]'``);
without them their rows are left out.

Every figure is the median time of one ``read_file`` call with distinct arguments (a new
path every call: no memo of identical requests can make it), measured call by call in
interleaved rounds (see ``_bench.py``); the range is the lowest and highest per-round
median, i.e. how much the shared machine moved the figure during the run.

1. The whole path, beside the peers, at 3 and 1,000 rules (the scenario of ``_peers.py``):
   clearance ``session.call_tool`` with the local evaluator, JSON Schema validation and the
   ``MemoryJournal`` (three records per call), no guardrails; toolwarden's wrapped call
   (decision only: no schema, no audit record); tollgate's ``execute_async`` (schema subset,
   a path constraint, one in-memory audit record).
2. What each option adds to ``call_tool``, against the plain call in the same rounds:
   ``SqliteJournal`` (default durability; committed between blocks, untimed, so that one
   block's backlog is not charged to the next contender), ``PathScope`` on the path, and
   ``SecretScanner`` on a 2 KB text argument (against the same call with the text and no
   scanner; the text starts with the call's number, so it too is new every call).
3. ``LocalEvaluator.evaluate`` alone at 10, 100 and 1,000 rules.
4. Sustained throughput: the mean cost per call over long runs, the garbage collector on
   and nothing emptied between calls, as an application that makes calls all day sees it.
   Parts 1 and 2 time each call on its own and give the median, empty the memory journal
   and commit SQLite between blocks (untimed), and collect garbage between rounds
   (untimed): a fair comparison of the call itself, but it leaves out what a long run
   pays later for each call. Here each contender makes ``--sustained`` calls in chunks,
   interleaved, timed whole: clearance with the default ``MemoryJournal`` (which keeps
   every record: the collector walks them), with ``SqliteJournal`` (its writer thread
   commits as it goes, competing for the GIL), and the two peers (tollgate's in-memory
   audit kept too).

Targets (issue 18): ``call_tool`` <= 10 us, flat from 3 to 1,000 rules and below both
peers; SqliteJournal adds <= 10 us, SecretScanner <= 15 us, PathScope <= 8 us.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench import Contender, Summary, interleave, percentile, summarize
from _peers import local_rules, tollgate_call, tool_names, toolwarden_call

from clearance import Harness, MemoryJournal, Principal, SqliteJournal, Tool, ToolRegistry
from clearance.guardrails import PathScope, SecretScanner
from clearance.policy import AuthzRequest, LocalEvaluator, SessionInfo, ToolInfo

SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
    "required": ["path"],
    "additionalProperties": False,
}
TEXT_SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
    "required": ["path", "text"],
    "additionalProperties": False,
}
# 2 KB of ordinary prose-like text with identifiers, numbers and a URL, no secret in it.
TEXT = (
    "Refactor parse_config() in src/app/config.py so that version 2 files load; see "
    "https://docs.example.com/config#v2 and issue 4821 for the 17 failing cases. "
) * 13
TEXT = TEXT[:2048]


async def noop(arguments: dict[str, Any], ctx: Any) -> str:
    return "ok"


def registry(*, text: bool = False, others: bool = False) -> ToolRegistry:
    """``files.read_file`` (and the 1,000 other tools the larger rule sets are about)."""
    registry = ToolRegistry()
    schema = TEXT_SCHEMA if text else SCHEMA
    registry.register("files", [Tool("read_file", noop, input_schema=schema, read_only=True)])
    if others:
        for namespace, names in tool_names():
            registry.register(
                namespace, [Tool(n, noop, input_schema=SCHEMA, read_only=True) for n in names]
            )
    return registry


class ClearanceCall:
    """A harness and one session, and ``call(n)``: ``session.call_tool`` with new arguments."""

    def __init__(
        self,
        rules: int = 3,
        *,
        journal: Any = None,
        argument_guardrails: list[Any] | None = None,
        text: bool = False,
    ) -> None:
        self.journal = journal if journal is not None else MemoryJournal()
        self.harness = Harness(
            registry(text=text, others=rules > 2),
            evaluator=LocalEvaluator(**local_rules(rules)),
            journal=self.journal,
            argument_guardrails=argument_guardrails or [],
        )
        self.text = text
        self.session: Any = None

    async def start(self, stack: AsyncExitStack) -> None:
        await stack.enter_async_context(self.harness)
        self.session = await self.harness.create_session(principal=Principal("User", "alice"))

    async def call(self, n: int) -> None:
        arguments: dict[str, Any] = (
            {"path": f"src/app/{n}.py", "text": f"{n} {TEXT}"[:2048]}
            if self.text
            else {"path": f"src/app/{n}.py", "limit": n}
        )
        outcome = await self.session.call_tool("files__read_file", arguments, call_id=f"c{n}")
        if not outcome.ok:
            raise SystemExit(f"a benchmark call was refused: {outcome.text}")

    async def between(self) -> None:
        """Untimed: commit what a durable journal holds, empty a memory one."""
        if isinstance(self.journal, MemoryJournal):
            self.journal._events.clear()  # a long run must not grow memory
        elif isinstance(self.journal, SqliteJournal):
            await self.journal.flush()


def contender(name: str, target: ClearanceCall) -> Contender:
    return Contender(name, target.call, target.between)


async def peers_part(rounds: int, block: int) -> tuple[list[Summary], list[str]]:
    """Part 1: clearance, toolwarden and tollgate at 3 and 1,000 rules, interleaved."""
    contenders: list[Contender] = []
    missing: list[str] = []
    async with AsyncExitStack() as stack:
        for rules in (3, 1000):
            target = ClearanceCall(rules)
            await target.start(stack)
            contenders.append(contender(f"clearance call_tool, {rules} rules", target))
        folder = stack.enter_context(tempfile.TemporaryDirectory())
        for rules in (3, 1000):
            try:
                contenders.append(Contender(f"toolwarden wrapped, {rules}", toolwarden_call(rules)))
            except ImportError:
                missing.append("toolwarden")
            try:
                call, clear = tollgate_call(rules, Path(folder))

                async def empty(clear: Any = clear) -> None:
                    clear()

                contenders.append(Contender(f"tollgate execute_async, {rules}", call, empty))
            except ImportError:
                missing.append("tollgate")
        await interleave(contenders, rounds=rounds, block=block)
    return [summarize(c) for c in contenders], sorted(set(missing))


async def additions_part(rounds: int, block: int, folder: Path) -> list[Summary]:
    """Part 2: the plain call, and with each option, interleaved."""
    root = folder / "ws"
    (root / "src" / "app").mkdir(parents=True)
    targets = {
        "plain": ClearanceCall(),
        "SqliteJournal": ClearanceCall(journal=SqliteJournal(folder / "bench.db")),
        "PathScope": ClearanceCall(argument_guardrails=[PathScope(root, fields=["/path"])]),
        "text (2 KB)": ClearanceCall(text=True),
        "text + SecretScanner": ClearanceCall(
            text=True, argument_guardrails=[SecretScanner.for_arguments()]
        ),
    }
    contenders = [contender(name, target) for name, target in targets.items()]
    async with AsyncExitStack() as stack:
        for target in targets.values():
            await target.start(stack)
        await interleave(contenders, rounds=rounds, block=block)
    return [summarize(c) for c in contenders]


async def sustained_part(calls: int, folder: Path) -> list[tuple[str, float, float]]:
    """Part 4: ``(name, mean us per call, lowest chunk mean)`` over ``calls`` calls each,
    in interleaved chunks, garbage collector on, nothing emptied or committed untimed."""
    chunk = min(calls, 10_000)
    contenders: list[tuple[str, Any]] = []
    async with AsyncExitStack() as stack:
        for name, target in (
            ("clearance, MemoryJournal (kept)", ClearanceCall()),
            ("clearance, SqliteJournal", ClearanceCall(journal=SqliteJournal(folder / "s.db"))),
        ):
            await target.start(stack)
            contenders.append((name, target.call))
        try:
            contenders.append(("toolwarden wrapped, 3", toolwarden_call(3)))
        except ImportError:
            pass
        try:
            contenders.append(("tollgate execute_async, 3", tollgate_call(3, folder)[0]))
        except ImportError:
            pass
        for _, call in contenders:  # warm, untimed
            for n in range(200):
                await call(n)
        spent: dict[str, list[float]] = {name: [] for name, _ in contenders}
        done, counter = 0, 1_000
        while done < calls:
            size = min(chunk, calls - done)
            for name, call in contenders:
                start = time.perf_counter()
                for n in range(counter, counter + size):
                    await call(n)
                spent[name].append((time.perf_counter() - start) / size * 1e6)
            counter += size
            done += size
    return [(name, statistics.fmean(chunks), min(chunks)) for name, chunks in spent.items()]


def evaluator_cost(rules: int, runs: int) -> tuple[float, float]:
    """``LocalEvaluator.evaluate`` alone, rules over as many tools, a new path each call."""
    evaluator = LocalEvaluator(
        allow=[f"ns.tool{i}(path=dir{i}/**)" for i in range(rules)],
        deny=[f"ns.tool{i}(path=**/.env)" for i in range(0, rules, 10)],
    )
    target = rules // 2
    tool = ToolInfo(f"ns.tool{target}", "ns", f"tool{target}", False)
    principal, session = Principal("User", "alice"), SessionInfo("s")
    requests = [
        AuthzRequest(principal, tool, {"path": f"dir{target}/a/{i}.py"}, session)
        for i in range(runs)
    ]
    assert evaluator.evaluate(requests[0]).effect == "allow"
    times = []
    clock = time.perf_counter_ns
    for request in requests:
        start = clock()
        evaluator.evaluate(request)
        times.append((clock() - start) / 1000)
    return statistics.median(times), percentile(times, 0.99)


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def report(
    peers: list[Summary],
    missing: list[str],
    added: list[Summary],
    evaluators: list[Any],
    sustained: list[tuple[str, float, float]],
) -> list[dict[str, Any]]:
    """Print the tables and the targets; return the targets as rows."""
    print("1. One allowed read_file call, new arguments each call (microseconds)")
    print(f"{'':38}{'median':>8}{'p99':>9}{'round medians':>16}")
    for s in peers:
        print(f"{s.name:38}{s.median:>8.1f}{s.p99:>9.1f}{s.range_text():>16}")
    if missing:
        print(f"(not installed: {', '.join(missing)}; pip install -e '.[bench]')")
    by = {s.name: s for s in peers}
    plain = {s.name: s for s in added}
    print()
    print("2. What each option adds to call_tool (microseconds, same rounds)")
    print(f"{'':26}{'median':>8}{'added':>8}{'round medians':>16}")
    base = plain["plain"].median
    text_base = plain["text (2 KB)"].median
    for s in added:
        against = text_base if s.name.startswith("text +") else base
        extra = "" if s.name in ("plain", "text (2 KB)") else f"{s.median - against:>+8.1f}"
        print(f"{s.name:26}{s.median:>8.1f}{extra:>8}{s.range_text():>16}")
    print()
    print("3. LocalEvaluator.evaluate alone (rules over as many tools, new path each call)")
    print(f"{'rules':>8}{'median us':>12}{'p99 us':>10}")
    for rules, median, p99 in evaluators:
        print(f"{rules:>8}{median:>12.2f}{p99:>10.2f}")
    print()
    if sustained:
        print("4. Sustained: mean per call over long runs, collector on (microseconds)")
        print(f"{'':38}{'mean':>8}{'best chunk':>12}")
        for name, mean, best in sustained:
            print(f"{name:38}{mean:>8.1f}{best:>12.1f}")
        print()
    small, large = by["clearance call_tool, 3 rules"], by["clearance call_tool, 1000 rules"]
    rows: list[dict[str, Any]] = []

    def row(target: str, measured: str, comparison: str, ok: bool) -> None:
        rows.append({"target": target, "measured": measured, "comparison": comparison, "met": ok})

    worst = max(small.median, large.median)
    row(
        "call_tool, local rules <= 10 us",
        f"{small.median:.1f} / {large.median:.1f} us",
        "3 / 1,000 rules",
        worst <= 10,
    )
    row(
        "flat from 3 to 1,000 rules",
        f"{large.median / small.median:.2f}x",
        "1,000 rules vs 3",
        large.median <= small.median * 1.15,
    )
    for peer in ("toolwarden wrapped", "tollgate execute_async"):
        if f"{peer}, 3" not in by:
            continue
        theirs = (by[f"{peer}, 3"], by[f"{peer}, 1000"])
        row(
            f"below {peer.split()[0]}",
            f"{small.median:.1f} / {large.median:.1f} us",
            f"{theirs[0].median:.1f} / {theirs[1].median:.1f} us",
            small.median < theirs[0].median and large.median < theirs[1].median,
        )
    for name, limit, against in (
        ("SqliteJournal", 10, base),
        ("PathScope", 8, base),
        ("text + SecretScanner", 15, text_base),
    ):
        extra = plain[name].median - against
        row(
            f"{name.removeprefix('text + ')} adds <= {limit} us",
            f"{extra:+.1f} us",
            f"over {against:.1f} us",
            extra <= limit,
        )
    print("Targets (issue 18)")
    for r in rows:
        print(
            f"  {verdict(r['met']):7} {r['target']:34} {r['measured']:>18}   vs {r['comparison']}"
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short run (fewer rounds)")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds")
    parser.add_argument("--block", type=int, default=500, help="calls per contender per round")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument(
        "--sustained",
        type=int,
        default=None,
        help="calls per contender in part 4 (default 100,000; --quick 20,000; 0 skips it)",
    )
    options = parser.parse_args(argv)
    rounds = options.rounds or (4 if options.quick else 20)
    sustained_calls = options.sustained
    if sustained_calls is None:
        sustained_calls = 20_000 if options.quick else 100_000
    peers, missing = anyio.run(peers_part, rounds, options.block)
    with tempfile.TemporaryDirectory() as folder:
        added = anyio.run(additions_part, rounds, options.block, Path(folder))
    sustained: list[tuple[str, float, float]] = []
    if sustained_calls > 0:
        with tempfile.TemporaryDirectory() as folder:
            sustained = anyio.run(sustained_part, sustained_calls, Path(folder))
    runs = 5_000 if options.quick else 20_000
    evaluators = [(n, *evaluator_cost(n, runs)) for n in (10, 100, 1000)]
    if options.json:
        print(
            json.dumps(
                {
                    "peers": [s.__dict__ for s in peers],
                    "added": [s.__dict__ for s in added],
                    "evaluate": evaluators,
                    "sustained": [
                        {"name": name, "mean": mean, "best_chunk": best}
                        for name, mean, best in sustained
                    ],
                },
                indent=2,
            )
        )
        return 0
    report(peers, missing, added, evaluators, sustained)
    return 0


if __name__ == "__main__":
    sys.exit(main())
