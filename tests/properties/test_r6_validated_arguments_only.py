"""R6: a handler never sees arguments that fail the tool's schema, nor arguments other
than those authorized."""

from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from clearance import CallContext, Harness, MemoryJournal, Principal, Tool, ToolRegistry
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
