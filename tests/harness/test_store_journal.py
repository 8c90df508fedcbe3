"""The durable journal contract, run against SQLite (a file) and PostgreSQL (a schema of
its own on a real server): rule R7 (one end per call, ``seq`` without gaps, a crash's
unfinished starts closed as ``interrupted`` when the writer opens again, one writer at a
time). Then what only the PostgreSQL journal does: several hosts, ``clearance store
recover``, and failing closed while its database is away (rule R1)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from postgres_support import Outage, fresh_schema, sql
from support import ALICE, Recorder, coding_registry, harness

from clearance import JournalError, JournalEvent, SqliteJournal
from clearance.policy import LocalEvaluator

pytestmark = pytest.mark.anyio

ALLOW = LocalEvaluator(allow=["files.*"], deny=["shell.*"])
WRITE = {"path": "src/a.py", "content": "x"}


@dataclass
class Backend:
    kind: str
    target: str
    schema: str = ""

    def open(self, host: str = "h1") -> Any:
        if self.kind == "sqlite":
            return SqliteJournal(self.target)
        from clearance.harness.journal import PostgresJournal

        return PostgresJournal(self.target, host=host)

    def opener(self) -> str:
        """Python that opens the journal as ``journal`` (host ``h1``) in a child."""
        if self.kind == "sqlite":
            return f"from clearance import SqliteJournal\njournal = SqliteJournal({self.target!r})"
        return (
            "from clearance.harness.journal import PostgresJournal\n"
            f"journal = PostgresJournal({self.target!r}, host='h1')"
        )


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "sqlite":
        yield Backend("sqlite", str(tmp_path / "journal.db"))
        return
    with fresh_schema() as (url, schema):
        yield Backend("postgres", url, schema)


async def _call(session: Any, tool: str, arguments: dict[str, Any], call_id: str) -> Any:
    return await session.call_tool(tool, arguments, call_id=call_id)


def check_r7(events: list[JournalEvent], *, per_session: bool) -> None:
    """R7 on a whole journal: ``seq`` 1, 2, 3... without gaps (per session for the
    PostgreSQL journal), one ``call_decided`` per call, at most one start, and exactly one
    end per start."""
    if per_session:
        by_session: dict[str, list[int]] = defaultdict(list)
        for e in events:
            by_session[e.session_id].append(e.seq)
        for session_id, seqs in by_session.items():
            assert sorted(seqs) == list(range(1, len(seqs) + 1)), session_id
    else:
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
    kinds: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for e in events:
        if e.call_id is not None:
            kinds[(e.session_id, e.call_id)][e.type] += 1
    for call, seen in kinds.items():
        assert seen["call_decided"] == 1, (call, seen)
        assert seen["tool_started"] <= 1, (call, seen)
        assert seen["tool_finished"] == seen["tool_started"], (call, seen)


async def test_a_run_keeps_r7(backend: Backend) -> None:
    rec = Recorder()
    journal = backend.open()
    async with harness(coding_registry(rec), evaluator=ALLOW, journal=journal) as h:
        sessions = [await h.create_session(principal=ALICE) for _ in range(3)]
        async with anyio.create_task_group() as tg:
            for n, s in enumerate(sessions):
                for i in range(20):
                    tool = "shell__run" if i % 5 == 0 else "files__write_file"
                    args = {"command": "ls"} if tool == "shell__run" else WRITE
                    tg.start_soon(_call, s, tool, args, f"c{n}-{i}")
        written = journal.events()
    per_session = backend.kind == "postgres"
    check_r7(written, per_session=per_session)
    again = backend.open()
    try:
        stored = again.events()
    finally:
        again.close()
    check_r7(stored, per_session=per_session)
    assert len(written) == 3 * (1 + 20 + 16 * 2)  # created; decided x20, started+finished x16
    assert len(stored) == len(written) + 3  # and the sessions' closes
    assert len(rec.calls) == 3 * 16
    assert {e.type for e in stored} >= {"session_created", "tool_started", "session_closed"}


async def test_a_crash_leaves_interrupted_ends_when_the_writer_opens_again(
    backend: Backend,
) -> None:
    child = textwrap.dedent(
        """
        import anyio, os
        from clearance import JournalEvent
        {opener}

        async def main():
            for event in (
                JournalEvent("session_created", "s1", None, None, {{}}),
                JournalEvent("call_decided", "s1", "t1", "c1", {{"decision": "allow"}}),
                JournalEvent("tool_started", "s1", "t1", "c1",
                             {{"tool": "files__write_file", "correlation_id": "x1"}}),
                JournalEvent("call_decided", "s1", "t1", "c2", {{"decision": "allow"}}),
                JournalEvent("tool_started", "s1", "t1", "c2", {{"tool": "files__write_file"}}),
                JournalEvent("tool_finished", "s1", "t1", "c2", {{"status": "ok"}}),
            ):
                await journal.append(event)
            if hasattr(journal, "flush"):
                await journal.flush()
            os._exit(9)  # a crash: no close

        anyio.run(main)
        """
    ).format(opener=backend.opener())
    with anyio.fail_after(60):
        done = await anyio.run_process([sys.executable, "-c", child], check=False)
    assert done.returncode == 9, done.stderr.decode()
    journal = backend.open()
    try:
        events = journal.events()
        await journal.append(JournalEvent("session_closed", "s1", None, None, {}))
        events_after = journal.events()
    finally:
        journal.close()
    ends = [e for e in events if e.type == "tool_finished" and e.call_id == "c1"]
    assert len(ends) == 1 and ends[0].data["status"] == "interrupted"
    started = next(e for e in events if e.type == "tool_started" and e.call_id == "c1")
    assert ends[0].data["started_seq"] == started.seq
    assert ends[0].data["correlation_id"] == "x1"
    check_r7(events_after, per_session=backend.kind == "postgres")
    assert events_after[-1].seq == ends[0].seq + 1  # seq goes on after the recovery


def test_a_second_writer_is_refused(backend: Backend) -> None:
    first = backend.open()
    try:
        with pytest.raises(JournalError, match="another process"):
            backend.open()
    finally:
        first.close()
    backend.open().close()  # free again once the first is closed


# -- PostgreSQL only ------------------------------------------------------------------------


@pytest.fixture
def pg_url() -> Iterator[tuple[str, str]]:
    with fresh_schema() as found:
        yield found


def _pg(url: str, host: str, **options: Any) -> Any:
    from clearance.harness.journal import PostgresJournal

    return PostgresJournal(url, host=host, **options)


async def test_two_hosts_write_one_journal_each_session_without_gaps(
    pg_url: tuple[str, str],
) -> None:
    url, _ = pg_url
    rec_a, rec_b = Recorder(), Recorder()
    journal_a, journal_b = _pg(url, "a"), _pg(url, "b")
    async with (
        harness(coding_registry(rec_a), evaluator=ALLOW, journal=journal_a) as ha,
        harness(coding_registry(rec_b), evaluator=ALLOW, journal=journal_b) as hb,
    ):
        sa, sb = await ha.create_session(principal=ALICE), await hb.create_session(principal=ALICE)
        async with anyio.create_task_group() as tg:
            for i in range(30):
                tg.start_soon(_call, sa, "files__write_file", WRITE, f"a{i}")
                tg.start_soon(_call, sb, "files__write_file", WRITE, f"b{i}")
        seen_by_a = journal_a.events()
    assert {e.session_id for e in seen_by_a} == {sa.id, sb.id}  # every host's records
    reader = _pg(url, "reader")
    try:
        check_r7(reader.events(), per_session=True)
        assert len(reader.events(session_id=sb.id)) == 1 + 30 * 3 + 1
        with pytest.raises(JournalError, match="journaled by host 'a'"):
            await reader.append(JournalEvent("session_closed", sa.id, None, None, {}))
    finally:
        reader.close()


def test_a_stopped_host_is_recovered_by_an_operator_and_a_running_one_is_not(
    pg_url: tuple[str, str],
) -> None:
    from clearance.harness.journal import PostgresJournal

    url, schema = pg_url
    child = textwrap.dedent(
        f"""
        import anyio, os, sys
        from clearance import JournalEvent
        from clearance.harness.journal import PostgresJournal
        journal = PostgresJournal({url!r}, host="gone")

        async def main():
            await journal.append(JournalEvent("session_created", "s9", None, None, {{}}))
            await journal.append(JournalEvent("call_decided", "s9", None, "c1", {{}}))
            await journal.append(JournalEvent("tool_started", "s9", None, "c1", {{}}))
            print("started", flush=True)
            if sys.argv[1] == "crash":
                os._exit(9)
            sys.stdin.readline()  # runs until told to stop

        anyio.run(main)
        """
    )
    with subprocess.Popen(
        [sys.executable, "-c", child, "hang"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as running:
        try:
            assert running.stdout is not None and running.stdout.readline() == "started\n"
            with pytest.raises(JournalError, match="is running"):
                PostgresJournal.recover_host(url, "gone")
        finally:
            running.kill()
            running.wait()
    # Killed: its start is open; the operator closes it.
    assert PostgresJournal.recover_host(url, "gone") == 1
    assert PostgresJournal.recover_host(url, "gone") == 0
    ends = sql(schema, "SELECT data FROM {s}.events WHERE type = 'tool_finished'")
    assert len(ends) == 1 and '"status":"interrupted"' in str(ends[0][0])
    with pytest.raises(JournalError, match="no host 'nobody'"):
        PostgresJournal.recover_host(url, "nobody")


def test_clearance_store_migrate_and_recover_on_the_command_line(
    pg_url: tuple[str, str], tmp_path: Path
) -> None:
    url, schema = pg_url
    config = tmp_path / "clearance.toml"
    config.write_text(f'store = "{url}"\n[evaluator]\nkind = "noop"\n')
    env = {**os.environ, "NO_COLOR": "1"}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "clearance", *args],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )

    first = cli("store", "migrate", "--config", str(config))
    assert first.returncode == 0, first.stderr
    from clearance.harness.postgres import SCHEMA_VERSION

    newest = f"schema version 0 -> {SCHEMA_VERSION}"
    assert newest in first.stdout and f"(schema {schema})" in first.stdout
    again = cli("store", "migrate", "--url", url, "--json")
    assert again.returncode == 0 and f'"from": {SCHEMA_VERSION}' in again.stdout
    missing = cli("store", "recover", "--host", "nobody", "--config", str(config))
    assert missing.returncode == 2 and "no host 'nobody'" in missing.stderr
    journal = _pg(url, "h7")
    journal.close()
    done = cli("store", "recover", "--host", "h7", "--url", url)
    assert done.returncode == 0 and "0 unfinished call(s)" in done.stdout
    bad = cli("store", "migrate", "--url", "sqlite:///x.db")
    assert bad.returncode == 2 and "postgresql:// URL" in bad.stderr


async def test_an_unreachable_database_denies_every_call_and_loses_nothing(
    pg_url: tuple[str, str],
) -> None:
    """Fail closed: while the database is away every call is denied (the journal cannot
    record its start) and no handler runs; the records made meanwhile are written when it
    returns, the journal reconnects by itself, and R7 holds throughout."""
    url, schema = pg_url
    rec = Recorder()
    outcomes: dict[str, str] = {}
    with Outage() as outage:
        journal = _pg(outage.url(schema), "h1")
        async with harness(coding_registry(rec), evaluator=ALLOW, journal=journal) as h:
            s = await h.create_session(principal=ALICE)
            outcomes["c1"] = (await s.call_tool("files__write_file", WRITE, call_id="c1")).status
            # A start whose commit is cut off: its append fails (the call would be denied).
            await journal.append(JournalEvent("call_decided", s.id, None, "cx", {}))
            await journal.flush()
            outage.cut()  # the writer does not know yet: the start's commit fails
            with pytest.raises(JournalError, match="unreachable"):
                await journal.append(
                    JournalEvent("tool_started", s.id, None, "cx", {"correlation_id": "k"})
                )
            outcomes["c2"] = (await s.call_tool("files__write_file", WRITE, call_id="c2")).status
            outcomes["c3"] = (await s.call_tool("files__write_file", WRITE, call_id="c3")).status
            with pytest.raises(JournalError, match="the PostgreSQL store at postgresql://"):
                await journal.append(JournalEvent("tool_started", s.id, None, "x", {}))
            outage.restore()
            deadline = time.monotonic() + 10
            while outcomes.get("c4") != "ok":
                assert time.monotonic() < deadline
                await anyio.sleep(0.05)
                outcomes["c4"] = (
                    await s.call_tool("files__write_file", WRITE, call_id=f"c4-{time.monotonic()}")
                ).status
    assert outcomes["c1"] == "ok" and outcomes["c2"] == "denied" and outcomes["c3"] == "denied"
    ran_paths = len(rec.calls)
    reader = _pg(url, "reader")
    try:
        events = reader.events(session_id=s.id)
    finally:
        reader.close()
    check_r7(events, per_session=True)
    by_call: dict[str, list[JournalEvent]] = defaultdict(list)
    for e in events:
        if e.call_id is not None:
            by_call[e.call_id].append(e)
    # cx's start went out as the connection died: it is written, with its own end saying
    # the call did not run.
    cx = {e.type: e for e in by_call["cx"]}
    assert cx["tool_finished"].data["status"] == "cancelled"
    assert "did not run" in cx["tool_finished"].data["message"]
    assert cx["tool_finished"].data["started_seq"] == cx["tool_started"].seq
    assert cx["tool_finished"].data["correlation_id"] == "k"
    # c2 and c3 were denied: refused before their start (their decision is kept), or, for
    # a start that was on its way, with that end.
    for call in ("c2", "c3"):
        types = [e.type for e in by_call[call]]
        assert types in (["call_decided"], ["call_decided", "tool_started", "tool_finished"])
        if "tool_finished" in types:
            assert by_call[call][-1].data["status"] == "cancelled"
    ran = {
        c
        for c, evs in by_call.items()
        for e in evs
        if e.type == "tool_finished" and e.data.get("status") == "ok"
    }
    assert len(ran) == ran_paths  # every handler that ran has its start and its ok end
    assert not {"cx", "c2", "c3"} & ran


async def test_a_host_recovered_while_disconnected_stops_writing(
    pg_url: tuple[str, str],
) -> None:
    """If an operator closes a host's calls while it is cut off, the host must not give
    them a second end when it reconnects: it refuses every later record."""
    from clearance.harness.journal import PostgresJournal

    url, schema = pg_url
    with Outage() as outage:
        journal = _pg(outage.url(schema), "h1")
        try:
            await journal.append(JournalEvent("session_created", "s1", None, None, {}))
            await journal.append(JournalEvent("call_decided", "s1", None, "c1", {}))
            await journal.append(JournalEvent("tool_started", "s1", None, "c1", {}))
            outage.cut()
            deadline = time.monotonic() + 10
            while True:  # the server notices the dropped connection and frees the lock
                try:
                    closed = PostgresJournal.recover_host(url, "h1")
                    break
                except JournalError:
                    assert time.monotonic() < deadline
                    await anyio.sleep(0.05)
            assert closed == 1
            outage.restore()
            deadline = time.monotonic() + 10
            with pytest.raises(JournalError, match="closed as interrupted by another"):
                while True:
                    await journal.append(JournalEvent("tool_finished", "s1", None, "c1", {}))
                    assert time.monotonic() < deadline
                    await anyio.sleep(0.05)
        finally:
            await journal.aclose()
    ends = sql(schema, "SELECT data FROM {s}.events WHERE type = 'tool_finished'")
    assert len(ends) == 1 and "interrupted" in str(ends[0][0])


async def test_the_journal_records_of_one_call_are_one_commit_at_the_start(
    pg_url: tuple[str, str],
) -> None:
    """``tool_started`` is committed before its append returns, with everything appended
    before it; another connection sees them at once."""
    url, schema = pg_url
    journal = _pg(url, "h1")
    try:
        await journal.append(JournalEvent("session_created", "s1", None, None, {}))
        await journal.append(JournalEvent("call_decided", "s1", None, "c1", {}))
        await journal.append(JournalEvent("tool_started", "s1", None, "c1", {}))
        rows = sql(schema, "SELECT type, seq FROM {s}.events ORDER BY seq")
        assert rows == [("session_created", 1), ("call_decided", 2), ("tool_started", 3)]
    finally:
        journal.close()


@pytest.mark.parametrize("call_id", ["c\x00", "c\ud800"])
async def test_an_id_postgresql_cannot_hold_fails_that_record_alone(
    pg_url: tuple[str, str], call_id: str
) -> None:
    """A model chooses its call ids: one PostgreSQL cannot store (a NUL, a lone surrogate)
    fails its own record, never the batch it would share nor the journal."""
    url, schema = pg_url
    journal = _pg(url, "h1")
    try:
        await journal.append(JournalEvent("session_created", "s1", None, None, {}))
        with pytest.raises(JournalError, match="NUL or a lone surrogate"):
            await journal.append(JournalEvent("call_decided", "s1", None, call_id, {}))
        await journal.append(JournalEvent("call_decided", "s1", None, "ok", {}))
        await journal.flush()
        rows = sql(schema, "SELECT seq, call_id FROM {s}.events ORDER BY seq")
        assert rows == [(1, None), (2, "ok")]
    finally:
        journal.close()


@pytest.mark.parametrize("bad", ["c\x00", "c\ud800"])
async def test_the_writer_refuses_a_row_postgresql_cannot_take_and_keeps_serving(
    pg_url: tuple[str, str], bad: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The writer never dies on a record (issue 38): a row PostgreSQL or its driver
    refuses (which append's checks keep out, so only a bug could queue one) is refused,
    its waiter gets the error, the rows of its batch are committed, and later appends
    are served."""
    from clearance.harness.journal._sqlite_writer import Waiter

    url, schema = pg_url
    journal = _pg(url, "h1", durability="full")
    try:
        await journal.append(JournalEvent("session_created", "s1", None, None, {}))
        writer = journal._writer
        waiter = Waiter()
        seq = journal._seqs.next("s1")
        good = ("s1", seq, 1.5, "call_decided", None, "c1", 1, "{}")
        seq = journal._seqs.next("s1")
        row = ("s1", seq, 1.5, "call_decided", None, bad, 1, "{}")
        writer.pending.append((good, None))
        writer.put((row, waiter))
        with anyio.fail_after(10):
            await waiter.done.wait()
        assert waiter.error is not None and "refused" in str(waiter.error)
        await journal.append(JournalEvent("call_decided", "s1", None, "ok", {}))
        await journal.flush()
        rows = sql(schema, "SELECT seq, call_id FROM {s}.events ORDER BY seq")
        assert rows == [(1, None), (2, "c1"), (4, "ok")]
    finally:
        journal.close()
    assert "refused record s1/3 (call_decided)" in caplog.text


@pytest.mark.parametrize("again", [False, True])
def test_rows_are_inserted_alike_by_values_and_by_copy(
    pg_url: tuple[str, str], again: bool
) -> None:
    """A few rows go by one prepared multi-row INSERT, more by COPY (or, written again
    after a lost commit, by INSERT ... unnest): every row arrives whole, with its NULLs,
    and rows written again skip those already there (ON CONFLICT) in both forms."""
    from clearance.harness.journal._postgres_host import VALUES_MAX, PgRow, insert_rows
    from clearance.harness.postgres import PostgresDatabase

    url, schema = pg_url
    database = PostgresDatabase(url)
    database.migrate()
    conn = database.connect()
    try:
        sizes = [1, VALUES_MAX, VALUES_MAX + 1, 3 * VALUES_MAX]
        for size in sizes:
            session = f"s{size}"
            data = '{"text": "\u00e9\\t"}'
            rows: list[PgRow] = [
                (
                    session,
                    seq,
                    1.5 + seq,
                    "call_decided",
                    _some(seq, 2, "t"),
                    _some(seq, 3, "c"),
                    1,
                    data,
                )
                for seq in range(1, size + 1)
            ]
            if again:  # half of them made it before the connection was lost
                insert_rows(conn, schema, "h", rows[: size // 2])
            insert_rows(conn, schema, "h", rows, again=again)
            # The same count again: the prepared statement is used a second time.
            more: list[PgRow] = [(session, seq + size, *row[2:]) for seq, row in enumerate(rows, 1)]
            insert_rows(conn, schema, "h", more, again=again)
            stored = sql(
                schema,
                "SELECT session_id, seq, ts, type, turn_id, call_id, version, data, host_id "
                "FROM {s}.events WHERE session_id = %s ORDER BY seq",
                (session,),
            )
            assert stored == [(*row, "h") for row in rows + more]
    finally:
        conn.close()
        database.close()


def _some(seq: int, every: int, text: str) -> str | None:
    """``text`` for most rows, NULL for every ``every``-th."""
    return None if seq % every == 0 else text


async def test_append_now_queues_what_nobody_waits_for_and_waits_for_a_start(
    pg_url: tuple[str, str],
) -> None:
    """``append_now`` (what the pipeline calls): a session's first record claims the
    session (an awaitable), a record nobody waits for is queued at once (None, its seq
    assigned), a start in "normal" waits for its commit (an awaitable) with the records
    before it; a start that cannot be stored is refused at once."""
    url, schema = pg_url
    journal = _pg(url, "h1")
    try:
        first = JournalEvent("session_created", "s1", None, None, {})
        waiting = journal.append_now(first)
        assert waiting is not None
        await waiting
        assert first.seq == 1
        decided = JournalEvent("call_decided", "s1", "t1", "c1", {"outcome": "allowed"})
        assert journal.append_now(decided) is None
        assert decided.seq == 2
        started = JournalEvent("tool_started", "s1", "t1", "c1", {"tool": "x"})
        waiting = journal.append_now(started)
        assert waiting is not None and started.seq == 3
        await waiting
        rows = sql(schema, "SELECT seq, type FROM {s}.events ORDER BY seq")
        assert rows == [(1, "session_created"), (2, "call_decided"), (3, "tool_started")]
        with pytest.raises(JournalError, match="NUL"):
            journal.append_now(JournalEvent("tool_started", "s1", "t\x00", "c2", {}))
        loop: dict[str, Any] = {}
        loop["self"] = loop
        with pytest.raises(JournalError, match="cannot encode"):
            journal.append_now(JournalEvent("call_decided", "s1", None, "c3", loop))
    finally:
        await journal.aclose()
    # The refused records took no seq: the session has no gap.
    assert sql(schema, "SELECT max(seq), count(*) FROM {s}.events") == [(3, 3)]
