"""Rule R12: a revoked grant authorizes nothing from the next lookup on, in every store
object and every process that shares the file (issue 12 item 3)."""

from __future__ import annotations

import json
import logging
import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from support import ALICE, Recorder, coding_registry, harness

from clearance import Grant, GrantScope, PermissionAsk, SqliteGrantStore, SqliteJournal
from clearance.harness.approvals import Answer
from clearance.policy import LocalEvaluator

pytestmark = pytest.mark.anyio

ALICE_ID = str(ALICE)
WRITE = {"path": "src/a.py", "content": "x"}
ASK_WRITES = LocalEvaluator(allow=["files.read_file"], ask=["files.write_file"])


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


def _find(store: SqliteGrantStore, arguments: dict[str, str] = WRITE) -> Grant | None:
    return store.find(ALICE_ID, "files.write_file", arguments, "s1")


def test_two_stores_on_one_file_see_each_others_adds_and_revokes(tmp_path: Path) -> None:
    path = tmp_path / "g.db"
    a, b = SqliteGrantStore(path), SqliteGrantStore(path)
    try:
        assert _find(a) is None and _find(b) is None  # both loaded, both empty
        a.add(_grant())
        assert _find(b) == _grant() and [g.grant_id for g in b.list()] == ["g_1"]
        assert b.revoke("g_1")
        assert _find(a) is None and a.list() == []
        assert not a.revoke("g_1")  # already gone, from either side
        b.add(_grant("g_2"))
        a.add(_grant("g_3"))
        assert {g.grant_id for g in a.list()} == {g.grant_id for g in b.list()} == {"g_2", "g_3"}
    finally:
        a.close()
        b.close()


def test_session_grants_stay_in_memory(tmp_path: Path) -> None:
    path = tmp_path / "g.db"
    a, b = SqliteGrantStore(path), SqliteGrantStore(path)
    try:
        a.add(_grant("g_s", kind="session"))
        assert _find(a) is not None and _find(b) is None
        b.add(_grant("g_other"))  # a reload in `a` keeps its session grants
        assert {g.grant_id for g in a.list()} == {"g_s", "g_other"}
        a.end_session("s1")
        assert [g.grant_id for g in a.list()] == ["g_other"]
        assert not b.revoke("g_s")  # another store cannot reach a session grant
    finally:
        a.close()
        b.close()


def test_any_connection_that_changes_the_table_is_seen(tmp_path: Path) -> None:
    """The change counter is kept by triggers in the file, so a writer that knows nothing
    of it (an older clearance, the sqlite3 shell) is seen too."""
    path = tmp_path / "g.db"
    store = SqliteGrantStore(path)
    store.add(_grant())
    assert _find(store) is not None
    raw = sqlite3.connect(path)
    raw.execute("DELETE FROM grants")
    raw.commit()
    raw.close()
    assert _find(store) is None
    store.close()


def test_an_unreadable_row_authorizes_nothing_and_can_be_revoked(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "g.db"
    store = SqliteGrantStore(path)
    store.add(_grant())
    raw = sqlite3.connect(path)
    body = _grant("g_bad").to_json()
    body["scope"] = {"kind": "everything"}  # e.g. a newer clearance's scope kind
    raw.execute("INSERT INTO grants VALUES (?, ?)", ("g_bad", json.dumps(body)))
    raw.commit()
    raw.close()
    with caplog.at_level(logging.WARNING, logger="clearance"):
        assert [g.grant_id for g in store.list()] == ["g_1"]
        assert [g.grant_id for g in SqliteGrantStore(path).list()] == ["g_1"]
    assert "skipping grant 'g_bad'" in caplog.text
    assert store.revoke("g_bad")
    assert sqlite3.connect(path).execute("SELECT grant_id FROM grants").fetchall() == [("g_1",)]
    store.close()


async def test_a_running_harness_asks_again_once_another_store_revokes(tmp_path: Path) -> None:
    path = tmp_path / "clearance.db"
    rec = Recorder()
    asks: list[PermissionAsk] = []

    def answer(ask: PermissionAsk) -> Answer:
        asks.append(ask)
        return "allow_always" if len(asks) == 1 else "deny"

    # The default layout: the journal and the grants share one file.
    store = SqliteGrantStore(path)
    journal = SqliteJournal(path)
    async with harness(
        coding_registry(rec), evaluator=ASK_WRITES, grant_store=store, journal=journal
    ) as h:
        s = await h.create_session(principal=ALICE, on_permission_ask=answer)
        assert (await s.call_tool("files__write_file", WRITE)).ok
        (grant,) = store.list()
        assert (await s.call_tool("files__write_file", WRITE)).grant == grant.grant_id
        other = SqliteGrantStore(path)
        assert other.revoke(grant.grant_id)
        other.close()
        again = await s.call_tool("files__write_file", WRITE)
        fresh = await h.create_session(principal=ALICE, on_permission_ask=answer)
        in_new_session = await fresh.call_tool("files__write_file", WRITE)
    store.close()
    assert again.status == "denied" and in_new_session.status == "denied"
    assert len(asks) == 3 and len(rec.calls) == 2


async def test_a_grant_added_by_another_process_is_used(tmp_path: Path) -> None:
    path = tmp_path / "g.db"
    rec = Recorder()
    store = SqliteGrantStore(path)
    async with harness(coding_registry(rec), evaluator=ASK_WRITES, grant_store=store) as h:
        s = await h.create_session(principal=ALICE, on_permission_ask=lambda ask: "deny")
        assert (await s.call_tool("files__write_file", WRITE)).status == "denied"
        code = (
            "import sys\n"
            "from clearance import Grant, GrantScope, SqliteGrantStore\n"
            "s = SqliteGrantStore(sys.argv[1])\n"
            "s.add(Grant('g_p', 'User::\"alice\"', 'files.write_file',"
            " GrantScope.prefix_of('/path', 'src/'), 'always'))\n"
            "s.close()\n"
        )
        command = [sys.executable, "-c", code, str(path)]
        await anyio.to_thread.run_sync(lambda: subprocess.run(command, check=True, timeout=60))
        out = await s.call_tool("files__write_file", WRITE)
    store.close()
    assert out.ok and out.grant == "g_p"
