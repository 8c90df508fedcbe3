"""R3: a deny from any evaluator or guardrail cannot be overridden by any grant, ask
answer, session setting or combination of evaluators."""

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import ALICE, Recorder, coding_registry

from clearance import Grant, GrantScope, Harness, MemoryGrantStore, MemoryJournal
from clearance.guardrails.base import ArgumentGuardrail, GuardrailOutcome
from clearance.harness.approvals import Answer
from clearance.policy import AllOf, AuthzRequest, Verdict

pytestmark = pytest.mark.anyio

effects = st.sampled_from(["allow", "deny", "ask"])
guard_actions = st.sampled_from(["allow", "block", "ask", "redact"])
answers = st.sampled_from(["allow_once", "allow_session", "allow_always", "deny"])


class Fixed:
    def __init__(self, effect: str) -> None:
        self.effect = effect

    def evaluate(self, request: AuthzRequest) -> Verdict:
        return Verdict(self.effect, (f"fixed-{self.effect}",))  # type: ignore[arg-type]


@given(
    verdicts=st.lists(effects, min_size=1, max_size=3),
    actions=st.lists(guard_actions, max_size=3),
    answer=answers,
    grant=st.booleans(),
    repeat=st.integers(1, 3),
)
async def test_r3_deny_is_never_executed(
    verdicts: list[str], actions: list[str], answer: Answer, grant: bool, repeat: int
) -> None:
    rec = Recorder()
    store = MemoryGrantStore()
    if grant:  # a broad, standing grant for everything the call could touch
        store.add(Grant("g1", 'User::"alice"', "files.write_file", GrantScope.tool(), "always"))

    def make(action: str) -> Any:
        def check(arguments: dict[str, Any], ctx: Any) -> GuardrailOutcome:
            return {
                "allow": GuardrailOutcome.allow(),
                "block": GuardrailOutcome.block("no"),
                "ask": GuardrailOutcome.ask("check"),
                "redact": GuardrailOutcome.redact(["/content"]),
            }[action]

        return ArgumentGuardrail(check, name=action)

    evaluator = AllOf(*(Fixed(v) for v in verdicts))
    denied = "deny" in verdicts or "block" in actions
    async with Harness(
        coding_registry(rec),
        evaluator=evaluator,
        argument_guardrails=[make(a) for a in actions],
        grant_store=store,
        journal=MemoryJournal(),
    ) as h:
        s = await h.create_session(principal=ALICE, on_permission_ask=lambda ask: answer)
        for i in range(repeat):
            out = await s.call_tool(
                "files__write_file", {"path": "a", "content": "c"}, call_id=f"c{i}"
            )
            if denied:
                assert out.status in ("denied", "blocked")
    if denied:
        assert rec.calls == []
    else:
        asked = "ask" in verdicts or "ask" in actions
        # write_file declares no facts, so its content decides: redacted, it cannot be shown
        # to a person, and an ask no grant answers is denied without asking (unshowable).
        unshowable = asked and not grant and "redact" in actions
        if unshowable:
            assert rec.calls == []
        elif not asked or grant or answer != "deny":
            assert len(rec.calls) == repeat


@given(effects_=st.lists(effects, min_size=1, max_size=4))
async def test_r3_all_of_denies_when_any_denies(effects_: list[str]) -> None:
    from clearance.policy import SessionInfo
    from clearance.policy.base import evaluate

    registry = coding_registry(Recorder())
    request = AuthzRequest(ALICE, registry.get("files.write_file").info, {}, SessionInfo("s"))
    verdict = await evaluate(AllOf(*(Fixed(e) for e in effects_)), request)
    if "deny" in effects_:
        assert verdict.effect == "deny"
    elif "ask" in effects_:
        assert verdict.effect == "ask"
    else:
        assert verdict.effect == "allow"
