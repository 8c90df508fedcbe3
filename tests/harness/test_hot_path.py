"""The pipeline's shortcuts (issue 18) give the answers of the long ways they skip.

Each shortcut is checked against the code it stands in for: the shape check's flat fast
path against the full walk, the flat copy against the deep copy, ``CallContext.for_call``
and ``AuthzRequest.make`` against their constructors, and a journal's ``append_now``
against its own ``append`` (a sink that changes ``append`` is never bypassed: a handler
must not run when its start could not be recorded, rule R1).
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clearance import (
    CallContext,
    Harness,
    MemoryJournal,
    Principal,
    SqliteJournal,
    Tool,
    ToolRegistry,
)
from clearance.harness import shape
from clearance.harness._call_state import copy_json
from clearance.harness.journal import JournalEvent, encode_data, read_sqlite
from clearance.harness.journal import _event as journal_event
from clearance.policy import AuthzRequest, NoopEvaluator, SessionInfo, ToolInfo

pytestmark = pytest.mark.anyio

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=40)
)
values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=6,
)
flat_objects = st.dictionaries(st.text(max_size=12), scalars, max_size=6)
keys = st.one_of(st.text(max_size=4), st.integers(), st.booleans())


@given(
    value=flat_objects | st.dictionaries(keys, values, max_size=4) | values,
    max_bytes=st.integers(min_value=0, max_value=2_000),
    max_depth=st.integers(min_value=0, max_value=4),
)
def test_the_flat_shortcut_answers_as_the_walk(value: Any, max_bytes: int, max_depth: int) -> None:
    fast = shape.check_shape(value, max_bytes, max_depth)
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(shape, "_flat_within", lambda value, max_bytes: False)
        walked = shape.check_shape(value, max_bytes, max_depth)
    assert fast == walked


def test_the_flat_shortcut_takes_only_plain_scalars() -> None:
    """What the shortcut must hand to the walk, which refuses it (or measures it)."""
    limit = 1 << 20
    assert shape._flat_within({"path": "a", "limit": 3, "force": True, "x": None}, limit)
    refused: list[dict[Any, Any]] = [
        {"n": math.nan},  # floats go to the walk (non-finite ones are refused there)
        {"n": 1.5},
        {"n": 2**64},  # a big integer: the walk checks its digits
        {"n": -(2**63) - 1},
        {1: "a"},  # a key that is not a string
        {"s": type("S", (str,), {})("x")},  # a subclass: the walk refuses it
        {"a": []},
        {"a": {}},
        {"a": ("t",)},
    ]
    for value in refused:
        assert not shape._flat_within(value, limit), value
    assert not shape._flat_within({"a": "x" * 100}, 100)  # near the limit: measured


@given(value=st.dictionaries(st.text(max_size=4), values, max_size=5))
def test_the_flat_copy_is_a_deep_copy(value: dict[str, Any]) -> None:
    copied = copy_json(value)
    assert copied == value or _has_nan(value)
    assert copied is not value
    _assert_no_shared_containers(copied, value)


def _has_nan(value: Any) -> bool:
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, dict):
        return any(_has_nan(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_nan(v) for v in value)
    return False


def _assert_no_shared_containers(a: Any, b: Any) -> None:
    if isinstance(a, dict | list):
        assert a is not b
        pairs = (
            zip(a.values(), b.values(), strict=True)
            if isinstance(a, dict)
            else zip(a, b, strict=True)
        )
        for x, y in pairs:
            _assert_no_shared_containers(x, y)


def test_a_call_context_for_a_call_is_the_constructed_one() -> None:
    principal = Principal("User", "alice")
    made = CallContext.for_call("s", "t", "c", "files.read", "files__read", principal, None)
    built = CallContext(
        session_id="s",
        turn_id="t",
        call_id="c",
        qualified_name="files.read",
        model_alias="files__read",
        principal=principal,
        pipeline=None,
    )
    for name in CallContext.__slots__:
        assert getattr(made, name) == getattr(built, name), name


def test_a_made_request_is_the_constructed_one() -> None:
    parts = (
        Principal("User", "alice"),
        ToolInfo("files.read", "files", "read", True),
        {"path": "a"},
        SessionInfo("s", "t"),
        {"k": 1},
        {"path": {"resolved": "/w/a"}},
        {"path": {"user": True}},
    )
    made = AuthzRequest.make(*parts)
    assert made == AuthzRequest(*parts)
    # Every field is set by make(): a field added to AuthzRequest must be added there too.
    names = [f.name for f in dataclasses.fields(AuthzRequest)]
    assert names == ["principal", "tool", "arguments", "session", "context", "facts", "provenance"]
    assert [getattr(made, n) for n in names] == list(parts)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.arguments = {}  # type: ignore[misc]


class Recorded:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def handler(self, arguments: dict[str, Any], ctx: Any) -> str:
        self.calls.append(arguments)
        return "ok"


def registry(recorded: Recorded) -> ToolRegistry:
    registry = ToolRegistry()
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    registry.register("files", [Tool("read", recorded.handler, input_schema=schema)])
    return registry


async def call_once(journal: Any) -> tuple[Any, Recorded]:
    recorded = Recorded()
    async with Harness(registry(recorded), evaluator=NoopEvaluator(), journal=journal) as h:
        session = await h.create_session(principal=Principal("User", "alice"))
        outcome = await session.call_tool("files__read", {"path": "a"}, call_id="c1")
    return outcome, recorded


async def test_an_append_replaced_on_the_instance_is_never_bypassed() -> None:
    journal = MemoryJournal()

    async def failing(event: JournalEvent) -> JournalEvent:
        if event.type == "tool_started":
            raise OSError("disk full")
        return await MemoryJournal.append(journal, event)

    journal.append = failing  # type: ignore[method-assign]
    outcome, recorded = await call_once(journal)
    assert outcome.status == "denied" and recorded.calls == []
    types = [e.type for e in journal.events()]
    assert types == ["session_created", "call_decided", "session_closed"]


class RefusingSqlite(SqliteJournal):
    """A durable sink whose append refuses starts (as a full disk would)."""

    async def append(self, event: JournalEvent) -> JournalEvent:
        if event.type == "tool_started":
            raise OSError("disk full")
        return await super().append(event)


async def test_a_sqlite_subclass_append_is_never_bypassed(tmp_path: Path) -> None:
    outcome, recorded = await call_once(RefusingSqlite(tmp_path / "j.db"))
    assert outcome.status == "denied" and recorded.calls == []
    types = [e.type for e in read_sqlite(tmp_path / "j.db")]
    assert "tool_started" not in types and types.count("call_decided") == 1


async def test_sqlite_append_now_records_what_append_records(tmp_path: Path) -> None:
    outcome, recorded = await call_once(SqliteJournal(tmp_path / "j.db"))
    assert outcome.ok and recorded.calls == [{"path": "a"}]
    events = read_sqlite(tmp_path / "j.db")
    assert [e.type for e in events] == [
        "session_created",
        "call_decided",
        "tool_started",
        "tool_finished",
        "session_closed",
    ]
    assert [e.seq for e in events] == [1, 2, 3, 4, 5]
    assert events[2].data["arguments"] == {"path": "a"}


record_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text()
    | st.frozensets(st.integers(), max_size=3)
    | st.builds(object),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)


@given(value=st.dictionaries(st.text(max_size=5), record_values, max_size=5))
def test_records_encode_as_the_json_encoder_writes_them(value: dict[str, Any]) -> None:
    reference = json.JSONEncoder(
        ensure_ascii=True, separators=(",", ":"), default=journal_event._json_default
    )
    assert encode_data(value) == reference.encode(value)


def test_a_record_that_refers_to_itself_is_refused_as_before() -> None:
    value: dict[str, Any] = {"a": []}
    value["a"].append(value)
    with pytest.raises(ValueError, match="Circular"):
        encode_data(value)
    assert encode_data({"a": [1]}) == '{"a":[1]}'  # the encoder is unharmed
