"""The SQLite journal's file: its schema, its migrations, and opening a connection.

Schema (versioned from the first release; ``MIGRATIONS`` lists every step)::

    meta(key TEXT PRIMARY KEY, value TEXT)          schema_version, scan_from, created_at
    events(seq INTEGER PRIMARY KEY, ts REAL, type TEXT, session_id TEXT, turn_id TEXT,
           call_id TEXT, version INTEGER, data TEXT)   -- data: the record's JSON
    indexes: (session_id, call_id), (call_id), (seq) WHERE type = 'tool_started'

``scan_from`` bounds crash recovery: no ``tool_started`` before it is left open, so an
open reads only the records written since the last clean close.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from pathlib import Path
from typing import Final

from clearance.errors import JournalError
from clearance.harness.journal._durable import Durability

__all__ = [
    "COLUMNS",
    "INSERT",
    "MIGRATIONS",
    "OPEN_ASKS",
    "OPEN_STARTS",
    "SCHEMA_VERSION",
    "Row",
    "connect",
    "is_sqlite_file",
    "migrate",
    "schema_version",
    "set_meta",
    "sql_columns",
]

_log = logging.getLogger("clearance")

SCHEMA_VERSION: Final = 2
"""The newest schema this version of clearance writes and reads."""

MIGRATIONS: Final[tuple[tuple[int, tuple[str, ...]], ...]] = (
    (
        1,
        (
            "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
            """CREATE TABLE events (
                seq INTEGER PRIMARY KEY,
                ts REAL NOT NULL,
                type TEXT NOT NULL,
                session_id TEXT NOT NULL,
                turn_id TEXT,
                call_id TEXT,
                version INTEGER NOT NULL,
                data TEXT NOT NULL
            )""",
            "CREATE INDEX events_session_call ON events (session_id, call_id)",
            "CREATE INDEX events_call ON events (call_id)",
            # Recovery looks up starts by type; a partial index costs nothing for the
            # other types (listings read in seq order anyway).
            "CREATE INDEX events_started ON events (seq) WHERE type = 'tool_started'",
        ),
    ),
    (
        2,
        # Recovery also ends the calls that waited on an ask (issue 34).
        ("CREATE INDEX events_asked ON events (seq) WHERE type = 'permission_asked'",),
    ),
)
"""``(version, statements)``: each step runs in one transaction and sets ``schema_version``."""

Row = tuple[int, float, str, str, str | None, str | None, int, str]
"""One ``events`` row: ``(seq, ts, type, session_id, turn_id, call_id, version, data)``."""

INSERT: Final = "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
COLUMNS: Final = "seq, ts, type, session_id, turn_id, call_id, version, data"
OPEN_STARTS: Final = """
    SELECT {columns} FROM events AS s
    WHERE s.type = 'tool_started' AND s.seq >= ?
      AND NOT EXISTS (
        SELECT 1 FROM events AS f
        WHERE f.session_id = s.session_id AND f.call_id IS s.call_id
          AND f.type = 'tool_finished' AND f.seq > s.seq)
    ORDER BY s.seq
"""
"""The starts without an end from ``seq`` ``?`` on; ``{columns}`` is what to select of
each (``s.`` columns)."""

OPEN_ASKS: Final = """
    SELECT {columns} FROM events AS s
    WHERE s.type = 'permission_asked' AND s.seq >= ?
      AND NOT EXISTS (
        SELECT 1 FROM events AS f
        WHERE f.session_id = s.session_id AND f.call_id IS s.call_id
          AND f.type = 'call_decided' AND f.seq > s.seq)
    ORDER BY s.seq
"""
"""The asks whose call has no ``call_decided`` (it waited when the process stopped), from
``seq`` ``?`` on."""

_SQLITE_MAGIC = b"SQLite format 3\x00"


def sql_columns(alias: str) -> str:
    """:data:`COLUMNS`, each prefixed with ``alias.``."""
    return ", ".join(f"{alias}.{c.strip()}" for c in COLUMNS.split(","))


def is_sqlite_file(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` starts with the SQLite file header."""
    try:
        with open(path, "rb") as fh:
            return fh.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC
    except OSError:
        return False


def connect(path: Path, durability: Durability) -> sqlite3.Connection:
    """The writer's connection to ``path`` (created, mode 0600, when missing), in WAL mode.

    Raises:
        JournalError: the file cannot be opened or is not a usable SQLite database.
    """
    try:
        if not path.exists():
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
        with path.open("rb") as fh:
            head = fh.read(len(_SQLITE_MAGIC))
        if head and head != _SQLITE_MAGIC:
            raise JournalError(f"{path}: not a SQLite database")
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    except OSError as exc:
        raise JournalError(f"{path}: cannot open the journal: {exc.strerror}") from None
    except sqlite3.Error as exc:
        raise JournalError(f"{path}: cannot open the journal: {exc}") from None
    try:
        db.execute("PRAGMA busy_timeout = 10000")
        mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if mode != "wal":
            _log.warning("%s: WAL is not available here (journal_mode=%s)", path, mode)
        db.execute(f"PRAGMA synchronous = {'FULL' if durability == 'full' else 'NORMAL'}")
    except sqlite3.Error as exc:
        db.close()
        raise JournalError(f"{path}: not a usable SQLite database: {exc}") from None
    return db


def migrate(db: sqlite3.Connection, path: Path) -> None:
    """Bring the schema up to :data:`SCHEMA_VERSION`, one transaction per step.

    Raises:
        JournalError: the file holds a newer schema, or tables that are not a journal's.
    """
    version = schema_version(db, path)
    if version > SCHEMA_VERSION:
        raise JournalError(
            f"{path}: the journal has schema version {version}; this clearance reads up to "
            f"{SCHEMA_VERSION} (upgrade clearance)"
        )
    for target, statements in MIGRATIONS:
        if target <= version:
            continue
        db.execute("BEGIN IMMEDIATE")
        try:
            for statement in statements:
                db.execute(statement)
            if version == 0:
                set_meta(db, "created_at", time.time())
            set_meta(db, "schema_version", target)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        version = target


def schema_version(db: sqlite3.Connection, path: Path) -> int:
    """The file's schema version; 0 for a database without a journal in it yet.

    Raises:
        JournalError: it has an ``events`` table but no journal schema version.
    """
    tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "meta" not in tables:
        if "events" in tables:
            raise JournalError(f"{path}: has an events table but is not a clearance journal")
        return 0
    row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None:
        if "events" in tables:
            raise JournalError(f"{path}: has an events table but is not a clearance journal")
        return 0
    return int(row[0])


def set_meta(db: sqlite3.Connection, key: str, value: object) -> None:
    """Set one ``meta`` value (stored as text)."""
    db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, str(value)))
