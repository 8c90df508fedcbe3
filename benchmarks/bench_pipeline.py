"""Added cost of the pipeline per call, and the local evaluator's decision time.

Run: python benchmarks/bench_pipeline.py [--calls N]

1. A no-op async handler called directly vs through ``session.call_tool`` (schema
   validation, local evaluator with a 2-rule policy, MemoryJournal), measured in the same
   run; median and p99 of the added cost per call.
2. The same call with a ``PathScope`` argument guardrail, with a ``SecretScanner`` over a
   2 KB text argument, and with ``SqliteJournal`` (default durability) instead of the
   ``MemoryJournal``: what each adds per call over the plain pipeline, same run.
3. ``LocalEvaluator.evaluate`` at 10, 100 and 1,000 rules spread over as many tools.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import anyio

from clearance import CallContext, Harness, MemoryJournal, Principal, Tool, ToolRegistry
from clearance.policy import AuthzRequest, LocalEvaluator, SessionInfo, ToolInfo

SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
    "required": ["path"],
    "additionalProperties": False,
}


async def noop(arguments: dict[str, Any], ctx: CallContext) -> str:
    return "ok"


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


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


async def pipeline_cost(
    calls: int,
    *,
    argument_guardrails: list[Any] | None = None,
    journal: Any = None,
    text: bool = False,
) -> dict[str, float]:
    registry = ToolRegistry()
    schema = TEXT_SCHEMA if text else SCHEMA
    registry.register("files", [Tool("read_file", noop, input_schema=schema, read_only=True)])
    evaluator = LocalEvaluator(
        allow=["files.read_file(path=src/**)"], deny=["files.*(path=**/.env)"]
    )
    args: dict[str, Any] = {"path": "src/app/main.py", "limit": 10}
    if text:
        args = {"path": "src/app/main.py", "text": TEXT[:2048]}
    ctx = CallContext(
        session_id="s",
        turn_id=None,
        call_id="c",
        qualified_name="files.read_file",
        model_alias="files__read_file",
        principal=Principal("User", "alice"),
    )
    direct: list[float] = []
    through: list[float] = []
    async with Harness(
        registry,
        evaluator=evaluator,
        journal=journal if journal is not None else MemoryJournal(),
        argument_guardrails=argument_guardrails or [],
    ) as harness:
        session = await harness.create_session(principal=Principal("User", "alice"))
        for i in range(2000):  # warm up
            await session.call_tool("files__read_file", args, call_id=f"w{i}")
            await noop(args, ctx)
        clock = time.perf_counter
        # Interleave the two measurements so both see the same machine state.
        for i in range(calls):
            t0 = clock()
            await noop(args, ctx)
            t1 = clock()
            outcome = await session.call_tool("files__read_file", args, call_id=f"c{i}")
            t2 = clock()
            direct.append((t1 - t0) * 1e6)
            through.append((t2 - t1) * 1e6)
            if not outcome.ok:
                raise SystemExit(f"call failed: {outcome.text}")
            if i % 5000 == 4999 and isinstance(harness.journal, MemoryJournal):
                # Keep the journal from dominating memory in long runs.
                harness.journal._events.clear()
    added = [t - d for t, d in zip(through, direct, strict=True)]
    return {
        "direct_median": statistics.median(direct),
        "through_median": statistics.median(through),
        "added_median": statistics.median(added),
        "added_p99": pct(added, 0.99),
    }


def evaluator_cost(rules: int, runs: int = 20000) -> tuple[float, float]:
    evaluator = LocalEvaluator(
        allow=[f"ns.tool{i}(path=dir{i}/**)" for i in range(rules)],
        deny=[f"ns.tool{i}(path=**/.env)" for i in range(0, rules, 10)],
    )
    target = rules // 2
    request = AuthzRequest(
        Principal("User", "alice"),
        ToolInfo(f"ns.tool{target}", "ns", f"tool{target}", False),
        {"path": f"dir{target}/a/b.py"},
        SessionInfo("s"),
    )
    assert evaluator.evaluate(request).effect == "allow"
    times = []
    clock = time.perf_counter
    for _ in range(runs):
        t0 = clock()
        evaluator.evaluate(request)
        times.append((clock() - t0) * 1e6)
    return statistics.median(times), pct(times, 0.99)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=50_000)
    options = parser.parse_args()
    result = anyio.run(pipeline_cost, options.calls)
    print(
        f"Pipeline cost per call ({options.calls:,} calls, no-op async handler, schema + 2-rule local policy + memory journal)"
    )
    print(f"{'':28}{'median us':>12}{'p99 us':>10}")
    print(f"{'handler called directly':28}{result['direct_median']:>12.2f}{'':>10}")
    print(f"{'through the pipeline':28}{result['through_median']:>12.2f}{'':>10}")
    print(
        f"{'added by the pipeline':28}{result['added_median']:>12.2f}{result['added_p99']:>10.2f}   target <= 15 us median"
    )
    print()
    import tempfile
    from pathlib import Path

    from clearance import SqliteJournal
    from clearance.guardrails import PathScope, SecretScanner

    calls = max(5_000, options.calls // 5)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        (root / "src" / "app").mkdir(parents=True)
        (root / "src" / "app" / "main.py").write_text("print('hi')\n")
        rows = []
        base_plain = anyio.run(pipeline_cost, calls)["through_median"]
        path_scope = anyio.run(
            lambda: pipeline_cost(calls, argument_guardrails=[PathScope(root, fields=["/path"])])
        )
        rows.append(("PathScope (one path)", path_scope["through_median"] - base_plain))
        base_text = anyio.run(lambda: pipeline_cost(calls, text=True))["through_median"]
        scanner = anyio.run(
            lambda: pipeline_cost(
                calls, text=True, argument_guardrails=[SecretScanner.for_arguments()]
            )
        )
        rows.append(("SecretScanner (path + 2 KB text)", scanner["through_median"] - base_text))
        sqlite = anyio.run(
            lambda: pipeline_cost(calls, journal=SqliteJournal(Path(tmp) / "bench.db"))
        )
        rows.append(("SqliteJournal vs MemoryJournal", sqlite["through_median"] - base_plain))
    print(f"What each adds per call over the plain pipeline ({calls:,} calls each)")
    print(f"{'':36}{'added median us':>16}")
    for label, added in rows:
        print(f"{label:36}{added:>16.2f}")
    print("targets: PathScope and SecretScanner <= 20 us each; SqliteJournal <= 25 us")
    print()
    print("LocalEvaluator.evaluate (rules spread over as many tools)")
    print(f"{'rules':>8}{'median us':>12}{'p99 us':>10}")
    for n in (10, 100, 1000):
        median, p99 = evaluator_cost(n)
        print(f"{n:>8}{median:>12.2f}{p99:>10.2f}")
    print("target <= 5 us at 1,000 rules")


if __name__ == "__main__":
    main()
