"""Suggestions never loosen (issue 15): calls that were asked and then approved keep an ask,
no allow suggestion covers them, and near-identical exact rules merge into one rule whose
scope says what it allows, without allowing more."""

from __future__ import annotations

import json
from typing import Any, Literal

import anyio
import pytest

from clearance import Harness, MemoryJournal, Principal, Tool, ToolRegistry
from clearance.tuning import ArgumentConstraint, SuggestionSet, allowed_calls, suggest

Format = Literal["cedar", "local"]
ALICE = 'User::"alice"'


def _noop(arguments: dict[str, Any], ctx: Any) -> str:
    return ""


def registry() -> ToolRegistry:
    r = ToolRegistry()
    s = {"type": "string"}
    r.register(
        "files",
        [
            Tool(
                "read_file",
                _noop,
                input_schema={
                    "type": "object",
                    "properties": {"path": s},
                    "required": ["path"],
                    "additionalProperties": False,
                },
                read_only=True,
            )
        ],
    )
    r.register(
        "git",
        [
            Tool(
                "commit",
                _noop,
                input_schema={
                    "type": "object",
                    "properties": {"repo": s, "message": s},
                    "required": ["repo", "message"],
                    "additionalProperties": False,
                },
            )
        ],
    )
    return r


def _record(tool: str, arguments: dict[str, Any], decision: str = "allow") -> str:
    """A journal export's line: a call decided ``decision`` that ran."""
    return json.dumps(
        {
            "principal": ALICE,
            "tool": tool,
            "arguments": arguments,
            "decision": decision,
            "expected": decision,
            "outcome": "ok",
        }
    )


def _suggest(lines: list[str], fmt: Format) -> SuggestionSet:
    calls, _ = allowed_calls(lines)
    return suggest(calls, registry(), format=fmt)


def decide(rules: SuggestionSet, fmt: Format, tool: str, arguments: dict[str, Any]) -> str:
    async def run() -> str:
        harness = Harness(registry(), evaluator=rules.evaluator(fmt), journal=MemoryJournal())
        decided = await harness.decide(
            principal=Principal.parse(ALICE), tool=tool, arguments=arguments
        )
        return decided.outcome

    return anyio.run(run)


READS = [
    _record("files.read_file", {"path": "src/a/x.py"}),
    _record("files.read_file", {"path": "src/b/y.py"}),
    _record("files.read_file", {"path": "src/c/z.py"}, "ask"),
    _record("files.read_file", {"path": "docs/p/1.md"}, "ask"),
    _record("files.read_file", {"path": "docs/q/2.md"}, "ask"),
]


@pytest.mark.parametrize("fmt", ["cedar", "local"])
def test_asked_calls_keep_their_ask(fmt: Format) -> None:
    rules = _suggest(READS, fmt)
    asked = [s for s in rules.suggestions if s.ask]
    assert asked, rules.suggestions
    # The calls that were asked are asked again; those that were allowed are allowed.
    for path in ("src/c/z.py", "docs/p/1.md", "docs/q/2.md"):
        assert decide(rules, fmt, "files.read_file", {"path": path}) == "ask", path
    for path in ("src/a/x.py", "src/b/y.py"):
        assert decide(rules, fmt, "files.read_file", {"path": path}) == "allow", path
    # The asked calls generalize (docs/*) but stay asked.
    assert decide(rules, fmt, "files.read_file", {"path": "docs/r/3.md"}) == "ask"
    if fmt == "cedar":
        text = rules.to_cedar()
        assert '@ask("asked and approved in the recorded calls")' in text
        assert text.count("@ask(") == len(asked)
    else:
        toml = rules.to_local_toml()
        assert "ask = [" in toml
        assert rules.to_local_rules()[ALICE]["ask"]


def test_an_allow_rule_never_covers_an_asked_call() -> None:
    """src/a and src/b were allowed, src/c asked: ``src/*`` would allow src/c without asking
    (in Cedar a plain permit beats an @ask one), so the allow rules are exact."""
    rules = _suggest(READS, "cedar")
    allow = [s for s in rules.suggestions if not s.ask]
    # Narrowed to the exact calls, which then merge into one rule listing both paths.
    assert [dict(s.constraints)["path"] for s in allow] == [
        ArgumentConstraint("oneof", ("src/a/x.py", "src/b/y.py"))
    ]
    assert all(any("narrowed" in n for n in s.notes) for s in allow)
    assert decide(rules, "cedar", "files.read_file", {"path": "src/d/w.py"}) == "deny"


def test_the_same_call_allowed_and_asked_keeps_the_ask() -> None:
    lines = [
        _record("files.read_file", {"path": "src/a/x.py"}),
        _record("files.read_file", {"path": "src/a/x.py"}, "ask"),
    ]
    rules = _suggest(lines, "cedar")
    assert all(s.ask for s in rules.suggestions)
    assert any("which was asked: kept as @ask" in n for s in rules.suggestions for n in s.notes)
    assert decide(rules, "cedar", "files.read_file", {"path": "src/a/x.py"}) == "ask"


COMMITS = [
    _record("git.commit", {"repo": "/r1", "message": "x"}),
    _record("git.commit", {"repo": "/r1", "message": "y"}),
    _record("git.commit", {"repo": "/r1", "message": "m"}),
    _record("git.commit", {"repo": "/r2", "message": "x"}),
]


@pytest.mark.parametrize("fmt", ["cedar", "local"])
def test_near_identical_exact_rules_merge(fmt: Format) -> None:
    rules = _suggest(COMMITS, fmt)
    by_repo = {dict(s.constraints)["repo"].value: s for s in rules.suggestions}
    assert set(by_repo) == {"/r1", "/r2"}
    r1 = by_repo["/r1"]
    assert dict(r1.constraints)["message"] == ArgumentConstraint("oneof", ("x", "y", "m"))
    assert r1.scope() == 'repo: "/r1"; message: one of "x", "y", "m"'
    assert len(r1.calls) == 3
    for call in COMMITS:
        arguments = json.loads(call)["arguments"]
        assert decide(rules, fmt, "git.commit", arguments) == "allow"
    # Merging allows exactly the union: not /r2 with "y" (never seen), nor another message.
    assert decide(rules, fmt, "git.commit", {"repo": "/r2", "message": "y"}) != "allow"
    assert decide(rules, fmt, "git.commit", {"repo": "/r1", "message": "z"}) != "allow"
    if fmt == "cedar":
        text = rules.to_cedar()
        assert text.count("@id(") == 2
        assert '// scope: repo: "/r1"; message: one of "x", "y", "m"' in text
        assert (
            '(context.input.message == "x" || context.input.message == "y" || '
            'context.input.message == "m")'
        ) in text
    else:
        assert rules.to_local()[ALICE][:3] == [
            "git.commit(repo=/r1, message=x)",
            "git.commit(repo=/r1, message=y)",
            "git.commit(repo=/r1, message=m)",
        ]
