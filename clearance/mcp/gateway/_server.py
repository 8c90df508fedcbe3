"""The gateway itself: an MCP server whose ``tools/call`` runs the clearance pipeline.

It serves over stdio (:meth:`Gateway.serve_stdio`) or Streamable HTTP
(:meth:`Gateway.serve_http`, or :meth:`Gateway.http_app` for another ASGI server), lists
the harness's tools and hands each call to the clearance session of its MCP session
(:mod:`._sessions`), its asks to :mod:`._asks` (or, for a client that cannot be asked,
:mod:`._pending`).
"""

from __future__ import annotations

import math
import secrets
import socket
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, cast, get_args

import anyio
import mcp_types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from clearance._serving import uvicorn_serving
from clearance._text import printable
from clearance._version import __version__
from clearance.harness.session import Harness, Session
from clearance.mcp.gateway._asks import Asks, Rounds
from clearance.mcp.gateway._auth import (
    PRINCIPAL_SCOPE_KEY,
    BearerAuth,
    PrincipalToken,
    principal_of,
)
from clearance.mcp.gateway._bounds import (
    HttpLimits,
    RequestBounds,
    SessionQuota,
    bounded_protocol,
)
from clearance.mcp.gateway._config import AskFallback
from clearance.mcp.gateway._convert import arguments_key, listed_tools, mcp_result, relay_to
from clearance.mcp.gateway._edge import check_call, request_label
from clearance.mcp.gateway._pending import PendingCalls
from clearance.mcp.gateway._sessions import SessionEnds, SessionKey, Sessions, session_key
from clearance.mcp.gateway._stdio import process_pipes
from clearance.mcp.sources import progress_relay, reset_progress_relay
from clearance.types import Principal

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

__all__ = ["Gateway"]


class Gateway:
    """An MCP server in front of a harness: lists its tools, runs calls through the pipeline.

    Args:
        harness: a started harness whose registry holds the tools to serve (typically
            registered with :func:`~clearance.mcp.start_stdio_server`).
        principal: who stdio clients act for.
        ask_fallback: what an ask becomes when the client cannot elicit: ``pending``
            (default) leaves it open in the harness's ask store and gives the client a
            result that says it waits for a person (never how to answer it: the log says
            that) and to call again once it is answered (see :mod:`._pending`); ``deny``, ``allow_once``,
            ``allow_session`` or ``allow_always`` answers it at once.
        elicitation: send asks to clients that support elicitation.
        show_ask_store: name the ask store's file (``--db PATH``) in the commands a
            pending ask's log line gives. ``clearance gateway`` turns it off when ``clearance
            asks`` run in the gateway's directory finds that file without it.
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
        limits: what one HTTP client can take: connections, timeouts, request size,
            requests at once (see :class:`HttpLimits`; every one has a default).

    A clearance session lives as long as the MCP session it serves: it ends when the
    client ends its HTTP session (``DELETE``), when that session has been idle for
    ``session_idle_timeout``, or when the stdio client closes its stdin.
    """

    def __init__(
        self,
        harness: Harness,
        *,
        principal: Principal,
        ask_fallback: AskFallback = "pending",
        elicitation: bool = True,
        show_ask_store: bool = True,
        name: str = "clearance-gateway",
        telemetry: bool | None = None,
        session_idle_timeout: float = 1800.0,
        max_sessions: int = 10_000,
        limits: HttpLimits | None = None,
    ) -> None:
        _check_fallback(ask_fallback)
        if not (
            isinstance(session_idle_timeout, int | float)
            and math.isfinite(session_idle_timeout)
            and session_idle_timeout > 0
        ):
            raise ValueError("session_idle_timeout must be a positive number of seconds")
        if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
            raise ValueError("max_sessions must be a positive integer")
        self.harness = harness
        self.principal = principal
        self.limits = limits if limits is not None else HttpLimits()
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
        self._asks = Asks(
            fallback=ask_fallback,
            elicitation=elicitation,
            is_sessionless=lambda session_id: self._sessions.is_sessionless(session_id),
        )
        self._sessions = Sessions(
            harness, idle_timeout=self.session_idle_timeout, on_ask=self._asks.on_ask
        )
        self._pending = PendingCalls(
            harness,
            show_ask_store=show_ask_store,
            is_sessionless=lambda session_id: self._sessions.is_sessionless(session_id),
        )
        self._listing: list[mcp_types.Tool] | None = None
        self.session_quota: SessionQuota | None = None
        """The HTTP sessions each principal holds (set by :meth:`http_app`)."""

    @property
    def ask_fallback(self) -> AskFallback:
        """What an ask becomes when the client cannot elicit."""
        return self._asks.fallback_answer

    @ask_fallback.setter
    def ask_fallback(self, value: AskFallback) -> None:
        _check_fallback(value)
        self._asks.fallback_answer = value

    @property
    def elicitation(self) -> bool:
        """Whether asks are sent to clients that support elicitation."""
        return self._asks.elicitation

    @elicitation.setter
    def elicitation(self, value: bool) -> None:
        self._asks.elicitation = value

    @property
    def sessions(self) -> Mapping[SessionKey, Session]:
        """The clearance sessions open now, by principal and MCP session id (``"stdio"``
        for the stdio client, ``None`` for a principal's sessionless requests)."""
        return self._sessions.live

    # -- serving --------------------------------------------------------------------------

    async def serve_stdio(self) -> None:
        """Serve one client over this process's stdin and stdout until stdin closes.

        While serving, stdin reads as empty and stdout goes to stderr for everything else
        in the process, so stray output cannot corrupt the protocol.
        """
        async with process_pipes() as pipes:
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
                    await self._sessions.stdio_ended()

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
            max_request_body_size=self.limits.max_request_bytes,
        )
        ends = SessionEnds(app, self._sessions.mcp_session_ended)
        self.session_quota = SessionQuota(
            ends,
            per_principal=self.limits.max_sessions_per_principal,
            idle_timeout=self.session_idle_timeout,
            key=PRINCIPAL_SCOPE_KEY,
        )
        return BearerAuth(RequestBounds(self.session_quota, self.limits), tokens)

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
        # Inherited by every accepted connection (Linux copies it): without it a small
        # answer written as headers then body waits for the client's delayed ACK, about
        # 40 ms per call for a client that keeps its connection.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
        sock.listen(512)
        sock.setblocking(False)
        bound = sock.getsockname()[1]
        limits = self.limits
        config = uvicorn.Config(
            app,
            http=bounded_protocol(limits),
            log_level="warning",
            lifespan="on",
            access_log=False,
            timeout_keep_alive=limits.idle_timeout,  # type: ignore[arg-type]
            timeout_graceful_shutdown=5,
        )
        shown = f"[{host}]" if family == socket.AF_INET6 else host
        failed = f"the HTTP gateway could not start on {shown}:{bound}"
        async with uvicorn_serving(config, sock, failed=failed, grace=15):
            if ready is not None:
                ready(f"http://{shown}:{bound}{endpoint}")
            await anyio.sleep_forever()

    # -- handlers -------------------------------------------------------------------------

    @asynccontextmanager
    async def _serving(self, ctx: ServerRequestContext[Any, Any]) -> AsyncIterator[Session]:
        """The clearance session of this request's MCP session, busy while it is served."""
        key = (principal_of(ctx, self.principal), session_key(ctx))
        async with self._sessions.serving(key) as session:
            yield session

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListToolsResult:
        async with self._serving(ctx) as session:
            if self._listing is None:
                self._listing = listed_tools(session.selected_tools)
            return mcp_types.ListToolsResult(tools=list(self._listing))

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult:
        # Checked before anything else: a value that cannot be recorded or sent on
        # refuses this request alone (see _edge).
        label = request_label(ctx.request_id)
        check_call(params)
        async with self._serving(ctx) as session:
            return await self._call_in(session, ctx, params, label)

    async def _call_in(
        self,
        session: Session,
        ctx: ServerRequestContext[Any, Any],
        params: mcp_types.CallToolRequestParams,
        label: str,
    ) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult:
        if params.request_state is not None or params.input_responses:
            return await self._asks.resume(
                ctx,
                params,
                principal=principal_of(ctx, self.principal),
                session_key=session_key(ctx),
                arguments_key=arguments_key(params.arguments or {}),
            )
        tool = session.tools.get(params.name)
        if tool is None:
            # Spec: an unknown tool is a protocol error, not a tool result.
            raise MCPError(
                code=mcp_types.INVALID_PARAMS, message=f"Unknown tool: {printable(params.name)}"
            )
        arguments: Any = params.arguments if params.arguments is not None else {}
        # 64 random bits: a sessionless session takes many clients' requests, often with
        # the same request id (each client counts from 1); with 32 bits a fresh call was
        # expected to draw an earlier call's id (refused as reused) within ~90,000 calls.
        call_id = f"mcp-{label}-{secrets.token_hex(8)}"
        request_id = ctx.request_id if label == str(ctx.request_id) else label
        context = {"mcp_request_id": request_id, "mcp_session_id": session_key(ctx)}
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and self._asks.can_elicit(ctx.session):
            # 2026-07-28 forbids server-to-client requests: an ask becomes an
            # input_required result, answered by the client's retry. The call runs in a
            # background task that outlives this request.
            rounds = Rounds(
                asks=self._asks,
                principal=principal_of(ctx, self.principal),
                session_key=session_key(ctx),
                tool_name=params.name,
                arguments_key=arguments_key(arguments),
                token=secrets.token_urlsafe(24),
            )
            self.harness.task_group.start_soon(
                rounds.run, session, tool.model_alias, arguments, call_id, context
            )
            return await rounds.wait(ctx)
        if self._asks.pending and not self._asks.reachable(ctx):
            # Nobody can be asked through this client: an ask waits in the ask store for
            # a person, and the client's next identical call gets the answer.
            return await self._pending.call(
                session, ctx, tool, arguments, call_id=call_id, context=context
            )
        relay = progress_relay(relay_to(ctx.session))
        try:
            with self._asks.direct(ctx):
                outcome = await session.call_tool(
                    tool.model_alias, arguments, call_id=call_id, context=context
                )
        finally:
            reset_progress_relay(relay)
        return mcp_result(outcome)


def _check_fallback(value: Any) -> None:
    choices = get_args(AskFallback)
    if value not in choices:
        raise ValueError(f"ask_fallback must be one of {', '.join(choices)}, not {value!r}")


def _tracing_installed() -> bool:
    """Whether an OpenTelemetry tracer provider is installed (spans would go somewhere)."""
    try:
        from opentelemetry import trace
    except ImportError:
        return False
    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)
