"""The direct call into Cedar reads the same answers as the public one (issue 18).

The decision's answer is read up to its diagnostics (the metrics after them are skipped)
and the context is encoded by a JSON encoder built once; both stand in for
``json.loads`` / ``json.dumps`` and must agree with them on every input.
"""

from __future__ import annotations

import json
from typing import Any

import cedarpy
from cedarpy import _internal
from hypothesis import given
from hypothesis import strategies as st

from clearance.policy.cedar._call import _context_json, _read_answer, _read_whole

POLICIES = """
@id("allow-src") permit(principal, action, resource) when { context.path like "src/*" };
@id("no-env") forbid(principal, action, resource) when { context.path like "*.env" };
@id("boom") forbid(principal, action, resource) when { context.n + 9223372036854775807 < 0 };
"""


def answer(context: dict[str, Any]) -> str:
    request = {
        "principal": {"type": "User", "id": "alice"},
        "action": {"type": "Action", "id": "read"},
        "resource": {"type": "Tool", "id": "t"},
        "context": json.dumps(context),
    }
    entities = cedarpy.Entities.from_json_str("[]")._inner
    raw: str = _internal.is_authorized_batch(
        [request], cedarpy.PolicySet.from_str(POLICIES), entities, None, False
    )[0]
    return raw


def test_real_answers_read_as_the_whole_text() -> None:
    cases: list[dict[str, Any]] = [
        {"path": "src/a", "n": 0},  # allow
        {"path": "a.env", "n": 0},  # deny by a forbid
        {"path": "docs/a", "n": 0},  # deny, no policy
        {"path": "src/a", "n": 5},  # an overflow: the erring policy is skipped
        {"path": 3, "n": 0},  # type errors
    ]
    seen = set()
    for context in cases:
        raw = answer(context)
        assert _read_answer(raw) == _read_whole(raw)
        allowed, reasons, errors = _read_answer(raw)
        seen.add((allowed, bool(reasons), bool(errors)))
    # allowed; forbidden; denied with no reason; allowed with an error; denied with errors
    assert seen == {
        (True, True, False),
        (False, True, False),
        (False, False, False),
        (True, True, True),
        (False, False, True),
    }


def test_another_layout_is_read_whole() -> None:
    raw = answer({"path": "src/a", "n": 0})
    whole = json.loads(raw)
    reordered = json.dumps({"metrics": whole["metrics"], **whole})
    assert _read_answer(reordered) == _read_whole(raw)
    spaced = json.dumps(whole, indent=1)
    assert _read_answer(spaced) == _read_whole(raw)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)


@given(value=st.dictionaries(st.text(max_size=5), json_values, max_size=4))
def test_the_context_is_the_json_json_dumps_writes(value: dict[str, Any]) -> None:
    assert _context_json(value) == json.dumps(value)
