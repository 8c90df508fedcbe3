"""``clearance journal`` on the journal several hosts share: the real console script, in a
subprocess, against a SQLite file and a PostgreSQL store (a schema of its own on the test
server) alike, picked by the configuration (``store = "postgresql://..."`` or ``[journal]
path``) or by ``--db``. Then what only PostgreSQL needs: following rows that commit out of
``id`` order, an outage while following, and never reading another journal than the
configured store."""

from __future__ import annotations

import json
import shutil
import signal
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from console_script import clearance, command, env
from postgres_support import PG_URL, Outage, fresh_schema, sql
from store_backends import Stores, stores_fixture

from clearance import Harness, JournalEvent, Principal, SqliteJournal, Tool, ToolRegistry
from clearance.harness.journal import JOURNAL_VERSION
from clearance.policy import LocalEvaluator

pytestmark = pytest.mark.anyio

stores = stores_fixture()

ALICE = Principal("User", "alice")
BOB = Principal("User", "bob")
PATH = {
    "type": "object",
    "properties": {"path": {"type": "string"}},
    "required": ["path"],
    "additionalProperties": False,
}
RULES = {"allow": ["notes.read"], "ask": ["notes.delete(path=tmp/*)"], "deny": ["notes.purge"]}


# --- running the command -------------------------------------------------------------------


@asynccontextmanager
async def following(*args: str, cwd: Path) -> AsyncIterator[Follower]:
    """``clearance journal --follow --json --interval 0.05 ARGS`` running; stopped with
    Ctrl-C (SIGINT) at the end, which must exit 0 without a traceback."""
    argv = [*command(), "journal", *args, "--follow", "--json", "--interval", "0.05"]
    async with await anyio.open_process(argv, cwd=cwd, env=env()) as process:
        assert process.stdout is not None and process.stderr is not None
        follower = Follower(process)
        try:
            yield follower
        finally:
            if process.returncode is None:
                process.send_signal(signal.SIGINT)
            with anyio.fail_after(20):
                code = await process.wait()
            follower.stderr = b"".join([chunk async for chunk in process.stderr]).decode()
        assert code == 0, follower.stderr
        assert "Traceback" not in follower.stderr


class Follower:
    def __init__(self, process: anyio.abc.Process) -> None:
        assert process.stdout is not None
        self.process = process
        self.lines = BufferedByteReceiveStream(process.stdout)
        self.stderr = ""

    async def rows(self, n: int) -> list[dict[str, Any]]:
        with anyio.fail_after(20):
            return [json.loads(await self.lines.receive_until(b"\n", 1 << 20)) for _ in range(n)]


# --- the hosts -----------------------------------------------------------------------------


def registry() -> ToolRegistry:
    reg = ToolRegistry()
    reg.register(
        "notes",
        [
            Tool("read", lambda args, ctx: "text", input_schema=PATH, read_only=True),
            Tool("delete", lambda args, ctx: "deleted", input_schema=PATH),
            Tool("purge", lambda args, ctx: "purged", input_schema=PATH),
        ],
    )
    return reg


def open_journal(stores: Stores, host: str) -> Any:
    if stores.kind == "sqlite":
        return SqliteJournal(stores.target)
    from clearance.harness.journal import PostgresJournal

    return PostgresJournal(stores.target, host=host)


async def host_calls(stores: Stores, host: str, principal: Principal, session_id: str) -> None:
    """One host: a session of ``principal`` reading, deleting (asked, approved once) and
    purging (denied)."""
    journal = open_journal(stores, host)
    async with Harness(registry(), evaluator=LocalEvaluator(**RULES), journal=journal) as harness:
        session = await harness.create_session(
            principal=principal, session_id=session_id, on_permission_ask=lambda _: "allow_once"
        )
        assert (await session.call_tool("notes__read", {"path": "a.txt"}, call_id="c1")).ok
        assert (await session.call_tool("notes__delete", {"path": "tmp/x"}, call_id="c2")).ok
        denied = await session.call_tool("notes__purge", {"path": "all"}, call_id="c3")
        assert denied.status == "denied"


async def two_hosts(stores: Stores) -> None:
    # One after the other: a SQLite journal has one writer at a time.
    await host_calls(stores, "host-a", ALICE, "s_a")
    await host_calls(stores, "host-b", BOB, "s_b")


def configure(stores: Stores, where: Path) -> None:
    """The clearance.toml of a host writing to ``stores``: ``store = URL`` or ``[journal]
    path``."""
    head = (
        f'[journal]\npath = "{stores.target}"\n'
        if stores.kind == "sqlite"
        else f'store = "{stores.target}"\n'
    )
    (where / "clearance.toml").write_text(head + '[evaluator]\nkind = "noop"\n')


# --- listing and exporting, on both ----------------------------------------------------------


async def test_journal_lists_the_calls_of_every_host(stores: Stores, tmp_path: Path) -> None:
    await two_hosts(stores)
    configure(stores, tmp_path)
    before = _pg_state(stores)

    done = clearance("journal", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines()[1:]]
    assert [(r[4], r[5], r[6], r[8]) for r in rows] == [
        ('User::"alice"', "notes.read", "allow", "ok"),
        ('User::"alice"', "notes.delete", "ask", "ok"),
        ('User::"alice"', "notes.purge", "deny", "denied"),
        ('User::"bob"', "notes.read", "allow", "ok"),
        ('User::"bob"', "notes.delete", "ask", "ok"),
        ('User::"bob"', "notes.purge", "deny", "denied"),
    ]

    done = clearance("journal", "--json", "--session", "s_b", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [(r["session_id"], r["call_id"]) for r in json.loads(done.stdout)] == [
        ("s_b", "c1"),
        ("s_b", "c2"),
        ("s_b", "c3"),
    ]
    done = clearance("journal", "--json", "--call", "c2", cwd=tmp_path)
    assert [(r["principal"], r["decision"]) for r in json.loads(done.stdout)] == [
        ('User::"alice"', "ask"),
        ('User::"bob"', "ask"),
    ]
    done = clearance("journal", "--json", "--session", "s_a", "--call", "c3", cwd=tmp_path)
    [row] = json.loads(done.stdout)
    assert (row["tool"], row["status"]) == ("notes.purge", "denied")

    done = clearance("journal", "export", "--format", "jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(r["group"], r["tool"], r.get("expected")) for r in records] == [
        ("s_a", "notes.read", "allow"),
        ("s_a", "notes.delete", "ask"),
        ("s_a", "notes.purge", "deny"),
        ("s_b", "notes.read", "allow"),
        ("s_b", "notes.delete", "ask"),
        ("s_b", "notes.purge", "deny"),
    ]
    # Reading wrote nothing: no reader host, no record.
    assert _pg_state(stores) == before


def _pg_state(stores: Stores) -> Any:
    if stores.kind == "sqlite":
        return Path(stores.target).stat().st_size
    return (
        sql(stores.schema, "SELECT host_id, generation FROM {s}.hosts ORDER BY 1"),
        sql(stores.schema, "SELECT count(*), max(id) FROM {s}.events"),
    )


async def test_db_names_the_journal_over_the_configuration(stores: Stores, tmp_path: Path) -> None:
    await two_hosts(stores)
    # The configuration names another journal: a SQLite file with one call of carol's, or
    # a PostgreSQL store (another schema) with the same.
    with fresh_schema() as (other_url, _):
        other = Stores("postgres", other_url) if stores.kind == "sqlite" else None
        elsewhere = other or Stores("sqlite", str(tmp_path / "other.db"))
        await host_calls(elsewhere, "host-c", Principal("User", "carol"), "s_c")
        configure(elsewhere, tmp_path)
        done = clearance("journal", "--json", "--db", stores.target, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert {r["session_id"] for r in json.loads(done.stdout)} == {"s_a", "s_b"}
        done = clearance("journal", "--db", stores.target, "export", cwd=tmp_path)
        assert {json.loads(line)["group"] for line in done.stdout.splitlines()} == {"s_a", "s_b"}
        done = clearance("journal", "export", "--db", stores.target, cwd=tmp_path)
        assert {json.loads(line)["group"] for line in done.stdout.splitlines()} == {"s_a", "s_b"}
        # Without --db, the configured one.
        done = clearance("journal", "--json", cwd=tmp_path)
        assert {r["session_id"] for r in json.loads(done.stdout)} == {"s_c"}


async def test_export_from_postgresql_is_the_sqlite_corpus(tmp_path: Path) -> None:
    """The same calls journaled in SQLite and in PostgreSQL export the same corpus lines
    (but the time each call was made), which replay and suggest read alike."""
    with fresh_schema() as (url, schema):
        exports = {}
        for kind, target in (("sqlite", str(tmp_path / "j.db")), ("postgres", url)):
            backend = Stores(kind, target, schema)
            await two_hosts(backend)
            done = clearance(
                "journal", "export", "--db", target, "-o", f"{kind}.jsonl", cwd=tmp_path
            )
            assert done.returncode == 0, done.stderr
            assert "exported 6 call(s)" in done.stderr
            exports[kind] = (tmp_path / f"{kind}.jsonl").read_text().splitlines()

    def untimed(line: str) -> dict[str, Any]:
        record = json.loads(line)
        assert isinstance(record.pop("ts"), float)
        return dict(record)

    sqlite_lines, postgres_lines = exports["sqlite"], exports["postgres"]
    assert len(sqlite_lines) == 6
    assert [untimed(line) for line in postgres_lines] == [untimed(line) for line in sqlite_lines]
    # Byte for byte apart from ts: same keys in the same order, same encoding.
    strip = [line.split(',"ts":')[0] for line in sqlite_lines]
    assert [line.split(',"ts":')[0] for line in postgres_lines] == strip

    # What replay and suggest learn from them is the same.
    (tmp_path / "tools.json").write_text(
        json.dumps(
            [
                {"name": f"notes.{n}", "input_schema": PATH, "read_only": n == "read"}
                for n in ("read", "delete", "purge")
            ]
        )
    )
    (tmp_path / "stricter.toml").write_text(
        'allow = ["notes.read"]\nask = []\ndeny = ["notes.purge", "notes.delete"]\n'
    )
    reports = {}
    for kind in ("sqlite", "postgres"):
        shutil.copy(tmp_path / f"{kind}.jsonl", tmp_path / "corpus.jsonl")  # one name in both
        args = ("--tools", "tools.json", "--rules", "stricter.toml", "--json")
        done = clearance("replay", "corpus.jsonl", *args, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        for measured in ("latency_us", "elapsed_s", "calls_per_second"):
            del report[measured]
        suggested = clearance("suggest", "corpus.jsonl", "--tools", "tools.json", cwd=tmp_path)
        assert suggested.returncode == 0, suggested.stderr
        reports[kind] = (report, suggested.stdout)
    assert reports["postgres"] == reports["sqlite"]
    report, suggestions = reports["sqlite"]
    assert report["confusion"]["ask"]["deny"] == 2  # the stricter rules deny both deletes
    assert 'Action::"notes.read"' in suggestions


async def test_suggest_reads_the_store_as_it_reads_the_sqlite_journal(tmp_path: Path) -> None:
    """``clearance suggest postgresql://...`` learns from the store's journal what it learns
    from a SQLite journal of the same calls; an unreachable store is an error that names it
    (never its password) and prints nothing."""
    (tmp_path / "tools.json").write_text(
        json.dumps(
            [
                {"name": f"notes.{n}", "input_schema": PATH, "read_only": n == "read"}
                for n in ("read", "delete", "purge")
            ]
        )
    )
    with fresh_schema() as (url, schema):
        printed = {}
        for kind, target in (("sqlite", str(tmp_path / "j.db")), ("postgres", url)):
            await two_hosts(Stores(kind, target, schema))
            done = clearance("suggest", target, "--tools", "tools.json", "--json", cwd=tmp_path)
            assert done.returncode == 0, done.stderr
            printed[kind] = json.loads(done.stdout)
    sqlite, postgres = printed["sqlite"], printed["postgres"]
    assert postgres["source"] == f"the PostgreSQL store at {PG_URL} (schema {schema})"
    assert postgres["source_kind"] == sqlite["source_kind"] == "journal"
    del sqlite["source"], postgres["source"]
    assert postgres == sqlite
    # Learned from the allowed read and the asked-and-approved delete, never the purge.
    assert 'Action::"notes.read"' in postgres["policies"]
    assert "notes.purge" not in postgres["policies"]

    secret = dead_url().replace("//postgres@", "//postgres:hunter2@", 1)
    done = clearance("suggest", secret, "--tools", "tools.json", cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert "is unreachable" in done.stderr and "hunter2" not in done.stderr
    assert "Traceback" not in done.stderr


# --- following, on both ----------------------------------------------------------------------


async def test_follow_prints_the_calls_as_hosts_make_them(stores: Stores, tmp_path: Path) -> None:
    configure(stores, tmp_path)
    if stores.kind == "sqlite":
        await SqliteJournal(stores.target).aclose()  # the file exists before the follower
    else:
        assert clearance("store", "migrate", cwd=tmp_path).returncode == 0
    async with following(cwd=tmp_path) as follower:
        await host_calls(stores, "host-a", ALICE, "s_a")
        first = await follower.rows(3)
        await host_calls(stores, "host-b", BOB, "s_b")
        second = await follower.rows(3)
    assert [(r["session_id"], r["call_id"], r["status"]) for r in first + second] == [
        ("s_a", "c1", "ok"),
        ("s_a", "c2", "ok"),
        ("s_a", "c3", "denied"),
        ("s_b", "c1", "ok"),
        ("s_b", "c2", "ok"),
        ("s_b", "c3", "denied"),
    ]


# --- PostgreSQL: never another journal, rows out of order, outages -------------------------


def dead_url() -> str:
    """A PostgreSQL URL where nothing listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"postgresql://postgres@127.0.0.1:{port}/test?schema=clearance"


@pytest.mark.parametrize(
    "args",
    [["journal"], ["journal", "--json"], ["journal", "export"], ["journal", "--follow"]],
)
async def test_an_unreachable_store_is_an_error_not_the_local_journal(
    args: list[str], tmp_path: Path
) -> None:
    # A SQLite journal with calls at the [journal] path: what a fallback would print.
    await host_calls(Stores("sqlite", str(tmp_path / "local.db")), "h", ALICE, "s_local")
    url = dead_url()
    (tmp_path / "clearance.toml").write_text(
        f'store = "{url}"\n[journal]\npath = "{tmp_path / "local.db"}"\n'
        '[evaluator]\nkind = "noop"\n'
    )
    done = clearance(*args, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    assert "s_local" not in done.stderr and "notes.read" not in done.stderr
    shown = url.split("?")[0]
    assert f"the PostgreSQL store at {shown} (schema clearance) is unreachable" in done.stderr
    assert "Traceback" not in done.stderr
    # --db names it the same way.
    done = clearance("journal", "--db", url, cwd=tmp_path)
    assert done.returncode == 2 and shown in done.stderr


def test_a_store_without_a_journal_is_an_error(tmp_path: Path) -> None:
    with fresh_schema() as (url, schema):
        done = clearance("journal", "--db", url, cwd=tmp_path)
        assert done.returncode == 2
        assert f"no journal in the PostgreSQL store at {PG_URL} (schema {schema})" in done.stderr
        assert "clearance store migrate" in done.stderr
        # ...and the reader created nothing.
        assert sql(schema, "SELECT to_regclass('{s}.meta')") == [(None,)]
        # A schema newer than this clearance reads is refused, not misread.
        assert clearance("store", "migrate", "--url", url, cwd=tmp_path).returncode == 0
        sql(schema, "UPDATE {s}.meta SET value = '99' WHERE key = 'schema_version'")
        from clearance.harness.postgres import SCHEMA_VERSION  # the postgres extra

        done = clearance("journal", "export", "--db", url, cwd=tmp_path)
        assert done.returncode == 2 and done.stdout == ""
        assert (
            f"(schema {schema}) has schema version 99; this clearance reads up to {SCHEMA_VERSION}"
            in (done.stderr)
        )


def _insert(conn: Any, schema: str, session_id: str, call_id: str) -> None:
    """A decided, denied call of ``session_id`` (its first record), as a host writes it."""
    data = {
        "qualified_name": "notes.purge",
        "principal": 'User::"mallory"',
        "decision": "deny",
        "reasons": ["deny:notes.purge"],
        "outcome": "denied",
    }
    conn.execute(
        f"INSERT INTO {schema}.events (session_id, seq, host_id, ts, type, turn_id, call_id, "
        "version, data) VALUES (%s, 1, 'h', 1.0, 'call_decided', NULL, %s, %s, %s)".encode(),
        (session_id, call_id, JOURNAL_VERSION, json.dumps(data)),
    )


async def test_follow_prints_a_row_committed_after_a_larger_id(tmp_path: Path) -> None:
    """Host a inserts first (a smaller id) and commits last: the follower, which has
    already printed host b's row (a larger id), still prints host a's."""
    import psycopg

    with fresh_schema() as (url, schema):
        assert clearance("store", "migrate", "--url", url, cwd=tmp_path).returncode == 0
        async with following("--db", url, cwd=tmp_path) as follower:
            with psycopg.connect(PG_URL) as slow:  # a transaction left open
                _insert(slow, schema, "s_slow", "c1")
                with psycopg.connect(PG_URL, autocommit=True) as quick:
                    _insert(quick, schema, "s_quick", "c1")
                [row] = await follower.rows(1)
                assert row["session_id"] == "s_quick"
                ids = sql(schema, "SELECT id, session_id FROM {s}.events ORDER BY id")
                assert [s for _, s in ids] == ["s_quick"]  # s_slow's id is not visible yet
                slow.commit()
            [row] = await follower.rows(1)
            assert (row["session_id"], row["status"]) == ("s_slow", "denied")
            # the slow row did take the smaller id
            ids = sql(schema, "SELECT session_id FROM {s}.events ORDER BY id")
            assert ids == [("s_slow",), ("s_quick",)]
            # A rolled-back insert leaves a gap for good; later rows still come through.
            with psycopg.connect(PG_URL) as aborted:
                _insert(aborted, schema, "s_gone", "c1")
                aborted.rollback()
            with psycopg.connect(PG_URL, autocommit=True) as quick:
                _insert(quick, schema, "s_after", "c1")
            [row] = await follower.rows(1)
            assert row["session_id"] == "s_after"


def test_a_gap_that_never_fills_is_forgotten(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import psycopg

    from clearance.cli import _journal_read

    with fresh_schema() as (url, schema):
        assert clearance("store", "migrate", "--url", url, cwd=tmp_path).returncode == 0
        reader = _journal_read.StoreJournal(url)
        try:
            types = ("call_decided",)
            with psycopg.connect(PG_URL) as aborted:
                _insert(aborted, schema, "s_gone", "c1")
                aborted.rollback()
            with psycopg.connect(PG_URL, autocommit=True) as conn:
                _insert(conn, schema, "s_1", "c1")
            read = reader.read_new(types, session_id=None, call_id=None)
            assert [e.session_id for e in read] == ["s_1"]
            assert len(reader._gaps) == 1  # the rolled-back id, asked for again
            assert reader.read_new(types, session_id=None, call_id=None) == []
            assert len(reader._gaps) == 1
            monkeypatch.setattr(_journal_read, "GAP_WAIT", 0.0)
            assert reader.read_new(types, session_id=None, call_id=None) == []
            assert reader._gaps == []
            with psycopg.connect(PG_URL, autocommit=True) as conn:
                _insert(conn, schema, "s_2", "c1")
            read = reader.read_new(types, session_id=None, call_id=None)
            assert [e.session_id for e in read] == ["s_2"]
            assert isinstance(read[0], JournalEvent) and read[0].data["decision"] == "deny"
        finally:
            reader.close()


async def test_follow_goes_on_after_the_store_comes_back(tmp_path: Path) -> None:
    """The store goes away while following: a warning, then, when it is back, the calls
    made meanwhile, none missed and none twice."""
    with fresh_schema() as (url, schema), Outage() as outage:
        assert clearance("store", "migrate", "--url", url, cwd=tmp_path).returncode == 0
        stores = Stores("postgres", url, schema)
        async with following("--db", outage.url(schema), cwd=tmp_path) as follower:
            await host_calls(stores, "host-a", ALICE, "s_a")
            assert len(await follower.rows(3)) == 3
            outage.cut()
            await anyio.sleep(0.5)  # the follower's polls fail
            await host_calls(stores, "host-b", BOB, "s_b")  # written straight to the server
            outage.restore()
            rows = await follower.rows(3)
            assert [(r["session_id"], r["call_id"]) for r in rows] == [
                ("s_b", "c1"),
                ("s_b", "c2"),
                ("s_b", "c3"),
            ]
        assert "warning:" in follower.stderr and "unreachable" in follower.stderr
        assert "again" in follower.stderr
