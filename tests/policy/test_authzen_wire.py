"""The AuthZEN wire format: PDP URLs, the I-JSON reader, a call as an evaluation request,
and a Decision as a verdict (every shape the specification refuses is refused)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from clearance.policy.authzen_wire import (
    MalformedAnswer,
    dumps,
    evaluation_request,
    loads,
    metadata_url,
    pdp_url,
    verdict_from_decision,
)
from clearance.policy.base import AuthzRequest
from clearance.types import Principal, SessionInfo, ToolInfo


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://pdp.example.com", "https://pdp.example.com"),
        ("https://pdp.example.com/", "https://pdp.example.com"),
        ("https://pdp.example.com/tenant1/", "https://pdp.example.com/tenant1"),
        ("http://127.0.0.1:8767", "http://127.0.0.1:8767"),
        ("http://[::1]:8767", "http://[::1]:8767"),
        ("http://localhost:8767", "http://localhost:8767"),
        ("http://127.9.9.9", "http://127.9.9.9"),
    ],
)
def test_a_pdp_url_is_https_or_loopback_http(url: str, expected: str) -> None:
    assert pdp_url(url) == expected


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://pdp.example.com", "must use https://"),
        ("http://10.0.0.1:8767", "must use https://"),
        ("http://127.0.0.1.evil.com", "must use https://"),
        ("https://user:secret@pdp.example.com", "user or password"),
        ("https://pdp.example.com/?tenant=1", "no query or fragment"),
        ("https://pdp.example.com/#x", "no query or fragment"),
        ("https://pdp.example.com?", "no query or fragment"),
        ("ftp://pdp.example.com", "must start with https://"),
        ("pdp.example.com", "must start with https://"),
        ("https://", "no host"),
        ("https://pdp.example.com:99999", "not a URL"),
        ("https://pdp.example.com/a b", "spaces or control"),
        ("https://pdp.example.com/\n", "spaces or control"),
        ("https://pdp.exämple.com", "must be ASCII"),
        ("https://pdp.example.com/é", "must be ASCII"),
        ("", "non-empty"),
    ],
)
def test_a_url_a_token_must_not_go_to_is_refused(url: str, words: str) -> None:
    with pytest.raises(ValueError) as caught:
        pdp_url(url)
    assert words in str(caught.value)


def test_the_metadata_sits_between_host_and_path() -> None:
    assert metadata_url("https://h") == "https://h/.well-known/authzen-configuration"
    assert (
        metadata_url("https://h:8443/tenant1")
        == "https://h:8443/.well-known/authzen-configuration/tenant1"
    )


# --- I-JSON ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b'{"decision": false, "decision": true}', "appears twice"),
        (b'{"context": {"a": 1, "a": 1}, "decision": true}', "appears twice"),
        (b'{"decision": NaN}', "NaN is not a JSON number"),
        (b'{"decision": Infinity}', "Infinity"),
        (b'{"decision": -Infinity}', "Infinity"),
        (b'{"decision": true, "context": {"r": "\\ud800"}}', "lone surrogate"),
        (b'{"decision": true, "\\udc00": 1}', "lone surrogate"),
        (b"\xff\xfe{}", "not UTF-8"),
        (b'{"decision": true', "not JSON"),
        (b'{"decision": true} trailing', "not JSON"),
        (b"", "not JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    ],
)
def test_loads_refuses_what_two_readers_could_read_two_ways(data: bytes, words: str) -> None:
    with pytest.raises(MalformedAnswer) as caught:
        loads(data)
    assert words in caught.value.reason


def test_loads_reads_plain_json() -> None:
    assert loads(b'{"decision": true, "context": {"x": [1, 2.5, "\\u00e9"]}}') == {
        "decision": True,
        "context": {"x": [1, 2.5, "é"]},
    }


def test_dumps_writes_sets_and_decimals_and_refuses_nan() -> None:
    assert json.loads(
        dumps({"s": frozenset({"b", "a"}), "d": Decimal("1.5"), "i": Decimal(3)})
    ) == {
        "s": ["a", "b"],
        "d": 1.5,
        "i": 3,
    }
    with pytest.raises(ValueError, match="JSON"):
        dumps({"x": float("nan")})
    with pytest.raises(ValueError, match="cannot be sent as JSON"):
        dumps({"x": object()})
    with pytest.raises(ValueError, match="surrogate"):
        dumps({"x": "\ud800"})


# --- a call as a request -------------------------------------------------------------------


def _request(**options: Any) -> AuthzRequest:
    return AuthzRequest(
        principal=options.get(
            "principal",
            Principal("User", "alice", {"team": "infra"}, [("Team", "infra")]),
        ),
        tool=ToolInfo(
            "files.write_file",
            "files",
            "write_file",
            False,
            {"destructiveHint": True},
            "mcp",
            "fs",
        ),
        arguments={"path": "src/app.py", "content": "x"},
        session=SessionInfo("s1", "t1"),
        facts=options.get("facts", {"path": {"path": "src/app.py", "segments": ["src", "app.py"]}}),
        provenance=options.get("provenance", {}),
    )


def test_a_call_maps_to_subject_action_resource_and_context() -> None:
    body = evaluation_request(_request())
    assert body == {
        "subject": {
            "type": "User",
            "id": "alice",
            "properties": {"team": "infra", "parents": [{"type": "Team", "id": "infra"}]},
        },
        "action": {"name": "files.write_file"},
        "resource": {
            "type": "tool",
            "id": "files.write_file",
            "properties": {
                "namespace": "files",
                "name": "write_file",
                "read_only": False,
                "source": "mcp",
                "server": "fs",
                "annotations": {"destructiveHint": True},
            },
        },
        "context": {
            "session": {"id": "s1", "turn": "t1"},
            "arguments": {"path": "src/app.py", "content": "x"},
            "facts": {"path": {"path": "src/app.py", "segments": ["src", "app.py"]}},
        },
    }
    assert json.loads(dumps(body)) == body


def test_arguments_and_provenance_are_sent_only_as_configured() -> None:
    record = {"sources": ["user"], "user": True, "tool": False, "made_up": False}
    request = _request(provenance={"path": record})
    without = evaluation_request(request, arguments=False)
    assert "arguments" not in without["context"] and "provenance" not in without["context"]
    with_provenance = evaluation_request(request, provenance=True)
    assert with_provenance["context"]["provenance"] == {"path": record}


def test_without_a_ledger_every_argument_is_sent_as_made_up() -> None:
    body = evaluation_request(_request(), provenance=True)
    assert body["context"]["provenance"]["path"]["made_up"] is True
    assert body["context"]["provenance"]["path"]["user"] is False


def test_a_principal_without_attributes_has_no_properties() -> None:
    body = evaluation_request(_request(principal=Principal("Agent", "bot")))
    assert body["subject"] == {"type": "Agent", "id": "bot"}


def test_an_attribute_named_parents_beside_parents_is_refused() -> None:
    principal = Principal("User", "alice", {"parents": "x"}, [("Team", "infra")])
    with pytest.raises(ValueError, match="collide"):
        evaluation_request(_request(principal=principal))


# --- a Decision as a verdict -----------------------------------------------------------------


def _verdict(value: Any, ask_field: str | None = "ask") -> Any:
    return verdict_from_decision(value, evaluator="authzen", ask_field=ask_field)


def test_true_allows_and_false_denies() -> None:
    allowed = _verdict({"decision": True, "context": {"reasons": ["p1", "p2"]}})
    assert (allowed.effect, allowed.reasons, allowed.evaluator) == (
        "allow",
        ("p1", "p2"),
        "authzen",
    )
    denied = _verdict({"decision": False, "context": {"reason": "Subject is a viewer"}})
    assert (denied.effect, denied.message) == ("deny", "Subject is a viewer")
    assert _verdict({"decision": False}).message == "denied by the PDP"
    assert _verdict({"decision": True, "context": None}).effect == "allow"
    assert _verdict({"decision": True, "unknown": [1], "context": {"x": {}}}).effect == "allow"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            {"decision": False, "context": {"ask": "Manager approval needed"}},
            "Manager approval needed",
        ),
        ({"decision": True, "context": {"ask": True, "message": "check"}}, "check"),
        ({"decision": False, "context": {"ask": {"template": "mgr"}}}, "the PDP asks"),
        ({"decision": False, "context": {"ask": ""}}, "the PDP asks"),
    ],
)
def test_the_named_field_asks_whatever_the_decision(value: Any, message: str) -> None:
    verdict = _verdict(value)
    assert verdict.effect == "ask"
    assert verdict.message is not None and verdict.message.startswith(message)


def test_the_ask_field_is_read_only_when_configured() -> None:
    assert _verdict({"decision": False, "context": {"ask": "x"}}, ask_field=None).effect == "deny"
    assert _verdict({"decision": True, "context": {"ask": "x"}}, ask_field=None).effect == "allow"
    assert _verdict({"decision": True, "context": {"ask": False}}).effect == "allow"
    assert _verdict({"decision": True, "context": {"ask": None}}).effect == "allow"


def test_an_error_in_the_context_denies_even_a_true() -> None:
    verdict = _verdict(
        {"decision": True, "context": {"error": {"status": 404, "message": "Resource not found"}}}
    )
    assert verdict.effect == "deny"
    assert verdict.errors == ("the PDP reported an error: 404 Resource not found",)
    asked = _verdict({"decision": False, "context": {"ask": "x", "error": "boom"}})
    assert asked.effect == "deny" and asked.errors == ("the PDP reported an error: boom",)


@pytest.mark.parametrize(
    "value",
    [
        {"decision": "true"},
        {"decision": 1},
        {"decision": None},
        {},
        {"context": {}},
        {"decision": True, "context": []},
        {"decision": True, "context": "ok"},
        {"decision": True, "context": {"ask": 1}},
        {"decision": True, "context": {"ask": ["x"]}},
        [],
        "true",
        True,
        None,
    ],
)
def test_anything_but_a_decision_is_malformed(value: Any) -> None:
    with pytest.raises(MalformedAnswer):
        _verdict(value)


def test_reasons_and_messages_from_the_pdp_are_bounded() -> None:
    verdict = _verdict(
        {"decision": True, "context": {"reasons": ["r" * 5000, 3, "", *["x"] * 500]}}
    )
    assert len(verdict.reasons) <= 64 and all(len(r) <= 1000 for r in verdict.reasons)
    assert all(isinstance(r, str) and r for r in verdict.reasons)
    assert len(_verdict({"decision": False, "context": {"message": "m" * 9999}}).message) == 1000
