"""Requests an inbox serves at all: its own address only, and headers that keep the page
to itself.

DNS rebinding: a page on ``evil.example`` whose name is re-pointed at ``127.0.0.1`` reaches
a local server with its browser, as same-origin. Its requests still say
``Host: evil.example``, so :class:`LocalOnly` answers every request whose ``Host`` is not
this inbox's own ``127.0.0.1:PORT`` (or ``localhost:PORT``) with ``421`` and nothing else,
and one whose ``Origin`` (when sent) is not ``http://`` + that address with ``403``; a
browser sends ``Origin`` on every POST (a POST without it whose ``Sec-Fetch-Site`` says
it comes from another site is refused too). The MCP gateway checks the same two headers (the
SDK's transport security, on loopback); the inbox knows its port, so it takes no other.

Every response it lets through gets headers that forbid inline script, framing, sniffing,
caching, and referrers to other sites (so that neither a person's link nor the page's
content leaves it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["SECURITY_HEADERS", "LocalOnly"]

SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        b"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    # Not no-referrer: under it a browser sends "Origin: null" on every POST, and the
    # inbox could no longer tell its own forms from anyone's.
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
)
"""Added to every response (the page's script and style are files of this inbox)."""


class LocalOnly:
    """ASGI middleware: only requests addressed to ``hosts`` (see the module docstring).

    Args:
        app: the inbox's ASGI app.
        hosts: the ``Host`` values accepted (``127.0.0.1:8766``, ``localhost:8766``).
    """

    def __init__(self, app: Any, hosts: Iterable[str]) -> None:
        self.app = app
        self.hosts = frozenset(h.lower() for h in hosts)
        self.origins = frozenset(f"http://{h}" for h in self.hosts)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            if scope["type"] == "websocket":  # the inbox has none
                await send({"type": "websocket.close", "code": 1008})
                return
            await self.app(scope, receive, send)
            return
        headers: dict[bytes, list[bytes]] = {}
        for key, value in scope.get("headers", ()):
            headers.setdefault(key.lower(), []).append(value)
        refusal = self._refusal(headers, safe=scope.get("method") in ("GET", "HEAD"))
        if refusal is not None:
            status, text = refusal
            await _plain(send, status, text)
            return

        async def with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = dict(message)
                message["headers"] = [*message.get("headers", ()), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, with_headers)

    def _refusal(self, headers: dict[bytes, list[bytes]], *, safe: bool) -> tuple[int, str] | None:
        host = headers.get(b"host", [])
        if len(host) != 1 or host[0].decode("latin-1").lower() not in self.hosts:
            return 421, "this inbox answers only requests addressed to it (Host)"
        origin = headers.get(b"origin")
        if origin is not None and (
            len(origin) != 1 or origin[0].decode("latin-1").lower() not in self.origins
        ):
            return 403, "this inbox answers only its own pages (Origin)"
        # A browser that sends no Origin still says where a request comes from; links from
        # elsewhere may open a page (GET), nothing else.
        site = headers.get(b"sec-fetch-site")
        if (
            not safe
            and origin is None
            and site is not None
            and site[-1] not in (b"same-origin", b"none")
        ):
            return 403, "this inbox answers only its own pages (Sec-Fetch-Site)"
        return None


async def _plain(send: Any, status: int, text: str) -> None:
    body = (text + "\n").encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                *SECURITY_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
