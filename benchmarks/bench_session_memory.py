"""What a principal's sessionless clients cost the gateway's memory over many calls (issue 38).

2026-07-28 clients carry no MCP session: all of one principal's share one clearance
session, which remembers every call id it took (rule R7). Before issue 38 that session
lived as long as the gateway and grew by every call (~115 MB an hour at 250 calls/s). Now
it is replaced once it holds half of ``max_session_calls`` ids, and the old one closes.

One run serves an in-process gateway over loopback HTTP (SQLite journal, an echo tool)
and drives it with the official MCP client (2026-07-28, one call at a time) for
``--calls`` calls, twice: ``replaced`` with ``max_session_calls = --bound`` (scaled down
from the default 100,000 so that a run sees several replacements), and ``one session``
with a bound past the run (what the gateway did before). At each tenth of the run the
table gives the call ids the harness holds and the bytes still allocated since the start
(``tracemalloc``: clearance, the SDK and the HTTP server together).

Run: ``python benchmarks/bench_session_memory.py`` (``--calls N``, ``--bound N``).
"""

from __future__ import annotations

import argparse
import functools
import gc
import logging
import secrets
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import anyio

from clearance import CallContext, Harness, Principal, Tool, ToolRegistry
from clearance.harness.journal import SqliteJournal
from clearance.mcp.gateway import Gateway, PrincipalToken
from clearance.policy import LocalEvaluator

BENCH = Principal("User", "bench")


def _registry() -> ToolRegistry:
    def echo(arguments: dict[str, Any], ctx: CallContext) -> str:
        return str(arguments.get("text", ""))

    registry = ToolRegistry()
    registry.register("up", [Tool("echo", echo, input_schema={"type": "object"}, read_only=True)])
    return registry


async def _run(calls: int, bound: int, folder: Path) -> list[tuple[int, int, float, int]]:
    """(calls made, call ids held, MB still allocated, sessions open) at each tenth."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    journal = SqliteJournal(folder / "journal.db", durability="off")
    rows: list[tuple[int, int, float, int]] = []
    harness = Harness(
        _registry(),
        evaluator=LocalEvaluator(allow=["up.*"]),
        journal=journal,
        max_session_calls=bound,
    )
    async with harness:
        gateway = Gateway(harness, principal=BENCH)
        token = secrets.token_urlsafe(32)
        ready = anyio.Event()
        urls: list[str] = []

        def on_ready(url: str) -> None:
            urls.append(url)
            ready.set()

        async with anyio.create_task_group() as tg:
            serve = functools.partial(
                gateway.serve_http, [PrincipalToken(BENCH, token)], port=0, ready=on_ready
            )
            tg.start_soon(serve)
            await ready.wait()
            headers = {"Authorization": f"Bearer {token}"}
            async with (
                create_mcp_http_client(headers=headers) as http,
                Client(streamable_http_client(urls[0], http_client=http), mode="auto") as client,
            ):
                for n in range(200):  # warm-up: caches, schemas, the first session
                    await client.call_tool("up__echo", {"text": f"warm {n}"})
                gc.collect()
                tracemalloc.start()
                try:
                    base = tracemalloc.get_traced_memory()[0]
                    step = max(1, calls // 10)
                    for n in range(1, calls + 1):
                        result = await client.call_tool("up__echo", {"text": f"call {n}"})
                        if result.is_error:
                            raise SystemExit(f"call {n} failed: {result.content}")
                        if n % step == 0:
                            await anyio.sleep(0.05)  # a replaced session's close runs
                            gc.collect()
                            held = sum(len(s.call_ids) for s in harness.sessions.values())
                            grown = (tracemalloc.get_traced_memory()[0] - base) / 1e6
                            rows.append((n, held, grown, len(harness.sessions)))
                finally:
                    tracemalloc.stop()
            tg.cancel_scope.cancel()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=3_000, help="calls per run (3,000)")
    parser.add_argument("--bound", type=int, default=600, help="max_session_calls (600)")
    options = parser.parse_args()
    logging.getLogger("mcp").setLevel(logging.WARNING)
    logging.getLogger("clearance").setLevel(logging.WARNING)
    runs = {}
    for name, bound in (("replaced", options.bound), ("one session", options.calls * 10)):
        with tempfile.TemporaryDirectory() as tmp:
            started = time.perf_counter()
            runs[name] = anyio.run(_run, options.calls, bound, Path(tmp))
            elapsed = time.perf_counter() - started
        print(f"{name}: {options.calls} calls in {elapsed:.1f} s (tracemalloc on)")
    print()
    print("| calls | replaced: ids held | MB | one session: ids held | MB |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for (n, held, grown, _), (_, held1, grown1, _) in zip(
        runs["replaced"], runs["one session"], strict=True
    ):
        print(f"| {n:,} | {held:,} | {grown:.2f} | {held1:,} | {grown1:.2f} |")
    first, last = runs["one session"][0], runs["one session"][-1]
    per_call = (last[2] - first[2]) * 1e6 / (last[0] - first[0])
    print()
    print(
        f"one session grows {per_call:.0f} bytes a call: {per_call * 250 * 3600 / 1e6:.0f} MB "
        "an hour at 250 calls/s; replaced: flat past the first replacement"
    )


if __name__ == "__main__":
    main()
