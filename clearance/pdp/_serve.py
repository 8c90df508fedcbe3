"""Serving :class:`~clearance.pdp.AuthZenPdp` with uvicorn, on a socket set for decisions.

The listening socket has ``TCP_NODELAY`` set, which the connections it accepts inherit
(Linux copies it; asyncio's transports set it on each too): an answer is written as
headers then a body, and with Nagle's algorithm on, the body would wait for the client's
delayed ACK, tens of milliseconds per decision. Keep-alive connections are kept 30 s, longer
than :class:`~clearance.policy.AuthZenEvaluator` keeps an idle one (4 s), so a client never
sends into a connection this end is closing.

Plain HTTP is served only on a loopback address unless the caller says otherwise in words
(``plain_http=True``): elsewhere, TLS (a certificate and its key).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from clearance._serving import uvicorn_serving
from clearance.errors import ConfigError, MissingExtraError
from clearance.pdp._app import AuthZenPdp
from clearance.policy.authzen_wire import is_loopback

__all__ = ["PdpStarted", "serve_pdp"]


@dataclass(frozen=True, slots=True)
class PdpStarted:
    """What :func:`serve_pdp` hands its ``ready`` callback once it listens."""

    url: str
    """The PDP's URL (its identifier): what enforcement points are configured with."""
    port: int
    """The port it listens on (the one chosen, with ``port=0``)."""


def _uvicorn() -> Any:
    try:
        import uvicorn
    except ImportError as exc:
        raise MissingExtraError("authzen", "clearance pdp") from exc
    return uvicorn


async def serve_pdp(
    app: AuthZenPdp,
    *,
    host: str = "127.0.0.1",
    port: int = 8767,
    tls_cert: str | Path | None = None,
    tls_key: str | Path | None = None,
    plain_http: bool = False,
    ready: Callable[[PdpStarted], None] | None = None,
    sock: socket.socket | None = None,
) -> None:
    """Serve ``app`` on ``host:port`` until cancelled (``port=0``: any free port).

    Args:
        app: the PDP; its ``base_url`` is set to the address listened on unless given.
        host: the address to listen on.
        port: the port (0: any free one).
        tls_cert: the certificate chain (PEM) to serve HTTPS with; needs ``tls_key``.
        tls_key: its private key (PEM).
        plain_http: allow plain HTTP on an address that is not loopback.
        ready: called once the socket listens.
        sock: a bound TCP socket to listen on instead of ``host:port`` (one a service
            manager handed over); it is given ``TCP_NODELAY`` too, and closed at the end.

    Raises:
        MissingExtraError: uvicorn is not installed (the ``authzen`` extra).
        ConfigError: the port cannot be listened on, TLS is half given or cannot load, or
            plain HTTP is asked on a non-loopback address without ``plain_http``.
    """
    uvicorn = _uvicorn()
    if (tls_cert is None) != (tls_key is None):
        raise ConfigError("TLS needs both a certificate and its key")
    tls = tls_cert is not None
    address = sock.getsockname()[0] if sock is not None else host
    if not tls and not plain_http and not is_loopback(address):
        if sock is not None:
            sock.close()
        raise ConfigError(
            f"serving plain HTTP on {address} would send bearer tokens and decisions in "
            "clear: give a TLS certificate and key, or listen on 127.0.0.1"
        )
    if sock is None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
        except OSError as exc:
            sock.close()
            raise ConfigError(
                f"the PDP cannot listen on {host}:{port}: {exc.strerror or exc}"
            ) from None
    family = sock.family
    host = sock.getsockname()[0]
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.listen(512)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"the PDP cannot listen on {host}: {exc.strerror or exc}") from None
    sock.setblocking(False)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    if app.base_url is None:
        app.base_url = f"{'https' if tls else 'http'}://{shown}:{bound}"
    options: dict[str, Any] = {}
    if tls:
        options = {"ssl_certfile": str(tls_cert), "ssl_keyfile": str(tls_key)}
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan="off",
        access_log=False,
        server_header=False,
        timeout_keep_alive=30,
        timeout_graceful_shutdown=5,
        **options,
    )
    try:
        config.load()
    except (OSError, ValueError) as exc:  # a certificate or key that does not load
        sock.close()
        raise ConfigError(f"cannot load the TLS certificate and key: {exc}") from None
    async with uvicorn_serving(
        config, sock, failed=f"the PDP could not start on {shown}:{bound}", grace=15
    ):
        if ready is not None:
            ready(PdpStarted(app.base_url, bound))
        await anyio.sleep_forever()
