"""What a person is asked to approve shows what will run (issue 19).

For every bundled tool, whatever else a call carries, the fields that decide what it does
are shown first and whole; the rest is elided in the middle with both ends kept.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from clearance import Tool, ToolRegistry
from clearance.harness.ask_display import ask_lines, deciding_fields, elide
from clearance.toolsets.files import files_tools
from clearance.toolsets.shell import shell_tools


def bundled(root: Path) -> ToolRegistry:
    registry = ToolRegistry()
    registry.register("files", files_tools(root))
    registry.register("shell", shell_tools(root, allowed_programs=["git", "ls"]))
    return registry


def long_value(schema: dict[str, Any], name: str) -> Any:
    """A long value of the argument's type (the longest the type allows, roughly)."""
    kind = schema.get("type")
    if kind == "string":
        return f"{name}/" + "x" * 50_000 + f"/end-of-{name}"
    if kind == "integer":
        return 10**15
    if kind == "boolean":
        return True
    if kind == "array":
        return [f"{name}-{n}" for n in range(5000)]
    return {"k": "v" * 50_000}


def test_every_bundled_tool_shows_its_deciding_fields_whole_and_first(tmp_path: Path) -> None:
    for tool in bundled(tmp_path):
        properties = tool.input_schema["properties"]
        deciding = deciding_fields(tool)
        # Every declared fact is deciding; so is any argument named like a path or command.
        for pointer in tool.facts or {}:
            assert pointer.split("/")[1] in deciding, (tool.qualified_name, pointer)
        for name in properties:
            if name in ("path", "source", "destination", "command"):
                assert name in deciding, (tool.qualified_name, name)
        assert deciding, tool.qualified_name
        # Every argument as long as it can be, deciding ones written deep and long too.
        arguments = {name: long_value(s, name) for name, s in properties.items()}
        for name in deciding:
            arguments[name] = "a/" * 200 + f"{name}-conftest.py"
        lines = ask_lines(arguments, deciding, width=120)
        shown = [line.split(": ", 1)[0] for line in lines]
        assert shown[: len(deciding)] == [n for n in deciding if n in arguments]
        for name in deciding:
            assert f"{name}: {json.dumps(arguments[name])}" in lines
        for line in lines[len(deciding) :]:
            assert len(line) <= 120 + 10, line


def test_what_decides_is_the_view_s_never_a_guess_from_names(tmp_path: Path) -> None:
    def noop(arguments: dict[str, Any], ctx: Any) -> str:
        return ""

    schema = {
        "type": "object",
        "properties": {
            "toAccount": {"type": "string"},
            "amount": {"type": "number"},
            "memo": {"type": "string"},
            "body": {"type": "string"},
        },
    }
    registry = ToolRegistry()
    registry.register(
        "bank",
        [
            Tool("send", noop, input_schema=schema),
            Tool("pay", noop, input_schema=schema, facts={"/amount": "number"}),
        ],
    )
    # Without facts every argument decides: "memo" and "body" too (a guess by name would
    # have left them elided, and a recipient named "dest_iban" would have been missed).
    assert deciding_fields(registry.get("bank.send")) == ("toAccount", "amount", "memo", "body")
    # With facts, the declared ones, whatever their names.
    assert deciding_fields(registry.get("bank.pay")) == ("amount",)
    # An ask names them (the call's view): taken as they are.
    ask = SimpleNamespace(deciding=("blob",), arguments={"blob": "b", "file_path": "p"})
    assert deciding_fields(ask) == ("blob",)
    # An ask that names none (recorded before asks carried them): every argument.
    old = SimpleNamespace(deciding=(), arguments={"note": "n", "file_path": "p"})
    assert deciding_fields(old) == ("note", "file_path")


def test_a_long_content_never_pushes_the_path_out() -> None:
    arguments = {"content": "A" * 50_000 + "Z", "path": ".github/workflows/" + "d/" * 300 + "x.yml"}
    lines = ask_lines(arguments, ("path",), width=200)
    assert lines[0] == f"path: {json.dumps(arguments['path'])}"
    assert lines[1].startswith('content: "AAAA') and lines[1].endswith('AAZ"')
    assert re.search(r"\[49,\d{3} characters elided\]", lines[1])
    whole = ask_lines(arguments, ("path",), width=200, elide_values=False)
    assert whole[1] == f"content: {json.dumps(arguments['content'])}"


@pytest.mark.parametrize("width", [1, 40, 80, 1000])
def test_elide_keeps_both_ends_and_says_how_much(width: int) -> None:
    text = "".join(chr(ord("a") + n % 26) for n in range(10_000))
    short = elide(text, width)
    head, rest = short.split(" … [", 1)
    count, tail = rest.split(" characters elided] … ", 1)
    assert text.startswith(head) and text.endswith(tail)
    assert len(head) + int(count.replace(",", "")) + len(tail) == len(text)
    assert elide("short", width) == "short"


def test_names_and_values_are_escaped() -> None:
    lines = ask_lines({"pa\x1bth": "a\u202eb", "x": "\x9b2J" * 10}, ("pa\x1bth",), width=80)
    assert lines[0] == 'pa\\x1bth: "a\\u202eb"'
    assert "\x9b" not in lines[1] and "\\u009b2J" in lines[1]
