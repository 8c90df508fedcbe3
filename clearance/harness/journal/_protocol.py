"""What every journal sink does (:class:`Journal`), and the simplest one (:class:`MemoryJournal`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from clearance.harness.journal._event import JournalEvent, matches

__all__ = ["Journal", "MemoryJournal"]


@runtime_checkable
class Journal(Protocol):
    """Where events go.

    ``append`` assigns ``seq`` and returns once the event is recorded as durably as the
    sink promises; the pipeline awaits it for ``tool_started`` before running a handler.
    Once ``append`` is called the event is recorded even if the caller is cancelled while
    it waits (a cancellation takes effect after it returns).

    A sink may also define ``append_now(event)``, which the pipeline prefers: record the
    event at once where the sink can (assigning ``seq``) and return ``None``, else start
    recording it and return an awaitable that finishes, with ``append``'s promise. Most
    records need no wait, and a coroutine per record costs more than keeping one.
    """

    async def append(self, event: JournalEvent) -> JournalEvent: ...

    async def aclose(self) -> None: ...

    def events(
        self, *, session_id: str | None = None, call_id: str | None = None
    ) -> Iterable[JournalEvent]: ...


class MemoryJournal:
    """Keeps events in a list; for tests, benchmarks and short-lived apps."""

    def __init__(self) -> None:
        self._events: list[JournalEvent] = []

    async def append(self, event: JournalEvent) -> JournalEvent:
        """Keep ``event``; assigns its ``seq``."""
        self.append_now(event)
        return event

    def append_now(self, event: JournalEvent) -> None:
        """:meth:`append` without a coroutine (keeping an event never waits)."""
        event.seq = len(self._events) + 1
        self._events.append(event)

    async def aclose(self) -> None:
        return None

    def events(
        self, *, session_id: str | None = None, call_id: str | None = None
    ) -> list[JournalEvent]:
        return [e for e in self._events if matches(e, session_id, call_id)]

    def __len__(self) -> int:
        return len(self._events)
