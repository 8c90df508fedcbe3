"""What `clearance policy validate` (and any command that loads policies) says about bad
policies: every problem of every file, once, on stdout, each at its line and column with
the line shown and a caret, with a hint for the usual mistakes (real console script)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

TOOLS = {
    "version": 1,
    "tools": [
        {
            "name": "shop.refund",
            "input_schema": {
                "type": "object",
                "properties": {"amount": {"type": "number"}, "order": {"type": "string"}},
                "required": ["amount", "order"],
            },
        }
    ],
}
SYNTAX = (
    '@id("broken")\npermit (principal, action, resource)\nwhen { context.input.amount >< 3 };\n'
)
MISTAKES = """\
@id("alias")
permit (principal, action == Action::"shop__refund", resource);

@id("typo")
permit (principal, action == Action::"shop.refnd", resource);

@id("cap")
permit (principal, action == Action::"shop.refund", resource)
when { context.input.amount <= 100 };
"""


@pytest.fixture
def policies(tmp_path: Path) -> Path:
    (tmp_path / "tools.json").write_text(json.dumps(TOOLS))
    directory = tmp_path / "p"
    directory.mkdir()
    (directory / "a.cedar").write_text(SYNTAX)
    (directory / "b.cedar").write_text(MISTAKES)
    return directory


def test_validate_says_every_problem_once_where_it_is(cli: Any, policies: Path) -> None:
    r = cli("policy", "validate", "p", "--tools", "tools.json")
    assert r.code == 1 and r.err == ""
    assert r.out.splitlines() == [
        # a syntax error in one file does not hide the problems of the other
        "p/a.cedar:3:30: policy broken: unexpected token `<`",
        "   2 | permit (principal, action, resource)",
        "   3 | when { context.input.amount >< 3 };",
        "     |                              ^",
        'p/b.cedar:2:38: policy alias: Action::"shop__refund" is not a tool action or action '
        'group: policies use the qualified name `shop.refund` (Action::"shop.refund"), not '
        "the model alias",
        '   1 | @id("alias")',
        '   2 | permit (principal, action == Action::"shop__refund", resource);',
        "     |                                      ^^^^^^^^^^^^^^",
        'p/b.cedar:5:38: policy typo: Action::"shop.refnd" is not a tool action or action '
        'group; did you mean Action::"shop.refund"?',
        '   4 | @id("typo")',
        '   5 | permit (principal, action == Action::"shop.refnd", resource);',
        "     |                                      ^^^^^^^^^^^^",
        "p/b.cedar:9:22: policy cap: unexpected type: expected Long but saw decimal; "
        "`context.input.amount` is a Cedar decimal (a JSON Schema number): compare it with "
        'decimal values and methods, e.g. `context.input.amount.lessThanOrEqual(decimal("100.0"))`'
        ' or `context.input.amount == decimal("1.0")` (`<`, `<=`, `>`, `>=` take Long only)',
        '   8 | permit (principal, action == Action::"shop.refund", resource)',
        "   9 | when { context.input.amount <= 100 };",
        "     |                      ^^^^^^",
        "4 problem(s) in 2 file(s) in p (schema of 1 tool (shop 1) from tools.json)",
    ]

    js = cli("policy", "validate", "p", "--tools", "tools.json", "--json")
    assert js.code == 1
    doc = json.loads(js.out)
    assert [(p["path"], p["line"], p["column"]) for p in doc["problems"]] == [
        ("p/a.cedar", 3, 30),
        ("p/b.cedar", 2, 38),
        ("p/b.cedar", 5, 38),
        ("p/b.cedar", 9, 22),
    ]
    assert doc["policies"] == 3 and doc["tools_from"] == "tools.json"


def test_commands_that_load_policies_list_every_problem(cli: Any, policies: Path) -> None:
    (policies / "a.cedar").unlink()
    (policies / "b.tests.json").write_text(
        json.dumps(
            {
                "tests": [
                    {
                        "name": "x",
                        "principal": 'User::"a"',
                        "tool": "shop.refund",
                        "arguments": {"amount": 1, "order": "o"},
                        "expect": "allow",
                    }
                ]
            }
        )
    )
    r = cli("policy", "test", "p", "--tools", "tools.json")
    assert r.code == 2
    assert "more)" not in r.err
    located = [line.split(": policy ")[0] for line in r.err.splitlines() if ": policy " in line]
    assert located == ["error: p/b.cedar:2:38", "p/b.cedar:5:38", "p/b.cedar:9:22"]


def test_a_set_method_on_a_string_says_to_use_like(cli: Any, tmp_path: Path) -> None:
    """Cedar names "a set of anything" `Set<__cedar::internal::Any>` and its help ("try
    using `like`") does not reach cedarpy: the message names neither the internal type nor
    leaves the fix out."""
    (tmp_path / "tools.json").write_text(json.dumps(TOOLS))
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "c.cedar").write_text(
        '@id("order")\npermit (principal, action == Action::"shop.refund", resource)\n'
        'when { context.input.order.contains("gift") };\n'
    )
    r = cli("policy", "validate", "p", "--tools", "tools.json")
    assert r.code == 1
    assert r.out.splitlines()[0] == (
        "p/c.cedar:3:22: policy order: unexpected type: expected a set but saw String; "
        "`.contains`, `.containsAll` and `.containsAny` are a set's: to look inside a string "
        'use `like`, e.g. `context.input.order like "*gift*"`'
    )
    assert "__cedar" not in r.out


def test_an_unknown_entity_type_is_placed_with_the_nearest_type(cli: Any, tmp_path: Path) -> None:
    (tmp_path / "tools.json").write_text(json.dumps(TOOLS))
    (tmp_path / "p").mkdir()
    scope = 'permit (principal == {}::"alice", action == Action::"shop.refund", resource);\n'
    (tmp_path / "p" / "a.cedar").write_text('@id("typo")\n' + scope.format("Usr"))
    (tmp_path / "p" / "b.cedar").write_text('@id("other")\n' + scope.format("Robot"))
    r = cli("policy", "validate", "p", "--tools", "tools.json")
    assert r.code == 1
    problems = [line for line in r.out.splitlines() if line.startswith("p/")]
    assert problems == [
        "p/a.cedar:2:22: policy typo: unrecognized entity type `Usr`; did you mean `User`?",
        "p/b.cedar:2:22: policy other: unrecognized entity type `Robot`; the schema's entity "
        "types: `Agent`, `Namespace`, `Tool`, `User`",
    ]
