"""A harness for synchronous code: the frameworks' sync entry points (``Runner.run_sync``,
``agent.run_sync``, ``graph.invoke``) with clearance in front of their tools.

A harness is async and lives on one event loop: ``async with Harness(...)`` holds a task
group open in the task that entered it, and its locks and stores' wake-ups belong to that
loop. The frameworks' sync entry points run their async code on the calling thread's
*default* event loop (``Runner.run_sync`` and ``agent.run_sync`` take it, or make and set
one), with ``loop.run_until_complete``. :class:`BlockingHarness` makes a loop, sets it as
the thread's default for the ``with`` block, and opens the harness on it, from a task of
its own that holds it open until the block ends, so that the adapters' callbacks, run by
the framework on that loop, find their session at home. Between two runs the loop is idle, and so is the harness's background work; it
resumes with the next run.

``graph.invoke`` runs a node synchronously, on whatever thread LangGraph gives it: the
LangGraph node runs its decisions with :func:`run_on_loop`, on the loop the harness was
opened on (one run at a time), wherever it is called from.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Awaitable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from types import TracebackType

    from clearance.harness.session import Harness, Session

__all__ = ["BlockingHarness", "run_on_loop"]

T = TypeVar("T")

_LOOPS: weakref.WeakKeyDictionary[Harness, tuple[asyncio.AbstractEventLoop, threading.Lock]] = (
    weakref.WeakKeyDictionary()
)
"""The loop (and the lock that runs it one run at a time) of each harness a
:class:`BlockingHarness` holds open."""


class _HarnessLoop(asyncio.SelectorEventLoop):
    """The loop a :class:`BlockingHarness` holds its harness on. ``Runner.run_sync`` ends
    every run with ``loop.shutdown_asyncgens()``, after which an asyncio loop refuses every
    new async generator, and the harness makes one for each call it records
    (``session.execution``): so the shutdown waits for the harness to close."""

    held = True

    async def shutdown_asyncgens(self) -> None:
        if not self.held:
            await super().shutdown_asyncgens()


class BlockingHarness:
    """A :class:`~clearance.harness.session.Harness` opened from synchronous code, on an
    event loop set as the calling thread's default while the ``with`` block runs (the one
    ``Runner.run_sync`` and ``agent.run_sync`` then run on)::

        with BlockingHarness(Harness(registry, evaluator=evaluator)) as host:
            session = host.create_session(principal=Principal("User", "alice"))
            ...                                   # Runner.run_sync, agent.run_sync, graph.invoke
            host.run(guard.answer(state, item, "allow_once"))   # any async call of clearance's

    Raises:
        RuntimeError: entered where an event loop is running (async code: use ``async with
            Harness(...)`` and the frameworks' async entry points).
    """

    def __init__(self, harness: Harness) -> None:
        self.harness = harness
        self._loop: _HarnessLoop | None = None
        self._host: asyncio.Task[None] | None = None
        self._close: asyncio.Event | None = None

    def __enter__(self) -> BlockingHarness:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError(
                "BlockingHarness is for synchronous code, and an event loop is running here: "
                "use 'async with Harness(...)' and the framework's async entry point"
            )
        # A loop of its own, the thread's default while the block runs (the frameworks'
        # sync entry points take the default); afterwards the thread has none (a
        # framework's next sync run makes its own).
        loop = _HarnessLoop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        opened: asyncio.Future[None] = loop.create_future()
        self._close = asyncio.Event()
        self._host = loop.create_task(self._hold(opened, self._close))
        loop.run_until_complete(opened)
        _LOOPS[self.harness] = (loop, threading.Lock())
        return self

    async def _hold(self, opened: asyncio.Future[None], close: asyncio.Event) -> None:
        # The task that enters the harness is the one that leaves it (its task group's
        # cancel scope belongs to this task): it waits here, across the framework's runs.
        try:
            async with self.harness:
                opened.set_result(None)
                await close.wait()
        except BaseException as exc:
            if not opened.done():
                opened.set_exception(exc)
                return
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._loop is not None and self._host is not None and self._close is not None
        _LOOPS.pop(self.harness, None)
        self._close.set()
        loop = self._loop
        try:
            loop.run_until_complete(self._host)
        finally:
            loop.held = False
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
            asyncio.set_event_loop(None)

    def run(self, awaitable: Awaitable[T]) -> T:
        """Run an async call of clearance's (``guard.answer(...)``,
        ``session.authorize(...)``) on the harness's loop, and return what it returned."""
        assert self._loop is not None, "use BlockingHarness in a with block"
        return run_on_loop(self.harness, awaitable)

    def create_session(self, **options: Any) -> Session:
        """``harness.create_session(**options)``, from synchronous code."""
        return self.run(self.harness.create_session(**options))


def run_on_loop(harness: Harness, awaitable: Awaitable[T]) -> T:
    """Run ``awaitable`` to its end on the loop a :class:`BlockingHarness` opened
    ``harness`` on, from synchronous code on any thread (one run at a time).

    Raises:
        RuntimeError: the harness is not held open by a ``BlockingHarness``, or its loop
            is running (a sync entry point called from the harness's own async code).
    """
    held = _LOOPS.get(harness)
    if held is None:
        if isinstance(awaitable, Coroutine):
            awaitable.close()
        raise RuntimeError(
            "a synchronous run needs the harness opened with "
            "clearance.integrations.BlockingHarness (in async code, use the framework's "
            "async entry point)"
        )
    loop, lock = held
    with lock:
        if loop.is_running():
            if isinstance(awaitable, Coroutine):
                awaitable.close()
            raise RuntimeError(
                "the harness's event loop is running: a synchronous entry point was called "
                "from async code; use the framework's async entry point"
            )
        return loop.run_until_complete(awaitable)
