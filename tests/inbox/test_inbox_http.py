"""The inbox over HTTP (its ASGI app, in process): bearer tokens and no cookies (rule R13),
failed attempts, Host/Origin, answers, refusals and escaping, against real asks in a real
SQLite ask store."""

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
from inbox_support import ALICE, Host, bearer, hostile_ask
from support import approver

from clearance.harness.approvers import Approvers
from clearance.harness.ask_store import MemoryAskStore, StoredAsk
from clearance.harness.ask_store_sqlite import SqliteAskStore
from clearance.inbox import Inbox

pytestmark = pytest.mark.anyio

PORT = 8766
BASE = f"http://127.0.0.1:{PORT}"
ARGS = {"path": "notes/plan.md", "content": "ship it"}


def token(inbox: Inbox, user: str) -> str:
    """What ``user``'s link carries after ``#`` (what the page sends as a bearer)."""
    return inbox.people.tokens[user]


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
    client: httpx.AsyncClient, token: str, ask_id: str, decision: str, **more: str
) -> httpx.Response:
    """What the page's script sends: a form, its origin, the person's bearer token."""
    return await client.post(
        "/answer",
        data={"ask_id": ask_id, "decision": decision, **more},
        headers={"origin": BASE, "accept": "application/json", **bearer(token)},
    )


async def cards(client: httpx.AsyncClient, token: str) -> str:
    """The cards ``GET /asks`` gives the page (checking it answers)."""
    got = await client.get("/asks", headers=bearer(token))
    assert got.status_code == 200, got.text
    return str(got.json()["cards"])


async def test_the_page_holds_nothing_and_the_token_is_a_bearer_never_a_cookie(
    host: Host,
) -> None:
    await paused(host)
    inbox = Inbox(host.asks, users=["alice"])
    alice = token(inbox, "alice")
    async with client_for(inbox) as client:
        page = await client.get("/")
        assert page.status_code == 200
        # Anyone local may fetch the page: no ask, no token, no name on it.
        assert "notes.write" not in page.text and alice not in page.text
        assert "alice" not in page.text
        for headers in ({}, bearer("not-a-token"), {"authorization": alice}):
            refused = await client.get("/asks", headers=headers)
            assert refused.status_code == 401 and "notes.write" not in refused.text
        got = await client.get("/asks", headers=bearer(alice))
        assert got.status_code == 200 and got.json()["user"] == "alice"
        assert "notes.write" in got.json()["cards"]
        assert not any("set-cookie" in r.headers for r in (page, got))
        # The token as a cookie (or any cookie) answers nothing: there is no cookie session.
        client.cookies.set("clearance_inbox", alice)
        client.cookies.set(f"clearance_inbox_{PORT}", alice)
        assert (await client.get("/asks")).status_code == 401
        assert not client.cookies.get("session")


async def test_answers_need_the_persons_token_and_are_theirs(host: Host) -> None:
    ask_id = await paused(host)
    inbox = Inbox(host.asks, users=["alice", "bob"])
    async with client_for(inbox) as client:
        alice = token(inbox, "alice")
        for wrong in ("", "x" * len(alice), alice[:-1], alice + "x"):
            refused = await answer(client, wrong, ask_id, "allow_once")
            assert refused.status_code == 401, wrong
            assert "Not signed in" in refused.json()["message"]
        missing = await client.post(
            "/answer",
            data={"ask_id": ask_id, "decision": "allow_once"},
            headers={"origin": BASE, "accept": "application/json"},
        )
        assert missing.status_code == 401
        assert stored(host.db, ask_id).status == "pending"
        given = await answer(client, alice, ask_id, "allow_once")
        assert given.status_code == 200, given.text
        assert given.json() == {"ok": True, "message": "Allowed once by alice: the call goes on."}
    found = stored(host.db, ask_id)
    assert (found.status, found.answered_by, found.via) == ("answered", "alice", "inbox")
    # Sealed with alice's approver key (rule R13).
    assert found.seal is not None and found.seal.approver == "alice"


async def test_failed_attempts_are_limited_and_logged(
    host: Host, caplog: pytest.LogCaptureFixture
) -> None:
    ask_id = await paused(host)
    inbox = Inbox(host.asks, users=["alice"], max_failures=3, failure_window=0.5)
    alice = token(inbox, "alice")
    async with client_for(inbox) as client:
        for n in range(3):
            refused = await answer(client, f"guess-{n}", ask_id, "allow_always")
            assert refused.status_code == 401
        logged = [r.getMessage() for r in caplog.records if r.name == "clearance.inbox"]
        assert len([m for m in logged if "refused a request with a token" in m]) == 3
        assert any("trying tokens" in m for m in logged)
        assert not any("guess-" in m for m in logged)  # never the token presented
        # Locked: even the right token is refused, without being looked at.
        locked = await answer(client, alice, ask_id, "allow_once")
        assert locked.status_code == 429 and "trying tokens" in locked.json()["message"]
        assert int(locked.headers["retry-after"]) >= 1
        assert (await client.get("/asks", headers=bearer(alice))).status_code == 429
        assert stored(host.db, ask_id).status == "pending"
        await anyio.sleep(0.6)  # the attempts stopped: the window empties
        given = await answer(client, alice, ask_id, "allow_once")
        assert given.status_code == 200, given.text


async def test_a_person_without_an_approver_key_answers_nothing(host: Host) -> None:
    ask_id = await paused(host)
    # A name no test registers (carol is the CLI tests' approver, in the same directory).
    with pytest.raises(ValueError, match="'erin-never-registered' has no approver key"):
        Inbox(host.asks, users=["alice", "erin-never-registered"])
    dana = approver("dana-removed")
    inbox = Inbox(host.asks, users=["dana-removed"])
    Approvers.default().remove(dana.name)  # removed while the inbox runs
    async with client_for(inbox) as client:
        refused = await answer(client, token(inbox, "dana-removed"), ask_id, "allow_once")
        assert refused.status_code == 403 and "no longer an approver" in refused.json()["message"]
    assert stored(host.db, ask_id).status == "pending"


async def test_requests_for_another_host_or_from_another_origin_are_refused(host: Host) -> None:
    ask_id = await paused(host)
    inbox = Inbox(host.asks, users=["alice"])
    async with client_for(inbox) as client:
        # Even with the person's token (a page elsewhere cannot have it, but say it did).
        alice = token(inbox, "alice")
        form = {"ask_id": ask_id, "decision": "allow_always"}
        # DNS rebinding: the attacker's name resolves here, but the browser says so.
        for host_header in ("evil.example", f"evil.example:{PORT}", "127.0.0.1:1", "127.0.0.1"):
            page = await client.get("/", headers={"host": host_header})
            assert page.status_code == 421, host_header
            assert "notes.write" not in page.text
            listed = await client.get("/asks", headers={"host": host_header, **bearer(alice)})
            assert listed.status_code == 421 and "notes.write" not in listed.text
            sent = await client.post(
                "/answer", data=form, headers={"host": host_header, **bearer(alice)}
            )
            assert sent.status_code == 421
        for origin in ("http://evil.example", "null", f"https://127.0.0.1:{PORT}", BASE + "."):
            sent = await client.post(
                "/answer", data=form, headers={"origin": origin, **bearer(alice)}
            )
            assert sent.status_code == 403, origin
        # A browser that sends no Origin still says where a POST comes from.
        sent = await client.post(
            "/answer", data=form, headers={"sec-fetch-site": "cross-site", **bearer(alice)}
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
        alices = token(inbox, "alice")
        bobs = token(inbox, "bob")
        assert (await answer(bob, bobs, ask_id, "deny")).json()["message"] == "Denied by bob."
        again = await answer(alice, alices, ask_id, "allow_once")
        assert again.status_code == 409
        assert again.json() == {
            "ok": False,
            "message": f"Ask {ask_id} was already answered (deny by bob via inbox); "
            "nothing changed.",
        }
        # Not asking for JSON: a page saying the same.
        plain = await alice.post(
            "/answer",
            data={"ask_id": ask_id, "decision": "allow_once"},
            headers={"origin": BASE, **bearer(alices)},
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
        alice = token(inbox, "alice")
        refused = await answer(client, alice, ask_id, "allow_once")
        assert refused.status_code == 409
        assert refused.json()["message"] == (
            f"Ask {ask_id} was closed (expired) before this answer; nothing changed."
        )
        assert "article" not in await cards(client, alice)


@pytest.mark.parametrize(
    ("fields", "status", "says"),
    [
        ({"decision": "allow_forever"}, 400, "an answer is one of deny, allow_once"),
        ({"decision": "allow_session", "scope": "9"}, 400, "(1 to 3)"),
        ({"decision": "allow_session", "scope": "-1"}, 400, "(1 to 3)"),
        ({"decision": "allow_session", "scope": "1e3"}, 400, "(1 to 3)"),
        # "²".isdigit() is true and int("²") raises (it was a 500); int("٣") is 3.
        ({"decision": "allow_session", "scope": "\u00b2"}, 400, "(1 to 3)"),
        ({"decision": "allow_session", "scope": "\u0663"}, 400, "(1 to 3)"),
        ({"decision": "allow_session", "scope": "\uff12"}, 400, "(1 to 3)"),
    ],
)
async def test_malformed_answers_are_refused_and_change_nothing(
    host: Host, fields: dict[str, str], status: int, says: str
) -> None:
    ask_id = await paused(host)
    inbox = Inbox(host.asks, users=["alice"])
    async with client_for(inbox) as client:
        refused = await answer(client, token(inbox, "alice"), ask_id, **fields)
        assert refused.status_code == status and says in refused.json()["message"]
    assert stored(host.db, ask_id).status == "pending"


async def test_forms_that_are_not_forms_are_refused(host: Host) -> None:
    ask_id = await paused(host)
    inbox = Inbox(host.asks, users=["alice"])
    async with client_for(inbox) as client:
        headers = {"origin": BASE, "accept": "application/json", **bearer(token(inbox, "alice"))}
        body = {"ask_id": ask_id, "decision": "allow_once"}
        as_json = await client.post("/answer", json=body, headers=headers)
        assert as_json.status_code == 415
        twice = await client.post(
            "/answer",
            content=f"ask_id={ask_id}&decision=deny&decision=allow_always",
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
        alice = token(inbox, "alice")
        assert 'value="2"> path under notes/</label>' in await cards(client, alice)
        given = await answer(client, alice, ask_id, "allow_always", scope="2")
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
    "data-host", "data-tool", "data-principal", "data-policy", "data-expires",
}  # fmt: skip


async def test_hostile_store_text_is_shown_as_text() -> None:
    store = MemoryAskStore(approvers=Approvers.default())
    ask_id = "ask_\"><b>&amp;'x"  # markup in the id too: it goes back in the form
    store.put(hostile_ask(ask_id))
    inbox = Inbox(store, users=["alice"])
    async with client_for(inbox) as client:
        alice = token(inbox, "alice")
        shown = await cards(client, alice)
        page = await client.get("/")
        for markup_text in (shown, page.text):
            markup = _Markup()
            markup.feed(markup_text)
            assert markup.tags <= CARD_TAGS | {
                "html", "head", "meta", "title", "link", "script", "body", "main", "h1", "strong",
                "select", "option", "nav",
            }  # fmt: skip
            assert markup.attributes <= CARD_ATTRIBUTES | {
                "lang", "charset", "content", "rel", "href", "src", "defer", "data-page-size",
                "hidden",
            }  # fmt: skip
            assert "<img" not in markup_text and "<script>" not in markup_text
            assert 'onerror="' not in markup_text and "onmouseover='" not in markup_text
            assert (
                "\u202e" not in markup_text
                and "\x1b" not in markup_text
                and "\u2066" not in markup_text
            )
        markup = _Markup()
        markup.feed(shown)
        assert markup.tags <= CARD_TAGS
        text = "".join(markup.text)
        # What a person reads: the markup as text, bidi and escape characters spelled out.
        assert "<script>window.__pwned = 1</script>" in text
        assert "\\u202etxt.exe\\u2066 \\x1b[2J &amp; </textarea>" in text
        assert "<b>" not in shown and markup.tags <= CARD_TAGS
        # The ask id round-trips through the form's hidden field: the ask can be answered.
        (sent_id,) = re.findall(r'name="ask_id" value="([^"]*)"', shown)
        given = await answer(client, alice, html.unescape(sent_id), "deny")
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


async def test_signing_out_ends_the_token(host: Host) -> None:
    await paused(host)
    inbox = Inbox(host.asks, users=["alice", "bob"])
    alice, bob = token(inbox, "alice"), token(inbox, "bob")
    async with client_for(inbox) as client:
        refused = await client.post("/logout", headers={"origin": BASE, **bearer("x")})
        assert refused.status_code == 401
        assert (await client.get("/asks", headers=bearer(alice))).status_code == 200
        out = await client.post("/logout", headers={"origin": BASE, **bearer(alice)})
        assert out.status_code == 200 and "Signed out" in out.text
        assert (await client.get("/asks", headers=bearer(alice))).status_code == 401
        assert (await client.get("/asks", headers=bearer(bob))).status_code == 200
    assert sorted(inbox.people.tokens) == ["bob"]


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
            alice = token(inbox, "alice")
            tg.start_soon(terminal_ui)
            await anyio.lowlevel.checkpoint()
            async with anyio.create_task_group() as calls:
                calls.start_soon(call)
                with anyio.fail_after(5):
                    await asked.wait()
                given = await answer(client, alice, shown[0], "allow_once")
                assert given.status_code == 200
            tg.cancel_scope.cancel()
    assert outcomes[0].status == "ok" and host.ran == [ARGS]
    (decided,) = host.records("permission_decided", "c1")
    assert (decided["by"], decided["via"]) == ("alice", "inbox")


def test_an_inbox_needs_people_with_keys_and_sane_intervals() -> None:
    store = MemoryAskStore(approvers=Approvers.default())
    for users in ([], [""], ["alice", "alice"]):
        with pytest.raises(ValueError):
            Inbox(store, users=users)
    with pytest.raises(ValueError, match="positive"):
        Inbox(store, users=["alice"], poll_interval=0)
    with pytest.raises(ValueError, match="at least 1"):
        Inbox(store, users=["alice"], max_failures=0)
    # A store in memory has no approvers: only an inbox beside its harness answers there.
    with pytest.raises(ValueError, match="'alice' has no approver key"):
        Inbox(MemoryAskStore(), users=["alice"])


async def test_old_asks_are_not_shown_or_answered(host: Host) -> None:
    ask_id = await paused(host)
    inbox = Inbox(host.asks, users=["alice"], max_age=0.05)
    await anyio.sleep(0.1)
    async with client_for(inbox) as client:
        alice = token(inbox, "alice")
        assert "article" not in await cards(client, alice)
        refused = await answer(client, alice, ask_id, "allow_once")
        # The page swept it first (issue 38): closed as expired in the store.
        assert refused.status_code == 409 and "expired" in refused.json()["message"]
    swept = stored(host.db, ask_id)
    assert swept.status == "closed" and swept.closed_why == "expired"
