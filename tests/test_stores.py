"""Every store is importable from one documented place (issue 31): ``clearance.stores``
(the memory and SQLite ones also from ``clearance``), the PostgreSQL ones on first use."""

from __future__ import annotations

import subprocess
import sys

import pytest

import clearance
import clearance.stores
from clearance.harness.ask_store import AskStore, MemoryAskStore
from clearance.harness.ask_store_postgres import PostgresAskStore
from clearance.harness.ask_store_sqlite import SqliteAskStore
from clearance.harness.grants_postgres import PostgresGrantStore
from clearance.harness.journal import PostgresJournal


def test_the_stores_are_the_harness_own_classes() -> None:
    assert clearance.stores.SqliteAskStore is SqliteAskStore
    assert clearance.stores.MemoryAskStore is MemoryAskStore
    assert clearance.stores.AskStore is AskStore
    assert clearance.SqliteAskStore is SqliteAskStore
    assert clearance.MemoryAskStore is MemoryAskStore
    assert clearance.stores.SqliteGrantStore is clearance.SqliteGrantStore
    assert clearance.stores.SqliteJournal is clearance.SqliteJournal


def test_the_postgres_stores_come_on_first_use() -> None:
    assert clearance.stores.PostgresAskStore is PostgresAskStore
    assert clearance.stores.PostgresGrantStore is PostgresGrantStore
    assert clearance.stores.PostgresJournal is PostgresJournal
    with pytest.raises(AttributeError, match=r"'clearance\.stores' has no attribute 'RedisStore'"):
        _ = clearance.stores.RedisStore


def test_importing_the_stores_imports_no_driver() -> None:
    code = "import sys, clearance, clearance.stores; print('psycopg' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "False"
