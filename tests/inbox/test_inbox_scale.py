"""The inbox at scale (issues 34 and 38), over HTTP against real stores: filters, groups
and pages answered in the store's query; a group answered at once, each ask with the
checks of a single answer (rule R13: sealed with the person's key) and only the asks the
person was shown; the events a page gets instead of polling; a store outage as one
clear refusal and one log line, never a traceback per request."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import anyio
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from inbox_support import bearer, serving
from postgres_support import Outage, fresh_schema
from support import approver

from clearance.harness.approvers import Approvers
from clearance.harness.ask_store import MemoryAskStore, StoredAsk
from clearance.harness.ask_store_sqlite import SqliteAskStore
from clearance.harness.grants import GrantScope
from clearance.inbox import Inbox
from clearance.inbox._render import seen_digest

pytestmark = pytest.mark.anyio

PORT = 8766
BASE = f"http://127.0.0.1:{PORT}"
HOSTS = ("build-1", "build-2", "laptop")
TOOLS = ("notes.write", "mail.send")


def an_ask(n: int, *, host: str, tool: str, policy: str) -> StoredAsk:
    return StoredAsk(
        ask_id=f"ask_{n:04d}",
        principal='User::"alice"' if n % 2 else 'User::"bob"',
        tool=tool,
        call_id=f"c{n}",
        session_id="s1",
        arguments_hash=f"h{n}",
        arguments={"path": f"notes/{n}.md", "content": "x"},
        reason=f"reason of {policy}",
        policies=(policy,),
        suggestions=(GrantScope.exact({"path": f"notes/{n}.md"}), GrantScope.tool()),
        deciding=("path",),
        host=host,
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteAskStore]:
    """30 asks: hosts round-robin, tools alternating, a policy per ten."""
    approver("alice")
    opened = SqliteAskStore(tmp_path / "asks.db")
    for n in range(30):
        opened.put(
            an_ask(
                n,
                host=HOSTS[n % 3],
                tool=TOOLS[n % 2],
                policy=("review", "ask:notes.write", "big-refund")[n // 10],
            )
        )
    yield opened
    opened.close()


def client_for(inbox: Inbox) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=inbox.asgi_app(port=PORT))
    return httpx.AsyncClient(transport=transport, base_url=BASE)


def alice_of(inbox: Inbox) -> dict[str, str]:
    return {**bearer(inbox.people.tokens["alice"]), "accept": "application/json"}


async def post_form(
    client: httpx.AsyncClient, path: str, pairs: list[tuple[str, str]], headers: dict[str, str]
) -> httpx.Response:
    """A form with repeated fields, in the order given (as the page sends a group)."""
    return await client.post(
        path,
        content=urlencode(pairs),
        headers={**headers, "content-type": "application/x-www-form-urlencoded"},
    )


def ids_in(cards: str) -> list[str]:
    return [part.split('"', 1)[0] for part in cards.split('data-ask-id="')[1:]]


async def test_filters_pages_and_groups_come_from_the_store(store: SqliteAskStore) -> None:
    inbox = Inbox(store, users=["alice"], page_size=4)
    async with client_for(inbox) as client:
        alice = alice_of(inbox)
        first = (await client.get("/asks", headers=alice)).json()
        assert (first["total"], first["waiting"], first["limit"]) == (30, 30, 4)
        assert ids_in(first["cards"]) == ["ask_0000", "ask_0001", "ask_0002", "ask_0003"]
        assert "groups" not in first
        # A filter in the query: host and policy; the next page from an offset.
        got = await client.get(
            "/asks",
            params={"host": "build-2", "policy": "ask:notes.write", "offset": "2", "groups": "1"},
            headers=alice,
        )
        reply = got.json()
        expected = [f"ask_{n:04d}" for n in range(10, 20) if n % 3 == 1]
        assert reply["total"] == len(expected) == 4
        assert ids_in(reply["cards"]) == expected[2:] == ["ask_0016", "ask_0019"]
        # The counts of each field, each without its own filter (the menu's choices).
        assert reply["groups"]["host"] == [["build-2", 4], ["build-1", 3], ["laptop", 3]]
        assert dict(reply["groups"]["policy"]) == {
            "review": 3,
            "ask:notes.write": 4,
            "big-refund": 3,
        }
        assert dict(reply["groups"]["tool"]) == {"notes.write": 2, "mail.send": 2}
        # Grouped by host: the page is ordered by host, then oldest first.
        grouped = (
            await client.get("/asks", params={"group": "host", "limit": "5"}, headers=alice)
        ).json()
        assert ids_in(grouped["cards"]) == [f"ask_{n:04d}" for n in (0, 3, 6, 9, 12)]
        assert 'data-host="build-1"' in grouped["cards"]
        # By id (what a page fetches when an event names asks): only those the filter holds.
        named = await client.get(
            "/asks",
            params=[("host", "laptop"), ("limit", "0"), ("id", "ask_0002"), ("id", "ask_0003")],
            headers=alice,
        )
        assert ids_in(named.json()["cards"]) == ["ask_0002"] and named.json()["total"] == 10
        for bad, says in (
            ({"limit": "201"}, "limit is a number from 0 to 200"),
            ({"offset": "-1"}, "offset is a number"),
            ({"group": "reason"}, "group is one of host, tool, principal, policy"),
            ({"colour": "red"}, "'colour'"),
        ):
            refused = await client.get("/asks", params=bad, headers=alice)
            assert refused.status_code == 400 and says in refused.json()["message"], bad


async def test_each_card_counts_down_and_says_why(store: SqliteAskStore) -> None:
    inbox = Inbox(store, users=["alice"], max_age=3600.0)
    async with client_for(inbox) as client:
        cards = (await client.get("/asks", params={"limit": "1"}, headers=alice_of(inbox))).json()
    ask = store.get("ask_0000")
    assert ask is not None
    assert f'data-expires="{ask.created_at + 3600.0:.3f}"' in cards["cards"]
    assert ">expires in 59 min" in cards["cards"] or ">expires in 1 h 00 min" in cards["cards"]
    assert "reason of review" in cards["cards"]


async def test_a_group_answer_answers_each_ask_shown_as_one_answer_would(
    store: SqliteAskStore,
) -> None:
    inbox = Inbox(store, users=["alice"])
    group = [f"ask_{n:04d}" for n in range(30) if n % 3 == 2][:4]  # host laptop
    digests = [seen_digest(store.get(i)) for i in group]  # type: ignore[arg-type]
    async with client_for(inbox) as client:
        alice = {**alice_of(inbox), "origin": BASE}
        # An ask changed since it was shown (same id, other arguments) is refused, and an
        # ask of another group named in this one is refused: the others are answered.
        changed = store.get(group[1])
        assert changed is not None
        store.put(StoredAsk(**{**_fields(changed), "arguments": {"path": "/etc/passwd"}}))
        other = store.get("ask_0000")  # host build-1
        assert other is not None
        form = [("decision", "deny"), ("host", "laptop")]
        for ask_id, seen in [*zip(group, digests, strict=True), ("ask_0000", seen_digest(other))]:
            form += [("ask_id", ask_id), ("seen", seen), ("scope", "")]
        reply = await post_form(client, "/answer-group", form, alice)
        assert reply.status_code == 409, reply.text
        results = {r["ask_id"]: r for r in reply.json()["results"]}
        assert [results[i]["ok"] for i in group] == [True, False, True, True]
        assert "not the one shown" in results[group[1]]["message"]
        assert "not in the group" in results["ask_0000"]["message"]
        assert reply.json()["message"].startswith("3 of 5 asks answered (deny) by alice.")
        # Malformed group answers answer nothing.
        for bad, says in (
            ([("decision", "deny")], "1 to 200 different asks"),
            ([("decision", "deny"), ("ask_id", group[1])], "seen digest"),
            ([("decision", "deny"), ("ask_id", group[1]), ("seen", "")], "seen digest"),
            ([("decision", "maybe"), ("ask_id", group[1]), ("seen", "x")], "an answer is one"),
            (
                [("decision", "deny"), ("ask_id", group[1]), ("ask_id", group[1])]
                + [("seen", "x")] * 2,
                "different asks",
            ),
        ):
            refused = await post_form(client, "/answer-group", bad, alice)
            assert refused.status_code == 400 and says in refused.json()["message"], bad
        # No token: nothing answered.
        no_token = await post_form(
            client,
            "/answer-group",
            [("decision", "deny"), ("ask_id", group[1]), ("seen", digests[1])],
            {"origin": BASE},
        )
        assert no_token.status_code == 401
    for ask_id in (group[0], group[2], group[3]):
        answered = store.get(ask_id)
        assert answered is not None and answered.status == "answered"
        assert answered.answered_by == "alice" and answered.via == "inbox"
        # Rule R13: each answer sealed with alice's own key, verified when read.
        assert answered.seal is not None and answered.seal.approver == "alice"
        assert answered.decision is not None and answered.decision.decision == "deny"
    for ask_id in (group[1], "ask_0000", "ask_0005"):  # refused, another group, not sent
        assert store.get(ask_id).status == "pending"  # type: ignore[union-attr]


async def test_a_group_answer_by_someone_no_longer_an_approver_answers_nothing(
    store: SqliteAskStore,
) -> None:
    dana = approver("dana-group-removed")
    inbox = Inbox(store, users=[dana.name])
    Approvers.default().remove(dana.name)
    form = [("decision", "allow_once")]
    for ask_id in ("ask_0001", "ask_0003"):
        form += [("ask_id", ask_id), ("seen", seen_digest(store.get(ask_id)))]  # type: ignore[arg-type]
    async with client_for(inbox) as client:
        reply = await post_form(
            client,
            "/answer-group",
            form,
            {
                **bearer(inbox.people.tokens[dana.name]),
                "accept": "application/json",
                "origin": BASE,
            },
        )
    assert reply.status_code == 403
    assert all("no longer an approver" in r["message"] for r in reply.json()["results"])
    assert store.get("ask_0001").status == "pending"  # type: ignore[union-attr]


def _fields(ask: StoredAsk) -> dict[str, Any]:
    return {name: getattr(ask, name) for name in StoredAsk.__slots__}


async def test_a_single_answer_to_an_ask_that_changed_since_it_was_shown_is_refused(
    store: SqliteAskStore,
) -> None:
    inbox = Inbox(store, users=["alice"])
    before = store.get("ask_0004")
    assert before is not None
    store.put(StoredAsk(**{**_fields(before), "reason": "something else"}))
    async with client_for(inbox) as client:
        reply = await client.post(
            "/answer",
            data={"ask_id": "ask_0004", "decision": "allow_once", "seen": seen_digest(before)},
            headers={**alice_of(inbox), "origin": BASE},
        )
    assert reply.status_code == 409 and "not the one shown" in reply.json()["message"]
    assert store.get("ask_0004").status == "pending"  # type: ignore[union-attr]


@pytest.fixture
async def served(store: SqliteAskStore) -> AsyncIterator[tuple[Inbox, str]]:
    """The inbox served on a real port, its watcher running."""
    inbox = Inbox(store, users=["alice"], poll_interval=0.05)
    async with serving(inbox) as started:
        yield inbox, started.url


async def events(response: httpx.Response) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """The server-sent events of a streamed response, as (name, data)."""
    name, data = "", ""
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            data = line[6:]
        elif line == "" and data:
            yield name, json.loads(data)
            name, data = "", ""


async def test_the_events_say_what_changed_and_the_page_fetches_only_that(
    served: tuple[Inbox, str], tmp_path: Path
) -> None:
    inbox, url = served
    other = SqliteAskStore(tmp_path / "asks.db")  # another process's connection
    with anyio.fail_after(10):
        while inbox.looks == 0:  # noqa: ASYNC110  (what changes is told from its first look)
            await anyio.sleep(0.01)
    async with (
        httpx.AsyncClient(base_url=url, timeout=10) as client,
        client.stream("GET", "/events", headers=bearer(inbox.people.tokens["alice"])) as stream,
    ):
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        received = events(stream)
        with anyio.fail_after(10):
            assert await anext(received) == ("hello", {"user": "alice", "outage": None})
            other.put(an_ask(100, host="laptop", tool=TOOLS[0], policy="review"))
            name, change = await anext(received)
        assert (name, change) == ("change", {"added": ["ask_0100"], "removed": [], "changed": []})
        fetched = await client.get(
            "/asks",
            params=[("limit", "0"), ("id", "ask_0100")],
            headers=bearer(inbox.people.tokens["alice"]),
        )
        assert ids_in(fetched.json()["cards"]) == ["ask_0100"]
        assert len(fetched.content) < 8_000  # one card, not the 31 asks
        other.withdraw("ask_0007", "withdrawn")
        with anyio.fail_after(10):
            assert await anext(received) == (
                "change",
                {"added": [], "removed": ["ask_0007"], "changed": []},
            )
        # A stream needs a token, as every other request.
        refused = await client.get("/events", headers=bearer("not-a-token"))
        assert refused.status_code == 401
    other.close()


async def test_a_stream_ends_with_its_token_and_streams_are_bounded(
    store: SqliteAskStore, tmp_path: Path
) -> None:
    inbox = Inbox(store, users=["alice"], poll_interval=0.05, max_streams=1)
    other = SqliteAskStore(tmp_path / "asks.db")
    async with (
        serving(inbox) as started,
        httpx.AsyncClient(base_url=started.url, timeout=10) as client,
    ):
        alice = bearer(inbox.people.tokens["alice"])
        async with client.stream("GET", "/events", headers=alice) as stream:
            received = events(stream)
            with anyio.fail_after(10):
                assert (await anext(received))[0] == "hello"
                while inbox.looks == 0:  # noqa: ASYNC110  (changes are told from its first look)
                    await anyio.sleep(0.01)
            second = await client.get("/events", headers=alice)
            assert second.status_code == 503 and "Too many pages" in second.json()["message"]
            out = await client.post("/logout", headers={**alice, "origin": started.url[:-1]})
            assert out.status_code == 200
            other.put(an_ask(200, host="laptop", tool=TOOLS[0], policy="review"))
            with anyio.fail_after(10), pytest.raises(StopAsyncIteration):
                await anext(received)  # the next event finds the token gone: the end
    other.close()


async def test_an_outage_is_one_refusal_and_one_log_line_per_outage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from clearance.harness.ask_store_postgres import PostgresAskStore
    from clearance.harness.postgres import PostgresDatabase

    approver("alice")
    with fresh_schema() as (_, schema), Outage() as outage:
        database = PostgresDatabase(outage.url(schema), timeout=1.0)
        store = PostgresAskStore(database)
        store.put(an_ask(1, host="laptop", tool=TOOLS[0], policy="review"))
        inbox = Inbox(store, users=["alice"], poll_interval=0.05)
        heard = {"outage": anyio.Event(), "restored": anyio.Event()}
        try:
            async with client_for(inbox) as client, anyio.create_task_group() as tg:
                alice = alice_of(inbox)

                async def listen() -> None:
                    with inbox.events.subscribe() as stream:
                        async for event in stream:
                            name = event.split("\n", 1)[0].removeprefix("event: ")
                            if name in heard:
                                heard[name].set()

                tg.start_soon(listen)
                tg.start_soon(inbox.watch)
                assert (await client.get("/asks", headers=alice)).status_code == 200
                caplog.clear()
                outage.cut()
                for _ in range(5):  # a page looking again and again
                    down = await client.get("/asks", headers=alice)
                    assert down.status_code == 503
                    assert down.json()["message"].startswith("The ask store cannot be reached")
                answer = await client.post(
                    "/answer",
                    data={"ask_id": "ask_0001", "decision": "allow_once"},
                    headers={**alice, "origin": BASE},
                )
                assert answer.status_code == 503
                assert "answering is disabled" in answer.json()["message"]
                with anyio.fail_after(10):
                    await heard["outage"].wait()
                outage.restore()
                with anyio.fail_after(15):
                    await heard["restored"].wait()  # the watcher saw the store back
                assert (await client.get("/asks", headers=alice)).status_code == 200
                tg.cancel_scope.cancel()
        finally:
            store.close()
            database.close()
    mine = [r for r in caplog.records if r.name == "clearance.inbox"]
    assert [r.getMessage().split(" (")[0] for r in mine] == [
        f"inbox: the ask store {inbox.label} cannot be reached",
        f"inbox: the ask store {inbox.label} is back; answering again",
    ]
    # No traceback anywhere: not per request, not once.
    assert not [r for r in caplog.records if r.exc_info], [
        r.getMessage() for r in caplog.records if r.exc_info
    ]


@settings(max_examples=30, deadline=None)
@given(
    named=st.lists(st.integers(0, 8), unique=True, min_size=1, max_size=9),
    stale=st.sets(st.integers(0, 8)),
    gone=st.sets(st.integers(0, 8)),
    group=st.none() | st.sampled_from(HOSTS),
    decision=st.sampled_from(["deny", "allow_once", "allow_session", "allow_always"]),
)
async def test_a_group_answer_changes_exactly_the_asks_named_as_shown(
    named: list[int], stale: set[int], gone: set[int], group: str | None, decision: str
) -> None:
    """Whatever is sent, an ask is answered only when it was named with the digest of its
    card as it is now, is pending and is in the group named; every other ask is
    unchanged, and every answer is the person's, sealed with their key (rule R13)."""
    store = MemoryAskStore(approvers=Approvers.default())
    asks = [an_ask(n, host=HOSTS[n % 3], tool=TOOLS[n % 2], policy="review") for n in range(9)]
    for ask in asks:
        store.put(ask)
    for n in gone:
        store.withdraw(asks[n].ask_id, "withdrawn")
    inbox = Inbox(store, users=["alice"])
    form = [("decision", decision), *([("host", group)] if group else [])]
    for n in named:
        seen = "0" * 32 if n in stale else seen_digest(asks[n])
        form += [("ask_id", asks[n].ask_id), ("seen", seen), ("scope", "")]
    async with client_for(inbox) as client:
        reply = await post_form(client, "/answer-group", form, {**alice_of(inbox), "origin": BASE})
    expected = {
        asks[n].ask_id
        for n in named
        if n not in stale and n not in gone and (group is None or asks[n].host == group)
    }
    answered = {a.ask_id for a in asks if store.get(a.ask_id).status == "answered"}  # type: ignore[union-attr]
    assert answered == expected
    assert reply.status_code == (200 if len(expected) == len(named) else 409)
    for ask_id in answered:
        found = store.get(ask_id)
        assert found is not None and found.seal is not None and found.seal.approver == "alice"
        assert found.decision is not None and found.decision.decision == decision
