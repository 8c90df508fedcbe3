"""Decision tests as ``opa test`` and Cerbos users expect them (issue 15): cases that name
the model alias, the stage that decided each case, selection, policy coverage and JUnit
XML."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from clearance.harness.tools import Tool, ToolRegistry
from clearance.policy.local import LocalEvaluator
from clearance.policy.testing import run_decision_tests


def _handler(arguments: dict[str, Any], ctx: Any) -> str:
    return "ok"


def _registry() -> ToolRegistry:
    registry = ToolRegistry()
    schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
        "additionalProperties": False,
    }
    registry.register(
        "files",
        [
            Tool("read_file", _handler, input_schema=schema, read_only=True),
            Tool("write_file", _handler, input_schema=schema),
            Tool("move_file", _handler, input_schema=schema),
        ],
    )
    return registry


POLICIES = """\
@id("reads")
permit (principal, action in Action::"read_only", resource);

@id("writes")
@ask("check the write")
permit (principal, action == Action::"files.write_file", resource);

@id("no-etc")
forbid (principal, action, resource) when { context.input.path like "/etc/*" };

@id("moves")
permit (principal, action == Action::"files.move_file", resource)
when { context.input.path like "tmp/*" };
"""


def _case(**fields: Any) -> dict[str, Any]:
    base = {
        "name": "read",
        "principal": 'User::"alice"',
        "tool": "files.read_file",
        "arguments": {"path": "a.txt"},
        "expect": "allow",
    }
    return {**base, **fields}


def _pack(tmp_path: Path, tests: list[dict[str, Any]]) -> Path:
    (tmp_path / "pack.cedar").write_text(POLICIES)
    (tmp_path / "pack.tests.json").write_text(json.dumps({"tests": tests}))
    return tmp_path


def test_a_case_may_name_the_model_alias(tmp_path: Path) -> None:
    directory = _pack(
        tmp_path,
        [
            _case(tool="files__read_file", policies=["reads"]),
            _case(name="alias ask", tool="files__write_file", expect="ask", policies=["writes"]),
            _case(name="no such alias", tool="files__nope"),
        ],
    )
    report = run_decision_tests(directory, registry=_registry())
    assert [r.passed for r in report.results] == [True, True, False]
    assert report.results[1].actual == "ask"
    assert report.results[2].problem == "no registered tool 'files__nope'"


def test_each_result_names_the_stage_that_decided(tmp_path: Path) -> None:
    directory = _pack(
        tmp_path,
        [
            _case(),
            _case(name="bad arguments", arguments={"path": 3}, expect="invalid"),
            _case(name="unknown tool", tool="files.nope"),
        ],
    )
    results = run_decision_tests(directory, registry=_registry()).results
    assert [(r.stage, r.evaluator) for r in results] == [
        ("evaluator", "cedar"),
        ("schema", None),
        ("resolve", None),
    ]
    assert all(r.seconds >= 0 for r in results)
    assert results[0].to_json()["stage"] == "evaluator"


def test_select_runs_only_the_chosen_cases_and_coverage_counts_them(tmp_path: Path) -> None:
    directory = _pack(
        tmp_path,
        [
            _case(policies=["reads"]),
            _case(name="write", tool="files.write_file", expect="ask"),
            _case(name="etc", arguments={"path": "/etc/x"}, expect="deny"),
        ],
    )
    everything = run_decision_tests(directory, registry=_registry())
    coverage = everything.coverage()
    assert coverage is not None
    assert coverage.policies == ("reads", "writes", "no-etc", "moves")
    assert coverage.exercised == ("reads", "writes", "no-etc")
    assert coverage.unexercised == ("moves",)
    assert coverage.percent == 75.0
    # Where the untested policy is written: the file and the line of its first annotation.
    assert coverage.locations["moves"] == f"{directory / 'pack.cedar'}:11"
    assert everything.to_json()["coverage"]["unexercised"] == [
        {"policy": "moves", "location": f"{directory / 'pack.cedar'}:11"}
    ]

    reads = run_decision_tests(
        directory, registry=_registry(), select=lambda case: case.name == "read"
    )
    assert [r.test.name for r in reads.results] == ["read"]
    selected = reads.coverage()
    assert selected is not None and selected.unexercised == ("writes", "no-etc", "moves")


def test_coverage_of_local_rules(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text(
        'allow = ["files.read_file"]\nask = ["files.write_file"]\n'
        'deny = ["files.move_file(path=/etc/**)"]\n'
    )
    (tmp_path / "t.tests.json").write_text(json.dumps({"tests": [_case()]}))
    report = run_decision_tests(tmp_path, LocalEvaluator.from_file(rules), registry=_registry())
    coverage = report.coverage()
    assert coverage is not None
    assert coverage.exercised == ("allow:files.read_file",)
    assert coverage.unexercised == ("ask:files.write_file", "deny:files.move_file(path=/etc/**)")
    assert coverage.locations["ask:files.write_file"] == f"{rules}:2"


def test_junit_xml_parses_and_counts_failures_and_errors(tmp_path: Path) -> None:
    hostile = "write\x1b[2J\x00 \u202e"
    directory = _pack(
        tmp_path,
        [
            _case(),
            _case(name=hostile, tool="files.write_file", expect="allow"),
            _case(name="unknown <tool> & more", tool="files.nope"),
        ],
    )
    report = run_decision_tests(directory, registry=_registry())
    root = ElementTree.fromstring(report.to_junit_xml().encode("utf-8"))
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("3", "1", "1")
    [suite] = root.findall("testsuite")
    assert suite.get("name") == str(directory / "pack.tests.json")
    passed, failed, errored = suite.findall("testcase")
    assert passed.get("name") == "read" and not list(passed)
    # Control and bidi characters are escaped: XML 1.0 cannot hold them, a terminal
    # showing the report should not act on them.
    assert failed.get("name") == "write\\x1b[2J\\x00 \\u202e"
    failure = failed.find("failure")
    assert failure is not None and failure.get("type") == "ask"
    assert failure.text is not None and "actual: ask by writes" in failure.text
    assert "stage: evaluator" in failure.text
    error = errored.find("error")
    assert errored.get("name") == "unknown <tool> & more"
    assert error is not None and error.get("message") == "no registered tool 'files.nope'"
