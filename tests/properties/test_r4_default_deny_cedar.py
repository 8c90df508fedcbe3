"""R4 default deny, for Cedar policies: a call that no permit's scope and condition match is
denied, with no policy named as its reason unless a forbid matched."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

# The policy and call model is the R3 property's (``tests`` is on the path).
from properties.test_r3_deny_wins_cedar import (
    CallCase,
    PolicySpec,
    build_evaluator,
    call_cases,
    policy_sets,
    request_for,
)


@given(policies=policy_sets(), calls=st.lists(call_cases(), min_size=1, max_size=8))
def test_r4_nothing_permitted_is_denied(policies: list[PolicySpec], calls: list[CallCase]) -> None:
    evaluator = build_evaluator(policies)
    for call in calls:
        permits = [p for p in policies if p.effect == "permit" and p.matches(call)]
        forbids = {p.name for p in policies if p.effect == "forbid" and p.matches(call)}
        verdict = evaluator.evaluate(request_for(call))
        if not permits:
            assert verdict.effect == "deny", (call, verdict)
            assert set(verdict.reasons) == forbids
            if not forbids:
                assert verdict.message is not None
                assert verdict.message.startswith("no policy permits")
        elif not forbids:
            # The model of matching is exact: what it says is permitted is not denied, and
            # it is an ask exactly when every matching permit asks.
            expected = "ask" if all(p.ask for p in permits) else "allow"
            assert verdict.effect == expected, (call, verdict)
            assert set(verdict.reasons) == {p.name for p in permits}


@given(
    policies=policy_sets().map(lambda ps: [p for p in ps if p.effect == "forbid"]),
    calls=st.lists(call_cases(), min_size=1, max_size=8),
)
def test_r4_forbids_alone_permit_nothing(policies: list[PolicySpec], calls: list[CallCase]) -> None:
    evaluator = build_evaluator(policies)
    assert all(evaluator.evaluate(request_for(c)).effect == "deny" for c in calls)
