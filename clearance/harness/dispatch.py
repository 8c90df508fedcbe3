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

__all__ = ["DispatchStatistics", "Dispatcher", "Limiter", "SessionLock"]


class Limiter:
    """A first-come-first-served counting limiter.

    Unlike ``anyio.CapacityLimiter`` it does not yield to the event loop when a token is
    free: that checkpoint costs a scheduler round trip on every tool call, a large share
    of the pipeline's budget. Waiting (when no token is free) is a plain ``anyio.Event``,
    so cancellation works as usual.
    """

    __slots__ = ("_waiters", "borrowed", "total")

    def __init__(self, total: int) -> None:
        self.total = total
        self.borrowed = 0
        self._waiters: deque[anyio.Event] = deque()

    def try_acquire(self) -> bool:
        """Take a token if one is free and nobody waits for one; False leaves the limiter
        as it was. Never suspends."""
        if self.borrowed < self.total and not self._waiters:
            self.borrowed += 1
            return True
        return False

    async def acquire(self) -> None:
        """Take a token, waiting (first come, first served) until one is free."""
        if self.try_acquire():
            return
        event = anyio.Event()
        self._waiters.append(event)
        try:
            await event.wait()
        except BaseException:
            if event in self._waiters:
                self._waiters.remove(event)
            else:  # the token was handed to us while we were being cancelled
                self.release()
            raise

    def release(self) -> None:
        """Give a token back (to the first waiter, if any)."""
        if self._waiters:
            self._waiters.popleft().set()  # hand the token over; borrowed stays the same
        else:
            self.borrowed -= 1


class SessionLock:
    """A first-come-first-served readers/writer lock (read-only calls share it)."""

    __slots__ = ("_readers", "_waiters", "_writer")

    def __init__(self) -> None:
        self._readers = 0
        self._writer = False
        self._waiters: deque[tuple[bool, anyio.Event]] = deque()

    def _can_enter(self, write: bool) -> bool:
        if write:
            return not self._writer and self._readers == 0
        return not self._writer

    def try_acquire(self, *, write: bool) -> bool:
        """Enter (as the writer, or as one more reader) if that is possible now and nobody
        waits; False leaves the lock as it was. Never suspends."""
        # _can_enter and _enter, inline: this runs on every call.
        if self._waiters or self._writer:
            return False
        if write:
            if self._readers:
                return False
            self._writer = True
        else:
            self._readers += 1
        return True

    async def acquire(self, *, write: bool) -> None:
        """Enter, waiting (first come, first served) until that is possible."""
        if self.try_acquire(write=write):
            return
        entry = (write, anyio.Event())
        self._waiters.append(entry)
        try:
            await entry[1].wait()
        except BaseException:
            if entry in self._waiters:
                self._waiters.remove(entry)
                self._wake()
            else:  # we were granted the lock while being cancelled: give it back
                self.release(write=write)
            raise

    def release(self, *, write: bool) -> None:
        """Leave (as the writer, or as one of the readers) and let the next waiters in."""
        if write:
            self._writer = False
        else:
            self._readers -= 1
        if self._waiters:
            self._wake()

    @asynccontextmanager
    async def hold(self, *, write: bool) -> AsyncIterator[None]:
        """Hold the lock for the ``async with`` block."""
        await self.acquire(write=write)
        try:
            yield
        finally:
            self.release(write=write)

    def _enter(self, write: bool) -> None:
        if write:
            self._writer = True
        else:
            self._readers += 1

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
        self._limiter = Limiter(max_concurrency)
        self._threads = anyio.CapacityLimiter(max_concurrency)
        self._tool_limiters: dict[str, Limiter] = {}
        self._admitted = 0

    def statistics(self) -> DispatchStatistics:
        """How many calls run and wait now, and the limits."""
        running = self._limiter.borrowed
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
        """Give back the place :meth:`admit` reserved."""
        self._admitted -= 1

    def try_acquire_slot(self, tool: Tool, lock: SessionLock) -> bool:
        """Take the session lock, the tool's limit and a harness-wide slot at once if all
        are free and nobody waits for them (no suspension); False leaves everything as it
        was, and the caller waits with :meth:`acquire_slot`."""
        write = not tool.read_only
        if not lock.try_acquire(write=write):
            return False
        # Nothing suspends from here on, so nobody can start waiting meanwhile: giving a
        # token back restores exactly the state before it was taken.
        if not self._limiter.try_acquire():
            lock.release(write=write)
            return False
        if tool.concurrency is not None and not self._tool_limiter(tool).try_acquire():
            self._limiter.release()
            lock.release(write=write)
            return False
        return True

    async def acquire_slot(self, tool: Tool, lock: SessionLock) -> None:
        """Wait for the session lock, the tool's limit and a harness-wide slot, in that
        order (every call takes them in the same order, so they cannot deadlock).
        Pair with :meth:`release_slot`."""
        write = not tool.read_only
        await lock.acquire(write=write)
        try:
            if tool.concurrency is not None:
                limiter = self._tool_limiter(tool)
                await limiter.acquire()
                try:
                    await self._limiter.acquire()
                except BaseException:
                    limiter.release()
                    raise
            else:
                await self._limiter.acquire()
        except BaseException:
            lock.release(write=write)
            raise

    def release_slot(self, tool: Tool, lock: SessionLock) -> None:
        """Give back what :meth:`try_acquire_slot` or :meth:`acquire_slot` took."""
        self._limiter.release()
        if tool.concurrency is not None:
            self._tool_limiters[tool.qualified_name].release()
        lock.release(write=not tool.read_only)

    def _tool_limiter(self, tool: Tool) -> Limiter:
        limiter = self._tool_limiters.get(tool.qualified_name)
        if limiter is None:
            assert tool.concurrency is not None
            limiter = self._tool_limiters[tool.qualified_name] = Limiter(tool.concurrency)
        return limiter

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
