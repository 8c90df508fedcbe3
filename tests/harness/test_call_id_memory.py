"""A session's memory of call ids is bounded (issue 38) without ever forgetting one (R7).

A session holds every call id it was given for as long as it lives (a forgotten id could
run twice); once it holds ``max_session_calls`` of them it refuses new calls instead of
growing, and says so. The gateway replaces a sessionless client's session before that
(tests/mcp/test_gateway_sessions.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clearance import (
    CallContext,
    ConfigError,
    Harness,
    MemoryJournal,
    Principal,
    Tool,
    ToolRegistry,
)
from clearance.config import load_config
from clearance.policy import LocalEvaluator

pytestmark = pytest.mark.anyio

ALICE = Principal("User", "alice")


def registry(ran: list[str]) -> ToolRegistry:
    def note(arguments: dict[str, Any], ctx: CallContext) -> str:
        ran.append(ctx.call_id)
        return "noted"

    reg = ToolRegistry()
    reg.register("t", [Tool("note", note, input_schema={"type": "object"})])
    return reg


def harness(ran: list[str], limit: int, journal: MemoryJournal | None = None) -> Harness:
    return Harness(
        registry(ran),
        evaluator=LocalEvaluator(allow=["t.*"]),
        journal=journal,
        max_session_calls=limit,
    )


async def test_a_full_session_refuses_new_calls_and_still_refuses_reused_ids() -> None:
    ran: list[str] = []
    journal = MemoryJournal()
    async with harness(ran, 3, journal) as h:
        session = await h.create_session(principal=ALICE)
        for n in range(3):
            assert (await session.call_tool("t__note", {}, call_id=f"c{n}")).status == "ok"
        full = await session.call_tool("t__note", {}, call_id="c3")
        reused = await session.call_tool("t__note", {}, call_id="c1")
        assert full.status == "invalid"
        assert full.text.startswith("this session has used its 3 call ids (max_session_calls)")
        assert reused.status == "invalid"
        assert reused.text.startswith("call id 'c1' was already used in this session")
        # Bounded: the refused id is not remembered; nothing was forgotten either.
        assert session.call_ids == {"c0", "c1", "c2"}
        # Another session starts with its own memory.
        other = await h.create_session(principal=ALICE)
        assert (await other.call_tool("t__note", {}, call_id="c3")).status == "ok"
    assert ran == ["c0", "c1", "c2", "c3"]
    refused = [
        e.data
        for e in journal.events(call_id="c3")
        if e.type == "call_decided" and e.data.get("stage")
    ]
    assert len(refused) == 1 and refused[0]["stage"] == "call_id"
    assert refused[0]["outcome"] == "invalid"


async def test_max_session_calls_is_checked() -> None:
    for bad in (0, -1, True, 2.5):
        with pytest.raises(ValueError, match="max_session_calls must be a positive integer"):
            harness([], bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "message"),
    [("0", "limits.max_session_calls must be an integer >= 1"), ('"x"', "integer >= 1")],
)
def test_max_session_calls_in_the_config(tmp_path: Path, value: str, message: str) -> None:
    config = tmp_path / "clearance.toml"
    config.write_text(f'[evaluator]\nkind = "noop"\n[limits]\nmax_session_calls = {value}\n')
    with pytest.raises(ConfigError, match=message):
        load_config(config)
    config.write_text('[evaluator]\nkind = "noop"\n[limits]\nmax_session_calls = 7\n')
    assert load_config(config).limits.max_session_calls == 7


@settings(max_examples=40, deadline=None)
@given(
    ids=st.lists(st.sampled_from([f"c{n}" for n in range(8)]), max_size=30),
    limit=st.integers(min_value=1, max_value=6),
)
async def test_r7_no_call_id_runs_twice_and_the_memory_stays_within_its_bound(
    ids: list[str], limit: int
) -> None:
    """Whatever ids a host sends: each runs at most once in its session, the first
    ``limit`` distinct ones run, every later new one is refused, and the session never
    holds more than ``limit`` ids."""
    ran: list[str] = []
    async with harness(ran, limit) as h:
        session = await h.create_session(principal=ALICE)
        for call_id in ids:
            await session.call_tool("t__note", {}, call_id=call_id)
            assert len(session.call_ids) <= limit
    first_seen = list(dict.fromkeys(ids))
    assert ran == first_seen[:limit]
