"""The ``id`` of ``process.read``, ``process.write`` and ``process.stop`` is a declared fact
(``ProcessFact``): real sessions, real processes, a real Cedar evaluator. A policy decides
on the process's command (``context.facts.id.command``), the ask for a write names it, a
grant covers only the exact call (never another command's process), the journal records
it, and an id that is not the session's own is refused before any policy, in the same
words whether it names nothing or another session's process."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from process_support import ECHO, Calls, content, context, registry, same_words, script
from support import ALICE, BOB, harness

from clearance import GrantScope, MemoryJournal, PermissionAsk, PermissionDecision
from clearance.facts import FactError, SessionFact
from clearance.harness.ask_display import ask_lines
from clearance.policy.cedar import CedarEvaluator
from clearance.policy.cedar.schema import generate_schema
from clearance.policy.testing import run_decision_tests
from clearance.toolsets.confinement import Confinement
from clearance.toolsets.process import ProcessFact, ProcessLimits, process_tools

pytestmark = pytest.mark.anyio

PY = sys.executable

POLICIES = """
@id("start") permit (principal, action == Action::"process.start", resource);
@id("read") permit (principal, action == Action::"process.read", resource);
@id("stop") permit (principal, action == Action::"process.stop", resource);
@id("ask-write-to-echo")
@ask("The agent wants to write to a process's input.")
permit (principal, action == Action::"process.write", resource)
when { context.facts.id.command like "*echo.py" };
@id("never-write-to-python-directly")
forbid (principal, action == Action::"process.write", resource)
when { context.facts.id.program like "*python*" && context.facts.id.command like "*-c*" };
"""


@pytest.fixture
def work(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


class Asked:
    """An ask callback that records each ask and gives the answers it is told, in turn."""

    def __init__(self, *answers: Any) -> None:
        self.asks: list[PermissionAsk] = []
        self.answers = list(answers)

    def __call__(self, ask: PermissionAsk) -> Any:
        self.asks.append(ask)
        return self.answers.pop(0)


async def test_the_id_fact_is_the_process_command_in_the_schema_and_the_policy(
    work: Path,
) -> None:
    reg = registry(work)
    schema = generate_schema(reg)
    common = next(iter(schema.values()))["commonTypes"]
    facts = [t for name, t in common.items() if name.endswith("Facts") and "write" in name]
    (record,) = facts
    assert record["attributes"]["id"]["attributes"] == {
        "command": {"type": "String"},
        "program": {"type": "String"},
    }
    journal = MemoryJournal()
    asked = Asked("allow_once")
    evaluator = CedarEvaluator(POLICIES)
    async with harness(reg, evaluator=evaluator, journal=journal) as h:
        calls = Calls(await h.create_session(principal=ALICE, on_permission_ask=asked))
        echo = await calls.start(script(work, "echo.py", ECHO))
        sleeper = await calls.start(shlex.join([PY, "-c", "import time; time.sleep(600)"]))
        await calls.read_until(echo["id"], "ready\n")
        written = await calls("write", id=echo["id"], input="one\n")
        assert written.status == "ok" and "got one" in await calls.read_until(echo["id"], "got")
        # the same tool, another process: its command decides (a forbid on it)
        refused = await calls("write", id=sleeper["id"], input="x\n")
        assert refused.status == "denied" and refused.decision == "deny"
        assert "never-write-to-python-directly" in refused.reasons
        assert len(asked.asks) == 1
        decided = [
            e.data for e in journal.events(call_id=written.call_id) if e.type == "call_decided"
        ]
        assert decided[0]["facts"]["id"] == {
            "command": echo["command"],
            "program": PY,
        }


async def test_the_ask_for_a_write_names_the_command(work: Path) -> None:
    asked = Asked("deny")
    async with harness(registry(work), evaluator=CedarEvaluator(POLICIES)) as h:
        calls = Calls(await h.create_session(principal=ALICE, on_permission_ask=asked))
        echo = await calls.start(script(work, "echo.py", ECHO))
        outcome = await calls("write", id=echo["id"], input="rm -rf /\n")
        assert outcome.status == "denied"
    (ask,) = asked.asks
    assert ask.deciding == ("id",)
    assert ask.facts["id"]["command"] == echo["command"] == shlex.join([PY, "echo.py"])
    assert ask.notes["id"] == f"the process of: {echo['command']}"
    lines = ask_lines(ask.arguments, ask.deciding, width=80, notes=ask.notes)
    assert lines[0] == f'id: "{echo["id"]}"'
    assert lines[1] == f"  ! the process of: {echo['command']}"
    assert ask.to_json()["notes"]["id"] == ask.notes["id"]  # the journal's permission_asked


async def test_a_session_grant_for_one_commands_process_does_not_cover_another(
    work: Path,
) -> None:
    """The only scope offered is the exact call: "any arguments" would cover every process
    the session starts later, and an answer naming it is refused."""
    asked = Asked(PermissionDecision("allow_session"), "deny", "deny")
    async with harness(registry(work), evaluator=CedarEvaluator(POLICIES)) as h:
        calls = Calls(await h.create_session(principal=ALICE, on_permission_ask=asked))
        echo = await calls.start(script(work, "echo.py", ECHO))
        (work / "other").mkdir()
        other = await calls.start(script(work, "other/echo.py", ECHO))
        assert echo["command"] != other["command"]
        first = await calls("write", id=echo["id"], input="a\n")
        assert first.status == "ok"
        (ask,) = asked.asks
        assert [s.kind for s in ask.suggestions] == ["exact"]
        again = await calls("write", id=echo["id"], input="a\n")
        assert again.status == "ok" and again.grant is not None and len(asked.asks) == 1
        # the same input to another command's process: asked again (and denied)
        elsewhere = await calls("write", id=other["id"], input="a\n")
        assert elsewhere.status == "denied" and len(asked.asks) == 2
        assert "got a" not in await calls.read_until(other["id"], "ready\n")
        # an answer naming "any arguments" leaves the id free: refused, nothing granted
        asked.answers = [PermissionDecision("allow_session", scope=GrantScope.tool())]
        widened = await calls("write", id=other["id"], input="b\n")
        assert widened.status == "denied"
        assert len(h.grants.list()) == 1


async def test_an_unknown_or_foreign_id_is_refused_before_any_policy_in_the_same_words(
    work: Path,
) -> None:
    asked = Asked()
    journal = MemoryJournal()
    async with harness(registry(work), evaluator=CedarEvaluator(POLICIES), journal=journal) as h:
        alice = Calls(await h.create_session(principal=ALICE, on_permission_ask=asked))
        bob = Calls(await h.create_session(principal=BOB, on_permission_ask=asked))
        echo = await alice.start(script(work, "echo.py", ECHO))
        never = "p_" + "f" * 32
        for tool, extra in (("read", {}), ("write", {"input": "x\n"}), ("stop", {})):
            foreign = await bob(tool, id=echo["id"], **extra)
            unknown = await bob(tool, id=never, **extra)
            assert foreign.status == unknown.status == "blocked"
            assert f"no process {echo['id']!r} in this session" in foreign.text
            assert echo["command"] not in foreign.text
            assert same_words(unknown.text.replace(never, echo["id"]), foreign.text)
            records = [
                [e.data for e in journal.events(call_id=o.call_id) if e.type == "call_decided"]
                for o in (foreign, unknown)
            ]
            assert [r[0]["facts"] for r in records] == [
                {"error": f"argument /id (process): no process {i!r} in this session"}
                for i in (echo["id"], never)
            ]
        assert asked.asks == []  # no person was asked about another session's process
        assert content(await alice("read", id=echo["id"]))["running"] is True


def test_the_fact_is_read_only_in_a_session(work: Path) -> None:
    tools = process_tools(work, confinement=Confinement(kind="none"))
    (declared,) = next(t for t in tools if t.name == "write").facts.values()
    assert isinstance(declared, ProcessFact) and isinstance(declared, SessionFact)
    with pytest.raises(FactError, match="read in the session"):
        declared.canonicalize("p_" + "0" * 32)
    for value in ("p_" + "0" * 32, "../1", 7):
        with pytest.raises(FactError, match=r"no process .* in this session"):
            declared.canonicalize_in(value, "s_any")


def test_a_decision_test_supposes_the_process_a_fact_names(work: Path, tmp_path: Path) -> None:
    reg = registry(work)
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "policies.cedar").write_text(POLICIES)

    def case(facts: dict[str, Any], expect: str) -> dict[str, Any]:
        return {
            "name": f"write {len(tests)}",
            "principal": 'User::"alice"',
            "tool": "process.write",
            "arguments": {"id": "p_" + "0" * 32, "input": "x"},
            "expect": expect,
            "facts": facts,
        }

    echo = {"id": {"command": "python echo.py", "program": "python"}}
    direct = {"id": {"command": "python -c x", "program": "python"}}
    tests: list[dict[str, Any]] = []
    for facts, expect in (
        (echo, "ask"),
        (direct, "deny"),
        ({}, "blocked"),  # no session holds the id: refused, as in the pipeline
        ({"id": {"command": "x"}}, "ask"),  # not the kind's attributes
        ({"input": {"command": "x", "program": "x"}}, "ask"),  # no session fact there
    ):
        tests.append(case(facts, expect))
    (cases / "p.tests.json").write_text(json.dumps({"tests": tests}))
    report = run_decision_tests(cases, registry=reg)
    assert [r.passed for r in report.results] == [True, True, True, False, False]
    assert "must have exactly: command, program" in (report.results[3].problem or "")
    assert "name nothing of a session" in (report.results[4].problem or "")
    assert [r.actual for r in report.results[:3]] == ["ask", "deny", "blocked"]


def test_the_fact_names_a_process_only_in_the_session_that_started_it(work: Path) -> None:
    """Property: whatever id and session, the fact is the process's command exactly when
    that session started it, and otherwise one refusal that depends on the id alone (never
    on whether another session holds it)."""
    tools = {
        t.name: t
        for t in process_tools(
            work, confinement=Confinement(kind="none"), limits=ProcessLimits(grace=0.2)
        )
    }
    (kind,) = tools["write"].facts.values()
    assert isinstance(kind, ProcessFact)
    sleeper = shlex.join([PY, "-c", "import time; time.sleep(600)"])
    owned: dict[str, dict[str, Any]] = {}
    try:
        for session, command in (("s_a", sleeper), ("s_b", sleeper + " #b")):
            started = tools["start"].handler({"command": command}, context(session))
            owned[session] = json.loads(started.text)

        @settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(
            st.sampled_from(["s_a", "s_b", "s_c"]),
            st.one_of(
                st.sampled_from([p["id"] for p in owned.values()]),
                st.from_regex(r"\Ap_[0-9a-f]{32}\Z"),
            ),
        )
        def check(session: str, process_id: str) -> None:
            mine = owned.get(session, {})
            if mine.get("id") == process_id:
                canon = kind.canonicalize_in(process_id, session)
                assert canon.value == process_id
                assert canon.fact == {"command": mine["command"], "program": PY}
                return
            with pytest.raises(FactError) as refused:
                kind.canonicalize_in(process_id, session)
            assert refused.value.reason == f"no process {process_id!r} in this session"

        check()
    finally:
        for session, started in owned.items():
            tools["stop"].handler({"id": started["id"]}, context(session))
