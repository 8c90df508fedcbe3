"""Inputs nested too deeply for Python's JSON and TOML parsers (issue 12, item 17).

Each command that reads a JSON or TOML input exits 2 with one line naming the input, never
with a RecursionError traceback, and nothing runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

DEPTH = 5000
DEEP_JSON = "[" * DEPTH + "]" * DEPTH


def _files(tmp_path: Path) -> None:
    call = '{"id": "c1", "name": "files__write_file", "args": {"path": "x", "content": %s}}'
    (tmp_path / "script.json").write_text('{"turns": [{"tool_calls": [%s]}]}' % (call % DEEP_JSON))
    line = (
        '{"principal": "User::\\"a\\"", "tool": "files.read_file", '
        f'"arguments": {{"path": {DEEP_JSON}}}, "expected": "allow"}}\n'
    )
    (tmp_path / "corpus.jsonl").write_text(line)
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "p.cedar").write_text(
        '@id("r")\npermit (principal, action == Action::"files.read_file", resource);\n'
    )
    (policies / "p.tests.json").write_text(
        '[{"name": "x", "principal": "User::\\"a\\"", "tool": "files.read_file", '
        f'"arguments": {{"path": {DEEP_JSON}}}, "expect": "deny"}}]'
    )
    schema_dir = tmp_path / "schema"
    schema_dir.mkdir()
    (schema_dir / "schema.json").write_text(DEEP_JSON)
    (tmp_path / "tools.json").write_text(DEEP_JSON)
    (tmp_path / "deep.toml").write_text("x = " + "[" * DEPTH + "]" * DEPTH + "\n")
    good = [
        {
            "principal": 'User::"a"',
            "tool": "files.read_file",
            "arguments": {"path": "a"},
            "expected": "allow",
        }
    ]
    (tmp_path / "good.jsonl").write_text("".join(json.dumps(g) + "\n" for g in good))


CASES = {
    "run script": (["run", "script.json"], "script.json: nested too deeply"),
    "run config": (["run", "script.json", "--config", "deep.toml"], "deep.toml"),
    "replay corpus": (["replay", "corpus.jsonl"], "corpus.jsonl:1: not JSON: nested too deeply"),
    "replay jobs": (["replay", "corpus.jsonl", "--jobs", "2"], "nested too deeply"),
    "replay tools": (["replay", "good.jsonl", "--tools", "tools.json"], "tools.json: nested"),
    "suggest corpus": (["suggest", "corpus.jsonl"], "corpus.jsonl:1: not JSON: nested too"),
    "suggest tools": (["suggest", "good.jsonl", "--tools", "tools.json"], "tools.json: nested"),
    "policy test": (["policy", "test", "policies"], "decision test file"),
    "policy schema": (["policy", "schema", "--policies", "schema"], "schema.json"),
    "explain args": (
        ["policy", "explain", "--tool", "files.read_file", "--args", '{"path": ' + DEEP_JSON + "}"],
        "nested too deeply",
    ),
    "gateway config": (["gateway", "--config", "deep.toml"], "deep.toml: nested too deeply"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_too_deep_input_exits_2_with_one_line(cli: Any, tmp_path: Path, case: str) -> None:
    _files(tmp_path)
    args, message = CASES[case]
    r = cli(*args)
    assert r.code == 2, (r.out, r.err)
    assert "Traceback" not in r.err and "RecursionError" not in r.err
    assert message in r.err
    assert "nested too deeply" in r.err
    problem = [line for line in r.err.splitlines() if line.strip()]
    # One line (click's usage errors add their usage lines before it).
    assert problem[-1].startswith(("error: ", "Error: ")), r.err
    assert not (tmp_path / "x").exists()


def test_arguments_the_parser_reads_but_the_pipeline_refuses(cli: Any, tmp_path: Path) -> None:
    # Deep enough to strain whatever prints it, shallow enough for the JSON parser.
    deep = "[" * 900 + "]" * 900
    (tmp_path / "script.json").write_text(
        '{"turns": [{"tool_calls": [{"id": "c1", "name": "files__write_file", '
        f'"args": {{"path": "x", "content": {deep}}}}}]}}, {{"text": "ok"}}]}}'
    )
    r = cli("run", "script.json")
    assert r.code == 0, r.err
    assert "Traceback" not in r.err and "RecursionError" not in r.err + r.out
    assert "(nested too deeply to show)" in r.out
    assert "invalid" in r.out
    assert not (tmp_path / "x").exists()
