"""Gateway elicitation forms offer the grant scopes the terminal prompt offers (issue 15):
this exact call, every path under its directory, any arguments. The official MCP client
answers ``python -m clearance gateway`` (a real subprocess serving the bundled ``files``
tools) with a scope; the files on disk show what ran. A scope the ask did not offer
denies."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

CONFIG = """
[evaluator]
kind = "local"
allow = ["files.read_file", "files.list_dir"]
ask = ["files.write_file"]

[journal]
path = "journal.db"

[approvals]
ask_timeout = 20

[gateway]
principal = 'User::"alice"'

[tools.files]
root = "ws"
"""


class Answers:
    """Answers each elicitation with the next form content, recording what was asked."""

    def __init__(self, *contents: dict[str, Any]) -> None:
        self.contents = list(contents)
        self.asked: list[Any] = []

    async def __call__(self, context: Any, params: Any) -> types.ElicitResult:
        self.asked.append(params)
        return types.ElicitResult(action="accept", content=self.contents.pop(0))


@asynccontextmanager
async def gateway(tmp_path: Path, answers: Answers, mode: str) -> AsyncIterator[Client]:
    (tmp_path / "ws" / "src").mkdir(parents=True)
    (tmp_path / "ws" / "docs").mkdir()
    (tmp_path / "clearance.toml").write_text(CONFIG)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "clearance", "gateway", "--config", str(tmp_path / "clearance.toml")],
        cwd=tmp_path,
    )
    options: dict[str, Any] = {"elicitation_callback": answers}
    if mode == "legacy":
        options["mode"] = "legacy"
    async with Client(params, **options) as client:
        yield client


def _text(result: types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("mode", "grant"), [("legacy", "allow_session"), ("modern", "allow_always")]
)
async def test_the_client_picks_the_grant_scope(tmp_path: Path, mode: str, grant: str) -> None:
    answers = Answers(
        {"decision": grant, "scope": "prefix"},  # src/a.txt: every path under src/
        {"decision": grant, "scope": "everything"},  # docs/c.txt: not offered: denied
        {"decision": "allow_once", "scope": "tool"},  # docs/c.txt: once (scope ignored)
        {"decision": "deny"},  # docs/d.txt: asked again, denied
    )
    ws = tmp_path / "ws"

    async def write(client: Client, path: str) -> types.CallToolResult:
        return await client.call_tool("files__write_file", {"path": path, "content": path})

    with anyio.fail_after(40):
        async with gateway(tmp_path, answers, mode) as client:
            first = await write(client, "src/a.txt")
            assert not first.is_error, _text(first)
            [form] = answers.asked
            scope = form.requested_schema["properties"]["scope"]
            assert scope["oneOf"] == [
                {"const": "exact", "title": "this exact call"},
                {"const": "prefix", "title": "path under src/"},
                {"const": "tool", "title": "any arguments"},
            ]
            assert scope["default"] == "exact"
            assert [
                c["const"] for c in form.requested_schema["properties"]["decision"]["oneOf"]
            ] == [
                "allow_once",
                "allow_session",
                "allow_always",
                "deny",
            ]

            # The grant covers every path under src/: no question for the next write there.
            second = await write(client, "src/b.txt")
            assert not second.is_error, _text(second)
            assert len(answers.asked) == 1

            # Outside src/ it asks again; a scope the ask did not offer denies.
            refused = await write(client, "docs/c.txt")
            assert refused.is_error
            assert "did not offer" in _text(refused)
            assert not (ws / "docs" / "c.txt").exists()
            once = await write(client, "docs/c.txt")
            assert not once.is_error, _text(once)
            # allow_once made no grant (its "tool" scope is ignored): the next write asks.
            denied = await write(client, "docs/d.txt")
            assert denied.is_error
            assert len(answers.asked) == 4
    assert sorted(str(p.relative_to(ws)) for p in ws.rglob("*.txt")) == [
        "docs/c.txt",
        "src/a.txt",
        "src/b.txt",
    ]
