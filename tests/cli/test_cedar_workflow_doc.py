"""docs/cedar.md's "Policies for MCP servers, end to end" runs as written: its files, its
commands through the real console script (with a real mcp-server-time), and the output it
shows."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parents[2] / "docs" / "cedar.md"
TIME_SERVER = Path(sys.executable).parent / "mcp-server-time"


def _section() -> str:
    text = DOC.read_text()
    start = text.index("## Policies for MCP servers, end to end")
    return text[start : text.index("\n## ", start + 1)]


def _blocks(section: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in re.finditer(r"```(\w+)\n(.*?)```", section, re.S)]


def _commands(console: str) -> list[tuple[str, list[str]]]:
    """Each ``$ command`` (continuation lines joined) and the lines shown after it."""
    steps: list[tuple[str, list[str]]] = []
    lines = console.splitlines()
    n = 0
    while n < len(lines):
        line = lines[n]
        n += 1
        if not line.startswith("$ "):
            steps[-1][1].append(line)
            continue
        command = line[2:]
        while command.endswith("\\"):
            command = command[:-1] + lines[n].strip()
            n += 1
        steps.append((command, []))
    return steps


def _in_order(expected: list[str], actual: list[str]) -> bool:
    it = iter(actual)
    return all(any(line == got for got in it) for line in expected)


def test_the_mcp_workflow_in_docs_cedar_md_runs_as_written(cli: Any, tmp_path: Path) -> None:
    assert TIME_SERVER.exists(), "pip install mcp-server-time (the test extra)"
    blocks = _blocks(_section())
    kinds = [kind for kind, _ in blocks]
    assert kinds.count("toml") == 1 and kinds.count("cedar") == 1 and kinds.count("json") == 1
    (policies := tmp_path / "policies").mkdir()
    ran: list[str] = []
    for kind, body in blocks:
        if kind == "toml":
            (tmp_path / "clearance.toml").write_text(
                body.replace('"mcp-server-time"', f'"{TIME_SERVER}"')
            )
        elif kind == "cedar":
            (policies / "time.cedar").write_text(body)
        elif kind == "json":
            (policies / "time.tests.json").write_text(body)
        elif kind == "console":
            for command, shown in _commands(body):
                words = shlex.split(command)
                assert words[0] == "clearance", command
                if ran.count("validate") == 1 and words[1:3] == ["policy", "validate"]:
                    # the doc's fix between its two validations
                    cedar = policies / "time.cedar"
                    cedar.write_text(cedar.read_text().replace("time__get", "time.get"))
                redirect = words.index(">") if ">" in words else None
                args = words[1:redirect]
                r = cli(*args)
                if redirect is not None:
                    (tmp_path / words[redirect + 1]).write_text(r.out)
                    out: list[str] = []
                else:
                    out = r.out.splitlines()
                err = r.err.splitlines()
                expected_out = [line for line in shown if line not in err]
                if "..." in shown:
                    assert _in_order([x for x in expected_out if x != "..."], out), (command, r)
                else:
                    assert out == expected_out, (command, r.out, r.err)
                failing = "problem(s) in" in r.out
                assert r.code == (1 if failing else 0), (command, r.code, r.err)
                ran.append(words[2] if len(words) > 2 else words[1])
    assert ran == ["export", "list", "schema", "validate", "validate", "test", "explain", "--check"]
