"""Reading the SQLite journal: rows back as events, on the writer's connection or on a
read-only one that any process can open while a harness writes."""

from __future__ import annotations

import json
import os
import sqlite3
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clearance.errors import JournalError
from clearance.harness.journal._event import JournalEvent
from clearance.harness.journal._sqlite_schema import (
    COLUMNS,
    SCHEMA_VERSION,
    is_sqlite_file,
    schema_version,
)

__all__ = ["event_from_row", "read_sqlite", "select"]


def event_from_row(row: Sequence[Any]) -> JournalEvent:
    """The event an ``events`` row (its columns in :data:`COLUMNS` order) holds."""
    seq, ts, type_, session_id, turn_id, call_id, version, data = row
    return JournalEvent(
        type=type_,
        session_id=session_id,
        turn_id=turn_id,
        call_id=call_id,
        data=json.loads(data),
        ts=ts,
        seq=seq,
        version=version,
    )


def select(
    db: sqlite3.Connection,
    *,
    session_id: str | None = None,
    call_id: str | None = None,
    types: Sequence[str] | None = None,
    after_seq: int = 0,
    limit: int | None = None,
) -> list[JournalEvent]:
    """The events matching every filter given, in ``seq`` order."""
    where = ["seq > ?"]
    params: list[Any] = [after_seq]
    if session_id is not None:
        where.append("session_id = ?")
        params.append(session_id)
    if call_id is not None:
        where.append("call_id = ?")
        params.append(call_id)
    if types is not None:
        where.append(f"type IN ({', '.join('?' for _ in types)})")
        params.extend(types)
    sql = f"SELECT {COLUMNS} FROM events WHERE {' AND '.join(where)} ORDER BY seq"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    return [event_from_row(row) for row in db.execute(sql, params)]


def read_sqlite(
    path: str | os.PathLike[str],
    *,
    session_id: str | None = None,
    call_id: str | None = None,
    types: Sequence[str] | None = None,
    after_seq: int = 0,
    limit: int | None = None,
) -> list[JournalEvent]:
    """Records of a journal file, read through a read-only connection (no recovery, no
    lock: safe while a harness writes it). Filters combine with AND; ``after_seq`` skips
    records up to and including that ``seq``.

    Raises:
        JournalError: the file is missing, not SQLite, or not a clearance journal.
    """
    p = Path(path)
    if not p.is_file():
        raise JournalError(f"{p}: no such journal file")
    if not is_sqlite_file(p):
        raise JournalError(f"{p}: not a SQLite database")
    uri = f"file:{urllib.parse.quote(str(p.resolve()))}?mode=ro"
    try:
        db = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise JournalError(f"{p}: cannot open the journal: {exc}") from None
    try:
        db.execute("PRAGMA busy_timeout = 10000")
        version = schema_version(db, p)
        if version == 0:
            raise JournalError(f"{p}: not a clearance journal (no schema version)")
        if version > SCHEMA_VERSION:
            raise JournalError(
                f"{p}: the journal has schema version {version}; this clearance reads up to "
                f"{SCHEMA_VERSION} (upgrade clearance)"
            )
        return select(
            db,
            session_id=session_id,
            call_id=call_id,
            types=types,
            after_seq=after_seq,
            limit=limit,
        )
    except sqlite3.Error as exc:
        raise JournalError(f"{p}: cannot read the journal: {exc}") from None
    finally:
        db.close()
