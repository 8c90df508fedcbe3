"""MCP tool sources and the MCP gateway (the optional ``mcp`` extra).

- :func:`start_stdio_server` / :func:`connect_server` (also reachable as
  ``start_stdio_server(harness, ...)`` / ``connect_server(harness, ...)``) register an MCP server's
  tools in a harness and forward calls to it.
- :class:`Gateway` serves a harness's tools as an MCP server (stdio or Streamable HTTP),
  every call going through the pipeline; ``clearance gateway`` runs it from a
  ``clearance.toml`` (:func:`clearance.config.load_gateway_config` reads its
  :class:`GatewayConfig`).

Only this package imports the ``mcp`` SDK; nothing of it appears in these signatures.
Without the SDK installed, importing this package raises
:class:`~clearance.errors.MissingExtraError`, whose message says how to install it
(``pip install 'clearance[mcp]'``); the rest of clearance works without it.
"""

from clearance.errors import MissingExtraError as _MissingExtraError

try:
    import mcp  # noqa: F401  (the optional extra: checked before anything uses it)
except ImportError as exc:
    raise _MissingExtraError("mcp", "MCP support") from exc

from clearance.mcp.gateway import (
    Gateway,
    GatewayConfig,
    HttpLimits,
    McpServerConfig,
    PrincipalToken,
)
from clearance.mcp.sources import connect_server, start_stdio_server

__all__ = [
    "Gateway",
    "GatewayConfig",
    "HttpLimits",
    "McpServerConfig",
    "PrincipalToken",
    "connect_server",
    "start_stdio_server",
]
