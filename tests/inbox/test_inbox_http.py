"""The inbox over HTTP (its ASGI app, in process): sign-in, CSRF, Host/Origin, answers,
refusals and escaping, against real asks in a real SQLite ask store."""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest
from inbox_support import ALICE, Host, hostile_ask, sign_in

from clearance.harness.approvers import Approvers
from clearance.harness.ask_store import MemoryAskStore, StoredAsk
from clearance.harness.ask_store_sqlite import SqliteAskStore
from clearance.inbox import Inbox

pytestmark = pytest.mark.anyio

PORT = 8766
BASE = f"http://127.0.0.1:{PORT}"
ARGS = {"path": "notes/plan.md", "content": "ship it"}


def link(inbox: Inbox, user: str) -> str:
    return f"{BASE}/login?token={inbox.logins.tokens[user]}"


def client_for(inbox: Inbox) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=inbox.asgi_app(port=PORT))
    return httpx.AsyncClient(transport=transport, base_url=BASE)


@pytest.fixture
async def host(tmp_path: Path) -> AsyncIterator[Host]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    host = Host(tmp_path / "clearance.db", workspace)
    async with host.harness:
        yield host


async def paused(host: Host, call_id: str = "c1", arguments: Any = None) -> str:
    """An ask left pending by a host that pauses (``authorize``): its id."""
    session = await host.harness.create_session(principal=ALICE)
    auth = await session.authorize("notes.write", arguments or ARGS, call_id=call_id)
    assert auth.pending and auth.ask_id is not None
    return auth.ask_id


def stored(db: Path, ask_id: str) -> StoredAsk:
    other = SqliteAskStore(db)  # another process's view of the file
    try:
        found = other.get(ask_id)
    finally:
        other.close()
    assert found is not None
    return found


async def answer(
    client: httpx.AsyncClient, csrf: str, ask_id: str, decision: str, **more: str
) -> httpx.Response:
    return await client.post(
        "/answer",
        data={"csrf": csrf, "ask_id": ask_id, "decision": decision, **more},
        headers={"origin": BASE, "accept": "application/json"},
    )


async def test_a_login_link_works_once_and_sets_a_strict_httponly_cookie(host: Host) -> None:
    await paused(host)
    inbox = Inbox(host.asks, users=["alice"])
    token = inbox.logins.tokens["alice"]
    async with client_for(inbox) as client:
        nobody = await client.get("/")
        assert nobody.status_code == 401 and "notes.write" not in nobody.text
        assert (await client.get("/asks")).status_code == 401
        assert (await client.get("/login?token=not-a-token")).status_code == 403
        # Opening the link (or a link preview fetching it) does not spend it.
        for _ in range(2):
            page = await client.get(f"/login?token={token}")
            assert page.status_code == 200 and "Sign in as <strong>alice</strong>" in page.text
        done = await client.post("/login", data={"token": token}, headers={"origin": BASE})
        assert done.status_code == 303 and done.headers["location"] == "/"
        cookie = done.headers["set-cookie"]
        attributes = {part.strip().lower() for part in cookie.split(";")}
        assert cookie.startswith(f"clearance_inbox_{PORT}=")
        assert {"httponly", "samesite=strict", "path=/"} <= attributes
        assert (await client.get("/")).status_code == 200
    async with client_for(inbox) as stranger:
        again = await stranger.post("/login", data={"token": token}, headers={"origin": BASE})
        assert again.status_code == 403 and "already used" in again.text
        assert (await stranger.get(f"/login?token={token}")).status_code == 403
        # The spent token is no cookie either.
        stranger.cookies.set(f"clearance_inbox_{PORT}", token)
        assert (await stranger.get("/asks")).status_code == 401


async def test_answers_need_the_sessions_csrf_token(host: Host) -> None:
    ask_id = await paused(host)
    inbox = Inbox(host.asks, users=["alice", "bob"])
    async with client_for(inbox) as bob:
        bobs_csrf = await sign_in(bob, link(inbox, "bob"))
    async with client_for(inbox) as client:
        refused = await answer(client, "x", ask_id, "allow_once")
        assert refused.status_code == 401
        csrf = await sign_in(client, link(inbox, "alice"))
        for wrong in ("", "x" * len(csrf), bobs_csrf):
            refused = await answer(client, wrong, ask_id, "allow_once")
            assert refused.status_code == 403, wrong
            assert "CSRF" in refused.json()["message"]
        missing = await client.post(
            "/answer",
            data={"ask_id": ask_id, "decision": "allow_once"},
            headers={"origin": BASE, "accept": "application/json"},
        )
        assert missing.status_code == 403
        assert stored(host.db, ask_id).status == "pending"
        given = await answer(client, csrf, ask_id, "allow_once")
        assert given.status_code == 200, given.text
        assert given.json() == {"ok": True, "message": "Allowed once by alice: the call goes on."}
    found = stored(host.db, ask_id)
    assert (found.status, found.answered_by, found.via) == ("answered", "alice", "inbox")


async def test_requests_for_another_host_or_from_another_origin_are_refused(host: Host) -> None:
    ask_id = await paused(host)
    inbox = Inbox(host.asks, users=["alice"])
    async with client_for(inbox) as client:
        csrf = await sign_in(client, link(inbox, "alice"))
        # DNS rebinding: the attacker's name resolves here, but the browser says so.
        for host_header in ("evil.example", f"evil.example:{PORT}", "127.0.0.1:1", "127.0.0.1"):
            page = await client.get("/", headers={"host": host_header})
            assert page.status_code == 421, host_header
            assert "notes.write" not in page.text and csrf not in page.text
            sent = await client.post(
                "/answer",
                data={"csrf": csrf, "ask_id": ask_id, "decision": "allow_always"},
                headers={"host": host_header},
            )
            assert sent.status_code == 421
        for origin in ("http://evil.example", "null", f"https://127.0.0.1:{PORT}", BASE + "."):
            sent = await client.post(
                "/answer",
                data={"csrf": csrf, "ask_id": ask_id, "decision": "allow_always"},
                headers={"origin": origin},
            )
            assert sent.status_code == 403, origin
        # A browser that sends no Origin still says where a POST comes from.
        sent = await client.post(
            "/answer",
            data={"csrf": csrf, "ask_id": ask_id, "decision": "allow_always"},
            headers={"sec-fetch-site": "cross-site"},
        )
        assert sent.status_code == 403 and "Sec-Fetch-Site" in sent.text
        assert stored(host.db, ask_id).status == "pending"
        # A link from elsewhere may still open a page.
        opened = await client.get("/", headers={"sec-fetch-site": "cross-site"})
        assert opened.status_code == 200
        # Its own address by name is accepted.
        assert (await client.get("/", headers={"host": f"localhost:{PORT}"})).status_code == 200


async def test_a_second_answer_is_refused_saying_who_answered(host: Host) -> None:
    ask_id = await paused(host)
    inbox = Inbox(host.asks, users=["alice", "bob"])
    async with client_for(inbox) as alice, client_for(inbox) as bob:
        alices = await sign_in(alice, link(inbox, "alice"))
        bobs = await sign_in(bob, link(inbox, "bob"))
        assert (await answer(bob, bobs, ask_id, "deny")).json()["message"] == "Denied by bob."
        again = await answer(alice, alices, ask_id, "allow_once")
        assert again.status_code == 409
        assert again.json() == {
            "ok": False,
            "message": f"Ask {ask_id} was already answered (deny by bob via inbox); "
            "nothing changed.",
        }
        # Without the page's script (a plain form post): a page saying the same.
        plain = await alice.post(
            "/answer",
            data={"csrf": alices, "ask_id": ask_id, "decision": "allow_once"},
            headers={"origin": BASE},
        )
        assert plain.status_code == 409 and "text/html" in plain.headers["content-type"]
        assert "was already answered (deny by bob via inbox)" in plain.text
        unknown = await answer(alice, alices, "ask_nope", "allow_once")
        assert unknown.status_code == 404 and "no ask 'ask_nope'" in unknown.json()["message"]
    assert stored(host.db, ask_id).answered_by == "bob"


async def test_a_closed_ask_is_refused(host: Host) -> None:
    ask_id = await paused(host)
    host.asks.withdraw(ask_id, "expired")
    inbox = Inbox(host.asks, users=["alice"])
    async with client_for(inbox) as client:
        csrf = await sign_in(client, link(inbox, "alice"))
        refused = await answer(client, csrf, ask_id, "allow_once")
        assert refused.status_code == 409
        assert refused.json()["message"] == (
            f"Ask {ask_id} was closed (expired) before this answer; nothing changed."
        )
        assert "article" not in (await client.get("/asks")).text


@pytest.mark.parametrize(
    ("fields", "status", "says"),
    [
        ({"decision": "allow_forever"}, 400, "an answer is one of deny, allow_once"),
        ({"decision": "allow_session", "scope": "9"}, 400, "(1 to 3)"),
        ({"decision": "allow_session", "scope": "-1"}, 400, "(1 to 3)"),
        ({"decision": "allow_session", "scope": "1e3"}, 400, "(1 to 3)"),
    ],
)
async def test_malformed_answers_are_refused_and_change_nothing(
    host: Host, fields: dict[str, str], status: int, says: str
) -> None:
    ask_id = await paused(host)
    inbox = Inbox(host.asks, users=["alice"])
    async with client_for(inbox) as client:
        csrf = await sign_in(client, link(inbox, "alice"))
        refused = await answer(client, csrf, ask_id, **fields)
        assert refused.status_code == status and says in refused.json()["message"]
    assert stored(host.db, ask_id).status == "pending"


async def test_forms_that_are_not_forms_are_refused(host: Host) -> None:
    ask_id = await paused(host)
    inbox = Inbox(host.asks, users=["alice"])
    async with client_for(inbox) as client:
        csrf = await sign_in(client, link(inbox, "alice"))
        headers = {"origin": BASE, "accept": "application/json"}
        body = {"csrf": csrf, "ask_id": ask_id, "decision": "allow_once"}
        as_json = await client.post("/answer", json=body, headers=headers)
        assert as_json.status_code == 415
        twice = await client.post(
            "/answer",
            content=f"csrf={csrf}&ask_id={ask_id}&decision=deny&decision=allow_always",
            headers={**headers, "content-type": "application/x-www-form-urlencoded"},
        )
        assert twice.status_code == 400 and "once" in twice.json()["message"]
        huge = await client.post("/answer", data={**body, "pad": "x" * 20_000}, headers=headers)
        assert huge.status_code == 413
    assert stored(host.db, ask_id).status == "pending"


async def test_the_chosen_scope_becomes_the_grant_and_the_journal_names_the_person(
    host: Host,
) -> None:
    ask_id = await paused(host)
    inbox = Inbox(host.asks, users=["alice"])
    async with client_for(inbox) as client:
        csrf = await sign_in(client, link(inbox, "alice"))
        page = (await client.get("/")).text
        assert 'value="2"> path under notes/</label>' in page
        given = await answer(client, csrf, ask_id, "allow_always", scope="2")
        assert given.json()["message"] == (
            "Allowed always by alice (the grant covers path under notes/)."
        )
    # The host (a new session: after a restart, say) tries the paused call again.
    session = await host.harness.create_session(principal=ALICE)
    resumed = await session.authorize("notes.write", ARGS, call_id="c1")
    assert resumed.allowed and resumed.answered_by == "alice"
    (decided,) = host.records("permission_decided", "c1")
    assert (decided["by"], decided["via"], decided["answer"]) == ("alice", "inbox", "allow_always")
    assert decided["grant"] is not None
    # The grant covers the prefix chosen, not more.
    other = {"path": "notes/other.md", "content": "x"}
    assert (await session.authorize("notes.write", other, call_id="c2")).allowed
    outside = {"path": "plans/a.md", "content": "x"}
    assert (await session.authorize("notes.write", outside, call_id="c3")).pending


class _Markup(HTMLParser):
    """Every tag and attribute name in a piece of HTML, and its text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.attributes: set[str] = set()
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attributes |= {name for name, _ in attrs}

    def handle_data(self, data: str) -> None:
        self.text.append(data)


CARD_TAGS = {
    "article", "header", "h2", "h3", "span", "time", "p", "div", "details", "summary",
    "code", "form", "input", "fieldset", "legend", "label", "button", "section",
}  # fmt: skip
CARD_ATTRIBUTES = {
    "class", "id", "data-ask-id", "datetime", "type", "name", "value", "checked",
    "method", "action", "role", "open",
}  # fmt: skip


async def test_hostile_store_text_is_shown_as_text() -> None:
    store = MemoryAskStore(approvers=Approvers.default())
    ask_id = "ask_\"><b>&amp;'x"  # markup in the id too: it goes back in the form
    store.put(hostile_ask(ask_id))
    inbox = Inbox(store, users=["alice"])
    async with client_for(inbox) as client:
        csrf = await sign_in(client, link(inbox, "alice"))
        cards = await client.get("/asks")
        page = await client.get("/")
        for markup_text in (cards.text, page.text):
            markup = _Markup()
            markup.feed(markup_text)
            assert markup.tags <= CARD_TAGS | {
                "html", "head", "meta", "title", "link", "script", "body", "main", "h1", "strong"
            }  # fmt: skip
            assert markup.attributes <= CARD_ATTRIBUTES | {
                "lang", "charset", "content", "rel", "href", "src", "defer", "data-poll", "hidden"
            }  # fmt: skip
            assert "<img" not in markup_text and "<script>" not in markup_text
            assert 'onerror="' not in markup_text and "onmouseover='" not in markup_text
            assert (
                "\u202e" not in markup_text
                and "\x1b" not in markup_text
                and "\u2066" not in markup_text
            )
        markup = _Markup()
        markup.feed(cards.text)
        assert markup.tags <= CARD_TAGS
        text = "".join(markup.text)
        # What a person reads: the markup as text, bidi and escape characters spelled out.
        assert "<script>window.__pwned = 1</script>" in text
        assert "\\u202etxt.exe\\u2066 \\x1b[2J &amp; </textarea>" in text
        assert "<b>" not in cards.text and markup.tags <= CARD_TAGS
        # The ask id round-trips through the form's hidden field: the ask can be answered.
        (sent_id,) = re.findall(r'name="ask_id" value="([^"]*)"', cards.text)
        given = await answer(client, csrf, html.unescape(sent_id), "deny")
        assert given.status_code == 200, given.text
    answered = store.get(ask_id)
    assert answered is not None and answered.status == "answered"


async def test_every_response_carries_the_security_headers(host: Host) -> None:
    await paused(host)
    inbox = Inbox(host.asks, users=["alice"])
    async with client_for(inbox) as client:
        responses = [
            await client.get("/"),
            await client.get("/static/inbox.js"),
            await client.get("/", headers={"host": "evil.example"}),
            await client.post("/answer", data={}, headers={"origin": "http://evil.example"}),
        ]
    for response in responses:
        policy = response.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
        assert "unsafe-inline" not in policy
        assert response.headers["x-frame-options"] == "DENY"
        assert response.headers["referrer-policy"] == "same-origin"
        assert response.headers["cache-control"] == "no-store"
    assert responses[1].headers["content-type"].startswith("text/javascript")


async def test_signing_out_ends_the_session(host: Host) -> None:
    await paused(host)
    inbox = Inbox(host.asks, users=["alice"])
    async with client_for(inbox) as client:
        csrf = await sign_in(client, link(inbox, "alice"))
        refused = await client.post("/logout", data={"csrf": "x"}, headers={"origin": BASE})
        assert refused.status_code == 403
        assert (await client.get("/asks")).status_code == 200
        out = await client.post("/logout", data={"csrf": csrf}, headers={"origin": BASE})
        assert out.status_code == 200 and "Signed out" in out.text
        client.cookies.clear()
        assert (await client.get("/asks")).status_code == 401


async def test_beside_a_harness_an_answer_releases_a_call_waiting_in_process(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    host = Host(tmp_path / "clearance.db", workspace)
    outcomes: list[Any] = []
    async with host.harness:
        inbox = Inbox(host.harness, users=["alice"])
        session = await host.harness.create_session(principal=ALICE)
        shown: list[str] = []
        asked = anyio.Event()

        async def terminal_ui() -> None:  # shows each ask, answers none
            async for ask in session.permission_asks():
                shown.append(ask.ask_id)
                asked.set()

        async def call() -> None:
            outcomes.append(await session.call_tool("notes__write", ARGS, call_id="c1"))

        async with client_for(inbox) as client, anyio.create_task_group() as tg:
            csrf = await sign_in(client, link(inbox, "alice"))
            tg.start_soon(terminal_ui)
            await anyio.lowlevel.checkpoint()
            async with anyio.create_task_group() as calls:
                calls.start_soon(call)
                with anyio.fail_after(5):
                    await asked.wait()
                given = await answer(client, csrf, shown[0], "allow_once")
                assert given.status_code == 200
            tg.cancel_scope.cancel()
    assert outcomes[0].status == "ok" and host.ran == [ARGS]
    (decided,) = host.records("permission_decided", "c1")
    assert (decided["by"], decided["via"]) == ("alice", "inbox")


def test_an_inbox_needs_people_and_sane_intervals() -> None:
    store = MemoryAskStore()
    for users in ([], [""], ["alice", "alice"]):
        with pytest.raises(ValueError):
            Inbox(store, users=users)
    with pytest.raises(ValueError, match="positive"):
        Inbox(store, users=["alice"], poll_interval=0)


async def test_old_asks_are_not_shown_or_answered(host: Host) -> None:
    ask_id = await paused(host)
    inbox = Inbox(host.asks, users=["alice"], max_age=0.05)
    await anyio.sleep(0.1)
    async with client_for(inbox) as client:
        csrf = await sign_in(client, link(inbox, "alice"))
        assert "article" not in (await client.get("/asks")).text
        refused = await answer(client, csrf, ask_id, "allow_once")
        assert refused.status_code == 409 and "too old" in refused.json()["message"]
    assert stored(host.db, ask_id).status == "pending"
