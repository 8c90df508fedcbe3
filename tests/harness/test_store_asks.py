"""The ask store contract, run against every durable store: SQLite (a file) and PostgreSQL
(a schema of its own on a real server). An answer holds for one call, is given once and
applied once, whoever races for it; a host pauses and another answers. Then what only the
PostgreSQL store does: notices within a second, and failing closed while its database is
away."""

from __future__ import annotations

import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from postgres_support import Outage, fresh_schema
from support import approver

from clearance import CallContext, Harness, Principal, StoreError, Tool, ToolRegistry
from clearance.errors import AskError
from clearance.harness.approvals import PermissionDecision
from clearance.harness.approvers import Seal
from clearance.harness.ask_store import StoredAsk
from clearance.harness.ask_store_sqlite import SqliteAskStore
from clearance.harness.grants import GrantScope, arguments_hash
from clearance.policy import LocalEvaluator

pytestmark = pytest.mark.anyio

ALICE = Principal("User", "alice")
ARGS = {"to": "bob@example.com", "body": "hello"}


@dataclass
class Backend:
    kind: str
    target: str
    schema: str = ""

    def open(self) -> Any:
        if self.kind == "sqlite":
            return SqliteAskStore(self.target)
        from clearance.harness.ask_store_postgres import PostgresAskStore

        return PostgresAskStore(self.target)

    def answer_in_another_process(self, by: str) -> None:
        module, cls = (
            ("clearance.harness.ask_store_sqlite", "SqliteAskStore")
            if self.kind == "sqlite"
            else ("clearance.harness.ask_store_postgres", "PostgresAskStore")
        )
        code = textwrap.dedent(
            f"""
            import sys, time
            from {module} import {cls}
            from clearance.harness.approvals import PermissionDecision
            from clearance.harness.approvers import Approvers
            store = {cls}(sys.argv[1])
            key = Approvers.default().credential(sys.argv[2])
            deadline = time.monotonic() + 30
            while not store.pending():
                assert time.monotonic() < deadline
                time.sleep(0.02)
            (ask,) = store.pending()
            store.answer(ask.ask_id, PermissionDecision("allow_once"), credential=key, via="cli")
            store.close()
            """
        )
        import subprocess

        approver(by)
        subprocess.run([sys.executable, "-c", code, self.target, by], check=True, timeout=60)


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "sqlite":
        yield Backend("sqlite", str(tmp_path / "asks.db"))
        return
    with fresh_schema() as (url, schema):
        yield Backend("postgres", url, schema)


@pytest.fixture
def stores(backend: Backend) -> Iterator[Callable[[], Any]]:
    opened: list[Any] = []

    def open_one() -> Any:
        store = backend.open()
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        store.close()


def _ask(ask_id: str = "ask_1", call_id: str = "c1", **changes: Any) -> StoredAsk:
    values: dict[str, Any] = {
        "ask_id": ask_id,
        "principal": str(ALICE),
        "tool": "mail.send",
        "call_id": call_id,
        "session_id": "s1",
        "arguments_hash": arguments_hash(ARGS),
        "arguments": dict(ARGS),
        "reason": "mail goes out",
        "policies": ("ask:mail.send",),
        "suggestions": (GrantScope.exact(ARGS), GrantScope.tool()),
        "deciding": ("to",),
        "facts": {"to": {"address": "bob@example.com"}},
        "created_at": 1_700_000_000.0,
    }
    values.update(changes)
    return StoredAsk(**values)


def test_an_ask_round_trips_and_is_found_by_its_call_only(stores: Callable[[], Any]) -> None:
    a, b = stores(), stores()
    a.put(_ask())
    got = b.get("ask_1")
    assert got == _ask()
    assert b.find(str(ALICE), "mail.send", "c1", arguments_hash(ARGS)) == _ask()
    assert b.find(str(ALICE), "mail.send", "c2", arguments_hash(ARGS)) is None
    assert b.find(str(ALICE), "mail.send", "c1", arguments_hash({"to": "eve"})) is None
    assert b.find('User::"bob"', "mail.send", "c1", arguments_hash(ARGS)) is None
    assert [x.ask_id for x in b.pending()] == ["ask_1"]
    assert b.get("ask_nope") is None


def test_an_answer_is_given_once_and_applied_once(stores: Callable[[], Any]) -> None:
    a, b = stores(), stores()
    a.put(_ask())
    scope = GrantScope.tool()
    answered = b.answer(
        "ask_1", PermissionDecision("allow_always", scope=scope), credential=approver("carol")
    )
    assert answered.status == "answered" and answered.answered_by == "carol"
    with pytest.raises(AskError, match="not pending"):
        a.answer("ask_1", PermissionDecision("deny"), credential=approver("mallory"))
    got = a.get("ask_1")
    assert got is not None and got.decision is not None
    assert got.decision.decision == "allow_always" and got.decision.scope == scope
    assert a.pending() == []
    assert [x.ask_id for x in a.answered()] == ["ask_1"]  # answered, not yet applied
    assert a.consume("ask_1") and not b.consume("ask_1")
    assert a.answered() == [] and b.answered() == []
    assert a.find(str(ALICE), "mail.send", "c1", arguments_hash(ARGS)) is None
    with pytest.raises(AskError, match="no ask"):
        a.answer("ask_nope", PermissionDecision("deny"), credential=approver("carol"))


def test_an_answer_without_a_valid_seal_is_no_answer(stores: Callable[[], Any]) -> None:
    """Rule R13: a row written with an answer (here through ``put``, as anything that can
    write the store could) is reported only if its seal verifies: else it reads closed,
    is found by no call, and is applied by nobody."""
    a, b = stores(), stores()
    answer = PermissionDecision("allow_always", decided_by="alice", via="cli")
    for seal in (None, Seal("alice", "00" * 32), Seal("@host", "ab" * 32)):
        a.put(replace(_ask(), status="answered", decision=answer, answered_by="alice", seal=seal))
        assert b.find(str(ALICE), "mail.send", "c1", arguments_hash(ARGS)) is None
        got = b.get("ask_1")
        assert got is not None and got.decision is None and got.answered_by is None
        assert (got.status, got.closed_why) == ("closed", "unverified answer")
        assert not b.consume("ask_1")
        assert a.get("ask_1").status == "closed"  # closed in the store too
    # A genuine answer of another call's ask, its row re-pointed at this call: not found.
    a.put(_ask("ask_2", call_id="c2"))
    a.answer("ask_2", PermissionDecision("allow_once"), credential=approver("carol"))
    real = b.get("ask_2")
    assert real is not None and real.status == "answered" and real.seal is not None
    a.put(replace(real, call_id="c3"))  # the call it is found by, and the body, changed
    assert b.find(str(ALICE), "mail.send", "c3", arguments_hash(ARGS)) is None


def test_a_withdrawn_ask_cannot_be_answered(stores: Callable[[], Any]) -> None:
    a, b = stores(), stores()
    a.put(_ask())
    b.withdraw("ask_1", "timeout")
    got = a.get("ask_1")
    assert got is not None and got.status == "closed" and got.closed_why == "timeout"
    with pytest.raises(AskError):
        a.answer("ask_1", PermissionDecision("allow_once"), credential=approver("carol"))
    assert not a.consume("ask_1")


def test_two_answerers_racing_cannot_both_win(stores: Callable[[], Any]) -> None:
    first = stores()
    first.put(_ask())
    answerers = [stores() for _ in range(6)]
    keys = [approver(f"p{n}") for n in range(len(answerers))]
    won: list[str] = []
    barrier = threading.Barrier(len(answerers))

    def answer(n: int) -> None:
        barrier.wait()
        try:
            answerers[n].answer("ask_1", PermissionDecision("allow_once"), credential=keys[n])
            won.append(f"p{n}")
        except AskError:
            pass

    threads = [threading.Thread(target=answer, args=(n,)) for n in range(len(answerers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = first.get("ask_1")
    assert len(won) == 1 and got is not None and got.answered_by == won[0]


def _registry(ran: list[str]) -> ToolRegistry:
    def send(arguments: dict[str, Any], ctx: CallContext) -> str:
        ran.append(ctx.call_id)
        return "sent"

    reg = ToolRegistry()
    schema = {
        "type": "object",
        "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
        "required": ["to", "body"],
        "additionalProperties": False,
    }
    reg.register("mail", [Tool("send", send, input_schema=schema, facts={"/to": "email"})])
    return reg


async def test_a_call_waiting_on_one_host_goes_on_when_another_process_answers(
    backend: Backend, stores: Callable[[], Any]
) -> None:
    ran: list[str] = []
    async with Harness(
        _registry(ran), evaluator=LocalEvaluator(ask=["mail.send"]), ask_store=stores()
    ) as h:
        session = await h.create_session(principal=ALICE)
        outcomes: list[Any] = []
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                outcomes.append(await session.call_tool("mail.send", ARGS, call_id="c1"))

            async def listen() -> None:
                async for _ask in session.permission_asks():  # a UI that never answers
                    pass

            tg.start_soon(listen)
            tg.start_soon(call)
            with anyio.fail_after(30):
                await anyio.to_thread.run_sync(backend.answer_in_another_process, "dave")
                answered = time.monotonic()
                event = anyio.Event()

                async def wait_outcome() -> None:
                    while not outcomes:  # noqa: ASYNC110 (the call reads the shared store)
                        await anyio.sleep(0.01)
                    event.set()

                tg.start_soon(wait_outcome)
                await event.wait()
            waited = time.monotonic() - answered
            tg.cancel_scope.cancel()
    assert outcomes[0].status == "ok" and ran == ["c1"]
    assert waited < 1.0  # the answer reaches the waiting host within a second


# -- PostgreSQL only ------------------------------------------------------------------------


@pytest.fixture
def pg_url() -> Iterator[tuple[str, str]]:
    with fresh_schema() as found:
        yield found


def test_every_host_hears_of_a_new_ask_and_its_answer_within_a_second(
    pg_url: tuple[str, str],
) -> None:
    from clearance.harness.ask_store_postgres import PostgresAskStore

    url, _ = pg_url
    raiser, inbox = PostgresAskStore(url), PostgresAskStore(url)
    heard: list[tuple[float, str | None]] = []
    changed = threading.Event()

    def notice(ask_id: str | None) -> None:
        heard.append((time.monotonic(), ask_id))
        changed.set()

    unsubscribe = inbox.subscribe(notice)
    try:
        assert inbox.database.wait_listening()
        heard.clear()
        changed.clear()
        raised = time.monotonic()
        raiser.put(_ask())
        assert changed.wait(1.0) and heard[-1][1] == "ask_1"
        assert heard[-1][0] - raised < 1.0
        assert [a.ask_id for a in inbox.pending()] == ["ask_1"]
        changed.clear()
        answered = time.monotonic()
        inbox.answer("ask_1", PermissionDecision("allow_once"), credential=approver("carol"))
        assert changed.wait(1.0) and heard[-1][0] - answered < 1.0
        got = raiser.get("ask_1")
        assert got is not None and got.status == "answered"
    finally:
        unsubscribe()
        raiser.close()
        inbox.close()


def test_a_reconnection_tells_subscribers_to_re_read(pg_url: tuple[str, str]) -> None:
    """A notice sent while the listener was cut is lost: after reconnecting it calls the
    subscribers with None, so that nothing is missed."""
    from clearance.harness.ask_store_postgres import PostgresAskStore
    from clearance.harness.postgres import PostgresDatabase

    url, schema = pg_url
    heard: list[str | None] = []
    with Outage() as outage:
        database = PostgresDatabase(outage.url(schema), timeout=1.0)
        near, far = PostgresAskStore(database), PostgresAskStore(url)
        try:
            unsubscribe = near.subscribe(heard.append)
            assert database.wait_listening()
            heard.clear()
            outage.cut()
            far.put(_ask())
            outage.restore()
            deadline = time.monotonic() + 10
            while None not in heard:
                assert time.monotonic() < deadline
                time.sleep(0.01)
            assert [a.ask_id for a in near.pending()] == ["ask_1"]
            unsubscribe()
        finally:
            near.close()
            far.close()
            database.close()


async def test_an_ask_is_denied_while_the_database_is_away(pg_url: tuple[str, str]) -> None:
    """Fail closed: a call that needs to ask cannot store its ask, so it is denied and its
    handler never runs, even though the callback here would allow it."""
    from clearance.harness.ask_store_postgres import PostgresAskStore
    from clearance.harness.postgres import PostgresDatabase

    _, schema = pg_url
    ran: list[str] = []
    failures: list[BaseException] = []
    with Outage() as outage:
        database = PostgresDatabase(outage.url(schema), timeout=1.0)
        store = PostgresAskStore(database)
        try:
            async with Harness(
                _registry(ran),
                evaluator=LocalEvaluator(ask=["mail.send"]),
                ask_store=store,
                diagnostics=lambda cid, exc, info: failures.append(exc),
            ) as h:
                session = await h.create_session(
                    principal=ALICE, on_permission_ask=lambda ask: "allow_once"
                )
                assert (await session.call_tool("mail.send", ARGS, call_id="c1")).ok
                outage.cut()
                denied = await session.call_tool("mail.send", ARGS, call_id="c2")
                outage.restore()
                deadline = time.monotonic() + 10
                while database.down is not None:
                    assert time.monotonic() < deadline
                    await anyio.to_thread.run_sync(time.sleep, 0.02)
                back = await session.call_tool("mail.send", ARGS, call_id="c3")
        finally:
            store.close()
            database.close()
    assert denied.status == "denied" and ran == ["c1", "c3"] and back.ok
    assert any(isinstance(f, StoreError) and "PostgreSQL store" in str(f) for f in failures)
