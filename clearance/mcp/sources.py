"""MCP servers as tool sources: start or connect, list, register, forward calls.

::

    async with Harness(registry, evaluator=LocalEvaluator(allow=["git.git_status"])) as harness:
        await start_stdio_server(harness,
            name="git", program="mcp-server-git", args=["--repository", "/srv/repo"],
            tools=["git.git_status", "git.git_log"], read_only=["git_status", "git_log"])
        session = await harness.create_session(principal=Principal("User", "alice"))
        await session.call_tool("git__git_status", {"repo_path": "/srv/repo"}, call_id="c1")

Each server's tools are registered under the namespace ``name`` with the server's input
schemas. Only the tools selected by ``tools`` are registered: the others are unknown to
the harness, its policies and the model. A tool whose name or input schema clearance
cannot accept (a schema whose root is not an object schema, or that is not valid JSON
Schema 2020-12) is skipped with a logged warning; a ``tools`` pattern that then matches
nothing raises ``ConfigError``, so a skipped tool that was asked for is never silent.

Server annotations (``readOnlyHint``, ``destructiveHint``...) are hints from the server,
which clearance does not trust by default: a tool is mutating unless the registration
marks it read-only (``read_only=[...]``) or ``trust_annotations=True`` and the server says
``readOnlyHint``. ``Tool.annotations`` keeps the server's hints and records where the
flag came from under ``clearance.read_only_source``: ``config``, ``server`` or
``default``.

The connection to a server lives in a background task of the harness's task group (MCP
client context managers must be entered and exited in the same task) and is closed when
the harness closes. Calls forward progress notifications to ``ctx.progress`` and cancel
the upstream request when the clearance call is cancelled (the server receives
``notifications/cancelled``). Upstream failures come back as ``is_error`` results that
name the server, so the model sees what happened and the harness keeps working; a stdio
server that exited is started again on the next call (``restart="on_next_call"``) or
reported as gone (``restart="never"``).

Programs, arguments, environments, URLs and headers come only from the registration
call; nothing the model sends can choose them.
"""

from __future__ import annotations

import math
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from mcp import StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from clearance.errors import ConfigError, ToolRegistrationError
from clearance.harness.tools import CallContext, Tool, ToolRegistry
from clearance.mcp._progress import ProgressRelay, progress_relay, reset_progress_relay
from clearance.mcp._selection import check_patterns, prepare_tools
from clearance.mcp._upstream import Restart, Upstream, errlog, redact_url

if TYPE_CHECKING:
    from clearance.harness.session import Harness

__all__ = [
    "ProgressRelay",
    "Restart",
    "connect_server",
    "prepare_tools",
    "progress_relay",
    "reset_progress_relay",
    "start_stdio_server",
]


async def start_stdio_server(
    harness: Harness,
    *,
    name: str,
    program: str,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    tools: Sequence[str] | None = None,
    read_only: Sequence[str] | None = None,
    trust_annotations: bool = False,
    restart: Restart = "on_next_call",
    call_timeout: float | None = None,
    connect_timeout: float = 30.0,
    stderr: TextIO | None = None,
) -> list[Tool]:
    """Start an MCP server as a subprocess (stdio) and register its tools as ``name.*``.

    Args:
        harness: a started harness (inside ``async with Harness(...)``).
        name: the namespace of the server's tools (``[a-z0-9_-]``), also the server's
            name in error messages and records (``Tool.server``).
        program: the executable to run.
        args: its command-line arguments.
        env: extra environment variables, over a minimal safe environment (``PATH``,
            ``HOME``...); the harness's own environment is not passed on.
        cwd: the working directory of the server process.
        tools: globs selecting the tools to register, on qualified names
            (``git.git_status``, ``git.*``) or, without a dot, on the tool's name.
            ``None`` registers every tool.
        read_only: globs (same forms) of tools to mark read-only.
        trust_annotations: take the server's ``readOnlyHint`` for tools not named in
            ``read_only``.
        restart: ``"on_next_call"`` starts a server that exited again when the next call
            arrives; ``"never"`` reports it gone.
        call_timeout: seconds a call may wait for the server's answer; the request is
            then cancelled upstream and the call returns an error result.
        connect_timeout: seconds to start the server and list its tools.
        stderr: where the server's stderr goes (default: this process's stderr).

    Returns:
        The registered tools.

    Raises:
        ConfigError: the server did not start, did not answer, or a ``tools`` pattern
            matches none of its tools.
        ToolRegistrationError: the tools cannot be registered (the namespace is taken
            or reserved, the registry is frozen).
    """
    params = StdioServerParameters(
        command=program,
        args=list(args),
        env=dict(env) if env is not None else None,
        cwd=Path(cwd) if cwd is not None else None,
    )

    def transport() -> AbstractAsyncContextManager[Any]:
        return stdio_client(params, errlog=errlog(stderr))

    upstream = Upstream(
        harness,
        name=name,
        describe=f"MCP server {name!r} ({program})",
        transport=transport,
        restart=restart,
        call_timeout=call_timeout,
        connect_timeout=connect_timeout,
        local=True,
    )
    return await _register(upstream, tools, read_only, trust_annotations)


async def connect_server(
    harness: Harness,
    *,
    name: str,
    transport: str = "streamable-http",
    url: str,
    headers: Mapping[str, str] | None = None,
    tools: Sequence[str] | None = None,
    read_only: Sequence[str] | None = None,
    trust_annotations: bool = False,
    restart: Restart = "on_next_call",
    call_timeout: float | None = None,
    connect_timeout: float = 30.0,
) -> list[Tool]:
    """Connect to a remote MCP server over Streamable HTTP and register its tools.

    ``headers`` (credentials, typically) are sent with every request. A lost connection
    is reopened on the next call (``restart="on_next_call"``). The other arguments are
    those of :func:`start_stdio_server`.

    Raises:
        ConfigError: the transport is not ``streamable-http``, the server cannot be
            reached, or a ``tools`` pattern matches none of its tools.
        ToolRegistrationError: the tools cannot be registered.
    """
    if transport not in ("streamable-http", "http"):
        raise ConfigError(
            f"MCP server {name!r}: transport {transport!r} is not supported "
            "(use 'streamable-http', or a stdio server with start_stdio_server)"
        )
    fixed_headers = dict(headers or {})

    @asynccontextmanager
    async def http_transport() -> AsyncIterator[Any]:
        async with (
            create_mcp_http_client(headers=fixed_headers) as http,
            streamable_http_client(url, http_client=http) as streams,
        ):
            yield streams

    upstream = Upstream(
        harness,
        name=name,
        describe=f"MCP server {name!r} ({redact_url(url)})",
        transport=http_transport,
        restart=restart,
        call_timeout=call_timeout,
        connect_timeout=connect_timeout,
        local=False,
    )
    return await _register(upstream, tools, read_only, trust_annotations)


async def _register(
    upstream: Upstream,
    tools: Sequence[str] | None,
    read_only: Sequence[str] | None,
    trust_annotations: bool,
) -> list[Tool]:
    check_patterns("tools", tools)
    check_patterns("read_only", read_only)
    if upstream.restart not in ("on_next_call", "never"):
        raise ConfigError(
            f"MCP server {upstream.name!r}: restart must be 'on_next_call' or 'never', "
            f"not {upstream.restart!r}"
        )
    if upstream.call_timeout is not None and not (
        isinstance(upstream.call_timeout, int | float) and 0 < upstream.call_timeout < math.inf
    ):
        raise ConfigError(f"MCP server {upstream.name!r}: call_timeout must be positive seconds")
    harness = upstream.harness
    _precheck(harness, upstream.name)
    listed = await upstream.list_tools()
    try:
        prepared = prepare_tools(upstream, listed, tools, read_only, trust_annotations)
        registered = harness.registry.register(upstream.name, prepared)
    except BaseException:
        await upstream.aclose()
        raise
    harness.close_hooks.append(upstream.aclose)
    return registered


def _precheck(harness: Harness, namespace: str) -> None:
    """Refuse a namespace the registry would refuse, before any process starts."""
    registry = harness.registry
    if registry.frozen:
        raise ToolRegistrationError(
            f"{namespace}.*",
            "the registry is frozen (a session was created); start MCP servers before that",
        )
    # A scratch registry applies the namespace rules (pattern, reserved names).
    ToolRegistry().register(namespace, [Tool("probe", _no_handler)])
    if any(tool.namespace == namespace for tool in registry):
        raise ToolRegistrationError(
            f"{namespace}.*", f"the namespace {namespace!r} is already registered"
        )


def _no_handler(arguments: dict[str, Any], ctx: CallContext) -> None:
    return None
