"""``clearance policy schema|validate|format|test|explain`` against the real console script."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from clearance.config import pack_path

CODING = pack_path("coding")

BAD_POLICIES = """\
@id("reads")
permit (principal, action in Action::"read_only", resource);

@id("typo-attribute")
permit (principal, action == Action::"files.write_file", resource)
when { context.input.pth == "x" };
"""

SYNTAX_ERROR = """\
// a comment line
@id("broken")
permit (principal, action, resource) when { context.input. };
"""

UNFORMATTED = """\
// Reads are free.
@id("reads")
permit(principal,action in Action::"read_only",resource);
"""


@pytest.fixture
def bad_dir(tmp_path: Path) -> Path:
    d = tmp_path / "bad"
    d.mkdir()
    (d / "a.cedar").write_text(BAD_POLICIES)
    (d / "b.cedar").write_text(
        '@id("no-such-tool")\nforbid (principal, action == Action::"web.fetch", resource);\n'
    )
    return d


# --- schema ------------------------------------------------------------------------------


def test_schema_in_cedar_and_json_formats(cli: Any, tmp_path: Path, bad_dir: Path) -> None:
    text = cli("policy", "schema")
    assert text.code == 0, text.err
    assert re.search(
        r'^action "files.read_file" in \[Action::"call_tool", Action::"read_only"', text.out, re.M
    )
    assert re.search(
        r'^action "shell.run" in \[Action::"call_tool", Action::"mutating"', text.out, re.M
    )

    # --policies: the directory's schema.json declares entity types; invalid policies in
    # it do not stop the schema from being printed (it is what you need to fix them)
    (bad_dir / "schema.json").write_text(
        json.dumps(
            {
                "entityTypes": {"User": {"memberOfTypes": ["Team"]}, "Team": {}},
                "principalTypes": ["User"],
            }
        )
    )
    js = cli("policy", "schema", "--format", "json", "--policies", "bad")
    assert js.code == 0, js.err
    schema = json.loads(js.out)[""]
    assert {"files.write_file", "shell.run", "read_only", "ns:files"} <= set(schema["actions"])
    assert schema["entityTypes"]["User"]["memberOfTypes"] == ["Team"]
    assert schema["commonTypes"]["files__read_fileInput"]["attributes"]["path"] == {
        "type": "String"
    }


# --- validate ----------------------------------------------------------------------------


def test_validate_the_starter_pack(cli: Any) -> None:
    r = cli("policy", "validate", str(CODING))
    assert r.code == 0, r.err
    assert re.match(r"ok: \d+ policies in .* validate against the schema of 21 tools", r.out)


def test_validate_reports_every_problem_with_file_line_and_id(cli: Any, bad_dir: Path) -> None:
    r = cli("policy", "validate", "bad")
    assert r.code == 1
    # on stdout: the line and column of the offending expression, the policy by its @id,
    # the line itself with a caret under the name
    assert r.err == ""
    assert re.search(r"^bad/a.cedar:6:22: policy typo-attribute: .*`input.pth`", r.out, re.M)
    assert '\n   6 | when { context.input.pth == "x" };\n     |                      ^^^\n' in r.out
    assert re.search(r"^bad/b.cedar:2:38: policy no-such-tool: .*web.fetch", r.out, re.M)
    assert re.search(r"^2 problem\(s\) in 2 file\(s\) in bad ", r.out, re.M)

    js = cli("policy", "validate", "bad", "--json")
    assert js.code == 1
    doc = json.loads(js.out)
    assert doc["valid"] is False
    assert {(p["path"], p["line"], p["column"], p["policy_id"]) for p in doc["problems"]} == {
        ("bad/a.cedar", 6, 22, "typo-attribute"),
        ("bad/b.cedar", 2, 38, "no-such-tool"),
    }
    assert all(p["frame"] for p in doc["problems"])


def test_validate_syntax_errors_and_bad_directories(cli: Any, tmp_path: Path) -> None:
    (tmp_path / "syntax").mkdir()
    (tmp_path / "syntax" / "x.cedar").write_text(SYNTAX_ERROR)
    r = cli("policy", "validate", "syntax")
    assert r.code == 1
    # the line and column of the error, not of the policy's first line (2)
    assert re.search(r"^syntax/x.cedar:3:60: policy broken: unexpected token `}`$", r.out, re.M)

    missing = cli("policy", "validate", "nowhere")
    assert missing.code == 2 and missing.err == "error: nowhere: no such directory\n"


# --- format ------------------------------------------------------------------------------


def test_format_check_then_in_place(cli: Any, tmp_path: Path) -> None:
    d = tmp_path / "p"
    d.mkdir()
    (d / "reads.cedar").write_text(UNFORMATTED)
    shutil.copy(CODING / "coding.cedar", d / "coding.cedar")
    cli("policy", "format", "p")  # the pack itself may or may not be formatted
    (d / "reads.cedar").write_text(UNFORMATTED)

    check = cli("policy", "format", "p", "--check")
    assert check.code == 1
    assert check.out.splitlines() == [
        "would reformat p/reads.cedar",
        "1 file(s) would reformat, 1 file(s) already formatted",
    ]
    assert (d / "reads.cedar").read_text() == UNFORMATTED  # --check changes nothing

    fmt = cli("policy", "format", "p")
    assert fmt.code == 0 and "reformatted p/reads.cedar" in fmt.out
    formatted = (d / "reads.cedar").read_text()
    assert formatted != UNFORMATTED
    assert formatted.startswith("// Reads are free.\n")  # comments are kept
    assert "permit (\n" in formatted
    assert cli("policy", "format", "p", "--check").code == 0


def test_format_refuses_what_does_not_parse(cli: Any, tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "x.cedar").write_text(SYNTAX_ERROR)
    (tmp_path / "s" / "y.cedar").write_text(UNFORMATTED)
    r = cli("policy", "format", "s")
    assert r.code == 2
    # the file, line and column it cannot parse, and the line with a caret
    assert r.err.splitlines() == [
        "error: s/x.cedar:3:60: policy broken: unexpected token `}`",
        '   2 | @id("broken")',
        "   3 | permit (principal, action, resource) when { context.input. };",
        "     |                                                            ^",
    ]
    assert (tmp_path / "s" / "x.cedar").read_text() == SYNTAX_ERROR
    # the other files are formatted all the same
    assert "reformatted s/y.cedar" in r.out and "1 file(s) do not parse" in r.out
    assert (tmp_path / "s" / "y.cedar").read_text() != UNFORMATTED


# --- test --------------------------------------------------------------------------------


def test_decision_tests_of_the_starter_pack_pass(cli: Any) -> None:
    r = cli("policy", "test", str(CODING))
    assert r.code == 0, r.out + r.err
    last = r.out.strip().splitlines()[-1]
    assert re.fullmatch(r"(\d+) passed, 0 failed", last)
    assert "FAIL" not in r.out


def test_failing_decision_tests_show_the_actual_decision(cli: Any, tmp_path: Path) -> None:
    d = tmp_path / "pack"
    shutil.copytree(CODING, d)
    (d / "extra.tests.json").write_text(
        json.dumps(
            {
                "tests": [
                    {
                        "name": "writes are free?",
                        "principal": 'User::"alice"',
                        "tool": "files.write_file",
                        "arguments": {"path": "a", "content": "b"},
                        "expect": "allow",
                    },
                    {
                        "name": "reads are free",
                        "principal": 'User::"alice"',
                        "tool": "files.read_file",
                        "arguments": {"path": "a"},
                        "expect": "allow",
                        "policies": ["read-freely"],
                    },
                ]
            }
        )
    )
    r = cli("policy", "test", "pack")
    assert r.code == 1
    assert "FAIL  extra.tests.json: writes are free?" in r.out
    assert "      expected allow, got ask by ask-before-write\n" in r.out
    assert "      message: The agent wants to write a file in the workspace.\n" in r.out
    assert "reads are free" not in r.out  # passing cases only with -v
    summary = re.fullmatch(r"(\d+) passed, (\d+) failed", r.out.strip().splitlines()[-1])
    assert summary is not None
    passed, failed = int(summary[1]), int(summary[2])
    assert failed == 1 and passed > 20

    js = cli("policy", "test", "pack", "--json")
    assert js.code == 1
    doc = json.loads(js.out)
    assert (doc["passed"], doc["failed"]) == (passed, failed)
    [failure] = [c for c in doc["results"] if not c["passed"]]
    assert failure["actual"] == "ask" and failure["reasons"] == ["ask-before-write"]


def test_malformed_decision_tests_are_bad_input(cli: Any, tmp_path: Path) -> None:
    d = tmp_path / "pack"
    shutil.copytree(CODING, d)
    (d / "broken.tests.json").write_text('{"tests": [{"name": "x", "tool": "files.read_file"}]}')
    r = cli("policy", "test", "pack")
    assert r.code == 2
    assert r.err.startswith("error: ") and "broken.tests.json" in r.err and "'expect'" in r.err


# --- explain -----------------------------------------------------------------------------


def _explain(cli: Any, tool: str, args: dict[str, Any], *extra: str) -> dict[str, Any]:
    r = cli("policy", "explain", "--tool", tool, "--args", json.dumps(args), "--json", *extra)
    assert r.code == 0, r.err
    doc: dict[str, Any] = json.loads(r.out)
    return doc


def test_explain_names_the_decision_the_policies_and_the_stage(cli: Any, tmp_path: Path) -> None:
    asked = _explain(
        cli,
        "files.write_file",
        {"path": "src/a.py", "content": "x"},
        "--principal",
        'User::"alice"',
    )
    assert (asked["decision"], asked["stage"], asked["policies"]) == (
        "ask",
        "evaluator",
        ["ask-before-write"],
    )
    assert asked["message"] == "The agent wants to write a file in the workspace."
    assert asked["principal"] == 'User::"alice"'
    # Each deciding policy with where it is written and its annotations (issue 32).
    (detail,) = asked["policy_details"]
    assert detail["id"] == "ask-before-write" and detail["effect"] == "permit"
    assert detail["path"].endswith(".cedar") and isinstance(detail["line"], int)
    assert detail["annotations"]["ask"] == asked["message"]
    assert asked["policy_version"].startswith("sha256:")
    assert not (tmp_path / "src").exists()  # nothing ran

    denied = _explain(cli, "shell__run", {"command": "ls && rm -rf build"})
    assert (denied["decision"], denied["stage"], denied["policies"]) == (
        "deny",
        "evaluator",
        ["shell-no-chaining"],
    )

    # refused before any guardrail or policy: the path fact leaves the workspace (R11)
    blocked = _explain(cli, "files.read_file", {"path": "../etc/passwd"})
    assert (blocked["decision"], blocked["stage"]) == ("blocked", "facts")
    assert "outside the workspace" in blocked["message"]


def test_explain_text_output_and_schema_stage(cli: Any) -> None:
    r = cli("policy", "explain", "--tool", "files.read_file", "--args", '{"pth": "x"}')
    assert r.code == 0, r.err
    lines = dict(
        line.split(None, 1) for line in r.out.splitlines() if line and not line.startswith(" ")
    )
    assert lines["decision"] == "invalid"
    assert lines["stage"] == "schema"
    assert "'pth' was unexpected" in lines["message"]

    allowed = cli("policy", "explain", "--tool", "files.list_dir", "--policies", str(CODING))
    assert allowed.code == 0, allowed.err
    assert re.search(r"^decision +allow$", allowed.out, re.M)
    assert re.search(r"^stage +evaluator \(cedar\)$", allowed.out, re.M)
    assert re.search(r"^policies +read-freely  permit  \S+coding\.cedar:\d+$", allowed.out, re.M)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--tool", "web.fetch"],
            "error: unknown tool 'web.fetch' (registered: files.apply_patch,",
        ),
        (["--tool", "files.read_file", "--args", "{bad"], "Invalid value for '--args': not JSON"),
        (["--tool", "files.read_file", "--args", "[1]"], "must be a JSON object"),
        (["--tool", "files.read_file", "--policies", "bad"], "policy typo-attribute"),
    ],
)
def test_explain_bad_input(cli: Any, bad_dir: Path, args: list[str], message: str) -> None:
    r = cli("policy", "explain", *args)
    assert r.code == 2
    assert message in r.err
    assert "Traceback" not in r.err
