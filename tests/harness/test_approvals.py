import json
from collections.abc import Iterator

import anyio
import pytest
from store_backends import Stores, stores_fixture
from support import ALICE, BOB, Recorder, coding_registry, harness

from clearance import (
    AskError,
    GrantScope,
    MemoryJournal,
    PermissionAsk,
    PermissionDecision,
)
from clearance.harness.approvals import Answer
from clearance.policy import LocalEvaluator

pytestmark = pytest.mark.anyio

stores = stores_fixture()  # the persistence test runs on SQLite and on PostgreSQL

ASK_WRITES = LocalEvaluator(allow=["files.read_file"], ask=["files.write_file", "files.list_dir"])


async def test_callback_allow_once_runs_only_that_call() -> None:
    rec = Recorder()
    asks: list[PermissionAsk] = []

    async def answer(ask: PermissionAsk) -> Answer:
        asks.append(ask)
        return "allow_once"

    journal = MemoryJournal()
    async with harness(coding_registry(rec), evaluator=ASK_WRITES, journal=journal) as h:
        s = await h.create_session(principal=ALICE, on_permission_ask=answer)
        out = await s.call_tool(
            "files__write_file", {"path": "src/a.py", "content": "x"}, call_id="w1", turn_id="t1"
        )
        again = await s.call_tool(
            "files__write_file", {"path": "src/a.py", "content": "x"}, call_id="w2"
        )
    assert out.ok and again.ok and len(asks) == 2  # allow_once is never stored
    ask = asks[0]
    assert (ask.tool, ask.qualified_name, ask.model_alias) == (
        "files__write_file",
        "files.write_file",
        "files__write_file",
    )
    assert ask.call_id == "w1" and ask.turn_id == "t1" and ask.principal == 'User::"alice"'
    assert ask.policies == ("ask:files.write_file",)
    kinds = [s.kind for s in ask.suggestions]
    assert kinds == ["exact", "prefix", "tool"]
    assert ask.suggestions[1].prefix == "src/"
    types = [e.type for e in journal.events(call_id="w1")]
    assert types == [
        "permission_asked",
        "permission_decided",
        "call_decided",
        "tool_started",
        "tool_finished",
    ]
    decided = journal.events(call_id="w1")[2].data
    assert decided["decision"] == "ask" and decided["ask"]["answer"] == "allow_once"


async def test_allow_session_grant_covers_scope_and_dies_with_session() -> None:
    rec = Recorder()
    answers: Iterator[Answer | PermissionDecision] = iter(
        [PermissionDecision("allow_session", scope=None), "deny"]
    )
    async with harness(coding_registry(rec), evaluator=ASK_WRITES) as h:
        s = await h.create_session(principal=ALICE, on_permission_ask=lambda ask: next(answers))
        first = await s.call_tool("files__write_file", {"path": "a", "content": "1"})
        same = await s.call_tool("files__write_file", {"path": "a", "content": "1"})
        other = await s.call_tool("files__write_file", {"path": "a", "content": "2"})
        assert first.ok and same.ok and same.grant is not None
        assert other.status == "denied"
        assert len(h.grants.list()) == 1
        await s.aclose()
        assert h.grants.list() == []


async def test_widened_scope_from_suggestions_and_principal_binding() -> None:
    rec = Recorder()

    def widen(ask: PermissionAsk) -> PermissionDecision:
        return PermissionDecision(
            "allow_always", scope=ask.suggestions[1], decided_by="alice@example.com"
        )

    async with harness(coding_registry(rec), evaluator=ASK_WRITES) as h:
        s = await h.create_session(principal=ALICE, on_permission_ask=widen)
        await s.call_tool("files__write_file", {"path": "src/a.py", "content": "1"})
        (grant,) = h.grants.list()
        assert grant.widened_by == "alice@example.com" and grant.scope.prefix == "src/"
        s.on_permission_ask = lambda ask: "deny"
        assert (await s.call_tool("files__write_file", {"path": "src/b.py", "content": "2"})).ok
        assert (
            await s.call_tool("files__write_file", {"path": "src/../x", "content": "2"})
        ).status == "denied"
        assert (
            await s.call_tool("files__write_file", {"path": "lib/b.py", "content": "2"})
        ).status == "denied"
        bob = await h.create_session(principal=BOB, on_permission_ask=lambda ask: "deny")
        assert (
            await bob.call_tool("files__write_file", {"path": "src/b.py", "content": "2"})
        ).status == "denied"


async def test_raising_or_nonsense_callback_denies() -> None:
    rec = Recorder()

    def boom(ask: PermissionAsk) -> Answer:
        raise RuntimeError("ui crashed")

    async with harness(coding_registry(rec), evaluator=ASK_WRITES) as h:
        s = await h.create_session(principal=ALICE, on_permission_ask=boom)
        out = await s.call_tool("files__write_file", {"path": "a", "content": "1"})
        # Not an answer, on purpose: what a confused callback returns.
        s.on_permission_ask = lambda ask: "sure"  # type: ignore[assignment, return-value]
        out2 = await s.call_tool("files__write_file", {"path": "a", "content": "1"})
    assert out.status == "denied" and "callback failed" in out.text
    assert out2.status == "denied" and rec.calls == []


async def test_no_answerer_denies_at_once() -> None:
    rec = Recorder()
    async with harness(coding_registry(rec), evaluator=ASK_WRITES) as h:
        s = await h.create_session(principal=ALICE)
        with anyio.fail_after(2):
            out = await s.call_tool("files__write_file", {"path": "a", "content": "1"})
    assert out.status == "denied" and "no one is set up to answer" in out.text


async def test_stream_answers_concurrent_asks_out_of_order() -> None:
    rec = Recorder()
    outcomes: dict[str, str] = {}
    async with harness(coding_registry(rec), evaluator=ASK_WRITES) as h:
        s = await h.create_session(principal=ALICE)

        async def call(cid: str, path: str) -> None:
            outcomes[cid] = (
                await s.call_tool("files__list_dir", {"path": path}, call_id=cid)
            ).status

        async def answer_in_reverse() -> None:
            pending: list[PermissionAsk] = []
            async for ask in s.permission_asks():
                pending.append(ask)
                if len(pending) == 3:
                    break
            for ask in reversed(pending):
                await ask.respond("deny" if ask.call_id == "b" else "allow_once")
            with pytest.raises(AskError, match="already answered"):
                await pending[0].respond("deny")

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(answer_in_reverse)
                await anyio.wait_all_tasks_blocked()
                for cid in "abc":
                    tg.start_soon(call, cid, cid)
    assert outcomes == {"a": "ok", "b": "denied", "c": "ok"}
    assert sorted(a["path"] for _, a in rec.calls) == ["a", "c"]


async def test_stream_timeout_and_late_answer() -> None:
    rec = Recorder()
    journal = MemoryJournal()
    async with harness(
        coding_registry(rec), evaluator=ASK_WRITES, ask_timeout=0.05, journal=journal
    ) as h:
        s = await h.create_session(principal=ALICE)
        seen: list[PermissionAsk] = []

        async def listen() -> None:
            async for ask in s.permission_asks():
                seen.append(ask)
                return

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(listen)
                await anyio.wait_all_tasks_blocked()
                out = await s.call_tool("files__list_dir", {"path": "a"}, call_id="c1")
        with pytest.raises(AskError, match="timeout"):
            await seen[0].respond("allow_once")
    assert out.status == "denied" and "in time" in out.text
    decided = next(e for e in journal.events(call_id="c1") if e.type == "permission_decided")
    assert decided.data["how"] == "timeout"


async def test_closing_session_denies_open_asks_and_cancel_withdraws() -> None:
    rec = Recorder()
    async with harness(coding_registry(rec), evaluator=ASK_WRITES) as h:
        s = await h.create_session(principal=ALICE)
        results: list[str] = []
        got: list[PermissionAsk] = []

        async def listen() -> None:
            got.extend([ask async for ask in s.permission_asks()])

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(listen)
                await anyio.wait_all_tasks_blocked()

                async def call() -> None:
                    results.append((await s.call_tool("files__list_dir", {"path": "a"})).status)

                tg.start_soon(call)
                await anyio.wait_all_tasks_blocked()
                assert len(s.open_asks) == 1
                await s.aclose()
    assert results == ["denied"] and rec.calls == []
    with pytest.raises(AskError, match="closed"):
        await got[0].respond("allow_once")


async def test_allow_always_persists_in_the_store_and_revoke(stores: Stores) -> None:
    rec = Recorder()
    store = stores.grants()
    async with harness(coding_registry(rec), evaluator=ASK_WRITES, grant_store=store) as h:
        s = await h.create_session(principal=ALICE, on_permission_ask=lambda a: "allow_always")
        assert (await s.call_tool("files__write_file", {"path": "a", "content": "1"})).ok
    store.close()
    reopened = stores.grants()
    (grant,) = reopened.list()
    assert grant.kind == "always" and grant.principal == 'User::"alice"'
    async with harness(coding_registry(rec), evaluator=ASK_WRITES, grant_store=reopened) as h:
        s = await h.create_session(principal=ALICE, on_permission_ask=lambda a: "deny")
        assert (
            await s.call_tool("files__write_file", {"path": "a", "content": "1"})
        ).grant == grant.grant_id
        assert reopened.revoke(grant.grant_id)
        assert (
            await s.call_tool("files__write_file", {"path": "a", "content": "1"})
        ).status == "denied"
    reopened.close()
    assert stores.grants().list() == []


def test_scope_rules() -> None:
    exact = GrantScope.exact({"a": 1})
    assert exact.covers({"a": 1}) and not exact.covers({"a": 2})
    prefix = GrantScope.prefix_of("/path", "src/")
    assert prefix.covers({"path": "src/x/y"})
    assert not prefix.covers({"path": "src/../etc"}) and not prefix.covers({"path": "/src/x"})
    assert not prefix.covers({"other": "src/x"})
    assert json.loads(json.dumps(prefix.to_json()))["prefix"] == "src/"
    with pytest.raises(AskError):
        PermissionDecision("maybe")  # type: ignore[arg-type]
