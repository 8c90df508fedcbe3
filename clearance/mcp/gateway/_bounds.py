"""What one HTTP client can take of the gateway: every resource has a bound by default.

Without these, 300 sockets that never sent a request (or sent one byte of it) stayed open
forever, past the file-descriptor limit every client timed out, a response nobody read
stayed in memory for the connection's life, and nothing bounded how many requests were
being parsed and decided at once. The bounds (:class:`HttpLimits`, ``[gateway]`` keys of
the same names):

- ``max_connections``: connections open at once. Past it, the oldest connection with no
  request in progress (none sent yet, or idle between two) is closed to make room, and
  if every one has a request in progress the new one is closed at once, before anything
  is read: the process never reaches its descriptor limit, and a flood of connections
  that send nothing cannot keep a client with a request out.
- ``header_timeout``: seconds from a connection's start, or from the end of its previous
  response, to a request's complete head; and the most a request's body may pause. A
  client that sends nothing, or a byte at a time, is disconnected.
- ``idle_timeout``: seconds a kept-alive connection may wait for its next request.
- ``write_timeout``: seconds a response may wait for a client that does not read it (the
  socket's buffer full); the connection is then dropped, and what it held with it.
- ``max_request_bytes``: the largest request body (413 beyond).
- ``max_requests``: requests being read, decided or run at once; one more is answered
  503 with ``Retry-After: 1`` at once, before its body is read.
- ``max_sessions_per_principal``: HTTP sessions one principal holds at once (of the
  gateway's ``max_sessions``); a request that would open one more is answered 503
  (:class:`SessionQuota`).

The protocol is uvicorn's h11 one with the cap and timers added (:func:`bounded_protocol`);
the request bound is ASGI middleware (:class:`RequestBounds`), which a GET (a session's
event stream, open for the session's life) and a DELETE do not count against.
"""

from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import dataclass, fields
from typing import Any, ClassVar

import anyio

__all__ = ["HttpLimits", "RequestBounds", "SessionQuota", "bounded_protocol"]

_log = logging.getLogger("clearance.mcp")


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """The HTTP gateway's bounds (see the module docstring); each is a ``[gateway]`` key."""

    max_connections: int = 512
    """Connections open at once; one more is closed as soon as it is accepted."""
    header_timeout: float = 10.0
    """Seconds to receive a request's head, and the longest pause inside its body."""
    idle_timeout: float = 15.0
    """Seconds a kept-alive connection may wait for its next request."""
    write_timeout: float = 30.0
    """Seconds a response may wait for a client that does not read it."""
    max_request_bytes: int = 4 * 1024 * 1024
    """The largest request body (answered 413 beyond)."""
    max_requests: int = 256
    """Requests being read, decided or run at once (one more: 503)."""
    max_sessions_per_principal: int = 1000
    """HTTP sessions one principal may hold open at once (one more: 503)."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "int":
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise ValueError(f"{f.name} must be a positive integer")
            elif (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value <= 0
            ):
                raise ValueError(f"{f.name} must be a positive number of seconds")


def bounded_protocol(limits: HttpLimits) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with ``limits``' connection cap and timers."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class Bounded(H11Protocol):
        _waiting: ClassVar[dict[Bounded, None]] = {}
        """This server's connections with no request in progress (none yet, or between
        two), oldest first: the ones a new connection past the cap replaces."""
        _head_timer: asyncio.TimerHandle | None = None
        _write_timer: asyncio.TimerHandle | None = None
        _body_timer: asyncio.TimerHandle | None = None
        _waiting_cycle: Any = None
        _between_requests = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > limits.max_connections:
                # Past the cap: the oldest connection with no request in progress makes
                # room (a flood of silent connections cannot keep a client out); with
                # none, this one is closed.
                _refused_connection()
                oldest = next(iter(self._waiting), None)
                if oldest is None:
                    transport.abort()
                    return
                self._waiting.pop(oldest)
                oldest.transport.abort()
            self._await_head()

        def connection_lost(self, exc: Exception | None) -> None:
            self._waiting.pop(self, None)
            self._cancel_timers()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._between_requests:
                # The next request begins: uvicorn's keep-alive timer (idle_timeout)
                # stops here, and this one bounds the time to its complete head.
                self._between_requests = False
                self._await_head()
            super().data_received(data)

        def handle_events(self) -> None:
            super().handle_events()
            cycle = self.cycle
            if self._head_timer is not None and cycle is not self._waiting_cycle:
                # A request's head arrived (a new cycle started): now its body.
                self._head_timer.cancel()
                self._head_timer = None
                self._waiting.pop(self, None)
            if cycle is not None and cycle.more_body and cycle is not self._waiting_cycle:
                # The body is still coming: the next part within header_timeout.
                if self._body_timer is not None:
                    self._body_timer.cancel()
                self._body_timer = self.loop.call_later(limits.header_timeout, self._no_body)
            elif self._body_timer is not None:
                self._body_timer.cancel()
                self._body_timer = None

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self.conn.our_state is h11.IDLE:
                self._between_requests = True
                self._waiting[self] = None

        def pause_writing(self) -> None:
            super().pause_writing()
            if self._write_timer is None:
                self._write_timer = self.loop.call_later(limits.write_timeout, self._unread)

        def resume_writing(self) -> None:
            super().resume_writing()
            if self._write_timer is not None:
                self._write_timer.cancel()
                self._write_timer = None

        def _await_head(self) -> None:
            self._waiting.pop(self, None)  # re-added last: the newest waiting
            self._waiting[self] = None
            self._waiting_cycle = self.cycle
            if self._head_timer is not None:
                self._head_timer.cancel()
            self._head_timer = self.loop.call_later(limits.header_timeout, self._no_head)

        def _no_head(self) -> None:
            self._head_timer = None
            if not self.transport.is_closing():
                _log.debug("closing a connection that sent no request within header_timeout")
                self.transport.abort()

        def _no_body(self) -> None:
            self._body_timer = None
            cycle = self.cycle
            if cycle is not None and cycle.more_body and not self.transport.is_closing():
                _log.debug("closing a connection whose request body paused too long")
                self.transport.abort()

        def _unread(self) -> None:
            self._write_timer = None
            if not self.transport.is_closing():
                _log.warning(
                    "dropping a connection that read nothing of its response for %gs",
                    limits.write_timeout,
                )
                self.transport.abort()

        def _cancel_timers(self) -> None:
            for timer in (self._head_timer, self._write_timer, self._body_timer):
                if timer is not None:
                    timer.cancel()
            self._head_timer = self._write_timer = self._body_timer = None

    Bounded._waiting = {}  # one per server: each call makes a new class
    return Bounded


_REFUSED = {"count": 0, "logged": -math.inf}


def _refused_connection() -> None:
    """Log refused connections, at most one line every 10 seconds."""
    _REFUSED["count"] += 1
    now = asyncio.get_running_loop().time()
    if now - _REFUSED["logged"] >= 10.0:
        _log.warning(
            "max_connections reached %d time(s) since the last report: closed the oldest "
            "connection without a request in progress (or the new one)",
            _REFUSED["count"],
        )
        _REFUSED["count"], _REFUSED["logged"] = 0, now


class RequestBounds:
    """ASGI middleware: at most ``max_requests`` POST requests at once (503 beyond)."""

    def __init__(self, app: Any, limits: HttpLimits) -> None:
        self.app = app
        self.limits = limits
        self._limiter = anyio.CapacityLimiter(limits.max_requests)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            # A GET holds a session's event stream open for its life, a DELETE ends one:
            # neither is parsed or decided.
            await self.app(scope, receive, send)
            return
        try:
            self._limiter.acquire_nowait()
        except anyio.WouldBlock:
            await _refuse(send, 503, b"the gateway is busy\n")
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self._limiter.release()


class SessionQuota:
    """ASGI middleware: at most ``per_principal`` HTTP sessions open at once for one
    principal, so that one token cannot take every one of ``max_sessions``.

    A session is counted from the response that gave it its ``Mcp-Session-Id`` to the
    ``DELETE`` that ended it, the ``404`` that says the SDK forgot it, or ``idle_timeout``
    seconds without a request (when the SDK ends it too). A principal at its quota gets
    ``503`` for a request that would open a session (a POST without a session id, not of
    the sessionless 2026-07-28 protocol) until one of its sessions ends.
    """

    def __init__(self, app: Any, *, per_principal: int, idle_timeout: float, key: str) -> None:
        self.app = app
        self.per_principal = per_principal
        self.idle_timeout = idle_timeout
        self._key = key
        self._sessions: dict[Any, dict[str, float]] = {}
        """Per principal: its open session ids and when each last had a request."""

    def open_sessions(self, principal: Any) -> int:
        """How many sessions ``principal`` holds now (idle ones forgotten first)."""
        return len(self._live(principal, anyio.current_time()))

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        principal = scope.get(self._key) if scope["type"] == "http" else None
        if principal is None:
            await self.app(scope, receive, send)
            return
        sid = _header(scope, b"mcp-session-id")
        now = anyio.current_time()
        held = self._live(principal, now)
        if sid is not None:
            if sid in held:
                held[sid] = now
        elif (
            scope.get("method") == "POST" and not _modern(scope) and len(held) >= self.per_principal
        ):
            await _refuse(send, 503, b"this principal has too many open sessions\n")
            return

        async def watch(message: Any) -> None:
            if message["type"] == "http.response.start":
                self._answered(principal, scope, sid, message)
            await send(message)

        await self.app(scope, receive, watch)

    def _answered(self, principal: Any, scope: Any, sid: str | None, start: Any) -> None:
        """Count a session the answer opened, forget one it ended."""
        status = start["status"]
        now = anyio.current_time()
        if sid is None:
            if status < 300:
                for name, value in start.get("headers", ()):
                    if name.lower() == b"mcp-session-id":
                        self._live(principal, now)[value.decode("latin-1")] = now
        elif status == 404 or (scope.get("method") == "DELETE" and 200 <= status < 300):
            self._live(principal, now).pop(sid, None)

    def _live(self, principal: Any, now: float) -> dict[str, float]:
        held = self._sessions.get(principal)
        if held is None:
            held = self._sessions[principal] = {}
        idle = [sid for sid, last in held.items() if now - last >= self.idle_timeout]
        for sid in idle:
            del held[sid]
        return held


def _header(scope: Any, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None


def _modern(scope: Any) -> bool:
    """A request of the sessionless 2026-07-28 protocol (it opens no session)."""
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    return _header(scope, b"mcp-protocol-version") in MODERN_PROTOCOL_VERSIONS


async def _refuse(send: Any, status: int, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"retry-after", b"1"),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
