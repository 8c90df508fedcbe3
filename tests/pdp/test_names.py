"""A resource type or an action name that is not a tool name (``GET``, ``/todos``) is spelled
as one reversibly (``clearance.pdp.tool_part``), so that ``clearance pdp`` can decide the
AuthZEN API gateway scenario's requests with declared tools."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clearance.pdp import request_part, tool_part

TOOL_NAME = re.compile(r"[a-z0-9_-]*")


@given(st.text())
def test_any_name_is_spelled_as_a_tool_name_and_read_back(name: str) -> None:
    spelled = tool_part(name)
    assert TOOL_NAME.fullmatch(spelled)
    assert request_part(spelled) == name


@given(st.text(), st.text())
def test_two_names_never_share_a_spelling(a: str, b: str) -> None:
    assert (tool_part(a) == tool_part(b)) == (a == b)


def test_the_spellings_the_docs_give() -> None:
    assert tool_part("GET") == "-g-e-t"
    assert tool_part("DELETE") == "-d-e-l-e-t-e"
    assert tool_part("/") == "-_2f_"
    assert tool_part("a-b") == "a--b"
    # What is a tool name already, without a dash, stays as it is (the Todo scenario).
    assert tool_part("can_update_todo") == "can_update_todo"


@pytest.mark.parametrize("broken", ["-", "-1", "-_", "-_zz_", "-_2f", "A", "a.b", "-_110000_"])
def test_what_tool_part_never_writes_is_refused(broken: str) -> None:
    with pytest.raises(ValueError):
        request_part(broken)
