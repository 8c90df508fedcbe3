"""The MCP gateway: an MCP server whose tools are other MCP servers' tools, behind clearance.

Every ``tools/call`` it receives runs through the full pipeline of a :class:`Session` (one
per MCP client session and principal); an allowed call is forwarded to the upstream server
and its answer (after result guardrails) goes back to the client. Tools are listed under
their model aliases (``git__git_status``): MCP tool names with a dot are not accepted by
every client, and the alias is what a model sees anyway. Calls may use either name.

Asks: when the client can answer elicitations, the ask is sent as one (a form with one
choice: allow once, for the session, always, or deny) — as an ``elicitation/create``
request on a handshake-era (2025) connection, or as an ``input_required`` result that the
client answers by retrying the call on a 2026-07-28 connection. A client that cannot
elicit gets the configured fallback answer (``deny`` by default).

Over stdio the gateway serves the one client that started it, acting for the configured
principal. Over Streamable HTTP it listens on 127.0.0.1 by default and every request must
carry ``Authorization: Bearer <token>``: a random token generated at start and written to
a file only the owner can read, or tokens configured per principal. A request without a
valid token gets ``401`` and nothing else.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import hmac
import logging
import math
import os
import re
import secrets
import socket
import stat
import sys
import tomllib
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

import anyio
import anyio.lowlevel
import mcp_types
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import TypeAdapter, ValidationError

from clearance._text import printable
from clearance.errors import ConfigError
from clearance.harness.approvals import ANSWERS, PermissionAsk, PermissionDecision, arguments_hash
from clearance.harness.ask_display import ask_lines, deciding_fields
from clearance.harness.pipeline import CallOutcome
from clearance.harness.session import AgentDefinition, Harness, Session
from clearance.harness.tools import Tool, ToolRegistry
from clearance.mcp.sources import progress_relay, reset_progress_relay
from clearance.policy.base import Principal

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext
    from mcp.server.session import ServerSession

__all__ = [
    "DEFAULT_TOKEN_FILE",
    "AskFallback",
    "BearerAuth",
    "Gateway",
    "GatewayConfig",
    "McpServerConfig",
    "PrincipalToken",
    "load_gateway_config",
    "open_gateway",
    "run_gateway",
]

log = logging.getLogger("clearance.mcp")

AskFallback = Literal["allow_once", "allow_session", "allow_always", "deny"]
"""The answer the gateway gives to an ask when the client cannot elicit."""

DEFAULT_TOKEN_FILE = Path("~/.clearance/gateway.token").expanduser()
"""Where the HTTP gateway writes its generated token when no ``token_file`` is configured."""

_PRINCIPAL_SCOPE_KEY = "clearance.principal"
_ASK_KEY = "clearance_permission"
_CHOICES: tuple[tuple[str, str], ...] = (
    ("allow_once", "Allow once"),
    ("allow_session", "Allow for this session"),
    ("allow_always", "Always allow"),
    ("deny", "Deny"),
)
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_CONTENT = TypeAdapter(list[mcp_types.ContentBlock])
_ELICIT_RESULT = TypeAdapter(mcp_types.ElicitResult)


# --- configuration -------------------------------------------------------------------------


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
    call_timeout: float | None = None

    async def start(self, harness: Harness) -> list[Tool]:
        """Start or connect the server and register its tools in ``harness``."""
        if self.url is not None:
            return await harness.connect_mcp_server(
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
        return await harness.start_mcp_server(
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
class PrincipalToken:
    """A bearer token accepted by the HTTP gateway, and the principal it stands for."""

    principal: Principal
    token: str = field(repr=False)


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
    ask_fallback: AskFallback = "deny"
    """The answer to an ask when the client cannot elicit."""
    elicitation: bool = True
    """Send asks to clients that support elicitation (``false``: always the fallback)."""
    session_idle_timeout: float = 1800.0
    """Seconds after which an idle HTTP session (and its clearance session) ends."""
    max_sessions: int = 10_000
    """The most HTTP sessions open at once."""
    servers: tuple[McpServerConfig, ...] = ()


def load_gateway_config(path: str | os.PathLike[str]) -> GatewayConfig:
    """Read the ``[gateway]`` table and ``[[mcp_servers]]`` entries of a TOML file.

    Other tables (evaluator, policies, guardrails, journal, limits) belong to the main
    configuration and are ignored here.

    Raises:
        ConfigError: the file cannot be read, is not TOML, or an entry is wrong.
    """
    p = Path(path)
    where = str(p)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read the config file: {exc.strerror}", path=where) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML: {exc}", path=where) from None
    base = p.resolve().parent
    raw = data.get("gateway", {})
    if not isinstance(raw, dict):
        raise ConfigError("[gateway] must be a table", path=where)
    known = {
        "transport",
        "host",
        "port",
        "endpoint",
        "token_file",
        "principal",
        "tokens",
        "ask_fallback",
        "elicitation",
        "session_idle_timeout",
        "max_sessions",
    }
    _no_unknown(raw, known, "[gateway]", where)
    idle = raw.get("session_idle_timeout", 1800.0)
    if (
        not isinstance(idle, int | float)
        or isinstance(idle, bool)
        or not math.isfinite(idle)
        or idle <= 0
    ):
        raise ConfigError(
            "[gateway] session_idle_timeout must be a positive number of seconds", path=where
        )
    max_sessions = raw.get("max_sessions", 10_000)
    if not isinstance(max_sessions, int) or isinstance(max_sessions, bool) or max_sessions < 1:
        raise ConfigError("[gateway] max_sessions must be a positive integer", path=where)
    transport = raw.get("transport", "stdio")
    if transport not in ("stdio", "http"):
        raise ConfigError(
            f"[gateway] transport must be 'stdio' or 'http', not {transport!r}", path=where
        )
    port = raw.get("port", 8765)
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
        raise ConfigError("[gateway] port must be an integer from 0 to 65535", path=where)
    fallback = raw.get("ask_fallback", "deny")
    if fallback not in ANSWERS:
        raise ConfigError(
            f"[gateway] ask_fallback must be one of {', '.join(ANSWERS)}, not {fallback!r}",
            path=where,
        )
    endpoint = _string(raw.get("endpoint", "/mcp"), "[gateway] endpoint", where)
    if not endpoint.startswith("/"):
        raise ConfigError("[gateway] endpoint must start with '/'", path=where)
    tokens: list[PrincipalToken] = []
    raw_tokens = raw.get("tokens", [])
    if not isinstance(raw_tokens, list):
        raise ConfigError("[[gateway.tokens]] must be an array of tables", path=where)
    for n, entry in enumerate(raw_tokens):
        tokens.append(_token(entry, n, base, where))
    elicitation = raw.get("elicitation", True)
    if not isinstance(elicitation, bool):
        raise ConfigError("[gateway] elicitation must be true or false", path=where)
    servers_raw = data.get("mcp_servers", [])
    if not isinstance(servers_raw, list):
        raise ConfigError("[[mcp_servers]] must be an array of tables", path=where)
    servers = [_server(entry, n, base, where) for n, entry in enumerate(servers_raw)]
    names = [s.name for s in servers]
    for name in names:
        if names.count(name) > 1:
            raise ConfigError(f"two [[mcp_servers]] are named {name!r}", path=where)
    return GatewayConfig(
        path=p,
        transport=transport,
        host=_string(raw.get("host", "127.0.0.1"), "[gateway] host", where),
        port=port,
        endpoint=endpoint,
        token_file=_path(raw["token_file"], base, "[gateway] token_file", where)
        if "token_file" in raw
        else None,
        principal=_principal(raw.get("principal", 'User::"gateway"'), "[gateway] principal", where),
        tokens=tuple(tokens),
        ask_fallback=cast(AskFallback, fallback),
        elicitation=elicitation,
        session_idle_timeout=float(idle),
        max_sessions=max_sessions,
        servers=tuple(servers),
    )


def _server(entry: Any, n: int, base: Path, where: str) -> McpServerConfig:
    label = f"[[mcp_servers]] #{n + 1}"
    if not isinstance(entry, dict):
        raise ConfigError(f"{label} must be a table", path=where)
    _no_unknown(
        entry,
        {
            "name",
            "program",
            "args",
            "env",
            "cwd",
            "url",
            "transport",
            "headers",
            "tools",
            "read_only",
            "trust_annotations",
            "restart",
            "call_timeout",
        },
        label,
        where,
    )
    name = _string(entry.get("name"), f"{label} name", where)
    label = f"[[mcp_servers]] {name!r}"
    program, url = entry.get("program"), entry.get("url")
    if (program is None) == (url is None):
        raise ConfigError(f"{label} needs exactly one of 'program' (stdio) or 'url'", path=where)
    transport = entry.get("transport", "stdio" if program is not None else "streamable-http")
    if program is not None and transport != "stdio":
        raise ConfigError(f"{label}: a 'program' server uses transport 'stdio'", path=where)
    if url is not None and transport not in ("streamable-http", "http"):
        raise ConfigError(f"{label}: a 'url' server uses transport 'streamable-http'", path=where)
    restart = entry.get("restart", "on_next_call")
    if restart not in ("on_next_call", "never"):
        raise ConfigError(f"{label} restart must be 'on_next_call' or 'never'", path=where)
    timeout = entry.get("call_timeout")
    if timeout is not None and (
        not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0
    ):
        raise ConfigError(f"{label} call_timeout must be a positive number of seconds", path=where)
    trust = entry.get("trust_annotations", False)
    if not isinstance(trust, bool):
        raise ConfigError(f"{label} trust_annotations must be true or false", path=where)
    cwd = entry.get("cwd")
    return McpServerConfig(
        name=name,
        program=_string(program, f"{label} program", where) if program is not None else None,
        args=tuple(_strings(entry.get("args", []), f"{label} args", where)),
        env=_expand_table(entry.get("env"), f"{label} env", where),
        cwd=str(_path(cwd, base, f"{label} cwd", where)) if cwd is not None else None,
        url=_string(url, f"{label} url", where) if url is not None else None,
        headers=_expand_table(entry.get("headers"), f"{label} headers", where),
        tools=tuple(_strings(entry["tools"], f"{label} tools", where))
        if "tools" in entry
        else None,
        read_only=tuple(_strings(entry.get("read_only", []), f"{label} read_only", where)),
        trust_annotations=trust,
        restart=restart,
        call_timeout=float(timeout) if timeout is not None else None,
    )


def _token(entry: Any, n: int, base: Path, where: str) -> PrincipalToken:
    label = f"[[gateway.tokens]] #{n + 1}"
    if not isinstance(entry, dict):
        raise ConfigError(f"{label} must be a table", path=where)
    _no_unknown(entry, {"principal", "token_file", "token_env"}, label, where)
    principal = _principal(entry.get("principal"), f"{label} principal", where)
    if ("token_file" in entry) == ("token_env" in entry):
        # Tokens are never written in the config itself: it is the file people share.
        raise ConfigError(f"{label} needs exactly one of 'token_file' or 'token_env'", path=where)
    if "token_file" in entry:
        token_path = _path(entry["token_file"], base, f"{label} token_file", where)
        try:
            token = token_path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(
                f"{label}: cannot read {token_path}: {exc.strerror}", path=where
            ) from None
    else:
        var = _string(entry["token_env"], f"{label} token_env", where)
        token = os.environ.get(var, "").strip()
        if not token:
            raise ConfigError(f"{label}: the environment variable {var} is not set", path=where)
    if len(token) < 16:
        raise ConfigError(f"{label}: the token is shorter than 16 characters", path=where)
    return PrincipalToken(principal, token)


def _no_unknown(table: Mapping[str, Any], known: set[str], label: str, where: str) -> None:
    unknown = sorted(set(table) - known)
    if unknown:
        raise ConfigError(f"{label}: unknown key(s) {', '.join(unknown)}", path=where)


def _string(value: Any, label: str, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{label} must be a non-empty string", path=where)
    return value


def _strings(value: Any, label: str, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{label} must be a list of strings", path=where)
    return list(value)


def _path(value: Any, base: Path, label: str, where: str) -> Path:
    text = _string(value, label, where)
    p = Path(os.path.expanduser(text))
    return p if p.is_absolute() else base / p


def _principal(value: Any, label: str, where: str) -> Principal:
    text = _string(value, label, where)
    try:
        return Principal.parse(text)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{label}: {exc}", path=where) from None


def _expand_table(value: Any, label: str, where: str) -> dict[str, str] | None:
    """A string table whose ``${VAR}`` references are read from the environment."""
    if value is None:
        return None
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ConfigError(f"{label} must be a table of strings", path=where)

    def expand(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise ConfigError(f"{label}: the environment variable {name} is not set", path=where)
        return os.environ[name]

    return {k: _ENV_REF.sub(expand, v) for k, v in value.items()}


# --- the gateway ---------------------------------------------------------------------------

_EXCHANGE: contextvars.ContextVar[_Exchange | None] = contextvars.ContextVar(
    "clearance_gateway_exchange", default=None
)


class Gateway:
    """An MCP server in front of a harness: lists its tools, runs calls through the pipeline.

    Args:
        harness: a started harness whose registry holds the tools to serve (typically
            registered with :meth:`Harness.start_mcp_server`).
        principal: who stdio clients act for.
        ask_fallback: the answer when the client cannot elicit (``deny`` by default).
        elicitation: send asks to clients that support elicitation.
        name: the server name reported to clients.
        telemetry: keep the SDK's OpenTelemetry middleware (a span per request).
            ``None`` (default): only when an OpenTelemetry tracer provider is installed
            when the gateway starts; without one the spans go nowhere, yet the middleware
            costs about a quarter of the gateway's own time per call.
        session_idle_timeout: seconds after which an HTTP session that has had no request
            and no call in flight ends (its MCP session and its clearance session), for
            clients that go away without ending their session.
        max_sessions: the most HTTP sessions open at once; a client that would open one
            more is answered 503 until one ends.

    A clearance session lives as long as the MCP session it serves: it ends when the
    client ends its HTTP session (``DELETE``), when that session has been idle for
    ``session_idle_timeout``, or when the stdio client closes its stdin.
    """

    def __init__(
        self,
        harness: Harness,
        *,
        principal: Principal,
        ask_fallback: AskFallback = "deny",
        elicitation: bool = True,
        name: str = "clearance-gateway",
        telemetry: bool | None = None,
        session_idle_timeout: float = 1800.0,
        max_sessions: int = 10_000,
    ) -> None:
        if ask_fallback not in ANSWERS:
            raise ValueError(f"ask_fallback must be one of {', '.join(ANSWERS)}")
        if not (
            isinstance(session_idle_timeout, int | float)
            and math.isfinite(session_idle_timeout)
            and session_idle_timeout > 0
        ):
            raise ValueError("session_idle_timeout must be a positive number of seconds")
        if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
            raise ValueError("max_sessions must be a positive integer")
        from clearance import __version__

        self.harness = harness
        self.principal = principal
        self.ask_fallback: AskFallback = ask_fallback
        self.elicitation = elicitation
        self._server: Server[Any] = Server(
            name,
            version=__version__,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )
        if not (_tracing_installed() if telemetry is None else telemetry):
            self._server.middleware = [
                m for m in self._server.middleware if type(m).__name__ != "OpenTelemetryMiddleware"
            ]
        self.session_idle_timeout = float(session_idle_timeout)
        self.max_sessions = max_sessions
        self._sessions: dict[tuple[Principal, str | None], Session] = {}
        self._sessionless: set[str] = set()
        """Clearance sessions serving requests that carry no MCP session id."""
        self._activity: dict[tuple[Principal, str | None], _Activity] = {}
        """Requests in flight and the last one's end, per session key (for idle ends)."""
        self._reaping = False
        self._session_lock = anyio.Lock()
        self._rounds: dict[str, _Rounds] = {}
        self._listing: list[mcp_types.Tool] | None = None

    # -- serving --------------------------------------------------------------------------

    async def serve_stdio(self) -> None:
        """Serve one client over this process's stdin and stdout until stdin closes.

        While serving, stdin reads as empty and stdout goes to stderr for everything else
        in the process, so stray output cannot corrupt the protocol.
        """
        async with _process_pipes() as pipes:
            # Pipes are read and written without threads (the SDK's stdio transport
            # hands every line to a worker thread: three thread hops per call).
            streams = (
                stdio_server(stdin=cast(Any, pipes[0]), stdout=cast(Any, pipes[1]))
                if pipes is not None
                else stdio_server()
            )
            try:
                async with streams as (read_stream, write_stream):
                    await self._server.run(
                        read_stream, write_stream, self._server.create_initialization_options()
                    )
            finally:
                # The client is gone: so is its session (and its allow_session grants).
                with anyio.CancelScope(shield=True):
                    await self._end_sessions(lambda key: key[1] == _STDIO)

    def http_app(
        self, tokens: Sequence[PrincipalToken], *, host: str = "127.0.0.1", endpoint: str = "/mcp"
    ) -> Any:
        """The ASGI app for Streamable HTTP at ``endpoint``, behind bearer-token auth.

        Raises:
            ValueError: ``tokens`` is empty.
        """
        if not tokens:
            raise ValueError("the HTTP gateway needs at least one token")
        app = self._server.streamable_http_app(
            streamable_http_path=endpoint,
            host=host,
            session_idle_timeout=self.session_idle_timeout,
            max_sessions=self.max_sessions,
        )
        return BearerAuth(_SessionEnds(app, self._mcp_session_ended), tokens)

    async def serve_http(
        self,
        tokens: Sequence[PrincipalToken],
        *,
        host: str = "127.0.0.1",
        port: int = 8765,
        endpoint: str = "/mcp",
        ready: Callable[[str], None] | None = None,
    ) -> None:
        """Serve Streamable HTTP on ``host:port`` until cancelled (``port=0``: any free port).

        ``ready(url)`` is called once the socket listens.
        """
        import uvicorn

        app = self.http_app(tokens, host=host, endpoint=endpoint)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
        sock.setblocking(False)
        bound = sock.getsockname()[1]
        server = _quiet_uvicorn(
            uvicorn.Config(
                app,
                log_level="warning",
                lifespan="on",
                access_log=False,
                timeout_graceful_shutdown=5,
            )
        )
        done = anyio.Event()

        async def serve() -> None:
            # Shielded so that cancelling the gateway shuts uvicorn down gracefully
            # (should_exit below) instead of abandoning its lifespan and connections.
            with anyio.CancelScope(shield=True):
                try:
                    await server.serve([sock])
                finally:
                    done.set()

        shown = f"[{host}]" if family == socket.AF_INET6 else host
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(serve)
                # uvicorn offers no startup event, only this flag.
                while not server.started and not done.is_set():  # noqa: ASYNC110
                    await anyio.sleep(0.01)
                if done.is_set():
                    raise ConfigError(f"the HTTP gateway could not start on {shown}:{bound}")
                if ready is not None:
                    ready(f"http://{shown}:{bound}{endpoint}")
                try:
                    await anyio.sleep_forever()
                finally:
                    server.should_exit = True
                    with anyio.CancelScope(shield=True), anyio.move_on_after(15):
                        await done.wait()
        finally:
            sock.close()

    # -- handlers -------------------------------------------------------------------------

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListToolsResult:
        async with self._serving(ctx) as session:
            if self._listing is None:
                self._listing = [_mcp_tool(t) for t in sorted(session.selected_tools, key=_alias)]
            return mcp_types.ListToolsResult(tools=list(self._listing))

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult:
        async with self._serving(ctx) as session:
            return await self._call_in(session, ctx, params)

    async def _call_in(
        self,
        session: Session,
        ctx: ServerRequestContext[Any, Any],
        params: mcp_types.CallToolRequestParams,
    ) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult:
        if params.request_state is not None or params.input_responses:
            return await self._resume(ctx, session, params)
        tool = session.tools.get(params.name)
        if tool is None:
            # Spec: an unknown tool is a protocol error, not a tool result.
            raise MCPError(code=mcp_types.INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        arguments: Any = params.arguments if params.arguments is not None else {}
        call_id = f"mcp-{ctx.request_id}-{secrets.token_hex(4)}"
        context = {"mcp_request_id": ctx.request_id, "mcp_session_id": _session_key(ctx)}
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and self._can_elicit(ctx.session):
            # 2026-07-28 forbids server-to-client requests: an ask becomes an
            # input_required result, answered by the client's retry. The call runs in a
            # background task that outlives this request.
            rounds = _Rounds(
                gateway=self,
                principal=_principal_of(ctx, self.principal),
                session_key=_session_key(ctx),
                tool_name=params.name,
                arguments_hash=_hash(arguments),
                token=secrets.token_urlsafe(24),
            )
            self.harness.task_group.start_soon(
                rounds.run, session, tool.model_alias, arguments, call_id, context
            )
            return await rounds.wait(ctx)
        exchange = _Direct(self, ctx)
        token = _EXCHANGE.set(exchange)
        relay = progress_relay(_relay_to(ctx.session))
        try:
            outcome = await session.call_tool(
                tool.model_alias, arguments, call_id=call_id, context=context
            )
        finally:
            reset_progress_relay(relay)
            _EXCHANGE.reset(token)
        return _to_mcp(outcome)

    async def _resume(
        self,
        ctx: ServerRequestContext[Any, Any],
        session: Session,
        params: mcp_types.CallToolRequestParams,
    ) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult:
        state = params.request_state
        rounds = self._rounds.get(state) if isinstance(state, str) else None
        if (
            rounds is None
            or rounds.principal != _principal_of(ctx, self.principal)
            or rounds.session_key != _session_key(ctx)
            or rounds.tool_name != params.name
            or rounds.arguments_hash != _hash(params.arguments or {})
        ):
            raise MCPError(code=mcp_types.INVALID_PARAMS, message="Invalid or expired requestState")
        del self._rounds[rounds.token]
        response = (params.input_responses or {}).get(_ASK_KEY)
        rounds.deliver(_decision(response))
        return await rounds.wait(ctx)

    # -- sessions and asks ----------------------------------------------------------------

    @asynccontextmanager
    async def _serving(self, ctx: ServerRequestContext[Any, Any]) -> AsyncIterator[Session]:
        """The clearance session of this request's MCP session, marked busy (not idle)
        while the request is served."""
        principal = _principal_of(ctx, self.principal)
        key = (principal, _session_key(ctx))
        activity = self._activity.get(key)
        if activity is None:
            activity = self._activity[key] = _Activity()
        activity.requests += 1  # before any await: an idle sweep now leaves it alone
        try:
            yield await self._session(key)
        finally:
            activity.requests -= 1
            activity.last = anyio.current_time()

    async def _session(self, key: tuple[Principal, str | None]) -> Session:
        session = self._sessions.get(key)
        if session is not None and not session.closed:
            return session
        async with self._session_lock:
            session = self._sessions.get(key)
            if session is None or session.closed:
                session = await self.harness.create_session(
                    principal=key[0],
                    agent=AgentDefinition("mcp-gateway"),
                    on_permission_ask=self._on_ask,
                )
                self._sessions[key] = session
                if key[1] is None:
                    self._sessionless.add(session.id)
                elif key[1] != _STDIO and not self._reaping:
                    self._reaping = True
                    self.harness.task_group.start_soon(self._end_idle_sessions)
        return session

    async def _mcp_session_ended(self, principal: Principal, session_id: str) -> None:
        """The client ended its HTTP session (a ``DELETE`` the SDK accepted)."""
        await self._end_sessions(lambda key: key == (principal, session_id))

    async def _end_idle_sessions(self) -> None:
        """End the clearance sessions of MCP sessions idle for ``session_idle_timeout``
        (the SDK ends the MCP session itself after the same time)."""
        while True:
            await anyio.sleep(min(self.session_idle_timeout / 4, 60.0))
            await self._end_sessions(functools.partial(self._idle, now=anyio.current_time()))

    def _idle(self, key: tuple[Principal, str | None], *, now: float) -> bool:
        if key[1] is None or key[1] == _STDIO:
            return False  # one per principal (or the one stdio client): bounded
        activity = self._activity.get(key)
        if activity is None:
            return True
        if activity.requests:
            return False
        # A call may outlive its request (an ask answered by a later request).
        busy = self._sessions[key].in_flight
        return not busy and now - activity.last >= self.session_idle_timeout

    async def _end_sessions(self, which: Callable[[tuple[Principal, str | None]], bool]) -> None:
        ended = []
        for key in [k for k in self._sessions if which(k)]:
            # Forgotten before any await: a request from now on gets a new session.
            ended.append(self._sessions.pop(key))
            self._activity.pop(key, None)
        for session in ended:
            self._sessionless.discard(session.id)
            try:
                await session.aclose()
            except Exception as exc:  # the journal failed; the session is closed anyway
                log.warning("closing gateway session %s failed: %r", session.id, exc)

    async def _on_ask(self, ask: PermissionAsk) -> PermissionDecision:
        exchange = _EXCHANGE.get()
        if exchange is None:  # a call that did not come through this gateway
            decision = PermissionDecision(
                self.ask_fallback, message="answered by the gateway fallback"
            )
        else:
            decision = await exchange.answer(ask)
        if decision.decision == "allow_session" and ask.session_id in self._sessionless:
            # Requests without an MCP session share one clearance session for the
            # gateway's lifetime; a "session" grant there would act like "always".
            decision = dataclasses.replace(
                decision,
                decision="allow_once",
                message="allow_session has no session to live in here; allowed once",
            )
        return decision

    def _can_elicit(self, session: ServerSession) -> bool:
        if not self.elicitation:
            return False
        caps = session.client_capabilities
        if caps is None or caps.elicitation is None:
            return False
        # An empty elicitation capability means form mode (the only mode before URL mode).
        return caps.elicitation.form is not None or caps.elicitation.url is None

    def _fallback(self, ask: PermissionAsk) -> PermissionDecision:
        return PermissionDecision(
            self.ask_fallback,
            message=None
            if self.ask_fallback != "deny"
            else f"{ask.model_alias} needs approval and this MCP client cannot be asked; denied",
        )


class _Exchange:
    async def answer(self, ask: PermissionAsk) -> PermissionDecision:
        raise NotImplementedError


class _Direct(_Exchange):
    """A call on a handshake-era connection: asks go out as ``elicitation/create``."""

    def __init__(self, gateway: Gateway, ctx: ServerRequestContext[Any, Any]) -> None:
        self.gateway = gateway
        self.ctx = ctx

    async def answer(self, ask: PermissionAsk) -> PermissionDecision:
        session = self.ctx.session
        if not (self.gateway._can_elicit(session) and session.can_send_request):
            return self.gateway._fallback(ask)
        # An elicitation that fails raises: the pipeline then denies (rule R1).
        result = await session.elicit_form(
            _ask_message(ask), _ASK_SCHEMA, related_request_id=self.ctx.request_id
        )
        return _decision(result)


@dataclass(eq=False)
class _Rounds(_Exchange):
    """A call on a 2026-07-28 connection: asks go out as ``input_required`` results."""

    gateway: Gateway
    principal: Principal
    session_key: str | None
    tool_name: str
    arguments_hash: str
    token: str
    outcome: CallOutcome | None = None
    failed: bool = False
    ask: PermissionAsk | None = None
    answer_value: PermissionDecision | None = None
    answered: anyio.Event = field(default_factory=anyio.Event)
    wake: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    client: ServerSession | None = None

    async def run(
        self,
        session: Session,
        alias: str,
        arguments: Any,
        call_id: str,
        context: Mapping[str, Any],
    ) -> None:
        token = _EXCHANGE.set(self)
        relay = progress_relay(self._relay)
        try:
            with self.scope:
                self.outcome = await session.call_tool(
                    alias, arguments, call_id=call_id, context=context
                )
        except Exception as exc:
            log.warning("gateway call %s failed: %r", call_id, exc)
            self.failed = True
        finally:
            reset_progress_relay(relay)
            _EXCHANGE.reset(token)
            self.gateway._rounds.pop(self.token, None)
            self.done.set()
            self.wake.set()

    async def _relay(self, progress: float, total: float | None, message: str | None) -> None:
        if self.client is not None:
            await self.client.report_progress(progress, total, message)

    async def answer(self, ask: PermissionAsk) -> PermissionDecision:
        self.ask = ask
        self.answered = anyio.Event()
        self.wake.set()
        # The harness's ask_timeout bounds this wait; an unanswered ask is then denied.
        await self.answered.wait()
        value = self.answer_value
        assert value is not None
        return value

    def deliver(self, decision: PermissionDecision) -> None:
        self.answer_value = decision
        self.ask = None
        self.answered.set()

    async def wait(
        self, ctx: ServerRequestContext[Any, Any]
    ) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult:
        """Wait for the call to end or to ask; the answer for this request."""
        self.client = ctx.session
        try:
            while True:
                wake = self.wake
                if self.done.is_set():
                    if self.outcome is None:
                        raise MCPError(code=mcp_types.INTERNAL_ERROR, message="the call failed")
                    return _to_mcp(self.outcome)
                if self.ask is not None and not self.answered.is_set():
                    self.gateway._rounds[self.token] = self
                    return mcp_types.InputRequiredResult(
                        input_requests={
                            _ASK_KEY: mcp_types.ElicitRequest(
                                params=mcp_types.ElicitRequestFormParams(
                                    message=_ask_message(self.ask),
                                    requested_schema=_ASK_SCHEMA,
                                )
                            )
                        },
                        request_state=self.token,
                    )
                await wake.wait()
                self.wake = anyio.Event()
        except anyio.get_cancelled_exc_class():
            # The client cancelled this request (or went away): cancel the call too.
            self.scope.cancel()
            raise
        finally:
            self.client = None


_ASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {
            "type": "string",
            "title": "Decision",
            "description": "Allow this tool call?",
            "oneOf": [{"const": value, "title": title} for value, title in _CHOICES],
            "default": "deny",
        }
    },
    "required": ["decision"],
}


_ASK_WIDTH = 2000
"""The longest line an argument that does not decide what the call does gets in an ask."""


def _ask_message(ask: PermissionAsk) -> str:
    """The elicitation's text: the tool, why it asks, then the arguments as
    :func:`~clearance.harness.ask_display.ask_lines` lays them out for every approval
    surface: the fields that decide what the call does first and whole (however long the
    rest), then the others, long values elided in the middle with both ends kept."""
    lines = ask_lines(ask.arguments, deciding_fields(ask), width=_ASK_WIDTH)
    return "\n".join(
        [
            f"Allow {printable(ask.model_alias)}?",
            f"Why approval is needed: {printable(ask.reason)}",
            *(lines or ["(no arguments)"]),
        ]
    )


def _decision(response: Any) -> PermissionDecision:
    """An elicitation answer as a decision; anything but an explicit allow denies."""
    if response is None:
        return PermissionDecision("deny", message="the client sent no answer; denied")
    try:
        result = (
            response
            if isinstance(response, mcp_types.ElicitResult)
            else _ELICIT_RESULT.validate_python(
                response.model_dump(by_alias=True) if hasattr(response, "model_dump") else response
            )
        )
    except ValidationError:
        return PermissionDecision("deny", message="the client's answer was not understood; denied")
    if result.action != "accept" or not result.content:
        return PermissionDecision("deny", message=f"the user chose {result.action}; denied")
    choice = result.content.get("decision")
    if choice not in ANSWERS:
        return PermissionDecision("deny", message="the client's answer was not understood; denied")
    return PermissionDecision(
        cast(AskFallback, choice),
        message="denied by the user" if choice == "deny" else None,
        decided_by="mcp-elicitation",
    )


def _relay_to(session: ServerSession) -> Callable[[float, float | None, str | None], Any]:
    async def relay(progress: float, total: float | None, message: str | None) -> None:
        await session.report_progress(progress, total, message)

    return relay


def _principal_of(ctx: ServerRequestContext[Any, Any], default: Principal) -> Principal:
    request = ctx.request
    scope = getattr(request, "scope", None)
    if isinstance(scope, Mapping):
        principal = scope.get(_PRINCIPAL_SCOPE_KEY)
        if not isinstance(principal, Principal):
            # BearerAuth sets it on every request it lets through; nothing else may serve.
            raise MCPError(code=mcp_types.INVALID_REQUEST, message="unauthenticated")
        return principal
    return default


def _tracing_installed() -> bool:
    """Whether an OpenTelemetry tracer provider is installed (spans would go somewhere)."""
    try:
        from opentelemetry import trace
    except ImportError:
        return False
    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


_STDIO = "stdio"
"""The session key of the one stdio client."""


def _session_key(ctx: ServerRequestContext[Any, Any]) -> str | None:
    request = ctx.request
    headers = getattr(request, "headers", None)
    if headers is None:
        return _STDIO
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        # A 2026-07-28 request has no session: the SDK checks no Mcp-Session-Id on it, so
        # the header is whatever the client sent, and a new value per request would open
        # a new clearance session per request.
        return None
    value = headers.get("mcp-session-id")
    return value if isinstance(value, str) else None


@dataclass(slots=True)
class _Activity:
    """Requests being served for one session key, and when the last one ended."""

    requests: int = 0
    last: float = 0.0


class _SessionEnds:
    """ASGI middleware: once the SDK accepted a client's ``DELETE`` of its HTTP session,
    the gateway ends the clearance session that served it."""

    def __init__(self, app: Any, ended: Callable[[Principal, str], Any]) -> None:
        self.app = app
        self._ended = ended

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "DELETE":
            await self.app(scope, receive, send)
            return
        session_id = None
        for key, value in scope.get("headers", ()):
            if key.lower() == b"mcp-session-id":
                session_id = value.decode("latin-1")
                break
        status: int | None = None

        async def watch(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        await self.app(scope, receive, watch)
        principal = scope.get(_PRINCIPAL_SCOPE_KEY)
        if session_id and status is not None and 200 <= status < 300:
            if isinstance(principal, Principal):
                with anyio.CancelScope(shield=True):
                    await self._ended(principal, session_id)


def _hash(arguments: Any) -> str:
    return arguments_hash(arguments) if isinstance(arguments, dict) else repr(arguments)


def _alias(tool: Tool) -> str:
    return tool.model_alias


_HINTS = ("title", "destructiveHint", "idempotentHint", "openWorldHint")


def _mcp_tool(tool: Tool) -> mcp_types.Tool:
    hints: dict[str, Any] = {k: tool.annotations[k] for k in _HINTS if k in tool.annotations}
    # The gateway reports its own classification: read-only only when clearance treats
    # the tool as read-only, whatever the upstream server claimed.
    hints["readOnlyHint"] = tool.read_only
    schema = dict(tool.input_schema)
    return mcp_types.Tool(
        name=tool.model_alias,
        description=tool.description or None,
        input_schema=schema,
        annotations=mcp_types.ToolAnnotations.model_validate(hints),
    )


def _to_mcp(outcome: CallOutcome) -> mcp_types.CallToolResult:
    body = outcome.to_model()
    try:
        content = _CONTENT.validate_python(body["content"])
    except ValidationError:
        content = [mcp_types.TextContent(type="text", text=outcome.text)]
    structured = body.get("structured_content")
    return mcp_types.CallToolResult(
        content=content,
        structured_content=structured if isinstance(structured, dict) else None,
        is_error=bool(body["is_error"]),
        _meta={
            "clearance/outcome": {
                "status": outcome.status,
                "call_id": outcome.call_id,
                "decision": outcome.decision,
                "reasons": list(outcome.reasons),
                "correlation_id": outcome.correlation_id,
            }
        },
    )


# --- stdio without threads ----------------------------------------------------------------


@asynccontextmanager
async def _process_pipes() -> AsyncIterator[tuple[_PipeLines, _PipeText] | None]:
    """Non-blocking readers of fd 0 and writers of fd 1, when both are pipes or sockets.

    The descriptors are duplicated for the protocol; fd 0 then reads from the null device
    and fd 1 writes to stderr until the context ends, when both are put back. Yields
    ``None`` where this cannot work (not POSIX, or a terminal or regular file).
    """
    if sys.platform == "win32" or not all(_is_pipe(fd) for fd in (0, 1)):
        yield None
        return
    import fcntl

    read_fd = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    write_fd = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
        os.dup2(2, 1)
    finally:
        os.close(null)
    os.set_blocking(read_fd, False)
    os.set_blocking(write_fd, False)
    try:
        yield _PipeLines(read_fd), _PipeText(write_fd)
    finally:
        for fd, std in ((read_fd, 0), (write_fd, 1)):
            with contextlib.suppress(OSError):
                os.set_blocking(fd, True)
                os.dup2(fd, std)
            os.close(fd)


def _is_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class _PipeLines:
    """``async for line in ...`` over a non-blocking descriptor (UTF-8, one line each)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = b""
        self._eof = False

    def __aiter__(self) -> _PipeLines:
        return self

    async def __anext__(self) -> str:
        while True:
            line, newline, rest = self._buffer.partition(b"\n")
            if newline:
                self._buffer = rest
                if line.strip():
                    return line.decode("utf-8", errors="replace")
                continue
            if self._eof:
                if self._buffer.strip():
                    line, self._buffer = self._buffer, b""
                    return line.decode("utf-8", errors="replace")
                raise StopAsyncIteration
            try:
                chunk = os.read(self._fd, 1 << 16)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
                continue
            if not chunk:
                self._eof = True
            self._buffer += chunk


class _PipeText:
    """``await write(text)`` to a non-blocking descriptor; ``flush`` has nothing to do."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def write(self, text: str) -> int:
        data = memoryview(text.encode("utf-8"))
        while data:
            try:
                written = os.write(self._fd, data)
            except BlockingIOError:
                await anyio.wait_writable(self._fd)
                continue
            data = data[written:]
        return len(text)

    async def flush(self) -> None:
        await anyio.lowlevel.checkpoint()


# --- HTTP authentication -------------------------------------------------------------------


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
        scope[_PRINCIPAL_SCOPE_KEY] = principal
        # The SDK's session manager binds each HTTP session to the credential that opened
        # it: another principal presenting that session id is answered 404.
        scope["user"] = AuthenticatedUser(
            AccessToken(token="", client_id=str(principal), scopes=[])
        )
        await self.app(scope, receive, send)


def _quiet_uvicorn(config: Any) -> Any:
    """A uvicorn server that leaves signals to its caller (the CLI cancels the gateway)."""
    import uvicorn

    class QuietServer(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return QuietServer(config)


def _write_token_file(path: Path, token: str) -> None:
    """Write ``token`` to ``path``, readable by the owner only (0600; folder made 0700)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        # An existing file keeps its old mode through O_CREAT: set it explicitly.
        os.fchmod(fd, 0o600)
        os.write(fd, (token + "\n").encode())
    finally:
        os.close(fd)


# --- running from a config -----------------------------------------------------------------


def _harness_from_file(path: Path) -> Harness:
    """The harness the main configuration in ``path`` describes (``clearance.config``)."""
    from clearance import config as main_config

    config = main_config.load_config(path)
    return main_config.build_harness(config, registry=main_config.build_registry(config))


@asynccontextmanager
async def open_gateway(
    config: GatewayConfig, *, harness_factory: Callable[[ToolRegistry], Harness] | None = None
) -> AsyncIterator[Gateway]:
    """A started harness with the configured servers registered, and its gateway.

    The harness is built from the same file's main configuration (``[evaluator]``,
    ``[[guardrails]]``, ``[journal]``, ``[approvals]``, ``[limits]``, ``[tools]``; see
    :mod:`clearance.config`), or by ``harness_factory(registry)`` when given.

    Raises:
        ConfigError: the configuration is unusable.
    """
    if harness_factory is not None:
        harness = harness_factory(ToolRegistry())
    elif config.path is not None:
        harness = _harness_from_file(config.path)
    else:
        raise ConfigError("a GatewayConfig without a file needs a harness_factory")
    async with harness:
        await _start_all(harness, config.servers)
        yield Gateway(
            harness,
            principal=config.principal,
            ask_fallback=config.ask_fallback,
            elicitation=config.elicitation,
            session_idle_timeout=config.session_idle_timeout,
            max_sessions=config.max_sessions,
        )


async def _start_all(harness: Harness, servers: Sequence[McpServerConfig]) -> None:
    """Start every server at once (each takes a process start and a handshake)."""
    failures: list[BaseException] = []

    async def start(server: McpServerConfig) -> None:
        try:
            await server.start(harness)
        except Exception as exc:
            failures.append(exc)

    async with anyio.create_task_group() as tg:
        for server in servers:
            tg.start_soon(start, server)
    if failures:
        raise failures[0]


async def run_gateway(
    config: GatewayConfig,
    *,
    harness_factory: Callable[[ToolRegistry], Harness] | None = None,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Run the gateway described by ``config`` until stdin closes (stdio) or cancelled.

    Over HTTP without configured tokens, a random token is generated and written to
    ``config.token_file`` (default ``~/.clearance/gateway.token``, mode 0600) before the
    socket listens.

    Raises:
        ConfigError: the configuration is unusable (no evaluator, a server that does not
            start, a token file that cannot be written).
    """
    async with open_gateway(config, harness_factory=harness_factory) as gateway:
        if config.transport == "stdio":
            if ready is not None:
                ready("stdio")
            await gateway.serve_stdio()
            return
        # The token is made only once everything else is known to work.
        tokens = list(config.tokens)
        if not tokens:
            token_file = config.token_file or DEFAULT_TOKEN_FILE
            token = secrets.token_urlsafe(32)
            try:
                _write_token_file(token_file, token)
            except OSError as exc:
                raise ConfigError(f"cannot write the token file {token_file}: {exc}") from None
            tokens = [PrincipalToken(config.principal, token)]
            print(f"clearance gateway: token written to {token_file}", file=sys.stderr)
        await gateway.serve_http(
            tokens, host=config.host, port=config.port, endpoint=config.endpoint, ready=ready
        )
