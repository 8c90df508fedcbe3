"""The dispatcher's limits through their public methods: ``Limiter``, ``SessionLock`` and
``Dispatcher.try_acquire_slot`` (all or nothing)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from clearance import CallContext, Tool, ToolRegistry
from clearance.harness.dispatch import Dispatcher, Limiter, SessionLock

pytestmark = pytest.mark.anyio


def noop(arguments: dict[str, Any], ctx: CallContext) -> str:
    return "ok"


async def test_limiter_try_acquire_takes_free_tokens_only() -> None:
    limiter = Limiter(2)
    assert limiter.try_acquire() and limiter.try_acquire()
    assert not limiter.try_acquire()
    assert limiter.borrowed == 2
    got = anyio.Event()

    async def wait_for_one() -> None:
        await limiter.acquire()
        got.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait_for_one)
        await anyio.wait_all_tasks_blocked()
        limiter.release()  # handed to the waiter, not freed
        with anyio.fail_after(5):
            await got.wait()
    assert limiter.borrowed == 2 and not limiter.try_acquire()
    limiter.release()
    assert limiter.try_acquire()


async def test_session_lock_try_acquire_shares_reads_and_keeps_first_come_first_served() -> None:
    lock = SessionLock()
    assert lock.try_acquire(write=False) and lock.try_acquire(write=False)
    assert not lock.try_acquire(write=True)
    entered = anyio.Event()

    async def writer() -> None:
        await lock.acquire(write=True)
        entered.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(writer)
        await anyio.wait_all_tasks_blocked()
        # A writer waits: a new reader does not overtake it, though readers hold the lock.
        assert not lock.try_acquire(write=False)
        lock.release(write=False)
        lock.release(write=False)
        with anyio.fail_after(5):
            await entered.wait()
    assert not lock.try_acquire(write=False)
    lock.release(write=True)
    assert lock.try_acquire(write=True)


def tools(concurrency: int | None) -> tuple[Tool, Tool]:
    registry = ToolRegistry()
    capped, other = registry.register(
        "t",
        [Tool("capped", noop, read_only=True, concurrency=concurrency), Tool("other", noop)],
    )
    return capped, other


async def test_a_refused_slot_leaves_the_session_lock_and_the_harness_limit_as_they_were() -> None:
    capped, _ = tools(concurrency=1)
    dispatcher = Dispatcher(max_concurrency=2)
    first, second = SessionLock(), SessionLock()
    assert dispatcher.try_acquire_slot(capped, first)
    # The tool's own limit refuses the second call: nothing else stays taken.
    assert not dispatcher.try_acquire_slot(capped, second)
    assert dispatcher.statistics().running == 1
    assert second.try_acquire(write=True)
    second.release(write=True)
    dispatcher.release_slot(capped, first)
    assert dispatcher.statistics().running == 0
    assert dispatcher.try_acquire_slot(capped, second)


async def test_a_full_harness_refuses_a_slot_without_taking_the_tool_limit() -> None:
    capped, other = tools(concurrency=1)
    dispatcher = Dispatcher(max_concurrency=1)
    first, second = SessionLock(), SessionLock()
    assert dispatcher.try_acquire_slot(other, first)
    assert not dispatcher.try_acquire_slot(capped, second)
    assert second.try_acquire(write=True)  # the session lock was given back
    second.release(write=True)
    dispatcher.release_slot(other, first)
    assert dispatcher.try_acquire_slot(capped, second)  # and the tool's limit never taken
