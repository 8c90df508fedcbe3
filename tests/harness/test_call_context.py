"""``CallContext``: cancellation seen from a sync handler (``CallCancelledError``, which is a
``ClearanceError`` and not asyncio's ``CancelledError``), and progress after the call ended."""

from __future__ import annotations

import asyncio
import pickle
import threading
import time
from typing import Any

import anyio
import pytest
from support import ALICE, harness

import clearance
import clearance.harness.tools
from clearance import CallContext, ClearanceError, Tool, ToolRegistry
from clearance.errors import CallCancelledError
from clearance.policy import NoopEvaluator

pytestmark = pytest.mark.anyio


def context(sink: Any = None) -> CallContext:
    return CallContext(
        session_id="s1",
        turn_id=None,
        call_id="c1",
        qualified_name="t.x",
        model_alias="t__x",
        principal=ALICE,
        pipeline=sink,
    )


def test_raise_if_cancelled_raises_a_clearance_error_that_names_the_call() -> None:
    ctx = context()
    ctx.raise_if_cancelled()  # not cancelled: nothing happens
    ctx.cancel()
    with pytest.raises(CallCancelledError) as caught:
        ctx.raise_if_cancelled()
    error = caught.value
    assert isinstance(error, ClearanceError)
    assert not isinstance(error, asyncio.CancelledError)
    assert error.call_id == "c1" and str(error) == "call 'c1' was cancelled"
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), copy.call_id, str(copy)) == (CallCancelledError, "c1", str(error))


def test_the_name_that_shadowed_asyncio_is_gone() -> None:
    assert clearance.CallCancelledError is CallCancelledError
    assert "CancelledError" not in clearance.__all__
    assert not hasattr(clearance, "CancelledError")
    assert not hasattr(clearance.harness.tools, "CancelledError")


async def test_a_sync_handler_that_polls_stops_at_its_timeout() -> None:
    raised: list[BaseException] = []
    stopped = threading.Event()

    def slow(arguments: dict[str, Any], ctx: CallContext) -> str:
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                ctx.raise_if_cancelled()
                time.sleep(0.01)
            return "finished"
        except BaseException as exc:
            raised.append(exc)
            raise
        finally:
            stopped.set()

    registry = ToolRegistry()
    registry.register("t", [Tool("slow", slow, timeout=0.2)])
    async with harness(registry, evaluator=NoopEvaluator()) as h:
        session = await h.create_session(principal=ALICE)
        with anyio.fail_after(10):
            outcome = await session.call_tool("t__slow", {}, call_id="c1")
            await anyio.to_thread.run_sync(stopped.wait)
    assert outcome.status == "timeout"
    assert len(raised) == 1 and isinstance(raised[0], CallCancelledError)
    assert raised[0].call_id == "c1"


async def test_progress_after_the_call_finished_is_dropped() -> None:
    class Sink:
        def __init__(self) -> None:
            self.reported: list[str] = []

        async def progress(
            self, ctx: CallContext, message: str, data: dict[str, Any] | None
        ) -> None:
            self.reported.append(message)

    sink = Sink()
    ctx = context(sink)
    await ctx.progress("step 1")
    ctx.finish()
    await ctx.progress("step 2")
    assert sink.reported == ["step 1"]
