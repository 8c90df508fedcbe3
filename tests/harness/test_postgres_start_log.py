"""``PostgresJournal(start_log=PATH)``: the SQLite journal's promise for PostgreSQL (a
start is in a local file before its handler runs; the writer commits in the background).

Real server (a schema per test), real files, a real child process killed with SIGKILL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from postgres_support import Outage, fresh_schema, sql
from support import ALICE, Recorder, coding_registry, harness

from clearance import JournalError, JournalEvent
from clearance.policy import LocalEvaluator

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX"),
]

ALLOW = LocalEvaluator(allow=["files.*"], deny=["shell.*"])
WRITE = {"path": "src/a.py", "content": "x"}


@pytest.fixture
def pg_url() -> Iterator[tuple[str, str]]:
    with fresh_schema() as found:
        yield found


def _pg(url: str, host: str, **options: Any) -> Any:
    from clearance.harness.journal import PostgresJournal

    return PostgresJournal(url, host=host, **options)


def check_r7(events: list[JournalEvent]) -> None:
    """``seq`` 1, 2, 3... per session; one decision per call, at most one start, exactly
    one end per start."""
    by_session: dict[str, list[int]] = defaultdict(list)
    for e in events:
        by_session[e.session_id].append(e.seq)
    for session_id, seqs in by_session.items():
        assert sorted(seqs) == list(range(1, len(seqs) + 1)), session_id
    kinds: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for e in events:
        if e.call_id is not None:
            kinds[(e.session_id, e.call_id)][e.type] += 1
    for call, seen in kinds.items():
        assert seen["call_decided"] == 1, (call, seen)
        assert seen["tool_started"] <= 1, (call, seen)
        assert seen["tool_finished"] == seen["tool_started"], (call, seen)


def _hold_writer(journal: Any) -> threading.Event:
    """Keep the journal's writer thread busy until the returned event is set (a slow
    server): nothing appended meanwhile is committed."""
    from clearance.harness.journal._postgres_writer import PgControl

    entered, release = threading.Event(), threading.Event()

    def hold(conn: Any) -> None:
        entered.set()
        release.wait(60)

    journal._writer.put(PgControl(hold))
    assert entered.wait(10)
    return release


CHILD = textwrap.dedent(
    """
    import functools
    import sys
    import threading
    from pathlib import Path

    import anyio

    from clearance import Harness, Principal, Tool, ToolRegistry
    from clearance.harness.journal import PostgresJournal
    from clearance.harness.journal._postgres_writer import PgControl
    from clearance.policy import LocalEvaluator

    url, log, markers, mode = sys.argv[1:5]
    SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}}


    async def ok(arguments, ctx):
        await anyio.sleep(0)  # a call that records without waiting never yields otherwise
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
        journal = PostgresJournal(url, host="h1", start_log=log)
        async with Harness(
            registry, evaluator=LocalEvaluator(allow=["t.*"]), journal=journal
        ) as harness:
            if mode == "load":
                # Calls in many sessions at once, until killed.
                async def worker(w):
                    session = await harness.create_session(principal=Principal("User", "u"))
                    for i in range(10**9):
                        await session.call_tool("t__ok", {"n": i}, call_id=f"w{w}-{i}")
                        if i == 300:
                            Path(markers, f"started-{w}").write_text("x")

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
                # The server is slow from here on: nothing appended later is committed
                # before the kill, so the starts are only in the start log.
                entered = threading.Event()

                def hold(conn):
                    entered.set()
                    threading.Event().wait()

                journal._writer.put(PgControl(hold))
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


def _run_and_kill(tmp_path: Path, url: str, mode: str) -> Path:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    log = tmp_path / "h1.starts"
    markers = tmp_path / "markers"
    markers.mkdir()
    child = subprocess.Popen(
        [sys.executable, str(script), url, str(log), str(markers), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while len(list(markers.iterdir())) < (8 if mode == "load" else 3):
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
    return log


@pytest.mark.parametrize("mode", ["held", "block"])
async def test_sigkill_after_the_handlers_started_the_reopened_host_restores_and_ends_them(
    pg_url: tuple[str, str], tmp_path: Path, mode: str
) -> None:
    url, schema = pg_url
    log = _run_and_kill(tmp_path, url, mode)
    stored = {
        str(r[0]) for r in sql(schema, "SELECT call_id FROM {s}.events WHERE type = 'tool_started'")
    }
    if mode == "held":
        # The server never got the starts: only the start log has them.
        assert not {"block0", "block1", "block2"} & stored
        assert b'"block0"' in log.read_bytes()
    with pytest.raises(JournalError, match="not host 'h2'"):
        _pg(url, "h2", start_log=log)  # another host's log is refused, and kept
    journal = _pg(url, "h1", start_log=log)
    try:
        assert journal.recovered == 3
        assert log.stat().st_size == 0  # its rows are in the database now
        events = journal.events(session_id="s1")
    finally:
        journal.close()
    assert not log.exists()  # removed on a clean close
    check_r7(events)
    for n in range(3):
        call = [e for e in events if e.call_id == f"block{n}"]
        assert [e.type for e in call] == ["call_decided", "tool_started", "tool_finished"]
        assert call[-1].data["status"] == "interrupted"
        assert call[-1].data["started_seq"] == call[1].seq
    ok_ends = [e for e in events if e.type == "tool_finished" and e.data["status"] == "ok"]
    assert len(ok_ends) == 3
    # Opening again restores nothing twice and finds nothing left open.
    again = _pg(url, "h1", start_log=log)
    try:
        assert again.recovered == 0
        assert len(again.events(session_id="s1")) == len(events)
    finally:
        again.close()


async def test_a_start_returns_before_its_commit_and_the_log_is_emptied_after(
    pg_url: tuple[str, str], tmp_path: Path
) -> None:
    url, schema = pg_url
    log = tmp_path / "starts"
    journal = _pg(url, "h1", start_log=log)
    try:
        await journal.append(JournalEvent("session_created", "s1", None, None, {}))
        await journal.flush()
        release = _hold_writer(journal)
        try:
            await journal.append(JournalEvent("call_decided", "s1", "t1", "c1", {"d": 1}))
            with anyio.fail_after(5):  # does not wait for the (held) writer
                await journal.append(JournalEvent("tool_started", "s1", "t1", "c1", {"x": 1}))
            lines = log.read_bytes().splitlines()
            assert [line.count(b'"c1"') for line in lines] == [1, 1]  # decision and start
            assert b'"call_decided"' in lines[0] and b'"tool_started"' in lines[1]
            assert sql(schema, "SELECT count(*) FROM {s}.events")[0][0] == 1
        finally:
            release.set()
        await journal.flush()
        assert log.stat().st_size == 0  # all it held is committed
        assert sql(schema, "SELECT count(*) FROM {s}.events")[0][0] == 3
        # Many calls: the log stays small and ends empty.
        rec = Recorder()
        async with harness(coding_registry(rec), evaluator=ALLOW, journal=journal) as h:
            s = await h.create_session(principal=ALICE)
            for i in range(200):
                await s.call_tool("files__write_file", WRITE, call_id=f"c{i}")
            await journal.flush()
            assert log.stat().st_size == 0
            events = journal.events(session_id=s.id)
    finally:
        journal.close()
    assert not log.exists()
    check_r7(events)
    assert len(rec.calls) == 200


async def test_a_start_log_that_cannot_be_written_denies_the_call(
    pg_url: tuple[str, str], tmp_path: Path
) -> None:
    url, _ = pg_url
    with pytest.raises(JournalError, match=r"start log|cannot open"):
        _pg(url, "h1", start_log=tmp_path / "missing" / "starts")
    rec = Recorder()
    journal = _pg(url, "h1", start_log=tmp_path / "starts")
    async with harness(coding_registry(rec), evaluator=ALLOW, journal=journal) as h:
        s = await h.create_session(principal=ALICE)
        first = await s.call_tool("files__write_file", WRITE, call_id="c1")
        assert first.status == "ok"
        # The disk is full from here on (writes fail with ENOSPC).
        log = journal._start_log.log
        full = os.open("/dev/full", os.O_WRONLY)
        with log.lock:
            os.close(log.fd)
            log.fd = full
        with pytest.raises(JournalError, match="cannot write the start log"):
            await journal.append(JournalEvent("tool_started", s.id, None, "x", {}))
        denied = await s.call_tool("files__write_file", WRITE, call_id="c2")
        assert denied.status == "denied"
        events = journal.events(session_id=s.id)
    assert len(rec.calls) == 1  # the handler of the denied call never ran
    check_r7(events)
    assert [e.type for e in events if e.call_id == "c2"] == ["call_decided"]
    assert not [e for e in events if e.call_id == "x"]  # its seq was given back


async def test_while_the_database_is_away_starts_proceed_up_to_the_bound(
    pg_url: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Records wait in memory (bounded) while the database is away: with a start log a
    call still runs (its start is in the log) until the bound, then it is denied; all is
    written when the database returns."""
    import clearance.harness.journal._postgres as pg_module

    monkeypatch.setattr(pg_module, "MAX_PENDING", 40)
    _, schema = pg_url
    rec = Recorder()
    log = tmp_path / "starts"
    statuses: list[str] = []
    with Outage() as outage:
        journal = _pg(outage.url(schema), "h1", start_log=log)
        async with harness(coding_registry(rec), evaluator=ALLOW, journal=journal) as h:
            s = await h.create_session(principal=ALICE)
            assert (await s.call_tool("files__write_file", WRITE, call_id="c0")).status == "ok"
            await journal.flush()
            outage.cut()
            deadline = time.monotonic() + 10
            probes = 0
            while journal._writer.down is None:  # the writer finds out at its next commit
                assert time.monotonic() < deadline
                probes += 1
                await journal.append(JournalEvent("call_decided", s.id, None, f"p{probes}", {}))
                await anyio.sleep(0.05)
            for i in range(30):
                call = await s.call_tool("files__write_file", WRITE, call_id=f"d{i}")
                statuses.append(call.status)
            assert len(journal._writer.pending) <= 40
            outage.restore()
            deadline = time.monotonic() + 10
            while journal._writer.down is not None:
                assert time.monotonic() < deadline
                await anyio.sleep(0.05)
            await journal.flush()
            events = journal.events(session_id=s.id)
        assert not log.exists()
    ran = statuses.count("ok")
    assert 0 < ran < 30 and statuses == ["ok"] * ran + ["denied"] * (30 - ran)
    assert len(rec.calls) == 1 + ran
    check_r7(events)
    ends = Counter(e.data["status"] for e in events if e.type == "tool_finished")
    assert ends["ok"] == 1 + ran


async def test_sigkill_under_load_keeps_r7_in_every_session(
    pg_url: tuple[str, str], tmp_path: Path
) -> None:
    """Eight sessions calling without pause, killed at a random moment (the log being
    written, committed, emptied): reopened, every session's ``seq`` has no gaps and every
    start has exactly one end."""
    url, _ = pg_url
    log = _run_and_kill(tmp_path, url, "load")
    journal = _pg(url, "h1", start_log=log)
    try:
        events = journal.events()
    finally:
        journal.close()
    check_r7(events)
    assert len({e.session_id for e in events}) == 8
    ends = Counter(e.data["status"] for e in events if e.type == "tool_finished")
    assert ends["ok"] >= 8 * 300 and ends["interrupted"] == journal.recovered <= 8


def test_a_start_log_is_for_normal_durability_only(pg_url: tuple[str, str], tmp_path: Path) -> None:
    url, _ = pg_url
    with pytest.raises(ValueError, match="normal"):
        _pg(url, "h1", durability="full", start_log=tmp_path / "starts")
    assert not (tmp_path / "starts").exists()


def test_a_log_never_wholly_committed_is_moved_aside_and_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Starts that keep coming: the log is moved aside (``PATH.old``) at its size limit,
    the new one takes later starts, both are read at the next open, and the old one goes
    once all it held is committed."""
    import clearance.harness.journal._postgres_start_log as module
    from clearance.harness.journal._postgres_start_log import (
        PgStartLog,
        pg_line,
        read_pg_start_log,
    )

    monkeypatch.setattr(module, "LOG_MAX", 120)
    path = tmp_path / "starts"
    rows = [("s1", n, 1.5, "tool_started", "t", f"c{n}", 1, '{"tool":"x"}') for n in range(1, 7)]
    log = PgStartLog(path)
    try:

        def write(n: int) -> None:
            data = pg_line(rows[n - 1]).encode()
            os.write(log.log.fd, data)
            log.log.size += len(data)
            log.log.logged = n

        for n in (1, 2, 3):
            write(n)
        assert log.log.size >= 120
        log.tend(through=1, commits=1, force=False)  # not all committed: moved aside
        assert log.old.exists() and path.stat().st_size == 0 and log.old_logged == 3
        write(4)
        assert read_pg_start_log(path) == rows[:4]  # what a crash now leaves
        log.tend(through=2, commits=2, force=False)
        assert log.old.exists()  # row 3 is not committed yet
        log.tend(through=3, commits=3, force=False)
        assert not log.old.exists() and read_pg_start_log(path) == rows[3:4]
        log.tend(through=4, commits=4, force=True)
        assert path.stat().st_size == 0
    finally:
        log.close(remove=True)
    assert not path.exists()


def test_a_line_that_cannot_be_restored_is_set_aside(tmp_path: Path) -> None:
    """Issue 38: a start log holding a record no store can hold (an id with a lone
    surrogate; a record whose id is not a string) never blocks the host's reopening: the
    line is set aside in ``PATH.rejected`` (``PATH.old.rejected``) and the others read."""
    from clearance.harness.journal._postgres_start_log import pg_line, read_pg_start_log

    path = tmp_path / "starts"
    good = ("s1", 1, 1.5, "tool_started", "t", "c1", 1, '{"tool":"x"}')
    lone = b'[2,1.5,"tool_started","s1","t","mcp-\\ud800-1",1,{}]\n'
    not_text = b'[3,1.5,"tool_started","s1","t",7,1,{}]\n'
    path.write_bytes(lone + pg_line(good).encode() + not_text)
    Path(f"{path}.old").write_bytes(b"not json\n")
    assert read_pg_start_log(path) == [good]
    assert Path(f"{path}.rejected").read_bytes().count(b"\n") == 2
    assert Path(f"{path}.old.rejected").read_bytes() == b"not json\n"
