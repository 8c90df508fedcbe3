"""The inbox in a real headless Chromium (Debian's ``chromium``, driven by Playwright):
a host's ask appears on the open page without reloading, a person answers it there, and the
host goes on.

The host runs in this process over a SQLite ask store; ``clearance inbox`` runs in a
subprocess over the same file, as in use. The tests check elements and styles, not
pixels: a page filtered, grouped and a group denied at once (each card red, not green),
every ask counting down, and a store outage as one banner with every button disabled.
Set ``CLEARANCE_INBOX_SCREENSHOT=docs/inbox.png`` to save the grouped page for the docs
(the test takes the screenshot either way, and checks the file).
"""

from __future__ import annotations

import functools
import http.server
import os
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from inbox_support import ALICE, HOSTILE, Host, Running, hostile_ask, serving

from clearance.harness.ask_store import StoredAsk
from clearance.harness.ask_store_sqlite import SqliteAskStore
from clearance.harness.grants import GrantScope

playwright_api = pytest.importorskip("playwright.async_api")

pytestmark = pytest.mark.anyio

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARGS = {
    "path": "notes/release-plan.md",
    "content": "# Release plan\n\n" + "Ship the inbox, then tell everyone about it. " * 12,
}

if not os.path.exists(CHROMIUM):  # .ci/run installs it: never skipped there
    if os.environ.get("CI"):
        raise RuntimeError(f"the browser tests need Debian's chromium at {CHROMIUM}")
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    """A Chromium with a fresh profile: each ``new_context()`` is a separate person.

    ``launch`` starts Chromium with a new temporary ``--user-data-dir`` of its own (it
    refuses one given in ``args``) and removes it when the browser closes.
    """
    async with playwright_api.async_playwright() as p:
        launched = await p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            yield launched
        finally:
            await launched.close()


async def signed_in_page(browser: Any, link: str, *, deaf: bool = False) -> Any:
    """A new person's page: their link opened (the token after ``#`` signs them in).
    ``deaf``: it never hears the inbox's events (a slow network, a laptop lid)."""
    context = await browser.new_context(viewport={"width": 1100, "height": 820})
    page = await context.new_page()
    if deaf:
        await page.route("**/events", lambda route: route.abort())
    await page.goto(link)
    await page.locator("#user").wait_for(state="visible", timeout=15_000)
    # The token left the address bar for this tab's sessionStorage; no cookie anywhere.
    assert "token" not in page.url and "#" not in page.url
    token = link.partition("#token=")[2]
    assert await page.evaluate("sessionStorage.getItem('clearance-inbox-token')") == token
    assert await page.evaluate("document.cookie") == ""
    assert await context.cookies() == []
    # Set on this very document: a reload would lose it.
    await page.evaluate("window.__same_document = true")
    return page


async def same_document(page: Any) -> bool:
    return bool(await page.evaluate("window.__same_document === true"))


async def test_an_ask_appears_live_is_approved_for_the_session_and_the_call_runs(
    browser: Any, inbox_process: Running, tmp_path: Path, workspace: Path
) -> None:
    host = Host(tmp_path / "clearance.db", workspace)
    page = await signed_in_page(browser, inbox_process.links["alice"])
    assert await page.locator("#empty").is_visible()
    outcomes: list[Any] = []
    async with host.harness:
        session = await host.harness.create_session(principal=ALICE)

        async def terminal_ui() -> None:  # a listener that shows asks and answers none
            async for _ in session.permission_asks():
                pass

        ran = anyio.Event()

        async def call() -> None:
            outcomes.append(await session.call_tool("notes__write", ARGS, call_id="c1"))
            ran.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(terminal_ui)
            await anyio.lowlevel.checkpoint()
            tg.start_soon(call)
            card = page.locator("article.ask")
            await card.wait_for(timeout=15_000)  # appears on the open page by itself
            assert await same_document(page)
            assert await page.locator("#count").inner_text() == "1 ask waiting"
            # The deciding field comes first, whole; the long content is elided.
            first = card.locator(".args .arg").first
            assert await first.locator(".name").inner_text() == "path"
            assert await first.locator(".value").inner_text() == '"notes/release-plan.md"'
            assert "characters elided" in await card.locator(".args").first.inner_text()
            await card.get_by_label("path under notes/").check()
            await card.get_by_role("button", name="Allow for this session").click()
            result = card.locator(".result")
            await playwright_api.expect(result).to_have_text(
                "Allowed for this session by alice (the grant covers path under notes/)."
            )
            with anyio.fail_after(15):
                await ran.wait()
            tg.cancel_scope.cancel()
        (outcome,) = outcomes
        assert outcome.status == "ok" and host.ran == [ARGS]
        (decided,) = host.records("permission_decided", "c1")
        assert (decided["by"], decided["via"], decided["answer"]) == (
            "alice",
            "inbox",
            "allow_session",
        )
        # The same call again in that session is not asked again: the session grant holds.
        again = await session.call_tool("notes__write", ARGS, call_id="c2")
        assert again.status == "ok" and again.grant is not None
        assert len(host.records("permission_asked")) == 1
        assert host.asks.pending() == []
    assert await same_document(page)
    await page.context.close()


async def test_answering_an_ask_already_answered_shows_the_refusal(
    browser: Any, inbox_process: Running, tmp_path: Path, workspace: Path
) -> None:
    host = Host(tmp_path / "clearance.db", workspace)
    async with host.harness:
        session = await host.harness.create_session(principal=ALICE)
        paused = await session.authorize("notes.write", ARGS, call_id="c1")
        assert paused.pending
        # Alice's page does not hear from the inbox (a slow network, a laptop lid): the
        # ask stays on it while Bob denies it.
        alice = await signed_in_page(browser, inbox_process.links["alice"], deaf=True)
        bob = await signed_in_page(browser, inbox_process.links["bob"])
        for page in (alice, bob):
            await page.locator("article.ask").wait_for(timeout=15_000)
        await bob.get_by_role("button", name="Deny").click()
        await playwright_api.expect(bob.locator("article.ask .result")).to_have_text(
            "Denied by bob."
        )
        await alice.get_by_role("button", name="Allow once").click()
        refusal = alice.locator("article.ask .result")
        await playwright_api.expect(refusal).to_have_text(
            f"Ask {paused.ask_id} was already answered (deny by bob via inbox); nothing changed."
        )
        assert await alice.locator("article.ask.refused").count() == 1
        assert await alice.locator("article.ask button.allow_once").is_disabled()
        resumed = await session.authorize("notes.write", ARGS, call_id="c1")
        assert resumed.status == "denied" and host.ran == []
    assert await same_document(alice)


async def test_hostile_text_from_the_store_stays_text(
    browser: Any, inbox_process: Running, tmp_path: Path
) -> None:
    store = SqliteAskStore(tmp_path / "clearance.db")
    page = await signed_in_page(browser, inbox_process.links["alice"])
    store.put(hostile_ask())
    card = page.locator("article.ask")
    await card.wait_for(timeout=15_000)
    text = await card.inner_text()
    assert "<script>window.__pwned = 1</script>" in text
    assert "\\u202etxt.exe\\u2066 \\x1b[2J &amp; </textarea>" in text
    assert HOSTILE not in text and "\u202e" not in text
    assert await page.evaluate("window.__pwned === undefined")
    assert await card.locator("img, script, textarea, pre").count() == 0
    await card.locator("button.deny").hover()
    await card.locator(".reason").hover()
    assert await page.evaluate("window.__pwned === undefined")
    await card.get_by_role("button", name="Deny").click()
    await playwright_api.expect(card.locator(".result")).to_have_text("Denied by alice.")
    answered = store.get("ask_hostile")
    assert answered is not None and answered.answered_by == "alice"
    store.close()


class _Elsewhere(http.server.SimpleHTTPRequestHandler):
    """Another local server the person opens in the same browser (one an agent started)."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


async def test_a_page_on_another_loopback_port_cannot_answer(
    browser: Any, inbox_process: Running, tmp_path: Path, workspace: Path
) -> None:
    """Rule R13: the person is signed in; another server on 127.0.0.1 gets every cookie the
    browser holds for it (none from the inbox) and runs script in the same browser: it
    cannot read the token, and nothing it sends answers."""
    host = Host(tmp_path / "clearance.db", workspace)
    page = await signed_in_page(browser, inbox_process.links["alice"])
    site = tmp_path / "elsewhere"
    site.mkdir()
    (site / "index.html").write_text("<!doctype html><title>elsewhere</title><p>hello</p>")
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Elsewhere, directory=str(site))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    inbox = inbox_process.url.rstrip("/")
    try:
        async with host.harness:
            session = await host.harness.create_session(principal=ALICE)
            paused = await session.authorize("notes.write", ARGS, call_id="c1")
            assert paused.pending and paused.ask_id
            await page.locator("article.ask").wait_for(timeout=15_000)
            other = await page.context.new_page()
            await other.goto(f"http://127.0.0.1:{server.server_address[1]}/")
            seen = await other.evaluate(
                """async ([inbox, askId]) => {
                  const out = {cookie: document.cookie,
                               stored: sessionStorage.getItem("clearance-inbox-token")};
                  const body = new URLSearchParams({ask_id: askId, decision: "allow_always"});
                  const tries = [
                    fetch(`${inbox}/answer`, {method: "POST", body, credentials: "include",
                                              mode: "no-cors"}),
                    fetch(`${inbox}/answer`, {method: "POST", body, credentials: "include",
                                              headers: {Authorization: "Bearer x"}}),
                    fetch(`${inbox}/asks`, {credentials: "include"}),
                    fetch(`${inbox}/`, {credentials: "include"}),
                  ];
                  out.read = [];
                  for (const t of tries) {
                    try { const r = await t; out.read.push(await r.text()); }
                    catch (e) { out.read.push(`refused: ${e.name}`); }
                  }
                  return out;
                }""",
                [inbox, paused.ask_id],
            )
            assert seen["cookie"] == "" and seen["stored"] is None
            assert not any("notes.write" in text for text in seen["read"]), seen
            again = await session.authorize("notes.write", ARGS, call_id="c1")
            assert again.pending and host.ran == []
            assert host.asks.get(paused.ask_id).status == "pending"  # type: ignore[union-attr]
    finally:
        server.shutdown()
        server.server_close()


def many_asks(store: Any) -> dict[str, list[str]]:
    """Six asks from three hosts: their ids by host."""
    by_host: dict[str, list[str]] = {}
    plans = [
        ("build-1", "notes.write", {"path": "notes/release-plan.md", "content": "ship it"}),
        ("build-1", "notes.write", {"path": "notes/changelog.md", "content": "fixes"}),
        ("build-1", "notes.write", {"path": "/etc/cron.d/cleanup", "content": "* * * * * rm"}),
        ("laptop", "mail.send", {"to": "team@example.com", "body": "Release today"}),
        ("laptop", "mail.send", {"to": "all@example.com", "body": "Outage window"}),
        ("build-2", "notes.write", {"path": "notes/todo.md", "content": "- review"}),
    ]
    for n, (host, tool, arguments) in enumerate(plans):
        ask = StoredAsk(
            ask_id=f"ask_{n}",
            principal='User::"alice"',
            tool=tool,
            call_id=f"c{n}",
            session_id="s1",
            arguments_hash=f"h{n}",
            arguments=arguments,
            reason="writes outside the sandbox need a person"
            if tool == "notes.write"
            else "mail to a list needs a person",
            policies=("ask-writes",) if tool == "notes.write" else ("ask-mail",),
            suggestions=(GrantScope.exact(arguments), GrantScope.tool()),
            deciding=("path",) if tool == "notes.write" else ("to",),
            host=host,
        )
        store.put(ask)
        by_host.setdefault(host, []).append(ask.ask_id)
    return by_host


def colour(locator: Any, prop: str = "color") -> Any:
    return locator.evaluate(f"(node) => getComputedStyle(node).{prop}")


DENY_RED = "rgb(179, 38, 30)"
ALLOW_GREEN = "rgb(27, 110, 58)"


async def test_a_page_is_filtered_grouped_and_a_group_is_denied_at_once(
    browser: Any, inbox_process: Running, tmp_path: Path
) -> None:
    store = SqliteAskStore(tmp_path / "clearance.db")
    by_host = many_asks(store)
    page = await signed_in_page(browser, inbox_process.links["alice"])
    cards = page.locator("article.ask")
    await playwright_api.expect(cards).to_have_count(6, timeout=15_000)
    assert await page.locator("#count").inner_text() == "6 asks waiting"
    # Each ask counts down the day it can be answered.
    clocks = await page.locator("article.ask .expires").all_inner_texts()
    assert len(clocks) == 6 and all(c.startswith("expires in 23 h") for c in clocks), clocks
    # Filter by host: the store's values with their counts; the address keeps the view.
    await page.locator("#filter-host").select_option("laptop")
    await playwright_api.expect(cards).to_have_count(2)
    assert "host=laptop" in page.url
    assert {await c.get_attribute("data-host") for c in await cards.all()} == {"laptop"}
    options = await page.locator("#filter-host option").all_inner_texts()
    assert options == ["any", "build-1 (3)", "laptop (2)", "build-2 (1)"]
    await page.locator("#filter-host").select_option("")
    await playwright_api.expect(cards).to_have_count(6)
    # Group by host: a section per host, each with its own answer buttons.
    await page.locator("#group").select_option("host")
    groups = page.locator("section.group")
    await playwright_api.expect(groups).to_have_count(3)
    build = page.locator('section.group[data-key="build-1"]')
    assert await build.locator("article.ask").count() == 3
    deny_all = build.get_by_role("button", name="Deny: these 3")
    await playwright_api.expect(deny_all).to_be_enabled()
    shot = os.environ.get("CLEARANCE_INBOX_SCREENSHOT") or str(tmp_path / "inbox.png")
    png = await page.screenshot(path=shot, full_page=True)
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    await deny_all.click()
    results = build.locator(".result")
    await playwright_api.expect(results).to_have_text(["Denied by alice."] * 3)
    # A denial is red, not green.
    for n in range(3):
        assert await colour(results.nth(n)) == DENY_RED
        assert await colour(build.locator("article.ask").nth(n), "borderTopColor") == DENY_RED
    # One ask of another group, allowed on its own: green.
    laptop = page.locator('section.group[data-key="laptop"] article.ask').first
    await laptop.get_by_role("button", name="Allow once").click()
    await playwright_api.expect(laptop.locator(".result")).to_have_text(
        "Allowed once by alice: the call goes on."
    )
    assert await colour(laptop.locator(".result")) == ALLOW_GREEN
    # The inbox's events told the page; its count is the store's.
    await playwright_api.expect(page.locator("#count")).to_have_text("2 asks waiting")
    for ask_id in by_host["build-1"]:
        answered = store.get(ask_id)
        assert answered is not None and answered.answered_by == "alice"
        assert answered.decision is not None and answered.decision.decision == "deny"
    assert [a.ask_id for a in store.pending()] == ["ask_4", "ask_5"]
    store.close()


async def test_a_store_outage_is_one_banner_and_every_button_is_disabled(
    browser: Any, tmp_path: Path
) -> None:
    from postgres_support import Outage, fresh_schema

    from clearance.harness.ask_store_postgres import PostgresAskStore
    from clearance.harness.postgres import PostgresDatabase
    from clearance.inbox import Inbox

    with fresh_schema() as (_, schema), Outage() as outage:
        database = PostgresDatabase(outage.url(schema), timeout=1.0)
        store = PostgresAskStore(database)
        many_asks(store)
        inbox = Inbox(store, users=["alice"], poll_interval=0.2)
        try:
            async with serving(inbox) as started:
                page = await signed_in_page(browser, started.links["alice"])
                await playwright_api.expect(page.locator("article.ask")).to_have_count(
                    6, timeout=15_000
                )
                banner = page.locator("#outage")
                assert await banner.is_hidden()
                outage.cut()
                await playwright_api.expect(banner).to_be_visible(timeout=10_000)
                assert (await banner.inner_text()).startswith("The ask store cannot be reached")
                assert await page.locator('[role="alert"]:visible').count() == 1
                buttons = page.locator("article.ask button")
                assert await buttons.count() == 24
                for n in range(24):
                    assert await buttons.nth(n).is_disabled()
                outage.restore()
                await playwright_api.expect(banner).to_be_hidden(timeout=15_000)
                await playwright_api.expect(buttons.first).to_be_enabled()
                await page.context.close()
        finally:
            store.close()
            database.close()
