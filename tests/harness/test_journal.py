"""The journal sinks, the typed record form, UI events, and ``clearance journal``."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from hypothesis import given, settings
from hypothesis import strategies as st
from postgres_support import fresh_schema
from pydantic import BaseModel

import clearance
import clearance.harness.journal._sqlite_writer as sqlite_writer
from clearance import (
    CallContext,
    Harness,
    JournalError,
    JournalEvent,
    MemoryJournal,
    Principal,
    SqliteGrantStore,
    StaleAuthorizationError,
    Tool,
    ToolRegistry,
)
from clearance._limits import storable
from clearance.config import default_journal_path
from clearance.harness.journal import (
    EVENT_TYPES,
    Durability,
    Journal,
    JsonlJournal,
    SqliteJournal,
    encode_data,
    event_json_schema,
    parse_event,
    read_journal,
)
from clearance.harness.journal._sqlite_writer import MAX_PENDING, Control
from clearance.harness.journal._start_log import parse_line, row_line, write_all
from clearance.harness.journal_sqlite import MIGRATIONS, SCHEMA_VERSION, read_sqlite
from clearance.policy import LocalEvaluator

pytestmark = pytest.mark.anyio

ALICE = Principal("User", "alice")
SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer"}, "token": {"type": "string"}},
    "additionalProperties": False,
}


def registry() -> ToolRegistry:
    async def ok(arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        await ctx.progress("halfway", {"step": 1})
        return {"ran": True}

    def fails(arguments: dict[str, Any], ctx: CallContext) -> str:
        raise RuntimeError("boom")

    reg = ToolRegistry()
    reg.register(
        "t",
        [
            Tool("ok", ok, input_schema=SCHEMA, sensitive=["/token"]),
            Tool("fails", fails, input_schema=SCHEMA),
            Tool("asked", ok, input_schema=SCHEMA),
            Tool("denied", ok, input_schema=SCHEMA),
        ],
    )
    return reg


def evaluator() -> LocalEvaluator:
    return LocalEvaluator(allow=["t.ok", "t.fails"], ask=["t.asked"], deny=["t.denied"])


def event(type_: Any = "tool_progress", call_id: str | None = "c1", **data: Any) -> JournalEvent:
    return JournalEvent(type_, "s1", "t1", call_id, data)


_POSTGRES: dict[Path, str] = {}
"""A test's ``tmp_path`` -> the URL of its PostgreSQL schema (see :func:`_postgres_kind`)."""


@pytest.fixture(autouse=True)
def _postgres_kind(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[None]:
    """A test parametrized with ``kind="postgres"`` gets a schema of its own on the test
    server (skipped without one, failed in CI), which :func:`open_sink` opens."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is None or callspec.params.get("kind") != "postgres":
        yield
        return
    with fresh_schema() as (url, _schema):
        _POSTGRES[tmp_path] = url
        try:
            yield
        finally:
            del _POSTGRES[tmp_path]


def open_sink(kind: str, tmp_path: Path, durability: Durability = "normal") -> Journal:
    if kind == "jsonl":
        return JsonlJournal(tmp_path / "j.jsonl", durability=durability)
    if kind == "sqlite":
        return SqliteJournal(tmp_path / "j.db", durability=durability)
    if kind == "postgres":
        from clearance.harness.journal import PostgresJournal

        return PostgresJournal(_POSTGRES[tmp_path], host="h1", durability=durability)
    return MemoryJournal()


async def mixed_run(journal: Journal, *, withdrawn: bool = False) -> None:
    """Allowed, failing, asked, denied, invalid calls; with ``withdrawn``, one of every
    kind of record (a host's authorization withdrawn when its grant is revoked too)."""
    async with Harness(
        registry(), evaluator=evaluator(), journal=journal, journal_messages=withdrawn
    ) as harness:
        session = await harness.create_session(
            principal=ALICE, session_id="s1", on_permission_ask=lambda ask: "allow_session"
        )
        session.add_user_message("Count to four.")  # journaled (message_added) with withdrawn
        session.add_tool_result("t.ok", "c0", {"counted": [1, 2]})
        await session.call_tool("t__ok", {"n": 1, "token": "hunter2"}, call_id="c1", turn_id="t1")
        await session.call_tool("t__fails", {"n": 2}, call_id="c2")
        await session.call_tool("t__asked", {"n": 3}, call_id="c3")
        await session.call_tool("t__denied", {"n": 4}, call_id="c4")
        await session.call_tool("t__ok", {"n": "four"}, call_id="c5")
        await session.call_tool("t__nope", {}, call_id="c6")
        if not withdrawn:
            return
        # An authorization whose grant is revoked before it runs is withdrawn (R12).
        auth = await session.authorize("t__asked", {"n": 3}, call_id="c7")
        assert auth.allowed and auth.grant is not None
        harness.grants.revoke(auth.grant)
        with pytest.raises(StaleAuthorizationError):
            async with session.execution("c7"):
                raise AssertionError("ran on a revoked grant")


# --- every sink ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["memory", "jsonl", "sqlite", "postgres"])
async def test_append_assigns_seq_and_events_filter(kind: str, tmp_path: Path) -> None:
    journal = open_sink(kind, tmp_path)
    try:
        first = await journal.append(event(call_id="c1"))
        second = await journal.append(JournalEvent("tool_progress", "s2", None, "c1", {}))
        third = await journal.append(event(call_id="c2", message="x"))
        # PostgreSQL counts seq per session (sessions of many hosts interleave).
        seqs = [1, 1, 2] if kind == "postgres" else [1, 2, 3]
        assert [first.seq, second.seq, third.seq] == seqs
        assert [(e.session_id, e.seq) for e in journal.events()] == [
            ("s1", seqs[0]),
            ("s2", seqs[1]),
            ("s1", seqs[2]),
        ]
        assert [e.seq for e in journal.events(session_id="s1")] == [seqs[0], seqs[2]]
        assert [e.seq for e in journal.events(call_id="c1")] == seqs[:2]
        assert [e.seq for e in journal.events(session_id="s1", call_id="c2")] == [seqs[2]]
        read = next(iter(journal.events(call_id="c2")))
        assert read.to_json() == third.to_json()
    finally:
        await journal.aclose()


@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "postgres"])
@pytest.mark.parametrize("durability", ["normal", "full", "off"])
async def test_seq_continues_after_reopen(
    kind: str, durability: Durability, tmp_path: Path
) -> None:
    journal = open_sink(kind, tmp_path, durability)
    for _ in range(3):
        await journal.append(event())
    await journal.aclose()
    journal = open_sink(kind, tmp_path, durability)
    try:
        assert (await journal.append(event())).seq == 4
        assert [e.seq for e in journal.events()] == [1, 2, 3, 4]
    finally:
        await journal.aclose()


@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "postgres"])
async def test_open_marks_unfinished_starts_interrupted_once(kind: str, tmp_path: Path) -> None:
    journal = open_sink(kind, tmp_path)
    await journal.append(event("tool_started", "c1", tool="t__ok", correlation_id="k1"))
    await journal.append(event("tool_started", "c2", tool="t__ok", correlation_id="k2"))
    await journal.append(event("tool_finished", "c2", status="ok"))
    await journal.aclose()  # c1 still open, as after a crash

    for _ in range(2):  # the second open finds nothing left to close
        journal = open_sink(kind, tmp_path)
        try:
            ends = [e for e in journal.events(call_id="c1") if e.type == "tool_finished"]
        finally:
            await journal.aclose()
        assert len(ends) == 1
        assert ends[0].seq == 4
        assert ends[0].data["status"] == "interrupted"
        assert ends[0].data["started_seq"] == 1
        assert ends[0].data["correlation_id"] == "k1"
        assert ends[0].turn_id == "t1"


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
async def test_a_second_writer_is_refused(kind: str, tmp_path: Path) -> None:
    journal = open_sink(kind, tmp_path)
    try:
        with pytest.raises(JournalError, match="open for writing"):
            open_sink(kind, tmp_path)
        await journal.append(event())  # the first one is unaffected
    finally:
        await journal.aclose()
    open_sink(kind, tmp_path)  # free again once closed


@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "postgres"])
async def test_closed_journal_refuses_appends_but_reads(kind: str, tmp_path: Path) -> None:
    journal = open_sink(kind, tmp_path)
    await journal.append(event())
    await journal.aclose()
    await journal.aclose()  # idempotent
    with pytest.raises(JournalError, match="closed"):
        await journal.append(event())
    assert [e.seq for e in journal.events()] == [1]


@pytest.mark.parametrize("kind", ["memory", "jsonl", "sqlite", "postgres"])
async def test_records_have_the_documented_form(kind: str, tmp_path: Path) -> None:
    journal = open_sink(kind, tmp_path)
    await mixed_run(journal, withdrawn=True)
    events = list(open_sink(kind, tmp_path).events()) if kind != "memory" else journal.events()
    # policies_reloaded, a record of the harness, needs a Cedar set that reloads: its
    # form is checked in tests/harness/test_reload_journal.py.
    assert {e.type for e in events} == set(EVENT_TYPES) - {"policies_reloaded"}
    for e in events:
        record = parse_event(e)
        assert record.type == e.type and record.seq == e.seq
        assert undocumented(record) == [], (e.type, undocumented(record))
    decided = {e.call_id: e.data for e in events if e.type == "call_decided"}
    messages = [(e.data, e.call_id) for e in events if e.type == "message_added"]
    assert messages == [
        ({"role": "user", "content": "Count to four."}, None),
        ({"role": "tool", "tool": "t.ok", "call_id": "c0", "content": {"counted": [1, 2]}}, None),
    ]
    first_call = min(e.seq for e in events if e.call_id == "c1")
    assert all(e.seq < first_call for e in events if e.type == "message_added")
    assert decided["c1"]["arguments"] == {"n": 1, "token": "[REDACTED]"}
    assert decided["c3"]["ask"]["answer"] == "allow_session"
    assert decided["c4"]["outcome"] == "denied" and decided["c4"]["stage"] == "evaluator"
    assert decided["c5"]["outcome"] == "invalid" and decided["c5"]["schema"]["valid"] is False
    assert decided["c6"]["decision"] is None


def undocumented(model: BaseModel, where: str = "") -> list[str]:
    """Fields a record carries that its model does not describe."""
    found = [f"{where}/{key}" for key in model.model_extra or {}]
    for name in type(model).model_fields:
        value = getattr(model, name)
        values = value if isinstance(value, list) else [value]
        for item in values:
            if isinstance(item, BaseModel):
                found += undocumented(item, f"{where}/{name}")
    return found


def test_parse_event_rejects_a_malformed_record() -> None:
    with pytest.raises(ValueError):
        parse_event(event("tool_finished", status="exploded", duration_us=1))
    with pytest.raises(ValueError):
        parse_event({**event().to_json(), "type": "nonsense"})


def test_json_schema_names_every_record_type() -> None:
    schema = event_json_schema()
    text = json.dumps(schema)
    for type_ in EVENT_TYPES:
        assert f'"{type_}"' in text
    assert schema["discriminator"]["propertyName"] == "type"


def test_stable_json_form() -> None:
    e = JournalEvent(
        "tool_started", "s1", None, "c1", {"arguments": {"é": "\ud800"}}, ts=1.5, seq=7
    )
    assert list(e.to_json()) == [
        "version",
        "seq",
        "ts",
        "type",
        "session_id",
        "turn_id",
        "call_id",
        "data",
    ]
    text = encode_data(e.to_json())
    assert text.isascii()  # a lone surrogate cannot break a write
    assert JournalEvent.from_json(json.loads(text)) == e


def test_encode_data_never_writes_a_repr() -> None:
    class Secretive:
        def __repr__(self) -> str:
            return "hunter2"

        __str__ = __repr__

    text = encode_data({"a": Secretive(), "b": {3, 1}, "c": (1, 2)})
    assert json.loads(text) == {"a": "<Secretive>", "b": [1, 3], "c": [1, 2]}


# --- SQLite ---------------------------------------------------------------------------------


async def test_sqlite_schema_is_versioned_and_indexed(tmp_path: Path) -> None:
    journal = SqliteJournal(tmp_path / "j.db")
    await journal.aclose()
    with sqlite3.connect(tmp_path / "j.db") as db:
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        indexes = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        mode = db.execute("PRAGMA journal_mode").fetchone()[0]
        plan = " ".join(
            str(r)
            for r in db.execute(
                "EXPLAIN QUERY PLAN SELECT seq FROM events WHERE type = 'tool_started' AND seq >= 1"
            )
        )
    assert meta["schema_version"] == str(SCHEMA_VERSION) == str(MIGRATIONS[-1][0])
    assert {"events_session_call", "events_call", "events_started"} <= indexes
    assert mode == "wal"
    assert "events_started" in plan  # recovery reads only the starts
    assert (tmp_path / "j.db").stat().st_mode & 0o077 == 0


async def test_sqlite_refuses_a_newer_schema_and_foreign_files(tmp_path: Path) -> None:
    newer = tmp_path / "newer.db"
    await SqliteJournal(newer).aclose()
    with sqlite3.connect(newer) as db:
        db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(JournalError, match="schema version 99"):
        SqliteJournal(newer)

    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(JournalError, match="not a SQLite database"):
        SqliteJournal(text)

    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE events (x)")
    with pytest.raises(JournalError, match="not a clearance journal"):
        SqliteJournal(foreign)
    with pytest.raises(JournalError, match="not a clearance journal"):
        read_sqlite(foreign)


async def test_sqlite_shares_its_file_with_the_grant_store(tmp_path: Path) -> None:
    path = tmp_path / "clearance.db"
    grants = SqliteGrantStore(path)
    journal = SqliteJournal(path)
    try:
        await journal.append(event())
        assert len(journal.events()) == 1
    finally:
        await journal.aclose()
        grants.close()
    SqliteGrantStore(path).close()


@contextlib.asynccontextmanager
async def writer_held(journal: SqliteJournal) -> AsyncIterator[None]:
    """Keep the writer thread busy (as a slow disk or a starved thread would): nothing
    appended meanwhile is committed until the block exits."""
    entered, release = threading.Event(), threading.Event()

    def hold(db: sqlite3.Connection) -> None:
        entered.set()
        release.wait()

    busy: concurrent.futures.Future[Any] = concurrent.futures.Future()
    journal._writer.put(Control(hold, future=busy))
    try:
        with anyio.fail_after(5):
            await anyio.to_thread.run_sync(entered.wait)
        yield
    finally:
        release.set()


def start_log(path: Path) -> Path:
    return Path(f"{path}-starts")


def rejected(path: Path) -> Path:
    """Where the start-log lines an open could not restore are set aside."""
    return Path(f"{path}-starts.rejected")


def logged(path: Path) -> list[tuple[int, str]]:
    """``(seq, type)`` of each line of a journal's start log."""
    lines = start_log(path).read_bytes().splitlines()
    return [(row[0], row[2]) for row in map(json.loads, lines)]


def crash_copy(path: Path, directory: Path) -> Path:
    """The journal's files as a process crash would leave them (the page cache is the
    files): a copy of the database, its WAL and its start log, taken while it is open."""
    directory.mkdir()
    for name in (path.name, f"{path.name}-wal", f"{path.name}-starts"):
        if (path.parent / name).exists():
            shutil.copyfile(path.parent / name, directory / name)
    return directory / path.name


async def test_sqlite_normal_logs_tool_started_before_append_returns(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    journal = SqliteJournal(path, durability="normal")
    try:
        async with writer_held(journal):
            await journal.append(event("call_decided"))
            await journal.append(event("tool_started", correlation_id="k1"))
            # Nothing is committed: both are in the start log, the start's line last.
            assert read_sqlite(path) == []
            assert logged(path) == [(1, "call_decided"), (2, "tool_started")]
            crashed = crash_copy(path, tmp_path / "crashed")
        await journal.append(event("tool_finished", status="ok"))
        await journal.flush()
        assert [e.type for e in read_sqlite(path)] == [
            "call_decided",
            "tool_started",
            "tool_finished",
        ]
    finally:
        await journal.aclose()
    assert not start_log(path).exists()  # a clean close removes it

    # Opening after the crash restores both records and closes the start (rule R7).
    reopened = SqliteJournal(crashed)
    try:
        events = reopened.events()
        assert [(e.seq, e.type) for e in events] == [
            (1, "call_decided"),
            (2, "tool_started"),
            (3, "tool_finished"),
        ]
        assert events[2].data["status"] == "interrupted"
        assert events[2].data["started_seq"] == 2
        assert events[2].data["correlation_id"] == "k1"
        assert (await reopened.append(event())).seq == 4  # seq continues after both
        assert start_log(crashed).stat().st_size == 0  # the restored rows are gone from it
    finally:
        await reopened.aclose()


async def test_the_start_log_holds_only_what_is_not_committed(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    journal = SqliteJournal(path)
    try:
        await journal.append(event("call_decided", "c1"))
        await journal.flush()
        async with writer_held(journal):
            await journal.append(event("tool_started", "c1"))
            await journal.append(event("tool_finished", "c1", status="ok"))  # not logged
            await journal.append(event("call_decided", "c2"))
            await journal.append(event("tool_started", "c2"))
            assert logged(path) == [
                (2, "tool_started"),
                (3, "tool_finished"),
                (4, "call_decided"),
                (5, "tool_started"),
            ]
    finally:
        await journal.aclose()


@pytest.mark.parametrize("durability", ["full", "off"])
async def test_only_normal_writes_a_start_log(durability: Durability, tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    journal = SqliteJournal(path, durability=durability)
    try:
        await journal.append(event("tool_started"))
        assert not start_log(path).exists()
    finally:
        await journal.aclose()


async def test_the_start_log_is_truncated_once_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_writer, "LOG_EVERY", 2)
    path = tmp_path / "j.db"
    journal = SqliteJournal(path)
    try:
        await journal.append(event("tool_started", "c1"))
        # A flush ends the writer's round that took the start; the next one starts after
        # that round has looked after the log.
        await journal.flush()
        await journal.flush()
        assert logged(path) == [(1, "tool_started")]  # one commit: not yet
        await journal.append(event("tool_started", "c2"))
        await journal.flush()
        await journal.flush()
        assert start_log(path).stat().st_size == 0
        await journal.append(event("tool_started", "c3"))
        assert logged(path) == [(3, "tool_started")]
    finally:
        await journal.aclose()
    assert not start_log(path).exists()
    assert [e.seq for e in read_sqlite(path)] == [1, 2, 3]


async def test_a_start_log_never_wholly_committed_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Starts that keep coming leave no moment with the whole log committed: past its size
    # limit the writer replaces it with a file of the rows it has not committed.
    monkeypatch.setattr(sqlite_writer, "LOG_MAX", 1)
    path = tmp_path / "j.db"
    journal = SqliteJournal(path)
    try:
        await journal.append(event("tool_started", "c1"))
        async with writer_held(journal):  # takes c1's start first and commits it
            await journal.append(event("tool_finished", "c1", status="ok"))
            await journal.append(event("tool_started", "c2"))
            assert logged(path) == [(1, "tool_started"), (2, "tool_finished"), (3, "tool_started")]
            second = writer_held(journal)  # queued behind the two records
        async with second:  # the round that committed c1 ended by replacing the log
            assert logged(path) == [(2, "tool_finished"), (3, "tool_started")]
            assert start_log(path).stat().st_mode & 0o077 == 0
        await journal.append(event("tool_started", "c3"))  # appends to the new file
        assert logged(path)[-1] == (4, "tool_started")
    finally:
        await journal.aclose()
    assert [e.seq for e in read_sqlite(path)] == [1, 2, 3, 4]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=200)
@given(
    seq=st.integers(1, 2**62),
    ts=st.floats(allow_nan=False),
    type_=st.sampled_from(EVENT_TYPES),
    ids=st.tuples(st.text(), st.none() | st.text(), st.none() | st.text()),
    data=st.dictionaries(st.text(), json_values, max_size=4),
)
def test_start_log_lines_give_back_the_row(
    seq: int, ts: float, type_: str, ids: tuple[str, str | None, str | None], data: Any
) -> None:
    row = (seq, ts, type_, *ids, 1, encode_data(data))
    line = row_line(row).encode("ascii")
    assert line.count(b"\n") == 1 and line.endswith(b"\n")
    if all(i is None or storable(i) for i in ids):
        assert parse_line(line) == row
    else:  # append refuses such ids; a line holding one is set aside (issue 38)
        with pytest.raises(ValueError, match="NUL or a lone surrogate"):
            parse_line(line)


async def test_a_torn_last_start_log_line_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    journal = SqliteJournal(path)
    try:
        async with writer_held(journal):
            await journal.append(event("tool_started", "c1"))
            crashed = crash_copy(path, tmp_path / "crashed")
    finally:
        await journal.aclose()
    with start_log(crashed).open("ab") as fh:
        fh.write(b'[2,1.5,"tool_started","s1","t1","c2",1,{"tool":"t')  # killed mid-write
    reopened = SqliteJournal(crashed)
    try:
        assert [(e.seq, e.type, e.call_id) for e in reopened.events()] == [
            (1, "tool_started", "c1"),
            (2, "tool_finished", "c1"),
        ]
    finally:
        await reopened.aclose()


async def test_a_start_log_line_that_cannot_be_restored_is_set_aside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 38: a start log holding a record the journal cannot restore (not a row; an id
    with a lone surrogate or a NUL, as an older writer let through; a seq out of range)
    never blocks a restart: each such line is reported and set aside, the others kept."""
    path = tmp_path / "j.db"
    await SqliteJournal(path).aclose()
    bad = [
        b'{"not": "a row"}\n',
        b'[2,1.5,"tool_started","s1",null,"mcp-\\ud800-1",1,{}]\n',
        b'[3,1.5,"tool_started","s1",null,"c\\u0000",1,{}]\n',
        b'[99999999999999999999,1.5,"tool_started","s1",null,"c9",1,{}]\n',
    ]
    good = b'[1,1.5,"tool_started","s1",null,"c1",1,{}]\n'
    start_log(path).write_bytes(bad[0] + good + b"".join(bad[1:]))
    reopened = SqliteJournal(path)
    try:
        assert [(e.seq, e.type, e.call_id) for e in reopened.events()] == [
            (1, "tool_started", "c1"),
            (2, "tool_finished", "c1"),  # the kept start, closed as interrupted (R7)
        ]
        await reopened.append(event("call_decided", "c2"))  # and the journal writes
    finally:
        await reopened.aclose()
    assert rejected(path).read_bytes() == b"".join(bad)
    assert os.stat(rejected(path)).st_mode & 0o777 == 0o600
    assert caplog.text.count("set aside in j.db-starts.rejected") == 4
    assert "line 3: not a start-log record (an id holds a NUL or a lone surrogate)" in caplog.text
    assert not start_log(path).exists()  # closed cleanly: nothing left to restore


@pytest.mark.parametrize("call_id", ["mcp-\ud800-1", "c\x00", "\udfff"])
@pytest.mark.parametrize("durability", ["normal", "full", "off"])
async def test_an_id_no_store_can_hold_fails_its_record_alone(
    tmp_path: Path, call_id: str, durability: Any
) -> None:
    """Issue 38: a call id with a lone surrogate stopped the SQLite writer for good (every
    later call denied) and poisoned the start log. Now that record alone is refused, at
    append, and the journal goes on; a restart finds nothing to set aside."""
    path = tmp_path / "j.db"
    journal = SqliteJournal(path, durability=durability)
    try:
        await journal.append(event("call_decided", "c1"))
        for type_ in ("call_decided", "tool_started", "tool_finished"):
            with pytest.raises(JournalError, match="an id holds a NUL or a lone surrogate"):
                await journal.append(event(type_, call_id))
        with pytest.raises(JournalError, match="an id holds"):
            await journal.append(JournalEvent("session_created", "s\ud800", None, None, {}))
        await journal.append(event("tool_started", "c1"))
        await journal.append(event("tool_finished", "c1"))
        await journal.flush()
    finally:
        await journal.aclose()
    # No gap: the refused records took no seq.
    assert [(e.seq, e.call_id) for e in read_sqlite(path)] == [(1, "c1"), (2, "c1"), (3, "c1")]
    reopened = SqliteJournal(path)
    await reopened.aclose()
    assert not rejected(path).exists()


async def test_the_writer_refuses_a_row_it_cannot_bind_and_keeps_serving(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The writer never dies on a record (issue 38): a row the driver cannot bind (which
    append's checks keep out, so only a bug could queue one) is refused, its waiter gets
    the error, the rows of its batch are committed, and later appends are served."""
    path = tmp_path / "j.db"
    journal = SqliteJournal(path, durability="full")
    try:
        await journal.append(event("call_decided", "c1"))
        waiter = sqlite_writer.Waiter()
        writer = journal._writer
        # Queued as append would queue them, in one batch: a good row, then a bad one.
        good_row = (2, 1.5, "tool_progress", "s1", "t1", "c1", 1, "{}")
        bad_row = (3, 1.5, "tool_started", "s1", "t1", "c\ud800", 1, "{}")
        journal._seq = 3
        writer.pending.append((good_row, None))
        writer.put((bad_row, waiter))
        with anyio.fail_after(5):
            await waiter.done.wait()
        assert waiter.error is not None and "refused" in str(waiter.error)
        await journal.append(event("tool_started", "c1"))
        await journal.append(event("tool_finished", "c1"))
    finally:
        await journal.aclose()
    assert [(e.seq, e.type) for e in read_sqlite(path)] == [
        (1, "call_decided"),
        (2, "tool_progress"),
        (4, "tool_started"),
        (5, "tool_finished"),
    ]
    assert "refused record 3 (tool_started)" in caplog.text


@pytest.mark.parametrize("writer", ["holding the GIL", "os.write"])
async def test_a_failed_start_log_write_waits_for_the_commit(
    writer: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "j.db"
    journal = SqliteJournal(path)
    try:
        start = journal._start_log
        assert start is not None
        if writer == "os.write":
            start.write = write_all
        os.close(start.fd)
        start.fd = os.open(start.path, os.O_RDONLY)  # writes now fail, as on a full disk
        await journal.append(event("call_decided"))
        await journal.append(event("tool_started"))
        # The start was committed instead before append returned.
        assert [e.type for e in read_sqlite(path)] == ["call_decided", "tool_started"]
        assert "cannot write the start log" in caplog.text
        await journal.append(event("tool_started", "c2"))  # and so are later ones
        assert len(read_sqlite(path)) == 3
    finally:
        await journal.aclose()


async def test_sqlite_full_commits_every_event_before_append_returns(tmp_path: Path) -> None:
    journal = SqliteJournal(tmp_path / "j.db", durability="full")
    try:
        for n in range(1, 4):
            await journal.append(event("tool_progress"))
            assert len(read_sqlite(tmp_path / "j.db")) == n
    finally:
        await journal.aclose()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
@pytest.mark.parametrize("durability", ["normal", "full"])
async def test_a_cancelled_append_still_records_and_returns(
    kind: str, durability: Durability, tmp_path: Path
) -> None:
    path = tmp_path / "j.db"
    journal = open_sink(kind, tmp_path, durability)
    returned = False
    try:
        with anyio.CancelScope() as scope:
            scope.cancel()
            await journal.append(event("tool_started"))
            returned = True
            await anyio.lowlevel.checkpoint()  # the cancellation takes effect here
        assert returned and scope.cancelled_caught
        if kind == "postgres":  # committed before append returned, either way
            assert [(e.seq, e.type) for e in journal.events()] == [(1, "tool_started")]
        elif durability == "full":  # awaited the commit
            assert [e.type for e in read_sqlite(path)] == ["tool_started"]
        else:  # committed or, until then, in the start log
            assert [(1, "tool_started")] in (
                [(e.seq, e.type) for e in read_sqlite(path)],
                logged(path),
            )
    finally:
        await journal.aclose()


async def test_queued_records_are_bounded(tmp_path: Path) -> None:
    journal = SqliteJournal(tmp_path / "j.db", durability="off")
    entered, release = threading.Event(), threading.Event()

    def hold(db: sqlite3.Connection) -> None:
        entered.set()
        release.wait()

    busy: concurrent.futures.Future[Any] = concurrent.futures.Future()
    journal._writer.put(Control(hold, future=busy))
    try:
        await anyio.to_thread.run_sync(entered.wait)
        for _ in range(MAX_PENDING):  # the writer is busy: these queue up
            await journal.append(event())
        done = anyio.Event()

        async def one_more() -> None:
            await journal.append(event())
            done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(one_more)
            await anyio.wait_all_tasks_blocked()
            assert not done.is_set()  # over the bound, append waits for the writer
            release.set()
            with anyio.fail_after(30):
                await done.wait()
        assert len(read_sqlite(tmp_path / "j.db")) == MAX_PENDING + 1
    finally:
        release.set()
        await journal.aclose()


def counting_registry(ran: list[str]) -> ToolRegistry:
    async def handler(arguments: dict[str, Any], ctx: CallContext) -> str:
        ran.append(ctx.call_id)
        return "ran"

    reg = ToolRegistry()
    reg.register("t", [Tool("ok", handler)])
    return reg


async def test_a_failed_commit_fails_closed(tmp_path: Path) -> None:
    journal = SqliteJournal(tmp_path / "j.db", durability="full")
    ran: list[str] = []
    async with Harness(
        counting_registry(ran), evaluator=LocalEvaluator(allow=["t.ok"]), journal=journal
    ) as h:
        session = await h.create_session(principal=ALICE)
        assert (await session.call_tool("t__ok", {}, call_id="c1")).ok
        # Make the database refuse writes, as a full disk would.
        await journal._writer.run_after_commits(lambda db: db.execute("PRAGMA query_only = ON"))
        outcome = await session.call_tool("t__ok", {}, call_id="c2")
        assert outcome.status == "denied" and "journal failed" in (outcome.message or "")
        with pytest.raises(JournalError, match="cannot write"):
            await journal.append(event())
    assert ran == ["c1"]  # the second handler never ran (rule R1)


async def test_a_failed_commit_keeps_the_start_log_and_fails_closed(tmp_path: Path) -> None:
    # "normal": a start in the start log is recorded, so its handler runs; the commit that
    # fails afterwards denies every later call, and the log keeps what it lacks.
    path = tmp_path / "j.db"
    journal = SqliteJournal(path)
    ran: list[str] = []
    async with Harness(
        counting_registry(ran), evaluator=LocalEvaluator(allow=["t.ok"]), journal=journal
    ) as h:
        session = await h.create_session(principal=ALICE, session_id="s1")
        assert (await session.call_tool("t__ok", {}, call_id="c1")).ok
        await journal._writer.run_after_commits(lambda db: db.execute("PRAGMA query_only = ON"))
        assert (await session.call_tool("t__ok", {}, call_id="c2")).ok
        with pytest.raises(JournalError, match="cannot write"):
            await journal.flush()
        outcome = await session.call_tool("t__ok", {}, call_id="c3")
        assert outcome.status == "denied" and "journal failed" in (outcome.message or "")
    assert ran == ["c1", "c2"]
    assert start_log(path).exists()  # not removed: the database lacks c2

    reopened = SqliteJournal(path)  # a new connection can write again
    try:
        c2 = [(e.type, e.data.get("status")) for e in reopened.events(call_id="c2")]
    finally:
        await reopened.aclose()
    # c2's end came after the failure: lost, so its start is closed as interrupted.
    assert c2 == [("call_decided", None), ("tool_started", None), ("tool_finished", "interrupted")]


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_ten_thousand_calls_leave_ten_thousand_ends(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "j.db"

    async def handler(arguments: dict[str, Any], ctx: CallContext) -> str:
        return "ok"

    reg = ToolRegistry()
    reg.register("t", [Tool("ok", handler, read_only=True)])
    async with Harness(
        reg, evaluator=LocalEvaluator(allow=["t.ok"]), journal=open_sink(kind, tmp_path)
    ) as harness:

        async def worker(w: int) -> None:
            session = await harness.create_session(principal=ALICE)
            for i in range(1000):
                await session.call_tool("t__ok", {}, call_id=f"c{i}")

        async with anyio.create_task_group() as tg:
            for w in range(10):
                tg.start_soon(worker, w)
    if kind == "postgres":
        events = open_sink(kind, tmp_path).events()
        finished = [e for e in events if e.type == "tool_finished"]
        assert Counter(e.data["status"] for e in finished) == {"ok": 10_000}
        assert len({(e.session_id, e.call_id) for e in finished}) == 10_000
        started = {(e.session_id, e.call_id) for e in events if e.type == "tool_started"}
        assert started == {(e.session_id, e.call_id) for e in finished}
        return
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        ends = db.execute(
            "SELECT json_extract(data, '$.status'), COUNT(*) FROM events "
            "WHERE type = 'tool_finished' GROUP BY 1"
        ).fetchall()
        pairs = db.execute(
            "SELECT COUNT(DISTINCT session_id || '/' || call_id) FROM events "
            "WHERE type = 'tool_finished'"
        ).fetchone()[0]
    assert ends == [("ok", 10_000)]
    assert pairs == 10_000


# --- JSON lines -----------------------------------------------------------------------------


async def test_jsonl_cuts_off_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    journal = JsonlJournal(path)
    await journal.append(event())
    await journal.aclose()
    with path.open("ab") as fh:
        fh.write(b'{"version":1,"seq":2,"ts":1.0,"type":"tool_pro')  # killed mid-write
    journal = JsonlJournal(path)
    try:
        assert (await journal.append(event())).seq == 2
    finally:
        await journal.aclose()
    assert [json.loads(line)["seq"] for line in path.read_text().splitlines()] == [1, 2]


async def test_jsonl_completes_a_line_that_lost_its_newline(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_bytes(encode_data(event().to_json() | {"seq": 1}).encode())
    journal = JsonlJournal(path)
    try:
        await journal.append(event())
    finally:
        await journal.aclose()
    assert [json.loads(line)["seq"] for line in path.read_text().splitlines()] == [1, 2]


async def test_jsonl_refuses_a_corrupt_line(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_text('{"nope": 1}\n' + encode_data(event().to_json()) + "\n")
    with pytest.raises(JournalError, match=r"j\.jsonl:1: not a journal record"):
        JsonlJournal(path)
    with pytest.raises(JournalError, match="not a journal record"):
        read_journal(path)


async def test_jsonl_off_buffers_until_close(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    journal = JsonlJournal(path, durability="off")
    await journal.append(event())
    assert path.read_bytes() == b""
    assert len(journal.events()) == 1  # reading writes the buffer first
    await journal.append(event())
    await journal.aclose()
    assert len(path.read_text().splitlines()) == 2


# --- UI events ------------------------------------------------------------------------------


async def test_a_slow_subscriber_gets_a_bounded_buffer_and_a_gap_marker() -> None:
    async def handler(arguments: dict[str, Any], ctx: CallContext) -> str:
        return "ok"

    reg = ToolRegistry()
    reg.register("t", [Tool("ok", handler)])
    async with Harness(reg, evaluator=LocalEvaluator(allow=["t.ok"]), event_buffer=4) as harness:
        session = await harness.create_session(principal=ALICE)
        stream = session.events()
        for i in range(5):  # 15 events for a buffer of 4; nobody reads meanwhile
            await session.call_tool("t__ok", {}, call_id=f"c{i}")
        with anyio.fail_after(5):
            received = [await stream.__anext__() for _ in range(4)]
        await session.call_tool("t__ok", {}, call_id="late")
        with anyio.fail_after(5):
            marker = await stream.__anext__()
            after = await stream.__anext__()
        await stream.aclose()
    assert [(r.type, r.call_id) for r in received] == [
        ("call_decided", "c0"),
        ("tool_started", "c0"),
        ("tool_finished", "c0"),
        ("call_decided", "c1"),
    ]
    assert marker.type == "events_dropped" and marker.event is None
    assert marker.dropped == 11
    assert (after.type, after.call_id) == ("call_decided", "late")


async def test_only_tool_started_items_carry_arguments_redacted_when_withheld() -> None:
    async with Harness(registry(), evaluator=evaluator()) as harness:
        session = await harness.create_session(
            principal=ALICE, on_permission_ask=lambda ask: "allow_once"
        )
        items = []
        async with session.events() as stream:
            await session.call_tool("t__ok", {"n": 1, "token": "hunter2"}, call_id="c1")
            await session.call_tool("t__asked", {"n": 2}, call_id="c2")
            with anyio.fail_after(5):
                async for item in stream:
                    items.append(item)
                    if item.type == "tool_finished" and item.call_id == "c2":
                        break
    started = {i.call_id: i.arguments for i in items if i.type == "tool_started"}
    assert started == {"c1": {"n": 1, "token": "[REDACTED]"}, "c2": {"n": 2}}
    others = [i for i in items if i.type != "tool_started"]
    assert {i.type for i in others} >= {"call_decided", "tool_progress", "tool_finished"}
    assert all(i.arguments is None for i in others)
    assert "hunter2" not in repr(items)
    finished = next(i for i in items if i.type == "tool_finished")
    assert (finished.tool, finished.qualified_name, finished.status) == ("t__ok", "t.ok", "ok")


# --- exports --------------------------------------------------------------------------------


def test_the_sinks_are_exported_from_clearance() -> None:
    assert clearance.SqliteJournal is SqliteJournal
    assert clearance.JsonlJournal is JsonlJournal
    from clearance.harness import journal

    for name in journal.__all__:
        assert getattr(journal, name) is not None


def test_rows_join_decisions_with_ends() -> None:
    from clearance.tuning import calls_from_events, corpus_record

    def decided(call_id: str, outcome: str, decision: str | None = "allow") -> JournalEvent:
        return event(
            "call_decided",
            call_id,
            tool="t__ok",
            qualified_name="t.ok",
            principal='User::"alice"',
            arguments={"n": 1},
            decision=decision,
            reasons=["allow:t.ok"],
            outcome=outcome,
            timing_us={"total": 10},
        )

    events = [
        decided("c1", "dispatched"),
        event("tool_started", "c1"),
        decided("c2", "dispatched"),  # its start was never recorded (the journal failed)
        decided("c3", "dispatched"),
        event("tool_started", "c3"),
        decided("c1", "invalid", None),  # a reused call id: a call of its own
        event("tool_finished", "c3", status="timeout", duration_us=5),
    ]
    for n, e in enumerate(events, 1):
        e.seq = n
    rows = calls_from_events(events)
    assert [(r.call_id, r.status, r.duration_us) for r in rows] == [
        ("c1", "running", 10),
        ("c2", "not started", 10),
        ("c3", "timeout", 15),
        ("c1", "invalid", 10),
    ]
    assert corpus_record(rows[2])["expected"] == "allow"
    assert "expected" not in corpus_record(rows[3])


def test_a_call_stopped_before_the_evaluator_shows_what_stopped_it() -> None:
    """The table's decision and policies for a call that no policy decided: a refusal is
    a deny, and the row names the stage (the argument, the guardrail) that gave it."""
    from clearance.tuning import calls_from_events, corpus_record

    def stopped(call_id: str, stage: str, **data: Any) -> JournalEvent:
        return event(
            "call_decided",
            call_id,
            qualified_name="files.read_file",
            principal='User::"alice"',
            arguments={"path": "../x"},
            decision=None,
            reasons=[],
            outcome="invalid" if stage == "schema" else "blocked",
            stage=stage,
            **data,
        )

    events = [
        stopped("c1", "facts", facts={"error": "argument /path (path): it resolves outside"}),
        stopped("c2", "guardrail", guardrails=[{"name": "ws", "action": "block"}]),
        stopped("c3", "schema"),
        event(
            "call_decided",
            "c4",
            qualified_name="t.ok",
            decision="deny",
            reasons=["a", "b"],
            outcome="denied",
            stage="evaluator",
        ),
    ]
    for n, e in enumerate(events, 1):
        e.seq = n
    rows = calls_from_events(events)
    assert [r.cells()[5:7] for r in rows] == [
        ("deny", "facts /path"),
        ("deny", "guardrail ws"),
        ("deny", "schema"),
        ("deny", "a,b"),
    ]
    # the corpus keeps the decision the evaluator took: none
    assert corpus_record(rows[0])["decision"] is None


def test_unknown_durability_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="durability"):
        SqliteJournal(tmp_path / "j.db", durability="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="durability"):
        JsonlJournal(tmp_path / "j.jsonl", durability="sometimes")  # type: ignore[arg-type]


# --- the command line -----------------------------------------------------------------------


def clearance_cli(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*_command(), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def _command() -> list[str]:
    script = shutil.which("clearance", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "clearance"]


async def test_cli_lists_one_row_per_call(tmp_path: Path) -> None:
    # the default: this directory's journal in the state directory (not ./clearance.db)
    default = default_journal_path(tmp_path)
    default.parent.mkdir(parents=True)
    await mixed_run(SqliteJournal(default))
    (tmp_path / "clearance.db").write_text("planted by an agent")  # never read by default
    done = clearance_cli("journal", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == [
        "time",
        "host",
        "session",
        "principal",
        "tool",
        "decision",
        "policies",
        "status",
        "duration",
    ]
    rows = [line.split() for line in lines[1:]]
    assert len(rows) == 6
    assert [r[4:6] for r in rows] == [
        ['User::"alice"', "t.ok"],
        ['User::"alice"', "t.fails"],
        ['User::"alice"', "t.asked"],
        ['User::"alice"', "t.denied"],
        ['User::"alice"', "t.ok"],
        ['User::"alice"', "t__nope"],
    ]
    assert [r[6:9] for r in rows][:4] == [
        ["allow", "allow:t.ok", "ok"],
        ["allow", "allow:t.fails", "failed"],
        ["ask", "ask:t.asked", "ok"],
        ["deny", "deny:t.denied", "denied"],
    ]
    assert [r[8] for r in rows][4:] == ["invalid", "invalid"]

    done = clearance_cli("journal", "--json", "--session", "s1", "--call", "c2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    [row] = json.loads(done.stdout)
    assert row["status"] == "failed" and row["decision"] == "allow"
    assert row["tool"] == "t.fails" and row["duration_us"] > 0


async def test_cli_reads_a_jsonl_journal(tmp_path: Path) -> None:
    await mixed_run(JsonlJournal(tmp_path / "j.jsonl"))
    done = clearance_cli("journal", "--db", "j.jsonl", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [r["call_id"] for r in json.loads(done.stdout)] == ["c1", "c2", "c3", "c4", "c5", "c6"]


async def test_cli_exports_the_replay_corpus(tmp_path: Path) -> None:
    await mixed_run(SqliteJournal(tmp_path / "j.db"))
    done = clearance_cli(
        "journal", "export", "--db", "j.db", "--format", "jsonl", "-o", "out.jsonl", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    first = records[0]
    assert first["principal"] == 'User::"alice"'
    assert first["tool"] == "t.ok"
    assert first["arguments"] is None  # a value was withheld: never exported
    assert (first["decision"], first["expected"], first["outcome"]) == ("allow", "allow", "ok")
    assert (first["session_id"], first["call_id"]) == ("s1", "c1")
    assert isinstance(first["ts"], float)
    assert [
        (r["call_id"], r["decision"], r.get("expected"), r["outcome"]) for r in records[1:]
    ] == [
        ("c2", "allow", "allow", "failed"),
        ("c3", "ask", "ask", "ok"),
        ("c4", "deny", "deny", "denied"),
        ("c5", None, None, "invalid"),
        ("c6", None, None, "invalid"),
    ]
    assert records[1]["arguments"] == {"n": 2}
    assert "hunter2" not in (tmp_path / "out.jsonl").read_text()

    # The group's --db applies too, and standard output is the default.
    done = clearance_cli("journal", "--db", "j.db", "export", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (tmp_path / "out.jsonl").read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["journal", "--db", "missing.db"], "no journal at 'missing.db'"),
        (["journal", "--db", "notes.txt"], "not a journal record"),
        (["journal", "--db", "other.db"], "not a clearance journal"),
        (["journal", "export", "--db", "missing.db"], "no journal at"),
        (["journal", "export", "--db", "j.db", "--format", "csv"], "Invalid value"),
    ],
)
def test_cli_bad_input_exits_2(args: list[str], message: str, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("just some notes\n")
    with sqlite3.connect(tmp_path / "other.db") as db:
        db.execute("CREATE TABLE things (x)")
    done = clearance_cli(*args, cwd=tmp_path)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr


async def test_cli_follow_prints_new_calls_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    await SqliteJournal(path).aclose()
    command = [
        *_command(),
        "journal",
        "--db",
        str(path),
        "--follow",
        "--json",
        "--interval",
        "0.05",
    ]
    async with await anyio.open_process(command) as follower:
        assert follower.stdout is not None and follower.stderr is not None
        lines = BufferedByteReceiveStream(follower.stdout)
        journal = SqliteJournal(path)
        async with Harness(registry(), evaluator=evaluator(), journal=journal) as harness:
            session = await harness.create_session(principal=ALICE)
            await session.call_tool("t__ok", {"n": 1}, call_id="f1")
            await session.call_tool("t__denied", {"n": 2}, call_id="f2")
        with anyio.fail_after(20):
            rows = [json.loads(await lines.receive_until(b"\n", 1 << 20)) for _ in range(2)]
        assert [(r["call_id"], r["status"]) for r in rows] == [("f1", "ok"), ("f2", "denied")]
        follower.send_signal(signal.SIGINT)
        with anyio.fail_after(20):
            assert await follower.wait() == 0
        errors = b"".join([chunk async for chunk in follower.stderr])
    assert b"Traceback" not in errors


def test_no_calls_prints_a_note(tmp_path: Path) -> None:
    journal = tmp_path / "empty.jsonl"
    journal.write_text("")
    done = clearance_cli("journal", "--db", "empty.jsonl", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout == "" and "no calls" in done.stderr
    assert os.path.getsize(journal) == 0  # reading never writes


@pytest.mark.anyio
@pytest.mark.parametrize("call_id", ["a\x00b", "x\ud800", "\ud800"])
async def test_a_call_id_no_journal_can_store_is_refused_on_the_record(
    tmp_path: Path, call_id: str
) -> None:
    # R7: one call_decided per call that entered the pipeline. Such an id made the SQLite
    # and PostgreSQL journals refuse the record: the call was denied and left no trace.
    path = tmp_path / "j.db"
    async with Harness(registry(), evaluator=evaluator(), journal=SqliteJournal(path)) as h:
        session = await h.create_session(principal=ALICE, session_id="s1")
        refused = await session.call_tool("t__ok", {"n": 1}, call_id=call_id)
        fine = await session.call_tool("t__ok", {"n": 2}, call_id="c2")
    assert refused.status == "invalid" and fine.status == "ok"
    decided = [e for e in read_sqlite(path) if e.type == "call_decided"]
    assert [e.data["outcome"] for e in decided] == ["invalid", "dispatched"]
    stand_in = decided[0].call_id
    assert stand_in is not None and stand_in.startswith("unstorable-") and storable(stand_in)
    assert decided[0].data["stage"] == "call_id" and stand_in in decided[0].data["message"]
