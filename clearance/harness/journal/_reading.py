"""Reading a journal file of either kind without writing to it."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from clearance.errors import JournalError
from clearance.harness.journal._event import JournalEvent, matches
from clearance.harness.journal._jsonl import read_jsonl
from clearance.harness.journal._sqlite_read import read_sqlite
from clearance.harness.journal._sqlite_schema import is_sqlite_file

__all__ = ["read_journal"]


def read_journal(
    path: str | os.PathLike[str],
    *,
    session_id: str | None = None,
    call_id: str | None = None,
    types: Iterable[str] | None = None,
    after_seq: int = 0,
) -> list[JournalEvent]:
    """Read the records of a journal file, SQLite or JSON lines (told apart by content),
    without writing to it: no recovery, no lock, safe while a harness appends.

    Filters combine with AND; ``after_seq`` skips records up to and including that
    ``seq`` (poll with the last ``seq`` seen to follow a journal).

    Raises:
        JournalError: the file is missing or is not a clearance journal.
    """
    p = Path(path)
    if not p.is_file():
        raise JournalError(f"{p}: no such journal file")
    wanted = tuple(types) if types is not None else None
    if is_sqlite_file(p):
        return read_sqlite(
            p, session_id=session_id, call_id=call_id, types=wanted, after_seq=after_seq
        )
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise JournalError(f"{p}: cannot read the journal: {exc.strerror}") from None
    events, _ = read_jsonl(raw, str(p))
    return [
        e
        for e in events
        if e.seq > after_seq
        and matches(e, session_id, call_id)
        and (wanted is None or e.type in wanted)
    ]
