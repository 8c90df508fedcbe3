"""Who a gateway request acts for: bearer tokens over HTTP, the configured principal over
stdio.

Over Streamable HTTP every request must carry ``Authorization: Bearer <token>``;
:class:`BearerAuth` answers a request without a valid token ``401`` and nothing else, and
puts the token's principal in the ASGI scope of every request it lets through, where
:func:`principal_of` finds it. The SDK's session manager binds each HTTP session to the
credential that opened it, so another principal presenting that session id is answered 404.
"""

from __future__ import annotations

import hmac
import logging
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.shared.exceptions import MCPError

from clearance._text import printable
from clearance.types import Principal

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

__all__ = [
    "DEFAULT_TOKEN_FILE",
    "FAILURES_PER_SECOND",
    "FAILURE_BURST",
    "FAILURE_REPORT_EVERY",
    "PRINCIPAL_SCOPE_KEY",
    "BearerAuth",
    "PrincipalToken",
    "principal_of",
    "write_token_file",
]

_log = logging.getLogger("clearance.mcp")

DEFAULT_TOKEN_FILE = Path("~/.clearance/gateway.token").expanduser()
"""Where the HTTP gateway writes its generated token when no ``token_file`` is configured."""

PRINCIPAL_SCOPE_KEY = "clearance.principal"
"""The ASGI scope key under which :class:`BearerAuth` leaves the request's principal."""


@dataclass(frozen=True, slots=True)
class PrincipalToken:
    """A bearer token accepted by the HTTP gateway, and the principal it stands for."""

    principal: Principal
    token: str = field(repr=False)


class BearerAuth:
    """ASGI middleware: a request without a valid bearer token gets 401 and nothing else.

    Failures are logged (``clearance.mcp``, warning: the first at once, then one line
    counting them by peer address with the first failure after each
    :data:`FAILURE_REPORT_EVERY` seconds; never a token) and rate limited per peer address: past a burst of :data:`FAILURE_BURST`, at
    most :data:`FAILURES_PER_SECOND` failures a second are answered 401; the others get
    ``429`` with ``Retry-After: 1``, held back a second first, so that one peer cannot
    try tokens as fast as it can send them (the connection cap bounds how many it holds). A valid token is checked first and
    always passes: a flood of wrong tokens never locks a client out.
    """

    def __init__(self, app: Any, tokens: Sequence[PrincipalToken]) -> None:
        self.app = app
        self._tokens = [(t.token.encode(), t.principal) for t in tokens]
        self._failures = _Failures()

    def _principal(self, header: bytes | None) -> Principal | None:
        if header is None or not header[:7].lower() == b"bearer ":
            return None
        presented = header[7:].strip()
        found: Principal | None = None
        # Compare against every token, always, in constant time each.
        for token, principal in self._tokens:
            if hmac.compare_digest(presented, token) and found is None:
                found = principal
        return found

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        header = None
        for key, value in scope.get("headers", ()):
            if key.lower() == b"authorization":
                header = value
                break
        principal = self._principal(header)
        if principal is None:
            wait = self._failures.failed(scope)
            if wait > 0:
                await anyio.sleep(wait)
            if scope["type"] == "http":
                status = 429 if wait > 0 else 401
                headers = [(b"www-authenticate", b"Bearer"), (b"content-length", b"0")]
                if wait > 0:
                    headers.append((b"retry-after", b"1"))
                await send({"type": "http.response.start", "status": status, "headers": headers})
                await send({"type": "http.response.body", "body": b""})
            elif scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
            return
        scope = dict(scope)
        scope[PRINCIPAL_SCOPE_KEY] = principal
        # The SDK's session manager binds each HTTP session to the credential that opened
        # it: another principal presenting that session id is answered 404.
        scope["user"] = AuthenticatedUser(
            AccessToken(token="", client_id=str(principal), scopes=[])
        )
        await self.app(scope, receive, send)


FAILURE_BURST = 20
"""Failed authentications a peer may make at once before the rate applies."""
FAILURES_PER_SECOND = 5.0
"""Failed authentications a second a peer gets answered 401 after its burst."""
FAILURE_REPORT_EVERY = 10.0
"""Seconds between two log lines about failed authentications."""
_PEERS_KEPT = 4096
"""Peers whose failures are remembered at most (the oldest are forgotten first)."""


class _Failures:
    """Failed authentications: a token bucket per peer address, and the log lines."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}
        """Per peer: tokens left, and when they were counted."""
        self._unreported: dict[str, int] = {}
        self._reported = -math.inf

    def failed(self, scope: Any) -> float:
        """Count a failure; how long to hold its answer (0: answer 401 now)."""
        client = scope.get("client")
        peer = str(client[0]) if client else "unknown"
        now = self._clock()
        tokens, then = self._buckets.pop(peer, (float(FAILURE_BURST), now))
        tokens = min(float(FAILURE_BURST), tokens + (now - then) * FAILURES_PER_SECOND)
        limited = tokens < 1.0
        if not limited:
            tokens -= 1.0
        self._buckets[peer] = (tokens, now)  # last: the most recent peers are kept
        if len(self._buckets) > _PEERS_KEPT:
            del self._buckets[next(iter(self._buckets))]
        self._report(peer, scope, now)
        # Held a second: a peer past its rate gets one answer a second per connection.
        return 1.0 if limited else 0.0

    def _report(self, peer: str, scope: Any, now: float) -> None:
        unreported = self._unreported
        unreported[peer] = unreported.get(peer, 0) + 1
        if now - self._reported < FAILURE_REPORT_EVERY:
            return
        if sum(unreported.values()) == 1:
            _log.warning(
                "refused a request without a valid bearer token from %s (%s %s)",
                printable(peer),
                printable(scope.get("method", scope.get("type", "?"))),
                printable(str(scope.get("path", ""))[:200]),
            )
        else:
            top = sorted(unreported.items(), key=lambda item: -item[1])[:5]
            _log.warning(
                "refused %d requests without a valid bearer token (by peer: %s)",
                sum(unreported.values()),
                ", ".join(f"{printable(p)}: {n}" for p, n in top),
            )
        unreported.clear()
        self._reported = now


def principal_of(ctx: ServerRequestContext[Any, Any], default: Principal) -> Principal:
    """The principal a request acts for: the one :class:`BearerAuth` found for an HTTP
    request, ``default`` for a stdio request (which has no ASGI scope).

    Raises:
        MCPError: an HTTP request that did not pass :class:`BearerAuth`.
    """
    request = ctx.request
    scope = getattr(request, "scope", None)
    if isinstance(scope, Mapping):
        principal = scope.get(PRINCIPAL_SCOPE_KEY)
        if not isinstance(principal, Principal):
            # BearerAuth sets it on every request it lets through; nothing else may serve.
            raise MCPError(code=mcp_types.INVALID_REQUEST, message="unauthenticated")
        return principal
    return default


def write_token_file(path: Path, token: str) -> None:
    """Write ``token`` to ``path``, readable by the owner only (0600; folder made 0700).

    Raises:
        OSError: the file cannot be written (or is a symlink, where ``O_NOFOLLOW`` exists).
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        # An existing file keeps its old mode through O_CREAT: set it explicitly.
        os.fchmod(fd, 0o600)
        os.write(fd, (token + "\n").encode())
    finally:
        os.close(fd)
