"""MCP servers as tool sources: start or connect, list, register, forward calls.

::

    async with Harness(registry, evaluator=LocalEvaluator(allow=["git.git_status"])) as harness:
        await harness.start_mcp_server(
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

import contextvars
import logging
import math
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, TextIO, cast

import anyio
import httpx2
import mcp_types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from clearance.errors import ConfigError, ToolRegistrationError
from clearance.harness.tools import CallContext, CallToolResult, Tool, ToolRegistry

if TYPE_CHECKING:
    from clearance.harness.session import Harness

__all__ = [
    "ProgressRelay",
    "Restart",
    "connect_server",
    "progress_relay",
    "reset_progress_relay",
    "start_stdio_server",
]

log = logging.getLogger("clearance.mcp")

Restart = Literal["on_next_call", "never"]
"""What happens after a server exits: start it on the next call, or report it gone."""
ProgressRelay = Callable[[float, float | None, str | None], Awaitable[None]]
"""``(progress, total, message)``: where the gateway wants upstream progress relayed."""

_RELAY: contextvars.ContextVar[ProgressRelay | None] = contextvars.ContextVar(
    "clearance_mcp_progress_relay", default=None
)
_NAME = re.compile(r"[^a-z0-9_-]")
_READ_ONLY_KEY = "clearance.read_only_source"
_MAX_PAGES = 100
_CLOSE_WAIT = 10.0


def progress_relay(relay: ProgressRelay | None) -> contextvars.Token[ProgressRelay | None]:
    """Relay upstream progress of calls made from this context to ``relay`` as well.

    The gateway sets it around ``session.call_tool`` so that an MCP client of the gateway
    receives the upstream server's progress notifications with their numbers intact.
    Async handlers run in the calling task, so the handler sees this context variable.

    Returns:
        A token for :func:`reset_progress_relay`.
    """
    return _RELAY.set(relay)


def reset_progress_relay(token: contextvars.Token[ProgressRelay | None]) -> None:
    """Undo :func:`progress_relay`."""
    _RELAY.reset(token)


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
        return stdio_client(params, errlog=_errlog(stderr))

    upstream = _Upstream(
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
            "(use 'streamable-http', or a stdio server with start_mcp_server)"
        )
    fixed_headers = dict(headers or {})

    @asynccontextmanager
    async def http_transport() -> AsyncIterator[Any]:
        async with (
            create_mcp_http_client(headers=fixed_headers) as http,
            streamable_http_client(url, http_client=http) as streams,
        ):
            yield streams

    upstream = _Upstream(
        harness,
        name=name,
        describe=f"MCP server {name!r} ({_redact_url(url)})",
        transport=http_transport,
        restart=restart,
        call_timeout=call_timeout,
        connect_timeout=connect_timeout,
        local=False,
    )
    return await _register(upstream, tools, read_only, trust_annotations)


# --- registration --------------------------------------------------------------------------


async def _register(
    upstream: _Upstream,
    tools: Sequence[str] | None,
    read_only: Sequence[str] | None,
    trust_annotations: bool,
) -> list[Tool]:
    _check_patterns("tools", tools)
    _check_patterns("read_only", read_only)
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
        prepared = _prepare(upstream, listed, tools, read_only, trust_annotations)
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


def _check_patterns(what: str, patterns: Sequence[str] | None) -> None:
    if patterns is None:
        return
    if isinstance(patterns, str) or not all(isinstance(p, str) and p for p in patterns):
        raise ConfigError(f"{what} must be a list of tool-name globs")


def _matches(pattern: str, qualified: str, local: str, remote: str) -> bool:
    if "." in pattern:
        return fnmatchcase(qualified, pattern)
    return fnmatchcase(local, pattern) or fnmatchcase(remote, pattern)


def _prepare(
    upstream: _Upstream,
    listed: Sequence[mcp_types.Tool],
    tools: Sequence[str] | None,
    read_only: Sequence[str] | None,
    trust_annotations: bool,
) -> list[Tool]:
    namespace = upstream.name
    candidates = _local_names(namespace, listed)

    selected: list[tuple[str, mcp_types.Tool]] = []
    for local, remote in candidates:
        qualified = f"{namespace}.{local}"
        if tools is None or any(_matches(p, qualified, local, remote.name) for p in tools):
            selected.append((local, remote))

    prepared: list[Tool] = []
    for local, remote in selected:
        qualified = f"{namespace}.{local}"
        hints = (
            remote.annotations.model_dump(by_alias=True, mode="json", exclude_none=True)
            if remote.annotations is not None
            else {}
        )
        if read_only and any(_matches(p, qualified, local, remote.name) for p in read_only):
            ro, source = True, "config"
        elif trust_annotations and hints.get("readOnlyHint") is True:
            ro, source = True, "server"
        else:
            ro, source = False, "default"
        tool = Tool(
            local,
            upstream.handler(remote.name),
            description=remote.description or hints.get("title") or remote.title or "",
            input_schema=remote.input_schema,
            read_only=ro,
            annotations={**hints, _READ_ONLY_KEY: source},
            source="mcp",
            server=namespace,
        )
        try:
            # A scratch registry applies the same checks as the real one, tool by
            # tool, so one bad schema costs that tool only.
            ToolRegistry().register(namespace, [tool])
        except ToolRegistrationError as exc:
            log.warning("MCP server %r: skipped tool %r: %s", namespace, remote.name, exc.reason)
            continue
        prepared.append(tool)

    if tools is not None:
        kept = {t.name for t in prepared}
        available = sorted(f"{namespace}.{t.name}" for t in prepared) or ["(none)"]
        for pattern in tools:
            if not any(
                _matches(pattern, f"{namespace}.{local}", local, remote.name)
                for local, remote in selected
                if local in kept
            ):
                raise ConfigError(
                    f"MCP server {namespace!r}: tools pattern {pattern!r} matches no usable "
                    f"tool (usable: {', '.join(available)})"
                )
    if read_only:
        for pattern in read_only:
            if not any(
                _matches(pattern, f"{namespace}.{local}", local, remote.name)
                for local, remote in selected
            ):
                log.warning(
                    "MCP server %r: read_only pattern %r matches no selected tool",
                    namespace,
                    pattern,
                )
    return prepared


def _local_names(
    namespace: str, listed: Sequence[mcp_types.Tool]
) -> list[tuple[str, mcp_types.Tool]]:
    """``(clearance name, tool)`` for each listed tool that gets a name of its own.

    Two tools whose names map to the same clearance name (``GIT_STATUS`` and
    ``git_status``) are both refused: registering either would let configuration, policies
    and the model's calls meant for one reach the other.
    """
    by_local: dict[str, list[mcp_types.Tool]] = {}
    for remote in listed:
        local = _local_name(remote.name)
        if local is None:
            log.warning(
                "MCP server %r: skipped tool %r: its name cannot be made a clearance name",
                namespace,
                remote.name,
            )
            continue
        by_local.setdefault(local, []).append(remote)
    named: list[tuple[str, mcp_types.Tool]] = []
    for local, remotes in by_local.items():
        if len(remotes) > 1:
            log.warning(
                "MCP server %r: skipped tools %s: their names all become the clearance name "
                "%r, so no name or pattern could tell them apart",
                namespace,
                ", ".join(repr(remote.name) for remote in remotes),
                local,
            )
            continue
        named.append((local, remotes[0]))
    return named


def _local_name(remote: str) -> str | None:
    """The clearance name for an MCP tool name: lower case, ``[a-z0-9_-]``, 64 characters."""
    local = _NAME.sub("_", remote.lower()).lstrip("_")[:64]
    return local or None


# --- the connection ------------------------------------------------------------------------


@dataclass(eq=False)
class _Connection:
    """One live client connection, owned by a background task."""

    client: Client | None = None
    error: BaseException | None = None
    ready: anyio.Event = field(default_factory=anyio.Event)
    stop: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    lost: bool = False
    """The transport ended (the server exited or the connection dropped)."""

    def end(self) -> None:
        self.lost = True
        self.stop.set()


class _Unavailable(Exception):
    """The upstream server cannot take calls; the message is for the model."""


class _Upstream:
    """One configured MCP server: its connection, restarts and the call forwarding."""

    def __init__(
        self,
        harness: Harness,
        *,
        name: str,
        describe: str,
        transport: Callable[[], AbstractAsyncContextManager[Any]],
        restart: Restart,
        call_timeout: float | None,
        connect_timeout: float,
        local: bool,
    ) -> None:
        self.harness = harness
        self.local = local
        self.name = name
        self.describe = describe
        self.transport = transport
        self.restart = restart
        self.call_timeout = call_timeout
        self.connect_timeout = connect_timeout
        self.starts = 0
        self._conn: _Connection | None = None
        self._lock = anyio.Lock()
        self._closed = False

    # -- lifecycle ------------------------------------------------------------------------

    async def _own(self, conn: _Connection) -> None:
        """The background task that enters and exits the client (always in this task)."""
        try:
            with conn.scope:
                client = Client(
                    _Watched(self.transport(), conn),
                    cache=None,
                    client_info=mcp_types.Implementation(name="clearance", version=_version()),
                )
                async with client:
                    conn.client = client
                    conn.ready.set()
                    await conn.stop.wait()
        except Exception as exc:
            conn.error = exc
        finally:
            conn.lost = True
            conn.ready.set()
            conn.done.set()

    async def _connect(self) -> _Connection:
        conn = _Connection()
        self.starts += 1
        self.harness.task_group.start_soon(self._own, conn, name=f"clearance-mcp-{self.name}")
        with anyio.move_on_after(self.connect_timeout) as waited:
            await conn.ready.wait()
        if waited.cancelled_caught:
            conn.scope.cancel()
            await _wait(conn.done)
            raise _Unavailable(
                f"{self.describe} did not finish starting within {self.connect_timeout:g}s"
            )
        if conn.client is None or conn.lost:
            await _wait(conn.done)
            failed = "could not be started" if self.local else "could not be reached"
            raise _Unavailable(f"{self.describe} {failed}: {_why(conn.error)}")
        return conn

    async def connection(self) -> _Connection:
        """The live connection, (re)started as ``restart`` allows."""
        conn = self._conn
        if conn is not None and not conn.lost:
            return conn
        async with self._lock:
            conn = self._conn
            if conn is not None and not conn.lost:
                return conn
            if self._closed:
                raise _Unavailable(f"upstream server {self.name!r} is closed")
            if conn is not None:
                await _stop(conn)
                if self.restart == "never":
                    raise _Unavailable(
                        f"upstream server {self.name!r} exited and is not restarted "
                        "(restart='never')"
                    )
                log.warning("restarting %s", self.describe)
            self._conn = await self._connect()
            return self._conn

    async def list_tools(self) -> list[mcp_types.Tool]:
        try:
            conn = await self.connection()
        except _Unavailable as exc:
            raise ConfigError(str(exc)) from None
        assert conn.client is not None
        listed: list[mcp_types.Tool] = []
        cursor: str | None = None
        try:
            with anyio.fail_after(self.connect_timeout):
                for _ in range(_MAX_PAGES):
                    page = await conn.client.list_tools(cursor=cursor)
                    listed.extend(page.tools)
                    cursor = page.next_cursor
                    if cursor is None:
                        break
        except Exception as exc:
            await self.aclose()
            raise ConfigError(f"{self.describe} could not list its tools: {_why(exc)}") from None
        return listed

    async def aclose(self) -> None:
        """Close the connection (a close hook of the harness)."""
        self._closed = True
        conn, self._conn = self._conn, None
        if conn is not None:
            with anyio.CancelScope(shield=True):
                await _stop(conn)

    # -- calls ----------------------------------------------------------------------------

    def handler(self, remote_name: str) -> Callable[[dict[str, Any], CallContext], Any]:
        async def call_upstream(arguments: dict[str, Any], ctx: CallContext) -> CallToolResult:
            return await self.call(remote_name, arguments, ctx)

        call_upstream.__qualname__ = f"mcp:{self.name}.{remote_name}"
        return call_upstream

    async def call(
        self, remote_name: str, arguments: dict[str, Any], ctx: CallContext
    ) -> CallToolResult:
        try:
            conn = await self.connection()
        except _Unavailable as exc:
            return _failure(str(exc))
        client = conn.client
        assert client is not None
        relay = _RELAY.get()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            # Runs in the client's receive task, not the handler's: hence the captured relay.
            if relay is not None:
                try:
                    await relay(progress, total, message)
                except Exception as exc:
                    log.debug("progress relay failed: %r", exc)
            await ctx.progress(
                message or _progress_text(progress, total), {"progress": progress, "total": total}
            )

        try:
            result = await client.call_tool(
                remote_name,
                arguments,
                read_timeout_seconds=self.call_timeout,
                progress_callback=on_progress,
            )
        except MCPError as exc:
            if exc.code == mcp_types.CONNECTION_CLOSED or conn.lost:
                conn.end()
                return _failure(self._lost_message(remote_name))
            if exc.code == mcp_types.REQUEST_TIMEOUT:
                return _failure(
                    f"upstream server {self.name!r} did not answer {remote_name!r} within "
                    f"{self.call_timeout:g}s; the request was cancelled"
                )
            return _failure(f"upstream server {self.name!r} refused the call: {exc.message}")
        except (OSError, httpx2.TransportError, anyio.BrokenResourceError) as exc:
            conn.end()
            return _failure(
                f"upstream server {self.name!r} failed ({type(exc).__name__}); " + self._next_step()
            )
        except Exception as exc:
            if conn.lost:
                return _failure(self._lost_message(remote_name))
            log.warning("MCP server %r: call %s failed: %r", self.name, ctx.call_id, exc)
            return _failure(
                f"upstream server {self.name!r} sent an answer clearance cannot use "
                f"({type(exc).__name__})"
            )
        return _result(self.name, result)

    def _lost_message(self, remote_name: str) -> str:
        return (
            f"upstream server {self.name!r} exited or dropped the connection during "
            f"{remote_name!r}; " + self._next_step()
        )

    def _next_step(self) -> str:
        if self.restart == "never":
            return "it is not restarted (restart='never')"
        return "it will be started again on the next call"


class _Watched:
    """A transport whose read stream reports its end, so a dead server is noticed at once."""

    def __init__(self, inner: AbstractAsyncContextManager[Any], conn: _Connection) -> None:
        self._inner = inner
        self._conn = conn

    async def __aenter__(self) -> tuple[_WatchedReadStream, Any]:
        read, write = await self._inner.__aenter__()
        return _WatchedReadStream(read, self._conn), write

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        return await self._inner.__aexit__(exc_type, exc, tb)


class _WatchedReadStream:
    def __init__(self, inner: Any, conn: _Connection) -> None:
        self._inner = inner
        self._conn = conn

    @property
    def last_context(self) -> contextvars.Context | None:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            item: SessionMessage | Exception = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            # The server's stdout ended (it exited) or the HTTP transport closed.
            self._conn.end()
            raise
        return item

    def __aiter__(self) -> _WatchedReadStream:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _WatchedReadStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


# --- helpers -------------------------------------------------------------------------------


async def _stop(conn: _Connection) -> None:
    conn.stop.set()
    await _wait(conn.done)


async def _wait(event: anyio.Event) -> None:
    with anyio.move_on_after(_CLOSE_WAIT):
        await event.wait()


def _result(server: str, result: mcp_types.CallToolResult) -> CallToolResult:
    blocks = [b.model_dump(by_alias=True, mode="json", exclude_none=True) for b in result.content]
    if result.is_error:
        # Name the server so the model knows who reported the error.
        blocks.insert(0, {"type": "text", "text": f"upstream server {server!r} reported an error:"})
    return CallToolResult(
        blocks, structured_content=result.structured_content, is_error=result.is_error
    )


def _failure(message: str) -> CallToolResult:
    return CallToolResult([{"type": "text", "text": message}], is_error=True)


def _why(exc: BaseException | None) -> str:
    if exc is None:
        return "the connection closed during the handshake"
    if isinstance(exc, BaseExceptionGroup):
        leaves = exc.exceptions
        if len(leaves) == 1:
            return _why(leaves[0])
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _progress_text(progress: float, total: float | None) -> str:
    return f"{progress:g}/{total:g}" if total is not None else f"{progress:g}"


def _errlog(stderr: TextIO | None) -> TextIO:
    stream = stderr if stderr is not None else sys.stderr
    try:
        stream.fileno()
    except (AttributeError, OSError, ValueError):
        # A replaced sys.stderr without a descriptor cannot be handed to a subprocess.
        return sys.__stderr__ if sys.__stderr__ is not None else cast(TextIO, subprocess.DEVNULL)
    return stream


def _redact_url(url: str) -> str:
    """The URL without userinfo or query (they may carry credentials)."""
    try:
        parsed = httpx2.URL(url)
    except Exception:
        return "<url>"
    return str(parsed.copy_with(username=None, password=None, query=None, fragment=None))


def _version() -> str:
    from clearance import __version__

    return __version__
