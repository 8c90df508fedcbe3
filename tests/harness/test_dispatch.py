from typing import Any

import anyio
import anyio.lowlevel
import pytest
from support import ALICE, harness

from clearance import CallContext, Tool, ToolRegistry
from clearance.harness.dispatch import SessionLock
from clearance.policy import NoopEvaluator

pytestmark = pytest.mark.anyio


class Probe:
    """Handlers that record how many calls of the session run at once."""

    def __init__(self) -> None:
        self.running = 0
        self.peak_reads = 0
        self.overlaps_with_write = 0
        self.writing = False
        self.all_readers_in = anyio.Event()
        self.release = anyio.Event()
        self.readers_wanted = 0

    async def read(self, arguments: dict[str, Any], ctx: CallContext) -> str:
        if self.writing:
            self.overlaps_with_write += 1
        self.running += 1
        self.peak_reads = max(self.peak_reads, self.running)
        if self.running == self.readers_wanted:
            self.all_readers_in.set()
        await self.release.wait()
        self.running -= 1
        return "r"

    async def write(self, arguments: dict[str, Any], ctx: CallContext) -> str:
        if self.running or self.writing:
            self.overlaps_with_write += 1
        self.writing = True
        await anyio.lowlevel.checkpoint()
        await anyio.wait_all_tasks_blocked()
        self.writing = False
        return "w"


def registry(probe: Probe) -> ToolRegistry:
    r = ToolRegistry()
    r.register("x", [Tool("read", probe.read, read_only=True), Tool("write", probe.write)])
    return r


async def test_read_only_calls_overlap() -> None:
    probe = Probe()
    probe.readers_wanted = 3
    async with harness(registry(probe), evaluator=NoopEvaluator()) as h:
        s = await h.create_session(principal=ALICE)
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                for _i in range(3):
                    tg.start_soon(
                        s.call_tool,
                        "x__read",
                        {},
                    )
                await probe.all_readers_in.wait()  # all three inside the handler at once
                probe.release.set()
    assert probe.peak_reads == 3


async def test_mutating_calls_run_alone() -> None:
    probe = Probe()
    probe.release.set()
    outcomes = []
    async with harness(registry(probe), evaluator=NoopEvaluator()) as h:
        s = await h.create_session(principal=ALICE)

        async def call(name: str) -> None:
            outcomes.append((await s.call_tool(name, {})).status)

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                for name in ["x__write", "x__read", "x__write", "x__read", "x__read", "x__write"]:
                    tg.start_soon(call, name)
    assert outcomes == ["ok"] * 6
    assert probe.overlaps_with_write == 0


async def test_per_tool_concurrency_cap() -> None:
    inside = 0
    peak = 0
    gate = anyio.Event()
    two_in = anyio.Event()

    async def capped(arguments: dict[str, Any], ctx: CallContext) -> str:
        nonlocal inside, peak
        inside += 1
        peak = max(peak, inside)
        if inside == 2:
            two_in.set()
        await gate.wait()
        inside -= 1
        return "ok"

    r = ToolRegistry()
    r.register("x", [Tool("capped", capped, read_only=True, concurrency=2)])
    async with harness(r, evaluator=NoopEvaluator()) as h:
        s = await h.create_session(principal=ALICE)
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                for _ in range(5):
                    tg.start_soon(s.call_tool, "x__capped", {})
                await two_in.wait()
                await anyio.wait_all_tasks_blocked()
                assert inside == 2
                gate.set()
    assert peak == 2


async def test_session_lock_is_first_come_first_served() -> None:
    lock = SessionLock()
    order: list[str] = []
    hold = anyio.Event()

    async def take(name: str, write: bool) -> None:
        async with lock.hold(write=write):
            order.append(name)
            if name == "r1":
                await hold.wait()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(take, "r1", False)
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(take, "w1", True)
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(take, "r2", False)  # waits behind the writer, not beside r1
            await anyio.wait_all_tasks_blocked()
            assert order == ["r1"]
            hold.set()
    assert order == ["r1", "w1", "r2"]


async def test_cancelled_waiter_leaves_lock_usable() -> None:
    lock = SessionLock()
    async with lock.hold(write=True):
        with anyio.move_on_after(0.01):
            async with lock.hold(write=True):
                pytest.fail("must not enter")
    async with lock.hold(write=True):
        pass


@pytest.mark.parametrize("native", [True, False])
async def test_session_close_cancels_by_either_mechanism(
    native: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On asyncio a running call is cancelled through its task; elsewhere through an
    anyio cancel scope (forced here by hiding the asyncio task)."""
    import asyncio

    from clearance.harness import cancellation

    if not native:

        def no_task() -> None:
            raise RuntimeError("no running event loop")

        monkeypatch.setattr(cancellation, "current_task", no_task)
    entered = anyio.Event()

    async def hold(arguments: dict[str, Any], ctx: CallContext) -> str:
        entered.set()
        await anyio.sleep_forever()
        return "never"

    r = ToolRegistry()
    r.register("x", [Tool("hold", hold)])
    statuses: list[str] = []
    async with harness(r, evaluator=NoopEvaluator()) as h:
        s = await h.create_session(principal=ALICE)

        async def call() -> None:
            statuses.append((await s.call_tool("x__hold", {})).status)
            # The call's task is not left with a pending cancellation.
            task = asyncio.current_task()
            assert task is not None and task.cancelling() == 0
            await anyio.lowlevel.checkpoint()

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await entered.wait()
                await s.aclose()
    assert statuses == ["cancelled"]


async def test_a_handler_that_swallows_cancellation_leaves_its_task_clean() -> None:
    import asyncio

    entered = anyio.Event()

    async def stubborn(arguments: dict[str, Any], ctx: CallContext) -> str:
        entered.set()
        try:
            await anyio.sleep_forever()
        except BaseException:
            return "finished anyway"
        return "never"

    r = ToolRegistry()
    r.register("x", [Tool("stubborn", stubborn)])
    outcomes: list[str] = []
    async with harness(r, evaluator=NoopEvaluator()) as h:
        s = await h.create_session(principal=ALICE)

        async def call() -> None:
            outcomes.append((await s.call_tool("x__stubborn", {})).status)
            task = asyncio.current_task()
            assert task is not None and task.cancelling() == 0
            with anyio.move_on_after(0.01) as later:  # anyio scopes still work after it
                await anyio.sleep_forever()
            assert later.cancelled_caught

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await entered.wait()
                await s.aclose()
    assert outcomes in (["ok"], ["cancelled"])
