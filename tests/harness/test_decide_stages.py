"""The stages that decide a call, as a host sees them: what argument guardrails see and
enforce, how a rewrite is checked and canonicalized like the call itself (R11), what the
evaluator is asked, what a shadow evaluator's record says, and that no withheld value
surfaces on the way (R8). Through a real harness and its journal, never the stages'
internals (written for mutation testing, issue 20)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

import pytest
from support import ALICE, Recorder

from clearance import Harness, MemoryJournal, PermissionAsk, Tool, ToolRegistry
from clearance.facts.base import CustomFact
from clearance.guardrails import ArgumentGuardrail, GuardrailOutcome
from clearance.guardrails.base import GuardrailContext
from clearance.harness.approvals import Answer
from clearance.harness.journal import JournalEvent
from clearance.policy import AuthzRequest, LocalEvaluator, Verdict
from clearance.policy.base import SessionInfo
from clearance.provenance import Provenance, TrustList

pytestmark = pytest.mark.anyio

NOTE_SCHEMA = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "body": {"type": "string"}},
    "required": ["title"],
    "additionalProperties": False,
}
TICKET_SCHEMA = {
    "type": "object",
    "properties": {
        "ticket": {"type": "string", "maxLength": 12},
        "note": {"type": "string", "maxLength": 150},
    },
    "required": ["ticket"],
    "additionalProperties": False,
}


def ticket(value: str) -> str:
    """A ticket's canonical spelling: lower case; ``#N`` is ``ticket-`` and N in 8 digits
    (longer than the schema lets a ticket be); a ``!`` is refused, quoting the value."""
    if "!" in value:
        raise ValueError(f"{value!r} is not a ticket")
    if value.startswith("#"):
        return "ticket-" + value[1:].zfill(8)
    return value.lower()


def registry(recorder: Recorder, *, sensitive: tuple[str, ...] = ()) -> ToolRegistry:
    """``notes.save`` (no declared facts) and ``desk.file`` (a ticket, canonicalized by
    :func:`ticket`), each with the same withheld pointers."""
    reg = ToolRegistry()
    reg.register(
        "notes",
        [
            Tool(
                "save",
                recorder.handler("notes.save"),
                input_schema=NOTE_SCHEMA,
                sensitive=[p for p in sensitive if p in ("/title", "/body")],
            )
        ],
    )
    reg.register(
        "desk",
        [
            Tool(
                "file",
                recorder.handler("desk.file"),
                input_schema=TICKET_SCHEMA,
                facts={"/ticket": CustomFact(ticket)},
                sensitive=[p for p in sensitive if p in ("/ticket", "/note")],
            )
        ],
    )
    return reg


class Seeing:
    """An evaluator that keeps every request it is asked and answers ``answer(request)``
    (allow by default)."""

    name = "seeing"

    def __init__(self, answer: Any = None) -> None:
        self.requests: list[AuthzRequest] = []
        self._answer = answer

    def evaluate(self, request: AuthzRequest) -> Verdict:
        self.requests.append(request)
        if self._answer is None:
            return Verdict("allow", reasons=("seen",), evaluator=self.name)
        verdict: Verdict = self._answer(request)
        return verdict


def deny_quoting(pointer: str) -> Any:
    """An evaluator answer that denies, quoting the argument's value (the text reaches
    the model: it must not carry a withheld value)."""

    def answer(request: AuthzRequest) -> Verdict:
        value = request.arguments[pointer.lstrip("/")]
        return Verdict("deny", reasons=("quoting",), message=f"no to {value}", evaluator="q")

    return answer


def decided(journal: MemoryJournal, call_id: str) -> dict[str, Any]:
    [event] = [e for e in journal.events(call_id=call_id) if e.type == "call_decided"]
    data: dict[str, Any] = event.data
    return data


def everything(journal: MemoryJournal) -> str:
    events: list[JournalEvent] = journal.events()
    return json.dumps([e.data for e in events])


# -- argument guardrails ------------------------------------------------------------------


async def test_a_guardrail_sees_the_call_it_inspects() -> None:
    seen: list[GuardrailContext] = []

    def look(arguments: Any, ctx: GuardrailContext) -> GuardrailOutcome:
        seen.append(ctx)
        return GuardrailOutcome.allow()

    ledger = Provenance()
    async with Harness(registry(Recorder()), evaluator=Seeing(), argument_guardrails=[look]) as h:
        session = await h.create_session(principal=ALICE)
        out = await session.call_tool("notes__save", {"title": "t"}, call_id="c1", turn_id="turn-1")
        await h.decide(
            principal=ALICE, tool="notes.save", arguments={"title": "t"}, provenance=ledger
        )
    assert out.status == "ok"
    assert seen[0] == GuardrailContext(
        "notes.save",
        "notes__save",
        ALICE,
        session.id,
        "turn-1",
        "c1",
        "arguments",
        session.provenance,
    )
    assert seen[0].provenance is session.provenance
    # A dry run's guardrails see the conversation it was given.
    assert seen[1].provenance is ledger and seen[1].stage == "arguments"


async def test_every_guardrail_after_an_advisory_one_still_runs() -> None:
    recorder = Recorder()
    journal = MemoryJournal()
    guards = [
        ArgumentGuardrail(lambda a, c: GuardrailOutcome.block("advice"), advisory=True, name="a"),
        ArgumentGuardrail(lambda a, c: GuardrailOutcome.block("no saving"), name="b"),
    ]
    async with Harness(
        registry(recorder), evaluator=Seeing(), argument_guardrails=guards, journal=journal
    ) as h:
        session = await h.create_session(principal=ALICE)
        out = await session.call_tool("notes__save", {"title": "t"}, call_id="c1")
    assert out.status == "blocked"
    assert out.text.startswith("blocked by guardrail 'b': no saving")
    assert recorder.calls == []
    record = decided(journal, "c1")
    assert record["stage"] == "guardrail"
    assert [(g["name"], g["action"]) for g in record["guardrails"]] == [
        ("a", "block"),
        ("b", "block"),
    ]


async def test_a_failing_guardrail_blocks_the_call_and_reaches_diagnostics() -> None:
    class Broken(Exception):
        pass

    def broken(arguments: Any, ctx: GuardrailContext) -> GuardrailOutcome:
        raise Broken("inside")

    failures: list[tuple[str, BaseException, Mapping[str, Any]]] = []
    recorder = Recorder()
    journal = MemoryJournal()
    async with Harness(
        registry(recorder),
        evaluator=Seeing(),
        argument_guardrails=[ArgumentGuardrail(broken, name="fragile")],
        journal=journal,
        diagnostics=lambda cid, exc, info: failures.append((cid, exc, info)),
    ) as h:
        session = await h.create_session(principal=ALICE)
        out = await session.call_tool("notes__save", {"title": "t"}, call_id="c1")
    assert out.status == "blocked" and recorder.calls == []
    assert out.text.startswith("guardrail 'fragile' failed; the call was blocked")
    record = decided(journal, "c1")
    assert record["stage"] == "guardrail" and record["outcome"] == "blocked"
    assert record["guardrails"] == [
        {"name": "fragile", "advisory": False, "action": "error", "error": "Broken"}
    ]
    [(cid, exc, info)] = failures
    assert isinstance(exc, Broken) and cid == record["correlation_id"]
    assert info == {
        "call_id": "c1",
        "session_id": session.id,
        "tool": "notes__save",
        "stage": "arguments guardrail fragile",
    }


async def test_every_asking_guardrail_is_named_in_the_ask() -> None:
    asks: list[PermissionAsk] = []

    def answer(ask: PermissionAsk) -> Answer:
        asks.append(ask)
        return "allow_once"

    guards = [
        ArgumentGuardrail(lambda a, c: GuardrailOutcome.ask("first look"), name="one"),
        ArgumentGuardrail(lambda a, c: GuardrailOutcome.ask("second look"), name="two"),
    ]
    async with Harness(registry(Recorder()), evaluator=Seeing(), argument_guardrails=guards) as h:
        session = await h.create_session(principal=ALICE, on_permission_ask=answer)
        out = await session.call_tool("notes__save", {"title": "t"})
        decision = await h.decide(principal=ALICE, tool="notes.save", arguments={"title": "t"})
    assert out.status == "ok"
    [ask] = asks
    assert tuple(ask.policies) == ("one", "two")
    assert ask.reason == "first look; second look"
    assert decision.outcome == "ask" and decision.reasons == ("one", "two")


async def test_a_redacted_argument_is_withheld_from_then_on() -> None:
    recorder = Recorder()
    journal = MemoryJournal()
    body = "the launch code is 0000-1111"
    redact = ArgumentGuardrail(lambda a, c: GuardrailOutcome.redact(["/body"]), name="hide")
    async with Harness(
        registry(recorder),
        evaluator=Seeing(deny_quoting("/body")),
        argument_guardrails=[redact],
        journal=journal,
    ) as h:
        session = await h.create_session(principal=ALICE)
        out = await session.call_tool("notes__save", {"title": "t", "body": body}, call_id="c1")
    # The evaluator decides on the real value; nothing it says shows it.
    assert out.status == "denied"
    assert body not in out.text and "no to [REDACTED]" in out.text
    record = decided(journal, "c1")
    assert record["arguments"] == {"title": "t", "body": "[REDACTED]"}
    assert record["guardrails"] == [
        {"name": "hide", "advisory": False, "action": "redact", "pointers": ["/body"]}
    ]
    assert body not in everything(journal)


async def test_decide_shows_guardrail_messages_without_withheld_values() -> None:
    secret = "correct-horse-battery"

    def quote(arguments: Any, ctx: GuardrailContext) -> GuardrailOutcome:
        return GuardrailOutcome.ask(f"check {arguments['title']} and {arguments['body']}")

    async with Harness(
        registry(Recorder(), sensitive=("/body",)),
        evaluator=Seeing(),
        argument_guardrails=[ArgumentGuardrail(quote, name="quote")],
    ) as h:
        decision = await h.decide(
            principal=ALICE, tool="notes.save", arguments={"title": "t", "body": secret}
        )
    assert decision.outcome == "ask"
    assert decision.guardrails == [
        {"name": "quote", "advisory": False, "action": "ask", "message": "check t and [REDACTED]"}
    ]
    assert decision.arguments == {"title": "t", "body": "[REDACTED]"}


async def test_decide_shows_an_asks_reason_without_withheld_values() -> None:
    secret = "correct-horse-battery"

    def quote(arguments: Any, ctx: GuardrailContext) -> GuardrailOutcome:
        return GuardrailOutcome.ask(f"check {arguments['body']}")

    async with Harness(
        registry(Recorder(), sensitive=("/body",)),
        evaluator=Seeing(),
        argument_guardrails=[ArgumentGuardrail(quote, name="quote")],
    ) as h:
        decision = await h.decide(
            principal=ALICE, tool="notes.save", arguments={"title": "t", "body": secret}
        )
    assert decision.outcome == "ask"
    assert secret not in json.dumps(decision.to_json())


async def test_a_replacement_the_schema_refuses_blocks_the_call() -> None:
    recorder = Recorder()
    journal = MemoryJournal()
    bad = ArgumentGuardrail(lambda a, c: GuardrailOutcome.replace({"title": 7}), name="bad")
    async with Harness(
        registry(recorder), evaluator=Seeing(), argument_guardrails=[bad], journal=journal
    ) as h:
        session = await h.create_session(principal=ALICE)
        out = await session.call_tool("notes__save", {"title": "t"}, call_id="c1")
    assert out.status == "blocked" and recorder.calls == []
    assert out.text.startswith(
        "guardrail 'bad' produced arguments the schema rejects: /title: 7 is not of type"
    )
    record = decided(journal, "c1")
    assert record["stage"] == "guardrail"
    assert record["guardrails"] == [
        {"name": "bad", "advisory": False, "action": "replace", "error": "replacement invalid"}
    ]


@pytest.mark.parametrize(
    ("replacement", "words"),
    [
        ({"title": "x" * 2000}, "the limit is 1024"),
        ({"title": "t", "body": "b", "extra": {"a": {"b": {"c": {"d": 1}}}}}, "nested deeper"),
    ],
    ids=["too big", "too deep"],
)
async def test_a_replacement_past_the_size_limits_blocks_the_call(
    replacement: dict[str, Any], words: str
) -> None:
    # The schema lets any object through: only the harness's limits can refuse these.
    reg = ToolRegistry()
    recorder = Recorder()
    reg.register(
        "any", [Tool("take", recorder.handler("any.take"), input_schema={"type": "object"})]
    )
    grow = ArgumentGuardrail(lambda a, c: GuardrailOutcome.replace(replacement), name="grow")
    async with Harness(
        reg,
        evaluator=Seeing(),
        argument_guardrails=[grow],
        max_argument_bytes=1024,
        max_argument_depth=3,
    ) as h:
        session = await h.create_session(principal=ALICE)
        out = await session.call_tool("any__take", {"title": "t"})
    assert out.status == "blocked" and recorder.calls == []
    assert out.text.startswith("guardrail 'grow' produced arguments the schema rejects: ")
    assert words in out.text


async def test_what_a_replacement_removes_is_withheld_and_what_it_keeps_is_not() -> None:
    recorder = Recorder()
    journal = MemoryJournal()
    token = "tok-81e2f0c4"

    def strip(arguments: Any, ctx: GuardrailContext) -> GuardrailOutcome:
        return GuardrailOutcome.replace({"title": arguments["title"], "body": "cleaned"})

    async with Harness(
        registry(recorder),
        # The evaluator quotes what it was told about earlier (a log, a cache): the value
        # the rewrite took out must not reach the model or the journal through it.
        evaluator=Seeing(lambda r: Verdict("deny", message=f"{r.arguments['title']}: {token}")),
        argument_guardrails=[ArgumentGuardrail(strip, name="strip")],
        journal=journal,
    ) as h:
        session = await h.create_session(principal=ALICE)
        out = await session.call_tool(
            "notes__save", {"title": "weekly", "body": token}, call_id="c1"
        )
    assert out.status == "denied" and recorder.calls == []
    assert token not in out.text and out.text.startswith("weekly: [REDACTED]")
    record = decided(journal, "c1")
    assert record["arguments"] == {"title": "weekly", "body": "cleaned"}
    assert token not in everything(journal)


# -- a rewrite is canonicalized like the call (R11) ----------------------------------------


async def test_a_call_whose_declared_value_cannot_be_canonicalized_is_refused() -> None:
    recorder = Recorder()
    journal = MemoryJournal()
    async with Harness(registry(recorder), evaluator=Seeing(), journal=journal) as h:
        session = await h.create_session(principal=ALICE)
        out = await session.call_tool("desk__file", {"ticket": "A!"}, call_id="c1")
        longer = await session.call_tool("desk__file", {"ticket": "#12"}, call_id="c2")
    assert recorder.calls == []
    reason = "argument /ticket (ticket): 'A!' is not a ticket"
    assert out.status == "blocked" and out.text.startswith(f"refused: {reason} (correlation")
    record = decided(journal, "c1")
    assert record["stage"] == "facts" and record["outcome"] == "blocked"
    assert record["facts"] == {"error": reason}
    # The canonical value must be one the tool accepts too.
    assert longer.status == "blocked"
    too_long = '/ticket: "ticket-00000012" is longer than 12 characters'
    assert longer.text.startswith(f"refused: {too_long} (correlation")
    assert decided(journal, "c2")["facts"] == {"error": too_long}


async def test_a_guardrail_rewrite_is_canonicalized_before_anyone_sees_it() -> None:
    recorder = Recorder()
    journal = MemoryJournal()
    evaluator = Seeing()
    rewrite = ArgumentGuardrail(
        lambda a, c: GuardrailOutcome.replace({"ticket": "XYZ-9", "note": a["note"]}),
        name="rewrite",
    )
    async with Harness(
        registry(recorder), evaluator=evaluator, argument_guardrails=[rewrite], journal=journal
    ) as h:
        session = await h.create_session(principal=ALICE)
        out = await session.call_tool("desk__file", {"ticket": "abc-1", "note": "n"}, call_id="c1")
    assert out.status == "ok"
    assert recorder.calls == [("desk.file", {"ticket": "xyz-9", "note": "n"})]
    [request] = evaluator.requests
    assert request.arguments == {"ticket": "xyz-9", "note": "n"}
    assert request.facts == {"ticket": {"value": "xyz-9"}}
    record = decided(journal, "c1")
    assert record["arguments"] == {"ticket": "xyz-9", "note": "n"}
    assert record["facts"] == {"ticket": {"value": "xyz-9"}}


async def test_a_guardrail_rewrite_that_cannot_be_canonicalized_blocks_the_call() -> None:
    recorder = Recorder()
    journal = MemoryJournal()
    rewrite = ArgumentGuardrail(
        lambda a, c: GuardrailOutcome.replace({"ticket": "X!"}), name="rewrite"
    )
    async with Harness(
        registry(recorder), evaluator=Seeing(), argument_guardrails=[rewrite], journal=journal
    ) as h:
        session = await h.create_session(principal=ALICE)
        out = await session.call_tool("desk__file", {"ticket": "abc"}, call_id="c1")
    assert out.status == "blocked" and recorder.calls == []
    reason = "argument /ticket (ticket): 'X!' is not a ticket"
    assert out.text.startswith(
        f"guardrail 'rewrite' produced arguments that cannot be canonicalized: {reason}"
        " (correlation id"
    )
    record = decided(journal, "c1")
    assert record["stage"] == "guardrail" and record["outcome"] == "blocked"
    assert record["facts"] == {"error": reason}
    assert record["guardrails"] == [
        {
            "name": "rewrite",
            "advisory": False,
            "action": "replace",
            "error": "replacement cannot be canonicalized",
        }
    ]


async def test_a_withheld_value_a_guardrail_writes_never_surfaces() -> None:
    """A guardrail that rewrites a sensitive argument writes a withheld value: when the
    rewrite is refused (its declared fact cannot be canonicalized), the refusal quotes
    it, and neither the model, the journal nor a dry run may show it (R8)."""
    journal = MemoryJournal()
    rewrite = ArgumentGuardrail(
        lambda a, c: GuardrailOutcome.replace({"ticket": "NEWSECRET!"}), name="rewrite"
    )
    async with Harness(
        registry(Recorder(), sensitive=("/ticket",)),
        evaluator=Seeing(),
        argument_guardrails=[rewrite],
        journal=journal,
    ) as h:
        session = await h.create_session(principal=ALICE)
        out = await session.call_tool("desk__file", {"ticket": "old-secret"}, call_id="c1")
        decision = await h.decide(
            principal=ALICE, tool="desk.file", arguments={"ticket": "old-secret"}
        )
    assert out.status == "blocked" and decision.outcome == "blocked"
    reason = "argument /ticket (ticket): '[REDACTED]' is not a ticket"
    assert out.text.startswith(
        f"guardrail 'rewrite' produced arguments that cannot be canonicalized: {reason}"
    )
    assert decided(journal, "c1")["facts"] == {"error": reason}
    assert decision.facts == {"error": reason}
    for shown in (out.text, everything(journal), json.dumps(decision.to_json())):
        assert "NEWSECRET" not in shown and "old-secret" not in shown


async def test_the_canonical_value_of_a_withheld_argument_is_withheld_too() -> None:
    journal = MemoryJournal()
    async with Harness(
        registry(Recorder(), sensitive=("/ticket",)),
        evaluator=Seeing(deny_quoting("/ticket")),
        journal=journal,
    ) as h:
        session = await h.create_session(principal=ALICE)
        # "SEKRIT-42" is "sekrit-42" once canonical: that spelling is withheld as well.
        out = await session.call_tool("desk__file", {"ticket": "SEKRIT-42"}, call_id="c1")
        decision = await h.decide(
            principal=ALICE, tool="desk.file", arguments={"ticket": "SEKRIT-42"}
        )
    assert out.status == "denied" and "no to [REDACTED]" in out.text
    record = decided(journal, "c1")
    # A withheld argument's facts are left out, not shown redacted.
    assert record["facts"] == {}
    assert decision.facts == {}
    for shown in (out.text, everything(journal), json.dumps(decision.to_json())):
        assert "sekrit" not in shown.lower()


async def test_a_withheld_value_a_rewrite_canonicalizes_is_withheld() -> None:
    rewrite = ArgumentGuardrail(
        lambda a, c: GuardrailOutcome.replace({"ticket": "FRESH-7"}), name="rewrite"
    )
    journal = MemoryJournal()
    async with Harness(
        registry(Recorder(), sensitive=("/ticket",)),
        evaluator=Seeing(deny_quoting("/ticket")),
        argument_guardrails=[rewrite],
        journal=journal,
    ) as h:
        session = await h.create_session(principal=ALICE)
        out = await session.call_tool("desk__file", {"ticket": "old-7"}, call_id="c1")
    assert out.status == "denied" and "no to [REDACTED]" in out.text
    assert "fresh" not in out.text.lower() and "fresh" not in everything(journal).lower()


async def test_a_schema_error_never_shows_part_of_a_withheld_value() -> None:
    """A schema violation's message is shortened to 200 characters after withheld values
    are taken out of it: shortened first, a withheld value cut in two would no longer
    match itself and its first part would show."""
    secret = "hunter2-abcd"  # the withheld ticket
    # The note (too long) quotes the ticket where its message is cut, at 200 characters.
    note = "x" * 189 + secret
    journal = MemoryJournal()
    recorder = Recorder()
    async with Harness(
        registry(recorder, sensitive=("/ticket",)), evaluator=Seeing(), journal=journal
    ) as h:
        session = await h.create_session(principal=ALICE)
        out = await session.call_tool("desk__file", {"ticket": secret, "note": note}, call_id="c1")
    assert out.status == "invalid" and recorder.calls == []
    assert out.text.startswith('invalid arguments: /note: "' + "x" * 189 + "[REDACTED")
    record = decided(journal, "c1")
    assert record["stage"] == "schema" and record["outcome"] == "invalid"
    # Cut at 200 characters: the marker too, never the value.
    shortened = '/note: "' + "x" * 189 + "[REDACTED\u2026"
    assert record["schema"] == {"valid": False, "error": shortened}
    for shown in (out.text, everything(journal)):
        assert "hunter2" not in shown


# -- records of the guardrail stage ---------------------------------------------------------


async def test_the_guardrail_stage_is_recorded_with_or_without_guardrails() -> None:
    journal = MemoryJournal()
    guard = ArgumentGuardrail(lambda a, c: GuardrailOutcome.allow(), tools="desk.*", name="g")
    async with Harness(
        registry(Recorder()), evaluator=Seeing(), argument_guardrails=[guard], journal=journal
    ) as h:
        session = await h.create_session(principal=ALICE)
        await session.call_tool("notes__save", {"title": "t"}, call_id="none")
        await session.call_tool("desk__file", {"ticket": "a"}, call_id="one")
    unguarded, guarded = decided(journal, "none"), decided(journal, "one")
    for record in (unguarded, guarded):
        assert record["schema"] == {"valid": True, "error": None}
        # Checking arguments against a schema takes some microseconds, never the call's all.
        assert 1 <= record["timing_us"]["validate"] <= record["timing_us"]["total"]
    # No guardrail applies to notes.save: none ran, in no time.
    assert unguarded["guardrails"] == [] and unguarded["timing_us"]["guardrails"] == 0
    assert guarded["guardrails"] == [{"name": "g", "advisory": False, "action": "allow"}]
    assert isinstance(guarded["timing_us"]["guardrails"], int)
    assert guarded["timing_us"]["guardrails"] >= 0
    # desk.file declares a fact: its canonical-facts stage is timed too.
    assert "facts" not in unguarded["timing_us"]
    assert isinstance(guarded["timing_us"]["facts"], int) and guarded["timing_us"]["facts"] >= 0


async def test_a_reused_call_id_is_refused_and_recorded_as_such() -> None:
    recorder = Recorder()
    journal = MemoryJournal()
    async with Harness(registry(recorder), evaluator=Seeing(), journal=journal) as h:
        session = await h.create_session(principal=ALICE)
        first = await session.call_tool("notes__save", {"title": "a"}, call_id="c1")
        again = await session.call_tool("notes__save", {"title": "b"}, call_id="c1")
    assert first.status == "ok" and again.status == "invalid"
    assert again.text.startswith("call id 'c1' was already used in this session")
    assert recorder.calls == [("notes.save", {"title": "a"})]
    records = [e.data for e in journal.events(call_id="c1") if e.type == "call_decided"]
    assert "duplicate_call_id" not in records[0]
    assert records[1]["duplicate_call_id"] is True and records[1]["stage"] == "call_id"


# -- the evaluator ----------------------------------------------------------------------------


async def test_the_evaluator_is_asked_about_the_call_as_it_stands() -> None:
    evaluator = Seeing()
    async with Harness(registry(Recorder()), evaluator=evaluator) as h:
        session = await h.create_session(principal=ALICE)
        session.add_message("user", "save the weekly note")
        await session.call_tool(
            "notes__save", {"title": "weekly"}, call_id="c1", turn_id="t7", context={"k": "v"}
        )
    [request] = evaluator.requests
    assert request.principal == ALICE
    assert request.tool.qualified_name == "notes.save"
    assert request.session == SessionInfo(session.id, "t7")
    assert request.context == {"k": "v"}
    # A tool that declares no facts has none, never a missing mapping.
    assert request.facts == {}
    # Where each argument came from: "weekly" is the user's.
    assert request.provenance["title"]["user"] is True


# -- the shadow evaluator ---------------------------------------------------------------------


async def test_a_shadow_evaluator_is_recorded_beside_the_enforced_one() -> None:
    journal = MemoryJournal()
    shadow = LocalEvaluator(allow=["notes.save"], deny=["notes.save(title=secret*)"])
    async with Harness(
        registry(Recorder()),
        evaluator=LocalEvaluator(allow=["notes.save"]),
        shadow_evaluator=shadow,
        journal=journal,
    ) as h:
        session = await h.create_session(principal=ALICE)
        same = await session.call_tool("notes__save", {"title": "plan"}, call_id="c1")
        other = await session.call_tool("notes__save", {"title": "secret-plan"}, call_id="c2")
        decision = await h.decide(principal=ALICE, tool="notes.save", arguments={"title": "secret"})
    # The shadow never changes an outcome.
    assert same.status == other.status == "ok" and decision.outcome == "allow"
    assert decided(journal, "c1")["shadow"] == {
        "effect": "allow",
        "reasons": ["allow:notes.save"],
        "agrees": True,
    }
    disagreeing = {
        "effect": "deny",
        "reasons": ["deny:notes.save(title=secret*)"],
        "agrees": False,
    }
    assert decided(journal, "c2")["shadow"] == disagreeing
    assert decision.shadow == disagreeing


async def test_a_failing_shadow_evaluator_is_recorded_and_changes_nothing() -> None:
    class Broken(Exception):
        pass

    class Failing:
        def evaluate(self, request: AuthzRequest) -> Verdict:
            raise Broken("shadow bug")

    failures: list[tuple[BaseException, Mapping[str, Any]]] = []
    journal = MemoryJournal()
    recorder = Recorder()
    async with Harness(
        registry(recorder),
        evaluator=LocalEvaluator(allow=["notes.save"]),
        shadow_evaluator=Failing(),
        journal=journal,
        diagnostics=lambda cid, exc, info: failures.append((exc, info)),
    ) as h:
        session = await h.create_session(principal=ALICE)
        out = await session.call_tool("notes__save", {"title": "t"}, call_id="c1")
    assert out.status == "ok" and recorder.names() == ["notes.save"]
    assert decided(journal, "c1")["shadow"] == {"effect": "error", "agrees": False}
    [(exc, info)] = failures
    assert isinstance(exc, Broken)
    assert info["stage"] == "shadow evaluator" and info["call_id"] == "c1"


async def test_a_shadow_evaluator_is_asked_the_enforced_evaluators_question() -> None:
    enforced, shadow = Seeing(), Seeing()
    async with Harness(registry(Recorder()), evaluator=enforced, shadow_evaluator=shadow) as h:
        session = await h.create_session(principal=ALICE)
        await session.call_tool("notes__save", {"title": "t"}, call_id="c1", turn_id="t1")
    assert shadow.requests == enforced.requests and len(shadow.requests) == 1


async def test_a_failing_evaluator_denies_and_reaches_diagnostics() -> None:
    class Broken(Exception):
        pass

    class Failing:
        def evaluate(self, request: AuthzRequest) -> Verdict:
            raise Broken("evaluator bug")

    failures: list[tuple[BaseException, Mapping[str, Any]]] = []
    journal = MemoryJournal()
    recorder = Recorder()
    async with Harness(
        registry(recorder),
        evaluator=Failing(),
        journal=journal,
        diagnostics=lambda cid, exc, info: failures.append((exc, info)),
    ) as h:
        session = await h.create_session(principal=ALICE)
        out = await session.call_tool("notes__save", {"title": "t"}, call_id="c1")
    assert out.status == "denied" and out.decision == "error" and recorder.calls == []
    assert out.text.startswith("the authority evaluator failed (correlation id")
    record = decided(journal, "c1")
    assert record["stage"] == "evaluator" and record["decision"] == "error"
    assert record["verdict"] == {
        "effect": "error",
        "reasons": [],
        "annotations": {},
        "errors": ["Broken"],
        "message": "the authority evaluator failed",
        "evaluator": "Failing",
    }
    [(exc, info)] = failures
    assert isinstance(exc, Broken) and info["stage"] == "evaluator"


async def test_an_evaluator_that_answers_no_verdict_is_named_in_diagnostics() -> None:
    class Garbage:
        async def evaluate(self, request: AuthzRequest) -> Any:
            return "allow"

    failures: list[BaseException] = []
    async with Harness(
        registry(Recorder()),
        evaluator=Garbage(),
        diagnostics=lambda cid, exc, info: failures.append(exc),
    ) as h:
        session = await h.create_session(principal=ALICE)
        out = await session.call_tool("notes__save", {"title": "t"})
    assert out.status == "denied" and out.decision == "error"
    [exc] = failures
    assert isinstance(exc, TypeError)
    assert str(exc) == "Garbage.evaluate returned 'allow', not a Verdict"


async def test_the_evaluator_stage_is_timed_in_microseconds() -> None:
    def slow(request: AuthzRequest) -> Verdict:
        time.sleep(0.003)
        return Verdict("allow", evaluator="slow")

    journal = MemoryJournal()
    async with Harness(registry(Recorder()), evaluator=Seeing(slow), journal=journal) as h:
        session = await h.create_session(principal=ALICE)
        await session.call_tool("notes__save", {"title": "t"}, call_id="c1")
    timing = decided(journal, "c1")["timing_us"]
    assert 3_000 <= timing["evaluate"] <= timing["total"]


async def test_the_record_holds_the_provenance_the_decision_read() -> None:
    def reads_body(request: AuthzRequest) -> Verdict:
        made_up = request.provenance["body"]["made_up"]
        return Verdict("allow" if made_up else "deny", evaluator="reads")

    journal = MemoryJournal()
    async with Harness(
        registry(Recorder(), sensitive=("/body",)), evaluator=Seeing(reads_body), journal=journal
    ) as h:
        session = await h.create_session(principal=ALICE)
        out = await session.call_tool(
            "notes__save", {"title": "t", "body": "a private body"}, call_id="c1"
        )
    assert out.status == "ok"
    # Only what the decision read (not the title), and of a withheld argument no values.
    assert decided(journal, "c1")["provenance"] == {
        "body": {
            "sources": [],
            "user": False,
            "tool": False,
            "made_up": True,
            "untrusted_values": False,
            "made_up_values": False,
        }
    }


@pytest.mark.parametrize(
    ("reasons", "said"),
    [(("policy-1", "policy-2"), "denied by policy-1, policy-2"), ((), "denied")],
)
async def test_a_deny_without_a_message_names_its_reasons(
    reasons: tuple[str, ...], said: str
) -> None:
    journal = MemoryJournal()
    quiet = Seeing(lambda r: Verdict("deny", reasons=reasons, evaluator="quiet"))
    async with Harness(registry(Recorder()), evaluator=quiet, journal=journal) as h:
        session = await h.create_session(principal=ALICE)
        out = await session.call_tool("notes__save", {"title": "t"}, call_id="c1")
    assert out.status == "denied" and out.decision == "deny" and out.reasons == reasons
    assert out.text == f"{said} (correlation id {out.correlation_id})"
    record = decided(journal, "c1")
    assert (record["stage"], record["decision"], record["message"]) == ("evaluator", "deny", said)
    assert record["reasons"] == list(reasons)


async def test_decide_describes_the_call_under_the_harness_trust_list() -> None:
    """A dry run describes the call against the conversation it is given, under the
    harness's trust list, whatever list that conversation was recorded with."""
    conversation = Provenance()  # recorded with the default list: no tool is trusted
    conversation.add_result("crm.lookup", "r1", {"email": "bob@example.com"})
    trust = TrustList(trusted_tools=("crm.*",))
    async with Harness(registry(Recorder()), evaluator=Seeing(), trust=trust) as h:
        decision = await h.decide(
            principal=ALICE,
            tool="notes.save",
            arguments={"title": "bob@example.com"},
            provenance=conversation,
        )
    assert decision.outcome == "allow" and decision.provenance is not None
    title = decision.provenance["title"]
    assert title["user"] is True and title["sources"] == ["tool:crm.lookup"]


@pytest.mark.parametrize("call_id", ["", 7], ids=["empty", "not a string"])
async def test_a_call_id_is_a_non_empty_string(call_id: Any) -> None:
    recorder = Recorder()
    journal = MemoryJournal()
    async with Harness(registry(recorder), evaluator=Seeing(), journal=journal) as h:
        session = await h.create_session(principal=ALICE)
        out = await session.call_tool("notes__save", {"title": "t"}, call_id=call_id)
    assert out.status == "invalid" and recorder.calls == []
    assert out.text.startswith("call_id must be a non-empty string (correlation id")
    [record] = [e.data for e in journal.events() if e.type == "call_decided"]
    assert (record["stage"], record["outcome"]) == ("call_id", "invalid")
    assert record["message"] == "call_id must be a non-empty string"
