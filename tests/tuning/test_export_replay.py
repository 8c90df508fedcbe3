"""A journal export replays to the live decisions (issue 32): the calls a harness decided on
provenance, grants and asks, exported with ``clearance journal export``, are decided the same
by ``clearance replay`` on the same policies, and a candidate that drops the provenance
forbid shows the call it would have let through as a flip."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from console_script import clearance as clearance_cli

from clearance import CallContext, Harness, SqliteJournal, Tool, ToolRegistry
from clearance.policy.cedar import CedarEvaluator
from clearance.provenance import TrustList
from clearance.types import Principal

pytestmark = pytest.mark.anyio

FRIEND = "GB29NWBK60161331926819"
STRANGER = "US133000000121212121212"

SCHEMA = {
    "type": "object",
    "properties": {"recipient": {"type": "string"}, "amount": {"type": "number"}},
    "required": ["recipient", "amount"],
}
DECLARED = [
    {"name": "bank.send_money", "input_schema": SCHEMA, "facts": {"/amount": "number"}},
    {"name": "bank.get_transactions", "input_schema": {"type": "object"}, "read_only": True},
]

PACK = """
@id("read")
permit (principal, action in Action::"read_only", resource);

@id("payee-not-named-by-user")
forbid (principal, action == Action::"bank.send_money", resource)
when { !context.provenance.recipient.user };

@id("pay-small")
permit (principal, action == Action::"bank.send_money", resource)
when { context.input.amount.lessThanOrEqual(decimal("100.0")) };

@id("pay-large")
@ask("a large payment")
permit (principal, action == Action::"bank.send_money", resource)
when { context.input.amount.greaterThan(decimal("100.0")) };
"""
CANDIDATE = "\n".join(
    block for block in PACK.split("\n\n") if "payee-not-named-by-user" not in block
)

HISTORY = [{"sender": STRANGER, "amount": 0.01, "subject": f"refund me at {STRANGER}"}]


def _registry() -> ToolRegistry:
    async def send(arguments: dict[str, Any], ctx: CallContext) -> str:
        return "sent"

    async def transactions(arguments: dict[str, Any], ctx: CallContext) -> Any:
        return HISTORY

    registry = ToolRegistry()
    registry.register(
        "bank",
        [
            Tool("send_money", send, input_schema=SCHEMA, facts={"/amount": "number"}),
            Tool("get_transactions", transactions, input_schema={"type": "object"}, read_only=True),
        ],
    )
    return registry


@pytest.fixture
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.chdir(tmp_path)  # no configuration file: the declared tools only
    live, candidate = tmp_path / "live", tmp_path / "candidate"
    for path, text in ((live, PACK), (candidate, CANDIDATE)):
        path.mkdir()
        (path / "bank.cedar").write_text(text)
    (tmp_path / "tools.json").write_text(json.dumps(DECLARED))
    return live, candidate


async def _live_run(tmp_path: Path, policies: Path) -> None:
    """Four calls of one session: a payee the user named (allowed), the stranger a tool
    result named (denied by provenance), a large payment answered ``allow_always`` (asked,
    then a grant), and the same large payment again (allowed by the grant)."""

    journal = SqliteJournal(tmp_path / "live.db")
    async with Harness(
        _registry(),
        evaluator=CedarEvaluator.from_directory(policies),
        journal=journal,
        trust=TrustList.from_directory(policies),
        journal_messages=True,
    ) as harness:
        session = await harness.create_session(
            principal=Principal("User", "emma"), on_permission_ask=lambda ask: "allow_always"
        )
        session.add_user_message(f"Pay my friend {FRIEND} for dinner, then refund my payer.")
        await session.call_tool("bank.get_transactions", {}, call_id="c0")
        friend = await session.call_tool(
            "bank.send_money", {"recipient": FRIEND, "amount": 30}, call_id="c1"
        )
        stranger = await session.call_tool(
            "bank.send_money", {"recipient": STRANGER, "amount": 0.01}, call_id="c2"
        )
        large = await session.call_tool(
            "bank.send_money", {"recipient": FRIEND, "amount": 500}, call_id="c3"
        )
        again = await session.call_tool(
            "bank.send_money", {"recipient": FRIEND, "amount": 500}, call_id="c4"
        )
    assert [o.status for o in (friend, stranger, large, again)] == [
        "ok",
        "denied",
        "ok",
        "ok",
    ]


async def test_an_export_replays_to_the_live_decisions(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    live, _ = dirs
    await _live_run(tmp_path, live)
    done = clearance_cli("journal", "export", "--db", "live.db", "-o", "week.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = (tmp_path / "week.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert [(r["call_id"], r["expected"]) for r in records] == [
        ("c0", "allow"),
        ("c1", "allow"),
        ("c2", "deny"),
        ("c3", "ask"),
        ("c4", "ask"),
    ]
    assert records[4]["grant"]  # allowed by the grant the answer made

    done = clearance_cli(
        "replay",
        "week.jsonl",
        "--policies",
        "live",
        "--tools",
        "tools.json",
        "--json",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["agreement"]["agree"], report["agreement"]["with_expected"]) == (5, 5)

    flips = tmp_path / "flips.jsonl"
    done = clearance_cli(
        "replay",
        "week.jsonl",
        "--policies",
        "candidate",
        "--baseline",
        "live",
        "--tools",
        "tools.json",
        "--flips",
        str(flips),
        "--strict",
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stdout  # the candidate loosens the live set
    assert [
        (f["id"].split("/")[1], f["baseline"], f["outcome"])
        for f in map(json.loads, flips.read_text().splitlines())
    ] == [("c2", "deny", "allow")]


async def test_without_the_messages_the_export_says_what_a_replay_lacks(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    live, _ = dirs
    async with Harness(
        _registry(),
        evaluator=CedarEvaluator.from_directory(live),
        journal=SqliteJournal(tmp_path / "live.db"),
    ) as harness:
        session = await harness.create_session(principal=Principal("User", "emma"))
        session.add_user_message(f"Pay {FRIEND} 30.")
        allowed = await session.call_tool(
            "bank.send_money", {"recipient": FRIEND, "amount": 30}, call_id="c1"
        )
        assert allowed.status == "ok"
    done = clearance_cli("journal", "export", "--db", "live.db", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "1 call(s) were decided on provenance" in done.stderr
    assert "[journal] messages = true" in done.stderr
    [record] = map(json.loads, done.stdout.splitlines())
    assert record["conversation"] == []  # what the user wrote was not kept


async def test_a_message_no_store_can_hold_is_recorded_as_unrecorded(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    async with Harness(
        _registry(),
        evaluator=CedarEvaluator.from_directory(dirs[0]),
        journal=SqliteJournal(tmp_path / "j.db"),
        journal_messages=True,
    ) as harness:
        session = await harness.create_session(principal=Principal("User", "emma"))
        session.add_user_message("half a pair \ud800 here")
        session.add_user_message("fine")
        first = await session.call_tool("bank.get_transactions", {}, call_id="c1")
        second = await session.call_tool("bank.get_transactions", {}, call_id="c2")
        assert (first.status, second.status) == ("ok", "ok")  # the calls go on
    journal = SqliteJournal(tmp_path / "j.db")
    try:
        added = [e.data for e in journal.events() if e.type == "message_added"]
    finally:
        await journal.aclose()
    assert added == [
        {"role": "user", "unrecorded": added[0]["unrecorded"]},
        {"role": "user", "content": "fine"},
    ]
    assert "surrogate" in added[0]["unrecorded"]
