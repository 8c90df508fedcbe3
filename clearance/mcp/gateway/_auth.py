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
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mcp_types
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.shared.exceptions import MCPError

from clearance.types import Principal

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

__all__ = [
    "DEFAULT_TOKEN_FILE",
    "PRINCIPAL_SCOPE_KEY",
    "BearerAuth",
    "PrincipalToken",
    "principal_of",
    "write_token_file",
]

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
    """ASGI middleware: a request without a valid bearer token gets 401 and nothing else."""

    def __init__(self, app: Any, tokens: Sequence[PrincipalToken]) -> None:
        self.app = app
        self._tokens = [(t.token.encode(), t.principal) for t in tokens]

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
            if scope["type"] == "http":
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [(b"www-authenticate", b"Bearer"), (b"content-length", b"0")],
                    }
                )
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
