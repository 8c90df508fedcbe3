"""R12: a revoked grant authorizes nothing from the next lookup on, in every store that
shares the grant file; a grant added anywhere is seen at the next lookup too.

Two ``SqliteGrantStore`` objects (two connections, as two processes would have) and a bare
``sqlite3`` connection (a writer that knows nothing of clearance) add and revoke grants on
one real file in random order; after every step each store's ``find`` and ``list`` must
agree with the set of grants that are live at that moment.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from clearance import Grant, GrantScope, SqliteGrantStore

PRINCIPAL = 'User::"alice"'
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("files.write_file", {"path": "src/a.py", "content": "x"}),
    ("files.write_file", {"path": "docs/a.md", "content": "x"}),
    ("files.move_file", {"source": "src/a.py", "destination": "public/a.py"}),
    ("files.move_file", {"source": ".env", "destination": "public/.env"}),
]
SCOPES = [
    GrantScope.exact(CALLS[0][1]),
    GrantScope.prefix_of("/path", "src/"),
    GrantScope.prefixes_of({"/source": "src/", "/destination": "public/"}),
    GrantScope.tool(),
]
IDS = [f"g_{n}" for n in range(4)]

grants = st.builds(
    lambda grant_id, tool, scope: Grant(
        grant_id, PRINCIPAL, tool, scope, "always", created_at=1_700_000_000.0
    ),
    st.sampled_from(IDS),
    st.sampled_from(["files.write_file", "files.move_file"]),
    st.sampled_from(SCOPES),
)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.sampled_from([0, 1]), grants),
        st.tuples(st.just("revoke"), st.sampled_from([0, 1]), st.sampled_from(IDS)),
        st.tuples(st.just("raw_add"), st.just(2), grants),
        st.tuples(st.just("raw_revoke"), st.just(2), st.sampled_from(IDS)),
    ),
    min_size=1,
    max_size=12,
)


def _check(store: SqliteGrantStore, live: dict[str, Grant]) -> None:
    for tool, arguments in CALLS:
        found = store.find(PRINCIPAL, tool, arguments, "s1")
        covering = {
            g.grant_id for g in live.values() if g.covers(PRINCIPAL, tool, arguments, "s1", 0.0)
        }
        if found is None:
            assert not covering, (tool, arguments, covering)
        else:
            # Never a revoked grant, never a stale copy of a replaced one.
            assert found.grant_id in covering and live[found.grant_id] == found
    assert {g.grant_id: g for g in store.list()} == live


@given(steps=steps)
def test_r12_a_revoked_grant_never_authorizes_at_the_next_lookup(
    steps: list[tuple[str, int, Any]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "grants.db"
        stores = [SqliteGrantStore(path), SqliteGrantStore(path)]
        raw = sqlite3.connect(path, isolation_level=None)
        live: dict[str, Grant] = {}
        try:
            for action, who, value in steps:
                if action == "add":
                    stores[who].add(value)
                    live[value.grant_id] = value
                elif action == "revoke":
                    assert stores[who].revoke(value) == (value in live)
                    live.pop(value, None)
                elif action == "raw_add":
                    raw.execute(
                        "INSERT OR REPLACE INTO grants VALUES (?, ?)",
                        (value.grant_id, json.dumps(value.to_json())),
                    )
                    live[value.grant_id] = value
                else:
                    raw.execute("DELETE FROM grants WHERE grant_id = ?", (value,))
                    live.pop(value, None)
                for store in stores:
                    _check(store, live)
        finally:
            raw.close()
            for store in stores:
                store.close()
