"""R12: a revoked grant authorizes nothing from the next lookup on, in every store that
shares the grant file; a grant added anywhere is seen at the next lookup too.

Two ``SqliteGrantStore`` objects (two connections, as two processes would have) and a bare
``sqlite3`` connection (a writer that knows nothing of clearance) add and revoke grants on
one real file in random order; after every step each store's ``find`` and ``list`` must
agree with the set of grants that are live at that moment.

At run time too (issue 28): a session authorizes calls whose grant allows them and keeps
the authorizations unused while grants are added and revoked through another store on the
same file (another process); a kept authorization runs exactly when a grant covers its call
at the moment it comes to run, and runs nothing otherwise.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import anyio
from hypothesis import given
from hypothesis import strategies as st

from clearance import (
    CallContext,
    Grant,
    GrantScope,
    Harness,
    Principal,
    SqliteGrantStore,
    Tool,
    ToolRegistry,
)
from clearance.policy import LocalEvaluator

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


ENVS = ["prod", "staging"]
run_steps = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.sampled_from(ENVS), st.booleans()),
        st.tuples(st.just("revoke"), st.sampled_from(ENVS), st.booleans()),
        st.tuples(st.just("authorize"), st.sampled_from(ENVS), st.just(False)),
        st.tuples(st.just("run"), st.integers(0, 7), st.booleans()),
    ),
    min_size=1,
    max_size=14,
)


@given(steps=run_steps)
def test_r12_a_kept_authorization_runs_only_while_a_grant_covers_it(
    steps: list[tuple[str, Any, bool]],
) -> None:
    ran: list[str] = []

    def deploy(arguments: dict[str, Any], ctx: CallContext) -> str:
        ran.append(arguments["env"])
        return "deployed"

    registry = ToolRegistry()
    registry.register(
        "app",
        [
            Tool(
                "deploy",
                deploy,
                input_schema={
                    "type": "object",
                    "properties": {"env": {"type": "string"}},
                    "required": ["env"],
                },
            )
        ],
    )

    async def main(path: Path) -> None:
        other = SqliteGrantStore(path)  # another process's store on the same file
        harness = Harness(
            registry,
            evaluator=LocalEvaluator(ask=["app.deploy"]),
            grant_store=SqliteGrantStore(path),
        )
        async with harness:
            session = await harness.create_session(principal=Principal("User", "alice"))
            live: set[str] = set()
            kept: list[tuple[str, str]] = []  # (call id, env) of unused authorizations
            for n, (action, value, elsewhere) in enumerate(steps):
                store = other if elsewhere else harness.grants
                if action == "add":
                    grant = Grant(
                        f"g_{value}",
                        PRINCIPAL,
                        "app.deploy",
                        GrantScope.exact({"env": value}),
                        "always",
                    )
                    store.add(grant)
                    live.add(value)
                elif action == "revoke":
                    store.revoke(f"g_{value}")
                    live.discard(value)
                elif action == "authorize":
                    auth = await session.authorize(
                        "app__deploy", {"env": value}, call_id=f"c{n}", wait=False
                    )
                    assert auth.allowed == (value in live)
                    if auth.allowed:
                        kept.append((auth.call_id, value))
                elif kept:
                    call_id, env = kept.pop(value % len(kept))
                    before = len(ran)
                    outcome = await session.run_authorized(call_id)
                    if env in live:
                        assert outcome.status == "ok" and ran[before:] == [env]
                    else:
                        assert outcome.status == "denied" and len(ran) == before
        other.close()
        harness.grants.close()  # type: ignore[attr-defined]

    with tempfile.TemporaryDirectory() as tmp:
        anyio.run(main, Path(tmp) / "grants.db")
