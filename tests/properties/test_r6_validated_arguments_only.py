"""R6: a handler never sees arguments that fail the tool's schema, nor arguments other
than those authorized, nor anything that is not JSON (the shape check walks every value it
passes: padding that makes a value look large must not hide what comes after it)."""

import enum
import json
import math
import time
from collections import OrderedDict
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clearance import CallContext, Harness, MemoryJournal, Principal, Tool, ToolRegistry
from clearance.harness.shape import check_shape
from clearance.policy import NoopEvaluator

pytestmark = pytest.mark.anyio

SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "maxLength": 10, "pattern": "^[a-z/]*$"},
        "count": {"type": "integer", "minimum": 0, "maximum": 100},
        "mode": {"enum": ["r", "w"]},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True, "maxItems": 3},
        "opts": {
            "type": "object",
            "properties": {"force": {"type": "boolean"}},
            "additionalProperties": False,
        },
    },
    "required": ["path"],
    "additionalProperties": False,
}

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 200)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text("abz/R.", max_size=12),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(["force", "x", "path"]), children, max_size=3)
    ),
    max_leaves=10,
)
arguments = (
    st.dictionaries(
        st.sampled_from(["path", "count", "mode", "tags", "opts", "extra"]), json_values, max_size=5
    )
    | json_values
)


@given(batch=st.lists(arguments, min_size=1, max_size=8))
async def test_r6_handler_sees_only_valid_arguments(batch: list[Any]) -> None:
    seen: list[Any] = []

    async def handler(args: dict[str, Any], ctx: CallContext) -> str:
        seen.append(args)
        return "ok"

    registry = ToolRegistry()
    registry.register("t", [Tool("x", handler, input_schema=SCHEMA)])
    oracle = jsonschema.Draft202012Validator(SCHEMA)
    expected = []
    async with Harness(registry, evaluator=NoopEvaluator(), journal=MemoryJournal()) as h:
        session = await h.create_session(principal=Principal("User", "u"))
        for value in batch:
            outcome = await session.call_tool("t__x", value)
            valid = isinstance(value, dict) and oracle.is_valid(value)
            assert outcome.ok == valid, (value, outcome.text)
            if valid:
                expected.append(value)
    assert seen == expected
    for args in seen:
        oracle.validate(args)


# A schema that accepts any object: only the shape check stands between these values and
# the handler.
ANY_OBJECT = {"type": "object"}


class Color(enum.IntEnum):
    RED = 1


class Text(str):
    pass


def _deep(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = {"d": value}
    return value


# Each is not JSON (or not plain JSON) and must never reach a handler.
NOT_JSON: dict[str, Any] = {
    "nan": math.nan,
    "inf": math.inf,
    "-inf": -math.inf,
    "tuple": (1, 2),
    "set": {1, 2},
    "frozenset": frozenset({1}),
    "bytes": b"raw",
    "bytearray": bytearray(b"raw"),
    "int key": {1: "a"},
    "tuple key": {(1, 2): "a"},
    "200 deep": _deep(200),
    "object": object(),
    "int enum": Color.RED,
    "str subclass": Text("a"),
    "dict subclass": OrderedDict(a=1),
    "huge int": 10**5000,
}


@settings(max_examples=max(20, settings().max_examples))
@given(
    bad=st.sampled_from(sorted(NOT_JSON)),
    padding=st.sampled_from([0, 10, 1_000, 70_000, 140_000, 300_000]),
    where=st.sampled_from(["before", "after", "inside"]),
)
async def test_r6_padding_never_hides_a_non_json_value(bad: str, padding: int, where: str) -> None:
    seen: list[Any] = []

    async def handler(args: dict[str, Any], ctx: CallContext) -> str:
        seen.append(args)
        return "ok"

    registry = ToolRegistry()
    registry.register("t", [Tool("x", handler, input_schema=ANY_OBJECT)])
    pad = [0] * padding  # small ints: a couple of bytes each once serialized
    value: dict[str, Any]
    if where == "inside":
        value = {"pad": [*pad[: padding // 2], NOT_JSON[bad], *pad[padding // 2 :]]}
    elif where == "before":
        value = {"a": pad, "b": NOT_JSON[bad]}
    else:
        value = {"a": NOT_JSON[bad], "b": pad}
    async with Harness(registry, evaluator=NoopEvaluator(), journal=MemoryJournal()) as h:
        session = await h.create_session(principal=Principal("User", "u"))
        outcome = await session.call_tool("t__x", value)
    assert seen == []
    assert outcome.status == "invalid", outcome
    assert "invalid arguments" in outcome.text


@pytest.mark.parametrize("padding", [0, 1, 1_000, 100_000, 300_000])
async def test_r6_plain_json_up_to_the_limit_still_passes(padding: int) -> None:
    """The check refuses what is not JSON or over the limit, nothing else."""
    seen: list[Any] = []

    async def handler(args: dict[str, Any], ctx: CallContext) -> str:
        seen.append(args)
        return "ok"

    registry = ToolRegistry()
    registry.register("t", [Tool("x", handler, input_schema=ANY_OBJECT)])
    value = {"pad": [0] * padding, "deep": _deep(60), "s": "é\n" * 10, "f": 1.5, "b": True}
    size = len(json.dumps(value, ensure_ascii=False).encode())
    async with Harness(registry, evaluator=NoopEvaluator(), journal=MemoryJournal()) as h:
        session = await h.create_session(principal=Principal("User", "u"))
        outcome = await session.call_tool("t__x", value)
    assert outcome.ok == (size <= 1 << 20), (size, outcome.text)
    assert seen == ([value] if outcome.ok else [])


@pytest.mark.parametrize(
    "value",
    [
        {"pad": [0] * 20_000_000},
        {"pad": [[0] * 1000 for _ in range(20_000)]},
        {"pad": ["x" * 1000] * 20_000},
        {f"k{n}": n for n in range(2_000_000)},
    ],
    ids=["ints", "lists", "strings", "keys"],
)
async def test_r6_a_value_over_the_limit_is_refused_quickly(value: dict[str, Any]) -> None:
    seen: list[Any] = []

    async def handler(args: dict[str, Any], ctx: CallContext) -> str:
        seen.append(args)
        return "ok"

    registry = ToolRegistry()
    registry.register("t", [Tool("x", handler, input_schema=ANY_OBJECT)])
    async with Harness(registry, evaluator=NoopEvaluator(), journal=MemoryJournal()) as h:
        session = await h.create_session(principal=Principal("User", "u"))
        assert (await session.call_tool("t__x", {"warm": "up"})).ok  # first-call costs
        seen.clear()
        # CPU time, not wall time: other processes on a loaded machine do not count.
        started = time.process_time()
        outcome = await session.call_tool("t__x", value)
        elapsed = time.process_time() - started
    assert outcome.status == "invalid" and "the limit is 1048576" in outcome.text, outcome.text
    assert seen == []
    # Bounded by the limit, not by the value (a walk of the whole value took 1.0-1.5 s).
    assert elapsed < 1.0, elapsed


plain_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(), children),
    max_leaves=30,
)


@given(value=st.dictionaries(st.text(max_size=5), plain_json, max_size=4), slack=st.integers(-3, 3))
def test_r6_the_size_limit_is_exact(value: dict[str, Any], slack: int) -> None:
    """Plain JSON passes exactly when its serialized size is within the limit: the bounds
    the check keeps never refuse what fits, nor pass what does not."""
    size = len(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    limit = max(size + slack, 0)
    problem = check_shape(value, limit, 64)
    assert (problem is None) == (size <= limit), (size, limit, problem)
