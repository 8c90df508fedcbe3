"""The inbox server: its routes, how an answer reaches the ask store, and serving it.

Routes (every one behind :class:`~clearance.inbox._guard.LocalOnly`; the inbox sets no
cookie and reads none, see :mod:`clearance.inbox._auth`):

- ``GET /``: the page, with no ask on it and nothing secret (anyone local may fetch it);
  its script takes the person's token from the link's fragment (``#token=...``), keeps it
  in the tab's ``sessionStorage`` and sends it as ``Authorization: Bearer`` below.
  ``GET /static/...``: script and style.
- ``GET /asks`` (bearer): one page of cards, filtered in the store's query (see
  :mod:`clearance.harness.ask_query`). Query: ``host``, ``tool``, ``principal``,
  ``policy`` (each an exact value), ``group`` (one of those four: the page is ordered by
  it), ``offset`` and ``limit`` (at most 200; 50 by default), ``groups=1`` (also the
  values of the four fields with their counts, for the filters), and ``id`` (repeated:
  only the cards of those asks that the filter holds, what the page fetches when an
  event names them). Reply: ``{"user", "cards", "total", "waiting", "offset", "limit"}``
  (``total``: every shown ask the filter holds; ``waiting``: the pending ones), with
  ``"groups"`` when asked. The shown asks are the pending ones and those whose host is
  gone (shown as such, with no answer form).
- ``GET /events`` (bearer): server-sent events saying what changed (see
  :mod:`clearance.inbox._events`): ``hello`` first, then ``change``, ``outage`` and
  ``restored``; a comment every 15 s keeps it open, and it ends when the token does.
- ``POST /answer`` (bearer; a form: ``ask_id``, ``decision``, ``scope``, ``seen``):
  answers a pending ask as the token's person, through the inbox. ``seen`` is the digest
  of the card the person was shown (:func:`~clearance.inbox._render.seen_digest`): an
  ask that changed since is refused (409).
- ``POST /answer-group`` (bearer; a form: ``decision``, and per ask ``ask_id``, ``seen``
  and ``scope``, in order; optionally the group's ``host``, ``tool``, ``principal`` or
  ``policy``): answers each ask named, and only those, exactly as ``POST /answer`` would
  (the same checks, one at a time, each sealed with the person's key); an ask not in the
  group named is refused. Reply: ``{"ok", "message", "results": [{"ask_id", "ok",
  "status", "message"}]}``, 200 when every ask was answered, else the first refusal's
  status.
- ``POST /logout`` (bearer) ends the token.

Refusals are a status and one sentence, never an exception: no token or one that is not
(401), too many failed attempts lately (429, with ``Retry-After``), a malformed form or
query (400, 413, 415), no such ask (404), an ask no longer pending (409: answered, by whom
and through what; closed; its host gone: the process whose call waited on it stopped; or
changed since it was shown), the ask store unreachable (503: the page shows one banner and
disables answering; the inbox logs one line when the outage starts and one when it ends,
never a traceback per request). The reply is JSON (``{"ok", "message"}``) when the
request accepts it, else a small page.

Who answers (rule R13): over an ask store, the inbox seals each answer with the person's
approver key (``clearance approvers add NAME``; an inbox refuses to start for a person
without one); beside a harness, it is part of the host and answers through
``harness.answer_ask``.
"""

from __future__ import annotations

import functools
import logging
import math
import re
import socket
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, quote

import anyio
import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from clearance._serving import uvicorn_serving
from clearance.errors import AskError, ConfigError, StoreError
from clearance.harness.approvals import coerce_decision
from clearance.harness.ask_query import (
    GROUPS,
    AskFilter,
    GroupBy,
    States,
    shown_groups,
    shown_page,
)
from clearance.harness.ask_store import (
    HOST_GONE,
    AskStore,
    StoredAsk,
    refusal,
    sweep_expired,
)
from clearance.harness.session import Harness
from clearance.inbox._assets import INBOX_CSS, INBOX_JS
from clearance.inbox._auth import Failures, People, Person
from clearance.inbox._events import Broadcast, changes, sse
from clearance.inbox._guard import LocalOnly
from clearance.inbox._render import (
    ANSWER_LABELS,
    ask_list,
    inbox_page,
    message_page,
    seen_digest,
)

__all__ = ["MAX_PAGE", "Inbox", "InboxStarted"]

_MAX_FORM = 16 * 1024
"""Bytes a form may have: an answer is a few short fields."""

MAX_PAGE = 200
"""Asks one page, one group answer or one look by id holds at most."""

_MAX_GROUP_FORM = 64 * 1024
"""Bytes a group answer may have: :data:`MAX_PAGE` asks' ids, digests and scopes."""

_VIA = "inbox"

_RESCAN = 5.0
"""Seconds between the watcher's looks at the store when nothing said it changed: a
host's lease can lapse without a write."""

_GROUPS_FOR = 5.0
"""Seconds the filters' menus of one filter are reused (their counts lag that much)."""

_KEEPALIVE = 15.0
"""Seconds between comments on an idle event stream (and looks at its token)."""

_OUTAGE = (StoreError, sqlite3.Error, OSError)
"""What a store raises when it cannot be reached or read (an outage, not a bug)."""

log = logging.getLogger("clearance.inbox")


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
        poll_interval: seconds between the watcher's looks for a change the store did
            not announce (a SQLite file's version; PostgreSQL notices come at once).
        session_ttl: seconds a token works from the start.
        max_age: seconds an ask stays on show (a harness's own ``pending_ask_ttl`` when
            ``asks`` is one): an older ask is no longer applied by any host.
        max_failures: failed attempts (tokens that are not one) within
            ``failure_window`` seconds after which every request is refused until they
            stop.
        failure_window: see ``max_failures``.
        page_size: asks on one page (at most :data:`MAX_PAGE`).
        max_streams: open event streams (tabs) at most; past it a new one is refused
            (503) until one closes.

    Raises:
        ValueError: no user, an empty or repeated name, a person without an approver key
            (over a store), or a non-positive interval or size.
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
        page_size: int = 50,
        max_streams: int = 64,
    ) -> None:
        if poll_interval <= 0 or session_ttl <= 0 or max_age <= 0 or failure_window <= 0:
            raise ValueError(
                "poll_interval, session_ttl, max_age and failure_window must be positive"
            )
        if max_failures < 1:
            raise ValueError("max_failures must be at least 1")
        if not 1 <= page_size <= MAX_PAGE or max_streams < 1:
            raise ValueError(f"page_size is 1 to {MAX_PAGE} and max_streams at least 1")
        self.harness = asks if isinstance(asks, Harness) else None
        self.store: AskStore = asks.ask_store if isinstance(asks, Harness) else asks
        self.max_age = self.harness.pending_ask_ttl if self.harness is not None else max_age
        self._swept_at = 0.0
        self.poll_interval = poll_interval
        self.page_size = page_size
        self.max_streams = max_streams
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
        self.events = Broadcast()
        """What :meth:`watch` tells the open pages (``GET /events``)."""
        self.outage: str | None = None
        """While the ask store cannot be reached: what the page's banner says."""
        self._announced = True  # the store said something changed (a PostgreSQL notice)
        self._menus: dict[tuple[str | None, ...], tuple[float, Any]] = {}
        self.looks = 0
        """How many times :meth:`watch` read the store's states (it skips a look when
        the store says nothing changed)."""

    # -- the app ----------------------------------------------------------------------------

    def asgi_app(self, *, port: int) -> Any:
        """The inbox as an ASGI app, for requests addressed to ``127.0.0.1:port`` (or
        ``localhost:port``) only. One inbox serves one address; its events need
        :meth:`watch` running beside it (:meth:`serve` runs it)."""
        app = Starlette(
            routes=[
                Route("/", self._page, methods=["GET"]),
                Route("/asks", self._cards, methods=["GET"]),
                Route("/events", self._events, methods=["GET"]),
                Route("/logout", self._logout, methods=["POST"]),
                Route("/answer", self._answer, methods=["POST"]),
                Route("/answer-group", self._answer_group, methods=["POST"]),
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
        return HTMLResponse(inbox_page(store=self.label, page_size=self.page_size))

    async def _cards(self, request: Request) -> Response:
        try:
            _, person = self._bearer(request)
            view = _View.of(request.query_params.multi_items(), self.page_size)
            reply = await self._view(view)
        except _Refused as refused:
            return _reply(request, refused, json_always=True)
        return JSONResponse({"user": person.user, **reply})

    async def _view(self, view: _View) -> dict[str, Any]:
        """What ``GET /asks`` answers for ``view`` (see the module docstring)."""
        await self._sweep()
        now = time.time()
        where = view.where(since=now - self.max_age)
        if view.ids:
            # The asks an event named: each read by id, kept when the filter holds it.
            got = [await self._store(self.store.get, ask_id) for ask_id in view.ids]
            asks = [a for a in got if a is not None and _shown(a) and where.matches(a)]
            counts = await self._store(shown_page, self.store, where, offset=0, limit=0)
        else:
            counts = await self._store(
                shown_page,
                self.store,
                where,
                offset=view.offset,
                limit=view.limit,
                group=view.group,
            )
            asks = counts.asks
        reply: dict[str, Any] = {
            "cards": ask_list(asks, max_age=self.max_age, now=now),
            "total": counts.total,
            "waiting": counts.waiting,
            "offset": view.offset,
            "limit": view.limit,
        }
        if view.groups:
            reply["groups"] = await self._groups(where)
        return reply

    async def _groups(self, where: AskFilter) -> dict[str, list[tuple[str, int]]]:
        """The filters' menus for ``where``: each field's values with their counts, each
        without its own filter. Counting them reads every matching ask's fields (a
        quarter of a second at 10,000 asks), so the menus of one filter are counted at
        most every :data:`_GROUPS_FOR` seconds, for every page that shows them."""
        key = (where.host, where.tool, where.principal, where.policy)
        kept = self._menus.get(key)
        if kept is not None and time.monotonic() - kept[0] < _GROUPS_FOR:
            reused: dict[str, list[tuple[str, int]]] = kept[1]
            return reused
        groups: dict[str, list[tuple[str, int]]] = {}
        for by in GROUPS:
            groups[by] = await self._store(shown_groups, self.store, where.without(by), by)
        if len(self._menus) >= 64:
            self._menus.clear()
        self._menus[key] = (time.monotonic(), groups)
        return groups

    async def _events(self, request: Request) -> Response:
        try:
            token, person = self._bearer(request)
            if len(self.events) >= self.max_streams:
                raise _Refused(503, "Too many pages of this inbox are open; close one.")
        except _Refused as refused:
            return _reply(request, refused, json_always=True)
        return StreamingResponse(
            self._stream(token, person),
            media_type="text/event-stream",
            headers={"x-accel-buffering": "no"},
        )

    async def _stream(self, token: str, person: Person) -> AsyncIterator[str]:
        """One page's events, while its token lasts and the inbox serves."""
        with self.events.subscribe() as events:
            yield sse("hello", {"user": person.user, "outage": self.outage})
            while True:
                event = ": still here\n\n"  # a comment, when nothing happened meanwhile
                # Only the wait is under the deadline: never a yield inside a cancel scope.
                with anyio.move_on_after(_KEEPALIVE):
                    try:
                        event = await events.receive()
                    except anyio.EndOfStream:  # the inbox stops, or this page fell behind
                        return
                if self.people.person(token) is None:  # signed out, or the token expired
                    return
                yield event

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
            form = _single(await _form(request))
            message = await self._give_answer(
                form.get("ask_id") or "",
                form.get("decision") or "",
                scope=form.get("scope"),
                by=person.user,
                seen=form.get("seen"),
            )
        except _Refused as refused:
            return _reply(request, refused)
        return _reply(request, None, message=message)

    async def _answer_group(self, request: Request) -> Response:
        try:
            _, person = self._bearer(request)
            form = await _form(request, limit=_MAX_GROUP_FORM, fields=3 * MAX_PAGE + 8)
            group = _single({k: v for k, v in form.items() if k not in _PER_ASK})
            decision = group.get("decision") or ""
            ids, seen, scopes = (form.get(name, []) for name in _PER_ASK)
            if decision not in ANSWER_LABELS:
                raise _Refused(400, f"an answer is one of {', '.join(ANSWER_LABELS)}")
            if not 1 <= len(ids) <= MAX_PAGE or len(set(ids)) != len(ids):
                raise _Refused(400, f"a group answer names 1 to {MAX_PAGE} different asks")
            if not (len(seen) == len(ids) and len(scopes) in (0, len(ids))) or "" in seen:
                raise _Refused(400, "a group answer has the seen digest (and scope) of each ask")
            named = [(k, v) for k, v in group.items() if k != "decision"]
            where = _View.of(named, self.page_size).where(since=0.0)
        except _Refused as refused:
            return _reply(request, refused)
        results: list[dict[str, Any]] = []
        for n, ask_id in enumerate(ids):
            try:
                message = await self._give_answer(
                    ask_id,
                    decision,
                    scope=scopes[n] if scopes else None,
                    by=person.user,
                    seen=seen[n],
                    where=where,
                )
            except _Refused as refused:
                results.append(_result(ask_id, refused.status, refused.message))
                if refused.status == 503:  # the store is away: the rest is not tried
                    results += [_result(i, 503, _NOT_TRIED) for i in ids[n + 1 :]]
                    break
                continue
            results.append(_result(ask_id, 200, message))
        answered = [r for r in results if r["ok"]]
        failed = [r for r in results if not r["ok"]]
        summary = f"{len(answered)} of {len(ids)} asks answered ({decision}) by {person.user}."
        if failed:
            summary += f" Not answered: {failed[0]['message']}"
        status = failed[0]["status"] if failed else 200
        if not _wants_json(request):
            return _reply(request, _Refused(status, summary) if failed else None, message=summary)
        return JSONResponse(
            {"ok": not failed, "message": summary, "results": results}, status_code=status
        )

    # -- asks -------------------------------------------------------------------------------

    async def _store(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` in a worker thread, one store call at a time.

        Raises:
            _Refused: the store cannot be reached (503); the outage is logged once, when
                it starts (see :meth:`_went_down`), not per request.
        """
        call = functools.partial(fn, *args, **kwargs)
        try:
            result = await anyio.to_thread.run_sync(call, limiter=self._store_calls)
        except _OUTAGE as exc:
            self._went_down(exc)
            raise _Refused(503, self.outage or _OUTAGE_SAYS) from None
        if self.outage is not None:
            self._came_back()
        return result

    def _went_down(self, exc: BaseException) -> None:
        if self.outage is not None:
            return
        self.outage = _OUTAGE_SAYS
        log.warning(
            "inbox: the ask store %s cannot be reached (%s); answering is disabled until it "
            "is back",
            self.label,
            str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
        )
        self.events.publish("outage", {"message": self.outage})

    def _came_back(self) -> None:
        self.outage = None
        log.warning("inbox: the ask store %s is back; answering again", self.label)
        self.events.publish("restored", {})

    async def _sweep(self) -> None:
        """Close as expired the asks past their life, once a minute."""
        oldest = time.time() - self.max_age
        if oldest - self._swept_at > 60.0:
            self._swept_at = oldest
            await self._store(sweep_expired, self.store, self.max_age)

    async def watch(self) -> None:
        """Tell the open pages what changed in the store (``GET /events``), until
        cancelled: :meth:`serve` runs it. It reads ids and states only, when the store
        says it changed (a SQLite file's version, PostgreSQL notices) or every few
        seconds anyway; an outage and its end are events too."""
        subscribe = getattr(self.store, "subscribe", None)
        stop_notices = subscribe(self._notice) if callable(subscribe) else None
        version = getattr(self.store, "version", None)
        told = callable(version) or stop_notices is not None
        tracked = States(self.store)
        seen: dict[str, str] | None = None
        last: Any = None
        looked = -math.inf
        try:
            while True:
                try:
                    now_version = await self._store(version) if callable(version) else None
                    if not (
                        told
                        and now_version == last
                        and not self._announced
                        and time.monotonic() - looked < _RESCAN
                    ):
                        self._announced = False
                        await self._sweep()
                        states = await self._store(tracked.look, time.time() - self.max_age)
                        looked, last = time.monotonic(), now_version
                        self.looks += 1
                        # The first look (and the first after an outage, which ends
                        # with "restored") is what every page reloads anyway.
                        change = None if seen is None else changes(seen, states)
                        if change is not None:
                            self.events.publish("change", change)
                        seen = states
                except _Refused:
                    seen = None
                    tracked.reset()
                await anyio.sleep(self.poll_interval)
        finally:
            if stop_notices is not None:
                stop_notices()

    def _notice(self, ask_id: str | None) -> None:
        """A PostgreSQL notice (from its listener thread): look at the store."""
        self._announced = True

    async def _give_answer(
        self,
        ask_id: str,
        decision: str,
        *,
        scope: str | None,
        by: str,
        seen: str | None = None,
        where: AskFilter | None = None,
    ) -> str:
        """Answer a pending ask as ``by`` (what ``POST /answer`` does): the sentence to
        show.

        Args:
            ask_id: the ask.
            decision: ``deny``, ``allow_once``, ``allow_session`` or ``allow_always``.
            scope: for ``allow_session``/``allow_always``, the number (from 1) of one of
                the ask's suggestions; default the first (the exact call).
            by: who answers.
            seen: the digest of the card the person was shown (None: not sent).
            where: the group the ask must be in (a group answer).

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
        if seen is not None and seen != seen_digest(found):
            raise _Refused(
                409, f"Ask {ask_id} is not the one shown (it changed since); nothing changed."
            )
        if where is not None and not where.matches(found):
            raise _Refused(409, f"Ask {ask_id} is not in the group answered; nothing changed.")
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
        except _OUTAGE as exc:  # beside a harness: its store is away
            self._went_down(exc)
            raise _Refused(503, _OUTAGE_SAYS) from None
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
        config = uvicorn.Config(
            self.asgi_app(port=bound),
            log_level="warning",
            lifespan="off",
            access_log=False,
            timeout_graceful_shutdown=2,
        )
        failed = f"the inbox could not start on 127.0.0.1:{bound}"
        async with (
            uvicorn_serving(config, sock, failed=failed, grace=10),
            anyio.create_task_group() as tg,
        ):
            url = f"http://127.0.0.1:{bound}/"
            if ready is not None:
                links = {
                    user: f"{url}#token={quote(token, safe='')}"
                    for user, token in self.people.tokens.items()
                }
                ready(InboxStarted(url, links))
            tg.start_soon(self.watch)
            try:
                await anyio.sleep_forever()
            finally:
                self.events.close()  # every page's event stream ends


# -- helpers ------------------------------------------------------------------------------

_SIGN_IN = (
    "Not signed in: open the link clearance inbox printed for you (it carries your token "
    "after '#')."
)
_SIGNED_OUT = "Signed out. Restart clearance inbox for a new link."
_OUTAGE_SAYS = (
    "The ask store cannot be reached: answering is disabled until it is back (nothing is "
    "answered meanwhile; the hosts' waiting calls stay waiting or are denied)."
)
_NOT_TRIED = "not tried: the ask store cannot be reached; nothing changed."
_PER_ASK = ("ask_id", "seen", "scope")
"""The fields a group answer has once per ask, in the same order."""


@dataclass(frozen=True, slots=True)
class _View:
    """What ``GET /asks`` (and a group answer's group) asks for: the query, checked."""

    fields: Mapping[str, str]
    group: GroupBy | None
    offset: int
    limit: int
    ids: tuple[str, ...]
    groups: bool

    @classmethod
    def of(cls, items: Iterable[tuple[str, str]], page_size: int) -> _View:
        """The view a query's ``items`` ask for.

        Raises:
            _Refused: an unknown or repeated parameter, or a value out of range (400).
        """
        seen: dict[str, str] = {}
        ids: list[str] = []
        for name, value in items:
            if name == "id" and len(value) <= 1000:
                ids.append(value)
            elif name == "id":
                raise _Refused(400, "an id is too long")
            elif name not in _VIEW_PARAMETERS or name in seen:
                raise _Refused(400, f"the query has {name!r} once at most, of {_VIEW_NAMES}")
            elif len(value) > 1000:
                raise _Refused(400, f"{name} is too long")
            else:
                seen[name] = value
        if len(ids) > MAX_PAGE:
            raise _Refused(400, f"at most {MAX_PAGE} ids at once")
        group = seen.get("group") or None
        if group is not None and group not in GROUPS:
            raise _Refused(400, f"group is one of {', '.join(GROUPS)}")
        return cls(
            fields={k: v for k, v in seen.items() if k in GROUPS and v != ""},
            group=group,
            offset=_number(seen.get("offset"), "offset", 0, 10**9, default=0),
            limit=_number(seen.get("limit"), "limit", 0, MAX_PAGE, default=page_size),
            ids=tuple(ids),
            groups=seen.get("groups") == "1",
        )

    def where(self, *, since: float) -> AskFilter:
        return AskFilter(**self.fields, since=since)


_VIEW_PARAMETERS = frozenset({*GROUPS, "group", "offset", "limit", "groups"})
_VIEW_NAMES = "host, tool, principal, policy, group, offset, limit, groups and id"


def _number(raw: str | None, name: str, low: int, high: int, *, default: int) -> int:
    """A query's number: ASCII digits only, within ``low`` and ``high``."""
    if raw is None or raw == "":
        return default
    if not re.fullmatch(r"[0-9]{1,10}", raw) or not low <= int(raw) <= high:
        raise _Refused(400, f"{name} is a number from {low} to {high}")
    return int(raw)


def _shown(ask: StoredAsk) -> bool:
    return ask.status == "pending" or ask.closed_why == HOST_GONE


def _result(ask_id: str, status: int, message: str) -> dict[str, Any]:
    return {"ask_id": ask_id, "ok": status == 200, "status": status, "message": message}


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


async def _form(
    request: Request, *, limit: int = _MAX_FORM, fields: int = 16
) -> dict[str, list[str]]:
    """The url-encoded form of a POST (each field's values in order), at most ``limit``
    bytes and ``fields`` fields."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise _Refused(415, "send the answer as a form (application/x-www-form-urlencoded)")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise _Refused(413, "the form is too large")
    try:
        return parse_qs(
            body.decode("utf-8"),
            keep_blank_values=True,
            strict_parsing=False,
            max_num_fields=fields,
        )
    except (UnicodeDecodeError, ValueError):
        raise _Refused(400, "the form could not be read") from None


def _single(fields: Mapping[str, list[str]]) -> dict[str, str]:
    """A form whose fields are each sent once."""
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
    503: "The ask store cannot be reached",
}


def _asset(text: str, kind: str) -> Callable[[Request], Any]:
    body = text.encode()

    async def endpoint(request: Request) -> Response:
        return Response(body, media_type=kind)

    return endpoint
