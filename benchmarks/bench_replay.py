"""Replay throughput: calls per second through ``clearance.tuning.replay``.

Run: python benchmarks/bench_replay.py [--calls N] [--jobs 1 2]

Generates a corpus of N calls (default 1,000,000) in a temporary file (reads and writes
over four tools, a few principals, paths in and out of scope, an occasional invalid call;
every call's arguments are distinct: the call's number is in its path, directory, content
or command) and replays it with the local evaluator and with the Cedar evaluator (the same
policy in both languages), with 1 and 2 worker processes, all in the same run. Each replay
runs every call through ``Harness.decide`` (schema, guardrails, evaluator) and counts
everything the report holds. Targets (issue 18): >= 60,000 calls/s (local) and >= 30,000
calls/s (Cedar) per process, and a near-linear gain with ``--jobs``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from clearance import Harness, MemoryJournal, Tool, ToolRegistry
from clearance.policy import LocalEvaluator
from clearance.policy.cedar import CedarEvaluator
from clearance.tuning import ReplayReport, replay

PATH = {"type": "string"}


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def _noop(arguments: dict[str, Any], ctx: Any) -> str:
    return ""


def registry() -> ToolRegistry:
    r = ToolRegistry()
    r.register(
        "files",
        [
            Tool(
                "read_file",
                _noop,
                input_schema=_schema({"path": PATH, "limit": {"type": "integer"}}, ["path"]),
                read_only=True,
            ),
            Tool("list_dir", _noop, input_schema=_schema({"path": PATH}, ["path"]), read_only=True),
            Tool(
                "write_file",
                _noop,
                input_schema=_schema({"path": PATH, "content": PATH}, ["path", "content"]),
            ),
        ],
    )
    r.register("shell", [Tool("run", _noop, input_schema=_schema({"command": PATH}, ["command"]))])
    return r


LOCAL = {
    "allow": [
        "files.read_file",
        "files.list_dir",
        "shell.run(command=git status*)",
        "shell.run(command=git diff*)",
        "shell.run(command=ls*)",
    ],
    "ask": ["files.write_file(path=src/**)"],
    "deny": ["files.*(path=**/.env)", "files.*(path=**/*.pem)"],
}
CEDAR = """
@id("read") permit (principal, action in Action::"read_only", resource);
@id("write-src") @ask("write") permit (principal, action == Action::"files.write_file", resource)
  when { context.input.path like "src/*" };
@id("shell") permit (principal, action == Action::"shell.run", resource)
  when { context.input.command like "git status*" || context.input.command like "git diff*" ||
         context.input.command like "ls*" };
@id("no-env") forbid (principal, action in Action::"ns:files", resource)
  when { context.input has path && (context.input.path like "*.env" || context.input.path like "*.pem") };
"""


def local_harness() -> Harness:
    evaluator = LocalEvaluator(allow=LOCAL["allow"], ask=LOCAL["ask"], deny=LOCAL["deny"])
    return Harness(registry(), evaluator=evaluator, journal=MemoryJournal())


def cedar_harness() -> Harness:
    return Harness(registry(), evaluator=CedarEvaluator(CEDAR), journal=MemoryJournal())


def generate(path: str, calls: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    principals = [f'User::"u{i}"' for i in range(50)]
    dirs = ["src", "src/app", "tests", "docs", "config"]
    files = ["main.py", "util.py", "README.md", ".env", "key.pem", "notes.txt"]
    commands = ["git status", "git diff HEAD", "ls -la", "rm -rf build", "curl evil.io"]
    # Every call's arguments are distinct (its number is in them): no memo of identical
    # requests can make a figure.
    with open(path, "w", encoding="utf-8") as out:
        for n in range(calls):
            roll = rng.random()
            if roll < 0.55:
                tool = "files.read_file"
                arguments: dict[str, Any] = {"path": f"{rng.choice(dirs)}/{n}/{rng.choice(files)}"}
                if rng.random() < 0.3:
                    arguments["limit"] = rng.randrange(1, 500)
            elif roll < 0.70:
                tool, arguments = "files.list_dir", {"path": f"{rng.choice(dirs)}/{n}"}
            elif roll < 0.85:
                tool = "files.write_file"
                arguments = {
                    "path": f"{rng.choice(dirs)}/{n}/{rng.choice(files)}",
                    "content": f"{n} " + "x" * rng.randrange(1, 80),
                }
            elif roll < 0.99:
                tool, arguments = "shell.run", {"command": f"{rng.choice(commands)} {n}"}
            else:
                tool, arguments = "files.read_file", {"path": n}  # invalid
            out.write(
                json.dumps(
                    {
                        "principal": rng.choice(principals),
                        "tool": tool,
                        "arguments": arguments,
                        "id": str(n),
                    },
                    separators=(",", ":"),
                )
                + "\n"
            )


def measure(path: str, jobs: list[int]) -> Iterator[tuple[str, int, ReplayReport]]:
    """Replay the corpus at ``path`` with each evaluator and each number of jobs."""
    for name, factory in (("local", local_harness), ("cedar", cedar_harness)):
        for n in jobs:
            yield name, n, replay(path, factory, jobs=n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    fd, path = tempfile.mkstemp(suffix=".jsonl", prefix="clearance-bench-")
    os.close(fd)
    try:
        t = time.perf_counter()
        generate(path, args.calls)
        size = os.path.getsize(path) / 1e6
        print(
            f"corpus: {args.calls:,} calls, {size:.0f} MB, generated in {time.perf_counter() - t:.1f} s"
        )
        print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
        print()
        print(
            f"{'evaluator':<10} {'jobs':>4} {'calls/s':>10} {'seconds':>8} {'gain':>6}  {'evaluate p50/p99 us':>20}  outcomes"
        )
        base: dict[str, float] = {}
        for name, jobs, report in measure(path, args.jobs):
            rate = report.calls_per_second
            base.setdefault(name, rate)
            lat = report.latency_us["evaluate"]
            outcomes = " ".join(f"{k}={v}" for k, v in report.outcomes.items() if v)
            print(
                f"{name:<10} {jobs:>4} {rate:>10,.0f} {report.elapsed:>8.1f}"
                f" {rate / base[name]:>5.2f}x  {lat['p50']:>9}/{lat['p99']:<9}  {outcomes}"
            )
    finally:
        os.unlink(path)


if __name__ == "__main__":
    main()
