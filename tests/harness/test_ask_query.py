"""The inbox's queries (issue 38: filtered, paged and grouped in the store): the SQLite and
PostgreSQL stores answer each filter, page and group exactly as reading every shown ask
and filtering in Python does (the generic path, which a store without these queries
takes), for random asks, hosts, policies and filters."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from postgres_support import fresh_schema

from clearance.harness.approvals import PermissionDecision
from clearance.harness.ask_query import (
    GROUPS,
    AskFilter,
    States,
    shown_groups,
    shown_page,
    shown_states,
)
from clearance.harness.ask_store import HOST_GONE, MemoryAskStore, StoredAsk, host_credential
from clearance.harness.ask_store_sqlite import SqliteAskStore

HOSTS = ("a", "b", "")
TOOLS = ("notes.write", "mail.send")
PRINCIPALS = ('User::"alice"', 'User::"bob"')
POLICIES = ("ask:notes.write", "review", "big-refund")


def make(n: int, host: str, tool: str, principal: str, policies: tuple[str, ...]) -> StoredAsk:
    return StoredAsk(
        ask_id=f"ask_{n:03d}",
        principal=principal,
        tool=tool,
        call_id=f"c{n}",
        session_id="s",
        arguments_hash=f"h{n}",
        arguments={"n": n},
        reason="why",
        policies=policies,
        created_at=1_000.0 + n // 2,  # pairs share a time: the id orders them
        host=host,
    )


asks_strategy = st.lists(
    st.tuples(
        st.sampled_from(HOSTS),
        st.sampled_from(TOOLS),
        st.sampled_from(PRINCIPALS),
        st.lists(st.sampled_from(POLICIES), unique=True, max_size=2).map(tuple),
        st.sampled_from(["pending", "pending", "answered", HOST_GONE, "expired"]),
    ),
    max_size=25,
)
filters = st.builds(
    AskFilter,
    host=st.none() | st.sampled_from(HOSTS),
    tool=st.none() | st.sampled_from(TOOLS),
    principal=st.none() | st.sampled_from(PRINCIPALS),
    policy=st.none() | st.sampled_from(POLICIES),
    since=st.sampled_from([0.0, 1_004.0]),
)


def fill(store: Any, rows: list[tuple[Any, ...]]) -> None:
    """Put the asks of ``rows`` in ``store`` as their states say."""
    for n, (host, tool, principal, policies, state) in enumerate(rows):
        ask = make(n, host, tool, principal, policies)
        if state == "answered":
            ask = StoredAsk(**{**_fields(ask), "status": "consumed"})
        elif state in (HOST_GONE, "expired"):
            ask = StoredAsk(**{**_fields(ask), "status": "closed", "closed_why": state})
        store.put(ask)


def _fields(ask: StoredAsk) -> dict[str, Any]:
    return {name: getattr(ask, name) for name in StoredAsk.__slots__}


class Everything(MemoryAskStore):
    """A store with only the protocol's methods plus ``all`` (as one written elsewhere):
    the generic path reads it whole."""

    def all(self, *, limit: int = 100) -> list[StoredAsk]:
        return sorted(self._asks.values(), key=lambda a: -a.created_at)[:limit]


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "sqlite":
        opened: Any = SqliteAskStore(tmp_path / "asks.db")
        yield opened
        opened.close()
        return
    from clearance.harness.ask_store_postgres import PostgresAskStore

    with fresh_schema() as (url, _):
        opened = PostgresAskStore(url)
        yield opened
        opened.close()


def clear(store: Any) -> None:
    if isinstance(store, SqliteAskStore):
        store._db.execute("DELETE FROM asks")
        store._db.execute("DELETE FROM ask_hosts")
        return

    def empty(conn: Any) -> None:
        conn.execute(f"DELETE FROM {store._table}")
        conn.execute(f"DELETE FROM {store._hosts}")

    store.database.run("empty", empty)


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=asks_strategy, where=filters, group=st.none() | st.sampled_from(GROUPS))
def test_the_store_filters_pages_and_groups_as_reading_everything_does(
    store: Any, rows: list[tuple[Any, ...]], where: AskFilter, group: Any
) -> None:
    clear(store)
    fill(store, rows)
    everything = Everything()
    fill(everything, rows)
    for offset, limit in ((0, 50), (0, 3), (3, 4)):
        page, total, waiting = shown_page(store, where, offset=offset, limit=limit, group=group)
        expected = shown_page(everything, where, offset=offset, limit=limit, group=group)
        assert (total, waiting) == (expected.total, expected.waiting)
        assert [a.ask_id for a in page] == [a.ask_id for a in expected.asks]
        assert all(where.matches(a) for a in page)
    for by in GROUPS:
        assert shown_groups(store, where, by) == shown_groups(everything, where, by)
    assert shown_states(store, where.since) == shown_states(everything, where.since)


def test_a_lapsed_lease_reads_host_gone_in_the_states(store: Any) -> None:
    ask = StoredAsk(**{**_fields(make(1, "a", TOOLS[0], PRINCIPALS[0], ())), "instance": "i1"})
    store.put(ask, lease=0.2)
    assert shown_states(store, 0.0) == {"ask_001": "pending"}
    time.sleep(0.3)
    assert shown_states(store, 0.0) == {"ask_001": HOST_GONE}


def test_a_page_of_ten_thousand_reads_only_its_rows(tmp_path: Path) -> None:
    """The filter is in the query: of 10,000 asks, only the page's rows are turned into
    asks (benchmarks/bench_inbox.py measures the time)."""
    store = SqliteAskStore(tmp_path / "asks.db")
    store._db.execute("BEGIN")
    for n in range(10_000):
        store.put(make(n, f"h{n % 7}", TOOLS[n % 2], PRINCIPALS[0], (POLICIES[n % 3],)))
    store._db.execute("COMMIT")
    read: list[str] = []
    reported = store._reported

    def counting(row: tuple[Any, ...]) -> StoredAsk:
        read.append(row[0])
        return reported(row)

    store._reported = counting  # type: ignore[method-assign]
    page, total, waiting = shown_page(
        store, AskFilter(host="h3", policy="review"), offset=20, limit=20
    )
    expected = [f"ask_{n:03d}" for n in range(10_000) if n % 7 == 3 and n % 3 == 1]
    assert total == waiting == len(expected)
    assert [a.ask_id for a in page] == read == expected[20:40]
    store.close()


OPS = st.lists(
    st.tuples(
        st.sampled_from(["raise", "raise waiting", "answer", "withdraw", "end", "lapse"]),
        st.integers(0, 5),
    ),
    max_size=12,
)


@settings(max_examples=20, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_states_kept_from_the_changes_are_the_states_read_in_full(
    store: Any, ops: list[tuple[str, int]]
) -> None:
    """After any sequence of asks raised (paused or waiting on a lease), answered,
    withdrawn, and hosts ending or lapsing, the states a watcher keeps by reading only
    what changed are the states read in full."""
    clear(store)
    tracked = States(store, full_every=3600.0)
    credential = host_credential(store)
    raised = 0
    assert tracked.look(0.0) == shown_states(store, 0.0) == {}
    for op, n in ops:
        ask_id = f"ask_{n % max(raised, 1) + 1:03d}"  # one raised before
        if op.startswith("raise"):
            raised += 1
            ask_id = f"ask_{raised:03d}"  # ask ids are never reused
            ask = make(100 + raised, "a", TOOLS[0], PRINCIPALS[0], ())
            instance = f"i{n % 2}" if op == "raise waiting" else None
            store.put(
                StoredAsk(**{**_fields(ask), "ask_id": ask_id, "instance": instance}),
                lease=30.0 if instance else None,
            )
        elif op == "answer" and (found := store.get(ask_id)) and found.status == "pending":
            store.answer(ask_id, PermissionDecision("deny"), credential=credential)
        elif op == "withdraw":
            store.withdraw(ask_id, "withdrawn")
        elif op == "end":
            store.end(f"i{n % 2}")
        elif op == "lapse":
            store.renew(f"i{n % 2}", "a", -1.0)
        assert tracked.look(0.0) == shown_states(store, 0.0), op
    # Read in full only when a lease went or came back (or at the first look).
    assert tracked.full_looks <= 1 + sum(op in ("end", "lapse", "raise waiting") for op, _ in ops)
