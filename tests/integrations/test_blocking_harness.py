"""BlockingHarness (issue 31): a harness opened from synchronous code, on a loop it sets as
the thread's default for the with block (where the frameworks' sync entry points run)."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import pytest

from clearance import Harness, MemoryJournal, Principal, Tool, ToolRegistry
from clearance.errors import ClosedError
from clearance.integrations import BlockingHarness
from clearance.policy import LocalEvaluator

ALICE = Principal("User", "alice")


def harness(journal: MemoryJournal) -> Harness:
    registry = ToolRegistry()
    registry.register("app", [Tool("ping", lambda arguments, ctx: "pong")])
    return Harness(registry, evaluator=LocalEvaluator(allow=["app.ping"]), journal=journal)


def default_loop() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return asyncio.get_event_loop_policy().get_event_loop()


def test_the_harness_lives_on_the_threads_default_loop_for_the_block() -> None:
    journal = MemoryJournal()
    with BlockingHarness(harness(journal)) as host:
        loop = default_loop()
        assert loop.is_running() is False
        session = host.create_session(principal=ALICE)

        async def on_the_default_loop() -> str:
            # What a framework's sync entry point does: run_until_complete on the default.
            assert asyncio.get_running_loop() is loop
            outcome = await session.call_tool("app.ping", {})
            return outcome.text

        assert loop.run_until_complete(on_the_default_loop()) == "pong"
        # Async generators still work after a framework shut them down for its own run.
        loop.run_until_complete(loop.shutdown_asyncgens())
        assert host.run(session.call_tool("app.ping", {}, call_id="c2")).text == "pong"
    assert loop.is_closed()
    with pytest.raises(RuntimeError):  # the thread has no default loop left
        default_loop()
    assert [e.data["status"] for e in journal.events() if e.type == "tool_finished"] == [
        "ok",
        "ok",
    ]
    with pytest.raises(ClosedError):
        asyncio.run(session.call_tool("app.ping", {}))


def test_a_failure_in_the_block_still_closes_the_harness() -> None:
    journal = MemoryJournal()
    with pytest.raises(ZeroDivisionError), BlockingHarness(harness(journal)) as host:
        host.create_session(principal=ALICE)
        1 / 0  # noqa: B018
    assert journal.events()[-1].type == "session_closed"


@pytest.mark.anyio
async def test_async_code_is_told_to_use_async_with() -> None:
    with pytest.raises(RuntimeError, match=r"async with Harness"):
        BlockingHarness(harness(MemoryJournal())).__enter__()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
