"""R1: any exception in a guardrail, an evaluator, an ask callback or the journal before
dispatch ends the call denied/blocked with a correlation id; the handler never runs."""

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import ALICE, Recorder, coding_registry

from clearance import Harness, MemoryJournal
from clearance.guardrails.base import ArgumentGuardrail, GuardrailOutcome
from clearance.policy import AuthzRequest, Verdict

pytestmark = pytest.mark.anyio

FAULTS = [
    "guardrail",
    "guardrail_async",
    "evaluator",
    "ask_callback",
    "journal_decided",
    "journal_started",
    "guardrail_type",
    "evaluator_type",
    "ask_answer",
]


class Fault(Exception):
    pass


class Evaluator:
    def __init__(self, fault: str, effect: str) -> None:
        self.fault, self.effect = fault, effect

    def evaluate(self, request: AuthzRequest) -> Any:
        if self.fault == "evaluator":
            raise Fault("evaluator")
        if self.fault == "evaluator_type":
            return {"effect": "allow"}
        return Verdict(self.effect)  # type: ignore[arg-type]


class Journal(MemoryJournal):
    def __init__(self, fail_on: str | None) -> None:
        super().__init__()
        self.fail_on = fail_on

    async def append(self, event: Any) -> Any:
        if event.type == self.fail_on:
            raise Fault("journal")
        return await super().append(event)


@given(
    fault=st.sampled_from(FAULTS),
    effect=st.sampled_from(["allow", "ask"]),
    tool=st.sampled_from(["files__read_file", "files__write_file", "shell__run"]),
    path=st.text(max_size=20),
)
async def test_r1_fail_closed(fault: str, effect: str, tool: str, path: str) -> None:
    rec = Recorder()

    def guard(arguments: dict[str, Any], ctx: Any) -> Any:
        if fault == "guardrail":
            raise Fault("guardrail")
        if fault == "guardrail_type":
            return "allow"
        return GuardrailOutcome.allow()

    async def aguard(arguments: dict[str, Any], ctx: Any) -> GuardrailOutcome:
        if fault == "guardrail_async":
            raise Fault("guardrail")
        return GuardrailOutcome.allow()

    def answer(ask: Any) -> Any:
        if fault == "ask_callback":
            raise Fault("callback")
        if fault == "ask_answer":
            return "yes please"
        return "allow_once"

    journal = Journal(
        {"journal_decided": "call_decided", "journal_started": "tool_started"}.get(fault)
    )
    arguments = (
        {"command": path}
        if tool == "shell__run"
        else {"path": path, "content": "x"}
        if "write" in tool
        else {"path": path}
    )
    # The fault must be on the call's path: asks only happen for "ask" verdicts.
    if fault in ("ask_callback", "ask_answer"):
        effect = "ask"
    async with Harness(
        coding_registry(rec),
        evaluator=Evaluator(fault, effect),
        argument_guardrails=[ArgumentGuardrail(guard), ArgumentGuardrail(aguard)],
        journal=journal,
    ) as h:
        session = await h.create_session(principal=ALICE, on_permission_ask=answer)
        outcome = await session.call_tool(tool, arguments, call_id="c1")
    assert rec.calls == []
    assert outcome.status in ("denied", "blocked")
    assert outcome.correlation_id and outcome.correlation_id in outcome.text
    assert "Fault" not in outcome.text
    assert not [e for e in journal.events() if e.type == "tool_started"]


@given(fail_on=st.sampled_from(["permission_asked", "permission_decided"]))
async def test_r1_journal_failure_during_an_ask_denies(fail_on: str) -> None:
    rec = Recorder()
    journal = Journal(fail_on)
    async with Harness(
        coding_registry(rec), evaluator=Evaluator("none", "ask"), journal=journal
    ) as h:
        session = await h.create_session(
            principal=ALICE, on_permission_ask=lambda ask: "allow_once"
        )
        outcome = await session.call_tool("files__read_file", {"path": "a"}, call_id="c1")
    assert rec.calls == []
    assert outcome.status == "denied" and outcome.correlation_id in outcome.text
