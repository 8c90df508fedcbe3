"""An in-process HTTP gateway for the MCP tests: a harness with one echo tool (``t__echo``,
read-only, optionally sleeping), a SQLite journal, and :meth:`Gateway.serve_http` on a free
port; and the official MCP client against it."""

from __future__ import annotations

import functools
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from clearance import CallContext, Harness, Principal, Tool, ToolRegistry
from clearance.harness.journal import SqliteJournal
from clearance.mcp.gateway import Gateway, PrincipalToken
from clearance.policy import LocalEvaluator

ALICE = Principal("User", "alice")
ECHO_SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string"}, "sleep": {"type": "number"}},
    "additionalProperties": False,
}


def registry() -> ToolRegistry:
    async def echo(arguments: dict[str, Any], ctx: CallContext) -> str:
        await anyio.sleep(arguments.get("sleep", 0))
        return str(arguments.get("text", ""))

    reg = ToolRegistry()
    reg.register("t", [Tool("echo", echo, input_schema=ECHO_SCHEMA, read_only=True)])
    return reg


@asynccontextmanager
async def serving(
    tmp_path: Path, *, tokens: list[PrincipalToken] | None = None, **options: Any
) -> AsyncIterator[tuple[Harness, Gateway, str, str]]:
    """``(harness, gateway, url, token)``: the token acts for alice (or ``tokens``)."""
    journal = SqliteJournal(tmp_path / "journal.db", durability="off")
    async with Harness(registry(), evaluator=LocalEvaluator(allow=["t.*"]), journal=journal) as h:
        gateway = Gateway(h, principal=ALICE, **options)
        token = secrets.token_urlsafe(32)
        urls: list[str] = []
        ready = anyio.Event()

        def on_ready(url: str) -> None:
            urls.append(url)
            ready.set()

        given = [PrincipalToken(ALICE, token), *(tokens or [])]
        async with anyio.create_task_group() as tg:
            tg.start_soon(functools.partial(gateway.serve_http, given, port=0, ready=on_ready))
            with anyio.fail_after(10):
                await ready.wait()
            yield h, gateway, urls[0], token
            tg.cancel_scope.cancel()


@asynccontextmanager
async def client(url: str, token: str, *, mode: str = "auto") -> AsyncIterator[Client]:
    """The official MCP client, authenticated with ``token``."""
    async with (
        create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as found,
    ):
        yield found
