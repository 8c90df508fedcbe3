"""R2 authorization before execution, R4 default deny (local evaluator), deny wins over
allow inside a rule set."""

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import RuleSet, calls, rule_sets
from support import ALICE, Recorder, coding_registry

from clearance import Harness, MemoryJournal
from clearance.guardrails.base import ArgumentGuardrail, GuardrailOutcome
from clearance.harness.approvals import Answer
from clearance.policy import AuthzRequest, LocalEvaluator, SessionInfo

pytestmark = pytest.mark.anyio


def fresh_request(tool: str, arguments: dict[str, Any]) -> AuthzRequest:
    registry = coding_registry(Recorder())
    return AuthzRequest(ALICE, registry.get(tool).info, arguments, SessionInfo("s"))


@given(
    rules=rule_sets,
    batch=st.lists(calls(), min_size=1, max_size=6),
    rewrite=st.booleans(),
    answer=st.sampled_from(["allow_once", "deny"]),
)
async def test_r2_handler_runs_only_with_authorized_final_arguments(
    rules: RuleSet, batch: list[tuple[str, dict[str, str]]], rewrite: bool, answer: Answer
) -> None:
    evaluator = LocalEvaluator(**rules)
    rec = Recorder()

    def move_to_src(arguments: dict[str, Any], ctx: Any) -> GuardrailOutcome:
        # A rewriting guardrail: the evaluator must judge the rewritten arguments.
        if "path" in arguments:
            return GuardrailOutcome.replace({**arguments, "path": "src/" + arguments["path"]})
        return GuardrailOutcome.allow()

    guards = [ArgumentGuardrail(move_to_src)] if rewrite else []
    async with Harness(
        coding_registry(rec),
        evaluator=evaluator,
        argument_guardrails=guards,
        journal=MemoryJournal(),
    ) as h:
        session = await h.create_session(principal=ALICE, on_permission_ask=lambda ask: answer)
        expected = []
        for i, (tool, arguments) in enumerate(batch):
            final = dict(arguments)
            if rewrite and "path" in final:
                final["path"] = "src/" + final["path"]
            verdict = evaluator.evaluate(fresh_request(tool, final))
            runs = verdict.effect == "allow" or (verdict.effect == "ask" and answer == "allow_once")
            outcome = await session.call_tool(tool, arguments, call_id=f"c{i}")
            assert (outcome.status == "ok") == runs, (tool, final, verdict, outcome)
            if runs:
                expected.append((tool, final))
    assert rec.calls == expected


@given(rules=rule_sets, call=calls())
def test_r4_default_deny_and_deny_wins(rules: RuleSet, call: tuple[str, dict[str, str]]) -> None:
    tool, arguments = call
    evaluator = LocalEvaluator(**rules)
    verdict = evaluator.evaluate(fresh_request(tool, arguments))
    matching = {
        kind: [
            r
            for r in evaluator.rules
            if r.kind == kind and r.matches_tool(tool) and r.matches_args(arguments)
        ]
        for kind in ("allow", "ask", "deny")
    }
    if matching["deny"]:
        assert verdict.effect == "deny"
    elif matching["ask"]:
        assert verdict.effect == "ask"
    elif matching["allow"]:
        assert verdict.effect == "allow"
    else:
        assert verdict.effect == "deny"  # R4: nothing matching denies
    # Adding an allow-everything rule never overrides a matching deny.
    widened = LocalEvaluator(allow=[*rules["allow"], "*.*"], ask=rules["ask"], deny=rules["deny"])
    if matching["deny"]:
        assert widened.evaluate(fresh_request(tool, arguments)).effect == "deny"
