"""Decision tests: loading ``*.tests.json``, running them, reporting."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clearance.errors import ConfigError, PolicyError
from clearance.harness.tools import Tool, ToolRegistry
from clearance.policy.base import AuthzRequest, Verdict
from clearance.policy.cedar import CedarEvaluator
from clearance.policy.testing import load_decision_tests, run_decision_tests


def _handler(arguments: dict[str, Any], ctx: Any) -> str:
    return "ok"


def _registry() -> ToolRegistry:
    registry = ToolRegistry()
    schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["path"],
        "additionalProperties": False,
    }
    registry.register(
        "files",
        [
            Tool("read_file", _handler, input_schema=schema, read_only=True),
            Tool("write_file", _handler, input_schema=schema),
        ],
    )
    return registry


POLICIES = """
@id("reads") permit(principal, action in Action::"read_only", resource);
@id("writes") @ask("check the write") permit(principal, action == Action::"files.write_file", resource);
@id("no-etc") forbid(principal, action, resource) when { context.input.path like "/etc/*" };
@id("team") permit(principal in Team::"ops", action, resource);
"""

SCHEMA = {"entityTypes": {"Team": {}, "User": {"memberOfTypes": ["Team"]}, "Agent": {}}}


def _pack(tmp_path: Path, tests: list[dict[str, Any]], name: str = "pack.tests.json") -> Path:
    (tmp_path / "pack.cedar").write_text(POLICIES)
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    (tmp_path / name).write_text(json.dumps({"tests": tests}))
    return tmp_path


def _case(**fields: Any) -> dict[str, Any]:
    base = {
        "name": "read",
        "principal": 'User::"alice"',
        "tool": "files.read_file",
        "arguments": {"path": "a.txt"},
        "expect": "allow",
    }
    return {**base, **fields}


def test_passing_and_failing_cases_are_reported(tmp_path: Path) -> None:
    directory = _pack(
        tmp_path,
        [
            _case(policies=["reads"]),
            _case(name="write asks", tool="files.write_file", expect="ask", policies=["writes"]),
            _case(
                name="etc", arguments={"path": "/etc/passwd"}, expect="deny", policies=["no-etc"]
            ),
            _case(name="wrong effect", tool="files.write_file", expect="allow"),
            _case(name="wrong policies", policies=["writes"]),
        ],
    )
    report = run_decision_tests(directory, registry=_registry())
    assert [r.passed for r in report.results] == [True, True, True, False, False]
    assert not report.passed
    assert report.counts == {"total": 5, "passed": 3, "failed": 2}
    wrong_effect, wrong_policies = report.failures
    assert wrong_effect.actual == "ask"
    assert wrong_effect.problem == "expected allow, got ask; message: check the write"
    assert wrong_policies.problem == "expected policies [writes], got [reads]"
    assert report.results[2].reasons == ("no-etc",)
    text = report.format()
    assert "PASS  pack.tests.json: read: allow (reads)" in text
    assert "FAIL  pack.tests.json: wrong effect: ask (writes)" in text
    assert text.endswith("3 passed, 2 failed, 5 total")
    data = report.to_json()
    assert data["failed"] == 2
    assert data["results"][3]["expect"] == "allow" and data["results"][3]["actual"] == "ask"
    json.dumps(data)


def test_an_empty_policy_list_expects_no_deciding_policy(tmp_path: Path) -> None:
    directory = _pack(
        tmp_path,
        [
            _case(
                principal='Agent::"x"', tool="files.write_file", expect="ask", policies=["writes"]
            ),
            _case(
                principal='User::"bob"', tool="files.read_file", expect="allow", policies=["reads"]
            ),
        ],
    )
    assert run_decision_tests(directory, registry=_registry()).passed
    other = tmp_path / "other"
    other.mkdir()
    (other / "p.cedar").write_text("forbid(principal, action, resource);")
    (other / "t.tests.json").write_text(json.dumps({"tests": [_case(expect="deny", policies=[])]}))
    report = run_decision_tests(other, registry=_registry())
    assert not report.passed
    assert report.results[0].problem == (
        "expected policies [none], got [policy0]; message: forbidden by policy0"
    )


def test_principals_with_parents_and_attributes(tmp_path: Path) -> None:
    directory = _pack(
        tmp_path,
        [
            _case(
                name="ops may write",
                principal={"type": "User", "id": "olga", "parents": [["Team", "ops"]]},
                tool="files.write_file",
                expect="allow",
                policies=["team", "writes"],
            ),
            _case(
                name="parents as text",
                principal={"type": "User", "id": "olga", "parents": ['Team::"ops"']},
                tool="files.write_file",
                expect="allow",
            ),
        ],
    )
    assert run_decision_tests(directory, registry=_registry()).passed


def test_cases_the_pipeline_would_reject_fail_clearly(tmp_path: Path) -> None:
    directory = _pack(
        tmp_path,
        [
            _case(name="unknown tool", tool="files.nope"),
            _case(name="bad arguments", arguments={"path": "a", "limit": "ten"}),
        ],
    )
    unknown, bad = run_decision_tests(directory, registry=_registry()).results
    assert unknown.actual == "error" and unknown.problem == "no registered tool 'files.nope'"
    assert bad.actual == "invalid" and not bad.passed
    assert bad.problem is not None and "do not match the tool's schema" in bad.problem


def test_a_case_may_expect_the_pipeline_to_refuse_the_arguments(tmp_path: Path) -> None:
    directory = _pack(
        tmp_path,
        [_case(name="bad arguments", arguments={"path": "a", "limit": "ten"}, expect="invalid")],
    )
    (case,) = run_decision_tests(directory, registry=_registry()).results
    assert case.passed and case.actual == "invalid"
    assert case.message is not None and "schema" in case.message


def test_the_evaluator_can_be_given(tmp_path: Path) -> None:
    directory = _pack(tmp_path, [_case(expect="deny")])

    class DenyAll:
        def evaluate(self, request: AuthzRequest) -> Verdict:
            return Verdict.deny(message="no")

    assert run_decision_tests(directory, DenyAll(), _registry()).passed

    class Async:
        async def evaluate(self, request: AuthzRequest) -> Verdict:
            return Verdict.deny("r")

    assert run_decision_tests(directory, Async(), _registry()).passed

    class Broken:
        def evaluate(self, request: AuthzRequest) -> Verdict:
            raise RuntimeError("boom")

    (result,) = run_decision_tests(directory, Broken(), _registry()).results
    assert result.actual == "error"
    assert result.problem == "the evaluator raised RuntimeError: boom"


def test_a_bound_evaluator_brings_its_tools(tmp_path: Path) -> None:
    directory = _pack(tmp_path, [_case()])
    evaluator = CedarEvaluator.from_directory(directory)
    with pytest.raises(ConfigError, match="pass registry="):
        run_decision_tests(directory, evaluator)
    evaluator.bind(_registry())
    assert run_decision_tests(directory, evaluator).passed


def test_invalid_policies_raise(tmp_path: Path) -> None:
    directory = _pack(tmp_path, [_case()])
    (directory / "pack.cedar").write_text("permit(principal, action, resource) when { context.x };")
    with pytest.raises(PolicyError):
        run_decision_tests(directory, registry=_registry())


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("{not json", "not JSON"),
        ('{"cases": []}', 'must be {"tests": \\[...\\]}'),
        ('{"tests": [1]}', "test #1: each test must be an object"),
        (
            '{"tests": [{"name": "x", "tool": "files.read_file", "expect": "maybe", "principal": "User::\\"a\\""}]}',
            "test 'x': 'expect' must be",
        ),
        (
            '{"tests": [{"name": "x", "tool": "files.read_file", "expect": "allow", "principal": "alice"}]}',
            "principal must look like",
        ),
        (
            '{"tests": [{"name": "x", "tool": "files.read_file", "expect": "allow", "principal": "User::\\"a\\"", "extra": 1}]}',
            "unknown keys \\['extra'\\]",
        ),
        (
            '{"tests": [{"name": "x", "tool": "files.read_file", "expect": "allow", "principal": "User::\\"a\\"", "policies": "p"}]}',
            "'policies' must be a list",
        ),
    ],
)
def test_malformed_files_are_config_errors(tmp_path: Path, content: str, match: str) -> None:
    (tmp_path / "p.cedar").write_text("permit(principal, action, resource);")
    (tmp_path / "bad.tests.json").write_text(content)
    with pytest.raises(ConfigError, match=match) as info:
        load_decision_tests(tmp_path)
    assert info.value.path == str(tmp_path / "bad.tests.json")


def test_no_tests_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "p.cedar").write_text("permit(principal, action, resource);")
    with pytest.raises(ConfigError, match="no decision tests"):
        run_decision_tests(tmp_path, registry=_registry())


def test_cases_load_in_file_order_with_their_location(tmp_path: Path) -> None:
    _pack(tmp_path, [_case(name="b1"), _case(name="b2")], name="b.tests.json")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.tests.json").write_text(
        json.dumps({"tests": [_case(name="a1", session={"id": "s9", "turn": "t"})]})
    )
    cases = load_decision_tests(tmp_path)
    assert [(Path(c.path).name, c.index, c.name) for c in cases] == [
        ("b.tests.json", 0, "b1"),
        ("b.tests.json", 1, "b2"),
        ("a.tests.json", 0, "a1"),
    ]
    assert cases[2].session.id == "s9" and cases[2].session.turn_id == "t"


def test_progress_is_reported_after_each_case(tmp_path: Path) -> None:
    directory = _pack(tmp_path, [_case(), _case(name="again")])
    seen: list[tuple[int, int]] = []
    report = run_decision_tests(
        directory, registry=_registry(), progress=lambda d, t: seen.append((d, t))
    )
    assert seen == [(1, 2), (2, 2)] and len(report.results) == 2
