"""The inbox server: its routes, how an answer reaches the ask store, and serving it.

Routes (every one behind :class:`~clearance.inbox._guard.LocalOnly`):

- ``GET /login?token=T``: a page with a "Sign in" button for an unused login token;
  ``POST /login`` spends the token and sets the session cookie (``HttpOnly``,
  ``SameSite=Strict``); the token is useless from then on.
- ``GET /``: the inbox (signed in), ``GET /asks``: the cards of the pending asks (what the
  page fetches every ``poll_interval`` seconds), ``GET /static/...``: script and style.
- ``POST /answer`` (``csrf``, ``ask_id``, ``decision``, ``scope``): answers a pending ask
  as the signed-in person, through the inbox. ``POST /logout`` (``csrf``) ends the session.

Answers are refused with a status and one sentence, never an exception: not signed in
(401), a CSRF token that is not the session's (403), a malformed form (400), no such ask
(404), an ask no longer pending (409: answered, by whom and through what; or closed). The
reply is JSON (``{"ok", "message"}``) when the request accepts it, else a small page.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, quote

import anyio
import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from clearance.errors import AskError, ConfigError
from clearance.harness.approvals import coerce_decision
from clearance.harness.ask_store import AskStore, StoredAsk
from clearance.harness.session import Harness
from clearance.inbox._assets import INBOX_CSS, INBOX_JS
from clearance.inbox._auth import Logins, SignedIn
from clearance.inbox._guard import LocalOnly
from clearance.inbox._render import ANSWER_LABELS, ask_list, inbox_page, login_page, message_page

__all__ = ["Inbox", "InboxStarted"]

_MAX_FORM = 16 * 1024
"""Bytes a form may have: an answer is a few short fields."""

_VIA = "inbox"


@dataclass(frozen=True, slots=True)
class InboxStarted:
    """What :meth:`Inbox.serve` hands its ``ready`` callback once it listens."""

    url: str
    """The inbox's address (``http://127.0.0.1:PORT/``)."""
    links: Mapping[str, str]
    """Each person's one-time login link, by name."""


class _Refused(Exception):
    """A request the inbox answers with ``status`` and one sentence."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Inbox:
    """Pending asks in a browser, answered by the people named (see :mod:`clearance.inbox`).

    Args:
        asks: the ask store to show and answer, or a :class:`~clearance.Harness` (its
            ``ask_store``; answers then go through ``harness.answer_ask``, which also
            releases a call waiting in this process at once).
        users: the people who may answer; each gets a one-time login link, and every
            answer given in their session is recorded as theirs (``by``).
        poll_interval: seconds between the page's looks for new asks.
        session_ttl: seconds a sign-in lasts.
        max_age: seconds an ask stays on show (a harness's own ``pending_ask_ttl`` when
            ``asks`` is one): an older ask is no longer applied by any host.

    Raises:
        ValueError: no user, an empty or repeated name, or a non-positive interval.
    """

    def __init__(
        self,
        asks: AskStore | Harness,
        *,
        users: Sequence[str],
        poll_interval: float = 1.0,
        session_ttl: float = 12 * 3600.0,
        max_age: float = 86_400.0,
    ) -> None:
        if poll_interval <= 0 or session_ttl <= 0 or max_age <= 0:
            raise ValueError("poll_interval, session_ttl and max_age must be positive")
        self.harness = asks if isinstance(asks, Harness) else None
        self.store: AskStore = asks.ask_store if isinstance(asks, Harness) else asks
        self.max_age = self.harness.pending_ask_ttl if self.harness is not None else max_age
        self.poll_interval = poll_interval
        self.logins = Logins(users, session_ttl=session_ttl)
        path = getattr(self.store, "path", None)
        self.label = str(path) if path else type(self.store).__name__
        # One store call at a time: a SQLite connection is shared by the worker threads.
        self._store_calls = anyio.CapacityLimiter(1)
        self.cookie_name = "clearance_inbox"
        """The session cookie's name (with the port, once :meth:`asgi_app` knows it)."""

    # -- the app ----------------------------------------------------------------------------

    def asgi_app(self, *, port: int) -> Any:
        """The inbox as an ASGI app, for requests addressed to ``127.0.0.1:port`` (or
        ``localhost:port``) only. One inbox serves one address."""
        # Cookies are not kept per port: two inboxes on one machine must not share one.
        self.cookie_name = f"clearance_inbox_{port}"
        app = Starlette(
            routes=[
                Route("/", self._page, methods=["GET"]),
                Route("/asks", self._cards, methods=["GET"]),
                Route("/login", self._login_form, methods=["GET"]),
                Route("/login", self._login, methods=["POST"]),
                Route("/logout", self._logout, methods=["POST"]),
                Route("/answer", self._answer, methods=["POST"]),
                Route("/static/inbox.js", _asset(INBOX_JS, "text/javascript"), methods=["GET"]),
                Route("/static/inbox.css", _asset(INBOX_CSS, "text/css"), methods=["GET"]),
            ]
        )
        return LocalOnly(app, [f"127.0.0.1:{port}", f"localhost:{port}"])

    def _signed_in(self, request: Request) -> tuple[str, SignedIn | None]:
        cookie = request.cookies.get(self.cookie_name)
        return cookie or "", self.logins.session(cookie)

    async def _page(self, request: Request) -> Response:
        _, session = self._signed_in(request)
        if session is None:
            return _reply(request, _Refused(401, _SIGN_IN), page_only=True)
        asks = await self._pending()
        return HTMLResponse(
            inbox_page(
                asks,
                user=session.user,
                csrf=session.csrf,
                store=self.label,
                poll_ms=round(self.poll_interval * 1000),
            )
        )

    async def _cards(self, request: Request) -> Response:
        _, session = self._signed_in(request)
        if session is None:
            return _reply(request, _Refused(401, _SIGN_IN), page_only=True)
        return HTMLResponse(ask_list(await self._pending(), csrf=session.csrf))

    async def _login_form(self, request: Request) -> Response:
        token = request.query_params.get("token")
        user = self.logins.user_of_token(token)
        if user is None or token is None:
            return _reply(request, _Refused(403, _USED_LINK), page_only=True)
        return HTMLResponse(login_page(user, token))

    async def _login(self, request: Request) -> Response:
        try:
            form = await _form(request)
        except _Refused as refused:
            return _reply(request, refused, page_only=True)
        opened = self.logins.sign_in(form.get("token"))
        if opened is None:
            return _reply(request, _Refused(403, _USED_LINK), page_only=True)
        cookie, _ = opened
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(
            self.cookie_name,
            cookie,
            httponly=True,
            samesite="strict",
            path="/",
        )
        return response

    async def _logout(self, request: Request) -> Response:
        cookie, session = self._signed_in(request)
        try:
            form = await _form(request)
            _check(session, form)
        except _Refused as refused:
            return _reply(request, refused, page_only=True)
        self.logins.sign_out(cookie)
        response = HTMLResponse(message_page("Signed out", _SIGNED_OUT, back=False))
        response.delete_cookie(self.cookie_name, path="/")
        return response

    async def _answer(self, request: Request) -> Response:
        _, session = self._signed_in(request)
        try:
            form = await _form(request)
            _check(session, form)
            assert session is not None
            message = await self._give_answer(
                form.get("ask_id") or "",
                form.get("decision") or "",
                scope=form.get("scope"),
                by=session.user,
            )
        except _Refused as refused:
            return _reply(request, refused)
        return _reply(request, None, message=message)

    # -- asks -------------------------------------------------------------------------------

    async def _store(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await anyio.to_thread.run_sync(fn, *args, limiter=self._store_calls)

    async def _pending(self) -> list[StoredAsk]:
        oldest = time.time() - self.max_age
        found: list[StoredAsk] = await self._store(self.store.pending)
        return [a for a in found if a.created_at >= oldest]

    async def _give_answer(self, ask_id: str, decision: str, *, scope: str | None, by: str) -> str:
        """Answer a pending ask as ``by`` (what ``POST /answer`` does): the sentence to
        show.

        Args:
            ask_id: the ask.
            decision: ``deny``, ``allow_once``, ``allow_session`` or ``allow_always``.
            scope: for ``allow_session``/``allow_always``, the number (from 1) of one of
                the ask's suggestions; default the first (the exact call).
            by: who answers.

        Raises:
            _Refused: the answer is not taken (see the module docstring).
        """
        if decision not in ANSWER_LABELS:
            raise _Refused(400, f"an answer is one of {', '.join(ANSWER_LABELS)}")
        found: StoredAsk | None = await self._store(self.store.get, ask_id) if ask_id else None
        if found is None:
            raise _Refused(404, f"there is no ask {ask_id!r}; nothing changed")
        if found.status != "pending":
            raise _Refused(409, _not_pending(found))
        if time.time() - found.created_at > self.max_age:
            raise _Refused(409, f"ask {ask_id} is too old to answer (no host applies it now)")
        chosen = None
        if decision in ("allow_session", "allow_always") and found.suggestions:
            chosen = found.suggestions[_scope_index(scope, len(found.suggestions)) - 1]
        answer = coerce_decision(decision, scope=chosen)
        try:
            if self.harness is not None:
                await self.harness.answer_ask(ask_id, answer, by=by, via=_VIA)
            else:
                await self._store(_answer_in_store, self.store, ask_id, answer, by)
        except AskError as exc:
            # Answered elsewhere between the look above and this answer: say by whom.
            again: StoredAsk | None = await self._store(self.store.get, ask_id)
            if again is not None and again.status != "pending":
                raise _Refused(409, _not_pending(again)) from None
            raise _Refused(409, f"the answer was not taken: {exc}") from None
        covers = f" (the grant covers {chosen.description})" if chosen is not None else ""
        return {
            "deny": f"Denied by {by}.",
            "allow_once": f"Allowed once by {by}: the call goes on.",
            "allow_session": f"Allowed for this session by {by}{covers}.",
            "allow_always": f"Allowed always by {by}{covers}.",
        }[decision]

    # -- serving ----------------------------------------------------------------------------

    async def serve(
        self, *, port: int = 8766, ready: Callable[[InboxStarted], None] | None = None
    ) -> None:
        """Serve on ``127.0.0.1:port`` until cancelled (``port=0``: any free port);
        ``ready`` gets the address and the login links once the socket listens.

        Raises:
            ConfigError: the port cannot be listened on.
        """
        import uvicorn

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            # Inherited by every accepted connection: a small answer is not held back
            # for the browser's delayed ACK (about 40 ms each).
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.bind(("127.0.0.1", port))
            sock.listen(128)
        except OSError as exc:
            sock.close()
            raise ConfigError(
                f"the inbox cannot listen on 127.0.0.1:{port}: {exc.strerror or exc} "
                "(choose another port with --port)"
            ) from None
        sock.setblocking(False)
        bound = sock.getsockname()[1]
        server = _QuietServer(
            uvicorn.Config(
                self.asgi_app(port=bound),
                log_level="warning",
                lifespan="off",
                access_log=False,
                timeout_graceful_shutdown=2,
            )
        )
        done = anyio.Event()

        async def run() -> None:
            # Shielded: a cancelled inbox shuts uvicorn down (should_exit below) instead
            # of abandoning its connections.
            with anyio.CancelScope(shield=True):
                try:
                    await server.serve([sock])
                finally:
                    done.set()

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(run)
                while not server.started and not done.is_set():  # noqa: ASYNC110
                    await anyio.sleep(0.01)  # uvicorn offers no startup event
                if done.is_set():
                    raise ConfigError(f"the inbox could not start on 127.0.0.1:{bound}")
                url = f"http://127.0.0.1:{bound}/"
                if ready is not None:
                    links = {
                        user: f"{url}login?token={quote(token, safe='')}"
                        for user, token in self.logins.tokens.items()
                    }
                    ready(InboxStarted(url, links))
                try:
                    await anyio.sleep_forever()
                finally:
                    server.should_exit = True
                    with anyio.CancelScope(shield=True), anyio.move_on_after(10):
                        await done.wait()
        finally:
            sock.close()


# -- helpers ------------------------------------------------------------------------------

_SIGN_IN = "Not signed in: open the login link that clearance inbox printed when it started."
_USED_LINK = (
    "This login link is not valid or was already used. Each link works once: restart "
    "clearance inbox for a new one."
)
_SIGNED_OUT = "Signed out. Restart clearance inbox for a new login link."


def _answer_in_store(store: AskStore, ask_id: str, answer: Any, by: str) -> None:
    """Answer as ``by``, sealed with their approver key (rule R13)."""
    credential = store.approvers.credential(by)
    if credential is None:
        raise AskError(f"{by!r} has no approver key on this machine")
    store.answer(ask_id, answer, credential=credential, via=_VIA)


def _not_pending(ask: StoredAsk) -> str:
    if ask.status in ("answered", "consumed"):
        given = ask.decision.decision if ask.decision is not None else "an answer"
        who = f" by {ask.answered_by}" if ask.answered_by else ""
        via = f" via {ask.via}" if ask.via else ""
        return f"Ask {ask.ask_id} was already answered ({given}{who}{via}); nothing changed."
    why = f" ({ask.closed_why})" if ask.closed_why else ""
    return f"Ask {ask.ask_id} was closed{why} before this answer; nothing changed."


def _scope_index(raw: str | None, count: int) -> int:
    if raw is None or raw == "":
        return 1
    if not raw.isdigit() or not 1 <= int(raw) <= count:
        raise _Refused(400, f"the scope is the number of one the ask offers (1 to {count})")
    return int(raw)


def _check(session: SignedIn | None, form: Mapping[str, str]) -> None:
    if session is None:
        raise _Refused(401, _SIGN_IN)
    if not session.csrf_matches(form.get("csrf")):
        raise _Refused(
            403, "This form is not from your inbox session (CSRF check failed); reload the page."
        )


async def _form(request: Request) -> dict[str, str]:
    """The url-encoded form of a POST, each field once, at most :data:`_MAX_FORM` bytes."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise _Refused(415, "send the answer as a form (application/x-www-form-urlencoded)")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > _MAX_FORM:
            raise _Refused(413, "the form is too large")
    try:
        fields = parse_qs(
            body.decode("utf-8"), keep_blank_values=True, strict_parsing=False, max_num_fields=16
        )
    except (UnicodeDecodeError, ValueError):
        raise _Refused(400, "the form could not be read") from None
    if any(len(values) != 1 for values in fields.values()):
        raise _Refused(400, "each field of the form is sent once")
    return {name: values[0] for name, values in fields.items()}


def _wants_json(request: Request) -> bool:
    return "application/json" in request.headers.get("accept", "")


def _reply(
    request: Request,
    refused: _Refused | None,
    *,
    message: str = "",
    page_only: bool = False,
) -> Response:
    """The inbox's reply: JSON for the page's script, else a small page."""
    status, text = (refused.status, refused.message) if refused else (200, message)
    if _wants_json(request) and not page_only:
        return JSONResponse({"ok": refused is None, "message": text}, status_code=status)
    title = "Answered" if refused is None else _TITLES.get(status, "Refused")
    return HTMLResponse(message_page(title, text, back=status != 401), status_code=status)


_TITLES = {
    400: "Not understood",
    401: "Not signed in",
    403: "Refused",
    404: "No such ask",
    409: "Not answered",
    413: "Too large",
    415: "Not understood",
}


def _asset(text: str, kind: str) -> Callable[[Request], Any]:
    body = text.encode()

    async def endpoint(request: Request) -> Response:
        return Response(body, media_type=kind)

    return endpoint


def _quiet_server_class() -> Any:
    import uvicorn

    class QuietServer(uvicorn.Server):
        """A uvicorn server that leaves signals to its caller (the CLI cancels the inbox)."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return QuietServer


_QuietServer = _quiet_server_class()
