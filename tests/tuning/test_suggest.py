"""Suggested policies allow every call they came from and nothing outside their scope."""

from __future__ import annotations

import json
from functools import cache
from typing import Any, Literal

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from clearance import Harness, MemoryJournal, Principal, Tool, ToolRegistry
from clearance._text import printable
from clearance.tuning import (
    ArgumentConstraint,
    CorpusCall,
    CorpusError,
    SuggestionSet,
    allowed_calls,
    is_allowed_record,
    parse_corpus_line,
    suggest,
)

Format = Literal["cedar", "local"]


def _obj(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def _noop(arguments: dict[str, Any], ctx: Any) -> str:
    return ""


def registry() -> ToolRegistry:
    r = ToolRegistry()
    s = {"type": "string"}
    r.register(
        "files",
        [
            Tool(
                "read_file",
                _noop,
                input_schema=_obj({"path": s, "limit": {"type": "integer"}}, ["path"]),
                read_only=True,
            )
        ],
    )
    r.register(
        "web", [Tool("fetch", _noop, input_schema=_obj({"url": s}, ["url"]), read_only=True)]
    )
    r.register(
        "bank",
        [
            Tool(
                "pay",
                _noop,
                input_schema=_obj(
                    {"recipient": s, "amount": {"type": "number"}}, ["recipient", "amount"]
                ),
            )
        ],
    )
    r.register(
        "chat",
        [
            Tool(
                "send",
                _noop,
                input_schema=_obj({"to": {"type": "array", "items": s}, "text": s}, ["to", "text"]),
            )
        ],
    )
    return r


def _call(n: int, principal: str, tool: str, arguments: dict[str, Any]) -> CorpusCall:
    text = json.dumps(
        {"principal": principal, "tool": tool, "arguments": arguments, "expected": "allow"}
    )
    call = parse_corpus_line(text, n)
    assert call is not None
    return call


ALICE, BOB = 'User::"alice"', 'User::"bob"'
SOURCE = [
    _call(1, ALICE, "files.read_file", {"path": "src/app/main.py"}),
    _call(2, ALICE, "files.read_file", {"path": "src/lib/util.py", "limit": 10}),
    _call(3, ALICE, "files.read_file", {"path": "src/lib/x.py"}),
    _call(4, ALICE, "files.read_file", {"path": "README.md"}),
    _call(5, ALICE, "web.fetch", {"url": "https://api.example.com/v1/items"}),
    _call(6, ALICE, "web.fetch", {"url": "https://api.example.com/v1/users?id=3"}),
    _call(7, ALICE, "web.fetch", {"url": "www.docs.org"}),
    _call(8, BOB, "bank.pay", {"recipient": "DE89", "amount": 12.5}),
    _call(9, BOB, "bank.pay", {"recipient": "GB29", "amount": 40}),
    _call(10, BOB, "chat.send", {"to": ["carol", "dave"], "text": "hello " * 50}),
    _call(11, BOB, "chat.send", {"to": ["carol"], "text": "lunch?"}),
]


@cache
def suggestions(fmt: Format) -> SuggestionSet:
    return suggest(SOURCE, registry(), format=fmt)


@cache
def decider(fmt: Format) -> Harness:
    return Harness(registry(), evaluator=suggestions(fmt).evaluator(fmt), journal=MemoryJournal())


def decide(fmt: Format, principal: str, tool: str, arguments: dict[str, Any]) -> str:
    async def run() -> str:
        d = await decider(fmt).decide(
            principal=Principal.parse(principal), tool=tool, arguments=arguments
        )
        return d.outcome

    return anyio.run(run)


def test_patterns_are_the_narrowest_useful() -> None:
    by_tool: dict[str, list[Any]] = {}
    for s in suggestions("cedar").suggestions:
        by_tool.setdefault(s.tool, []).append(dict(s.constraints))
    paths = {c["path"] for c in by_tool["files.read_file"]}
    assert ArgumentConstraint("prefix", "src") in paths
    assert ArgumentConstraint("exact", "README.md") in paths
    urls = {c["url"] for c in by_tool["web.fetch"]}
    assert urls == {
        ArgumentConstraint("host", "https://api.example.com"),
        ArgumentConstraint("host", "www.docs.org"),
    }
    recipients = {c["recipient"] for c in by_tool["bank.pay"]}
    assert recipients == {ArgumentConstraint("exact", "DE89"), ArgumentConstraint("exact", "GB29")}
    sends = by_tool["chat.send"]
    assert all(c["to"] == ArgumentConstraint("subset", ("carol", "dave")) for c in sends)
    assert all("text" not in c or c["text"].kind == "exact" for c in sends)


@pytest.mark.parametrize("fmt", ["cedar", "local"])
def test_suggestions_allow_every_call_they_came_from(fmt: Format) -> None:
    covered = [name for s in suggestions(fmt).suggestions for name in s.calls]
    assert sorted(covered) == sorted(c.name for c in SOURCE)
    for call in SOURCE:
        assert call.arguments is not None
        assert suggestions(fmt).allows(str(call.principal), call.tool, call.arguments)
        assert decide(fmt, str(call.principal), call.tool, call.arguments) == "allow", call


NEAR_MISSES: list[tuple[str, str, dict[str, Any]]] = [
    (BOB, "files.read_file", {"path": "src/app/main.py"}),  # another principal
    (ALICE, "bank.pay", {"recipient": "DE89", "amount": 12.5}),
    (ALICE, "files.read_file", {"path": "secrets/key.pem"}),
    (ALICE, "files.read_file", {"path": "src/../etc/passwd"}),
    (ALICE, "files.read_file", {"path": "srcx/a.py"}),
    (ALICE, "files.read_file", {"path": "README.md.bak"}),
    (ALICE, "files.read_file", {"path": "src/lib/util.py", "limit": 11}),  # cedar only
    (ALICE, "web.fetch", {"url": "https://api.example.com.evil.io/x"}),
    (ALICE, "web.fetch", {"url": "https://evil.io/https://api.example.com/"}),
    (ALICE, "web.fetch", {"url": "http://api.example.com/v1/items"}),
    (ALICE, "web.fetch", {"url": "www.docs.org.evil.io"}),
    (BOB, "bank.pay", {"recipient": "US13", "amount": 12.5}),
    (BOB, "bank.pay", {"recipient": "DE89", "amount": 12.6}),
    (BOB, "chat.send", {"to": ["mallory"], "text": "lunch?"}),  # cedar only
    (BOB, "chat.send", {"to": ["carol", "mallory"], "text": "lunch?"}),  # cedar only
]
CEDAR_ONLY = {6, 13, 14}
"""Local rules cannot require an argument to be absent nor constrain a set of values: the
suggestions for ``format="local"`` leave those free (and say so in their notes)."""


@pytest.mark.parametrize("fmt", ["cedar", "local"])
@pytest.mark.parametrize("index", range(len(NEAR_MISSES)))
def test_near_misses_are_outside_the_scope_and_denied(fmt: Format, index: int) -> None:
    principal, tool, arguments = NEAR_MISSES[index]
    if fmt == "local" and index in CEDAR_ONLY:
        assert suggestions(fmt).allows(principal, tool, arguments)
        assert any("left free" in n for s in suggestions(fmt).suggestions for n in s.notes)
        return
    assert not suggestions(fmt).allows(principal, tool, arguments)
    assert decide(fmt, principal, tool, arguments) != "allow"


def _mutate(value: Any) -> st.SearchStrategy[Any]:
    if isinstance(value, str):
        return st.one_of(
            st.just(value),
            st.sampled_from(["", "x", "..", "/", "src", "https://", "www.", "?id=1", "/../"]).map(
                lambda extra: value + extra
            ),
            st.sampled_from(["", "x", "../", "evil/", "https://evil.io/"]).map(lambda p: p + value),
            st.text(alphabet="abc/.:", max_size=12),
        )
    if isinstance(value, list):
        return st.lists(st.sampled_from(["carol", "dave", "mallory", ""]), max_size=3)
    if isinstance(value, int | float):
        return st.sampled_from([value, value + 1, 0, -1, 12.5, 40, 1e9])
    return st.just(value)


@st.composite
def near_calls(draw: st.DrawFn) -> tuple[str, str, dict[str, Any]]:
    source = draw(st.sampled_from(SOURCE))
    principal = draw(st.sampled_from([str(source.principal), ALICE, BOB]))
    tool = draw(st.sampled_from([source.tool, "files.read_file", "web.fetch"]))
    assert source.arguments is not None
    arguments = {k: draw(_mutate(v)) for k, v in source.arguments.items()}
    return principal, tool, arguments


@pytest.mark.parametrize("fmt", ["cedar", "local"])
@given(call=near_calls())
def test_rendered_policies_allow_nothing_outside_the_scope(fmt: Format, call: Any) -> None:
    principal, tool, arguments = call
    outcome = decide(fmt, principal, tool, arguments)
    if outcome == "allow":
        scope = suggestions(fmt).allows(principal, tool, arguments)
        if fmt == "local" and not scope:
            # Local globs refuse '..' only as a path segment; Cedar (and the scope) refuse it
            # anywhere in a prefix match. Nothing else may differ.
            assert any(".." in str(v) for v in arguments.values())
        else:
            assert scope, (principal, tool, arguments)


def test_which_records_were_allowed() -> None:
    assert is_allowed_record({"decision": "allow", "outcome": "ok"})
    assert is_allowed_record({"decision": "ask", "outcome": "ok"})
    assert not is_allowed_record({"decision": "ask", "outcome": "denied"})
    assert not is_allowed_record({"decision": "deny", "outcome": "denied", "expected": "allow"})
    assert is_allowed_record({"expected": "allow"})
    assert not is_allowed_record({"expected": "ask"})
    lines = [
        json.dumps(
            {
                "principal": ALICE,
                "tool": "web.fetch",
                "arguments": {"url": "x"},
                "expected": "allow",
            }
        ),
        json.dumps(
            {"principal": ALICE, "tool": "web.fetch", "arguments": None, "decision": "allow"}
        ),
        json.dumps(
            {"principal": ALICE, "tool": "web.fetch", "arguments": {"url": "y"}, "expected": "deny"}
        ),
        "",
    ]
    calls, left_out = allowed_calls(lines)
    assert [c.line for c in calls] == [1]
    assert left_out == 2


def test_rendered_text_lists_the_calls_each_covers() -> None:
    text = suggestions("cedar").to_cedar()
    assert '@id("suggested-1")' in text
    assert "// 2 call(s): line 1, line 3" in text or "// 1 call(s): line 1" in text
    assert 'like "src/*"' in text and '!(context.input.path like "*..*")' in text
    rules = suggestions("local").to_local()
    assert "files.read_file(path=src/**)" in rules[ALICE]
    assert "web.fetch(url=https://api.example.com/**)" in rules[ALICE]
    assert "bank.pay(recipient=DE89, amount=12.5)" in rules[BOB]


@pytest.mark.parametrize("fmt", ["cedar", "local"])
def test_a_dotted_directory_never_becomes_a_prefix(fmt: Format) -> None:
    calls = [
        _call(20, ALICE, "files.read_file", {"path": "src/v1..2/a.txt"}),
        _call(21, ALICE, "files.read_file", {"path": "src/v1..2/b.txt"}),
    ]
    found = suggest(calls, registry(), format=fmt)
    for call in calls:
        assert found.allows(ALICE, call.tool, call.arguments or {})
    assert not found.allows(ALICE, "files.read_file", {"path": "src/v1..2/../../../etc/passwd"})
    evaluator_harness = Harness(registry(), evaluator=found.evaluator(fmt), journal=MemoryJournal())

    async def outcome(path: str) -> str:
        decided = await evaluator_harness.decide(
            principal=Principal.parse(ALICE), tool="files.read_file", arguments={"path": path}
        )
        return decided.outcome

    assert anyio.run(outcome, "src/v1..2/a.txt") == "allow"
    assert anyio.run(outcome, "src/v1..2/../../../etc/passwd") == "deny"


# --- nothing untrusted reaches the generated text unescaped (issue 19) ----------------------

INJECTION = 'x"; permit (principal, action, resource);\n// */ \u202e\x1b[2J\r\u2028'
"""Breaks out of a comment (line ends of every kind), of a string literal and of a
review (bidi override, terminal escape)."""


def _hostile_calls() -> list[CorpusCall]:
    lines = [
        {"principal": ALICE, "tool": "files.read_file", "arguments": {"path": "README.md"}},
        {"principal": ALICE, "tool": "web.fetch", "arguments": {"url": INJECTION}},
        {"principal": ALICE, "tool": "files.read_file", "arguments": {"path": "a/" + INJECTION}},
        {"principal": ALICE, "tool": "files.read_file", "arguments": {"path": "a/b\\c"}},
        {"principal": BOB, "tool": "bank.pay", "arguments": {"recipient": INJECTION, "amount": 1}},
        {
            "principal": {"type": "User", "id": INJECTION},
            "tool": "web.fetch",
            "arguments": {"url": "https://api.example.com/x"},
        },
        {
            "principal": {"type": 'User::"y", action, resource);\npermit (principal', "id": "z"},
            "tool": "web.fetch",
            "arguments": {"url": "https://api.example.com/y"},
        },
        {"principal": ALICE, "tool": "*", "arguments": {"url": "x"}},
        {"principal": ALICE, "tool": 'web.fetch", resource); permit (principal', "arguments": {}},
    ]
    calls = []
    for n, raw in enumerate(lines, 1):
        text = json.dumps({**raw, "expected": "allow", "id": f"c{n}\n{INJECTION}\n"})
        call = parse_corpus_line(text, n)
        assert call is not None
        calls.append(call)
    return calls


def _unscoped(text: str) -> bool:
    from clearance.policy.cedar import CedarEngine

    return any(p.principal.op == "any" or p.action.op == "any" for p in CedarEngine(text).policies)


def test_hostile_call_ids_values_and_principals_stay_inside_their_policies() -> None:
    from clearance.policy.cedar import CedarEngine

    found = suggest(_hostile_calls(), registry(), format="cedar")
    text = found.to_cedar()
    engine = CedarEngine(text)
    assert len(engine.policies) == len(found.suggestions)
    assert not _unscoped(text)
    for info, s in zip(engine.policies, found.suggestions, strict=True):
        assert info.effect == "permit"
        assert info.action.op == "==" and info.action.entities[0].id == s.tool
        assert info.principal.op == "==" and str(info.principal.entities[0]) == json_entity(s)
    # Nothing raw that could act on a terminal or reorder what a reviewer reads.
    assert not any(ch in text for ch in "\x1b\r\u202e\u2028")
    # The suggestions still allow exactly the calls they came from, through Cedar.
    harness = Harness(registry(), evaluator=found.evaluator("cedar"), journal=MemoryJournal())
    covered = {name for s in found.suggestions for name in s.calls}

    async def outcome(call: CorpusCall) -> str:
        decided = await harness.decide(
            principal=call.principal, tool=call.tool, arguments=call.arguments or {}
        )
        return decided.outcome

    for call in _hostile_calls():
        if call.name in covered:
            assert anyio.run(outcome, call) == "allow", call
    # An unrelated principal and tool get nothing from the "injected" text.
    stranger = _call(99, 'User::"mallory"', "bank.pay", {"recipient": "x", "amount": 5})
    assert anyio.run(outcome, stranger) == "deny"
    # A principal type that is not a Cedar name, and tool names that are not tool names
    # (a glob, an injection), are left out and said to be.
    assert {line for line, _, _ in found.skipped} == {7, 8, 9}


def json_entity(s: Any) -> str:
    principal = Principal.parse(s.principal)
    return f"{principal.type}::{json.dumps(principal.id, ensure_ascii=False)}"


def test_hostile_local_rules_parse_back_to_what_was_meant() -> None:
    import tomllib

    from clearance.policy.local import parse_rule

    found = suggest(_hostile_calls(), registry(), format="local")
    text = found.to_local_toml()
    assert not any(ch in text for ch in "\x1b\r\u202e\u2028")
    blocks = [b for b in text.split("\n\n") if b.strip()]
    rules = found.to_local()
    assert len(blocks) == len(rules)
    for block, (principal, expected) in zip(blocks, rules.items(), strict=True):
        assert tomllib.loads(block) == {"allow": expected}, block
        for rule in expected:
            parsed = parse_rule("allow", rule)
            assert parsed.tool_glob in {s.tool for s in found.suggestions}
        assert block.splitlines()[0] == "# " + printable(principal).replace("*/", "*\\/")
    assert "*" not in {parse_rule("allow", r).tool_glob for rs in rules.values() for r in rs}


@pytest.mark.parametrize("fmt", ["cedar", "local"])
def test_a_newline_in_a_call_id_cannot_add_a_policy(fmt: Format) -> None:
    # The attack of issue 19: the comment listing the calls ended at the newline, and the
    # rest of the id was a policy of its own, permitting everything.
    injected = "c1\npermit (principal, action, resource);\n//"
    local_injected = 'c1\nallow = ["*"]\n#'
    call_id = injected if fmt == "cedar" else local_injected
    line = json.dumps(
        {
            # The id holds a quote and a newline, escaped as Cedar writes them (an
            # unescaped one is refused: see below).
            "principal": "User::" + json.dumps('alice"\nallow = ["*"]'),
            "tool": "files.read_file",
            "arguments": {"path": "README.md"},
            "expected": "allow",
            "id": call_id,
        }
    )
    call = parse_corpus_line(line, 1)
    assert call is not None
    with pytest.raises(CorpusError, match="principal must look like"):
        parse_corpus_line(
            json.dumps({**json.loads(line), "principal": 'User::"alice"\nallow = ["*"]'}), 1
        )
    found = suggest([call], registry(), format=fmt)
    if fmt == "cedar":
        assert not _unscoped(found.to_cedar())
    else:
        import tomllib

        assert tomllib.loads(found.to_local_toml()) == {
            "allow": ["files.read_file(path=README.md)"]
        }
    harness = Harness(registry(), evaluator=found.evaluator(fmt), journal=MemoryJournal())

    async def outcome(principal: Principal, tool: str, arguments: dict[str, Any]) -> str:
        decided = await harness.decide(principal=principal, tool=tool, arguments=arguments)
        return decided.outcome

    assert anyio.run(outcome, call.principal, "files.read_file", {"path": "README.md"}) == "allow"
    mallory = Principal("User", "mallory")
    assert anyio.run(outcome, mallory, "bank.pay", {"recipient": "x", "amount": 1}) == "deny"
    assert anyio.run(outcome, call.principal, "web.fetch", {"url": "https://x.io/"}) == "deny"
