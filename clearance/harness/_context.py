"""What a handler knows about its call: :class:`CallContext`, and the handler's signature."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Generator, Mapping
from typing import Any, Protocol

import anyio
import anyio.from_thread

from clearance.errors import CallCancelledError
from clearance.types import Principal

__all__ = ["CallContext", "Handler", "ProgressSink"]

Handler = Callable[[dict[str, Any], "CallContext"], Any]
"""``(arguments, ctx) -> result``: sync (run in a worker thread) or async."""


class ProgressSink(Protocol):
    """Where a call's progress reports go (the pipeline, which journals them)."""

    async def progress(
        self, ctx: CallContext, message: str, data: dict[str, Any] | None
    ) -> None: ...


class _Done:
    """An awaitable that is already complete (what ``progress`` returns in a worker thread)."""

    def __await__(self) -> Generator[Any, Any, None]:
        return
        yield


class CallContext:
    """What a handler knows about its call, and how it reports progress and sees cancellation."""

    __slots__ = (
        "_cancelled",
        "_done",
        "_loop_thread",
        "_pipeline",
        "call_id",
        "model_alias",
        "principal",
        "qualified_name",
        "session_id",
        "turn_id",
    )

    def __init__(
        self,
        *,
        session_id: str,
        turn_id: str | None,
        call_id: str,
        qualified_name: str,
        model_alias: str,
        principal: Principal,
        pipeline: ProgressSink | None = None,
    ) -> None:
        self.session_id = session_id
        self.turn_id = turn_id
        self.call_id = call_id
        self.qualified_name = qualified_name
        self.model_alias = model_alias
        self.principal = principal
        self._pipeline = pipeline
        self._cancelled = False
        self._done = False
        self._loop_thread = threading.get_ident()

    @classmethod
    def for_call(
        cls,
        session_id: str,
        turn_id: str | None,
        call_id: str,
        qualified_name: str,
        model_alias: str,
        principal: Principal,
        pipeline: ProgressSink | None,
    ) -> CallContext:
        """The same as the constructor, for the pipeline: positional, without the
        keyword binding and the ``__init__`` call that cost a fifth of a microsecond on
        every call."""
        ctx = object.__new__(cls)
        ctx.session_id = session_id
        ctx.turn_id = turn_id
        ctx.call_id = call_id
        ctx.qualified_name = qualified_name
        ctx.model_alias = model_alias
        ctx.principal = principal
        ctx._pipeline = pipeline
        ctx._cancelled = False
        ctx._done = False
        ctx._loop_thread = threading.get_ident()
        return ctx

    @property
    def cancelled(self) -> bool:
        """True once the call was cancelled or timed out (for sync handlers to poll)."""
        return self._cancelled

    def raise_if_cancelled(self) -> None:
        """Raise :class:`~clearance.errors.CallCancelledError` in a sync handler whose call
        was cancelled."""
        if self._cancelled:
            raise CallCancelledError(self.call_id)

    def cancel(self) -> None:
        """Mark the call cancelled (the dispatcher calls it; sync handlers see it)."""
        self._cancelled = True  # a plain store: sync handlers poll it from their thread

    def finish(self) -> None:
        """Mark the call ended: later ``progress`` reports are dropped, not recorded."""
        self._done = True

    def progress(self, message: str, data: Mapping[str, Any] | None = None) -> Awaitable[None]:
        """Report progress: ``await ctx.progress("step 2")`` in an async handler, or plain
        ``ctx.progress("step 2")`` in a sync handler (it returns once recorded)."""
        if self._pipeline is None or self._done:
            return _Done()
        coro = self._pipeline.progress(self, message, dict(data) if data else None)
        if threading.get_ident() != self._loop_thread:
            anyio.from_thread.run(lambda: coro)
            return _Done()
        return coro
