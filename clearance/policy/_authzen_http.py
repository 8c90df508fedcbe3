"""One HTTP exchange with an AuthZEN PDP, bounded in time and size, that fails as a value.

:class:`PdpClient` owns the connection pool (an ``httpx.AsyncClient``: keep-alive
connections reused across calls, so a decision pays a TCP and TLS handshake only when the
pool has no idle connection). It never retries: a request either gets its one answer within
``timeout`` seconds or fails with a :class:`PdpFailure` naming the cause, and the caller
denies (R1). What it refuses of an answer:

- any status but 200, a ``Content-Type`` other than ``application/json``, a
  ``Content-Encoding`` (it asks for none: a compressed body could be a bomb);
- an ``X-Request-ID`` that is not the one it sent (an answer to another request);
- a body longer than ``max_bytes``, or one :func:`~clearance.policy.authzen_wire.loads`
  refuses (not I-JSON);
- no complete answer within ``timeout`` seconds, counted from the start of the request
  (a PDP that trickles a byte at a time cannot stretch it).

Redirects are not followed (the token would go wherever they point), and nothing is read
from the environment (no proxy, no ``.netrc``): the PDP, its CA and its token are exactly
what the configuration names.

The pool belongs to one event loop; a client used from a new loop (a second
``anyio.run``) starts a new pool there. :meth:`PdpClient.aclose` closes the pool of the
running loop.
"""

from __future__ import annotations

import secrets
import socket
import ssl
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

from clearance._text import printable
from clearance.errors import MissingExtraError
from clearance.policy.authzen_wire import MalformedAnswer, loads

if TYPE_CHECKING:
    import httpx

__all__ = ["PdpClient", "PdpFailure"]

_SNIPPET = 200
"""Characters of an error body kept for the journal."""


class PdpFailure(Exception):
    """The PDP gave no usable answer.

    Attributes:
        cause: what happened, in one phrase (``timed out after 2 s``, ``answered HTTP
            500``): safe to show.
        detail: more for the journal (the start of an error body), or None.
    """

    def __init__(self, cause: str, detail: str | None = None) -> None:
        super().__init__(cause)
        self.cause = cause
        self.detail = detail


@dataclass(frozen=True, slots=True)
class _Pool:
    token: Any
    client: httpx.AsyncClient


def _httpx() -> Any:
    try:
        import httpx
    except ImportError as exc:
        raise MissingExtraError("authzen", "the AuthZEN evaluator") from exc
    return httpx


class PdpClient:
    """POSTs JSON to one PDP and reads its answer (see the module docstring).

    Args:
        token: the bearer token sent in ``Authorization``, or None to send none.
        timeout: seconds one exchange may take, all of it.
        ca_file: a PEM file of the CAs to trust for the PDP's certificate (default: the
            ``certifi`` bundle httpx ships).
        max_connections: connections kept open to the PDP at most.
        max_bytes: the largest answer read.

    Raises:
        MissingExtraError: httpx is not installed (the ``authzen`` extra).
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
        self._httpx = _httpx()
        self._token = token
        self.timeout = timeout
        self.max_bytes = max_bytes
        self._max_connections = max_connections
        self._verify: ssl.SSLContext | bool = True
        if ca_file is not None:
            try:
                self._verify = ssl.create_default_context(cafile=ca_file)
            except (OSError, ssl.SSLError) as exc:
                raise ValueError(f"cannot read the CA file {ca_file!r}: {exc}") from None
        self._pool: _Pool | None = None

    def __repr__(self) -> str:  # never the token
        return f"PdpClient(timeout={self.timeout!r})"

    def _client(self) -> httpx.AsyncClient:
        token = anyio.lowlevel.current_token()
        pool = self._pool
        if pool is not None and pool.token == token:
            return pool.client
        lib = self._httpx
        transport = lib.AsyncHTTPTransport(
            verify=self._verify,
            retries=0,
            limits=lib.Limits(
                max_connections=self._max_connections,
                max_keepalive_connections=self._max_connections,
                # Below the 5 s most servers keep an idle connection: the pool drops it
                # before the server does, so a call is never sent into a closing socket.
                keepalive_expiry=4.0,
            ),
            # A request is headers then a body: without TCP_NODELAY, Nagle's algorithm
            # holds the body back for the server's delayed ACK (tens of milliseconds).
            socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
        )
        client: httpx.AsyncClient = lib.AsyncClient(
            transport=transport,
            timeout=lib.Timeout(self.timeout),
            follow_redirects=False,
            trust_env=False,
        )
        self._pool = _Pool(token, client)
        return client

    async def aclose(self) -> None:
        """Close the pool of the running event loop (a pool of another loop is dropped)."""
        pool, self._pool = self._pool, None
        if pool is not None and pool.token == anyio.lowlevel.current_token():
            await pool.client.aclose()

    async def exchange(self, method: str, url: str, body: bytes | None = None) -> Any:
        """Send one request and return the JSON value of its answer.

        Raises:
            PdpFailure: no usable answer (see the module docstring).
        """
        lib = self._httpx
        request_id = secrets.token_hex(16)
        headers = {
            "Accept": "application/json",
            "Accept-Encoding": "identity",
            "X-Request-ID": request_id,
        }
        if body is not None:
            headers["Content-Type"] = "application/json"
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        client = self._client()
        with anyio.move_on_after(self.timeout):
            try:
                async with client.stream(method, url, content=body, headers=headers) as answer:
                    return await self._read(answer, request_id)
            except lib.HTTPError as exc:
                raise PdpFailure(_transport_cause(lib, exc)) from None
            except ssl.SSLError as exc:  # pragma: no cover  (httpx wraps these)
                raise PdpFailure(f"TLS failed: {printable(exc)}") from None
        raise PdpFailure(f"no answer within {self.timeout:g} s")

    async def _read(self, answer: httpx.Response, request_id: str) -> Any:
        status = answer.status_code
        if status != 200:
            head = await _read_at_most(answer, _SNIPPET, truncate=True)
            text = printable(head.decode("utf-8", "replace").strip())
            hint = ""
            if status in (401, 403) and not self._token:
                hint = " (no token was sent: its environment variable is not set)"
            raise PdpFailure(
                f"answered HTTP {status}{hint}",
                f"HTTP {status} {printable(answer.reason_phrase)}: {text}",
            )
        kind = answer.headers.get("content-type", "")
        if kind.split(";", 1)[0].strip().lower() != "application/json":
            raise PdpFailure(
                f"answered with Content-Type {printable(kind)[:80]!r}, not application/json"
            )
        encoding = answer.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise PdpFailure(f"answered with Content-Encoding {printable(encoding)[:40]!r}")
        echoed = answer.headers.get("x-request-id")
        if echoed is not None and echoed != request_id:
            raise PdpFailure("answered another request (its X-Request-ID is not the one sent)")
        data = await _read_at_most(answer, self.max_bytes, truncate=False)
        try:
            return loads(data)
        except MalformedAnswer as exc:
            raise PdpFailure(f"answered malformed JSON: {exc.reason}") from None


async def _read_at_most(answer: httpx.Response, limit: int, *, truncate: bool) -> bytes:
    """The raw body, up to ``limit`` bytes: the first ``limit`` when ``truncate``, else
    a :class:`PdpFailure` when it is longer."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in answer.aiter_raw():
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            if truncate:
                break
            raise PdpFailure(f"answered more than {limit} bytes")
    return b"".join(chunks)[:limit]


def _transport_cause(lib: Any, exc: Exception) -> str:
    """What a transport error (of httpx, ``lib``) means, in one phrase."""
    text = printable(str(exc).strip())[:_SNIPPET] or type(exc).__name__
    if isinstance(exc, lib.TimeoutException):
        return f"timed out ({type(exc).__name__})"
    if isinstance(exc, lib.ConnectError):
        return f"cannot connect: {text}"
    if isinstance(exc, lib.RemoteProtocolError):
        return f"broke the HTTP exchange: {text}"
    if isinstance(exc, lib.ReadError | lib.WriteError):
        return f"the connection failed: {text}"
    return f"{type(exc).__name__}: {text}"
