"""``clearance asks``: answering a paused call's ask from another process, the real CLI,
over a SQLite file and over PostgreSQL (the tests that take ``stores`` run on both)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
from store_backends import Stores, stores_fixture
from support import approver

from clearance import Harness, Principal, Tool, ToolRegistry
from clearance.policy import LocalEvaluator

stores = stores_fixture()

ALICE = Principal("User", "alice")
ARGS = {"to": "bob@example.com", "body": "hello"}


def registry() -> ToolRegistry:
    reg = ToolRegistry()
    reg.register(
        "mail",
        [
            Tool(
                "send",
                lambda arguments, ctx: "sent",
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


async def authorize(stores: Stores, call_id: str) -> Any:
    """A host (a harness on the stores, as after a restart) tries the call."""
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


def test_list_show_approve_and_deny(cli: Any, stores: Stores) -> None:
    db = stores.target
    paused = anyio.run(authorize, stores, "c1")
    assert paused.pending
    listed = cli("asks", "list", "--db", str(db), "--json")
    assert listed.code == 0, listed.err
    (entry,) = json.loads(listed.out)
    assert entry["ask_id"] == paused.ask_id and entry["tool"] == "mail.send"
    shown = cli("asks", "show", paused.ask_id, "--db", str(db))
    assert shown.code == 0 and 'to: "bob@example.com"' in shown.out
    approver("carol")
    approved = cli("asks", "approve", paused.ask_id, "--db", str(db), "--approver", "carol")
    assert approved.code == 0, approved.err
    assert cli("asks", "list", "--db", str(db)).out.strip() == "no pending asks"
    again = cli("asks", "approve", paused.ask_id, "--db", str(db), "--by", "carol")
    assert again.code == 2 and "not pending" in again.err
    resumed = anyio.run(authorize, stores, "c1")  # a restarted host tries the call again
    assert resumed.allowed and resumed.answered_by == "carol"
    second = anyio.run(authorize, stores, "c2")
    assert second.pending
    denied = cli("asks", "deny", second.ask_id, "--db", str(db), "--json", "--by", "carol")
    assert denied.code == 0 and json.loads(denied.out)["answer"] == "deny"
    assert anyio.run(authorize, stores, "c2").status == "denied"


def test_unknown_asks_and_bad_scopes_exit_2(cli: Any, stores: Stores, tmp_path: Path) -> None:
    db = stores.target
    paused = anyio.run(authorize, stores, "c1")
    approver("carol")
    assert cli("asks", "approve", "ask_nope", "--db", db, "--by", "carol").code == 2
    bad = cli("asks", "approve", paused.ask_id, "--db", db, "--scope", "1", "--by", "carol")
    assert bad.code == 2 and "--scope goes with" in bad.err
    missing = cli("asks", "list", "--db", str(tmp_path / "none.db"))
    assert missing.code == 2 and "no ask store" in missing.err
