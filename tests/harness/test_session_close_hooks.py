"""``Tool.on_session_close``: called once per closing session with its id, after its calls
ended, for the sessions that may call the tool; a failing one is logged and the others run."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from support import ALICE, BOB, harness

from clearance import Tool, ToolRegistry
from clearance.errors import ToolRegistrationError
from clearance.harness.session import AgentDefinition
from clearance.policy import NoopEvaluator


def _ok(arguments: dict[str, Any], ctx: Any) -> str:
    return "ok"


@pytest.mark.anyio
async def test_each_hook_runs_once_per_session_that_may_call_its_tools(
    caplog: pytest.LogCaptureFixture,
) -> None:
    closed: list[tuple[str, str]] = []

    def shared(session_id: str) -> None:
        closed.append(("shared", session_id))

    def failing(session_id: str) -> None:
        raise RuntimeError("boom")

    registry = ToolRegistry()
    registry.register(
        "kept",
        [
            Tool("a", _ok, on_session_close=shared),
            Tool("b", _ok, on_session_close=shared),
            Tool("c", _ok, on_session_close=failing),
        ],
    )
    registry.register("plain", [Tool("d", _ok)])
    async with harness(registry, evaluator=NoopEvaluator()) as h:
        kept = await h.create_session(principal=ALICE, session_id="s_kept")
        plain = await h.create_session(
            principal=BOB, agent=AgentDefinition("p", tools=["plain.*"]), session_id="s_plain"
        )
        with caplog.at_level(logging.WARNING, logger="clearance"):
            await kept.aclose()
        assert closed == [("shared", "s_kept")]
        assert "session close callback failed" in caplog.text
        await plain.aclose()
        assert closed == [("shared", "s_kept")]  # it could call no tool with a hook
        await h.create_session(principal=ALICE, session_id="s_open")
    # the harness closing closes its open sessions, with their hooks
    assert closed == [("shared", "s_kept"), ("shared", "s_open")]


def test_a_hook_must_be_callable() -> None:
    with pytest.raises(ToolRegistrationError, match="on_session_close is not callable"):
        ToolRegistry().register("x", [Tool("a", _ok, on_session_close="no")])  # type: ignore[arg-type]
