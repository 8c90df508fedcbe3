"""The durable stores a test runs against: SQLite (one file, as the CLI lays it out) and
PostgreSQL (a schema of its own on the test server, see ``postgres_support``).

A test that exercises a grant store, an ask store or a journal takes the ``stores`` fixture
of :func:`stores_fixture` and opens what it needs; the same test then runs on both::

    stores = stores_fixture()

    async def test_something(stores: Stores) -> None:
        grants = stores.grants()
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from postgres_support import fresh_schema

KINDS = ("sqlite", "postgres")


@dataclass
class Stores:
    """Where one test's durable stores live, and how to open them (each open is closed
    at the end of the test)."""

    kind: str
    target: str
    """The SQLite file, or the PostgreSQL URL (with its schema)."""
    schema: str = ""
    opened: list[Any] = field(default_factory=list)

    def grants(self) -> Any:
        if self.kind == "sqlite":
            from clearance.harness.grants_sqlite import SqliteGrantStore

            return self._keep(SqliteGrantStore(self.target))
        from clearance.harness.grants_postgres import PostgresGrantStore

        return self._keep(PostgresGrantStore(self.target))

    def asks(self) -> Any:
        if self.kind == "sqlite":
            from clearance.harness.ask_store_sqlite import SqliteAskStore

            return self._keep(SqliteAskStore(self.target))
        from clearance.harness.ask_store_postgres import PostgresAskStore

        return self._keep(PostgresAskStore(self.target))

    def ask_store_code(self) -> str:
        """Python that opens this ask store as ``store`` (in another process)."""
        if self.kind == "sqlite":
            return (
                "from clearance.harness.ask_store_sqlite import SqliteAskStore\n"
                f"store = SqliteAskStore({self.target!r})\n"
            )
        return (
            "from clearance.harness.ask_store_postgres import PostgresAskStore\n"
            f"store = PostgresAskStore({self.target!r})\n"
        )

    def _keep(self, store: Any) -> Any:
        self.opened.append(store)
        return store

    def close(self) -> None:
        for store in reversed(self.opened):
            close = getattr(store, "close", None)
            if close is not None:
                close()
        self.opened.clear()


@contextmanager
def open_stores(kind: str, tmp_path: Path) -> Iterator[Stores]:
    """The stores of ``kind`` for one test; closed (and the schema dropped) at the end."""
    if kind == "sqlite":
        stores = Stores("sqlite", str(tmp_path / "clearance.db"))
        try:
            yield stores
        finally:
            stores.close()
        return
    with fresh_schema() as (url, schema):
        stores = Stores("postgres", url, schema)
        try:
            yield stores
        finally:
            stores.close()


def stores_fixture() -> Any:
    """A ``stores`` fixture for a test module: each test that takes it runs once per kind."""

    @pytest.fixture(params=KINDS)
    def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
        with open_stores(request.param, tmp_path) as opened:
            yield opened

    return stores
