"""The corpus's ``conversation``: what a call's session had seen before it (issue 16).

Parsing: each entry is checked and a bad one is an error naming the line and the entry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clearance.tuning import ConversationEntry, CorpusError, parse_corpus_line, read_corpus

BASE: dict[str, Any] = {
    "principal": 'User::"emma"',
    "tool": "banking.send_money",
    "arguments": {"recipient": "GB29NWBK60161331926819", "amount": 4},
}


def _line(conversation: Any) -> str:
    return json.dumps({**BASE, "conversation": conversation})


def test_a_conversation_is_parsed_in_order() -> None:
    text = _line(
        [
            {"role": "system", "content": "You are a banking assistant."},
            {"role": "user", "content": "Refund my friend GB29NWBK60161331926819."},
            {
                "role": "tool",
                "tool": "banking.get_most_recent_transactions",
                "call_id": "c0",
                "content": [{"id": 5, "sender": "GB29NWBK60161331926819", "amount": 10.0}],
            },
            {"role": "tool", "tool": "banking.get_iban", "content": "DE89370400440532013000"},
        ]
    )
    call = parse_corpus_line(text, 3)
    assert call is not None
    assert call.conversation == (
        ConversationEntry("system", "You are a banking assistant."),
        ConversationEntry("user", "Refund my friend GB29NWBK60161331926819."),
        ConversationEntry(
            "tool",
            [{"id": 5, "sender": "GB29NWBK60161331926819", "amount": 10.0}],
            "banking.get_most_recent_transactions",
            "c0",
        ),
        ConversationEntry("tool", "DE89370400440532013000", "banking.get_iban", None),
    )


def test_no_conversation_and_an_empty_one_differ() -> None:
    without = parse_corpus_line(json.dumps(BASE), 1)
    empty = parse_corpus_line(_line([]), 1)
    assert without is not None and without.conversation is None
    assert empty is not None and empty.conversation == ()


@pytest.mark.parametrize(
    ("conversation", "message"),
    [
        ({"role": "user"}, r"'conversation' must be a JSON array, not dict"),
        ("hello", r"'conversation' must be a JSON array, not str"),
        (["hello"], r"'conversation'\[0\] must be a JSON object, not str"),
        (
            [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}],
            r"'conversation'\[1\]: 'role' must be user, system or tool, not 'assistant'",
        ),
        ([{"content": "a"}], r"'conversation'\[0\]: 'role' must be user, system or tool"),
        ([{"role": "user"}], r"'conversation'\[0\]: missing 'content'"),
        (
            [{"role": "user", "content": ["a"]}],
            r"'conversation'\[0\]: a user message's 'content' must be a string",
        ),
        (
            [{"role": "system", "content": None}],
            r"'conversation'\[0\]: a system message's 'content' must be a string",
        ),
        (
            [{"role": "user", "content": "a", "tool": "x.y"}],
            r"'conversation'\[0\]: unknown key 'tool' for a user entry",
        ),
        (
            [{"role": "tool", "content": "a"}],
            r"'conversation'\[0\]: a tool result needs 'tool'",
        ),
        (
            [{"role": "tool", "tool": "", "content": "a"}],
            r"'conversation'\[0\]: a tool result needs 'tool'",
        ),
        (
            [{"role": "tool", "tool": "x.y", "call_id": 3, "content": "a"}],
            r"'conversation'\[0\]: 'call_id' must be a non-empty string",
        ),
        (
            [{"role": "tool", "tool": "x.y", "contents": "a"}],
            r"'conversation'\[0\]: missing 'content'",
        ),
        (
            [{"role": "tool", "tool": "x.y", "content": "a", "result": "b"}],
            r"'conversation'\[0\]: unknown key 'result' for a tool entry",
        ),
    ],
)
def test_a_bad_conversation_names_the_line_and_the_entry(conversation: Any, message: str) -> None:
    with pytest.raises(CorpusError, match=message) as err:
        parse_corpus_line(_line(conversation), 12, path="pairs.jsonl")
    assert err.value.line == 12
    assert str(err.value).startswith("pairs.jsonl:12: 'conversation'")


def test_read_corpus_names_the_bad_line_of_a_file(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    good = _line([{"role": "user", "content": "hi"}])
    path.write_text("\n".join([good, good, _line([{"role": "user", "content": 1}])]) + "\n")
    with pytest.raises(CorpusError) as err:
        list(read_corpus(path))
    assert err.value.line == 3
    assert str(err.value).startswith(f"{path}:3: 'conversation'[0]")
    bad: list[int] = []
    assert len(list(read_corpus(path, skip_bad=True, on_bad=lambda e: bad.append(e.line)))) == 2
    assert bad == [3]
