"""R2, R3, R5 and R6 through the second way in: ``session.authorize`` + ``record_result``.

A host that runs its own tools gets exactly what ``call_tool`` would run: the same decision
for the same call (same rules, guardrail rewrite, ask answer), and, when allowed, exactly
the validated, rewritten, canonical arguments the handler would have received (R2, R6). A
call that was not allowed cannot be recorded as run, and an ``allow_once`` answer given to
a paused call authorizes that call once (R5)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import RuleSet, calls, rule_sets
from support import ALICE, Recorder, coding_registry

from clearance import Harness, MemoryJournal, NotAuthorizedError
from clearance.guardrails.base import ArgumentGuardrail, GuardrailOutcome
from clearance.harness.approvals import Answer
from clearance.policy import LocalEvaluator

pytestmark = pytest.mark.anyio


def move_to_src(arguments: dict[str, Any], ctx: Any) -> GuardrailOutcome:
    if "path" in arguments:
        return GuardrailOutcome.replace({**arguments, "path": "src/" + arguments["path"]})
    return GuardrailOutcome.allow()


@given(
    rules=rule_sets,
    batch=st.lists(calls(), min_size=1, max_size=6),
    rewrite=st.booleans(),
    answer=st.sampled_from(["allow_once", "deny"]),
)
async def test_authorize_allows_exactly_what_call_tool_runs(
    rules: RuleSet,
    batch: list[tuple[str, dict[str, str]]],
    rewrite: bool,
    answer: Answer,
) -> None:
    guards = [ArgumentGuardrail(move_to_src)] if rewrite else []
    ran = Recorder()
    async with (
        Harness(
            coding_registry(ran),
            evaluator=LocalEvaluator(**rules),
            argument_guardrails=guards,
            journal=MemoryJournal(),
        ) as runs,
        Harness(
            coding_registry(Recorder()),
            evaluator=LocalEvaluator(**rules),
            argument_guardrails=guards,
            journal=MemoryJournal(),
        ) as host,
    ):
        by_clearance = await runs.create_session(
            principal=ALICE, on_permission_ask=lambda a: answer
        )
        by_host = await host.create_session(principal=ALICE, on_permission_ask=lambda a: answer)
        hosted: list[tuple[str, dict[str, Any]]] = []
        for i, (tool, arguments) in enumerate(batch):
            outcome = await by_clearance.call_tool(tool, arguments, call_id=f"c{i}")
            auth = await by_host.authorize(tool, dict(arguments), call_id=f"c{i}")
            assert auth.allowed == (outcome.status == "ok"), (tool, arguments, auth, outcome)
            if auth.allowed:
                assert auth.arguments is not None and auth.qualified_name is not None
                hosted.append((auth.qualified_name, auth.arguments))
                recorded = await by_host.record_result(f"c{i}", "done")
                assert recorded.status == "ok"
            else:
                assert auth.arguments is None
                with pytest.raises(NotAuthorizedError):
                    await by_host.record_result(f"c{i}", "ran anyway")
        assert hosted == ran.calls


@given(batch=st.lists(calls(), min_size=1, max_size=4))
async def test_an_allow_once_answer_authorizes_its_paused_call_once(
    batch: list[tuple[str, dict[str, str]]],
) -> None:
    async with Harness(
        coding_registry(Recorder()),
        evaluator=LocalEvaluator(ask=["*.*"]),
        journal=MemoryJournal(),
    ) as h:
        session = await h.create_session(principal=ALICE)  # nobody here answers: pending
        for i, (tool, arguments) in enumerate(batch):
            paused = await session.authorize(tool, arguments, call_id=f"p{i}")
            if not paused.pending:
                continue  # refused before the ask (schema, facts)
            assert paused.ask_id is not None
            await h.answer_ask(paused.ask_id, "allow_once")
            assert (await session.authorize(tool, arguments, call_id=f"p{i}")).allowed
            again = await session.authorize(tool, arguments, call_id=f"q{i}")
            assert again.pending and again.ask_id != paused.ask_id
