"""The connection to one upstream MCP server, and forwarding calls over it.

The connection lives in a background task of the harness's task group (MCP client context
managers must be entered and exited in the same task) and is closed when the harness
closes. A call forwards progress notifications to ``ctx.progress`` (and to the gateway's
client, see :mod:`clearance.mcp._progress`) and cancels the upstream request when the
clearance call is cancelled. Upstream failures come back as ``is_error`` results that name
the server, so the model sees what happened and the harness keeps working; a server that
exited is started again on the next call (``restart="on_next_call"``) or reported as gone
(``restart="never"``).
"""

from __future__ import annotations

import contextvars
import logging
import subprocess
import sys
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, TextIO, cast

import anyio
import httpx2
import mcp_types
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from clearance._limits import json_fault
from clearance.errors import ConfigError
from clearance.harness.tools import CallContext, CallToolResult
from clearance.mcp._progress import current_relay

if TYPE_CHECKING:
    from clearance.harness.session import Harness

__all__ = ["Restart", "Upstream", "errlog", "redact_url"]

_log = logging.getLogger("clearance.mcp")

Restart = Literal["on_next_call", "never"]
"""What happens after a server exits: start it on the next call, or report it gone."""

_MAX_PAGES = 100
_CLOSE_WAIT = 10.0


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


class Upstream:
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
                _log.warning("restarting %s", self.describe)
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
        fault = json_fault(arguments)
        if fault is not None:
            # The SDK's serializer would raise mid-write and tear down the connection
            # every caller shares: refuse this call alone, before it is sent.
            return _failure(f"the arguments cannot be sent to {self.describe}: {fault}")
        try:
            conn = await self.connection()
        except _Unavailable as exc:
            return _failure(str(exc))
        client = conn.client
        assert client is not None
        relay = current_relay()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            # Runs in the client's receive task, not the handler's: hence the captured relay.
            if relay is not None:
                try:
                    await relay(progress, total, message)
                except Exception as exc:
                    _log.debug("progress relay failed: %r", exc)
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
            _log.warning("MCP server %r: call %s failed: %r", self.name, ctx.call_id, exc)
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


def errlog(stderr: TextIO | None) -> TextIO:
    """Where a stdio server's stderr goes: ``stderr``, else this process's stderr, when it
    has a file descriptor to hand to the subprocess."""
    stream = stderr if stderr is not None else sys.stderr
    try:
        stream.fileno()
    except (AttributeError, OSError, ValueError):
        # A replaced sys.stderr without a descriptor cannot be handed to a subprocess.
        return sys.__stderr__ if sys.__stderr__ is not None else cast(TextIO, subprocess.DEVNULL)
    return stream


def redact_url(url: str) -> str:
    """The URL without userinfo or query (they may carry credentials)."""
    try:
        parsed = httpx2.URL(url)
    except Exception:
        return "<url>"
    return str(parsed.copy_with(username=None, password=None, query=None, fragment=None))


def _version() -> str:
    from clearance import __version__

    return __version__
