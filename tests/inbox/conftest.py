"""A ``clearance inbox`` process over a fresh SQLite ask store, for alice and bob."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from inbox_support import Running, start_inbox
from support import approver

from clearance.harness.ask_store_sqlite import SqliteAskStore


@pytest.fixture
def inbox_process(tmp_path: Path) -> Iterator[Running]:
    """``clearance inbox --db <tmp>/clearance.db --port 0 --user alice --user bob``."""
    db = tmp_path / "clearance.db"
    SqliteAskStore(db).close()
    running = start_inbox(
        "--db", db.name, "--port", "0", "--user", "alice", "--user", "bob", cwd=tmp_path
    )
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(autouse=True)
def approvers() -> None:
    """alice and bob are approvers (rule R13): the inbox seals their answers with their
    keys."""
    approver("alice")
    approver("bob")
