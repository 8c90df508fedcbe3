"""R5: allow_once authorizes exactly the asked call and is never stored; allow_session
lives until the session ends; allow_always is persisted; a grant covers only its
principal, its tool and its argument scope. In a SQLite grant store and in a PostgreSQL
one (a schema of its own per example) alike."""

import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from postgres_support import fresh_schema
from support import ALICE, BOB, Recorder, coding_registry

from clearance import Harness, MemoryJournal, SqliteGrantStore
from clearance.harness.approvals import Answer
from clearance.policy import LocalEvaluator

pytestmark = pytest.mark.anyio

ASK_ALL = LocalEvaluator(ask=["files.*"])
paths = st.sampled_from(["a", "b", "src/a", "src/b", "src/../a"])


@contextmanager
def grant_stores(kind: str) -> Iterator[Callable[[], Any]]:
    """Opens the one grant store of an example (each call a new open of the same store)."""
    if kind == "postgres":
        from clearance.harness.grants_postgres import PostgresGrantStore

        with fresh_schema() as (url, _):
            yield lambda: PostgresGrantStore(url)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            yield lambda: SqliteGrantStore(Path(tmp) / "g.db")


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
@given(
    first=paths,
    later=st.lists(
        st.tuples(
            st.sampled_from(["alice", "bob"]), st.sampled_from(["write_file", "list_dir"]), paths
        ),
        max_size=6,
    ),
    answer=st.sampled_from(["allow_once", "allow_session", "allow_always"]),
)
async def test_r5_grants_cover_only_their_scope(
    kind: str, first: str, later: list[tuple[str, str, str]], answer: Answer
) -> None:
    rec = Recorder()
    with grant_stores(kind) as open_store:
        store = open_store()
        async with Harness(
            coding_registry(rec), evaluator=ASK_ALL, grant_store=store, journal=MemoryJournal()
        ) as h:
            answered = iter([answer])
            alice = await h.create_session(
                principal=ALICE, on_permission_ask=lambda ask: next(answered, "deny")
            )
            bob = await h.create_session(principal=BOB, on_permission_ask=lambda ask: "deny")
            assert (await alice.call_tool("files__write_file", {"path": first, "content": "x"})).ok
            for who, tool, path in later:
                session = alice if who == "alice" else bob
                args = {"path": path, "content": "x"} if tool == "write_file" else {"path": path}
                out = await session.call_tool(f"files__{tool}", args)
                covered = (
                    answer != "allow_once"
                    and who == "alice"
                    and tool == "write_file"
                    and path == first
                )
                assert out.ok == covered, (answer, first, who, tool, path)
            grants = store.list()
            assert len(grants) == (0 if answer == "allow_once" else 1)
            await alice.aclose()
            assert len(store.list()) == (1 if answer == "allow_always" else 0)
        store.close()
        reopened = open_store()
        persisted = reopened.list()
        assert len(persisted) == (1 if answer == "allow_always" else 0)
        for grant in persisted:
            assert reopened.revoke(grant.grant_id)
        reopened.close()
        last = open_store()
        assert last.list() == []
        last.close()
