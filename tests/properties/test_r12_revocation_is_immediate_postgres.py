"""R12 on the PostgreSQL grant store: a revoked grant authorizes nothing from the next
lookup on, in every store object sharing the database (two hosts, say), whoever changed
the table (another store, or a bare connection that knows nothing of clearance); a grant
added anywhere is seen at the next lookup too.

The same steps as the SQLite property (test_r12_revocation_is_immediate.py), on a real
server: one schema for the module, emptied before each example.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from postgres_support import fresh_schema, sql

from clearance import Grant, GrantScope

# psycopg_pool's background workers call the random module (connection-lifetime jitter)
# while Hypothesis draws an example, which Hypothesis reports as a deprecation (and the
# suite turns warnings into errors): the draws do not use random, the pool's thread does.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Do not use the `random` module inside strategies"
    ":hypothesis.errors.HypothesisDeprecationWarning"
)

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


@pytest.fixture(scope="module")
def hosts() -> Iterator[tuple[str, list[Any]]]:
    """``(schema, [store, store])``: two hosts' grant stores (one on a shared
    ``PostgresDatabase``, one on its own URL), kept for the module."""
    from clearance.harness.grants_postgres import PostgresGrantStore
    from clearance.harness.postgres import PostgresDatabase

    with fresh_schema() as (url, schema):
        shared = PostgresDatabase(url)
        shared.migrate()
        stores = [PostgresGrantStore(shared), PostgresGrantStore(url)]
        try:
            yield schema, stores
        finally:
            for store in stores:
                store.close()
            shared.close()


def _check(store: Any, live: dict[str, Grant]) -> None:
    for tool, arguments in CALLS:
        found = store.find(PRINCIPAL, tool, arguments, "s1")
        covering = {
            g.grant_id for g in live.values() if g.covers(PRINCIPAL, tool, arguments, "s1", 0.0)
        }
        if found is None:
            assert not covering, (tool, arguments, covering)
        else:
            assert found.grant_id in covering and live[found.grant_id] == found
    assert {g.grant_id: g for g in store.list()} == live


@given(steps=steps)
def test_r12_a_revoked_grant_never_authorizes_at_the_next_lookup_postgres(
    hosts: tuple[str, list[Any]], steps: list[tuple[str, int, Any]]
) -> None:
    schema, stores = hosts
    sql(schema, "TRUNCATE {s}.grants")  # a fresh start: the trigger bumps the counter
    live: dict[str, Grant] = {}
    for action, who, value in steps:
        if action == "add":
            stores[who].add(value)
            live[value.grant_id] = value
        elif action == "revoke":
            assert stores[who].revoke(value) == (value in live)
            live.pop(value, None)
        elif action == "raw_add":
            sql(
                schema,
                "INSERT INTO {s}.grants VALUES (%s, %s) "
                "ON CONFLICT (grant_id) DO UPDATE SET body = EXCLUDED.body",
                (value.grant_id, json.dumps(value.to_json())),
            )
            live[value.grant_id] = value
        else:
            sql(schema, "DELETE FROM {s}.grants WHERE grant_id = %s", (value,))
            live.pop(value, None)
        for store in stores:
            _check(store, live)
