"""``clearance grants list|revoke`` over a real grant store: a SQLite file, and a
PostgreSQL schema on the test server (the tests that take ``stores`` run on both)."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest
from postgres_support import sql
from store_backends import Stores, stores_fixture
from support import ALICE, Recorder, coding_registry

from clearance import Harness, MemoryJournal, PermissionAsk, SqliteJournal
from clearance.harness.approvals import Answer, Grant, GrantScope, SqliteGrantStore
from clearance.policy import LocalEvaluator

stores = stores_fixture()


def _store(path: Path | Stores) -> list[Grant]:
    grants = [
        Grant(
            "g_one",
            'User::"alice"',
            "files.write_file",
            GrantScope.prefix_of("/path", "src/"),
            "always",
            created_at=1_700_000_000.0,
            decided_by="alice",
        ),
        Grant(
            "g_two",
            'User::"bob"',
            "shell.run",
            GrantScope.tool(),
            "always",
            created_at=1_700_000_100.0,
            expires_at=1_900_000_000.0,
        ),
    ]
    store = path.grants() if isinstance(path, Stores) else SqliteGrantStore(path)
    for g in grants:
        store.add(g)
    store.close()
    return grants


def test_list_filter_and_revoke(cli: Any, stores: Stores) -> None:
    _store(stores)
    db = stores.target
    table = cli("grants", "list", "--db", db)
    assert table.code == 0, table.err
    lines = table.out.splitlines()
    assert re.match(r"ID +PRINCIPAL +TOOL +SCOPE +CREATED +EXPIRES +BY$", lines[0])
    assert re.match(
        r'g_one +User::"alice" +files.write_file +path under src/ +\d{4}-\d\d-\d\d .* -? *alice$',
        lines[1],
    )
    assert lines[2].startswith('g_two  User::"bob"')

    only_bob = json.loads(
        cli("grants", "list", "--db", db, "--json", "--principal", 'User::"bob"').out
    )
    assert [g["grant_id"] for g in only_bob] == ["g_two"]
    # Cedar's syntax, or a clear refusal saying what to write (never a guess).
    unquoted = cli("grants", "list", "--db", db, "--principal", "User::bob")
    assert unquoted.code == 2 and 'did you mean User::"bob"?' in unquoted.err
    by_tool = json.loads(
        cli("grants", "list", "--db", db, "--json", "--tool", "files.write_file").out
    )
    assert [g["grant_id"] for g in by_tool] == ["g_one"]

    revoked = cli("grants", "revoke", "g_one", "--db", db, "--json")
    assert revoked.code == 0 and json.loads(revoked.out) == {"revoked": "g_one"}
    assert [g.grant_id for g in stores.grants().list()] == ["g_two"]


def test_the_default_store_comes_from_the_config(cli: Any, tmp_path: Path) -> None:
    (tmp_path / "clearance.toml").write_text(
        '[evaluator]\nkind = "noop"\n[approvals]\ngrants = "state/g.db"\n'
    )
    (tmp_path / "state").mkdir()
    _store(tmp_path / "state" / "g.db")
    r = cli("grants", "list", "--json")
    assert r.code == 0, r.err
    assert [g["grant_id"] for g in json.loads(r.out)] == ["g_one", "g_two"]


def test_missing_store_and_unknown_id_are_bad_input(cli: Any, tmp_path: Path) -> None:
    missing = cli("grants", "list", "--db", "nope.db")
    assert missing.code == 2
    assert missing.err == "error: no grant store at 'nope.db' (give the file with --db)\n"
    assert not (tmp_path / "nope.db").exists()  # looking never creates a store

    _store(tmp_path / "g.db")
    unknown = cli("grants", "revoke", "g_nope", "--db", "g.db")
    assert unknown.code == 2
    assert unknown.err.startswith("error: no grant with id 'g_nope'")


@pytest.mark.anyio
async def test_a_running_harness_honours_a_revoke_from_the_command(
    cli: Any, stores: Stores
) -> None:
    """Issue 12 item 3 / R12: ``clearance grants revoke`` in another process takes effect at
    the running harness's next lookup; the next call is asked again and does not run."""
    rec = Recorder()
    asks: list[PermissionAsk] = []

    def answer(ask: PermissionAsk) -> Answer:
        asks.append(ask)
        return "allow_always" if len(asks) == 1 else "deny"

    arguments = {"path": "src/a.py", "content": "x"}
    evaluator = LocalEvaluator(ask=["files.write_file"])
    store = stores.grants()
    # SQLite: the CLI's default layout, the journal and the grants in one file.
    journal = SqliteJournal(stores.target) if stores.kind == "sqlite" else MemoryJournal()
    async with Harness(
        coding_registry(rec), evaluator=evaluator, grant_store=store, journal=journal
    ) as h:
        s = await h.create_session(principal=ALICE, on_permission_ask=answer)
        assert (await s.call_tool("files__write_file", arguments)).ok
        (grant,) = store.list()
        assert (await s.call_tool("files__write_file", arguments)).grant == grant.grant_id
        listed = await anyio.to_thread.run_sync(
            lambda: cli("grants", "list", "--db", stores.target, "--json")
        )
        assert [g["grant_id"] for g in json.loads(listed.out)] == [grant.grant_id]
        revoked = await anyio.to_thread.run_sync(
            lambda: cli("grants", "revoke", grant.grant_id, "--db", stores.target)
        )
        assert revoked.code == 0, revoked.err
        after = await s.call_tool("files__write_file", arguments)
    store.close()
    assert after.status == "denied" and after.grant is None
    assert len(asks) == 2  # asked again, and the answer (deny) was enforced
    assert len(rec.calls) == 2  # the first call and the one the grant covered


def test_a_row_this_version_cannot_read_is_not_listed_but_can_be_revoked(
    cli: Any, stores: Stores
) -> None:
    _store(stores)
    body = json.dumps({"grant_id": "g_new", "scope": {"kind": "from-the-future"}})
    if stores.kind == "sqlite":
        raw = sqlite3.connect(stores.target)
        raw.execute("INSERT INTO grants VALUES ('g_new', ?)", (body,))
        raw.commit()
        raw.close()
    else:
        sql(stores.schema, "INSERT INTO {s}.grants VALUES ('g_new', %s)", (body,))
    listed = cli("grants", "list", "--db", stores.target, "--json")
    assert listed.code == 0 and "skipping grant 'g_new'" in listed.err
    assert [g["grant_id"] for g in json.loads(listed.out)] == ["g_one", "g_two"]
    revoked = cli("grants", "revoke", "g_new", "--db", stores.target)
    assert revoked.code == 0 and revoked.out == "revoked g_new\n"
    if stores.kind == "sqlite":
        rows = sqlite3.connect(stores.target).execute("SELECT grant_id FROM grants").fetchall()
    else:
        rows = sql(stores.schema, "SELECT grant_id FROM {s}.grants")
    assert sorted(rows) == [("g_one",), ("g_two",)]
