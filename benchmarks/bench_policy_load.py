"""How long a Cedar policy set takes to load (parse, validate against the generated schema,
plan) as it grows, in the two shapes a deployment has (issue 36):

- ``many tools``: N permits, each on its own tool (a gateway in front of many MCP servers);
- ``one tool``: N permits on one tool (many rules for one action).

Prints a table of seconds per size and the growth from one size to the next (linear
growth is the ratio of the sizes). ``--max N`` caps the sizes (default 3000; 10000 takes a
minute or so).

    python benchmarks/bench_policy_load.py [--max 10000]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from clearance.harness.tools import Tool, ToolRegistry
from clearance.policy.cedar import CedarEvaluator

SIZES = (100, 300, 1000, 3000, 10000)
SCHEMA = {"type": "object", "properties": {"x": {"type": "string"}, "n": {"type": "integer"}}}


def _handler(arguments: dict[str, Any], ctx: Any) -> None:
    return None


def many_tools(n: int) -> tuple[ToolRegistry, str]:
    registry = ToolRegistry()
    registry.register("ns", [Tool(f"t{i}", _handler, input_schema=SCHEMA) for i in range(n)])
    policies = "\n".join(
        f'@id("p{i}") permit(principal, action == Action::"ns.t{i}", resource)'
        f' when {{ context.input has x && context.input.x == "v{i}" }};'
        for i in range(n)
    )
    return registry, policies


def one_tool(n: int) -> tuple[ToolRegistry, str]:
    registry = ToolRegistry()
    registry.register("ns", [Tool("t", _handler, input_schema=SCHEMA)])
    policies = "\n".join(
        f'@id("p{i}") permit(principal, action == Action::"ns.t", resource)'
        f' when {{ context.input has x && context.input.x == "v{i}" }};'
        for i in range(n)
    )
    return registry, policies


def load_seconds(registry: ToolRegistry, policies: str) -> float:
    start = time.perf_counter()
    evaluator = CedarEvaluator(policies)
    evaluator.bind(registry)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max", type=int, default=3000, help="the largest size (default 3000)")
    args = parser.parse_args()
    sizes = [n for n in SIZES if n <= args.max]
    print(f"{'shape':<11}{'policies':>9}{'seconds':>10}{'growth':>9}{'linear':>8}")
    for shape, build in (("many tools", many_tools), ("one tool", one_tool)):
        previous: tuple[int, float] | None = None
        for n in sizes:
            seconds = load_seconds(*build(n))
            growth = linear = ""
            if previous is not None:
                growth = f"{seconds / previous[1]:.1f}x"
                linear = f"{n / previous[0]:.1f}x"
            print(f"{shape:<11}{n:>9,}{seconds:>10.2f}{growth:>9}{linear:>8}")
            previous = (n, seconds)


if __name__ == "__main__":
    main()
