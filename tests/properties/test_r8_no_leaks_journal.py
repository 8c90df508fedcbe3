"""R8 over the stored form: values withheld by ``Tool(sensitive=[...])`` never reach the
bytes a sink stores (the SQLite database and its WAL, the JSON-lines file, the encoded
records of a ``MemoryJournal``), whichever way the call ends.

Secrets are generated text (quotes, backslashes, non-ASCII, control characters included);
each is searched for raw, UTF-8 encoded, and in both JSON escapings.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clearance import CallContext, Harness, MemoryJournal, Principal, Tool, ToolRegistry
from clearance.harness.journal import Journal, JsonlJournal, SqliteJournal, encode_data
from clearance.policy import LocalEvaluator

pytestmark = pytest.mark.anyio

ALICE = Principal("User", "alice")
SCHEMA = {
    "type": "object",
    "properties": {
        "token": {"type": "string", "maxLength": 64},
        "n": {"type": "integer"},
        "nested": {"type": "object", "properties": {"token": {"type": "string"}}},
    },
    "required": ["token"],
    "additionalProperties": False,
}
SHAPES = ["allowed", "fails", "asked", "denied", "invalid_other", "invalid_token", "nested"]

# Secrets long and odd enough not to occur in a record by chance ("sk-" never does).
# Some are long: a message shortened before it is scrubbed would leak a prefix of them.
secrets = st.text(alphabet=st.characters(codec="utf-8"), min_size=6, max_size=40).map(
    lambda s: "sk-" + s
) | st.text(alphabet="abcdefXYZ0123456789", min_size=200, max_size=400).map(lambda s: "sk-" + s)


def registry() -> ToolRegistry:
    async def echo_progress(arguments: dict[str, Any], ctx: CallContext) -> str:
        await ctx.progress("working")
        return "done"

    def fails(arguments: dict[str, Any], ctx: CallContext) -> str:
        raise RuntimeError(f"could not use {arguments['token']}")

    reg = ToolRegistry()
    sensitive = ["/token", "/nested/token"]
    reg.register(
        "t",
        [
            Tool("use", echo_progress, input_schema=SCHEMA, sensitive=sensitive),
            Tool("fails", fails, input_schema=SCHEMA, sensitive=sensitive),
            Tool("asked", echo_progress, input_schema=SCHEMA, sensitive=sensitive),
            Tool("denied", echo_progress, input_schema=SCHEMA, sensitive=sensitive),
        ],
    )
    return reg


def call_for(shape: str, secret: str) -> tuple[str, dict[str, Any]]:
    if shape == "fails":
        return "t__fails", {"token": secret}
    if shape == "asked":
        return "t__asked", {"token": secret}
    if shape == "denied":
        return "t__denied", {"token": secret}
    if shape == "invalid_other":
        return "t__use", {"token": secret, "n": "not a number"}
    if shape == "invalid_token":  # the schema error is about the secret itself
        return "t__use", {"token": secret * 4}
    if shape == "nested":
        return "t__use", {"token": "x", "nested": {"token": secret}}
    return "t__use", {"token": secret}


def forms(secret: str) -> list[bytes]:
    """Every way the secret could appear in stored bytes."""
    texts = {
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
    }
    return sorted({t.encode("utf-8", "surrogatepass") for t in texts})


def stored_bytes(sink: str, directory: Path, journal: Journal) -> bytes:
    if isinstance(journal, MemoryJournal):
        return "\n".join(encode_data(e.to_json()) for e in journal.events()).encode()
    return b"".join(p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file())


def open_sink(sink: str, directory: Path) -> Journal:
    if sink == "jsonl":
        return JsonlJournal(directory / "journal.jsonl")
    if sink == "sqlite":
        return SqliteJournal(directory / "journal.db")
    return MemoryJournal()


@pytest.mark.parametrize("sink", ["memory", "jsonl", "sqlite"])
@settings(max_examples=max(10, settings().max_examples // 2))
@given(
    calls=st.lists(st.tuples(st.sampled_from(SHAPES), secrets), min_size=1, max_size=6),
)
async def test_r8_no_leaks_in_the_stored_journal(sink: str, calls: list[tuple[str, str]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        journal = open_sink(sink, directory)
        async with Harness(
            registry(),
            evaluator=LocalEvaluator(
                allow=["t.use", "t.fails"], ask=["t.asked"], deny=["t.denied"]
            ),
            journal=journal,
            diagnostics=lambda *args: None,  # the original exceptions go here, not the journal
        ) as harness:
            session = await harness.create_session(
                principal=ALICE, on_permission_ask=lambda ask: "allow_session"
            )
            for n, (shape, secret) in enumerate(calls):
                name, arguments = call_for(shape, secret)
                outcome = await session.call_tool(name, arguments, call_id=f"c{n}")
                assert secret[:24] not in outcome.text
        stored = stored_bytes(sink, directory, journal)
        assert b"[REDACTED]" in stored  # the records are there, with the values withheld
        for _, secret in calls:
            for form in forms(secret) + (forms(secret[:24]) if len(secret) > 60 else []):
                assert form not in stored, (sink, secret)
