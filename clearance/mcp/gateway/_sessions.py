"""The clearance sessions behind the gateway's MCP sessions, and when they end.

One clearance :class:`~clearance.Session` serves one principal's MCP session: the
``Mcp-Session-Id`` of a handshake-era HTTP connection, the one stdio client, or (for
2026-07-28 requests, which carry no session) one sessionless session per principal. It ends
with the MCP session: when the client ends its HTTP session (``DELETE``, seen by
:class:`SessionEnds`), when that session has had no request and no call in flight for the
idle timeout, or when the stdio client closes stdin.

A principal's sessionless session would otherwise live as long as the gateway and hold
every call id it was given (rule R7 never lets a session forget one). It is replaced
instead: once it holds half of the harness's ``max_session_calls`` ids, the next request
gets a new session with its own id, and the old one closes as soon as no request holds it
and no call of it is in flight. No grant is lost by that (an ``allow_session`` answer
counts once there), and the session never reaches the bound at which it would refuse a
call (the other half is room for the requests already given it).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import anyio
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from clearance.harness.approvals import PermissionAsk
from clearance.harness.session import AgentDefinition, Harness, Session
from clearance.mcp.gateway._auth import PRINCIPAL_SCOPE_KEY
from clearance.types import Principal

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

__all__ = ["STDIO", "SessionEnds", "SessionKey", "Sessions", "session_key"]

_log = logging.getLogger("clearance.mcp")

_RETIRED_CHECK = 1.0
"""Seconds between two looks for replaced sessionless sessions that can close."""

STDIO = "stdio"
"""The session key of the one stdio client."""

SessionKey = tuple[Principal, str | None]
"""Whose session, and which MCP session (``None``: the principal's sessionless one)."""


def session_key(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The MCP session a request belongs to: its ``Mcp-Session-Id``, :data:`STDIO`, or
    ``None`` for a request that has no session."""
    request = ctx.request
    headers = getattr(request, "headers", None)
    if headers is None:
        return STDIO
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


class Sessions:
    """The gateway's clearance sessions by :data:`SessionKey`.

    Args:
        harness: the started harness the sessions are created in.
        idle_timeout: seconds without a request or a call in flight after which an HTTP
            session's clearance session ends.
        on_ask: the sessions' ``on_permission_ask``.
    """

    def __init__(
        self,
        harness: Harness,
        *,
        idle_timeout: float,
        on_ask: Callable[[PermissionAsk], Any],
    ) -> None:
        self.harness = harness
        self.idle_timeout = idle_timeout
        self._on_ask = on_ask
        self._sessions: dict[SessionKey, Session] = {}
        self._sessionless: set[str] = set()
        """Clearance sessions serving requests that carry no MCP session id."""
        self._activity: dict[SessionKey, _Activity] = {}
        """Requests in flight and the last one's end, per session key (for idle ends)."""
        self._holders: dict[str, int] = {}
        """Requests holding each clearance session, by session id."""
        self._retired: dict[str, Session] = {}
        """Replaced sessionless sessions, closed once nothing holds them."""
        self._reaping = False
        self._lock = anyio.Lock()

    @property
    def live(self) -> Mapping[SessionKey, Session]:
        """The sessions open now (a read-only view)."""
        return MappingProxyType(self._sessions)

    def is_sessionless(self, session_id: str) -> bool:
        """Whether the clearance session ``session_id`` serves requests without an MCP
        session (shared by all of one principal's such requests, for the gateway's life)."""
        return session_id in self._sessionless

    @asynccontextmanager
    async def serving(self, key: SessionKey) -> AsyncIterator[Session]:
        """The clearance session of ``key``, marked busy (not idle) while the request is
        served."""
        activity = self._activity.get(key)
        if activity is None:
            activity = self._activity[key] = _Activity()
        activity.requests += 1  # before any await: an idle sweep now leaves it alone
        try:
            session = await self._session(key)
            self._holders[session.id] = self._holders.get(session.id, 0) + 1
            try:
                yield session
            finally:
                held = self._holders[session.id] - 1
                if held:
                    self._holders[session.id] = held
                else:
                    del self._holders[session.id]
                    if session.id in self._retired:
                        self._end_retired_soon(session)
        finally:
            activity.requests -= 1
            activity.last = anyio.current_time()

    def _worn(self, key: SessionKey, session: Session) -> bool:
        """Whether ``key``'s session is a sessionless one to replace (see the module
        docstring)."""
        return key[1] is None and 2 * len(session.call_ids) >= self.harness.max_session_calls

    async def _session(self, key: SessionKey) -> Session:
        session = self._sessions.get(key)
        if session is not None and not session.closed and not self._worn(key, session):
            return session
        async with self._lock:
            session = self._sessions.get(key)
            if session is not None and not session.closed and self._worn(key, session):
                self._retire(session)
                session = None
            if session is None or session.closed:
                session = await self.harness.create_session(
                    principal=key[0],
                    agent=AgentDefinition("mcp-gateway"),
                    on_permission_ask=self._on_ask,
                )
                self._sessions[key] = session
                if key[1] is None:
                    self._sessionless.add(session.id)
                elif key[1] != STDIO:
                    self._start_reaping()
        return session

    def _start_reaping(self) -> None:
        if not self._reaping:
            self._reaping = True
            self.harness.task_group.start_soon(self._end_idle_sessions)

    def _retire(self, session: Session) -> None:
        """Replace a worn sessionless session: requests from now on get a new one; this
        one closes once nothing holds it (:meth:`_end_retired`)."""
        self._retired[session.id] = session
        self._start_reaping()
        self._end_retired_soon(session)
        _log.info(
            "sessionless session %s of %s replaced after %d calls",
            session.id,
            session.principal_text,
            len(session.call_ids),
        )

    async def mcp_session_ended(self, principal: Principal, session_id: str) -> None:
        """The client ended its HTTP session (a ``DELETE`` the SDK accepted)."""
        await self._end_sessions(lambda key: key == (principal, session_id))

    async def stdio_ended(self) -> None:
        """The stdio client is gone: so is its session (and its allow_session grants)."""
        await self._end_sessions(lambda key: key[1] == STDIO)

    async def _end_idle_sessions(self) -> None:
        """End the clearance sessions of MCP sessions idle for ``idle_timeout`` (the SDK
        ends the MCP session itself after the same time), and the replaced sessionless
        sessions nothing holds any more."""
        while True:
            period = min(self.idle_timeout / 4, 60.0)
            await anyio.sleep(min(period, _RETIRED_CHECK) if self._retired else period)
            await self._end_retired()
            await self._end_sessions(functools.partial(self._idle, now=anyio.current_time()))

    def _end_retired_soon(self, session: Session) -> None:
        """Close a replaced session now if nothing holds it (not on the next sweep: a
        burst of calls replaces sessions faster than a sweep comes round)."""
        if session.id not in self._holders and not session.in_flight:
            self.harness.task_group.start_soon(self._end_retired)

    async def _end_retired(self) -> None:
        """Close the replaced sessions that no request holds and no call is in flight in
        (a call that waits for an answer keeps its session open)."""
        done = [s for s in self._retired.values() if s.id not in self._holders and not s.in_flight]
        for session in done:
            del self._retired[session.id]
        await self._close(done)

    def _idle(self, key: SessionKey, *, now: float) -> bool:
        if key[1] is None or key[1] == STDIO:
            return False  # one per principal (or the one stdio client): bounded
        activity = self._activity.get(key)
        if activity is None:
            return True
        if activity.requests:
            return False
        # A call may outlive its request (an ask answered by a later request).
        busy = self._sessions[key].in_flight
        return not busy and now - activity.last >= self.idle_timeout

    async def _end_sessions(self, which: Callable[[SessionKey], bool]) -> None:
        ended = []
        for key in [k for k in self._sessions if which(k)]:
            # Forgotten before any await: a request from now on gets a new session.
            ended.append(self._sessions.pop(key))
            self._activity.pop(key, None)
        await self._close(ended)

    async def _close(self, ended: list[Session]) -> None:
        for session in ended:
            self._sessionless.discard(session.id)
            try:
                await session.aclose()
            except Exception as exc:  # the journal failed; the session is closed anyway
                _log.warning("closing gateway session %s failed: %r", session.id, exc)


class SessionEnds:
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
        principal = scope.get(PRINCIPAL_SCOPE_KEY)
        if session_id and status is not None and 200 <= status < 300:
            if isinstance(principal, Principal):
                with anyio.CancelScope(shield=True):
                    await self._ended(principal, session_id)
