"""Where ``clearance journal`` reads: a journal file, or the journal of a PostgreSQL store.

Both are read without writing anything: :class:`FileJournal` through
:func:`~clearance.harness.journal.read_journal` (a SQLite database or a JSON-lines file),
:class:`StoreJournal` over a read-only connection of its own (it never opens a
:class:`~clearance.harness.journal.PostgresJournal`, which would write as a host and close
that host's unfinished calls). :func:`open_journal` picks one as ``clearance grants`` and
``clearance asks`` pick their store (:mod:`clearance.cli._store`), and connects at once: an
unreachable store is an error naming it, never a reason to read another journal.

Following a PostgreSQL journal polls by the ``events`` table's ``id``. Ids are handed out
when a row is inserted, not when it is committed, so with several hosts writing, a row can
become visible after rows with larger ids (host a inserts ids 7-9, host b inserts 10 and
commits first). A reader that only asked for ids above the largest it had seen would miss
7-9 for good. :class:`StoreJournal` remembers the ids it skipped over (*gaps*) and asks for
them again at every poll until they appear; a gap still empty after :data:`GAP_WAIT`
seconds of polls is a rolled-back insert (a host whose commit was cut off writes those rows
again, with new ids) and is forgotten.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol

from clearance._text import printable
from clearance.cli._options import load_cli_config
from clearance.cli._store import store_url
from clearance.errors import JournalError, StoreError
from clearance.harness.journal import JournalEvent, read_journal

if TYPE_CHECKING:
    from clearance.harness.postgres import Connection, PostgresDatabase

__all__ = ["GAP_WAIT", "FileJournal", "JournalSource", "StoreJournal", "open_journal"]

GAP_WAIT: Final = 60.0
"""Seconds a skipped id is asked for again before it counts as a rolled-back insert (a
host's commit takes milliseconds; a connection cut mid-commit is noticed within seconds)."""

_BATCH: Final = 5000
"""Rows a poll reads at most (a follow starting on a long journal reads it in batches)."""


class JournalSource(Protocol):
    """A journal as ``clearance journal`` reads it."""

    label: str
    """How messages name it."""

    def read(
        self, types: Sequence[str], *, session_id: str | None, call_id: str | None
    ) -> list[JournalEvent]:
        """Every record of ``types`` (of one session and/or call), in order."""
        ...

    def read_new(
        self, types: Sequence[str], *, session_id: str | None, call_id: str | None
    ) -> list[JournalEvent]:
        """The records committed since the last call, none twice (the first call: all)."""
        ...

    def close(self) -> None: ...


def open_journal(db: str | None, config_path: str | None) -> JournalSource:
    """The journal ``--db`` names (a file or a ``postgresql://`` URL), else the
    configuration's: its ``store`` when it has one, else its ``[journal] path``.

    Raises:
        ConfigError: the configuration or the URL is wrong.
        StoreError: the PostgreSQL store cannot be reached or holds no journal.
        MissingExtraError: a PostgreSQL store without the ``postgres`` extra.
    """
    url = store_url(db, config_path)
    if url is not None:
        return StoreJournal(url)
    if db is not None:
        return FileJournal(db)
    return FileJournal(str(load_cli_config(config_path).journal.path))


class FileJournal:
    """A SQLite or JSON-lines journal file, read with ``read_journal`` (no lock, no
    recovery: safe while a harness writes it)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.label = path
        self._after = 0

    def read(
        self, types: Sequence[str], *, session_id: str | None, call_id: str | None
    ) -> list[JournalEvent]:
        return self._read(types, session_id, call_id, 0)

    def read_new(
        self, types: Sequence[str], *, session_id: str | None, call_id: str | None
    ) -> list[JournalEvent]:
        events = self._read(types, session_id, call_id, self._after)
        # A file's seq counts every record of the journal: polling past the last one seen
        # reads each record once.
        self._after = max([self._after, *(e.seq for e in events)])
        return events

    def _read(
        self, types: Sequence[str], session_id: str | None, call_id: str | None, after: int
    ) -> list[JournalEvent]:
        try:
            return read_journal(
                self.path, types=types, session_id=session_id, call_id=call_id, after_seq=after
            )
        except JournalError:
            if not Path(self.path).exists():
                raise JournalError(
                    f"no journal at {self.path!r} (give the file with --db)"
                ) from None
            raise

    def close(self) -> None:
        pass


class StoreJournal:
    """The journal in a PostgreSQL store (every host's records), read over a read-only
    connection of its own.

    Args:
        url: the store, ``postgresql://...`` (``?schema=NAME`` names its schema).

    Raises:
        ConfigError: not a PostgreSQL URL, or an invalid schema name.
        StoreError: the store cannot be reached, has no journal (no host or ``clearance
            store migrate`` created its tables yet) or a newer schema than this clearance
            reads.
        MissingExtraError: the ``postgres`` extra is not installed.
    """

    def __init__(self, url: str) -> None:
        # Imported here: psycopg is the optional ``postgres`` extra.
        from clearance.harness.postgres import PostgresDatabase

        self.database: PostgresDatabase = PostgresDatabase(url)
        self.label = self.database.label
        self._conn: Connection | None = None
        self._high = 0
        """The largest id read so far."""
        self._gaps: list[tuple[int, int, float]] = []
        """``(first, last, since)``: ids below ``_high`` not read yet, since when."""
        self._connect()

    def _connect(self) -> Connection:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        # Read-only for the server too: a reader never writes, whatever it runs.
        conn = self.database.connect(options="-c default_transaction_read_only=on")
        try:
            self._check_schema(conn)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return conn

    def _check_schema(self, conn: Connection) -> None:
        from clearance.harness.postgres import SCHEMA_VERSION

        schema = self.database.schema
        row = self._run(
            conn, "SELECT to_regclass(%s) IS NOT NULL", (f"{schema}.events",)
        ).fetchone()
        if not row or not row[0]:
            raise StoreError(
                f"no journal in {self.label}: it has no clearance tables yet (a host creates "
                "them when it first opens the store, or run `clearance store migrate`)",
                store=self.label,
            )
        found = self._run(
            conn, f"SELECT value FROM {schema}.meta WHERE key = 'schema_version'"
        ).fetchone()
        version = int(found[0]) if found else 0
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.label} has schema version {version}; this clearance reads up to "
                f"{SCHEMA_VERSION} (upgrade clearance)",
                store=self.label,
            )

    def _run(self, conn: Connection, sql: str, params: Any = None) -> Any:
        """``conn.execute``, a lost connection or a refusal a :class:`StoreError` naming
        the store."""
        from clearance.harness.postgres import ConnectionLost, DatabaseError

        try:
            return conn.execute(sql.encode(), params)
        except ConnectionLost as exc:
            conn.close()
            raise self.database.unavailable("cannot read the journal", exc) from None
        except DatabaseError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StoreError(
                f"{self.label} refused to read the journal: {first}", store=self.label
            ) from None

    def read(
        self, types: Sequence[str], *, session_id: str | None, call_id: str | None
    ) -> list[JournalEvent]:
        """As ``PostgresJournal.events`` orders them: by ``seq`` within one session, else in
        the order the rows were inserted (a session's records are in ``seq`` order either
        way: one host writes a session, in order)."""
        where = ["type = ANY(%s)"]
        params: list[Any] = [list(types)]
        if session_id is not None:
            where.append("session_id = %s")
            params.append(session_id)
        if call_id is not None:
            where.append("call_id = %s")
            params.append(call_id)
        order = "seq" if session_id is not None else "id"
        sql = (
            f"SELECT id, session_id, seq, ts, type, turn_id, call_id, version, data "
            f"FROM {self.database.schema}.events WHERE {' AND '.join(where)} ORDER BY {order}"
        )
        rows = self._run(self._connect(), sql, params).fetchall()
        return [_event(row) for row in rows]

    def read_new(
        self, types: Sequence[str], *, session_id: str | None, call_id: str | None
    ) -> list[JournalEvent]:
        """The records of ``types`` (of one session and/or call) committed since the last
        call, by ``id``: those above the largest id read, and those in the gaps below it
        that have appeared meanwhile (see the module docstring)."""
        # Every row is read (to see which ids exist); only the wanted ones carry their data.
        wanted = (
            "type = ANY(%(types)s) AND (%(session)s::text IS NULL OR session_id = %(session)s) "
            "AND (%(call)s::text IS NULL OR call_id = %(call)s)"
        )
        columns = (
            "e.id, e.session_id, e.seq, e.ts, e.type, e.turn_id, e.call_id, e.version, "
            f"CASE WHEN {wanted} THEN e.data END"
        )
        table = f"{self.database.schema}.events AS e"
        sql = (
            f"(SELECT {columns} FROM {table} WHERE e.id > %(high)s ORDER BY e.id "
            f"LIMIT {_BATCH}) UNION ALL (SELECT {columns} FROM {table} JOIN "
            "unnest(%(lo)s::bigint[], %(hi)s::bigint[]) AS g(lo, hi) "
            "ON e.id BETWEEN g.lo AND g.hi)"
        )
        found: list[JournalEvent] = []
        while True:
            params = {
                "types": list(types),
                "session": session_id,
                "call": call_id,
                "high": self._high,
                "lo": [g[0] for g in self._gaps],
                "hi": [g[1] for g in self._gaps],
            }
            rows = sorted(self._run(self._connect(), sql, params).fetchall(), key=lambda r: r[0])
            above = self._take([int(row[0]) for row in rows])
            found.extend(_event(row) for row in rows if row[8] is not None)
            if above < _BATCH:
                return found

    def _take(self, ids: Iterable[int]) -> int:
        """Note the ids a poll read (in order); how many were above ``_high``."""
        now = time.monotonic()
        above = 0
        fills: list[int] = []
        for id_ in ids:
            if id_ > self._high:
                if id_ > self._high + 1:
                    self._gaps.append((self._high + 1, id_ - 1, now))
                self._high = id_
                above += 1
            else:
                fills.append(id_)
        for id_ in fills:
            self._fill(id_)
        # Forgotten only after a poll that found them still empty (a poll that failed,
        # while the store was away, forgets nothing).
        self._gaps = [g for g in self._gaps if now - g[2] < GAP_WAIT]
        return above

    def _fill(self, id_: int) -> None:
        for n, (first, last, since) in enumerate(self._gaps):
            if first <= id_ <= last:
                parts = [(first, id_ - 1, since), (id_ + 1, last, since)]
                self._gaps[n : n + 1] = [p for p in parts if p[0] <= p[1]]
                return

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self.database.close()

    def __repr__(self) -> str:
        return f"StoreJournal({printable(self.label)!r})"


def _event(row: tuple[Any, ...]) -> JournalEvent:
    """The record of a row ``(id, session_id, seq, ts, type, turn_id, call_id, version,
    data)`` (the columns ``PostgresJournal`` writes)."""
    _, session_id, seq, ts, type_, turn_id, call_id, version, data = row
    return JournalEvent(
        type_,
        session_id,
        turn_id,
        call_id,
        json.loads(data),
        ts=float(ts),
        seq=int(seq),
        version=int(version),
    )
