"""What the inbox tells its open pages: server-sent events, instead of each page reading
every ask every second (issue 34: 190 KB a second a tab; issue 38: 17 MB a look at
10,000 asks).

One watcher per inbox (:meth:`Inbox.watch <clearance.inbox.Inbox.watch>`) keeps the
shown asks' ids and states (:class:`~clearance.harness.ask_query.States`: the pending
ids, the hosts' leases that are gone, and only the asks that came or went), looking when
the store says something changed (a SQLite file's version, a PostgreSQL notice) and every
few seconds anyway (a host's lease can lapse without a write), and publishes what changed
to every open page through a :class:`Broadcast`:

- ``change``: ``{"added": [ids], "removed": [ids], "changed": [ids]}`` (``changed``: its
  host is gone), or ``{"resync": true}`` when more changed than is worth listing; a page
  then fetches the cards of those ids that it shows, and nothing else;
- ``outage``: ``{"message"}``: the store cannot be reached; answering is disabled;
- ``restored``: the store is back (a page reloads its view).

A page that reads too slowly (its queue of events fills) is dropped: its stream ends, and
the page reconnects and reloads, so it never shows a stale view as live.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

__all__ = ["MAX_LISTED", "Broadcast", "changes", "sse"]

MAX_LISTED = 200
"""Ids one ``change`` event lists at most; past it, the event says ``resync``."""

_QUEUE = 64
"""Events waiting for one page before it is dropped."""


def sse(event: str, data: Mapping[str, Any]) -> str:
    """One server-sent event (its data is one line of JSON)."""
    return f"event: {event}\ndata: {json.dumps(dict(data), separators=(',', ':'))}\n\n"


def changes(before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, Any] | None:
    """The ``change`` event between two views of the shown asks (id to state), or None
    when nothing changed."""
    added = [i for i in after if i not in before]
    removed = [i for i in before if i not in after]
    changed = [i for i in after if i in before and before[i] != after[i]]
    if not (added or removed or changed):
        return None
    if len(added) + len(removed) + len(changed) > MAX_LISTED:
        return {"resync": True}
    return {"added": added, "removed": removed, "changed": changed}


class Broadcast:
    """Every subscriber gets every event published after it subscribed (see the module
    docstring)."""

    def __init__(self) -> None:
        self._subscribers: set[MemoryObjectSendStream[str]] = set()
        self.closed = False

    def __len__(self) -> int:
        return len(self._subscribers)

    @contextmanager
    def subscribe(self) -> Iterator[MemoryObjectReceiveStream[str]]:
        """A stream of the events published from now on (ending when the broadcast
        closes, or when this subscriber fell too far behind)."""
        send, receive = anyio.create_memory_object_stream[str](_QUEUE)
        if self.closed:
            send.close()
        else:
            self._subscribers.add(send)
        try:
            yield receive
        finally:
            self._subscribers.discard(send)
            send.close()
            receive.close()

    def publish(self, event: str, data: Mapping[str, Any]) -> None:
        """Send ``event`` to every subscriber; one whose queue is full is dropped."""
        text = sse(event, data)
        for send in list(self._subscribers):
            try:
                send.send_nowait(text)
            except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
                self._subscribers.discard(send)
                send.close()

    def close(self) -> None:
        """End every subscriber's stream (the inbox is stopping)."""
        self.closed = True
        for send in list(self._subscribers):
            send.close()
        self._subscribers.clear()
