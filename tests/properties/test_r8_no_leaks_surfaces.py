"""R8 on every surface that shows a call: one scrub, from the call's one view.

A value withheld by ``Tool(sensitive=[...])`` or by an argument guardrail's redaction,
and every copy the model makes of it in other arguments (whole, inside a longer text, in
a nested object, in a list), never reaches what any surface shows or keeps: the ask a
person's callback receives (its arguments, facts, notes, suggestions, reason), the lines
an approval prompt lays out, the ask store's file, the inbox's card, the gateway's
elicitation text, ``Harness.decide``'s result, the telemetry span, the journal, or the
text the model is given. Issue 28 found the journal scrubbed a copy that the ask, its
facts, the ``asks`` table and ``decide`` still showed.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from clearance import CallContext, Harness, MemoryJournal, Principal, Tool, ToolRegistry
from clearance.facts import CustomFact
from clearance.guardrails.base import ArgumentGuardrail, GuardrailOutcome
from clearance.harness.approvals import Answer, PermissionAsk
from clearance.harness.ask_display import ask_lines
from clearance.harness.ask_store_sqlite import SqliteAskStore
from clearance.harness.telemetry import Telemetry
from clearance.inbox._render import ask_list
from clearance.mcp.gateway._asks import ask_message
from clearance.policy import LocalEvaluator

pytestmark = pytest.mark.anyio

ALICE = Principal("User", "alice")
SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "token": {"type": "string"},
        "note": {"type": "string"},
        "extra": {},
    },
    "required": ["path", "token"],
    "additionalProperties": False,
}

secrets = st.text(alphabet=st.characters(codec="utf-8"), min_size=6, max_size=30).map(
    lambda s: "sk-" + s
)
words = st.text(alphabet="abc xyz-_/.", max_size=12)


@st.composite
def copies(draw: st.DrawFn, secret: str) -> dict[str, Any]:
    """Arguments where the model copied ``secret`` into other places."""
    before, after = draw(words), draw(words)
    arguments: dict[str, Any] = {"path": "out/" + draw(words).replace("/", "_") + ".txt"}
    where = draw(st.sets(st.sampled_from(["note", "nested", "list", "path"]), min_size=1))
    if "note" in where:
        arguments["note"] = before + secret + after
    if "nested" in where:
        arguments["extra"] = {"deep": {"copy": secret}}
    if "list" in where:
        arguments["extra"] = [before, {"again": f"{secret}{after}"}]
    if "path" in where:
        arguments["path"] += "-" + secret  # a deciding field with a copy: never asked
    return arguments


def _stored_bytes(directory: Path) -> bytes:
    """Every file the store wrote (the database, its WAL and shared memory)."""
    return b"".join(p.read_bytes() for p in directory.iterdir() if p.is_file())


def _texts(*values: Any) -> str:
    return "\n".join(json.dumps(v, ensure_ascii=False, default=str) for v in values)


def _leaks(secret: str, text: str) -> bool:
    forms = {
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
    }
    return any(form in text for form in forms)


@settings(deadline=None, max_examples=40)
@given(secret=secrets, data=st.data(), how=st.sampled_from(["sensitive", "redacted"]))
async def test_r8_no_withheld_value_or_copy_on_any_surface(
    secret: str, data: st.DataObject, how: str
) -> None:
    arguments = data.draw(copies(secret))
    arguments["token"] = secret

    def handler(args: dict[str, Any], ctx: CallContext) -> str:
        return "done"

    registry = ToolRegistry()
    registry.register(
        "api",
        [
            Tool(
                "publish",
                handler,
                input_schema=SCHEMA,
                sensitive=["/token"] if how == "sensitive" else [],
                # The path decides (declared); the token does not: the call can be asked.
                facts={"/path": CustomFact(str, name="label")},
            )
        ],
    )
    guardrails = []
    if how == "redacted":
        guardrails.append(
            ArgumentGuardrail(lambda value, ctx: GuardrailOutcome.redact(["/token"]), name="r")
        )
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    asks: list[PermissionAsk] = []
    shown: list[str] = []

    def person(ask: PermissionAsk) -> Answer:
        asks.append(ask)
        shown.extend(ask_lines(ask.arguments, ask.deciding, width=80, notes=ask.notes))
        shown.append(ask_message(ask))
        return "allow_once"

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "asks.db"
        store = SqliteAskStore(db)
        journal = MemoryJournal()
        async with Harness(
            registry,
            evaluator=LocalEvaluator(ask=["api.publish"]),
            argument_guardrails=guardrails,
            ask_store=store,
            journal=journal,
            telemetry=Telemetry(tracer_provider=provider, capture_arguments=True),
        ) as harness:
            session = await harness.create_session(principal=ALICE, on_permission_ask=person)
            outcome = await session.call_tool("api__publish", arguments, call_id="c1")
            decision = await harness.decide(
                principal=ALICE, tool="api__publish", arguments=arguments
            )
        inbox = ask_list(store.all())
        store.close()
        stored = _stored_bytes(Path(tmp))
    provider.shutdown()
    spans = [dict(s.attributes or {}) for s in exporter.get_finished_spans()]
    copied_into_path = secret in arguments["path"]
    # A copy in the deciding path cannot be shown: nobody is asked; otherwise asked once.
    assert len(asks) == (0 if copied_into_path else 1)
    assert outcome.status == ("denied" if copied_into_path else "ok"), outcome.text
    surfaces = {
        "ask": _texts([a.to_json() for a in asks]),
        "prompt lines and elicitation": "\n".join(shown),
        "ask store file": stored.decode("utf-8", "replace"),
        "inbox": inbox,
        "decide": _texts(decision.to_json()),
        "telemetry": _texts(spans),
        "journal": _texts([e.data for e in journal.events()]),
        "model": outcome.text,
    }
    leaked = [name for name, text in surfaces.items() if _leaks(secret, text)]
    assert not leaked, f"{secret!r} shown by {leaked}"
