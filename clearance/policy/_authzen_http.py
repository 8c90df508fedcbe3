"""One HTTP exchange with an AuthZEN PDP, bounded in time and size, that fails as a value.

:class:`PdpClient` speaks HTTP/1.1 with ``h11`` (the protocol state machine under httpx and
uvicorn) over anyio streams, with TLS from the standard library, and keeps a pool of
keep-alive connections: a decision pays a TCP and TLS handshake only when the pool has no
idle connection. It is this small on purpose: the same decision sent with httpx cost the
client 2.2 ms of CPU against 1.0 ms here (one run of 300 decisions each, on the loaded
2-core machine this was written on; httpx adds request and response objects, URL and header
models and a second pool above h11), and under load a millisecond of CPU is several of
waiting.

It never retries: a request gets its one answer within ``timeout`` seconds (counted from
the start, waiting for a free connection included: a PDP that trickles a byte at a time
cannot stretch it), or fails with a :class:`PdpFailure` naming the cause, and the caller
denies (R1). What it refuses of an answer:

- any status but 200 (redirects are not followed: the token would go where they point), a
  ``Content-Type`` other than ``application/json``, a ``Content-Encoding`` (it asks for
  none: a compressed body could be a bomb);
- an ``X-Request-ID`` that is not the one it sent (an answer to another request);
- a body longer than ``max_bytes``, or one :func:`~clearance.policy.authzen_wire.loads`
  refuses (not I-JSON); anything ``h11`` refuses as HTTP.

A connection goes back to the pool only after a complete 200 exchange that both ends may
continue with nothing left over (bytes after the answer would be read as the next
request's answer); any error, refusal or cancellation closes it. Before a pooled connection is
reused, it is checked for an end the server sent while it was idle (then it is closed and
another taken), and it is dropped after 4 s idle, below the 5 s most servers keep one: a
call is not sent into a socket the server is closing. Nothing is read from the environment
(no proxy, no ``.netrc``, no ``SSL_CERT_FILE``): the PDP, its CA and its token are exactly
what the configuration names.

The pool belongs to one event loop; a client used from a new loop (a second
``anyio.run``) starts a new pool there. :meth:`PdpClient.aclose` closes the pool of the
running loop.
"""

from __future__ import annotations

import contextlib
import secrets
import select
import socket
import ssl
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.abc
import anyio.lowlevel

from clearance._text import printable
from clearance.errors import MissingExtraError
from clearance.policy.authzen_wire import MalformedAnswer, loads

__all__ = ["PdpClient", "PdpFailure"]

_SNIPPET = 200
"""Characters of an error body (or an error's text) kept for the journal."""
_IDLE = 4.0
"""Seconds a pooled connection may stay idle before it is dropped."""
_USER_AGENT = "clearance"


class PdpFailure(Exception):
    """The PDP gave no usable answer.

    Attributes:
        cause: what happened, in one phrase (``no answer within 2 s``, ``answered HTTP
            500``): safe to show.
        detail: more for the journal (the start of an error body), or None.
    """

    def __init__(self, cause: str, detail: str | None = None) -> None:
        super().__init__(cause)
        self.cause = cause
        self.detail = detail


def _h11() -> Any:
    try:
        import h11
    except ImportError as exc:
        raise MissingExtraError("authzen", "the AuthZEN evaluator") from exc
    return h11


@dataclass(eq=False)
class _Connection:
    stream: anyio.abc.ByteStream
    protocol: Any
    """The connection's ``h11.Connection``."""
    sock: socket.socket | None
    idle_since: float = 0.0

    def stale(self, now: float) -> bool:
        """Idle too long, or the server sent something (an end) while it was idle."""
        if now - self.idle_since > _IDLE or self.sock is None:
            return True
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)


@dataclass(eq=False)
class _LoopPool:
    token: Any
    slots: anyio.Semaphore
    idle: dict[tuple[str, str, int], deque[_Connection]] = field(default_factory=dict)


class PdpClient:
    """Sends a request to a PDP and reads its JSON answer (see the module docstring).

    Args:
        token: the bearer token sent in ``Authorization``, or None to send none.
        timeout: seconds one exchange may take, all of it.
        ca_file: a PEM file of the CAs to trust for the PDP's certificate (default: the
            system's).
        max_connections: connections open to the PDP at most (more requests wait).
        max_bytes: the largest answer read.

    Raises:
        MissingExtraError: h11 is not installed (the ``authzen`` extra).
        ValueError: ``ca_file`` cannot be read as CA certificates.
    """

    def __init__(
        self,
        *,
        token: str | None,
        timeout: float,
        ca_file: str | None = None,
        max_connections: int = 16,
        max_bytes: int = 1 << 20,
    ) -> None:
        self._h11 = _h11()
        self._token = token
        self.timeout = timeout
        self.max_bytes = max_bytes
        self._max_connections = max_connections
        try:
            self._tls = ssl.create_default_context(cafile=ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"cannot read the CA file {ca_file!r}: {exc}") from None
        self._pool: _LoopPool | None = None

    def __repr__(self) -> str:  # never the token
        return f"PdpClient(timeout={self.timeout!r})"

    def _loop_pool(self) -> _LoopPool:
        token = anyio.lowlevel.current_token()
        pool = self._pool
        if pool is None or pool.token != token:
            pool = self._pool = _LoopPool(token, anyio.Semaphore(self._max_connections))
        return pool

    async def aclose(self) -> None:
        """Close the connections of the running event loop (a pool of another loop is
        dropped)."""
        pool, self._pool = self._pool, None
        if pool is None or pool.token != anyio.lowlevel.current_token():
            return
        for connections in pool.idle.values():
            while connections:
                await anyio.aclose_forcefully(connections.popleft().stream)

    async def exchange(self, method: str, url: str, body: bytes | None = None) -> Any:
        """Send one request and return the JSON value of its answer.

        Raises:
            PdpFailure: no usable answer (see the module docstring).
        """
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        pool = self._loop_pool()
        with anyio.move_on_after(self.timeout):
            async with pool.slots:
                key = (parts.scheme, host, port)
                connection = await self._take(pool, key)
                if connection is None:
                    connection = await self._connect(parts.scheme, host, port)
                done = False
                try:
                    answer = await self._round_trip(connection, method, parts.netloc, target, body)
                    done = True
                    return answer
                finally:
                    if done and self._reusable(connection):
                        connection.idle_since = time.monotonic()
                        pool.idle.setdefault(key, deque()).append(connection)
                    else:
                        await anyio.aclose_forcefully(connection.stream)
        raise PdpFailure(f"no answer within {self.timeout:g} s")

    # -- connections --------------------------------------------------------------------

    async def _take(self, pool: _LoopPool, key: tuple[str, str, int]) -> _Connection | None:
        """An idle connection to ``key`` that is still good, or None (stale ones closed)."""
        idle = pool.idle.get(key)
        now = time.monotonic()
        while idle:
            connection = idle.pop()  # the most recently used first
            if not connection.stale(now):
                return connection
            await anyio.aclose_forcefully(connection.stream)
        return None

    async def _connect(self, scheme: str, host: str, port: int) -> _Connection:
        try:
            if scheme == "https":
                stream: anyio.abc.ByteStream = await anyio.connect_tcp(
                    host, port, ssl_context=self._tls, tls_hostname=host
                )
            else:
                stream = await anyio.connect_tcp(host, port)
        except (OSError, ssl.SSLError, anyio.BrokenResourceError) as exc:
            raise PdpFailure(f"cannot connect: {_text(exc)}") from None
        sock = stream.extra(anyio.abc.SocketAttribute.raw_socket, None)
        if sock is not None:
            # A request is written in one piece, but an answer may not be: without
            # TCP_NODELAY, Nagle's algorithm can hold a write back for a delayed ACK.
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return _Connection(stream, self._h11.Connection(self._h11.CLIENT), sock)

    def _reusable(self, connection: _Connection) -> bool:
        h11 = self._h11
        protocol = connection.protocol
        if protocol.our_state is not h11.DONE or protocol.their_state is not h11.DONE:
            return False
        if protocol.trailing_data != (b"", False):
            # Bytes after the answer (a second answer sent unasked): the next request
            # would read them as its own. Never reuse such a connection.
            return False
        try:
            protocol.start_next_cycle()
        except h11.LocalProtocolError:
            return False
        return True

    # -- one request and its answer ---------------------------------------------------------

    async def _round_trip(
        self,
        connection: _Connection,
        method: str,
        authority: str,
        target: str,
        body: bytes | None,
    ) -> Any:
        h11 = self._h11
        request_id = secrets.token_hex(16)
        headers = [
            ("Host", authority),
            ("User-Agent", _USER_AGENT),
            ("Accept", "application/json"),
            ("Accept-Encoding", "identity"),
            ("X-Request-ID", request_id),
        ]
        if body is not None:
            headers += [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        if self._token:
            headers.append(("Authorization", f"Bearer {self._token}"))
        protocol = connection.protocol
        try:
            data = protocol.send(h11.Request(method=method, target=target, headers=headers))
            if body:
                data += protocol.send(h11.Data(data=body))
            data += protocol.send(h11.EndOfMessage())
        except (h11.LocalProtocolError, UnicodeError) as exc:
            raise PdpFailure(f"cannot send the request: {_text(exc)}") from None
        try:
            await connection.stream.send(data)  # headers and body in one write
            response = await self._next(connection, h11.Response)
            status = response.status_code
            fields = {k.decode("latin-1").lower(): v for k, v in response.headers}
            if status != 200:
                head = await self._body(connection, _SNIPPET, truncate=True)
                text = printable(head.decode("utf-8", "replace").strip())
                hint = ""
                if status in (401, 403) and not self._token:
                    hint = " (no token was sent: its environment variable is not set)"
                reason = printable(response.reason.decode("latin-1"))
                raise PdpFailure(f"answered HTTP {status}{hint}", f"HTTP {status} {reason}: {text}")
            kind = fields.get("content-type", b"").decode("latin-1")
            if kind.split(";", 1)[0].strip().lower() != "application/json":
                raise PdpFailure(
                    f"answered with Content-Type {printable(kind)[:80]!r}, not application/json"
                )
            encoding = fields.get("content-encoding", b"identity").decode("latin-1").strip()
            if encoding.lower() not in ("", "identity"):
                raise PdpFailure(f"answered with Content-Encoding {printable(encoding)[:40]!r}")
            echoed = fields.get("x-request-id")
            if echoed is not None and echoed.decode("latin-1") != request_id:
                raise PdpFailure("answered another request (its X-Request-ID is not the one sent)")
            data = await self._body(connection, self.max_bytes, truncate=False)
        except h11.RemoteProtocolError as exc:
            raise PdpFailure(f"broke the HTTP exchange: {_text(exc)}") from None
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise PdpFailure(f"the connection failed: {_text(exc)}") from None
        try:
            return loads(data)
        except MalformedAnswer as exc:
            raise PdpFailure(f"answered malformed JSON: {exc.reason}") from None

    async def _next(self, connection: _Connection, wanted: type) -> Any:
        """The next event of the answer that is a ``wanted`` (1xx answers are skipped).

        Raises:
            PdpFailure: the server closed the connection first.
        """
        h11 = self._h11
        protocol = connection.protocol
        while True:
            event = protocol.next_event()
            if event is h11.NEED_DATA:
                try:
                    data = await connection.stream.receive(65536)
                except anyio.EndOfStream:
                    data = b""
                protocol.receive_data(data)
                continue
            if isinstance(event, h11.ConnectionClosed):
                raise PdpFailure("broke the HTTP exchange: the connection was closed")
            if isinstance(event, wanted) or not isinstance(event, h11.InformationalResponse):
                return event

    async def _body(self, connection: _Connection, limit: int, *, truncate: bool) -> bytes:
        """The answer's body, up to ``limit`` bytes: the first ``limit`` when
        ``truncate`` (the connection is not reused then), else a :class:`PdpFailure` when
        it is longer."""
        h11 = self._h11
        chunks: list[bytes] = []
        size = 0
        while True:
            event = await self._next(connection, h11.Data)
            if isinstance(event, h11.EndOfMessage):
                return b"".join(chunks)
            if isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
                size += len(event.data)
                if size > limit:
                    if truncate:
                        return b"".join(chunks)[:limit]
                    raise PdpFailure(f"answered more than {limit} bytes")


def _text(exc: BaseException) -> str:
    """An error's text for a message: its cause's when it wraps one, one line, bounded."""
    shown = exc.__cause__ or exc.__context__ or exc
    text = str(shown) or type(shown).__name__
    if isinstance(shown, ssl.SSLCertVerificationError) and shown.verify_message:
        text = f"TLS: certificate verify failed: {shown.verify_message}"
    return printable(text.strip())[:_SNIPPET]
