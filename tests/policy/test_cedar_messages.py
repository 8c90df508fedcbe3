"""Policy problems people can act on: placed at the error (line, column, code frame), said
once, with a hint for the usual mistakes; every file's problems reported together."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clearance.errors import ConfigError, PolicyError
from clearance.harness.tools import Tool, ToolRegistry
from clearance.policy.cedar import CedarEngine, CedarEvaluator, check_directory


def _handler(arguments: dict[str, Any], ctx: Any) -> None:
    return None


def _registry() -> ToolRegistry:
    registry = ToolRegistry()
    registry.register(
        "files",
        [
            Tool(
                "read_file",
                _handler,
                input_schema={
                    "type": "object",
                    "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
                    "required": ["path"],
                },
                read_only=True,
            ),
            Tool(
                "write_file",
                _handler,
                input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
            ),
        ],
    )
    registry.register(
        "shop",
        [
            Tool(
                "refund",
                _handler,
                input_schema={
                    "type": "object",
                    "properties": {"amount": {"type": "number"}, "note": {"type": "string"}},
                    "required": ["amount", "note"],
                },
            )
        ],
    )
    return registry


def _problems(policies: str) -> list[dict[str, object]]:
    with pytest.raises(PolicyError) as info:
        CedarEvaluator([("p.cedar", policies)]).bind(_registry())
    return info.value.problems


def test_a_syntax_error_is_placed_at_its_token_with_a_code_frame() -> None:
    text = (
        '@id("reads")\n'
        'permit (principal, action == Action::"files.read_file", resource)\n'
        "when {\n"
        '  context.input.path like "src/*" &&\n'
        "  context.input.limit >< 3\n"
        "};\n"
    )
    with pytest.raises(PolicyError) as info:
        CedarEngine([("p.cedar", text)])
    error = info.value
    assert (error.path, error.line, error.column) == ("p.cedar", 5, 24)
    assert error.problems[0]["frame"] == (
        ' 4 |   context.input.path like "src/*" &&\n'
        " 5 |   context.input.limit >< 3\n"
        "   |                        ^"
    )
    # str() says where, what, and shows it
    assert str(error).splitlines() == [
        "p.cedar:5:24: policy reads: unexpected token `<`",
        '   4 |   context.input.path like "src/*" &&',
        "   5 |   context.input.limit >< 3",
        "     |                        ^",
    ]


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        # Cedar recovers from the bad `,` and would report the end of input if cut there
        ("forbid (principal ==, action, resource);\n", 1, 21),
        # an unterminated string
        ('permit (principal, action, resource)\nwhen { context.x == "abc };\n', 2, 21),
        # an invalid variable: the word itself
        ("permit (principal, actin, resource);\n", 1, 20),
        # a method Cedar does not have
        ("permit (principal, action, resource)\n  when { context.x.frobnicate(1) };\n", 2, 20),
    ],
)
def test_syntax_errors_of_several_kinds_are_placed(text: str, line: int, column: int) -> None:
    with pytest.raises(PolicyError) as info:
        CedarEngine([("p.cedar", text)])
    assert (info.value.line, info.value.column) == (line, column), info.value.problems


def test_a_missing_semicolon_says_so() -> None:
    text = (
        '@id("a")\npermit (principal, action, resource)\n\n'
        '@id("b")\npermit (principal, action, resource);\n'
    )
    with pytest.raises(PolicyError) as info:
        CedarEngine([("p.cedar", text)])
    (problem,) = info.value.problems
    assert (problem["line"], problem["column"]) == (4, 1)
    assert "is the `;` ending the policy before it missing?" in str(problem["message"])


def test_a_misspelled_action_is_reported_once_with_the_nearest_name() -> None:
    problems = _problems(
        '@id("typo")\npermit (principal, action == Action::"files.read_fil", resource);\n'
    )
    assert [(p["line"], p["column"], p["message"]) for p in problems] == [
        (
            2,
            38,
            'Action::"files.read_fil" is not a tool action or action group; '
            'did you mean Action::"files.read_file"?',
        )
    ]


def test_the_model_alias_gets_the_qualified_name() -> None:
    problems = _problems(
        '@id("alias")\npermit (principal, action == Action::"files__write_file", resource);\n'
        '@id("alias-tool")\npermit (principal, action, resource == Tool::"shop__refund");\n'
    )
    messages = [str(p["message"]) for p in problems]
    assert messages == [
        'Action::"files__write_file" is not a tool action or action group: policies use the '
        'qualified name `files.write_file` (Action::"files.write_file"), not the model alias',
        'Tool::"shop__refund" is not a registered tool: policies use the qualified name '
        '`shop.refund` (Tool::"shop.refund"), not the model alias',
    ]


def test_a_decimal_compared_like_a_long_gets_the_decimal_methods() -> None:
    problems = _problems(
        '@id("cap")\npermit (principal, action == Action::"shop.refund", resource)\n'
        'when { context.input.note != "" && context.input.amount <= 100 };\n'
    )
    (problem,) = problems
    assert (problem["line"], problem["column"]) == (3, 50)
    assert "saw decimal" in str(problem["message"])
    assert '`context.input.amount.lessThanOrEqual(decimal("100.0"))`' in str(problem["message"])


def test_the_same_problem_is_said_once() -> None:
    # Cedar reports this type error twice over for one expression.
    problems = _problems(
        '@id("cap")\npermit (principal, action == Action::"shop.refund", resource)\n'
        'when { context.input.amount < decimal("1.5") };\n'
    )
    assert len(problems) == 1
    assert (problems[0]["line"], problems[0]["column"]) == (3, 22)


def test_an_optional_argument_read_unguarded_gets_has() -> None:
    (problem,) = _problems(
        '@id("lim")\npermit (principal, action == Action::"files.read_file", resource)\n'
        "when { context.input.limit < 10 };\n"
    )
    assert "write `context.input has limit && ...` before reading it" in str(problem["message"])
    assert (problem["line"], problem["column"]) == (3, 22)


def test_a_group_compared_with_equals_gets_in() -> None:
    (problem,) = _problems(
        '@id("g")\npermit (principal, action == Action::"read_only", resource);\n'
    )
    assert str(problem["message"]).endswith(
        'Action::"read_only" is an action group, which `==` never matches: '
        'write `action in Action::"read_only"`'
    )
    assert (problem["line"], problem["column"]) == (2, 38)


def test_a_policy_error_lists_every_problem() -> None:
    with pytest.raises(PolicyError) as info:
        CedarEvaluator(
            [
                (
                    "p.cedar",
                    'permit (principal, action == Action::"files.nope", resource);\n'
                    'permit (principal, action == Action::"shop.nope", resource);\n'
                    'permit (principal, action == Action::"files.gone", resource);\n',
                )
            ]
        ).bind(_registry())
    text = str(info.value)
    assert "more)" not in text
    assert [line.split(": ")[0] for line in text.splitlines() if line.startswith("p.cedar")] == [
        "p.cedar:1:38",
        "p.cedar:2:38",
        "p.cedar:3:38",
    ]


def test_check_directory_reports_the_other_files_of_a_syntax_error(tmp_path: Path) -> None:
    (tmp_path / "a.cedar").write_text('@id("broken")\npermit (principal, action resource);\n')
    (tmp_path / "b.cedar").write_text(
        '@id("typo")\npermit (principal, action == Action::"files.reed_file", resource);\n'
    )
    (tmp_path / "c.cedar").write_text('@id("fine")\npermit (principal, action, resource);\n')
    check = check_directory(tmp_path, _registry())
    assert not check.valid
    assert [(Path(str(p["path"])).name, p["line"], p["policy_id"]) for p in check.problems] == [
        ("a.cedar", 2, "broken"),
        ("b.cedar", 2, "typo"),
    ]
    assert check.policies == 2  # the files that parse

    (tmp_path / "a.cedar").unlink()
    (tmp_path / "b.cedar").unlink()
    good = check_directory(tmp_path, _registry())
    assert good.valid and good.policies == 1 and good.ungoverned == ()


def test_the_unexpected_token_is_found_among_hundreds_like_it() -> None:
    # 300 well-placed `==` before the one that is wrong, on one line.
    cond = " && ".join(f'context.a{i} == "x{i}"' for i in range(300))
    line = f"permit (principal, action, resource) when {{ {cond} && context.z == == 1 }};"
    with pytest.raises(PolicyError) as info:
        CedarEngine([("p.cedar", f'@id("long")\n{line}\n')])
    assert (info.value.line, info.value.column) == (2, line.index("== ==") + 4)


LEVELS = '{"entityTypes": {"User": {"shape": {"type": "Record", "attributes": {"level": {"type": "%s"}}}}}}'


def test_an_entity_that_does_not_fit_is_named_with_its_attribute_and_file(tmp_path: Path) -> None:
    # Cedar's own refusal said only "entity does not conform to the schema".
    (tmp_path / "a.cedar").write_text('@id("r") permit(principal, action, resource);')
    (tmp_path / "schema.json").write_text(LEVELS % "Long")
    (tmp_path / "entities.json").write_text(
        '[{"uid": {"type": "User", "id": "alice"}, "attrs": {"level": "high"}, "parents": []}]'
    )
    with pytest.raises(ConfigError) as caught:
        check_directory(tmp_path, _registry())
    assert caught.value.path == str(tmp_path / "entities.json")
    message = str(caught.value)
    assert "`level`" in message and 'User::"alice"' in message and "long" in message


def test_a_schema_json_error_is_a_schema_error(tmp_path: Path) -> None:
    # It was reported as the entities not fitting the schema.
    (tmp_path / "a.cedar").write_text('@id("r") permit(principal, action, resource);')
    (tmp_path / "schema.json").write_text(LEVELS % "Lng")
    with pytest.raises(ConfigError) as caught:
        check_directory(tmp_path, _registry())
    assert caught.value.path == str(tmp_path / "schema.json")
    assert "schema declarations" in str(caught.value) and "Lng" in str(caught.value)
    assert "entities" not in str(caught.value)


def _many(n: int) -> ToolRegistry:
    registry = ToolRegistry()
    schema = {"type": "object", "properties": {"x": {"type": "string"}}}
    registry.register("ns", [Tool(f"t{i}", _handler, input_schema=schema) for i in range(n)])
    return registry


def test_each_group_is_validated_against_its_own_tools_types_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Loading grew with the square of the policies (issue 36): every group's schema carried
    # every tool's input and provenance types. Now a group's schema is the same size
    # whatever the number of tools.
    import json

    import cedarpy

    sizes: dict[int, set[int]] = {}
    real = cedarpy.validate_policies

    for n in (10, 60):
        seen: set[int] = set()

        def spy(policies: str, schema: str, _seen: set[int] = seen) -> Any:
            (body,) = json.loads(schema).values()
            _seen.add(len(body["commonTypes"]))
            return real(policies, schema)

        monkeypatch.setattr(cedarpy, "validate_policies", spy)
        text = "\n".join(
            f'@id("p{i}") permit(principal, action == Action::"ns.t{i}", resource);'
            for i in range(n)
        )
        CedarEvaluator(text).bind(_many(n))
        sizes[n] = seen
    assert sizes[10] == sizes[60] and len(sizes[60]) == 1


def test_a_problem_past_the_first_chunk_of_a_large_group_names_its_policy() -> None:
    # A large group is validated in chunks of policies; a problem is still tied to its own.
    lines = [
        f'@id("p{i}") permit(principal, action == Action::"ns.t0", resource)'
        f' when {{ context.input has x && context.input.x == "v{i}" }};'
        for i in range(450)
    ]
    lines[420] = (
        '@id("typo") permit(principal, action == Action::"ns.t0", resource)'
        " when { context.input.x == 3 };"
    )
    with pytest.raises(PolicyError) as caught:
        CedarEvaluator("\n".join(lines)).bind(_many(1))
    assert {p["policy_id"] for p in caught.value.problems} == {"typo"}
