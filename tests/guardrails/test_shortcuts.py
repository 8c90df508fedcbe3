"""The guardrails' shortcuts (issue 18) give the answers of the long ways they skip.

A detector's ``requires`` (literals every match contains) skips texts without them: the
scanner must find exactly what it finds without them.

``Guardrail.selected`` parses its pointers once and reads a one-key pointer with a dict
lookup: it must yield what :func:`clearance._pointer.find` yields, pointer by pointer,
also after ``fields`` is replaced. The lexical path checks find control characters with a
regular expression and skip encoding an ASCII path: they must refuse exactly what the
character-by-character check and the encoding refused (PathScope, rule R9, relies on
them).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from clearance import _pointer
from clearance.facts.paths import MAX_PATH_BYTES, lexical_problem
from clearance.guardrails import ArgumentGuardrail, GuardrailOutcome, SecretScanner
from clearance.guardrails._detectors import ScanPlan

keys = st.sampled_from(["path", "a/b", "a~b", "~1", "0", "1", "*", "", "files", "x"])
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=12,
)
pointers = st.lists(
    st.sampled_from(["path", "a~1b", "a~0b", "~01", "0", "1", "*", "", "files", "x", "~2"]),
    max_size=3,
).map(lambda tokens: "".join("/" + t for t in tokens))


def allow(value: Any, ctx: Any) -> GuardrailOutcome:
    return GuardrailOutcome.allow()


@given(json_values, st.lists(pointers, max_size=3), st.lists(pointers, max_size=3))
def test_selected_yields_what_find_yields(value: Any, first: list[str], then: list[str]) -> None:
    guard = ArgumentGuardrail(allow, fields=first)
    expected = [pair for pointer in first for pair in _pointer.find(value, pointer)]
    assert list(guard.selected(value)) == expected
    assert list(guard.selected(value)) == expected  # parsed once, read again
    guard.fields = tuple(then)
    expected = [pair for pointer in then for pair in _pointer.find(value, pointer)]
    assert list(guard.selected(value)) == expected


def test_selected_without_fields_is_the_whole_value() -> None:
    value = {"path": "a"}
    assert list(ArgumentGuardrail(allow).selected(value)) == [("", value)]


def reference_lexical_problem(path: str) -> str | None:
    """The check as it was before the shortcuts."""
    if not path:
        return "the path is empty"
    if "\x00" in path:
        return "it contains a NUL byte"
    if any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in path):
        return "it contains a control character"
    if path.startswith("~"):
        return "a leading '~' is not allowed (it may be expanded to a home directory)"
    try:
        encoded = os.fsencode(path)
    except UnicodeEncodeError:
        return "it cannot be encoded as a file name"
    if len(encoded) > MAX_PATH_BYTES:
        return f"it is longer than {MAX_PATH_BYTES} bytes"
    return None


texts = st.text(
    alphabet=st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF), max_size=20
)


@given(
    texts
    | st.builds(
        lambda c, n: c * n, st.sampled_from(["a", "é", "\udc80", "/"]), st.integers(4000, 4200)
    )
)
def test_lexical_problem_refuses_what_it_refused(path: str) -> None:
    assert lexical_problem(path) == reference_lexical_problem(path)


def test_lexical_problem_boundaries() -> None:
    assert lexical_problem("a" * MAX_PATH_BYTES) is None
    assert (
        lexical_problem("a" * (MAX_PATH_BYTES + 1)) == f"it is longer than {MAX_PATH_BYTES} bytes"
    )
    assert lexical_problem("é" * 2049) == f"it is longer than {MAX_PATH_BYTES} bytes"
    assert lexical_problem("a\ud800") == "it cannot be encoded as a file name"
    for c in ("\x01", "\x1f", "\x7f", "\x80", "\x9f"):
        assert lexical_problem(f"a{c}b") == "it contains a control character"
    assert lexical_problem("a\xa0b") is None


url_pieces = st.lists(
    st.sampled_from(
        [
            "https://",
            "://",
            "user:",
            "pa55w0rd-x9",
            "@",
            "host.example.com",
            "/path",
            " ",
            "https://hooks.slack.com/",
            "HTTPS://HOOKS.SLACK.COM/",
            "services/",
            "T0000000/B0000000/XXXXXXXXXXXXXXXXXXXXXXXX",
            "é",
        ]
    ),
    max_size=12,
).map("".join)


@given(url_pieces)
def test_required_literals_lose_no_finding(text: str) -> None:
    """A detector's ``requires`` skips texts that cannot hold a match, nothing else."""
    scanner = SecretScanner.for_arguments()
    plan = scanner._plan
    without = ScanPlan(
        [dataclasses.replace(d, requires=()) for d in plan.detectors],
        gate=plan.gate,
        min_length=plan.min_length,
    )
    assert plan.spans(text) == without.spans(text)


def test_required_literals_are_in_every_match() -> None:
    scanner = SecretScanner.for_arguments()
    found = scanner.scan(
        "see https://bob:pa55w0rd-x9@host.example.com/x and "
        "https://hooks.slack.com/services/T0000000/B0000000/XXXXXXXXXXXXXXXXXXXXXXXX"
    )
    assert {f.kind for f in found} == {"url_password", "slack_webhook"}
    assert scanner.scan("see https://bob:pa55w0rd-x9 host.example.com/x") == []
