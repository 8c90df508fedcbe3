"""R13: only a person answers. An answer to an ask is honored only when it carries the seal
of a registered approver's key (or the host's), over that very ask and that very answer;
the journal records the name of the key that sealed it.

Each example pauses a real call over a real SQLite ask store, then writes an answer into
the store's file the way anything that can write the file could (an agent's shell): no
seal, a made-up one, one made with a key the host does not know (a stranger's key under a
registered name, another machine's host key), a genuine seal whose answer was then
changed in one field, or a genuine one. The same call tried again is allowed exactly when
the seal is genuine, for the answer as sealed, and never otherwise.
"""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clearance import Harness, MemoryJournal, Principal, Tool, ToolRegistry
from clearance.harness.approvals import Answer, PermissionDecision
from clearance.harness.approvers import Approvers, Credential
from clearance.harness.ask_store import StoredAsk, answer_message
from clearance.harness.ask_store_sqlite import SqliteAskStore, ask_body
from clearance.harness.grants import GrantScope
from clearance.policy import LocalEvaluator

pytestmark = pytest.mark.anyio

ALICE = Principal("User", "alice")
_TMP = Path(tempfile.mkdtemp(prefix="clearance-r13-"))
KEYRING = Approvers(_TMP / "person")
KEYS = {name: KEYRING.add(name) for name in ("alice", "bob")}
_AMOUNTS = itertools.count(1)

KINDS = (
    "no seal",
    "made-up mac",
    "stranger's key, registered name",
    "unregistered approver",
    "another host's key",
    "genuine, then changed",
    "genuine approver",
    "genuine host",
)
CHANGES = ("decision", "scope", "answered_by", "via", "message", "created_at", "answered_at")


def _seal(ask: StoredAsk, credential: Credential) -> StoredAsk:
    assert ask.decision is not None
    return replace(ask, seal=credential.seal(answer_message(ask, ask.decision, credential.name)))


def _changed(ask: StoredAsk, what: str) -> StoredAsk:
    decision = ask.decision
    assert decision is not None
    if what == "decision":
        flipped: Answer = "allow_always" if decision.decision != "allow_always" else "allow_once"
        return replace(ask, decision=replace(decision, decision=flipped))
    if what == "scope":
        return replace(ask, decision=replace(decision, scope=GrantScope.tool()))
    if what == "answered_by":
        return replace(ask, answered_by="mallory", decision=replace(decision, decided_by="mallory"))
    if what == "via":
        return replace(ask, via="inbox", decision=replace(decision, via="inbox"))
    if what == "message":
        return replace(ask, decision=replace(decision, message="ok by me"))
    if what == "created_at":
        return replace(ask, created_at=ask.created_at + 1)
    return replace(ask, answered_at=(ask.answered_at or 0) + 1)


def forge(pending: StoredAsk, kind: str, answer: str, who: str, change: str) -> StoredAsk:
    """The answer written into the store (``kind``: see :data:`KINDS`)."""
    name = "@host" if kind in ("genuine host", "another host's key") else who
    if kind == "unregistered approver":
        name = "mallory"
    answered = replace(
        pending,
        status="answered",
        decision=PermissionDecision(cast(Answer, answer), decided_by=name, via="cli"),
        answered_by=name,
        via="cli",
        answered_at=time.time(),
    )
    if kind == "no seal":
        return answered
    if kind == "made-up mac":
        return _seal(answered, Credential(name, b"\0" * 32))
    if kind in ("stranger's key, registered name", "unregistered approver"):
        return _seal(answered, Credential(name, os.urandom(32)))
    if kind == "another host's key":
        return _seal(answered, Approvers(None).host())
    if kind == "genuine host":
        return _seal(answered, KEYRING.host())
    sealed = _seal(answered, KEYS[who])
    return _changed(sealed, change) if kind == "genuine, then changed" else sealed


def _registry(ran: list[Any]) -> ToolRegistry:
    def transfer(arguments: dict[str, Any], ctx: Any) -> str:
        ran.append(arguments)
        return "paid"

    registry = ToolRegistry()
    schema = {
        "type": "object",
        "properties": {"iban": {"type": "string"}, "amount": {"type": "integer"}},
        "required": ["iban", "amount"],
        "additionalProperties": False,
    }
    registry.register("bank", [Tool("transfer", transfer, input_schema=schema)])
    return registry


@given(
    kind=st.sampled_from(KINDS),
    answer=st.sampled_from(["allow_once", "allow_session", "allow_always", "deny"]),
    who=st.sampled_from(sorted(KEYS)),
    change=st.sampled_from(CHANGES),
)
async def test_r13_no_answer_without_a_verified_credential_is_honored(
    kind: str, answer: str, who: str, change: str
) -> None:
    db = _TMP / "clearance.db"
    arguments = {"iban": "DE00 MALLORY", "amount": next(_AMOUNTS)}  # one call per example
    ran: list[Any] = []
    journal = MemoryJournal()
    store = SqliteAskStore(db, approvers=KEYRING)
    try:
        async with Harness(
            _registry(ran),
            evaluator=LocalEvaluator(ask=["bank.transfer"]),
            ask_store=store,
            journal=journal,
        ) as harness:
            session = await harness.create_session(principal=ALICE)
            paused = await session.authorize("bank.transfer", arguments, call_id="c1")
            assert paused.pending and paused.ask_id
            pending = store.get(paused.ask_id)
            assert pending is not None
            written = forge(pending, kind, answer, who, change)
            with sqlite3.connect(db) as raw:
                raw.execute(
                    "UPDATE asks SET status = 'answered', body = ? WHERE ask_id = ?",
                    (ask_body(written), paused.ask_id),
                )
            again = await session.authorize("bank.transfer", arguments, call_id="c1")
            if again.allowed:
                await session.run_authorized(again.call_id)
    finally:
        store.close()

    genuine = kind in ("genuine approver", "genuine host")
    assert again.allowed == (genuine and answer != "deny"), (kind, change)
    assert (ran == [arguments]) == again.allowed
    decided = [
        e.data
        for e in journal.events()
        if e.type == "permission_decided" and e.data["answer"] not in ("pending",)
    ]
    if genuine:
        (record,) = decided
        # The journal names the key that sealed it (the host's answers: whom it named).
        assert record["answer"] == answer and record["by"] == (
            who if kind != "genuine host" else "@host"
        )
    else:
        assert all(d["answer"] == "deny" for d in decided), decided
        row = json.loads(
            sqlite3.connect(db)
            .execute("SELECT body FROM asks WHERE ask_id = ?", (paused.ask_id,))
            .fetchone()[0]
        )
        assert row["status"] == "closed" and row["closed_why"] == "unverified answer"
