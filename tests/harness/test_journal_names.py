"""One writer per journal file, whatever name it is opened by; any string can be recorded.

Issue 12 item 15: the single-writer lock was ``<path as given>.lock``, so the same database
opened through a symlink got a second writer (duplicate ``seq``, failed commits).
Issue 12 item 16: asked calls with a lone surrogate in their arguments were denied.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest
from postgres_support import fresh_schema
from support import ALICE, Recorder, coding_registry, harness

from clearance import JsonlJournal, SqliteJournal
from clearance.errors import JournalError
from clearance.harness.journal import Journal, JournalEvent, read_journal
from clearance.harness.journal_sqlite import read_sqlite
from clearance.policy import LocalEvaluator

pytestmark = pytest.mark.anyio


def _event(call_id: str = "c1") -> JournalEvent:
    return JournalEvent("tool_progress", "s1", "t1", call_id, {})


def _names(tmp_path: Path) -> dict[str, Path]:
    """Other names of ``tmp_path/data/j.db``: a file symlink, a directory symlink, a
    relative spelling with ``.`` and ``..``, and a chain of two symlinks."""
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    db = data / "j.db"
    (tmp_path / "link.db").symlink_to(db)
    (tmp_path / "dirlink").symlink_to(data, target_is_directory=True)
    (tmp_path / "chain.db").symlink_to(tmp_path / "link.db")
    return {
        "file symlink": tmp_path / "link.db",
        "directory symlink": tmp_path / "dirlink" / "j.db",
        "dot-dot spelling": Path(os.path.relpath(data / "sub" / ".." / "." / "j.db")),
        "symlink chain": tmp_path / "chain.db",
    }


@pytest.mark.parametrize(
    "name", ["file symlink", "directory symlink", "dot-dot spelling", "symlink chain"]
)
async def test_a_second_sqlite_writer_through_another_name_is_refused(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "data" / "j.db"
    other = _names(tmp_path)[name]
    journal = SqliteJournal(db)
    try:
        await journal.append(_event())
        with pytest.raises(JournalError, match="open for writing in another process or object"):
            SqliteJournal(other)
        await journal.append(_event("c2"))  # the first writer is unaffected
    finally:
        await journal.aclose()
    assert [e.seq for e in read_sqlite(db)] == [1, 2]


async def test_the_first_writer_may_come_through_the_symlink(tmp_path: Path) -> None:
    names = _names(tmp_path)
    journal = SqliteJournal(names["file symlink"])
    try:
        with pytest.raises(JournalError, match="open for writing"):
            SqliteJournal(tmp_path / "data" / "j.db")
        await journal.append(_event())
    finally:
        await journal.aclose()
    # The database is the symlink's target; nothing was created beside the symlink.
    assert (tmp_path / "link.db").is_symlink()
    assert [e.seq for e in read_sqlite(tmp_path / "data" / "j.db")] == [1]
    assert not (tmp_path / "link.db.lock").exists()
    assert not (tmp_path / "link.db-starts").exists()


async def test_a_start_log_left_by_a_crash_is_found_by_any_name(tmp_path: Path) -> None:
    """The start log belongs with the real file: a crash of a writer that opened the
    journal through a symlink is recovered by an open through the real name."""
    names = _names(tmp_path)
    journal = SqliteJournal(names["file symlink"])
    log = tmp_path / "data" / "j.db-starts"
    assert log.exists()
    journal.close()
    # What a crash leaves: a start only in the start log (a line is the row's columns).
    log.write_text('[7,1.0,"tool_started","s1","t1","c9",1,{"arguments":null}]\n')
    reopened = SqliteJournal(tmp_path / "data" / "j.db")
    try:
        types = [(e.seq, e.type, e.call_id) for e in reopened.events()]
    finally:
        await reopened.aclose()
    assert (7, "tool_started", "c9") in types
    assert types[-1][1:] == ("tool_finished", "c9")  # closed as interrupted (R7)


async def test_a_jsonl_writer_through_a_symlink_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    (tmp_path / "link.jsonl").symlink_to(path)
    journal = JsonlJournal(path)
    try:
        with pytest.raises(JournalError, match="open for writing"):
            JsonlJournal(tmp_path / "link.jsonl")
    finally:
        await journal.aclose()


LONE = "\ud800"


@pytest.mark.parametrize("kind", ["sqlite", "jsonl", "postgres"])
async def test_journals_record_and_read_back_lone_surrogates(kind: str, tmp_path: Path) -> None:
    with contextlib.ExitStack() as stack:
        await _lone_surrogates(kind, tmp_path, stack)


async def _lone_surrogates(kind: str, tmp_path: Path, stack: contextlib.ExitStack) -> None:
    ask_writes = LocalEvaluator(allow=["files.read_file"], ask=["files.write_file"])
    journal: Journal
    if kind == "postgres":
        from clearance.harness.journal import PostgresJournal

        url, _schema = stack.enter_context(fresh_schema())
        journal = PostgresJournal(url, host="h1")
    elif kind == "sqlite":
        journal = SqliteJournal(tmp_path / "j.db")
    else:
        journal = JsonlJournal(tmp_path / "j.l")
    rec = Recorder()
    arguments = {"path": f"a{LONE}b", "content": f"\udfff{LONE}"}
    async with harness(coding_registry(rec), evaluator=ask_writes, journal=journal) as h:
        s = await h.create_session(principal=ALICE, on_permission_ask=lambda ask: "allow_once")
        out = await s.call_tool("files__write_file", arguments, call_id="w1")
    assert out.ok, out.text
    assert rec.calls == [("files.write_file", arguments)]
    if kind == "postgres":
        reader = PostgresJournal(url, host="reader")
        stored = reader.events()
        reader.close()
    else:
        stored = read_journal(tmp_path / ("j.db" if kind == "sqlite" else "j.l"))
    asked = next(e for e in stored if e.type == "permission_asked")
    started = next(e for e in stored if e.type == "tool_started")
    assert asked.data["arguments"] == arguments
    assert started.data["arguments"] == arguments
