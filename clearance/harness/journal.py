"""The journal: every step of every call, in order.

Each record has ``seq`` (monotonic per journal), ``ts`` (Unix seconds), ``session_id``,
``turn_id``, ``call_id``, ``type`` and ``data``. Types:

- ``session_created``: principal, agent, selected tools;
- ``call_decided``: the explanation record, exactly one per call that entered the pipeline
  (schema check, each guardrail outcome, the verdict with reasons and errors, the ask and
  its answer, the grant used, the outcome, and the time each stage took in microseconds);
- ``permission_asked`` / ``permission_decided``;
- ``tool_started`` (final arguments, or ``null`` when withheld), ``tool_progress``,
  ``tool_finished`` (status ``ok | error | failed | cancelled | timeout | interrupted``).

Rule R7: a call that started has exactly one ``tool_started`` and one ``tool_finished``.
Rule R8: sensitive or redacted values never reach a record.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

__all__ = [
    "EVENT_TYPES",
    "JOURNAL_VERSION",
    "EventItem",
    "Journal",
    "JournalEvent",
    "MemoryJournal",
]

JOURNAL_VERSION = 1

EventType = Literal[
    "session_created",
    "session_closed",
    "call_decided",
    "permission_asked",
    "permission_decided",
    "tool_started",
    "tool_progress",
    "tool_finished",
]
EVENT_TYPES: tuple[str, ...] = EventType.__args__  # type: ignore[attr-defined]


@dataclass(slots=True)
class JournalEvent:
    """One journal record. ``seq`` is assigned by the journal when it is appended."""

    type: EventType
    session_id: str
    turn_id: str | None
    call_id: str | None
    data: dict[str, Any]
    ts: float = field(default_factory=time.time)
    seq: int = 0
    version: int = JOURNAL_VERSION

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "seq": self.seq,
            "ts": self.ts,
            "type": self.type,
            "session_id": self.session_id,
            "turn_id": self.turn_id,
            "call_id": self.call_id,
            "data": self.data,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> JournalEvent:
        return cls(
            type=raw["type"],
            session_id=raw["session_id"],
            turn_id=raw.get("turn_id"),
            call_id=raw.get("call_id"),
            data=raw.get("data") or {},
            ts=float(raw.get("ts", 0.0)),
            seq=int(raw.get("seq", 0)),
            version=int(raw.get("version", JOURNAL_VERSION)),
        )


@runtime_checkable
class Journal(Protocol):
    """Where events go. ``append`` returns once the event is recorded as durably as the
    sink promises; the pipeline awaits it for ``tool_started`` before running a handler."""

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
        event.seq = len(self._events) + 1
        self._events.append(event)
        return event

    async def aclose(self) -> None:
        return None

    def events(
        self, *, session_id: str | None = None, call_id: str | None = None
    ) -> list[JournalEvent]:
        return [
            e
            for e in self._events
            if (session_id is None or e.session_id == session_id)
            and (call_id is None or e.call_id == call_id)
        ]

    def __len__(self) -> int:
        return len(self._events)


# --- events for UIs ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EventItem:
    """What ``session.events()`` yields: the event, with a summary a UI can show as is.

    ``dropped`` > 0 marks a gap: the subscriber was too slow and that many events were
    dropped before this one (the pipeline never waits for a subscriber).
    """

    session_id: str
    event: JournalEvent | None
    type: str
    call_id: str | None = None
    turn_id: str | None = None
    tool: str | None = None
    """The tool's model alias."""
    qualified_name: str | None = None
    model_alias: str | None = None
    status: str | None = None
    arguments: dict[str, Any] | None = None
    """Only on ``tool_started``; ``None`` when withheld."""
    dropped: int = 0


def summarize(event: JournalEvent) -> EventItem:
    data = event.data
    status = data.get("status") or data.get("outcome") or data.get("decision")
    return EventItem(
        session_id=event.session_id,
        event=event,
        type=event.type,
        call_id=event.call_id,
        turn_id=event.turn_id,
        tool=data.get("model_alias"),
        qualified_name=data.get("qualified_name"),
        model_alias=data.get("model_alias"),
        status=status,
        arguments=data.get("arguments") if event.type == "tool_started" else None,
    )


class _Subscriber:
    __slots__ = ("dropped", "receive", "send", "session_id")

    def __init__(self, session_id: str | None, buffer: int) -> None:
        self.send: MemoryObjectSendStream[EventItem]
        self.receive: MemoryObjectReceiveStream[EventItem]
        self.send, self.receive = anyio.create_memory_object_stream[EventItem](buffer)
        self.session_id = session_id
        self.dropped = 0


class EventHub:
    """Fans journal events out to subscribers with bounded buffers."""

    def __init__(self, buffer: int = 1024) -> None:
        self.buffer = buffer
        self._subscribers: list[_Subscriber] = []

    def publish(self, event: JournalEvent) -> None:
        if not self._subscribers:
            return
        item: EventItem | None = None
        for sub in list(self._subscribers):
            if sub.session_id is not None and sub.session_id != event.session_id:
                continue
            if item is None:
                item = summarize(event)
            try:
                if sub.dropped:
                    sub.send.send_nowait(
                        EventItem(event.session_id, None, "events_dropped", dropped=sub.dropped)
                    )
                    sub.dropped = 0
                sub.send.send_nowait(item)
            except anyio.WouldBlock:
                sub.dropped += 1
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._subscribers.remove(sub)

    def close_session(self, session_id: str) -> None:
        for sub in list(self._subscribers):
            if sub.session_id == session_id:
                sub.send.close()
                self._subscribers.remove(sub)

    def close(self) -> None:
        for sub in self._subscribers:
            sub.send.close()
        self._subscribers.clear()

    def subscribe(self, session_id: str | None = None) -> EventStream:
        """Start receiving events now (of one session, or all); iterate the result."""
        sub = _Subscriber(session_id, self.buffer)
        self._subscribers.append(sub)
        return EventStream(self, sub)

    def _drop(self, sub: _Subscriber) -> None:
        if sub in self._subscribers:
            self._subscribers.remove(sub)
        sub.send.close()


class EventStream:
    """An async iterator of :class:`EventItem`; subscribed from the moment it is created.

    Use it with ``async with`` (or call :meth:`aclose`) to unsubscribe early.
    """

    def __init__(self, hub: EventHub, sub: _Subscriber) -> None:
        self._hub = hub
        self._sub = sub

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> EventItem:
        try:
            return await self._sub.receive.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._hub._drop(self._sub)
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        self._hub._drop(self._sub)
        self._sub.receive.close()

    async def __aenter__(self) -> EventStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def micros(start: float, end: float) -> int:
    return max(0, math.floor((end - start) * 1_000_000))
