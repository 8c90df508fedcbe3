"""Issue 38: asks past their life. ``clearance asks approve``/``deny`` refuse an ask no host
would apply an answer to (it used to record the answer and nothing happened), closing it as
expired; every ask store sweeps its stale pending asks (closed as ``expired``), and the
CLI, the inbox and ``Harness.pending_asks`` sweep; ``asks list --all`` says when it stops
at its row limit (``--limit``). Real stores: a SQLite file and PostgreSQL."""

from __future__ import annotations

import json
import time
from typing import Any

import anyio
import pytest
from store_backends import Stores, stores_fixture
from support import approver

from clearance import Harness, Principal, Tool, ToolRegistry
from clearance.harness.approvals import coerce_decision
from clearance.harness.approvers import Approvers
from clearance.harness.ask_store import MemoryAskStore, StoredAsk, sweep_expired
from clearance.policy import LocalEvaluator

stores = stores_fixture()

ALICE = Principal("User", "alice")
ARGS = {"to": "bob@example.com", "body": "hello"}
DAY = 86_400.0


def registry() -> ToolRegistry:
    reg = ToolRegistry()
    schema = {
        "type": "object",
        "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
        "required": ["to", "body"],
        "additionalProperties": False,
    }
    reg.register("mail", [Tool("send", lambda a, ctx: "sent", input_schema=schema)])
    return reg


def _ask(ask_id: str, age: float) -> StoredAsk:
    return StoredAsk(
        ask_id=ask_id,
        principal=str(ALICE),
        tool="mail.send",
        call_id="c_" + ask_id,
        session_id="s1",
        arguments_hash="0" * 64,
        arguments=dict(ARGS),
        reason="asked",
        created_at=time.time() - age,
    )


async def authorize(stores: Stores, call_id: str) -> Any:
    asks, grants = stores.asks(), stores.grants()
    try:
        async with Harness(
            registry(),
            evaluator=LocalEvaluator(ask=["mail.send"]),
            ask_store=asks,
            grant_store=grants,
        ) as h:
            session = await h.create_session(principal=ALICE)
            return await session.authorize("mail.send", ARGS, call_id=call_id)
    finally:
        asks.close()
        grants.close()


def test_approving_an_ask_past_its_life_says_so_and_exits_2(cli: Any, stores: Stores) -> None:
    db = stores.target
    paused = anyio.run(authorize, stores, "c1")
    assert paused.pending
    approver("carol")
    time.sleep(1.2)
    late = cli("asks", "approve", paused.ask_id, "--db", db, "--by", "carol", "--max-age", "1")
    assert late.code == 2 and "expired" in late.err and "nothing answered" in late.err
    store = stores.asks()
    found = store.get(paused.ask_id)
    assert found.status == "closed" and found.closed_why == "expired" and found.decision is None
    denied = cli("asks", "deny", paused.ask_id, "--db", db, "--by", "carol")
    assert denied.code == 2 and "not pending" in denied.err
    # A young ask is answered as before (the default life is the hosts' day).
    second = anyio.run(authorize, stores, "c2")
    ok = cli("asks", "approve", second.ask_id, "--db", db, "--by", "carol")
    assert ok.code == 0, ok.err


def test_every_store_sweeps_its_stale_pending_asks(stores: Stores) -> None:
    carol = approver("carol")
    memory = MemoryAskStore(approvers=Approvers.default())
    for store in (memory, stores.asks()):
        store.put(_ask("ask_old", 2 * DAY))
        store.put(_ask("ask_young", 60))
        store.put(_ask("ask_old_answered", 2 * DAY))
        store.answer("ask_old_answered", coerce_decision("deny"), credential=carol)
        assert sweep_expired(store, DAY) == 1
        assert sweep_expired(store, DAY) == 0
        old = store.get("ask_old")
        assert old is not None and old.status == "closed" and old.closed_why == "expired"
        assert [a.ask_id for a in store.pending()] == ["ask_young"]
        answered = store.get("ask_old_answered")
        assert answered is not None and answered.status == "answered"


def test_asks_list_sweeps_and_says_when_it_stops_at_its_limit(cli: Any, stores: Stores) -> None:
    db = stores.target
    store = stores.asks()
    for n in range(3):
        store.put(_ask(f"ask_{n}", 2 * DAY + n))
    store.put(_ask("ask_young", 5))
    listed = cli("asks", "list", "--db", db, "--json")
    assert listed.code == 0, listed.err
    assert [a["ask_id"] for a in json.loads(listed.out)] == ["ask_young"]
    assert store.get("ask_0").closed_why == "expired"
    capped = cli("asks", "list", "--all", "--limit", "2", "--db", db, "--json")
    assert capped.code == 0 and len(json.loads(capped.out)) == 2
    assert "newest 2" in capped.err and "--limit" in capped.err
    whole = cli("asks", "list", "--all", "--limit", "4", "--db", db)
    assert whole.code == 0 and "newest" not in whole.err
    assert whole.out.count("expired") == 0 and whole.out.count("closed") == 3


@pytest.mark.anyio
async def test_harness_pending_asks_sweeps() -> None:
    store = MemoryAskStore()
    store.put(_ask("ask_old", 2 * DAY))
    async with Harness(
        registry(), evaluator=LocalEvaluator(), ask_store=store, pending_ask_ttl=DAY
    ) as h:
        assert h.pending_asks() == []
    assert store.get("ask_old").closed_why == "expired"  # type: ignore[union-attr]
