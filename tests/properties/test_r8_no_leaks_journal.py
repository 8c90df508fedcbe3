"""R8 over the stored form: values withheld by ``Tool(sensitive=[...])`` or redacted by
an argument guardrail never reach the bytes a sink stores (the SQLite database and its
WAL, the JSON-lines file, every value of every table of a PostgreSQL store's schema, the
encoded records of a ``MemoryJournal``) nor a log line,
whichever way the call ends, and even when the tool echoes them back: in its text, as a
JSON text inside its text, in its structured content, in its progress reports, or in the
exception it raises (logged when there is no ``diagnostics`` callback).

Secrets are generated text (quotes, backslashes, non-ASCII, control characters included);
each is searched for raw, UTF-8 encoded, in both JSON escapings, and JSON-escaped twice.
What the model sees is the tool's own result, unchanged.
"""

from __future__ import annotations

import json
import logging
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from postgres_support import fresh_schema, sql

from clearance import (
    CallContext,
    CallToolResult,
    Harness,
    MemoryJournal,
    Principal,
    Tool,
    ToolRegistry,
)
from clearance.guardrails.base import ArgumentGuardrail, GuardrailOutcome
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
SHAPES = [
    "allowed",
    "fails",
    "asked",
    "denied",
    "invalid_other",
    "invalid_token",
    "nested",
    "echo_text",
    "echo_json",
    "echo_structured",
    "echo_progress",
    "echo_redacted",
    "echo_number",
]
ECHOES = {"echo_text", "echo_json", "echo_structured", "echo_redacted"}

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

    async def echo(arguments: dict[str, Any], ctx: CallContext) -> Any:
        token, how = arguments["token"], arguments.get("how", "text")
        if how == "json":  # a JSON text: the secret JSON-escaped inside the result text
            return json.dumps({"echo": token, "repr": repr(arguments)})
        if how == "structured":
            return CallToolResult(
                [{"type": "text", "text": f"got {token!r}"}],
                structured_content={"echo": token, token: [token, {"deep": token}]},
            )
        if how == "progress":
            await ctx.progress(f"using {token}", {"token": token, "list": [token]})
            return "done"
        if how == "number":
            await ctx.progress(f"pin {arguments['n']}")
            return CallToolResult(
                [{"type": "text", "text": f"pin {arguments['n']} ok"}],
                structured_content={"pin": arguments["n"]},
            )
        return f"you said {token}"

    reg = ToolRegistry()
    sensitive = ["/token", "/nested/token"]
    echo_schema = {
        "type": "object",
        "properties": {
            "token": {"type": "string"},
            "how": {"type": "string"},
            "n": {"type": "integer"},
        },
        "required": ["token"],
        "additionalProperties": False,
    }
    reg.register(
        "t",
        [
            Tool("use", echo_progress, input_schema=SCHEMA, sensitive=sensitive),
            Tool("fails", fails, input_schema=SCHEMA, sensitive=sensitive),
            Tool("asked", echo_progress, input_schema=SCHEMA, sensitive=sensitive),
            Tool("denied", echo_progress, input_schema=SCHEMA, sensitive=sensitive),
            Tool("echo", echo, input_schema=echo_schema, sensitive=["/token", "/n"]),
            # No sensitive argument: an argument guardrail redacts /token instead.
            Tool("echo_redacted", echo, input_schema=echo_schema),
        ],
    )
    return reg


def redact_token(arguments: dict[str, Any], ctx: Any) -> GuardrailOutcome:
    return GuardrailOutcome.redact(["/token"])


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
    if shape == "echo_redacted":
        return "t__echo_redacted", {"token": secret}
    if shape == "echo_number":
        return "t__echo", {"token": secret, "how": "number", "n": PIN}
    if shape.startswith("echo_"):
        return "t__echo", {"token": secret, "how": shape.removeprefix("echo_")}
    return "t__use", {"token": secret}


PIN = 987_654_321_123  # a withheld number: no record may show it (timings are far smaller)


def forms(secret: str) -> list[bytes]:
    """Every way the secret could appear in stored bytes."""
    texts = {secret}
    for ensure_ascii in (True, False):
        once = json.dumps(secret, ensure_ascii=ensure_ascii)[1:-1]
        texts.update((once, json.dumps(once, ensure_ascii=ensure_ascii)[1:-1]))
    return sorted({t.encode("utf-8", "surrogatepass") for t in texts})


class Lines(logging.Handler):
    """Every log line, formatted as a handler would write it."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


def stored_bytes(sink: str, place: str, journal: Journal) -> bytes:
    if isinstance(journal, MemoryJournal):
        return "\n".join(encode_data(e.to_json()) for e in journal.events()).encode()
    if sink == "postgres":  # every value of every table of the store's schema, as text
        schema = dict(parse_qsl(urlsplit(place).query))["schema"]
        columns = sql(
            schema,
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = '{s}'",
        )
        assert ("events", "data") in columns
        values = [
            value
            for table, column in columns
            for (value,) in sql(schema, f'SELECT "{column}"::text FROM {{s}}."{table}"')
        ]
        return "\n".join(str(v) for v in values if v is not None).encode()
    directory = Path(place)
    return b"".join(p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file())


@contextmanager
def sink_place(sink: str) -> Iterator[str]:
    """A fresh directory, or for ``postgres`` a fresh schema's URL (dropped on exit)."""
    if sink == "postgres":
        with fresh_schema() as (url, _):
            yield url
    else:
        with tempfile.TemporaryDirectory() as tmp:
            yield tmp


def open_sink(sink: str, place: str) -> Journal:
    if sink == "postgres":
        from clearance.harness.journal import PostgresJournal

        return PostgresJournal(place, host="r8-host")
    directory = Path(place)
    if sink == "jsonl":
        return JsonlJournal(directory / "journal.jsonl")
    if sink == "sqlite":
        return SqliteJournal(directory / "journal.db")
    return MemoryJournal()


@pytest.mark.parametrize("sink", ["memory", "jsonl", "sqlite", "postgres"])
@settings(max_examples=max(10, settings().max_examples // 2))
@given(
    calls=st.lists(st.tuples(st.sampled_from(SHAPES), secrets), min_size=1, max_size=6),
    diagnostics=st.booleans(),
)
async def test_r8_no_leaks_in_the_stored_journal(
    sink: str, calls: list[tuple[str, str]], diagnostics: bool
) -> None:
    lines = Lines()
    logger = logging.getLogger("clearance")
    logger.addHandler(lines)
    try:
        with sink_place(sink) as place:
            journal = open_sink(sink, place)
            async with Harness(
                registry(),
                evaluator=LocalEvaluator(
                    allow=["t.use", "t.fails", "t.echo", "t.echo_redacted"],
                    ask=["t.asked"],
                    deny=["t.denied"],
                ),
                argument_guardrails=[
                    ArgumentGuardrail(redact_token, tools="t.echo_redacted", name="redact")
                ],
                journal=journal,
                # The original exceptions go to the callback, or (scrubbed) to the log.
                diagnostics=(lambda *args: None) if diagnostics else None,
            ) as harness:
                session = await harness.create_session(
                    principal=ALICE, on_permission_ask=lambda ask: "allow_session"
                )
                for n, (shape, secret) in enumerate(calls):
                    name, arguments = call_for(shape, secret)
                    outcome = await session.call_tool(name, arguments, call_id=f"c{n}")
                    if shape in ECHOES:  # the model's own result is the tool's, unchanged
                        assert outcome.ok and outcome.result is not None, outcome
                        if shape == "echo_structured":
                            assert outcome.result.structured_content == {
                                "echo": secret,
                                secret: [secret, {"deep": secret}],
                            }
                        elif shape == "echo_json":
                            assert json.loads(outcome.text)["echo"] == secret
                        else:
                            assert outcome.text == f"you said {secret}"
                    else:
                        assert secret[:24] not in outcome.text
            stored = stored_bytes(sink, place, journal)
    finally:
        logger.removeHandler(lines)
    assert b"[REDACTED]" in stored  # the records are there, with the values withheld
    logged = "\n".join(lines.lines).encode("utf-8", "surrogatepass")
    if any(shape == "echo_number" for shape, _ in calls):
        assert str(PIN).encode() not in stored
    for _, secret in calls:
        for form in forms(secret) + (forms(secret[:24]) if len(secret) > 60 else []):
            assert form not in stored, (sink, secret)
            assert form not in logged, (secret, lines.lines)
