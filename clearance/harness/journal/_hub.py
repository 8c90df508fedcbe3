"""Journal events for UIs: :class:`EventHub` fans each event out, as an :class:`EventItem`
summary, to subscribers (:class:`EventStream`) with bounded buffers; a slow subscriber
loses events (and is told how many), the pipeline never waits for one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from clearance.harness.journal._event import JournalEvent

__all__ = ["EventHub", "EventItem", "EventStream", "summarize"]


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
    """The :class:`EventItem` a UI gets for ``event``."""
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
        """Hand ``event`` to the subscribers of its session and of all sessions; never waits."""
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
        """End the streams of the subscribers of one session."""
        for sub in list(self._subscribers):
            if sub.session_id == session_id:
                sub.send.close()
                self._subscribers.remove(sub)

    def close(self) -> None:
        """End every stream."""
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

    def receive_ready(self) -> list[EventItem]:
        """The items that have arrived and are not read yet, without waiting (none once
        the stream has ended)."""
        items: list[EventItem] = []
        receive = self._sub.receive
        while True:
            try:
                items.append(receive.receive_nowait())
            except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                return items

    async def aclose(self) -> None:
        """Unsubscribe (idempotent)."""
        self._hub._drop(self._sub)
        self._sub.receive.close()

    async def __aenter__(self) -> EventStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
