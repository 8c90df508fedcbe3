"""``clearance._limits``: values from outside, checked before they go anywhere (issue 38)."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from clearance._limits import MAX_DEPTH, MAX_LABEL, bounded_label, json_fault, storable, text_fault

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)


def _encodes(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (UnicodeEncodeError, ValueError):
        return False
    return True


@given(JSON)
def test_a_value_passes_exactly_when_it_encodes_as_utf8_json(value: Any) -> None:
    # Every value here nests less than MAX_DEPTH deep (max_leaves bounds it).
    assert (json_fault(value) is None) == _encodes(value)


def test_depth_is_checked_without_recursion() -> None:
    value: Any = 1
    for _ in range(100_000):
        value = [value]
    assert json_fault(value) == f"at /0/0/0/{'/'.join(['0'] * 61)}: nested deeper than 64 levels"
    ok: Any = 1
    for _ in range(MAX_DEPTH):
        ok = {"k": ok}
    assert json_fault(ok) is None
    assert json_fault({"k": ok}) is not None


def test_faults_name_where_printably_and_briefly() -> None:
    assert json_fault({"a\x1b[2J": ["\ud800"]}) == (
        "at /a\\x1b[2J/0: a string holds a lone surrogate (not valid UTF-8)"
    )
    assert json_fault({"x" * 10_000: math.inf}) is not None
    assert len(json_fault({"x" * 10_000: math.inf}) or "") < 250
    assert json_fault({1: 2}) == "the value: a key is not a string"
    assert json_fault({"s": {1, 2}}) == "at /s: set is not a JSON value"
    assert json_fault({"n": "\x00"}) is None  # every JSON encoder here escapes a NUL


@given(st.text() | st.integers())
def test_a_label_is_short_and_printable(value: str | int) -> None:
    label = bounded_label(value)
    assert len(label) <= MAX_LABEL and label.isascii() and label.isprintable()
    if isinstance(value, int) and len(str(value)) <= MAX_LABEL:
        assert label == str(value)


def test_text_faults() -> None:
    assert text_fault("ok") is None and storable("ok")
    assert text_fault("a\x00") == "holds a NUL character" and not storable("a\x00")
    assert text_fault("a\x00", nul=True) is None
    assert text_fault("\udfff") == "holds a lone surrogate (it is not valid UTF-8)"
    assert not storable("\udfff") and storable("é")
    assert text_fault(3) == "is not a string but int"
