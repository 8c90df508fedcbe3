import json
import re

import pytest

from clearance import Principal
from clearance.guardrails import (
    ArgumentGuardrail,
    GuardrailContext,
    Pattern,
    ResultGuardrail,
    ResultPattern,
    ResultSizeLimit,
    SizeLimit,
)
from clearance.guardrails.limits import json_size

ARGS = GuardrailContext(
    "shell.run", "shell__run", Principal("User", "u"), "s", None, "c", "arguments"
)
RESULT = GuardrailContext(
    "shell.run", "shell__run", Principal("User", "u"), "s", None, "c", "result"
)


@pytest.mark.parametrize(
    "value", ["", "abc", "é€😀", 'quote " and \\ back\nslash\x01', 12, 1.5, None, True,
              {"a": [1, "x", {"b": None}]}, [], "\ud800"],
)  # fmt: skip
def test_json_size_is_the_compact_utf8_serialization(value: object) -> None:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    assert json_size(value) == len(text.encode("utf-8", "surrogatepass"))


def test_size_limit_on_the_whole_arguments() -> None:
    limit = SizeLimit(20)
    assert limit.check({"a": "x" * 10}, ARGS).action == "allow"  # {"a":"xxxxxxxxxx"} = 18
    outcome = limit.check({"a": "x" * 20}, ARGS)
    assert outcome.action == "block"
    assert outcome.message == (
        "SizeLimit: the size of the arguments is 28 bytes as JSON; the limit is 20"
    )


def test_size_limit_per_field_counts_utf8_bytes() -> None:
    limit = SizeLimit(10, fields=["/content", "/files/*"])
    assert limit.check({"content": "12345678", "other": "x" * 100}, ARGS).action == "allow"
    outcome = limit.check({"content": "ééééé"}, ARGS)  # 5 characters, 12 bytes with quotes
    assert outcome.action == "block"
    assert outcome.message is not None and "the value at /content is 12 bytes" in outcome.message
    outcome = limit.check({"files": ["ok", "far too long"]}, ARGS)
    assert outcome.message is not None and "/files/1" in outcome.message


def test_size_limit_for_results() -> None:
    limit = SizeLimit.for_results(100)
    assert isinstance(limit, ResultSizeLimit) and isinstance(limit, ResultGuardrail)
    small = {
        "content": [{"type": "text", "text": "hi"}],
        "structured_content": None,
        "is_error": False,
    }
    assert limit.check(small, RESULT).action == "allow"
    big = {**small, "content": [{"type": "text", "text": "x" * 200}]}
    outcome = limit.check(big, RESULT)
    assert outcome.action == "block" and outcome.message is not None
    assert "the size of the result is" in outcome.message
    with pytest.raises(ValueError):
        SizeLimit(-1)
    with pytest.raises(ValueError):
        SizeLimit(True)


def test_pattern_deny_searches_anywhere() -> None:
    guard = Pattern(deny=[r"rm\s+-rf", re.compile(r"[;&|`$]")], fields=["/command"])
    assert guard.check({"command": "ls -la"}, ARGS).action == "allow"
    outcome = guard.check({"command": "ls; rm -rf /"}, ARGS)
    assert outcome.action == "block"
    assert outcome.message is not None
    assert "/command" in outcome.message and "rm\\\\s+-rf" in outcome.message
    assert "ls;" not in outcome.message  # names the pattern, not the value


def test_pattern_allow_must_match_the_whole_value() -> None:
    guard = Pattern(allow=[r"git (status|diff|log)( .*)?", r"pytest( .*)?"], fields=["/command"])
    assert guard.check({"command": "git status"}, ARGS).action == "allow"
    assert guard.check({"command": "pytest -q tests"}, ARGS).action == "allow"
    outcome = guard.check({"command": "rm -rf / ; git status"}, ARGS)
    assert outcome.action == "block"
    assert outcome.message is not None and "none of the allow patterns" in outcome.message


def test_pattern_applies_to_every_leaf_and_json_text_of_scalars() -> None:
    guard = Pattern(deny=[r"^13$"])
    assert guard.check({"n": 12, "tags": ["a", "b"]}, ARGS).action == "allow"
    outcome = guard.check({"n": 12, "deep": {"list": [1, 13]}}, ARGS)
    assert outcome.action == "block"
    assert outcome.message is not None and "/deep/list/1" in outcome.message
    assert Pattern(allow=["x"], fields=["/missing"]).check({"a": "b"}, ARGS).action == "allow"


def test_pattern_ask_and_results() -> None:
    asked = Pattern(deny=["sudo"], action="ask").check({"command": "sudo ls"}, ARGS)
    assert asked.action == "ask"
    guard = Pattern.for_results(deny=[r"(?i)internal use only"])
    assert isinstance(guard, ResultPattern) and isinstance(guard, ResultGuardrail)
    result = {"content": [{"type": "text", "text": "INTERNAL USE ONLY"}], "is_error": False}
    assert guard.check(result, RESULT).action == "block"
    with pytest.raises(ValueError, match="cannot ask"):
        Pattern.for_results(deny=["x"], action="ask")


def test_pattern_options_are_validated() -> None:
    with pytest.raises(ValueError, match="needs deny or allow"):
        Pattern()
    with pytest.raises(ValueError, match="list of patterns"):
        Pattern(deny="rm")
    with pytest.raises(re.error):
        Pattern(deny=["("])
    assert isinstance(Pattern(allow=[]), ArgumentGuardrail)
    # an empty allow list allows nothing
    assert Pattern(allow=[]).check({"a": "b"}, ARGS).action == "block"
