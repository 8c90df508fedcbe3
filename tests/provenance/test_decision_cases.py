"""Decision tests (``*.tests.json``) carry the conversation before their call, so a pack
can test the policies that read ``context.provenance``, under its own trust list."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clearance import Tool, ToolRegistry
from clearance.errors import ConfigError
from clearance.policy.testing import run_decision_tests

POLICIES = """
@id("all") permit (principal, action, resource);
@id("recipient-from-tool") forbid (principal, action == Action::"bank.send_money", resource)
when { context.provenance.recipient.tool && !context.provenance.recipient.user };
"""
SEND = {
    "type": "object",
    "properties": {"recipient": {"type": "string"}},
    "required": ["recipient"],
}


def registry() -> ToolRegistry:
    def handler(arguments: dict[str, Any], ctx: Any) -> str:
        return "ok"

    reg = ToolRegistry()
    reg.register(
        "bank",
        [
            Tool("send_money", handler, input_schema=SEND),
            Tool("read_statement", handler),
            Tool("get_user_info", handler),
        ],
    )
    return reg


def case(name: str, expect: str, conversation: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "name": name,
        "principal": 'User::"alice"',
        "tool": "bank.send_money",
        "arguments": {"recipient": "CH9300762011623852957"},
        "expect": expect,
        "conversation": conversation,
    }


def statement(tool: str) -> dict[str, Any]:
    return {"role": "tool", "tool": tool, "call_id": "c1", "content": "CH93 0076 2011 6238 5295 7"}


def test_cases_read_provenance_from_their_conversation(tmp_path: Path) -> None:
    (tmp_path / "p.cedar").write_text(POLICIES)
    (tmp_path / "provenance.toml").write_text('trusted_tools = ["bank.get_user_info"]\n')
    tests = [
        case("from a statement", "deny", [statement("bank.read_statement")]),
        case(
            "the user named it",
            "allow",
            [
                {"role": "user", "content": "pay ch9300762011623852957"},
                statement("bank.read_statement"),
            ],
        ),
        case("a trusted tool", "allow", [statement("bank.get_user_info")]),
        case("no conversation: made up", "allow", []),
    ]
    (tmp_path / "p.tests.json").write_text(json.dumps({"tests": tests}))
    report = run_decision_tests(tmp_path, registry=registry())
    assert report.passed, report.format()
    assert [(r.test.name, r.actual) for r in report.results] == [
        (t["name"], t["expect"]) for t in tests
    ]


def test_a_bad_conversation_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "p.cedar").write_text(POLICIES)
    bad = case("bad", "deny", [{"role": "assistant", "content": "x"}])
    (tmp_path / "p.tests.json").write_text(json.dumps({"tests": [bad]}))
    with pytest.raises(ConfigError, match="role"):
        run_decision_tests(tmp_path, registry=registry())
