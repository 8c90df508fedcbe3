"""``EventHub`` / ``EventStream``: what a UI subscribed to the journal's events receives."""

from __future__ import annotations

import pytest

from clearance.harness.journal import EventHub, JournalEvent

pytestmark = pytest.mark.anyio


def started(session_id: str, call_id: str) -> JournalEvent:
    data = {"model_alias": "t__x", "qualified_name": "t.x", "arguments": {"n": 1}}
    return JournalEvent("tool_started", session_id, None, call_id, data)


async def test_receive_ready_takes_what_arrived_without_waiting() -> None:
    hub = EventHub()
    stream = hub.subscribe("s1")
    assert stream.receive_ready() == []  # nothing yet: returns at once
    hub.publish(started("s1", "c1"))
    hub.publish(started("s2", "other"))  # another session's: not for this subscriber
    hub.publish(started("s1", "c2"))
    items = stream.receive_ready()
    assert [(i.type, i.call_id, i.tool, i.arguments) for i in items] == [
        ("tool_started", "c1", "t__x", {"n": 1}),
        ("tool_started", "c2", "t__x", {"n": 1}),
    ]
    assert stream.receive_ready() == []
    hub.publish(started("s1", "c3"))
    hub.close_session("s1")
    assert [i.call_id for i in stream.receive_ready()] == ["c3"]  # then the stream ended
    assert stream.receive_ready() == []
    assert [item async for item in stream] == []
    await stream.aclose()


async def test_a_slow_subscriber_is_told_how_many_events_it_lost() -> None:
    hub = EventHub(buffer=1)
    stream = hub.subscribe()
    for n in range(3):
        hub.publish(started("s1", f"c{n}"))
    assert [i.call_id for i in stream.receive_ready()] == ["c0"]
    hub.publish(started("s1", "c3"))
    assert [(i.type, i.dropped) for i in stream.receive_ready()] == [("events_dropped", 2)]
    await stream.aclose()
