"""Crash consistency (rule R7 under crashes), with real processes killed with SIGKILL.

A child process runs a harness over a durable journal; its blocking handler writes a
marker file once it runs and then waits forever. The test kills the child, reopens the
journal and checks that every start left open got exactly one ``interrupted`` end.

With ``"normal"`` durability a ``SqliteJournal`` start may be only in the start log
(``<path>-starts``) when the process dies; the ``held`` mode makes sure of it by keeping
the writer thread busy before the blocking calls.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

from clearance import JournalEvent
from clearance.harness.journal import JsonlJournal, SqliteJournal, read_journal

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX"),
]

CHILD = textwrap.dedent(
    """
    import functools
    import sys
    from pathlib import Path

    import anyio

    from clearance import Harness, Principal, Tool, ToolRegistry
    from clearance.harness.journal import JsonlJournal, SqliteJournal
    from clearance.policy import LocalEvaluator

    sink, path, markers, durability, mode = sys.argv[1:6]
    SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}}


    async def ok(arguments, ctx):
        return "done"


    async def block(arguments, ctx):
        Path(markers, f"started-{arguments['n']}").write_text("x")
        await anyio.sleep_forever()


    async def main():
        registry = ToolRegistry()
        registry.register(
            "t",
            [
                Tool("ok", ok, input_schema=SCHEMA, read_only=True),
                Tool("block", block, input_schema=SCHEMA, read_only=True),
            ],
        )
        opener = SqliteJournal if sink == "sqlite" else JsonlJournal
        journal = opener(path, durability=durability)
        async with Harness(
            registry, evaluator=LocalEvaluator(allow=["t.*"]), journal=journal
        ) as harness:
            if mode == "load":
                # Calls in many sessions at once, until killed.
                async def worker(w):
                    session = await harness.create_session(principal=Principal("User", "u"))
                    for i in range(10**9):
                        await session.call_tool("t__ok", {"n": i}, call_id=f"w{w}-{i}")
                        if w == 0 and i == 200:
                            Path(markers, "started-0").write_text("x")

                async with anyio.create_task_group() as tg:
                    for w in range(8):
                        tg.start_soon(worker, w)
                return
            session = await harness.create_session(
                principal=Principal("User", "alice"), session_id="s1"
            )
            for i in range(3):
                await session.call_tool("t__ok", {"n": i}, call_id=f"ok{i}")
            if mode == "held":
                # Keep the writer thread busy from here on (a slow disk, a starved
                # thread): nothing appended later is committed before the kill.
                import threading

                from clearance.harness.journal._sqlite_writer import Control

                entered = threading.Event()

                def hold(db):
                    entered.set()
                    threading.Event().wait()

                journal._writer.put(Control(hold))
                await anyio.to_thread.run_sync(entered.wait)
            async with anyio.create_task_group() as tg:
                for n in range(3):
                    tg.start_soon(
                        functools.partial(
                            session.call_tool, "t__block", {"n": n}, call_id=f"block{n}"
                        )
                    )


    anyio.run(main)
    """
)


def run_and_kill(
    tmp_path: Path, sink: str, durability: str, *, mode: str = "block", markers: int = 3
) -> Path:
    """Start the child, wait until its handlers run, SIGKILL it; return the journal path."""
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    journal = tmp_path / ("journal.db" if sink == "sqlite" else "journal.jsonl")
    marker_dir = tmp_path / "markers"
    marker_dir.mkdir()
    child = subprocess.Popen(
        [sys.executable, str(script), sink, str(journal), str(marker_dir), durability, mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while len(list(marker_dir.iterdir())) < markers:
            if child.poll() is not None:
                _, err = child.communicate()
                pytest.fail(f"the child exited early ({child.returncode}): {err.decode()}")
            if time.monotonic() > deadline:
                pytest.fail("the child's handlers did not start in time")
            time.sleep(0.01)  # polling another process: there is no event to wait on
        os.kill(child.pid, signal.SIGKILL)
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL
    return journal


def start_log(path: Path) -> list[tuple[int, str, str | None]]:
    """``(seq, type, call_id)`` of each whole line of a SQLite journal's start log."""
    try:
        lines = Path(f"{path}-starts").read_bytes().splitlines(keepends=True)
    except FileNotFoundError:
        return []
    rows = [json.loads(line) for line in lines if line.endswith(b"\n")]
    return [(row[0], row[2], row[5]) for row in rows]


def by_call(events: list[JournalEvent]) -> dict[str | None, Counter[str]]:
    counts: dict[str | None, Counter[str]] = {}
    for event in events:
        counts.setdefault(event.call_id, Counter())[event.type] += 1
    return counts


def check_r7_after_crash(events: list[JournalEvent]) -> None:
    """Every start has exactly one end; every end has its start; one decision per call."""
    for call_id, counts in by_call(events).items():
        if call_id is None:
            continue
        assert counts["call_decided"] == 1, (call_id, counts)
        assert counts["tool_started"] == counts["tool_finished"] <= 1, (call_id, counts)


def open_journal(sink: str, path: Path) -> SqliteJournal | JsonlJournal:
    return SqliteJournal(path) if sink == "sqlite" else JsonlJournal(path)


@pytest.mark.parametrize(
    ("sink", "durability"), [("sqlite", "normal"), ("sqlite", "full"), ("jsonl", "normal")]
)
async def test_sigkill_leaves_interrupted_ends(sink: str, durability: str, tmp_path: Path) -> None:
    path = run_and_kill(tmp_path, sink, durability)
    # What the files hold: the committed records and, for SQLite, the start log's.
    before: set[tuple[str, str | None]] = {(e.type, e.call_id) for e in read_journal(path)}
    before |= {(type_, call_id) for _, type_, call_id in start_log(path)}
    starts = {call_id for type_, call_id in before if type_ == "tool_started"}
    ends = {call_id for type_, call_id in before if type_ == "tool_finished"}
    # tool_started is recorded before a handler runs (committed, or in the start log): all
    # three blocked calls are there.
    assert starts - ends == {"block0", "block1", "block2"}

    journal = open_journal(sink, path)
    try:
        events = list(journal.events())
        last = events[-1].seq
        appended = await journal.append(JournalEvent("session_closed", "s1", None, None, {}))
        assert appended.seq == last + 1  # seq continues after the crash
    finally:
        await journal.aclose()

    check_r7_after_crash(events)
    interrupted = [e for e in events if e.data.get("status") == "interrupted"]
    assert sorted(str(e.call_id) for e in interrupted) == ["block0", "block1", "block2"]
    started_seq = {e.call_id: e.seq for e in events if e.type == "tool_started"}
    for end in interrupted:
        assert end.session_id == "s1"
        assert end.data["started_seq"] == started_seq[end.call_id]
        assert end.data["qualified_name"] == "t.block"
        assert end.data["duration_us"] is None
        assert end.seq > max(started_seq.values())
    for n in range(3):
        assert [e.data.get("status") for e in events if e.call_id == f"ok{n}"][-1] == "ok"

    # Recovery happens once: a second open finds nothing left to close.
    again = open_journal(sink, path)
    try:
        assert len(list(again.events())) == len(events) + 1
    finally:
        await again.aclose()
    if sink == "sqlite":
        with sqlite3.connect(path) as db:
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)


async def test_sigkill_restores_starts_only_in_the_start_log(tmp_path: Path) -> None:
    path = run_and_kill(tmp_path, "sqlite", "normal", mode="held")
    # The handlers ran, yet nothing of the blocked calls reached the database: their
    # decisions and starts are only in the start log, with the seq they were given.
    committed = read_journal(path)
    assert not [e for e in committed if str(e.call_id).startswith("block")]
    logged = [(type_, call_id) for _, type_, call_id in start_log(path)]
    for n in range(3):
        assert ("call_decided", f"block{n}") in logged
        assert ("tool_started", f"block{n}") in logged
    last_logged = max(seq for seq, _, _ in start_log(path))

    journal = SqliteJournal(path)
    try:
        events = list(journal.events())
        assert start_log(path) == []  # restored, then emptied
        appended = await journal.append(JournalEvent("session_closed", "s1", None, None, {}))
    finally:
        await journal.aclose()

    seqs = [e.seq for e in events]
    assert seqs == list(range(1, len(seqs) + 1))  # restored in place: no gaps
    assert appended.seq == seqs[-1] + 1 > last_logged  # seq continues after both
    check_r7_after_crash(events)
    started = {e.call_id: e for e in events if e.type == "tool_started"}
    interrupted = [e for e in events if e.data.get("status") == "interrupted"]
    assert sorted(str(e.call_id) for e in interrupted) == ["block0", "block1", "block2"]
    for end in interrupted:
        start = started[end.call_id]
        assert end.data["started_seq"] == start.seq
        assert start.data["qualified_name"] == "t.block"
        assert start.data["arguments"] == {"n": int(str(end.call_id)[-1])}
        assert end.seq > last_logged
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)


@pytest.mark.parametrize("durability", ["normal", "off"])
async def test_sigkill_under_load_recovers_a_consistent_journal(
    durability: str, tmp_path: Path
) -> None:
    path = run_and_kill(tmp_path, "sqlite", durability, mode="load", markers=1)
    journal = SqliteJournal(path)
    try:
        events = list(journal.events())
    finally:
        await journal.aclose()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    if durability == "normal":  # 201 calls of worker 0 started, so 200 of them ended
        assert len([e for e in events if e.type == "tool_finished"]) >= 200
    seqs = [e.seq for e in events]
    assert seqs == list(range(1, len(seqs) + 1))  # commits are whole and in order: no gaps
    check_r7_after_crash(events)
