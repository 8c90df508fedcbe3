"""Issue 38: the PostgreSQL grant store refreshes from a change feed, as the SQLite one does
(only the rows changed since the version it holds), and answers ``clearance grants list``
with the filters applied in SQL. On the real test server, a schema per test; another
client is ``psql``-like (a connection of its own). Rule R12 holds throughout: whatever
changed the table, the next lookup sees it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest
from postgres_support import fresh_schema, sql

from clearance import Grant, GrantScope

pytest.importorskip("psycopg")

from clearance.harness import postgres
from clearance.harness.grants_postgres import PostgresGrantStore

ALICE_ID = 'User::"alice"'
TOOL = "files.write_file"
WRITE = {"path": "src/a.py", "content": "x"}


def _exact(grant_id: str, arguments: Mapping[str, Any], principal: str = ALICE_ID) -> Grant:
    return Grant(grant_id, principal, TOOL, GrantScope.exact(arguments), "always")


def _args(k: int) -> dict[str, str]:
    return {"path": f"src/{k}.py", "content": "x"}


class Watched(PostgresGrantStore):
    """A store that notes what each refresh read: ``None`` for the whole table, else the
    changed ids, with the number of rows."""

    def __init__(self, url: str, **options: Any) -> None:
        self.refreshes: list[tuple[list[str] | None, int]] = []
        self.filtered: list[int] = []
        super().__init__(url, **options)

    def _apply_rows(self, rows: Sequence[tuple[str, str]], changed: Sequence[str] | None) -> None:
        self.refreshes.append((None if changed is None else list(changed), len(rows)))
        super()._apply_rows(rows, changed)

    def _filtered(self, rows: Any, principal: str | None, tool: str | None) -> list[Grant]:
        rows = list(rows)
        self.filtered.append(len(rows))
        return super()._filtered(rows, principal, tool)


@pytest.fixture
def schema() -> Iterator[tuple[str, str]]:
    with fresh_schema() as found:
        yield found


def _found(store: PostgresGrantStore, arguments: Mapping[str, Any] = WRITE) -> str | None:
    grant = store.find(ALICE_ID, TOOL, arguments, "s1")
    return None if grant is None else grant.grant_id


def test_a_change_elsewhere_reads_only_the_changed_rows(schema: tuple[str, str]) -> None:
    url, name = schema
    other = PostgresGrantStore(url)
    store = Watched(url, load=False)  # no refresh by a notice before the first lookup
    try:
        for k in range(50):
            other.add(_exact(f"g_{k}", _args(k)))
        assert _found(store, _args(7)) == "g_7"
        assert store.refreshes[0] == (None, 50)  # the first lookup reads the table
        store.refreshes.clear()
        other.add(_exact("g_hit", WRITE))
        assert _found(store) == "g_hit"
        assert other.revoke("g_7")
        assert _found(store, _args(7)) is None
        # By hand: a body rewritten, a row renamed, a row deleted.
        body = json.loads(str(sql(name, "SELECT body FROM {s}.grants WHERE grant_id='g_8'")[0][0]))
        body["grant_id"] = "g_80"
        sql(
            name,
            "UPDATE {s}.grants SET grant_id='g_80', body=%s WHERE grant_id='g_8'",
            (json.dumps(body),),
        )
        sql(name, "UPDATE {s}.grants SET body='garbage' WHERE grant_id='g_9'")
        sql(name, "DELETE FROM {s}.grants WHERE grant_id='g_10'")
        assert _found(store, _args(8)) == "g_80"
        assert _found(store, _args(9)) is None  # a spoiled row authorizes nothing
        assert _found(store, _args(10)) is None
        assert _found(store, _args(11)) == "g_11"
        assert store.refreshes, "the changes were read"
        # Every refresh read only what changed (a notice may have read some first).
        assert all(changed is not None and rows <= 2 for changed, rows in store.refreshes)
        assert {g.grant_id for g in store.list()} == (
            {f"g_{k}" for k in range(50)} - {"g_7", "g_8", "g_9", "g_10"} | {"g_hit", "g_80"}
        )
    finally:
        store.close()
        other.close()


def test_a_truncate_or_a_pruned_feed_reloads_everything(schema: tuple[str, str]) -> None:
    url, name = schema
    store = Watched(url)
    try:
        store.add(_exact("g_1", WRITE))
        assert _found(store) == "g_1"
        sql(name, "TRUNCATE {s}.grants")
        assert _found(store) is None
        assert store.refreshes[-1] == (None, 0)
        sql(
            name,
            "INSERT INTO {s}.grants (grant_id, body) VALUES (%s, %s)",
            ("g_2", json.dumps(_exact("g_2", WRITE).to_json())),
        )
        # The feed no longer reaches back to the version the store holds.
        mark = len(store.refreshes)
        sql(name, "UPDATE {s}.grants_version SET pruned = version + 1")
        sql(name, "DELETE FROM {s}.grants WHERE grant_id = 'nothing'")  # a change, no row
        assert _found(store) == "g_2"
        # (A notice may have read the insert first; the pruned feed is read whole.)
        assert (None, 1) in store.refreshes[mark:]
    finally:
        store.close()


def test_the_feed_is_pruned_past_10000_versions(schema: tuple[str, str]) -> None:
    url, name = schema
    store = PostgresGrantStore(url)
    try:
        store.add(_exact("g_0", WRITE))  # migrated
        sql(name, "INSERT INTO {s}.grants_changes VALUES (500, 'a'), (1000, 'b'), (1001, 'c')")
        sql(name, "UPDATE {s}.grants_version SET version = 10998")
        store.add(_exact("g_1", _args(1)))
        store.add(_exact("g_2", _args(2)))  # version 11,000
        assert sql(name, "SELECT min(version) FROM {s}.grants_changes") == [(1001,)]
        assert sql(name, "SELECT pruned FROM {s}.grants_version") == [(1000,)]
        assert {g.grant_id for g in store.list()} == {"g_0", "g_1", "g_2"}
    finally:
        store.close()


def test_query_applies_the_filters_in_sql(schema: tuple[str, str]) -> None:
    url, name = schema
    writer = PostgresGrantStore(url)
    for k in range(5):
        writer.add(_exact(f"g_{k}", _args(k)))
    writer.add(Grant("g_bob", 'User::"bob"', TOOL, GrantScope.tool(), "always"))
    writer.add(Grant("g_read", ALICE_ID, "files.read_file", GrantScope.tool(), "always"))
    writer.close()
    sql(name, "INSERT INTO {s}.grants (grant_id, body) VALUES ('g_bad', 'not json')")
    store = Watched(url, load=False)
    try:
        assert {g.grant_id for g in store.query(principal=ALICE_ID, tool=TOOL)} == {
            f"g_{k}" for k in range(5)
        }
        assert [g.grant_id for g in store.query(principal='User::"bob"')] == ["g_bob"]
        assert [g.grant_id for g in store.query(tool="files.read_file")] == ["g_read"]
        assert len(store.query()) == 7  # the bad row is skipped
        # Each filtered query read only its rows; nothing was loaded into memory.
        assert store.filtered == [5, 1, 1, 8]
        assert store._grants == {} and store.refreshes == []
        index = (
            "SELECT count(*) FROM pg_indexes WHERE indexname = 'grants_by_key' AND schemaname = %s"
        )
        assert sql(name, index, (name,)) == [(1,)]
    finally:
        store.close()


def test_a_schema_at_version_2_is_migrated_with_its_grants(
    schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database an older clearance made (no feed, no key columns): its grants get their
    columns and the feed works from then on."""
    url, name = schema
    import psycopg

    old = tuple(step for step in postgres.MIGRATIONS if step[0] <= 2)
    monkeypatch.setattr(postgres, "MIGRATIONS", old)
    monkeypatch.setattr(postgres, "SCHEMA_VERSION", 2)
    with psycopg.connect(url.split("?")[0], autocommit=True) as conn:
        postgres.migrate(conn, name)
    sql(
        name,
        "INSERT INTO {s}.grants VALUES (%s, %s)",
        ("g_old", json.dumps(_exact("g_old", WRITE).to_json())),
    )
    monkeypatch.undo()
    store = Watched(url)
    other = PostgresGrantStore(url)
    try:
        assert _found(store) == "g_old"
        assert [g.grant_id for g in store.query(principal=ALICE_ID, tool=TOOL)] == ["g_old"]
        assert sql(name, "SELECT value FROM {s}.meta WHERE key = 'schema_version'") == [("3",)]
        store.refreshes.clear()
        other.add(_exact("g_new", _args(1)))
        assert _found(store, _args(1)) == "g_new"
        assert store.refreshes and all(c is not None for c, _ in store.refreshes)
    finally:
        store.close()
        other.close()


def test_concurrent_writers_never_leave_a_copy_behind(schema: tuple[str, str]) -> None:
    """Writers on several connections at once, a store refreshing all along: versions
    commit in order (the counter's row lock orders the writers), so an incremental refresh
    never skips a change: at the end the copy is exactly the table."""
    url, _ = schema
    reader = Watched(url)
    writers = [PostgresGrantStore(url) for _ in range(3)]
    done = threading.Event()
    errors: list[BaseException] = []

    def write(n: int, store: PostgresGrantStore) -> None:
        try:
            for k in range(40):
                store.add(_exact(f"w{n}_{k}", {"n": n, "k": k}))
                if k % 3 == 0:
                    store.revoke(f"w{n}_{k // 2}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def read() -> None:
        while not done.is_set():
            reader.find(ALICE_ID, TOOL, WRITE, "s1")

    try:
        threads = [threading.Thread(target=write, args=(n, s)) for n, s in enumerate(writers)]
        looking = threading.Thread(target=read)
        looking.start()
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        done.set()
        looking.join(60)
        assert not errors
        reader.find(ALICE_ID, TOOL, WRITE, "s1")
        table = {str(r[0]) for r in sql(schema[1], "SELECT grant_id FROM {s}.grants")}
        assert {g.grant_id for g in reader.list()} == table
        assert len(table) > 60
        assert sum(1 for changed, _ in reader.refreshes if changed is not None) > 1
    finally:
        reader.close()
        for store in writers:
            store.close()


def test_a_grant_revoked_while_its_adder_writes_it_stays_revoked_there(
    schema: tuple[str, str],
) -> None:
    """R12 on the host that adds a grant: another host revokes it right after the INSERT
    commits, and this host's listener reads that revocation (the feed names the grant,
    its row is gone) before the add puts the grant in memory. The add must not bring the
    revoked grant back for good: the copy is at the newest version, so no later refresh
    would read that grant's row again."""
    url, name = schema
    adder = PostgresGrantStore(url)
    revoker = PostgresGrantStore(url)
    run = adder.database.run

    def revoked_right_after_the_insert(what: str, fn: Any, **kwargs: Any) -> Any:
        done = run(what, fn, **kwargs)
        if what == "add a grant":
            assert revoker.revoke("g_raced")
            (latest,) = sql(name, "SELECT version FROM {s}.grants_version")[0]
            # The adder's listener refreshes on the revocation's notice (given a second).
            for _ in range(100):
                if adder._version == latest:
                    break
                threading.Event().wait(0.01)
        return done

    try:
        _found(adder)  # the adder's copy is loaded, its listener running
        adder.database.run = revoked_right_after_the_insert  # type: ignore[method-assign]
        adder.add(_exact("g_raced", WRITE))
        adder.database.run = run  # type: ignore[method-assign]
        assert sql(name, "SELECT count(*) FROM {s}.grants") == [(0,)]
        assert _found(adder) is None
        assert _found(revoker) is None
    finally:
        adder.close()
        revoker.close()
