"""Running handlers: limits, ordering within a session, timeouts and cancellation.

- Harness-wide: at most ``max_concurrency`` handlers run; at most ``max_queue`` more wait.
  A call beyond that is refused at once (``overloaded``); nothing waits unboundedly.
- Per tool: ``Tool.concurrency`` caps that tool's parallel calls.
- Per session: read-only calls run together; a mutating call runs alone (no other call of
  its session beside it). Waiters are served first come, first served.
- ``Tool.timeout`` bounds the handler's run (not its time in the queue).
- Sync handlers run in worker threads. On cancellation their ``ctx.cancelled`` is set and
  the dispatcher waits up to ``cancel_grace`` seconds for the thread to return before it
  lets the next call of the session run.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

if TYPE_CHECKING:
    from clearance.harness.tools import CallContext, Tool

__all__ = ["DispatchStatistics", "Dispatcher", "SessionLock"]


class SessionLock:
    """A first-come-first-served readers/writer lock (read-only calls share it)."""

    def __init__(self) -> None:
        self._readers = 0
        self._writer = False
        self._waiters: deque[tuple[bool, anyio.Event]] = deque()

    def _can_enter(self, write: bool) -> bool:
        if write:
            return not self._writer and self._readers == 0
        return not self._writer

    @asynccontextmanager
    async def hold(self, *, write: bool) -> AsyncIterator[None]:
        if not self._waiters and self._can_enter(write):
            self._enter(write)
        else:
            entry = (write, anyio.Event())
            self._waiters.append(entry)
            try:
                await entry[1].wait()
            except BaseException:
                if entry in self._waiters:
                    self._waiters.remove(entry)
                    self._wake()
                else:  # we were granted the lock while being cancelled: give it back
                    self._leave(write)
                raise
        try:
            yield
        finally:
            self._leave(write)

    def _enter(self, write: bool) -> None:
        if write:
            self._writer = True
        else:
            self._readers += 1

    def _leave(self, write: bool) -> None:
        if write:
            self._writer = False
        else:
            self._readers -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self._can_enter(self._waiters[0][0]):
            write, event = self._waiters.popleft()
            self._enter(write)
            event.set()


@dataclass(frozen=True, slots=True)
class DispatchStatistics:
    running: int
    waiting: int
    max_concurrency: int
    max_queue: int


class Dispatcher:
    """Owns the harness-wide limits. See the module docstring."""

    def __init__(
        self, *, max_concurrency: int = 16, max_queue: int = 256, cancel_grace: float = 5.0
    ):
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        if max_queue < 0:
            raise ValueError("max_queue must be 0 or more")
        self.max_concurrency = max_concurrency
        self.max_queue = max_queue
        self.cancel_grace = cancel_grace
        self._limiter = anyio.CapacityLimiter(max_concurrency)
        self._threads = anyio.CapacityLimiter(max_concurrency)
        self._tool_limiters: dict[str, anyio.CapacityLimiter] = {}
        self._admitted = 0

    def statistics(self) -> DispatchStatistics:
        running = self._limiter.borrowed_tokens
        return DispatchStatistics(
            running, self._admitted - running, self.max_concurrency, self.max_queue
        )

    def admit(self) -> bool:
        """Reserve a place for one call; False when running + waiting is at the limit."""
        if self._admitted >= self.max_concurrency + self.max_queue:
            return False
        self._admitted += 1
        return True

    def release(self) -> None:
        self._admitted -= 1

    @asynccontextmanager
    async def slot(self, tool: Tool, lock: SessionLock) -> AsyncIterator[None]:
        """Wait for the session lock, the tool's limit and a harness-wide slot, in that
        order (every call takes them in the same order, so they cannot deadlock)."""
        async with lock.hold(write=not tool.read_only):
            if tool.concurrency is not None:
                limiter = self._tool_limiters.get(tool.qualified_name)
                if limiter is None:
                    limiter = self._tool_limiters[tool.qualified_name] = anyio.CapacityLimiter(
                        tool.concurrency
                    )
                async with limiter, self._limiter:
                    yield
            else:
                async with self._limiter:
                    yield

    async def call_handler(self, tool: Tool, arguments: dict[str, Any], ctx: CallContext) -> Any:
        """Run the handler (async in this task, sync in a worker thread)."""
        if tool.is_async:
            return await tool.handler(arguments, ctx)
        done = threading.Event()

        def work() -> Any:
            try:
                return tool.handler(arguments, ctx)
            finally:
                done.set()

        try:
            return await anyio.to_thread.run_sync(
                work, abandon_on_cancel=True, limiter=self._threads
            )
        except anyio.get_cancelled_exc_class():
            ctx.cancel()
            # Let a cooperative handler finish before the session's next call may start.
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(done.wait, self.cancel_grace)
            raise
