"""The gateway's settings and its upstream servers, as values.

:func:`clearance.config.load_gateway_config` fills them from the ``[gateway]`` table and
the ``[[mcp_servers]]`` entries of a ``clearance.toml``; ``clearance gateway`` runs them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from clearance.harness.tools import Tool
from clearance.mcp.gateway._auth import PrincipalToken
from clearance.mcp.gateway._bounds import HttpLimits
from clearance.mcp.sources import connect_server, start_stdio_server
from clearance.types import Principal

if TYPE_CHECKING:
    from clearance.harness.session import Harness

__all__ = ["DEFAULT_CALL_TIMEOUT", "AskFallback", "GatewayConfig", "McpServerConfig"]

DEFAULT_CALL_TIMEOUT = 300.0
"""Seconds an upstream call may take when ``call_timeout`` is not configured."""

AskFallback = Literal["pending", "deny", "allow_once", "allow_session", "allow_always"]
"""What the gateway does with an ask when the client cannot elicit: ``pending`` leaves it
open in the ask store for a person to answer (``clearance asks approve``) and tells the
client to call again once it is; the others answer it at once."""


@dataclass(frozen=True, slots=True)
class McpServerConfig:
    """One ``[[mcp_servers]]`` entry: an upstream server and which of its tools to expose."""

    name: str
    """Namespace of its tools (``git`` → ``git.git_status``)."""
    program: str | None = None
    """Executable of a stdio server (exactly one of ``program`` and ``url``)."""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    """Extra environment of a stdio server (``${VAR}`` is read from the gateway's)."""
    cwd: str | None = None
    url: str | None = None
    """Endpoint of a Streamable HTTP server."""
    headers: Mapping[str, str] | None = None
    """Headers sent to a remote server (``${VAR}`` is read from the gateway's environment)."""
    tools: tuple[str, ...] | None = None
    """Globs of the tools to expose; ``None`` exposes all."""
    read_only: tuple[str, ...] = ()
    """Globs of the tools to treat as read-only."""
    trust_annotations: bool = False
    """Believe the server's ``readOnlyHint`` for tools not named in ``read_only``."""
    restart: Literal["on_next_call", "never"] = "on_next_call"
    call_timeout: float | None = DEFAULT_CALL_TIMEOUT
    """Seconds a call may wait for the server's answer (then cancelled upstream, and an
    error result); ``None``: no bound."""

    async def start(self, harness: Harness) -> list[Tool]:
        """Start or connect the server and register its tools in ``harness``."""
        if self.url is not None:
            return await connect_server(
                harness,
                name=self.name,
                url=self.url,
                headers=self.headers,
                tools=self.tools,
                read_only=self.read_only,
                trust_annotations=self.trust_annotations,
                restart=self.restart,
                call_timeout=self.call_timeout,
            )
        assert self.program is not None
        return await start_stdio_server(
            harness,
            name=self.name,
            program=self.program,
            args=self.args,
            env=self.env,
            cwd=self.cwd,
            tools=self.tools,
            read_only=self.read_only,
            trust_annotations=self.trust_annotations,
            restart=self.restart,
            call_timeout=self.call_timeout,
        )


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    """The ``[gateway]`` table and the ``[[mcp_servers]]`` entries of a config file."""

    path: Path | None = None
    """The file this came from; relative paths in it are resolved against its folder."""
    transport: Literal["stdio", "http"] = "stdio"
    host: str = "127.0.0.1"
    port: int = 8765
    """``0`` picks a free port (printed on stderr)."""
    endpoint: str = "/mcp"
    token_file: Path | None = None
    """Where the generated token is written (mode 0600; default ``~/.clearance/gateway.token``)."""
    principal: Principal = field(default_factory=lambda: Principal("User", "gateway"))
    """Who stdio calls, and calls with the generated token, act for."""
    tokens: tuple[PrincipalToken, ...] = ()
    """Tokens configured per principal; when set, no token is generated."""
    ask_fallback: AskFallback = "pending"
    """What an ask becomes when the client cannot elicit (see :data:`AskFallback`)."""
    elicitation: bool = True
    """Send asks to clients that support elicitation (``false``: always the fallback)."""
    session_idle_timeout: float = 1800.0
    """Seconds after which an idle HTTP session (and its clearance session) ends."""
    max_sessions: int = 10_000
    """The most HTTP sessions open at once."""
    limits: HttpLimits = field(default_factory=HttpLimits)
    """What one HTTP client can take: connections, timeouts, request size, requests at
    once (``[gateway]`` keys of the same names)."""
    servers: tuple[McpServerConfig, ...] = ()
