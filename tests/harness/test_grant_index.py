"""Issue 38: grant lookups are indexed (by principal, tool and scope kind; exact grants by
the hash of their arguments), persisted grants are refreshed from the SQLite file's change
feed (only the rows changed since), and lookups that read a database run off the event
loop. Every semantic of the scan they replace holds (R5, R12)."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from support import ALICE, Recorder, coding_registry, harness

from clearance import Grant, GrantScope, MemoryGrantStore, SqliteGrantStore
from clearance.policy import LocalEvaluator

ALICE_ID = str(ALICE)
TOOL = "files.write_file"
WRITE = {"path": "src/a.py", "content": "x"}


def _exact(grant_id: str, arguments: Mapping[str, Any], **kw: Any) -> Grant:
    kw.setdefault("kind", "always")
    return Grant(grant_id, ALICE_ID, TOOL, GrantScope.exact(arguments), **kw)


def _many(n: int) -> list[Grant]:
    return [_exact(f"g_{k}", {"path": f"src/{k}.py", "content": "x"}) for k in range(n)]


def _timed(store: MemoryGrantStore, n: int = 300) -> float:
    t = time.perf_counter()
    for _ in range(n):
        assert store.find(ALICE_ID, TOOL, WRITE, "s1") is not None
    return (time.perf_counter() - t) / n


def test_an_exact_lookup_costs_the_same_among_50000_grants() -> None:
    small, large = MemoryGrantStore(), MemoryGrantStore()
    for grant in _many(10):
        small.add(grant)
    for grant in _many(50_000):
        large.add(grant)
    for store in (small, large):
        store.add(_exact("g_hit", WRITE))
    _timed(small), _timed(large)  # warm
    # A scan re-hashed the arguments for each of the 50,000 (thousands of times slower).
    assert _timed(large) < 20 * _timed(small) + 50e-6


def test_the_first_added_covering_grant_wins_across_scope_kinds() -> None:
    store = MemoryGrantStore()
    prefix = Grant("g_prefix", ALICE_ID, TOOL, GrantScope.prefix_of("/path", "src/"), "always")
    tool = Grant("g_tool", ALICE_ID, TOOL, GrantScope.tool(), "always")
    store.add(_exact("g_exact", WRITE))
    store.add(prefix)
    store.add(tool)
    assert store.find(ALICE_ID, TOOL, WRITE, "s1").grant_id == "g_exact"  # type: ignore[union-attr]
    assert store.revoke("g_exact")
    assert store.find(ALICE_ID, TOOL, WRITE, "s1").grant_id == "g_prefix"  # type: ignore[union-attr]
    store.add(_exact("g_exact2", WRITE))  # added after the tool grant
    assert store.find(ALICE_ID, TOOL, WRITE, "s1").grant_id == "g_prefix"  # type: ignore[union-attr]
    store.revoke("g_prefix")
    assert store.find(ALICE_ID, TOOL, WRITE, "s1").grant_id == "g_tool"  # type: ignore[union-attr]
    assert [g.grant_id for g in store.list(principal=ALICE_ID, tool=TOOL)] == [
        "g_tool",
        "g_exact2",
    ]


def test_exact_grants_of_one_hash_keep_expiry_session_principal_and_tool() -> None:
    store = MemoryGrantStore()
    store.add(_exact("g_old", WRITE, expires_at=time.time() - 1))
    store.add(_exact("g_s2", WRITE, kind="session", session_id="s2"))
    store.add(Grant("g_bob", 'User::"bob"', TOOL, GrantScope.exact(WRITE), "always"))
    store.add(Grant("g_read", ALICE_ID, "files.read_file", GrantScope.exact(WRITE), "always"))
    assert store.find(ALICE_ID, TOOL, WRITE, "s1") is None
    assert store.find(ALICE_ID, TOOL, WRITE, "s2").grant_id == "g_s2"  # type: ignore[union-attr]
    assert store.find(ALICE_ID, TOOL, {**WRITE, "content": "y"}, "s2") is None
    store.end_session("s2")
    assert store.find(ALICE_ID, TOOL, WRITE, "s2") is None
    store.add(_exact("g_new", WRITE))
    assert store.find(ALICE_ID, TOOL, WRITE, "s1").grant_id == "g_new"  # type: ignore[union-attr]
    # Re-adding an id replaces the grant, in whichever kind it was.
    store.add(Grant("g_new", ALICE_ID, TOOL, GrantScope.prefix_of("/path", "lib/"), "always"))
    assert store.find(ALICE_ID, TOOL, WRITE, "s1") is None


def _statements(store: SqliteGrantStore) -> list[str]:
    seen: list[str] = []
    store._db.set_trace_callback(seen.append)
    return seen


def test_a_change_by_another_connection_reads_only_the_changed_rows(tmp_path: Path) -> None:
    path = tmp_path / "g.db"
    store, other = SqliteGrantStore(path), SqliteGrantStore(path)
    try:
        for grant in _many(50):
            other.add(grant)
        assert store.find(ALICE_ID, TOOL, {"path": "src/7.py", "content": "x"}, "s1")
        seen = _statements(store)
        other.add(_exact("g_hit", WRITE))
        assert store.find(ALICE_ID, TOOL, WRITE, "s1").grant_id == "g_hit"  # type: ignore[union-attr]
        assert other.revoke("g_7")
        assert store.find(ALICE_ID, TOOL, {"path": "src/7.py", "content": "x"}, "s1") is None
        assert store.find(ALICE_ID, TOOL, {"path": "src/8.py", "content": "x"}, "s1")
        reads = [s for s in seen if "FROM grants" in s and "grants_" not in s]
        assert reads and all("WHERE grant_id IN" in s for s in reads), reads
    finally:
        store.close()
        other.close()


def test_a_row_spoiled_by_hand_stops_authorizing_at_once(tmp_path: Path) -> None:
    path = tmp_path / "g.db"
    store = SqliteGrantStore(path)
    store.add(_exact("g_1", WRITE))
    store.add(_exact("g_2", {"path": "src/b.py", "content": "x"}))
    assert store.find(ALICE_ID, TOOL, WRITE, "s1") is not None
    raw = sqlite3.connect(path)
    raw.execute("UPDATE grants SET body = 'garbage' WHERE grant_id = 'g_1'")
    # Renamed by hand: the old id authorizes nothing, the new one is the grant.
    body = json.loads(raw.execute("SELECT body FROM grants WHERE grant_id = 'g_2'").fetchone()[0])
    body["grant_id"] = "g_3"
    raw.execute(
        "UPDATE grants SET grant_id = 'g_3', body = ? WHERE grant_id = 'g_2'", (json.dumps(body),)
    )
    raw.commit()
    raw.close()
    assert store.find(ALICE_ID, TOOL, WRITE, "s1") is None
    found = store.find(ALICE_ID, TOOL, {"path": "src/b.py", "content": "x"}, "s1")
    assert found is not None and found.grant_id == "g_3"
    assert [g.grant_id for g in store.list()] == ["g_3"]
    store.close()


def test_a_store_behind_a_pruned_feed_reloads_everything(tmp_path: Path) -> None:
    path = tmp_path / "g.db"
    store, other = SqliteGrantStore(path), SqliteGrantStore(path)
    try:
        other.add(_exact("g_1", WRITE))
        assert store.find(ALICE_ID, TOOL, WRITE, "s1") is not None
        other.revoke("g_1")
        other.add(_exact("g_2", {"path": "src/b.py", "content": "x"}))
        raw = sqlite3.connect(path)
        raw.execute("DELETE FROM grants_changes")  # pruned (or emptied by hand)
        raw.execute("INSERT INTO grants_changes (grant_id) VALUES ('unrelated')")
        raw.commit()
        raw.close()
        assert store.find(ALICE_ID, TOOL, WRITE, "s1") is None
        assert [g.grant_id for g in store.list()] == ["g_2"]
    finally:
        store.close()
        other.close()


def test_the_feed_is_pruned(tmp_path: Path) -> None:
    path = tmp_path / "g.db"
    store = SqliteGrantStore(path)
    with store._lock:
        store._db.execute(
            "INSERT INTO grants_changes VALUES (5000, 'a'), (15000, 'b'), (25990, 'c')"
        )
    for k in range(20):
        store.add(_exact(f"g_{k}", {"k": k}))
    kept = store._db.execute("SELECT count(*), min(seq) FROM grants_changes").fetchone()
    assert kept == (21, 25990)  # 10,000 kept: 5,000 and 15,000 gone
    assert len(store.list()) == 20
    store.close()


def test_query_applies_the_filters_in_sql(tmp_path: Path) -> None:
    path = tmp_path / "g.db"
    store = SqliteGrantStore(path)
    for grant in _many(5):
        store.add(grant)
    store.add(Grant("g_bob", 'User::"bob"', TOOL, GrantScope.tool(), "always"))
    store.add(Grant("g_read", ALICE_ID, "files.read_file", GrantScope.tool(), "always"))
    raw = sqlite3.connect(path)
    raw.execute("INSERT INTO grants VALUES ('g_bad', 'not json')")
    raw.commit()
    raw.close()
    store.close()
    fresh = SqliteGrantStore(path, load=False)
    seen = _statements(fresh)
    assert {g.grant_id for g in fresh.query(principal=ALICE_ID, tool=TOOL)} == {
        f"g_{k}" for k in range(5)
    }
    assert [g.grant_id for g in fresh.query(principal='User::"bob"')] == ["g_bob"]
    assert [g.grant_id for g in fresh.query(tool="files.read_file")] == ["g_read"]
    assert len(fresh.query()) == 7
    assert fresh._grants == {}  # nothing loaded
    assert all("WHERE" in s for s in seen[:3])
    fresh.close()


class _ThreadSeeingStore(SqliteGrantStore):
    threads: list[threading.Thread]

    def find(
        self, principal: str, tool: str, arguments: Mapping[str, Any], session_id: str
    ) -> Grant | None:
        self.threads.append(threading.current_thread())
        return super().find(principal, tool, arguments, session_id)


@pytest.mark.anyio
async def test_a_database_lookup_runs_off_the_event_loop(tmp_path: Path) -> None:
    store = _ThreadSeeingStore(tmp_path / "g.db")
    store.threads = []
    store.add(_exact("g_1", WRITE))
    async with harness(
        coding_registry(Recorder()),
        evaluator=LocalEvaluator(ask=["files.write_file"]),
        grant_store=store,
    ) as h:
        s = await h.create_session(principal=ALICE)
        loop_thread = threading.current_thread()
        outcome = await s.call_tool("files__write_file", WRITE)
    store.close()
    assert outcome.ok and outcome.grant == "g_1"
    assert store.threads and store.threads[0] is not loop_thread
