"""The canonical-facts stage (R11) through a real harness, with real files and symlinks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clearance import (
    CallContext,
    Harness,
    MemoryJournal,
    Principal,
    Tool,
    ToolRegistrationError,
    ToolRegistry,
)
from clearance.guardrails import ArgumentGuardrail, GuardrailOutcome
from clearance.harness.approvals import Answer
from clearance.policy import LocalEvaluator
from clearance.policy.cedar import CedarEvaluator
from clearance.toolsets import register_files

pytestmark = pytest.mark.anyio

ALICE = Principal("User", "alice")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "docs").mkdir(parents=True)
    (root / ".env").write_text("API_KEY=s3cret\n")
    (root / "docs" / "notes.md").symlink_to("../.env")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    (root / "link").symlink_to(".git")
    (root / "README.md").write_text("# hello\n")
    return root


def files_harness(ws: Path, evaluator: Any, **options: Any) -> Harness:
    registry = ToolRegistry()
    register_files(registry, ws)
    return Harness(registry, evaluator=evaluator, **options)


async def test_a_deny_rule_sees_the_file_a_symlink_names(ws: Path) -> None:
    journal = MemoryJournal()
    evaluator = LocalEvaluator(allow=["files.*"], deny=["files.*(path=**/.env)"])
    async with files_harness(ws, evaluator, journal=journal) as harness:
        session = await harness.create_session(principal=ALICE)
        outcome = await session.call_tool("files.read_file", {"path": "docs/notes.md"})
        plain = await session.call_tool("files.read_file", {"path": "docs/../README.md"})
    assert outcome.status == "denied"
    assert "s3cret" not in outcome.text
    assert plain.status == "ok" and plain.text == "# hello\n"
    decided = [e for e in journal.events() if e.type == "call_decided"]
    assert decided[0].data["arguments"] == {"path": ".env"}
    assert decided[0].data["facts"]["path"]["path"] == ".env"
    assert decided[1].data["arguments"] == {"path": "README.md"}


async def test_the_person_asked_sees_the_canonical_path(ws: Path) -> None:
    asked: list[dict[str, Any]] = []

    def answer(ask: Any) -> Answer:
        asked.append(dict(ask.arguments))
        assert ask.deciding == ("path",)
        assert ask.facts["path"]["path"] == ".git/config"
        assert ask.to_json()["facts"] == ask.facts
        return "allow_once"

    evaluator = LocalEvaluator(allow=["files.read_file"], ask=["files.write_file"])
    async with files_harness(ws, evaluator) as harness:
        session = await harness.create_session(principal=ALICE, on_permission_ask=answer)
        outcome = await session.call_tool(
            "files.write_file", {"path": "link/config", "content": "[core]\nfsmonitor=x\n"}
        )
    assert asked == [{"path": ".git/config", "content": "[core]\nfsmonitor=x\n"}]
    assert outcome.status == "error" and "protected" in outcome.text
    assert (ws / ".git" / "config").read_text() == "[core]\n"


async def test_a_path_that_cannot_be_canonicalized_is_refused(ws: Path, tmp_path: Path) -> None:
    (ws / "loop").symlink_to("loop")
    (ws / "out").symlink_to(tmp_path)
    journal = MemoryJournal()
    async with files_harness(ws, LocalEvaluator(allow=["files.*"]), journal=journal) as harness:
        session = await harness.create_session(principal=ALICE)
        results = [
            await session.call_tool("files.read_file", {"path": path})
            for path in ("loop", "out/x", "../x", "a\nb")
        ]
    assert [r.status for r in results] == ["blocked"] * 4
    assert "loop" in results[0].text and "outside" in results[1].text
    assert not [e for e in journal.events() if e.type == "tool_started"]
    stages = {e.data["stage"] for e in journal.events() if e.type == "call_decided"}
    assert stages == {"facts"}


async def test_cedar_policies_read_context_facts(ws: Path) -> None:
    policies = """
    @id("read") permit (principal, action == Action::"files.read_file", resource);
    @id("no-dotenv")
    forbid (principal, action == Action::"files.read_file", resource)
    when { context.facts.path.name == ".env" || context.facts.path.segments.contains(".git") };
    """
    registry = ToolRegistry()
    register_files(registry, ws)
    evaluator = CedarEvaluator(policies=policies)
    async with Harness(registry, evaluator=evaluator) as harness:
        session = await harness.create_session(principal=ALICE)
        env = await session.call_tool("files.read_file", {"path": "docs/notes.md"})
        git = await session.call_tool("files.read_file", {"path": "link/config"})
        ok = await session.call_tool("files.read_file", {"path": "./README.md"})
        decision = await harness.decide(
            principal=ALICE, tool="files.read_file", arguments={"path": "docs/notes.md"}
        )
    assert env.status == "denied" and env.reasons == ("no-dotenv",)
    assert git.status == "denied"
    assert ok.status == "ok"
    assert decision.outcome == "deny"
    assert decision.arguments == {"path": ".env"}
    assert decision.facts is not None and decision.facts["path"]["type"] == "file"


def pay_registry(received: list[Any], **facts: Any) -> ToolRegistry:
    def pay(arguments: dict[str, Any], ctx: CallContext) -> str:
        received.append(arguments["to_account"])
        return "paid"

    registry = ToolRegistry()
    registry.register(
        "bank",
        [
            Tool(
                "pay",
                pay,
                input_schema={
                    "type": "object",
                    "properties": {"to_account": {"type": "integer"}, "amount": {"type": "number"}},
                    "required": ["to_account", "amount"],
                    "additionalProperties": False,
                },
                facts=facts,
            )
        ],
    )
    return registry


@pytest.mark.parametrize("spelling", ["666", "666.0", "6.66e2", "666.000"])
async def test_a_number_is_one_value_however_it_is_written(spelling: str) -> None:
    received: list[Any] = []
    registry = pay_registry(received, **{"/to_account": "number", "/amount": "number"})
    evaluator = LocalEvaluator(allow=["bank.pay"], deny=["bank.pay(to_account=666)"])
    async with Harness(registry, evaluator=evaluator) as harness:
        session = await harness.create_session(principal=ALICE)
        arguments = json.loads(f'{{"to_account": {spelling}, "amount": 1.0}}')
        denied = await session.call_tool("bank.pay", arguments)
        paid = await session.call_tool("bank.pay", {"to_account": 7.0, "amount": 2})
    assert denied.status == "denied"
    assert paid.status == "ok"
    assert received == [7] and type(received[0]) is int


async def test_a_guardrail_rewrite_is_canonicalized_too(ws: Path) -> None:
    def rewrite(arguments: dict[str, Any], ctx: Any) -> GuardrailOutcome:
        return GuardrailOutcome.replace({**arguments, "path": "docs/notes.md"})

    evaluator = LocalEvaluator(allow=["files.*"], deny=["files.*(path=.env)"])
    guard = ArgumentGuardrail(rewrite, tools="files.read_file")
    async with files_harness(ws, evaluator, argument_guardrails=[guard]) as harness:
        session = await harness.create_session(principal=ALICE)
        outcome = await session.call_tool("files.read_file", {"path": "README.md"})
    assert outcome.status == "denied"


@pytest.mark.parametrize(
    ("facts", "words"),
    [
        ({"/nope": "number"}, "not an argument"),
        ({"/to_account": "email"}, "reads string"),
        ({"/to_account": "teleport"}, "unknown fact kind"),
        ({"/to_account/x": "number"}, "top-level"),
        ({"/to_account": "path"}, "root="),
    ],
)
def test_bad_fact_declarations_are_registration_errors(facts: Any, words: str) -> None:
    with pytest.raises(ToolRegistrationError, match=words):
        pay_registry([], **facts)
