"""How fast ``CedarEvaluator.evaluate`` decides, from 1 to 10,000 policies over 1,000 tools.

Measured in the same run, on the same policies and calls:

* ``clearance``: ``CedarEvaluator.evaluate(request)`` (parsed handles, sliced by scope,
  context pruned to what the applicable policies read, verdict mapping included);
* ``cedarpy naive``: ``cedarpy.is_authorized`` given the policy text and the entity list on
  every call, as a first integration would;
* ``cedarpy pre-parsed``: ``cedarpy.is_authorized`` with the whole set parsed once into a
  ``PolicySet`` and the entities into an ``Entities`` handle;
* ``Cedar floor``: cedarpy's lowest-level call on a pre-parsed set of only the called tool's
  policies with only the context they read: what Cedar itself costs, without any Python
  around it. The difference to ``clearance`` is what the evaluator and engine add.

The policies: policy ``i`` is about tool ``i mod 1000``; nine in ten are permits with a
condition on the path argument, one in ten forbids. Every call goes to a tool that has
policies. Each configuration's decisions are checked to agree before they are timed.

Run: ``python benchmarks/bench_cedar.py`` (``--quick`` for fewer calls, ``--plot FILE`` for
the PNG; the plot needs matplotlib and is skipped without it). Targets: median at most 30 us
at every size, and at 10,000 policies at least 100x faster than pre-parsed cedarpy.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cedarpy
from cedarpy import _internal

from clearance.harness.tools import Tool, ToolRegistry
from clearance.policy.base import AuthzRequest, Principal, SessionInfo
from clearance.policy.cedar import CedarEvaluator

SIZES = (1, 10, 100, 1_000, 10_000)
NAMESPACES = 10
TOOLS_PER_NAMESPACE = 100
SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "count": {"type": "integer"}},
    "required": ["path"],
    "additionalProperties": False,
}


def _handler(arguments: dict[str, Any], ctx: Any) -> str:
    return "ok"


def build_registry() -> ToolRegistry:
    registry = ToolRegistry()
    for n in range(NAMESPACES):
        tools = [
            Tool(f"tool{j}", _handler, input_schema=SCHEMA, read_only=j % 2 == 0)
            for j in range(TOOLS_PER_NAMESPACE)
        ]
        registry.register(f"ns{n}", tools)
    return registry


def build_policies(count: int, tools: Sequence[Tool]) -> list[str]:
    policies = []
    for i in range(count):
        tool = tools[i % len(tools)].qualified_name
        if i % 10 == 9:
            policies.append(
                f'@id("p{i}")\nforbid(principal, action == Action::"{tool}", resource)\n'
                f'when {{ context.input.path like "*secret{i}*" }};'
            )
        else:
            policies.append(
                f'@id("p{i}")\npermit(principal, action == Action::"{tool}", resource)\n'
                f'when {{ context.input.path like "src/{i % 7}/*" }};'
            )
    return policies


@dataclass
class Row:
    policies: int
    clearance_median: float
    clearance_p99: float
    naive_median: float
    preparsed_median: float
    floor_median: float
    """Cedar alone on the tool's own policies (cedarpy's lowest-level call): the floor."""

    @property
    def speedup(self) -> float:
        return self.preparsed_median / self.clearance_median


def time_calls(fn: Callable[[int], Any], calls: int, budget: float, warmup: int) -> list[float]:
    """Per-call latencies in microseconds: at most ``calls`` calls or ``budget`` seconds.

    ``warmup`` calls first, untimed: every distinct request once, so the caches a running
    harness would have warm (slices, principals) are warm.
    """
    for i in range(warmup):
        fn(i)
    samples: list[float] = []
    clock = time.perf_counter
    deadline = clock() + budget
    gc.disable()
    try:
        for i in range(calls):
            start = clock()
            fn(i)
            samples.append((clock() - start) * 1e6)
            if i % 64 == 0 and clock() > deadline and len(samples) >= 20:
                break
    finally:
        gc.enable()
    return samples


def run(sizes: Sequence[int], calls: int, budget: float) -> list[Row]:
    registry = build_registry()
    rows = []
    for size in sizes:
        row = measure(size, registry, calls, budget)
        rows.append(row)
        print(
            f"  {size:>6} policies: clearance {row.clearance_median:8.1f} us, "
            f"naive {row.naive_median:10.1f} us, pre-parsed {row.preparsed_median:9.1f} us",
            file=sys.stderr,
        )
    return rows


def measure(size: int, registry: ToolRegistry, calls: int, budget: float) -> Row:
    """Time the three ways of deciding on ``size`` policies."""
    tools = list(registry)
    principal = Principal("User", "alice")
    texts = build_policies(size, tools)
    text = "\n".join(texts)
    evaluator = CedarEvaluator(text)
    evaluator.bind(registry)
    targets = [tools[i % len(tools)] for i in range(min(size, len(tools)))]
    requests = [
        AuthzRequest(
            principal,
            tool.info,
            {"path": f"src/{i % 7}/main.py", "count": i},
            SessionInfo("s1", "t1"),
        )
        for i, tool in enumerate(targets)
    ]

    # The same calls as plain Cedar requests, with the full context an integrator would
    # build, the tool entities and the action hierarchy as entities.
    entity_list = [
        {
            "uid": {"type": "Tool", "id": t.qualified_name},
            "attrs": {"namespace": t.namespace, "read_only": t.read_only, "source": "callback"},
            "parents": [{"type": "Namespace", "id": t.namespace}],
        }
        for t in tools
    ]
    entity_list += [
        {
            "uid": {"type": "Action", "id": t.qualified_name},
            "attrs": {},
            "parents": [
                {"type": "Action", "id": "call_tool"},
                {"type": "Action", "id": "read_only" if t.read_only else "mutating"},
                {"type": "Action", "id": f"ns:{t.namespace}"},
            ],
        }
        for t in tools
    ]
    cedar_requests: list[dict[str, Any]] = [
        {
            "principal": {"type": "User", "id": "alice"},
            "action": {"type": "Action", "id": r.tool.qualified_name},
            "resource": {"type": "Tool", "id": r.tool.qualified_name},
            "context": {
                "input": dict(r.arguments),
                "session": {"id": r.session.id, "turn": r.session.turn_id},
                "tool": {"read_only": r.tool.read_only, "annotations": {}},
            },
        }
        for r in requests
    ]
    policy_set = cedarpy.PolicySet.from_str(text)
    entities = cedarpy.Entities.from_json_str(json.dumps(entity_list))

    for r, cr in zip(requests, cedar_requests, strict=True):
        ours = evaluator.evaluate(r)
        theirs = cedarpy.is_authorized(cr, policy_set, entities)
        assert (ours.effect == "allow") == theirs.allowed, (r, ours, theirs.decision)

    n = len(requests)
    ours_t = time_calls(lambda i: evaluator.evaluate(requests[i % n]), calls, budget, n)
    naive_t = time_calls(
        lambda i: cedarpy.is_authorized(cedar_requests[i % n], text, entity_list),
        calls,
        budget,
        1,
    )
    pre_t = time_calls(
        lambda i: cedarpy.is_authorized(cedar_requests[i % n], policy_set, entities),
        calls,
        budget,
        min(n, 200),
    )
    # The floor: Cedar itself on exactly the tool's own policies, pre-parsed, with only the
    # context they read, through cedarpy's lowest-level call. What clearance adds is the rest.
    by_tool: dict[str, list[str]] = {}
    for i, policy in enumerate(texts):
        by_tool.setdefault(tools[i % len(tools)].qualified_name, []).append(policy)
    floor_sets = [
        cedarpy.PolicySet.from_str("\n".join(by_tool[r.tool.qualified_name])) for r in requests
    ]
    floor_requests = [
        {**cr, "context": json.dumps({"input": {"path": cr["context"]["input"]["path"]}})}
        for cr in cedar_requests
    ]
    inner = entities._inner
    floor_t = time_calls(
        lambda i: _internal.is_authorized_batch(
            [floor_requests[i % n]], floor_sets[i % n], inner, None, False
        ),
        calls,
        budget,
        n,
    )
    return Row(
        size,
        statistics.median(ours_t),
        statistics.quantiles(ours_t, n=100)[98],
        statistics.median(naive_t),
        statistics.median(pre_t),
        statistics.median(floor_t),
    )


def table(rows: Sequence[Row]) -> str:
    head = (
        f"{'policies':>8} | {'clearance median':>16} | {'p99':>8} | {'cedarpy naive':>13} | "
        f"{'cedarpy pre-parsed':>18} | {'vs pre-parsed':>13} | {'Cedar floor':>11}"
    )
    lines = [head, "-" * len(head)]
    lines.extend(
        f"{r.policies:>8} | {r.clearance_median:>13.1f} us | {r.clearance_p99:>5.1f} us | "
        f"{r.naive_median:>10.1f} us | {r.preparsed_median:>15.1f} us | {r.speedup:>12.1f}x | "
        f"{r.floor_median:>8.1f} us"
        for r in rows
    )
    return "\n".join(lines)


def plot(rows: Sequence[Row], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    sizes = [r.policies for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(sizes, [r.clearance_median for r in rows], "o-", label="clearance CedarEvaluator")
    ax.plot(sizes, [r.preparsed_median for r in rows], "s-", label="cedarpy, pre-parsed set")
    ax.plot(sizes, [r.naive_median for r in rows], "^-", label="cedarpy, text each call")
    ax.plot(sizes, [r.floor_median for r in rows], "x--", label="Cedar floor (tool's own policies)")
    ax.axhline(30, color="grey", linestyle=":", label="30 us target")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("policies (over 1,000 tools)")
    ax.set_ylabel("median latency per decision (us)")
    ax.set_title("Cedar decision latency")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls per configuration")
    parser.add_argument(
        "--plot",
        type=Path,
        default=Path(__file__).with_name("bench_cedar.png"),
        help="where to save the PNG plot (default: next to this script)",
    )
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)  # most of the 1,000 tools are ungoverned by design
    calls, budget = (2_000, 1.0) if args.quick else (20_000, 4.0)
    rows = run(SIZES, calls, budget)
    if args.json:
        print(json.dumps([{**r.__dict__, "speedup": r.speedup} for r in rows], indent=2))
    else:
        print(table(rows))
    if plot(rows, args.plot):
        print(f"plot: {args.plot}")
    else:
        print("plot skipped: matplotlib is not installed (pip install matplotlib)")
    worst = max(r.clearance_median for r in rows)
    last = rows[-1]
    print(
        f"targets: median <= 30 us at every size: {'met' if worst <= 30 else 'MISSED'} "
        f"(worst {worst:.1f} us); >= 100x pre-parsed cedarpy at {last.policies} policies: "
        f"{'met' if last.speedup >= 100 else 'MISSED'} ({last.speedup:.0f}x)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
