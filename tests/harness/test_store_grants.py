"""The grant store contract, run against every durable store: SQLite (a file) and
PostgreSQL (a schema of its own on a real server). Rule R12: a revoked grant authorizes
nothing from the next lookup on, in every store object and every process that shares the
store. Then what only the PostgreSQL store does: notices between hosts, and failing closed
while its database is away."""

from __future__ import annotations

import json
import logging
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from postgres_support import Outage, fresh_schema, sql
from support import ALICE, Recorder, coding_registry, harness

from clearance import Grant, GrantScope, PermissionAsk, StoreError
from clearance.harness.approvals import Answer, MemoryGrantStore, SqliteGrantStore
from clearance.policy import LocalEvaluator

pytestmark = pytest.mark.anyio

ALICE_ID = str(ALICE)
WRITE = {"path": "src/a.py", "content": "x"}
ASK_WRITES = LocalEvaluator(allow=["files.read_file"], ask=["files.write_file"])


@dataclass
class Backend:
    """One durable store under test: how to open another object on it, and how another
    client (the sqlite3 shell, psql) changes its table behind its back."""

    kind: str
    target: str
    """The file path or the URL."""
    schema: str = ""

    def open(self) -> Any:
        if self.kind == "sqlite":
            return SqliteGrantStore(self.target)
        from clearance.harness.grants_postgres import PostgresGrantStore

        return PostgresGrantStore(self.target)

    def raw(self, statement: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        if self.kind == "sqlite":
            db = sqlite3.connect(self.target)
            try:
                rows = db.execute(statement.replace("{s}.", ""), params).fetchall()
                db.commit()
                return rows
            finally:
                db.close()
        return sql(self.schema, statement.replace("?", "%s"), params)

    def add_in_another_process(self, grant_id: str) -> None:
        module, cls = (
            ("clearance", "SqliteGrantStore")
            if self.kind == "sqlite"
            else ("clearance.harness.grants_postgres", "PostgresGrantStore")
        )
        code = (
            "import sys\n"
            "from clearance import Grant, GrantScope\n"
            f"from {module} import {cls}\n"
            f"s = {cls}(sys.argv[1])\n"
            "s.add(Grant(sys.argv[2], 'User::\"alice\"', 'files.write_file',"
            " GrantScope.prefix_of('/path', 'src/'), 'always'))\n"
            "s.close()\n"
        )
        subprocess.run([sys.executable, "-c", code, self.target, grant_id], check=True, timeout=60)


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "sqlite":
        yield Backend("sqlite", str(tmp_path / "g.db"))
        return
    with fresh_schema() as (url, schema):
        yield Backend("postgres", url, schema)


@pytest.fixture
def stores(backend: Backend) -> Iterator[Callable[[], Any]]:
    """Opens store objects on the backend; all are closed at the end."""
    opened: list[Any] = []

    def open_one() -> Any:
        store = backend.open()
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        store.close()


def _grant(grant_id: str = "g_1", kind: str = "always") -> Grant:
    return Grant(
        grant_id,
        ALICE_ID,
        "files.write_file",
        GrantScope.prefix_of("/path", "src/"),
        kind,  # type: ignore[arg-type]
        session_id="s1" if kind == "session" else None,
        created_at=1_700_000_000.0,
    )


def _find(store: Any, arguments: dict[str, str] = WRITE) -> Grant | None:
    found: Grant | None = store.find(ALICE_ID, "files.write_file", arguments, "s1")
    return found


def test_two_stores_see_each_others_adds_and_revokes(stores: Callable[[], Any]) -> None:
    a, b = stores(), stores()
    assert _find(a) is None and _find(b) is None  # both loaded, both empty
    a.add(_grant())
    assert _find(b) == _grant() and [g.grant_id for g in b.list()] == ["g_1"]
    assert b.revoke("g_1")
    assert _find(a) is None and a.list() == []
    assert not a.revoke("g_1")  # already gone, from either side
    b.add(_grant("g_2"))
    a.add(_grant("g_3"))
    assert {g.grant_id for g in a.list()} == {g.grant_id for g in b.list()} == {"g_2", "g_3"}


def test_a_grant_covers_only_its_principal_tool_scope_and_time(stores: Callable[[], Any]) -> None:
    a, b = stores(), stores()
    soon = Grant(
        "g_t",
        ALICE_ID,
        "files.write_file",
        GrantScope.exact({"path": "src/t.py", "content": "x"}),
        "always",
        expires_at=time.time() + 0.5,
    )
    a.add(_grant())
    a.add(soon)
    assert b.find('User::"bob"', "files.write_file", WRITE, "s1") is None
    assert b.find(ALICE_ID, "files.delete", WRITE, "s1") is None
    assert _find(b, {"path": "docs/a.md", "content": "x"}) is None
    assert _find(b, {"path": "src/t.py", "content": "x"}) is not None
    assert [g.grant_id for g in b.list(tool="files.delete")] == []
    assert {g.grant_id for g in b.list(principal=ALICE_ID)} == {"g_1", "g_t"}
    time.sleep(0.6)
    found = _find(b, {"path": "src/t.py", "content": "x"})
    assert found is not None and found.grant_id == "g_1"  # the prefix grant; g_t expired


def test_session_grants_stay_in_memory(stores: Callable[[], Any]) -> None:
    a, b = stores(), stores()
    a.add(_grant("g_s", kind="session"))
    assert _find(a) is not None and _find(b) is None
    b.add(_grant("g_other"))  # a reload in `a` keeps its session grants
    assert {g.grant_id for g in a.list()} == {"g_s", "g_other"}
    a.end_session("s1")
    assert [g.grant_id for g in a.list()] == ["g_other"]
    assert not b.revoke("g_s")  # another store cannot reach a session grant


def test_any_client_that_changes_the_table_is_seen(
    backend: Backend, stores: Callable[[], Any]
) -> None:
    """The change counter is kept by triggers in the database, so a writer that knows
    nothing of it (the sqlite3 shell, psql, an older clearance) is seen too."""
    store = stores()
    store.add(_grant())
    assert _find(store) is not None
    backend.raw("DELETE FROM {s}.grants")
    assert _find(store) is None


def test_an_unreadable_row_authorizes_nothing_and_can_be_revoked(
    backend: Backend, stores: Callable[[], Any], caplog: pytest.LogCaptureFixture
) -> None:
    store = stores()
    store.add(_grant())
    body = _grant("g_bad").to_json()
    body["scope"] = {"kind": "everything"}  # e.g. a newer clearance's scope kind
    backend.raw("INSERT INTO {s}.grants VALUES (?, ?)", ("g_bad", json.dumps(body)))
    with caplog.at_level(logging.WARNING, logger="clearance"):
        assert [g.grant_id for g in store.list()] == ["g_1"]
        assert [g.grant_id for g in stores().list()] == ["g_1"]
    assert "skipping grant 'g_bad'" in caplog.text
    assert store.revoke("g_bad")
    assert backend.raw("SELECT grant_id FROM {s}.grants") == [("g_1",)]


async def test_a_running_harness_asks_again_once_another_store_revokes(
    stores: Callable[[], Any],
) -> None:
    rec = Recorder()
    asks: list[PermissionAsk] = []

    def answer(ask: PermissionAsk) -> Answer:
        asks.append(ask)
        return "allow_always" if len(asks) == 1 else "deny"

    store = stores()
    async with harness(coding_registry(rec), evaluator=ASK_WRITES, grant_store=store) as h:
        s = await h.create_session(principal=ALICE, on_permission_ask=answer)
        assert (await s.call_tool("files__write_file", WRITE)).ok
        (grant,) = store.list()
        assert (await s.call_tool("files__write_file", WRITE)).grant == grant.grant_id
        assert stores().revoke(grant.grant_id)
        again = await s.call_tool("files__write_file", WRITE)
        fresh = await h.create_session(principal=ALICE, on_permission_ask=answer)
        in_new_session = await fresh.call_tool("files__write_file", WRITE)
    assert again.status == "denied" and in_new_session.status == "denied"
    assert len(asks) == 3 and len(rec.calls) == 2


async def test_a_grant_added_by_another_process_is_used(
    backend: Backend, stores: Callable[[], Any]
) -> None:
    rec = Recorder()
    store = stores()
    async with harness(coding_registry(rec), evaluator=ASK_WRITES, grant_store=store) as h:
        s = await h.create_session(principal=ALICE, on_permission_ask=lambda ask: "deny")
        assert (await s.call_tool("files__write_file", WRITE)).status == "denied"
        await anyio.to_thread.run_sync(backend.add_in_another_process, "g_p")
        out = await s.call_tool("files__write_file", WRITE)
    assert out.ok and out.grant == "g_p" and len(rec.calls) == 1


# -- PostgreSQL only ------------------------------------------------------------------------


@pytest.fixture
def pg_url() -> Iterator[tuple[str, str]]:
    with fresh_schema() as found:
        yield found


def _wait_until(check: Callable[[], bool], timeout: float) -> float:
    """Seconds until ``check()`` held; fails after ``timeout``."""
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < timeout, "not within the time allowed"
        time.sleep(0.005)
    return time.monotonic() - start


def test_another_hosts_add_and_revoke_reach_the_copy_within_a_second(
    pg_url: tuple[str, str],
) -> None:
    """NOTIFY: the copy in memory follows another host's changes without a lookup (the
    lookup would reload anyway: this is what keeps reloads off the calls)."""
    from clearance.harness.grants_postgres import PostgresGrantStore

    url, _ = pg_url
    a, b = PostgresGrantStore(url), PostgresGrantStore(url)
    try:
        assert a.database.wait_listening()
        assert _find(a) is None  # loaded

        def held() -> Grant | None:
            return MemoryGrantStore.find(a, ALICE_ID, "files.write_file", WRITE, "s1")

        b.add(_grant())
        assert _wait_until(lambda: held() is not None, 1.0) < 1.0
        assert b.revoke("g_1")
        assert _wait_until(lambda: held() is None, 1.0) < 1.0
    finally:
        a.close()
        b.close()


async def test_an_unreachable_database_denies_and_recovers_by_itself(
    pg_url: tuple[str, str],
) -> None:
    """Fail closed: while the database is away a call that needs a grant is denied (its
    handler never runs) with an error naming the store; once it is back the same call is
    allowed again, with no restart."""
    from clearance.harness.grants_postgres import PostgresGrantStore
    from clearance.harness.postgres import PostgresDatabase

    _, schema = pg_url
    rec = Recorder()
    failures: list[BaseException] = []
    with Outage() as outage:
        database = PostgresDatabase(outage.url(schema), timeout=1.0)
        store = PostgresGrantStore(database)
        try:
            store.add(_grant())
            async with harness(
                coding_registry(rec),
                evaluator=ASK_WRITES,
                grant_store=store,
                diagnostics=lambda cid, exc, info: failures.append(exc),
            ) as h:
                s = await h.create_session(principal=ALICE, on_permission_ask=lambda a: "deny")
                assert (await s.call_tool("files__write_file", WRITE)).grant == "g_1"
                outage.cut()
                denied = await s.call_tool("files__write_file", WRITE)
                assert denied.status == "denied" and len(rec.calls) == 1
                with pytest.raises(StoreError, match="unreachable") as caught:
                    _find(store)
                assert "the PostgreSQL store at postgresql://" in str(caught.value)
                assert f"(schema {schema})" in str(caught.value)
                assert caught.value.store == database.label
                outage.restore()
                await anyio.to_thread.run_sync(
                    lambda: _wait_until(lambda: database.down is None, 10)
                )
                back = await s.call_tool("files__write_file", WRITE)
        finally:
            store.close()
            database.close()
    assert back.ok and back.grant == "g_1" and len(rec.calls) == 2
    assert any(isinstance(f, StoreError) for f in failures)


def test_a_revocation_made_while_disconnected_is_seen_at_the_next_lookup(
    pg_url: tuple[str, str],
) -> None:
    """The notice of a revoke made while this host's listener was cut is lost; the lookup
    still sees it (the counter), and the reconnection re-checks."""
    from clearance.harness.grants_postgres import PostgresGrantStore
    from clearance.harness.postgres import PostgresDatabase

    url, schema = pg_url
    with Outage() as outage:
        database = PostgresDatabase(outage.url(schema), timeout=1.0)
        near = PostgresGrantStore(database)
        far = PostgresGrantStore(url)
        try:
            near.add(_grant())
            assert database.wait_listening() and _find(near) is not None
            outage.cut()
            assert far.revoke("g_1")
            outage.restore()
            _wait_until(lambda: database.down is None and database.wait_listening(0.01), 10)
            assert _find(near) is None
        finally:
            near.close()
            far.close()
            database.close()


def test_a_bad_url_is_a_clear_error() -> None:
    from clearance.errors import ConfigError
    from clearance.harness.grants_postgres import PostgresGrantStore

    with pytest.raises(ConfigError, match="postgresql:// URL"):
        PostgresGrantStore("mysql://localhost/db")
    with pytest.raises(ConfigError, match="invalid schema name"):
        PostgresGrantStore("postgresql://localhost/db?schema=Robert');DROP")
