"""What a session resolves a call's name in: its agent's tools, by qualified name and by
model alias, one read-only mapping shared by the sessions of the same selection (issue
18: 10,000 sessions over a thousand tools held a copy each, about 70 KB a session)."""

from __future__ import annotations

from typing import Any

import pytest

from clearance import AgentDefinition, Harness, Principal, Tool, ToolRegistry
from clearance.policy import NoopEvaluator

pytestmark = pytest.mark.anyio


async def noop(arguments: dict[str, Any], ctx: Any) -> str:
    return "ok"


def registry() -> ToolRegistry:
    registry = ToolRegistry()
    registry.register("files", [Tool("read_file", noop), Tool("write_file", noop)])
    registry.register("shell", [Tool("run", noop)])
    return registry


async def test_sessions_of_one_selection_share_one_read_only_mapping() -> None:
    async with Harness(registry(), evaluator=NoopEvaluator()) as harness:
        alice = await harness.create_session(principal=Principal("User", "alice"))
        bob = await harness.create_session(principal=Principal("User", "bob"))
        reader = AgentDefinition("reader", tools=["files.read_file"])
        narrow = await harness.create_session(principal=Principal("User", "carol"), agent=reader)
        again = await harness.create_session(principal=Principal("User", "dave"), agent=reader)

        assert alice.tools is bob.tools
        assert narrow.tools is again.tools
        assert narrow.tools is not alice.tools
        assert set(narrow.tools) == {"files.read_file", "files__read_file"}
        assert set(alice.tools) == {
            "files.read_file",
            "files__read_file",
            "files.write_file",
            "files__write_file",
            "shell.run",
            "shell__run",
        }
        with pytest.raises(TypeError):
            alice.tools["files.evil"] = alice.tools["files.read_file"]  # type: ignore[index]

        # The narrow session still cannot call what its agent does not select.
        refused = await narrow.call_tool("shell__run", {}, call_id="c1")
        assert refused.status == "invalid"
        assert "not available to this agent" in (refused.message or "")
        assert (await narrow.call_tool("files__read_file", {}, call_id="c2")).ok
        assert (await alice.call_tool("shell.run", {}, call_id="c3")).ok


def test_an_unfrozen_registry_shares_nothing() -> None:
    tools = registry()
    selected = tools.select(None)
    first, second = tools.by_name(selected), tools.by_name(selected)
    assert first is not second
    assert dict(first) == dict(second)
    tools.freeze()
    assert tools.by_name(selected) is tools.by_name(selected)
