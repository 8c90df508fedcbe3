"""MCP tool sources and the MCP gateway.

- :func:`start_stdio_server` / :func:`connect_server` (also reachable as
  ``Harness.start_mcp_server`` / ``Harness.connect_mcp_server``) register an MCP server's
  tools in a harness and forward calls to it.
- :class:`Gateway` serves a harness's tools as an MCP server (stdio or Streamable HTTP),
  every call going through the pipeline; :func:`load_gateway_config` and
  :func:`run_gateway` run it from a ``clearance.toml``.

Only this package imports the ``mcp`` SDK; nothing of it appears in these signatures.
"""

from clearance.mcp.gateway import (
    Gateway,
    GatewayConfig,
    McpServerConfig,
    PrincipalToken,
    load_gateway_config,
    run_gateway,
)
from clearance.mcp.sources import connect_server, start_stdio_server

__all__ = [
    "Gateway",
    "GatewayConfig",
    "McpServerConfig",
    "PrincipalToken",
    "connect_server",
    "load_gateway_config",
    "run_gateway",
    "start_stdio_server",
]
