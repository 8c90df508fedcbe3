"""The HTTP gateway stays responsive to a well-behaved client while each abuse runs beside
it (issue 38).

One run starts ``python -m clearance gateway`` over HTTP twice, on the same upstream echo
server (``bench_gateway.py --serve-echo``): once with the default bounds
(:class:`~clearance.mcp.gateway.HttpLimits`), once with every bound set out of reach
(``unbounded``, what the gateway did before). For each abuse, a separate process runs it
against the gateway while the official MCP client (2026-07-28, one call at a time) calls
the echo tool for ``--seconds``; the table gives that client's calls a second, median and
p99 latency, its failed calls, and the gateway's resident memory and open descriptors at
the end of the abuse.

Abuses (each in its own process, reconnecting whatever the gateway closes):

- ``silent``: 300 connections that never send a byte;
- ``slowloris``: 300 connections sending a request head one byte a second;
- ``flood``: 2,000 connections opened and held (past ``max_connections``);
- ``wrong-token``: 50 connections sending requests with wrong tokens as fast as answered;
- ``busy``: 400 concurrent calls with the right token (past ``max_requests``);
- ``unread``: 20 calls whose 3.5 MB answers are never read.

Run: ``python benchmarks/bench_gateway_bounds.py`` (``--seconds N``, ``--only NAME``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

HERE = Path(__file__).resolve().parent
ABUSES = ("none", "silent", "slowloris", "flood", "wrong-token", "busy", "unread")
UNBOUNDED = {
    "max_connections": 1_000_000,
    "header_timeout": 1e9,
    "idle_timeout": 1e9,
    "write_timeout": 1e9,
    "max_requests": 1_000_000,
}
BIG = 3_500_000


def _config(folder: Path, limits: dict[str, Any]) -> Path:
    config = folder / "clearance.toml"
    keys = "".join(f"{k} = {v!r}\n" for k, v in limits.items())
    config.write_text(
        f"""
[evaluator]
kind = "local"
allow = ["up.echo"]

[journal]
path = "journal.db"

[limits]
max_concurrency = 512
max_queue = 4096

[gateway]
transport = "http"
port = 0
{keys}
[[gateway.tokens]]
principal = 'User::"bench"'
token_env = "BENCH_GATEWAY_TOKEN"

[[mcp_servers]]
name = "up"
program = {json.dumps(sys.executable)}
args = {json.dumps([str(HERE / "bench_gateway.py"), "--serve-echo"])}
read_only = ["echo"]
"""
    )
    return config


@contextmanager
def _gateway(limits: dict[str, Any], token: str) -> Any:
    with tempfile.TemporaryDirectory() as tmp:
        config = _config(Path(tmp), limits)
        env = {**os.environ, "BENCH_GATEWAY_TOKEN": token}
        process = subprocess.Popen(
            [sys.executable, "-m", "clearance", "gateway", "--config", str(config)],
            cwd=tmp,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            url = None
            assert process.stderr is not None
            for line in process.stderr:
                found = re.search(r"listening on (http://\S+)", line)
                if found:
                    url = found.group(1)
                    break
            if url is None:
                raise SystemExit("the gateway did not start")
            # The gateway logs (refused connections, failed tokens): drain, do not block it.
            drain = subprocess.Popen(["cat"], stdin=process.stderr, stdout=subprocess.DEVNULL)
            yield process.pid, url
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
            drain.kill()


def _memory(pid: int) -> tuple[float, int]:
    """(resident MB, open descriptors) of ``pid``."""
    rss = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


# -- the abuses (run with --abuse in their own process) ------------------------------------


def _request(url: str, token: str, body: bytes, *, name: str = "up__echo") -> bytes:
    host = url.split("/")[2]
    return (
        f"POST /mcp HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        f"MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: {name}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def _call_body(text: str) -> bytes:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "up__echo",
                "arguments": {"text": text},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        }
    ).encode()


async def _abuse(kind: str, url: str, token: str) -> None:
    host, port = url.split("/")[2].rsplit(":", 1)

    async def hold(first: bytes = b"", trickle: bytes = b"", unread: bool = False) -> None:
        """Keep one such connection open; open another when the gateway closes it."""
        while True:
            try:
                stream = await anyio.connect_tcp(host, int(port))
            except OSError:
                await anyio.sleep(0.1)
                continue
            try:
                if unread:  # a small receive buffer: the answer stays on the gateway's side
                    raw = stream.extra(anyio.abc.SocketAttribute.raw_socket)
                    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                if first:
                    await stream.send(first)
                for byte in trickle:
                    await stream.send(bytes([byte]))
                    await anyio.sleep(1)
                if unread:
                    await anyio.sleep(3600)  # never read
                while True:  # until the gateway closes it
                    await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                pass
            finally:
                await stream.aclose()
            await anyio.sleep(0.05)

    async def wrong_tokens() -> None:
        import httpx

        async with httpx.AsyncClient(timeout=30) as http:
            while True:
                try:
                    await http.post(
                        url,
                        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                        headers={"Authorization": f"Bearer wrong-{secrets.token_hex(8)}"},
                    )
                except httpx.HTTPError:
                    await anyio.sleep(0.05)

    async def busy() -> None:
        import httpx

        async with httpx.AsyncClient(timeout=60) as http:
            while True:
                try:
                    await http.post(
                        url,
                        content=_call_body("busy"),
                        headers={
                            "Authorization": f"Bearer {token}",
                            "Content-Type": "application/json",
                            "Accept": "application/json, text/event-stream",
                            "MCP-Protocol-Version": "2026-07-28",
                            "Mcp-Method": "tools/call",
                            "Mcp-Name": "up__echo",
                        },
                    )
                except httpx.HTTPError:
                    await anyio.sleep(0.05)

    async with anyio.create_task_group() as tg:
        if kind == "silent":
            for _ in range(300):
                tg.start_soon(hold)
        elif kind == "slowloris":
            head = _request(url, token, b"{}")[:200]
            for _ in range(300):
                tg.start_soon(lambda: hold(trickle=head))
        elif kind == "flood":
            for _ in range(2000):
                tg.start_soon(hold)
        elif kind == "wrong-token":
            for _ in range(50):
                tg.start_soon(wrong_tokens)
        elif kind == "busy":
            for _ in range(400):
                tg.start_soon(busy)
        elif kind == "unread":
            request = _request(url, token, _call_body("x" * BIG))
            for _ in range(20):
                tg.start_soon(lambda: hold(first=request, unread=True))


# -- the well-behaved client ----------------------------------------------------------------


async def _well_behaved(url: str, token: str, seconds: float) -> dict[str, float]:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    samples: list[float] = []
    failed = 0
    headers = {"Authorization": f"Bearer {token}"}
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        try:
            with anyio.fail_after(30):
                async with (
                    create_mcp_http_client(headers=headers) as http,
                    Client(streamable_http_client(url, http_client=http), mode="auto") as c,
                ):
                    n = 0
                    while time.perf_counter() - start < seconds:
                        n += 1
                        t = time.perf_counter()
                        result = await c.call_tool("up__echo", {"text": f"call {n}"})
                        if result.is_error:
                            failed += 1
                        else:
                            samples.append((time.perf_counter() - t) * 1000)
        except Exception:
            failed += 1
            await anyio.sleep(0.1)
    elapsed = time.perf_counter() - start
    ordered = sorted(samples) or [float("nan")]
    return {
        "rate": len(samples) / elapsed,
        "p50": statistics.median(ordered),
        "p99": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
        "failed": failed,
    }


def _scenario(kind: str, pid: int, url: str, token: str, seconds: float) -> dict[str, float]:
    abuser = None
    if kind != "none":
        abuser = subprocess.Popen(
            [sys.executable, __file__, "--abuse", kind, url, token],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        # What it can take, until the bound that answers it has acted (header_timeout
        # 10 s; write_timeout 30 s for answers nobody reads).
        time.sleep(32.0 if kind == "unread" else 12.0)
    try:
        measured = anyio.run(_well_behaved, url, token, seconds)
        rss, fds = _memory(pid)
        return {**measured, "rss": rss, "fds": fds}
    finally:
        if abuser is not None:
            abuser.kill()
            abuser.wait()
        time.sleep(1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="per measurement (5)")
    parser.add_argument("--only", choices=ABUSES, action="append", help="these abuses only")
    parser.add_argument("--abuse", nargs=3, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.abuse:
        kind, url, token = options.abuse
        anyio.run(_abuse, kind, url, token)
        return
    kinds = ["none", *[k for k in (options.only or ABUSES) if k != "none"]]
    token = secrets.token_urlsafe(32)
    rows: list[tuple[str, str, dict[str, float]]] = []
    for label, limits in (("bounded", {}), ("unbounded", UNBOUNDED)):
        with _gateway(limits, token) as (pid, url):
            for kind in kinds:
                result = _scenario(kind, pid, url, token, options.seconds)
                rows.append((kind, label, result))
                print(f"  {kind:<12} {label:<10} done", file=sys.stderr)
    print(
        f"well-behaved client: official MCP client, 2026-07-28, one call at a time, "
        f"{options.seconds:g} s per row; gateway memory and descriptors at the row's end"
    )
    header = f"{'abuse':<12}{'gateway':<11}{'calls/s':>9}{'p50 ms':>9}{'p99 ms':>9}"
    print(header + f"{'failed':>8}{'RSS MB':>8}{'fds':>7}")
    for kind in kinds:
        for k, label, r in rows:
            if k == kind:
                print(
                    f"{kind:<12}{label:<11}{r['rate']:>9.0f}{r['p50']:>9.1f}{r['p99']:>9.1f}"
                    f"{int(r['failed']):>8}{r['rss']:>8.0f}{int(r['fds']):>7}"
                )


if __name__ == "__main__":
    main()
