"""``clearance asks``: answering a paused call's ask from another process, the real CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio

from clearance import Harness, Principal, Tool, ToolRegistry
from clearance.harness.ask_store_sqlite import SqliteAskStore
from clearance.harness.grants_sqlite import SqliteGrantStore
from clearance.policy import LocalEvaluator

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


async def authorize(db: Path, call_id: str) -> Any:
    async with Harness(
        registry(),
        evaluator=LocalEvaluator(ask=["mail.send"]),
        ask_store=SqliteAskStore(db),
        grant_store=SqliteGrantStore(db),
    ) as h:
        session = await h.create_session(principal=ALICE)
        return await session.authorize("mail.send", ARGS, call_id=call_id)


def test_list_show_approve_and_deny(cli: Any, tmp_path: Path) -> None:
    db = tmp_path / "clearance.db"
    paused = anyio.run(authorize, db, "c1")
    assert paused.pending
    listed = cli("asks", "list", "--db", str(db), "--json")
    assert listed.code == 0, listed.err
    (entry,) = json.loads(listed.out)
    assert entry["ask_id"] == paused.ask_id and entry["tool"] == "mail.send"
    shown = cli("asks", "show", paused.ask_id, "--db", str(db))
    assert shown.code == 0 and 'to: "bob@example.com"' in shown.out
    approved = cli("asks", "approve", paused.ask_id, "--db", str(db), "--by", "carol")
    assert approved.code == 0, approved.err
    assert cli("asks", "list", "--db", str(db)).out.strip() == "no pending asks"
    again = cli("asks", "approve", paused.ask_id, "--db", str(db))
    assert again.code == 2 and "not pending" in again.err
    resumed = anyio.run(authorize, db, "c1")  # a restarted host tries the call again
    assert resumed.allowed and resumed.answered_by == "carol"
    second = anyio.run(authorize, db, "c2")
    assert second.pending
    denied = cli("asks", "deny", second.ask_id, "--db", str(db), "--json")
    assert denied.code == 0 and json.loads(denied.out)["answer"] == "deny"
    assert anyio.run(authorize, db, "c2").status == "denied"


def test_unknown_asks_and_bad_scopes_exit_2(cli: Any, tmp_path: Path) -> None:
    db = tmp_path / "clearance.db"
    paused = anyio.run(authorize, db, "c1")
    assert cli("asks", "approve", "ask_nope", "--db", str(db)).code == 2
    bad = cli("asks", "approve", paused.ask_id, "--db", str(db), "--scope", "1")
    assert bad.code == 2 and "--scope goes with" in bad.err
    missing = cli("asks", "list", "--db", str(tmp_path / "none.db"))
    assert missing.code == 2 and "no ask store" in missing.err
