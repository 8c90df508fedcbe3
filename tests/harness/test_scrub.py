"""Scrubbing withheld values out of records (R8): the encodings a tool may echo them in."""

from __future__ import annotations

import html
import json
import urllib.parse

from clearance.harness.scrub import encoded_forms, scrub_json, scrub_text

SECRET = 'sk-"q\\u/é<&>\n\x01end'


def go_json(value: str) -> str:
    text = json.dumps(value, ensure_ascii=False)
    for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, escape)
    return text


def test_every_recognized_encoding_is_scrubbed() -> None:
    once = json.dumps(SECRET)
    echoes = [
        SECRET,
        once,
        json.dumps(SECRET, ensure_ascii=False),
        json.dumps({"echo": once}),  # a JSON text inside a JSON string
        json.dumps({"echo": json.dumps(SECRET, ensure_ascii=False)}, ensure_ascii=False),
        once.replace("/", "\\/"),  # PHP
        once.replace("\\u00e9", "\\u00E9").replace("\\u0001", "\\u0001"),  # upper-case hex
        go_json(SECRET),
        repr({"token": SECRET}),
        urllib.parse.quote(SECRET, safe=""),
        urllib.parse.quote_plus(SECRET),
        html.escape(SECRET),
    ]
    for echo in echoes:
        scrubbed = scrub_text(f"before {echo} after", {SECRET})
        assert scrubbed.startswith("before ") and scrubbed.endswith(" after"), echo
        assert "[REDACTED]" in scrubbed, echo
        for form in encoded_forms(SECRET):
            assert form not in scrubbed, (echo, form)


def test_json_values_are_scrubbed_everywhere_and_copied() -> None:
    deep: list[object] = [SECRET]
    for _ in range(10_000):  # deeper than the Python stack allows for a recursive walk
        deep = [deep]
    value = {
        "id": SECRET,
        "text": f"got {SECRET}",
        SECRET: [SECRET, {"pin": 987654321123, "other": 5, "flag": True}],
        "deep": deep,
    }
    out = scrub_json(value, {SECRET, "987654321123"}, keep={"id"})
    assert out["id"] == SECRET  # kept as it is, on request
    assert out["text"] == "got [REDACTED]"
    assert out["[REDACTED]"] == ["[REDACTED]", {"pin": "[REDACTED]", "other": 5, "flag": True}]
    assert SECRET not in json.dumps({k: v for k, v in out.items() if k not in ("id", "deep")})
    node = out["deep"]
    for _ in range(10_000):
        node = node[0]
    assert node == ["[REDACTED]"]
    assert value["text"] == f"got {SECRET}"  # the original is untouched


def test_two_keys_scrubbed_to_one_are_both_kept() -> None:
    out = scrub_json({"a-sk1": 1, "a-sk2": 2}, {"sk1", "sk2"})
    assert sorted(out.values()) == [1, 2]


def test_nothing_withheld_is_the_identity() -> None:
    value = {"a": ["b"]}
    assert scrub_json(value, set()) is value
    assert scrub_text("text", set()) == "text"
