"""The live log of ``clearance run`` and ``clearance demo``: calls that run side by side keep
their lines together, an ask is shown at once, and every line fits the width."""

from __future__ import annotations

from typing import Any

import click

from clearance.cli._live import LivePrinter
from clearance.harness.journal import JournalEvent


def _event(kind: str, call_id: str, **data: Any) -> JournalEvent:
    base = {"qualified_name": "files.read_file", "arguments": {"path": f"{call_id}.md"}}
    return JournalEvent(kind, "s1", "t1", call_id, {**base, **data})  # type: ignore[arg-type]


def _decided(call_id: str, outcome: str = "dispatched") -> JournalEvent:
    return _event("call_decided", call_id, outcome=outcome, decision="allow", reasons=["read"])


def _finished(call_id: str) -> JournalEvent:
    return _event("tool_finished", call_id, status="ok", result={"content": []}, message="done")


def _printer(columns: int = 80) -> tuple[LivePrinter, list[str]]:
    lines: list[str] = []
    return LivePrinter(lambda text: lines.append(click.unstyle(text)), 4, columns=columns), lines


def _owners(lines: list[str]) -> list[str]:
    return [line.split()[0] for line in lines]


def test_side_by_side_calls_print_one_after_the_other() -> None:
    printer, lines = _printer()
    # c2 is decided and even finishes before c1 does; c3 starts after c2
    for event in [_decided("c1"), _decided("c2"), _finished("c2"), _decided("c3")]:
        printer(event)
    assert _owners(lines) == ["c1", "c1"]  # c2 and c3 wait for c1
    printer(_finished("c1"))
    # c1 ends: c2 (already over) comes whole, then c3 so far, which is now the first
    assert _owners(lines) == ["c1"] * 3 + ["c2"] * 3 + ["c3"] * 2
    printer(_finished("c3"))
    assert _owners(lines)[-1] == "c3" and len(lines) == 9


def test_an_ask_is_shown_at_once_and_flush_prints_what_is_held() -> None:
    printer, lines = _printer()
    printer(_decided("c1"))
    printer(_decided("c2"))
    asked = _event("permission_asked", "c3", ask_id="a1", reason="write?", policies=["w"])
    printer(asked)  # c3's ask cannot wait for c1: a person may have to answer it
    assert "c3" in _owners(lines) and "c2" not in _owners(lines)
    assert printer.last_ask == "a1"  # its prompt need not show the arguments again
    printer.flush()
    assert _owners(lines).count("c2") == 2


def test_a_call_that_ends_before_the_evaluator_lets_the_next_one_print() -> None:
    printer, lines = _printer()
    printer(_event("call_decided", "c1", outcome="blocked", stage="facts", message="refused"))
    printer(_decided("c2"))
    assert _owners(lines) == ["c1", "c1", "c2", "c2"]


def test_lines_fit_the_width_decisions_wrap_and_results_are_cut() -> None:
    printer, lines = _printer(columns=60)
    long = "the agent wants to write a file in the workspace, and here is a long reason"
    printer(_event("call_decided", "c1", outcome="denied", stage="ask", message=long))
    printer(
        _event(
            "tool_finished",
            "c2",
            status="ok",
            result={"content": [{"type": "text", "text": "x" * 200 + "\nsecond line"}]},
        )
    )
    assert all(len(line) <= 60 for line in lines), lines
    assert [line for line in lines if line.startswith(" " * 15)]  # the reason continues
    words = " ".join(line[15:] for line in lines if " c1  " in line or line.startswith(" " * 15))
    assert long in " ".join(words.split())  # wrapped, nothing lost
    assert lines[-1].endswith("... (+1 lines)")


def test_what_the_agent_says_waits_for_held_lines_and_wraps() -> None:
    printer, lines = _printer(columns=40)
    printer(_decided("c1"))
    printer(_decided("c2"))
    printer.say("Now let me look at every file in the project, one by one.")
    assert _owners(lines)[:4] == ["c1", "c1", "c2", "c2"]
    said = lines[4:]
    assert said[0].startswith("agent  ") and len(said) > 1
    assert all(len(line) <= 40 for line in said)
