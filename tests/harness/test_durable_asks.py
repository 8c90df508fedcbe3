"""Durable asks: a pending ask lives in a store, is answered from anywhere, and the same call
tried again (after a restart too) gets the answer, once."""

from __future__ import annotations

import re
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from store_backends import Stores, stores_fixture
from support import approver

from clearance import CallContext, Harness, MemoryJournal, Principal, Tool, ToolRegistry
from clearance.errors import AskError, StoreError
from clearance.harness.approvals import Answer, PermissionDecision
from clearance.harness.approvers import Credential
from clearance.harness.ask_store import MemoryAskStore, StoredAsk
from clearance.harness.ask_store_sqlite import SqliteAskStore
from clearance.policy import LocalEvaluator

pytestmark = pytest.mark.anyio

stores = stores_fixture()  # the durable store test runs on SQLite and on PostgreSQL

ALICE = Principal("User", "alice")


def send(arguments: dict[str, Any], ctx: CallContext) -> str:
    return f"sent to {arguments['to']}"


def registry() -> ToolRegistry:
    reg = ToolRegistry()
    reg.register(
        "mail",
        [
            Tool(
                "send",
                send,
                input_schema={
                    "type": "object",
                    "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
                    "required": ["to", "body"],
                    "additionalProperties": False,
                },
                facts={"/to": "email"},
            )
        ],
    )
    return reg


def harness(**options: Any) -> Harness:
    return Harness(registry(), evaluator=LocalEvaluator(ask=["mail.send"]), **options)


ARGS = {"to": "Bob@Example.com", "body": "hello"}


async def test_a_paused_call_gets_its_answer_once() -> None:
    journal = MemoryJournal()
    async with harness(journal=journal) as h:
        session = await h.create_session(principal=ALICE)  # nobody here answers
        first = await session.authorize("mail.send", ARGS, call_id="c1")
        assert first.status == "pending" and first.ask_id is not None
        assert first.message is not None and first.ask_id in first.message
        (waiting,) = h.pending_asks()
        assert waiting.ask_id == first.ask_id and waiting.call_id == "c1"
        assert waiting.arguments == {"to": "bob@example.com", "body": "hello"}
        # still pending when tried again before an answer
        assert (await session.authorize("mail.send", ARGS, call_id="c1")).pending
        await h.answer_ask(first.ask_id, "allow_once", by="bob", via="cli")
        assert h.pending_asks() == []
        with pytest.raises(AskError):
            await h.answer_ask(first.ask_id, "deny")  # answered once
        resumed = await session.authorize("mail.send", ARGS, call_id="c1")
        assert resumed.allowed and resumed.answered_by == "bob"
        assert resumed.arguments == {"to": "bob@example.com", "body": "hello"}
        await session.record_result("c1", "sent")
        # allow_once: another call of the same arguments is asked again
        assert (await session.authorize("mail.send", ARGS, call_id="c2")).pending
    decided = [e.data for e in journal.events(call_id="c1") if e.type == "permission_decided"]
    assert decided[-1]["by"] == "bob" and decided[-1]["via"] == "cli"
    assert decided[-1]["how"] == "store"
    outcomes = [e.data["outcome"] for e in journal.events(call_id="c1") if e.type == "call_decided"]
    # one pending record (the same call tried again while it waits adds none), one decision
    assert outcomes == ["pending", "authorized"]


async def test_an_answer_holds_only_for_the_call_it_was_given_for() -> None:
    async with harness() as h:
        session = await h.create_session(principal=ALICE)
        asked = await session.authorize("mail.send", ARGS, call_id="c1")
        assert asked.ask_id is not None
        await h.answer_ask(asked.ask_id, "allow_once")
        other = await session.authorize(
            "mail.send", {**ARGS, "to": "eve@evil.example"}, call_id="c1"
        )
        assert other.pending and other.ask_id != asked.ask_id  # other arguments: a new ask
        assert (await session.authorize("mail.send", ARGS, call_id="c1")).allowed


async def test_allow_session_creates_the_grant_when_the_answer_is_applied() -> None:
    async with harness() as h:
        session = await h.create_session(principal=ALICE)
        asked = await session.authorize("mail.send", ARGS, call_id="c1")
        assert asked.ask_id is not None
        await h.answer_ask(asked.ask_id, "allow_session", by="bob")
        assert (await session.authorize("mail.send", ARGS, call_id="c1")).allowed
        again = await session.authorize("mail.send", ARGS, call_id="c2")
        assert again.allowed and again.grant is not None  # the session grant answered


async def test_a_denied_answer_denies_and_a_waiting_call_goes_on(tmp_path: Path) -> None:
    async with harness() as h:
        session = await h.create_session(principal=ALICE)
        asked = await session.authorize("mail.send", ARGS, call_id="c1")
        assert asked.ask_id is not None
        await h.answer_ask(asked.ask_id, "deny", by="bob")
        denied = await session.authorize("mail.send", ARGS, call_id="c1")
        assert denied.status == "denied"


async def test_another_process_answers_a_waiting_call_and_a_restart_resumes(
    stores: Stores,
) -> None:
    # A host pauses a call (no answerer), then "restarts" (a new harness on the same store).
    async with harness(ask_store=stores.asks(), grant_store=stores.grants()) as h:
        session = await h.create_session(principal=ALICE)
        paused = await session.authorize("mail.send", ARGS, call_id="c1")
        assert paused.pending and paused.ask_id is not None
    answer = stores.ask_store_code() + textwrap.dedent(
        """
        from clearance.harness.approvals import PermissionDecision
        from clearance.harness.approvers import Approvers
        (ask,) = store.pending()
        key = Approvers.default().credential("carol")
        store.answer(ask.ask_id, PermissionDecision("allow_once"), credential=key, via="cli")
        store.close()
        """
    )
    approver("carol")
    done = await anyio.run_process([sys.executable, "-c", answer], check=False)
    assert done.returncode == 0, done.stderr.decode()
    async with harness(ask_store=stores.asks(), grant_store=stores.grants()) as h:
        session = await h.create_session(principal=ALICE)  # a new session after the restart
        resumed = await session.authorize("mail.send", ARGS, call_id="c1")
        assert resumed.allowed and resumed.answered_by == "carol"
        # a call that waits in-process is released by an answer given in another process
        async with anyio.create_task_group() as tg:
            outcomes: list[Any] = []

            async def call() -> None:
                outcomes.append(await session.call_tool("mail.send", ARGS, call_id="c9"))

            async def listen() -> None:
                async for _ask in session.permission_asks():  # a UI that never answers
                    pass

            tg.start_soon(listen)
            tg.start_soon(call)
            with anyio.fail_after(10):
                while not h.pending_asks():  # noqa: ASYNC110 (a store another process shares)
                    await anyio.sleep(0.05)
            (waiting,) = h.pending_asks()
            stores.asks().answer(waiting.ask_id, _once(), credential=approver("dave"), via="inbox")
            with anyio.fail_after(10):
                while not outcomes:  # noqa: ASYNC110 (the call ends when the store is read)
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
        assert outcomes[0].status == "ok" and outcomes[0].text == "sent to bob@example.com"


def _once() -> Any:
    from clearance.harness.approvals import PermissionDecision

    return PermissionDecision("allow_once")


async def test_an_answer_with_a_scope_the_ask_did_not_offer_is_refused() -> None:
    from clearance.harness.grants import GrantScope

    async with harness() as h:
        session = await h.create_session(principal=ALICE)
        asked = await session.authorize("mail.send", ARGS, call_id="c1")
        assert asked.ask_id is not None
        with pytest.raises(AskError, match="scope"):
            await h.answer_ask(
                asked.ask_id, "allow_always", scope=GrantScope.prefix_of("/body", "he")
            )
        assert h.pending_asks()  # nothing was recorded


async def test_an_old_pending_ask_no_longer_applies() -> None:
    async with harness(pending_ask_ttl=0.05) as h:
        session = await h.create_session(principal=ALICE)
        first = await session.authorize("mail.send", ARGS, call_id="c1")
        assert first.ask_id is not None
        await h.answer_ask(first.ask_id, "allow_once")
        await anyio.sleep(0.1)
        late = await session.authorize("mail.send", ARGS, call_id="c1")
        assert late.pending and late.ask_id != first.ask_id  # asked again, not the old answer


class _FlakyAsks(SqliteAskStore):
    """A shared store that is away for its first reads (a database restarting)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.away = 3
        self.reads = 0

    def get(self, ask_id: str) -> Any:
        self.reads += 1
        if self.away > 0:
            self.away -= 1
            raise StoreError("the store is restarting")
        return super().get(ask_id)


async def test_a_waiting_call_reads_its_answer_from_a_shared_store_that_was_away(
    tmp_path: Path,
) -> None:
    store = _FlakyAsks(tmp_path / "asks.db")
    journal = MemoryJournal()
    async with harness(ask_store=store, journal=journal) as h:
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
            with anyio.fail_after(10):
                while not h.pending_asks() or store.away or store.reads < 5:  # noqa: ASYNC110
                    await anyio.sleep(0.05)
            (waiting,) = h.pending_asks()
            SqliteAskStore(tmp_path / "asks.db").answer(
                waiting.ask_id, _once(), credential=approver("dave"), via="inbox"
            )
            with anyio.fail_after(10):
                while not outcomes:  # noqa: ASYNC110 (the call ends when the store is read)
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
    assert outcomes[0].status == "ok"
    decided = next(e.data for e in journal.events(call_id="c1") if e.type == "permission_decided")
    assert (decided["answer"], decided["how"], decided["by"], decided["via"]) == (
        "allow_once",
        "store",
        "dave",
        "inbox",
    )
    assert store.get(waiting.ask_id).status == "consumed"


async def test_an_answer_from_the_stream_while_a_shared_store_is_watched_is_the_stream_s(
    tmp_path: Path,
) -> None:
    journal = MemoryJournal()
    async with harness(ask_store=SqliteAskStore(tmp_path / "asks.db"), journal=journal) as h:
        session = await h.create_session(principal=ALICE)
        outcomes: list[Any] = []
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                outcomes.append(await session.call_tool("mail.send", ARGS, call_id="c1"))

            async def answer() -> None:
                async for ask in session.permission_asks():
                    await anyio.sleep(0.5)  # the store is read meanwhile
                    await ask.respond("allow_once")

            tg.start_soon(answer)
            tg.start_soon(call)
            with anyio.fail_after(10):
                while not outcomes:  # noqa: ASYNC110
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
    assert outcomes[0].status == "ok"
    decided = next(e.data for e in journal.events(call_id="c1") if e.type == "permission_decided")
    assert (decided["answer"], decided["how"]) == ("allow_once", "stream")


async def test_an_expired_ask_is_withdrawn_as_expired() -> None:
    asks = MemoryAskStore()
    async with harness(ask_store=asks, pending_ask_ttl=0.05) as h:
        session = await h.create_session(principal=ALICE)
        first = await session.authorize("mail.send", ARGS, call_id="c1")
        assert first.ask_id is not None
        await anyio.sleep(0.1)
        again = await session.authorize("mail.send", ARGS, call_id="c1")
        old = asks.get(first.ask_id)
        assert old is not None and (old.status, old.closed_why) == ("closed", "expired")
        assert again.pending and again.ask_id != first.ask_id


async def test_an_ask_is_not_expired_before_its_time_is_up(monkeypatch: pytest.MonkeyPatch) -> None:
    asks = MemoryAskStore()
    async with harness(ask_store=asks, pending_ask_ttl=0) as h:
        session = await h.create_session(principal=ALICE)
        first = await session.authorize("mail.send", ARGS, call_id="c1")
        assert first.ask_id is not None
        await h.answer_ask(first.ask_id, "allow_once")
        stored = asks.get(first.ask_id)
        assert stored is not None
        # A clock that stands at the moment the ask was made: its age is exactly 0.0, its
        # ttl (StoredAsk.created_at took the real clock, so the clock is stopped after).
        monkeypatch.setattr(time, "time", lambda: stored.created_at)
        # No time has passed: the answer applies (an ask expires once its ttl is exceeded).
        assert (await session.authorize("mail.send", ARGS, call_id="c1")).allowed


class _Forgetful(SqliteAskStore):
    """A shared store that does not find the ask for its first reads (another process
    removed and put it back, a replica behind)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.misses = 3

    def get(self, ask_id: str) -> Any:
        if self.misses > 0:
            self.misses -= 1
            return None
        return super().get(ask_id)


async def test_a_waiting_call_survives_its_ask_missing_from_a_shared_store(tmp_path: Path) -> None:
    store = _Forgetful(tmp_path / "asks.db")
    async with harness(ask_store=store) as h:
        session = await h.create_session(principal=ALICE)
        outcomes: list[Any] = []
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                outcomes.append(await session.call_tool("mail.send", ARGS, call_id="c1"))

            async def answer() -> None:
                async for ask in session.permission_asks():
                    with anyio.fail_after(10):
                        while store.misses:  # noqa: ASYNC110
                            await anyio.sleep(0.05)
                    await ask.respond("allow_once")

            tg.start_soon(answer)
            tg.start_soon(call)
            with anyio.fail_after(10):
                while not outcomes:  # noqa: ASYNC110
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
    assert outcomes[0].status == "ok"


async def test_a_paused_call_is_recorded_pending_and_resumed_under_its_ask() -> None:
    journal = MemoryJournal()
    async with harness(journal=journal) as h:
        session = await h.create_session(principal=ALICE, on_permission_ask=lambda ask: "deny")
        paused = await session.authorize("mail.send", ARGS, call_id="c1", wait=False)
        assert paused.pending and paused.ask_id is not None
        assert re.fullmatch(r"ask_[0-9a-f]{12}", paused.ask_id)
        pending = f"approval pending (ask {paused.ask_id}); try the call again once it is answered"
        assert paused.message is not None and paused.message.startswith(pending)
        decided = next(e.data for e in journal.events(call_id="c1") if e.type == "call_decided")
        assert {k: decided["ask"][k] for k in ("answer", "how", "message")} == {
            "answer": "pending",
            "how": "pending",
            "message": pending,
        }
        await h.answer_ask(paused.ask_id, "allow_once", by="bob")
        resumed = await session.authorize("mail.send", ARGS, call_id="c1")
        assert resumed.allowed and resumed.ask_id == paused.ask_id
        assert resumed.answered_by == "bob"


async def test_a_host_that_waits_gets_the_stream_s_answer() -> None:
    async with harness() as h:
        session = await h.create_session(principal=ALICE)
        results: list[Any] = []
        async with anyio.create_task_group() as tg:

            async def answer() -> None:
                async for ask in session.permission_asks():
                    await ask.respond("allow_once")

            async def call() -> None:
                results.append(await session.authorize("mail.send", ARGS, call_id="c1", wait=True))

            tg.start_soon(answer)
            tg.start_soon(call)
            with anyio.fail_after(10):
                while not results:  # noqa: ASYNC110
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
    assert results[0].allowed


async def test_an_answer_given_here_is_kept_in_the_store_as_consumed() -> None:
    asks = MemoryAskStore()
    journal = MemoryJournal()
    async with harness(ask_store=asks, journal=journal, ask_timeout=0.2) as h:
        session = await h.create_session(
            principal=ALICE,
            on_permission_ask=lambda ask: PermissionDecision("allow_once", decided_by="carol"),
        )
        assert (await session.call_tool("mail.send", ARGS, call_id="c1")).ok
        [asked] = [e.data for e in journal.events(call_id="c1") if e.type == "permission_asked"]
        stored = asks.get(asked["ask_id"])
        assert stored is not None
        assert (stored.status, stored.answered_by, stored.via) == ("consumed", "carol", "callback")
        # Nobody answers in time: the ask is withdrawn as timed out, and denied.
        quiet = await h.create_session(principal=ALICE)
        async with anyio.create_task_group() as tg:

            async def listen() -> None:
                async for _ask in quiet.permission_asks():  # a UI that never answers
                    pass

            tg.start_soon(listen)
            out = await quiet.call_tool("mail.send", ARGS, call_id="c2")
            tg.cancel_scope.cancel()
        assert out.status == "denied"
        [asked] = [e.data for e in journal.events(call_id="c2") if e.type == "permission_asked"]
        stored = asks.get(asked["ask_id"])
        assert stored is not None and (stored.status, stored.closed_why) == ("closed", "timeout")
        decided = next(e.data for e in journal.events(call_id="c2") if e.type == "call_decided")
        assert (decided["ask"]["answer"], decided["ask"]["how"]) == ("deny", "timeout")
        assert decided["ask"]["message"] == "nobody answered the approval request in time; denied"


class _AnsweredElsewhere(MemoryAskStore):
    """A store in which another host answered the same ask a moment earlier."""

    def answer(
        self,
        ask_id: str,
        decision: PermissionDecision,
        *,
        credential: Credential,
        by: str | None = None,
        via: str | None = None,
    ) -> StoredAsk:
        raise AskError(f"ask {ask_id} is answered, not pending")


async def test_an_answer_the_store_already_holds_does_not_fail_the_call() -> None:
    async with harness(ask_store=_AnsweredElsewhere()) as h:
        session = await h.create_session(
            principal=ALICE, on_permission_ask=lambda ask: "allow_once"
        )
        assert (await session.call_tool("mail.send", ARGS, call_id="c1")).ok


async def test_an_answer_given_after_the_session_closed_grants_nothing() -> None:
    journal = MemoryJournal()
    async with harness(journal=journal) as h:
        session = await h.create_session(principal=ALICE)

        async def answer(ask: Any) -> Answer:
            await session.aclose()
            return "allow_session"

        session.on_permission_ask = answer
        # A host's call (authorize) is not cancelled by the close: its answer comes back.
        out = await session.authorize("mail.send", ARGS, call_id="c1", wait=True)
        assert out.status == "denied"
        assert h.grants.list() == []
    decided = next(e.data for e in journal.events(call_id="c1") if e.type == "permission_decided")
    assert (decided["answer"], decided["how"], decided["grant"]) == ("deny", "closed", None)


async def test_the_answer_s_message_is_recorded_without_withheld_values() -> None:
    registry_ = registry()
    registry_.register(
        "vault",
        [
            Tool(
                "put",
                send,
                input_schema={
                    "type": "object",
                    "properties": {"to": {"type": "string"}, "secret": {"type": "string"}},
                    "required": ["to", "secret"],
                    "additionalProperties": False,
                },
                sensitive=["/secret"],
                # The recipient decides (declared), the withheld secret does not: the
                # call can be put to a person.
                facts={"/to": "email"},
            )
        ],
    )
    journal = MemoryJournal()
    evaluator = LocalEvaluator(ask=["vault.put"])
    async with Harness(registry_, evaluator=evaluator, journal=journal) as h:
        session = await h.create_session(
            principal=ALICE,
            on_permission_ask=lambda ask: PermissionDecision(
                "deny", message="not hunter2, and not to x", decided_by="bob", via="terminal"
            ),
        )
        arguments = {"to": "x@corp.example", "secret": "hunter2"}
        out = await session.call_tool("vault.put", arguments, call_id="c1")
    assert out.status == "denied" and "hunter2" not in out.text
    decided = next(e.data for e in journal.events(call_id="c1") if e.type == "call_decided")
    assert decided["ask"]["message"] == "not [REDACTED], and not to x"
    assert (decided["ask"]["answered_by"], decided["ask"]["via"]) == ("bob", "terminal")
    [asked] = [e.data for e in journal.events(call_id="c1") if e.type == "permission_asked"]
    assert asked["arguments"] == {"to": "x@corp.example", "secret": "[REDACTED]"}


async def test_an_answer_from_the_stream_given_as_the_session_closes_grants_nothing() -> None:
    # The person answers, and the session closes before the waiting call reads the answer
    # (an answer that arrives while the session is closing): no grant outlives it (R5).
    journal = MemoryJournal()
    async with harness(journal=journal) as h:
        session = await h.create_session(principal=ALICE)
        results: list[Any] = []
        async with anyio.create_task_group() as tg:

            async def answer() -> None:
                async for ask in session.permission_asks():
                    await ask.respond("allow_always")  # answered: the close cannot deny it
                    await session.aclose()  # no checkpoint between: the call has not woken

            async def call() -> None:
                results.append(await session.authorize("mail.send", ARGS, call_id="c1", wait=True))

            tg.start_soon(answer)
            tg.start_soon(call)
            with anyio.fail_after(10):
                while not results:  # noqa: ASYNC110
                    await anyio.sleep(0.05)
        assert not results[0].allowed
        assert h.grants.list() == []  # allow_always would have outlived the session
    decided = next(e.data for e in journal.events(call_id="c1") if e.type == "permission_decided")
    assert (decided["answer"], decided["how"], decided["grant"]) == ("deny", "closed", None)
    ended = next(e.data for e in journal.events(call_id="c1") if e.type == "call_decided")
    assert ended["ask"]["message"] == "the session closed before the approval was answered; denied"


async def test_closing_the_session_cancels_a_call_whose_ask_callback_never_returns() -> None:
    # An ask callback may never return: the close cancels the call waiting for it instead
    # of waiting for the callback forever.
    async with harness() as h:
        session = await h.create_session(principal=ALICE)
        called = anyio.Event()

        async def never(ask: Any) -> Answer:
            called.set()
            await anyio.sleep(20)  # "never", for a test: a close that waits for it fails
            return "allow_always"

        session.on_permission_ask = never
        results: list[Any] = []
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                results.append(await session.call_tool("mail.send", ARGS, call_id="c1"))

            tg.start_soon(call)
            with anyio.fail_after(10):
                await called.wait()
            started = time.monotonic()
            await session.aclose()  # shielded: it cannot be timed out from here
            assert time.monotonic() - started < 10  # it did not wait for the callback
            with anyio.fail_after(5):
                while not results:  # noqa: ASYNC110
                    await anyio.sleep(0.05)
        assert results[0].status == "cancelled"
        assert h.grants.list() == []


async def test_an_answer_given_in_the_store_while_the_callback_waits_applies_once() -> None:
    # An answer given with answer_ask (the CLI, an inbox) while the session's ask callback
    # still waits settles the call; it is consumed there, so the same call tried again (by
    # another session of the same principal) is asked again, not allowed by it a second time.
    asks = MemoryAskStore()
    async with harness(ask_store=asks) as h:
        session = await h.create_session(principal=ALICE)
        waiting: list[Any] = []
        release = anyio.Event()

        async def slow(ask: Any) -> Answer:
            waiting.append(ask)
            await release.wait()
            return "deny"  # too late: the store's answer settled the ask already

        session.on_permission_ask = slow
        results: list[Any] = []
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                results.append(await session.call_tool("mail.send", ARGS, call_id="c1"))

            tg.start_soon(call)
            with anyio.fail_after(10):
                while not waiting:  # noqa: ASYNC110
                    await anyio.sleep(0.01)
            await h.answer_ask(waiting[0].ask_id, "allow_once", by="carol")
            release.set()
        assert results[0].ok
        stored = asks.get(waiting[0].ask_id)
        assert stored is not None and stored.status == "consumed"
        other = await h.create_session(principal=ALICE, on_permission_ask=lambda ask: "deny")
        again = await other.authorize("mail.send", ARGS, call_id="c1")
        assert not again.allowed


ADOPTED_CALL = {"to": "bob@example.com", "body": "hi"}


async def test_a_waiting_call_adopts_a_paused_calls_ask(stores: Stores) -> None:
    """The same call paused, then tried again waiting, waits on the one ask it raised, and
    the ask takes the waiting process's lease (tests/harness/test_orphan_asks.py kills that
    process: the ask reads host gone); an ask no longer pending is not adopted."""
    store = stores.asks()
    async with Harness(
        registry(), evaluator=LocalEvaluator(ask=["mail.*"]), ask_store=store
    ) as first:
        session = await first.create_session(principal=Principal("User", "alice"))
        paused = await session.authorize("mail__send", ADOPTED_CALL, call_id="c1", wait=False)
        assert paused.status == "pending" and paused.ask_id is not None
    assert store.get(paused.ask_id).instance is None

    async with Harness(
        registry(),
        evaluator=LocalEvaluator(ask=["mail.*"]),
        ask_store=store,
        ask_timeout=0.3,
    ) as second:
        session = await second.create_session(principal=Principal("User", "alice"))
        waited = await session.authorize("mail__send", ADOPTED_CALL, call_id="c1", wait=True)
        assert waited.status == "denied" and waited.ask_id == paused.ask_id  # nobody answered
        adopted = store.get(paused.ask_id)
        assert adopted is not None and adopted.instance == second.instance
    assert store.get(paused.ask_id).closed_why == "timeout"
    assert not store.adopt(paused.ask_id, "elsewhere", "h", 30.0)  # no longer pending
