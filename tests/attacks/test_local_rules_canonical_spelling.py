"""Attacks on ``LocalEvaluator`` deny rules over fact-declared arguments: dead rules.

With facts (rule R11) a rule is matched against the *canonical* argument: a lower-case
e-mail address, a URL with a lower-case host and no default port, a relative resolved path.
The rule's own glob is not canonicalized, and ``bind`` does not check that it can match a
canonical value at all. A deny rule spelled the way people write these values
(``*@Competitor.com``, ``https://Evil.example/**``, an explicit ``:443``, an absolute path
inside the workspace) can then never match: it is silently dead (the design refuses dead
Cedar policies for that reason), and a call spelled *exactly like the rule* is allowed.
Before facts, that same call was denied.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clearance import CallContext, Harness, MemoryJournal, Principal, Tool, ToolRegistry
from clearance.errors import RuleError
from clearance.facts import EmailFact, UrlFact
from clearance.policy import LocalEvaluator
from clearance.toolsets import register_files

pytestmark = pytest.mark.anyio

ALICE = Principal("User", "alice")


def registry(ran: list[dict[str, Any]]) -> ToolRegistry:
    def handler(arguments: dict[str, Any], ctx: CallContext) -> str:
        ran.append(arguments)
        return "done"

    def schema(name: str) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {name: {"type": "string"}},
            "required": [name],
            "additionalProperties": False,
        }

    reg = ToolRegistry()
    reg.register(
        "mail", [Tool("send", handler, input_schema=schema("to"), facts={"/to": EmailFact()})]
    )
    reg.register(
        "web",
        [
            Tool(
                "fetch",
                handler,
                read_only=True,
                input_schema=schema("url"),
                facts={"/url": UrlFact()},
            )
        ],
    )
    return reg


@pytest.mark.parametrize(
    ("rule", "tool", "arguments"),
    [
        ("mail.send(to=*@Competitor.com)", "mail__send", {"to": "bob@Competitor.com"}),
        ("web.fetch(url=https://Evil.example/**)", "web__fetch", {"url": "https://Evil.example/x"}),
        (
            "web.fetch(url=https://evil.example:443/**)",
            "web__fetch",
            {"url": "https://evil.example:443/x"},
        ),
    ],
)
async def test_a_deny_rule_denies_a_call_spelled_exactly_like_it(
    rule: str, tool: str, arguments: dict[str, Any]
) -> None:
    ran: list[dict[str, Any]] = []
    try:
        evaluator = LocalEvaluator(allow=["mail.send", "web.fetch"], deny=[rule])
        async with Harness(registry(ran), evaluator=evaluator, journal=MemoryJournal()) as h:
            session = await h.create_session(principal=ALICE)
            outcome = await session.call_tool(tool, arguments)
    except RuleError:
        return  # refusing a rule that can never match is a fix too
    assert ran == [], f"denied by {rule!r}, yet it ran: {outcome.status} {outcome.reasons}"


async def test_an_absolute_path_deny_rule_denies_the_absolute_path(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    (workspace / "secrets").mkdir(parents=True)
    (workspace / "secrets" / "key").write_text("sk-live-123\n")
    reg = ToolRegistry()
    register_files(reg, workspace)
    secret = str((workspace / "secrets").resolve())
    try:
        evaluator = LocalEvaluator(allow=["files.*"], deny=[f"files.*(path={secret}/**)"])
        async with Harness(reg, evaluator=evaluator, journal=MemoryJournal()) as h:
            session = await h.create_session(principal=ALICE)
            outcome = await session.call_tool("files__read_file", {"path": f"{secret}/key"})
    except RuleError:
        return  # refusing a rule that can never match is a fix too
    assert "sk-live-123" not in outcome.text, f"read past the deny rule ({outcome.status})"
