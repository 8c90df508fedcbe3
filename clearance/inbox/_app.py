"""The inbox server: its routes, how an answer reaches the ask store, and serving it.

Routes (every one behind :class:`~clearance.inbox._guard.LocalOnly`; the inbox sets no
cookie and reads none, see :mod:`clearance.inbox._auth`):

- ``GET /``: the page, with no ask on it and nothing secret (anyone local may fetch it);
  its script takes the person's token from the link's fragment (``#token=...``), keeps it
  in the tab's ``sessionStorage`` and sends it as ``Authorization: Bearer`` below.
  ``GET /static/...``: script and style.
- ``GET /asks`` (bearer): ``{"user", "cards"}``, the signed-in person and the cards of the
  pending asks (and of the asks whose host is gone, shown as such, with no answer form) (what the page fetches every ``poll_interval`` seconds).
- ``POST /answer`` (bearer; a form: ``ask_id``, ``decision``, ``scope``): answers a pending
  ask as the token's person, through the inbox. ``POST /logout`` (bearer) ends the token.

Refusals are a status and one sentence, never an exception: no token or one that is not
(401), too many failed attempts lately (429, with ``Retry-After``), a malformed form
(400, 413, 415), no such ask (404), an ask no longer pending (409: answered, by whom and
through what; closed; or its host gone: the process whose call waited on it stopped). The reply is JSON (``{"ok", "message"}``) when the request
accepts it, else a small page.

Who answers (rule R13): over an ask store, the inbox seals each answer with the person's
approver key (``clearance approvers add NAME``; an inbox refuses to start for a person
without one); beside a harness, it is part of the host and answers through
``harness.answer_ask``.
"""

from __future__ import annotations

import contextlib
import math
import re
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
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from clearance.errors import AskError, ConfigError
from clearance.harness.approvals import coerce_decision
from clearance.harness.ask_store import (
    HOST_GONE,
    AskStore,
    StoredAsk,
    refusal,
    shown_asks,
    sweep_expired,
)
from clearance.harness.session import Harness
from clearance.inbox._assets import INBOX_CSS, INBOX_JS
from clearance.inbox._auth import Failures, People, Person
from clearance.inbox._guard import LocalOnly
from clearance.inbox._render import ANSWER_LABELS, ask_list, inbox_page, message_page

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
    """Each person's link, by name: the address with their token after ``#``."""


class _Refused(Exception):
    """A request the inbox answers with ``status`` and one sentence."""

    def __init__(self, status: int, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.retry_after = retry_after


class Inbox:
    """Pending asks in a browser, answered by the people named (see :mod:`clearance.inbox`).

    Args:
        asks: the ask store to show and answer, or a :class:`~clearance.Harness` (its
            ``ask_store``; answers then go through ``harness.answer_ask``, which also
            releases a call waiting in this process at once).
        users: the people who may answer; each gets a token (in their link), and every
            answer sent with it is recorded as theirs (``by``). Over an ask store, each
            must be an approver of the store's keyring (``clearance approvers add``):
            their answers are sealed with their key.
        poll_interval: seconds between the page's looks for new asks.
        session_ttl: seconds a token works from the start.
        max_age: seconds an ask stays on show (a harness's own ``pending_ask_ttl`` when
            ``asks`` is one): an older ask is no longer applied by any host.
        max_failures: failed attempts (tokens that are not one) within
            ``failure_window`` seconds after which every request is refused until they
            stop.
        failure_window: see ``max_failures``.

    Raises:
        ValueError: no user, an empty or repeated name, a person without an approver key
            (over a store), or a non-positive interval.
    """

    def __init__(
        self,
        asks: AskStore | Harness,
        *,
        users: Sequence[str],
        poll_interval: float = 1.0,
        session_ttl: float = 12 * 3600.0,
        max_age: float = 86_400.0,
        max_failures: int = 10,
        failure_window: float = 60.0,
    ) -> None:
        if poll_interval <= 0 or session_ttl <= 0 or max_age <= 0 or failure_window <= 0:
            raise ValueError(
                "poll_interval, session_ttl, max_age and failure_window must be positive"
            )
        if max_failures < 1:
            raise ValueError("max_failures must be at least 1")
        self.harness = asks if isinstance(asks, Harness) else None
        self.store: AskStore = asks.ask_store if isinstance(asks, Harness) else asks
        self.max_age = self.harness.pending_ask_ttl if self.harness is not None else max_age
        self._swept_at = 0.0
        self.poll_interval = poll_interval
        self.people = People(users, ttl=session_ttl)
        self.failures = Failures(max_failures=max_failures, window=failure_window)
        if self.harness is None:
            keyring = getattr(self.store, "approvers", None)
            for user in users:
                if keyring is None or keyring.credential(user) is None:
                    raise ValueError(
                        f"{user!r} has no approver key for this store: a person registers "
                        f"with `clearance approvers add {user}`"
                    )
        path = getattr(self.store, "path", None)
        self.label = str(path) if path else type(self.store).__name__
        # One store call at a time: a SQLite connection is shared by the worker threads.
        self._store_calls = anyio.CapacityLimiter(1)

    # -- the app ----------------------------------------------------------------------------

    def asgi_app(self, *, port: int) -> Any:
        """The inbox as an ASGI app, for requests addressed to ``127.0.0.1:port`` (or
        ``localhost:port``) only. One inbox serves one address."""
        app = Starlette(
            routes=[
                Route("/", self._page, methods=["GET"]),
                Route("/asks", self._cards, methods=["GET"]),
                Route("/logout", self._logout, methods=["POST"]),
                Route("/answer", self._answer, methods=["POST"]),
                Route("/static/inbox.js", _asset(INBOX_JS, "text/javascript"), methods=["GET"]),
                Route("/static/inbox.css", _asset(INBOX_CSS, "text/css"), methods=["GET"]),
            ]
        )
        return LocalOnly(app, [f"127.0.0.1:{port}", f"localhost:{port}"])

    def _bearer(self, request: Request) -> tuple[str, Person]:
        """The token a request carries and its person.

        Raises:
            _Refused: too many failed attempts lately (429), no token (401), or a token
                that is not one (401, counted).
        """
        wait = self.failures.locked_for()
        if wait > 0:
            raise _Refused(
                429,
                "Too many requests with wrong tokens came to this inbox lately: something on "
                f"this machine is trying tokens. Answers are refused for {math.ceil(wait)} s.",
                retry_after=wait,
            )
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise _Refused(401, _SIGN_IN)
        person = self.people.person(token.strip())
        if person is None:
            self.failures.failed(f"a token that is not one ({request.method} {request.url.path})")
            raise _Refused(401, _SIGN_IN)
        return token.strip(), person

    async def _page(self, request: Request) -> Response:
        return HTMLResponse(inbox_page(store=self.label, poll_ms=round(self.poll_interval * 1000)))

    async def _cards(self, request: Request) -> Response:
        try:
            _, person = self._bearer(request)
        except _Refused as refused:
            return _reply(request, refused, json_always=True)
        cards = ask_list(await self._pending())
        return JSONResponse({"user": person.user, "cards": cards})

    async def _logout(self, request: Request) -> Response:
        try:
            token, _ = self._bearer(request)
        except _Refused as refused:
            return _reply(request, refused)
        self.people.sign_out(token)
        return _reply(request, None, message=_SIGNED_OUT)

    async def _answer(self, request: Request) -> Response:
        try:
            _, person = self._bearer(request)
            form = await _form(request)
            message = await self._give_answer(
                form.get("ask_id") or "",
                form.get("decision") or "",
                scope=form.get("scope"),
                by=person.user,
            )
        except _Refused as refused:
            return _reply(request, refused)
        return _reply(request, None, message=message)

    # -- asks -------------------------------------------------------------------------------

    async def _store(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await anyio.to_thread.run_sync(fn, *args, limiter=self._store_calls)

    async def _pending(self) -> list[StoredAsk]:
        oldest = time.time() - self.max_age
        if oldest - self._swept_at > 60.0:
            # Asks past their life are closed as expired in the store, once a minute.
            self._swept_at = oldest
            await self._store(sweep_expired, self.store, self.max_age)
        found: list[StoredAsk] = await self._store(shown_asks, self.store)
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
        except _Refused:
            raise
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
        ``ready`` gets the address and each person's link once the socket listens.

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
                        user: f"{url}#token={quote(token, safe='')}"
                        for user, token in self.people.tokens.items()
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

_SIGN_IN = (
    "Not signed in: open the link clearance inbox printed for you (it carries your token "
    "after '#')."
)
_SIGNED_OUT = "Signed out. Restart clearance inbox for a new link."


def _answer_in_store(store: AskStore, ask_id: str, answer: Any, by: str) -> None:
    """Answer as ``by``, sealed with their approver key (rule R13)."""
    credential = store.approvers.credential(by)
    if credential is None:  # removed since the inbox started
        raise _Refused(403, f"{by} is no longer an approver here; nothing changed.")
    store.answer(ask_id, answer, credential=credential, via=_VIA)


def _not_pending(ask: StoredAsk) -> str:
    if ask.closed_why == HOST_GONE:
        text = refusal(ask).replace("nothing answered", "nothing changed.")
        return text[:1].upper() + text[1:]
    if ask.status in ("answered", "consumed"):
        given = ask.decision.decision if ask.decision is not None else "an answer"
        who = f" by {ask.answered_by}" if ask.answered_by else ""
        via = f" via {ask.via}" if ask.via else ""
        return f"Ask {ask.ask_id} was already answered ({given}{who}{via}); nothing changed."
    why = f" ({ask.closed_why})" if ask.closed_why else ""
    return f"Ask {ask.ask_id} was closed{why} before this answer; nothing changed."


def _scope_index(raw: str | None, count: int) -> int:
    """The scope number of a form: ASCII digits only (``"²".isdigit()`` is true and
    ``int("²")`` raises; ``int("٣")`` is 3), within the ask's scopes."""
    if raw is None or raw == "":
        return 1
    if not re.fullmatch(r"[0-9]{1,6}", raw) or not 1 <= int(raw) <= count:
        raise _Refused(400, f"the scope is the number of one the ask offers (1 to {count})")
    return int(raw)


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
    json_always: bool = False,
) -> Response:
    """The inbox's reply: JSON for the page's script, else a small page."""
    status, text = (refused.status, refused.message) if refused else (200, message)
    headers = {}
    if refused is not None and refused.retry_after is not None:
        headers["retry-after"] = str(math.ceil(refused.retry_after))
    if _wants_json(request) or json_always:
        return JSONResponse(
            {"ok": refused is None, "message": text}, status_code=status, headers=headers
        )
    title = "Done" if refused is None else _TITLES.get(status, "Refused")
    return HTMLResponse(
        message_page(title, text, back=status != 401), status_code=status, headers=headers
    )


_TITLES = {
    400: "Not understood",
    401: "Not signed in",
    403: "Refused",
    404: "No such ask",
    409: "Not answered",
    413: "Too large",
    415: "Not understood",
    429: "Too many attempts",
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
