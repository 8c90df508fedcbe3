"""Shadow mode: a candidate evaluator beside the enforced one never changes an outcome, and
every disagreement is recorded."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import RuleSet
from support import ALICE, Recorder, coding_registry, harness

from clearance.harness.journal import MemoryJournal
from clearance.policy import LocalEvaluator

RULES = [
    "files.read_file",
    "files.*",
    "files.read_file(path=src/**)",
    "files.write_file(path=src/**)",
    "files.*(path=**/.env)",
    "files.list_dir",
    "shell.run",
    "shell.run(command=git *)",
]
PATHS = ["src/a.py", "src/.env", "docs/readme.md", "../etc/passwd", "src/../x"]
COMMANDS = ["git status", "rm -rf build", "ls"]

rule_sets = st.fixed_dictionaries(
    {
        "allow": st.lists(st.sampled_from(RULES), max_size=4, unique=True),
        "ask": st.lists(st.sampled_from(RULES), max_size=2, unique=True),
        "deny": st.lists(st.sampled_from(RULES), max_size=2, unique=True),
    }
)


@st.composite
def calls(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    tool = draw(
        st.sampled_from(["files.read_file", "files.write_file", "files.list_dir", "shell.run"])
    )
    if tool == "shell.run":
        arguments: dict[str, Any] = {"command": draw(st.sampled_from(COMMANDS))}
    else:
        arguments = {"path": draw(st.sampled_from(PATHS))}
        if tool == "files.write_file":
            arguments["content"] = "x"
    if draw(st.booleans()) and draw(st.booleans()) and draw(st.booleans()):
        arguments = {"unexpected": 1}  # invalid against the schema: ends before the evaluator
    return tool, arguments


async def _run(
    enforced: RuleSet, shadow: RuleSet | None, batch: list[Any]
) -> tuple[list[tuple[Any, ...]], list[tuple[str, dict[str, Any]]], MemoryJournal, list[Any]]:
    recorder = Recorder()
    journal = MemoryJournal()
    options: dict[str, Any] = {"evaluator": LocalEvaluator(**enforced), "journal": journal}
    if shadow is not None:
        options["shadow_evaluator"] = LocalEvaluator(**shadow)
    outcomes = []
    decisions = []
    async with harness(coding_registry(recorder), **options) as h:
        session = await h.create_session(
            principal=ALICE, on_permission_ask=lambda ask: "allow_once"
        )
        for n, (tool, arguments) in enumerate(batch):
            outcome = await session.call_tool(tool, arguments, call_id=f"c{n}")
            outcomes.append((outcome.status, outcome.decision, outcome.reasons))
            decisions.append(await h.decide(principal=ALICE, tool=tool, arguments=arguments))
    return outcomes, recorder.calls, journal, decisions


@pytest.mark.anyio
@given(enforced=rule_sets, shadow=rule_sets, batch=st.lists(calls(), min_size=1, max_size=6))
async def test_shadow_never_changes_an_outcome(
    enforced: RuleSet, shadow: RuleSet, batch: list[Any]
) -> None:
    plain, plain_ran, _, plain_decisions = await _run(enforced, None, batch)
    shadowed, shadow_ran, journal, decisions = await _run(enforced, shadow, batch)
    assert shadowed == plain
    assert shadow_ran == plain_ran
    assert [d.outcome for d in decisions] == [d.outcome for d in plain_decisions]
    assert all(d.shadow is None for d in plain_decisions)

    candidate = LocalEvaluator(**shadow)
    records = [e.data for e in journal.events() if e.type == "call_decided"]
    assert len(records) == len(batch)
    for record, decision in zip(records, decisions, strict=True):
        verdict = record.get("verdict")
        if verdict is None:  # ended before the evaluator: nothing to compare
            assert "shadow" not in record
            assert decision.shadow is None
            continue
        from clearance.policy.base import AuthzRequest, SessionInfo

        tool = next(
            t for t in coding_registry(Recorder()) if t.qualified_name == record["qualified_name"]
        )
        expected = candidate.evaluate(
            AuthzRequest(ALICE, tool.info, record["arguments"], SessionInfo("s"))
        )
        recorded = record["shadow"]
        assert recorded["effect"] == expected.effect
        assert recorded["agrees"] == (expected.effect == verdict["effect"])
        assert decision.shadow == recorded
