"""``clearance grants list|revoke`` over a real SQLite grant store."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest
from support import ALICE, Recorder, coding_registry

from clearance import Harness, PermissionAsk, SqliteJournal
from clearance.harness.approvals import Answer, Grant, GrantScope, SqliteGrantStore
from clearance.policy import LocalEvaluator


def _store(path: Path) -> list[Grant]:
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
    store = SqliteGrantStore(path)
    for g in grants:
        store.add(g)
    store.close()
    return grants


def test_list_filter_and_revoke(cli: Any, tmp_path: Path) -> None:
    _store(tmp_path / "grants.db")
    table = cli("grants", "list", "--db", "grants.db")
    assert table.code == 0, table.err
    lines = table.out.splitlines()
    assert re.match(r"ID +PRINCIPAL +TOOL +SCOPE +CREATED +EXPIRES +BY$", lines[0])
    assert re.match(
        r'g_one +User::"alice" +files.write_file +path under src/ +\d{4}-\d\d-\d\d .* -? *alice$',
        lines[1],
    )
    assert lines[2].startswith('g_two  User::"bob"')

    only_bob = json.loads(
        cli("grants", "list", "--db", "grants.db", "--json", "--principal", "User::bob").out
    )
    assert [g["grant_id"] for g in only_bob] == ["g_two"]
    by_tool = json.loads(
        cli("grants", "list", "--db", "grants.db", "--json", "--tool", "files.write_file").out
    )
    assert [g["grant_id"] for g in by_tool] == ["g_one"]

    revoked = cli("grants", "revoke", "g_one", "--db", "grants.db", "--json")
    assert revoked.code == 0 and json.loads(revoked.out) == {"revoked": "g_one"}
    assert [g.grant_id for g in SqliteGrantStore(tmp_path / "grants.db").list()] == ["g_two"]


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
    cli: Any, tmp_path: Path
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
    store = SqliteGrantStore(tmp_path / "clearance.db")
    journal = SqliteJournal(tmp_path / "clearance.db")  # the CLI's default: one shared file
    async with Harness(
        coding_registry(rec), evaluator=evaluator, grant_store=store, journal=journal
    ) as h:
        s = await h.create_session(principal=ALICE, on_permission_ask=answer)
        assert (await s.call_tool("files__write_file", arguments)).ok
        (grant,) = store.list()
        assert (await s.call_tool("files__write_file", arguments)).grant == grant.grant_id
        listed = await anyio.to_thread.run_sync(
            lambda: cli("grants", "list", "--db", "clearance.db", "--json")
        )
        assert [g["grant_id"] for g in json.loads(listed.out)] == [grant.grant_id]
        revoked = await anyio.to_thread.run_sync(
            lambda: cli("grants", "revoke", grant.grant_id, "--db", "clearance.db")
        )
        assert revoked.code == 0, revoked.err
        after = await s.call_tool("files__write_file", arguments)
    store.close()
    assert after.status == "denied" and after.grant is None
    assert len(asks) == 2  # asked again, and the answer (deny) was enforced
    assert len(rec.calls) == 2  # the first call and the one the grant covered


def test_a_row_this_version_cannot_read_is_not_listed_but_can_be_revoked(
    cli: Any, tmp_path: Path
) -> None:
    _store(tmp_path / "g.db")
    raw = sqlite3.connect(tmp_path / "g.db")
    body = {"grant_id": "g_new", "scope": {"kind": "from-the-future"}}
    raw.execute("INSERT INTO grants VALUES ('g_new', ?)", (json.dumps(body),))
    raw.commit()
    raw.close()
    listed = cli("grants", "list", "--db", "g.db", "--json")
    assert listed.code == 0 and "skipping grant 'g_new'" in listed.err
    assert [g["grant_id"] for g in json.loads(listed.out)] == ["g_one", "g_two"]
    revoked = cli("grants", "revoke", "g_new", "--db", "g.db")
    assert revoked.code == 0 and revoked.out == "revoked g_new\n"
    rows = sqlite3.connect(tmp_path / "g.db").execute("SELECT grant_id FROM grants").fetchall()
    assert sorted(rows) == [("g_one",), ("g_two",)]
