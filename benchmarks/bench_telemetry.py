"""What OpenTelemetry costs per call: off, on with the API alone, on with the SDK.

Run: ``python benchmarks/bench_telemetry.py`` (``--quick`` for a short run, ``--json``).
Needs the ``otel`` extra and ``opentelemetry-sdk`` (in the test extra).

The call is ``bench_pipeline.py``'s: ``session.call_tool`` of ``files.read_file`` with a new
path each call, the local evaluator (3 rules, the scenario of ``_peers.py``), JSON Schema
validation and a ``MemoryJournal``, no guardrails. Contenders, timed call by call in interleaved rounds
(``_bench.py``) in one process:

- ``off``: ``Harness(telemetry=False)``, which is also what the default gives when no
  tracer provider is set (each hook is one ``is None`` test);
- ``on, API only``: ``Telemetry()`` with no SDK configured: the API's no-op spans and
  instruments (what an application that installed the extra but set no provider pays when
  it forces ``telemetry=True``);
- ``on, SDK``: an SDK ``TracerProvider`` with a ``SimpleSpanProcessor`` into an
  ``InMemorySpanExporter`` (cleared between blocks, untimed) and a ``MeterProvider`` with
  an ``InMemoryMetricReader``: making, ending and handing over the four spans of the call
  and recording its five measurements. A batching exporter does the export in its own
  thread; what the call pays is about this.

``--before DIR`` also compares the ``off`` call with another checkout of clearance (the
package at ``DIR/clearance``, e.g. the commit before the telemetry hooks, made with
``git archive``): child processes alternate between ``DIR`` and this checkout, each timing
the ``off`` call alone, and the table gives the median of their medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench import Contender, Summary, interleave, summarize
from _peers import local_rules, tool_names

from clearance import Harness, MemoryJournal, Principal, Tool, ToolRegistry
from clearance.policy import LocalEvaluator

SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
    "required": ["path"],
    "additionalProperties": False,
}


async def noop(arguments: dict[str, Any], ctx: Any) -> str:
    return "ok"


class Call:
    """A harness, one session, and ``call(n)``: ``session.call_tool`` with new arguments."""

    def __init__(self, telemetry: Any, clear: Any = None) -> None:
        registry = ToolRegistry()
        registry.register("files", [Tool("read_file", noop, input_schema=SCHEMA, read_only=True)])
        for namespace, names in tool_names():  # the tools the other rules are about
            registry.register(
                namespace, [Tool(n, noop, input_schema=SCHEMA, read_only=True) for n in names]
            )
        self.journal = MemoryJournal()
        options: dict[str, Any] = {}
        try:
            Harness(registry, evaluator=LocalEvaluator(allow=[]), telemetry=False)
        except TypeError:  # a checkout from before the telemetry option (--before)
            pass
        else:
            options["telemetry"] = telemetry
        self.harness = Harness(
            registry, evaluator=LocalEvaluator(**local_rules(3)), journal=self.journal, **options
        )
        self.clear = clear
        self.session: Any = None

    async def start(self, stack: AsyncExitStack) -> None:
        await stack.enter_async_context(self.harness)
        self.session = await self.harness.create_session(principal=Principal("User", "alice"))

    async def call(self, n: int) -> None:
        arguments = {"path": f"src/app/{n}.py", "limit": n}
        outcome = await self.session.call_tool("files__read_file", arguments, call_id=f"c{n}")
        if not outcome.ok:
            raise SystemExit(f"a benchmark call was refused: {outcome.text}")

    async def between(self) -> None:
        self.journal._events.clear()  # a long run must not grow memory
        if self.clear is not None:
            self.clear()


def sdk_telemetry() -> tuple[Any, Any]:
    """A Telemetry into the SDK's in-memory exporter and reader, and what clears them."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from clearance import Telemetry

    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])

    def clear() -> None:
        exporter.clear()
        reader.get_metrics_data()

    return Telemetry(tracer_provider=tracer_provider, meter_provider=meter_provider), clear


async def in_process(rounds: int, block: int) -> list[Summary]:
    from clearance import Telemetry

    telemetry, clear = sdk_telemetry()
    targets = {
        "off": Call(False),
        "on, API only": Call(Telemetry()),
        "on, SDK": Call(telemetry, clear),
    }
    contenders = [Contender(name, t.call, t.between) for name, t in targets.items()]
    async with AsyncExitStack() as stack:
        for target in targets.values():
            await target.start(stack)
        await interleave(contenders, rounds=rounds, block=block)
    return [summarize(c) for c in contenders]


async def off_alone(rounds: int, block: int) -> float:
    target = Call(False)
    contender = Contender("off", target.call, target.between)
    async with AsyncExitStack() as stack:
        await target.start(stack)
        await interleave([contender], rounds=rounds, block=block)
    return summarize(contender).median


def before_after(
    before: Path, after: Path, runs: int, rounds: int, block: int
) -> dict[str, list[float]]:
    """The ``off`` call's median in child processes, alternating between the checkouts at
    ``before`` and ``after``."""
    medians: dict[str, list[float]] = {"before": [], "after": []}
    for _ in range(runs):
        for label, root in (("before", before), ("after", after)):
            env = {**os.environ, "PYTHONPATH": str(root)}
            done = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    "--rounds",
                    str(rounds),
                    "--block",
                    str(block),
                ],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            child = json.loads(done.stdout)
            if Path(child["clearance"]).resolve().parent != root.resolve():
                raise SystemExit(f"the child ran clearance from {child['clearance']}, not {root}")
            medians[label].append(child["median"])
    return medians


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short run (fewer rounds)")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds")
    parser.add_argument("--block", type=int, default=500, help="calls per contender per round")
    parser.add_argument("--before", type=Path, help="a checkout to compare the off call with")
    parser.add_argument(
        "--after",
        type=Path,
        default=Path(__file__).resolve().parent.parent,
        help="the checkout --before is compared with (default: this one)",
    )
    parser.add_argument("--runs", type=int, default=5, help="child processes per side (--before)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    rounds = options.rounds or (4 if options.quick else 20)
    if options.child:
        import clearance

        median = anyio.run(off_alone, rounds, options.block)
        print(json.dumps({"median": median, "clearance": str(Path(clearance.__file__).parent)}))
        return 0
    results: dict[str, Any] = {}
    if options.before is not None:
        results["before_after"] = before_after(
            options.before, options.after, options.runs, max(rounds // 2, 2), options.block
        )
    summaries = anyio.run(in_process, rounds, options.block)
    results["in_process"] = [s.__dict__ for s in summaries]
    if options.json:
        print(json.dumps(results, indent=2))
        return 0
    print("One allowed read_file call through call_tool (microseconds)")
    print(f"{'':16}{'median':>8}{'added':>8}{'p99':>9}{'round medians':>16}")
    off = summaries[0].median
    for s in summaries:
        added = "" if s is summaries[0] else f"{s.median - off:>+8.1f}"
        print(f"{s.name:16}{s.median:>8.1f}{added:>8}{s.p99:>9.1f}{s.range_text():>16}")
    if "before_after" in results:
        ba = results["before_after"]
        print()
        print(f"Telemetry off, before and after the hooks ({options.runs} processes each side)")
        for label in ("before", "after"):
            runs = " ".join(f"{m:.2f}" for m in ba[label])
            print(f"  {label:7} median {statistics.median(ba[label]):6.2f} us   (runs: {runs})")
        delta = statistics.median(ba["after"]) - statistics.median(ba["before"])
        print(f"  added   {delta:+.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
