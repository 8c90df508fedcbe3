"""What the MCP gateway adds to a tool call's latency, over stdio.

Measured in the same run, with the official ``mcp`` client, on the same upstream server:

* ``direct``: the client talks to the upstream server (a subprocess over stdio);
* ``gateway``: the client talks to ``python -m clearance gateway`` (a subprocess over stdio),
  which runs the full pipeline (schema check, local evaluator, SQLite journal: three
  records per call) and forwards the call to its own copy of the upstream server.

The upstream server is an echo server (this file run with ``--serve-echo``), so that the
numbers are the transport and clearance, not the tool; ``--upstream time`` uses
``mcp-server-time`` (``get_current_time``) instead. Direct and gateway calls alternate in
rounds so that drift on a busy machine hits both alike.

Every call's arguments are distinct (the echo text carries the call's number; with
``--upstream time`` the timezone cycles through a few).

Run: ``python benchmarks/bench_gateway.py`` (``--calls N``, ``--quick``). Target (issue
18): the gateway adds at most 0.5 ms at the median.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

ECHO_TOOL = "echo"


def serve_echo() -> None:
    """The upstream used by default: one ``echo`` tool, on the SDK's low-level server."""
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    tool = types.Tool(
        name=ECHO_TOOL,
        description="Echo the text.",
        input_schema={
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    )

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        value = str((params.arguments or {}).get("text", ""))
        return types.CallToolResult(content=[types.TextContent(type="text", text=value)])

    async def main() -> None:
        server = Server("echo", on_list_tools=list_tools, on_call_tool=call_tool)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)


Arguments = Callable[[int], dict[str, Any]]
ZONES = ("UTC", "Europe/Paris", "Asia/Tokyo", "America/New_York", "Australia/Sydney")


def upstream(kind: str) -> tuple[str, list[str], str, Arguments]:
    """(program, args, tool, the arguments of call ``n``) of the upstream server."""
    if kind == "time":
        program = str(Path(sys.executable).parent / "mcp-server-time")
        return program, [], "get_current_time", lambda n: {"timezone": ZONES[n % len(ZONES)]}
    return (
        sys.executable,
        [str(Path(__file__).resolve()), "--serve-echo"],
        ECHO_TOOL,
        lambda n: {"text": f"hi {n}"},
    )


def write_config(folder: Path, program: str, args: list[str], tool: str) -> Path:
    config = folder / "clearance.toml"
    config.write_text(
        f"""
[evaluator]
kind = "local"
allow = ["up.{tool}"]

[journal]
path = "journal.db"

[[mcp_servers]]
name = "up"
program = {json.dumps(program)}
args = {json.dumps(args)}
read_only = ["{tool}"]
"""
    )
    return config


async def measure(
    call: Callable[[int], Awaitable[Any]], calls: int, warmup: int, first: int
) -> list[float]:
    """Milliseconds of each of ``calls`` calls (after ``warmup``), numbered from ``first``."""
    n = first
    for _ in range(warmup):
        n += 1
        await call(n)
    samples = []
    for _ in range(calls):
        n += 1
        t0 = time.perf_counter()
        await call(n)
        samples.append((time.perf_counter() - t0) * 1000)
    return samples


def p99(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[98]


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == pid:
                found.append(int(entry.name))
    return found


def _child_pid(marker: bytes) -> int | None:
    """This process's child whose command line holds ``marker``."""
    if not Path("/proc").is_dir():
        return None
    for pid in _children(os.getpid()):
        try:
            if marker in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
        except OSError:
            continue
    return None


def _gateway_pid() -> int | None:
    return _child_pid(b"clearance\x00gateway")


async def run(calls: int, rounds: int, kind: str) -> dict[str, list[float]]:
    from mcp import Client, StdioServerParameters

    program, args, tool, arguments = upstream(kind)
    results: dict[str, list[float]] = {"direct": [], "gateway": []}
    with tempfile.TemporaryDirectory() as tmp:
        config = write_config(Path(tmp), program, args, tool)
        direct = StdioServerParameters(command=program, args=args)
        gateway = StdioServerParameters(
            command=sys.executable,
            args=["-m", "clearance", "gateway", "--config", str(config)],
            cwd=tmp,
        )
        async with Client(direct) as d, Client(gateway) as g:
            alias = f"up__{tool}"
            answer = await g.call_tool(alias, arguments(0))
            if answer.is_error:
                raise SystemExit(f"the gateway refused the call: {answer.content}")
            per_round = max(1, calls // rounds)
            gateway_pid = _gateway_pid()
            upstream_pid = _child_pid(b"--serve-echo") if kind == "echo" else None
            cpu = upstream_cpu = 0.0
            for r in range(rounds):
                first = 1 + r * (per_round + 20)
                before = _cpu_seconds(upstream_pid) if upstream_pid else 0.0
                results["direct"] += await measure(
                    lambda n: d.call_tool(tool, arguments(n)), per_round, 20, first
                )
                upstream_cpu += (_cpu_seconds(upstream_pid) - before) if upstream_pid else 0.0
                before = _cpu_seconds(gateway_pid) if gateway_pid else 0.0
                results["gateway"] += await measure(
                    lambda n: g.call_tool(alias, arguments(n)), per_round, 20, first
                )
                cpu += (_cpu_seconds(gateway_pid) - before) if gateway_pid else 0.0
            # CPU per call (warm-up calls included): figures that, unlike latency, a busy
            # machine barely moves. The upstream server's is what the SDK's server side
            # alone costs a call; the gateway is an SDK server and an SDK client.
            if gateway_pid:
                results["gateway_cpu"] = [cpu * 1000 / (rounds * (per_round + 20))]
            if upstream_pid:
                results["upstream_cpu"] = [upstream_cpu * 1000 / (rounds * (per_round + 20))]
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per path (default 2000)")
    parser.add_argument("--rounds", type=int, default=10, help="alternations (default 10)")
    parser.add_argument("--upstream", choices=["echo", "time"], default="echo")
    parser.add_argument("--quick", action="store_true", help="200 calls per path")
    parser.add_argument("--serve-echo", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.serve_echo:
        serve_echo()
        return
    calls = 200 if options.quick else options.calls
    results = anyio.run(run, calls, options.rounds, options.upstream)
    direct, gateway = results["direct"], results["gateway"]
    rows = [
        ("direct", len(direct), statistics.median(direct), p99(direct)),
        ("gateway", len(gateway), statistics.median(gateway), p99(gateway)),
    ]
    added_median = rows[1][2] - rows[0][2]
    added_p99 = rows[1][3] - rows[0][3]
    print(f"upstream: {options.upstream} over stdio; official mcp client; times in ms")
    print(f"{'path':<10}{'calls':>8}{'median':>10}{'p99':>10}")
    for name, n, median, tail in rows:
        print(f"{name:<10}{n:>8}{median:>10.3f}{tail:>10.3f}")
    print(f"{'added':<10}{'':>8}{added_median:>10.3f}{added_p99:>10.3f}")
    if "gateway_cpu" in results:
        print(f"gateway process CPU per call: {results['gateway_cpu'][0]:.3f} ms")
    if "upstream_cpu" in results:
        print(f"upstream server CPU per direct call: {results['upstream_cpu'][0]:.3f} ms")
    verdict = "met" if added_median <= 0.5 else "NOT met"
    print(f"target: gateway adds <= 0.5 ms at the median: {verdict}")


if __name__ == "__main__":
    main()
