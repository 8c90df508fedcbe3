"""Issue 34, hosts named: every ask and record names its host, session and principal, in
``clearance asks list/show`` (table and JSON), ``clearance journal`` (table and JSON) and the
inbox card; and the command the gateway prints for a person works as printed, for a SQLite
file and for a PostgreSQL URL (it was path-joined: ``<cwd>/postgresql:/...``)."""

from __future__ import annotations

import json
import logging
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from postgres_support import fresh_schema

from clearance import Harness, Principal, Tool, ToolRegistry
from clearance.harness.ask_store_sqlite import SqliteAskStore
from clearance.harness.journal import SqliteJournal
from clearance.inbox._render import ask_card
from clearance.mcp.gateway._pending import PendingCalls
from clearance.policy import LocalEvaluator

pytestmark = pytest.mark.anyio

SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}
ALICE = Principal("User", "alice")


def _clearance(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "clearance", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def _harness(asks: Any, journal: Any = None) -> Harness:
    registry = ToolRegistry()
    registry.register(
        "files",
        [
            Tool("delete", lambda a, c: "deleted", input_schema=SCHEMA),
            Tool("read", lambda a, c: "text", input_schema=SCHEMA, read_only=True),
        ],
    )
    return Harness(
        registry,
        evaluator=LocalEvaluator(allow=["files.read"], ask=["files.delete"]),
        ask_store=asks,
        journal=journal,
    )


async def test_asks_and_the_journal_name_host_session_and_principal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLEARANCE_HOST", "named-host")
    asks_db, journal_db = tmp_path / "asks.db", tmp_path / "journal.db"
    store = SqliteAskStore(asks_db)
    async with _harness(store, SqliteJournal(journal_db)) as harness:
        assert harness.host == "named-host"
        session = await harness.create_session(principal=ALICE)
        auth = await session.authorize("files.delete", {"path": "x"}, call_id="c1")
        assert auth.pending and auth.ask_id is not None
        assert (await session.call_tool("files__read", {"path": "x"}, call_id="c2")).ok
        session_id = session.id
    store.close()

    listed = _clearance("asks", "list", "--db", str(asks_db), "--json")
    (ask,) = json.loads(listed.stdout)
    assert (ask["host"], ask["session_id"], ask["principal"]) == (
        "named-host",
        session_id,
        'User::"alice"',
    )
    table = _clearance("asks", "list", "--db", str(asks_db)).stdout
    header, row = table.splitlines()[:2]
    assert header.split()[:4] == ["ID", "STATUS", "HOST", "SESSION"]
    assert row.split()[2:4] == ["named-host", session_id]
    shown = _clearance("asks", "show", auth.ask_id, "--db", str(asks_db)).stdout
    assert f"host     named-host  session {session_id}" in shown

    calls = json.loads(_clearance("journal", "--db", str(journal_db), "--json").stdout)
    assert [(c["call_id"], c["host"], c["session_id"], c["principal"]) for c in calls] == [
        ("c1", "named-host", session_id, 'User::"alice"'),
        ("c2", "named-host", session_id, 'User::"alice"'),
    ]
    journal_table = _clearance("journal", "--db", str(journal_db)).stdout.splitlines()
    assert journal_table[0].split()[:4] == ["time", "host", "session", "principal"]
    assert all("named-host" in line and session_id in line for line in journal_table[1:])

    stored = SqliteAskStore(asks_db)
    try:
        found = stored.get(auth.ask_id)
    finally:
        stored.close()
    assert found is not None
    card = ask_card(found)
    assert "host <code>named-host</code>" in card and session_id in card


async def _pending_line(asks: Any, caplog: pytest.LogCaptureFixture) -> tuple[str, str]:
    """The ask a gateway leaves pending, and the ``clearance asks show`` command it logs."""
    async with _harness(asks) as harness:
        pending = PendingCalls(harness, show_ask_store=True, is_sessionless=lambda _: False)
        session = await harness.create_session(principal=ALICE)
        auth = await session.authorize("files.delete", {"path": "x"}, call_id="g1", wait=False)
        assert auth.pending and auth.ask_id is not None
        with caplog.at_level(logging.WARNING, logger="clearance.mcp"):
            pending._tell_the_person(auth)
    (line,) = [r.getMessage() for r in caplog.records if "waits for a person" in r.getMessage()]
    found = re.search(r"(clearance asks show .*?), then", line)
    assert found is not None, line
    return auth.ask_id, found.group(1)


def _run_printed(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(command)
    assert argv[0] == "clearance"
    return _clearance(*argv[1:], cwd=cwd)


async def test_the_gateways_printed_command_works_for_a_sqlite_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "dir with space").mkdir()
    store = SqliteAskStore(tmp_path / "dir with space" / "asks.db")
    try:
        ask_id, command = await _pending_line(store, caplog)
    finally:
        store.close()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shown = _run_printed(command, elsewhere)
    assert shown.returncode == 0, (command, shown.stderr)
    assert ask_id in shown.stdout


async def test_the_gateways_printed_command_works_for_a_postgresql_url(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from clearance.harness.ask_store_postgres import PostgresAskStore

    with fresh_schema() as (url, schema):
        store = PostgresAskStore(url)
        try:
            ask_id, command = await _pending_line(store, caplog)
        finally:
            store.close()
        argv = shlex.split(command)
        db = argv[argv.index("--db") + 1]
        assert db.startswith("postgresql://") and db.endswith(f"?schema={schema}"), command
        shown = _run_printed(command, tmp_path)
        assert shown.returncode == 0, (command, shown.stderr)
        assert ask_id in shown.stdout
