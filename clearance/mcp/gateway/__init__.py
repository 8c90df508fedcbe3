"""The MCP gateway: an MCP server whose tools are other MCP servers' tools, behind clearance.

Every ``tools/call`` it receives runs through the full pipeline of a :class:`Session` (one
per MCP client session and principal); an allowed call is forwarded to the upstream server
and its answer (after result guardrails) goes back to the client. Tools are listed under
their model aliases (``git__git_status``): MCP tool names with a dot are not accepted by
every client, and the alias is what a model sees anyway. Calls may use either name.

Asks: when the client can answer elicitations, the ask is sent as one (a form with one
choice: allow once, for the session, always, or deny) — as an ``elicitation/create``
request on a handshake-era (2025) connection, or as an ``input_required`` result that the
client answers by retrying the call on a 2026-07-28 connection. For a client that cannot
elicit, the ask stays pending by default (``ask_fallback = "pending"``): the call's result
says that a person must answer it, never how (the gateway's log tells the person:
``clearance asks approve ID``, ``clearance inbox``), and the same call tried again then runs; another ``ask_fallback`` answers such asks at once.

Over stdio the gateway serves the one client that started it, acting for the configured
principal. Over Streamable HTTP it listens on 127.0.0.1 by default and every request must
carry ``Authorization: Bearer <token>``: a random token generated at start and written to
a file only the owner can read, or tokens configured per principal. A request without a
valid token gets ``401`` and nothing else.

Running it from a ``clearance.toml`` is the command line's job (``clearance gateway``,
:mod:`clearance.cli.gateway_cmd`); :func:`clearance.config.load_gateway_config` reads
the ``[gateway]`` table and ``[[mcp_servers]]`` entries into a :class:`GatewayConfig`.

Where things live: ``_server`` (the MCP server and its handlers), ``_sessions`` (the
clearance session behind each MCP session, and when it ends), ``_asks`` (asks as
elicitations), ``_pending`` (asks a client cannot answer, left pending), ``_auth`` (bearer tokens and principals), ``_convert`` (MCP types from and
to clearance's), ``_config`` (the settings as values), ``_stdio`` (stdio without threads), ``_edge`` (what
a request may carry), ``_bounds`` (what one HTTP client can take).
"""

from clearance.mcp.gateway._auth import (
    DEFAULT_TOKEN_FILE,
    BearerAuth,
    PrincipalToken,
    write_token_file,
)
from clearance.mcp.gateway._bounds import HttpLimits
from clearance.mcp.gateway._config import (
    DEFAULT_CALL_TIMEOUT,
    AskFallback,
    GatewayConfig,
    McpServerConfig,
)
from clearance.mcp.gateway._server import Gateway

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_TOKEN_FILE",
    "AskFallback",
    "BearerAuth",
    "Gateway",
    "GatewayConfig",
    "HttpLimits",
    "McpServerConfig",
    "PrincipalToken",
    "write_token_file",
]
