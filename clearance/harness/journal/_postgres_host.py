"""The PostgreSQL journal's hosts: who writes which session, and closing the calls a
stopped host left open (rule R7 across hosts).

Every :class:`~clearance.harness.journal.PostgresJournal` writes as one *host* (an id,
stable across restarts: by default ``$CLEARANCE_HOST`` or the machine's name). While it
runs, its writer connection holds an advisory lock keyed by the host id, so two live
processes never write as one host, and a host's unfinished calls are closed only when no
process runs it:

- by the host itself when it opens again (:func:`open_host`), like a reopened
  ``SqliteJournal``;
- by an operator (``clearance store recover --host ID``, :func:`recover_stopped_host`) when
  that host will not come back.

Each recovery appends, for every ``tool_started`` of the host without a ``tool_finished``,
an ``interrupted`` end with the next ``seq`` of its session, for every call of the host
that waited on an ask (``permission_asked`` without ``call_decided``) a ``call_decided``
whose outcome is ``interrupted``, closes those asks (``host gone``) and bumps the host's
*generation*. A host that lost its connection checks the generation when it reconnects:
when someone recovered it meanwhile, the calls it was running are already closed, so it
stops writing (every append fails) instead of giving them a second end.

A session is written by one host (``journal_sessions``): its ``seq`` is handed out by that
host without gaps, and continues from the database when the host meets the session again
after a restart. Another host's session is refused.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import time
from typing import Any, Final

from clearance.errors import JournalError, StoreError
from clearance.harness.journal._durable import asked_end, interrupted_end
from clearance.harness.journal._event import JournalEvent, encode_data
from clearance.harness.postgres import (
    Connection,
    ConnectionLost,
    DatabaseError,
    PostgresDatabase,
)

__all__ = [
    "COLUMNS",
    "VALUES_MAX",
    "PgRow",
    "close_host",
    "default_host",
    "event_from_pg",
    "insert_rows",
    "lock_host",
    "open_host",
    "recover_stopped_host",
    "unlock_host",
    "values_sql",
]

PgRow = tuple[str, int, float, str, str | None, str | None, int, str]
"""One ``events`` row as the writer holds it:
``(session_id, seq, ts, type, turn_id, call_id, version, data)``."""

COLUMNS: Final = "session_id, seq, ts, type, turn_id, call_id, version, data"

_INSERT = (
    "INSERT INTO {s}.events (session_id, seq, host_id, ts, type, turn_id, call_id, version, "
    "data) SELECT t.session_id, t.seq, %s, t.ts, t.type, t.turn_id, t.call_id, t.version, "
    "t.data FROM unnest(%s::text[], %s::bigint[], %s::float8[], %s::text[], %s::text[], "
    "%s::text[], %s::int[], %s::text[]) "
    "AS t(session_id, seq, ts, type, turn_id, call_id, version, data)"
)

_VALUES = (
    "INSERT INTO {s}.events (session_id, seq, host_id, ts, type, turn_id, call_id, version, "
    "data) VALUES "
)
_ROW = "(%s, %s, %s, %s, %s, %s, %s, %s, %s)"

_COPY = (
    "COPY {s}.events (session_id, seq, host_id, ts, type, turn_id, call_id, version, data) "
    "FROM STDIN"
)

_OPEN_STARTS = """
    SELECT s.id, s.session_id, s.seq, s.ts, s.type, s.turn_id, s.call_id, s.version, s.data
    FROM {s}.events AS s
    WHERE s.host_id = %s AND s.type = 'tool_started' AND s.id >= %s
      AND NOT EXISTS (
        SELECT 1 FROM {s}.events AS f
        WHERE f.session_id = s.session_id AND f.call_id IS NOT DISTINCT FROM s.call_id
          AND f.type = 'tool_finished' AND f.seq > s.seq)
    ORDER BY s.id
"""


_OPEN_ASKS = """
    SELECT s.id, s.session_id, s.seq, s.ts, s.type, s.turn_id, s.call_id, s.version, s.data
    FROM {s}.events AS s
    WHERE s.host_id = %s AND s.type = 'permission_asked' AND s.id >= %s
      AND NOT EXISTS (
        SELECT 1 FROM {s}.events AS f
        WHERE f.session_id = s.session_id AND f.call_id IS NOT DISTINCT FROM s.call_id
          AND f.type = 'call_decided' AND f.seq > s.seq)
    ORDER BY s.id
"""


def default_host() -> str:
    """The host id a journal writes as by default: ``$CLEARANCE_HOST``, else the
    machine's name."""
    return os.environ.get("CLEARANCE_HOST") or socket.gethostname() or "localhost"


def event_from_pg(row: tuple[Any, ...]) -> JournalEvent:
    """The event of a row selected as :data:`COLUMNS`."""
    session_id, seq, ts, type_, turn_id, call_id, version, data = row
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


def insert_rows(
    conn: Connection, schema: str, host: str, rows: list[PgRow], *, again: bool = False
) -> None:
    """Insert ``rows`` in one statement; ``again``: rows a lost connection may or may not
    have committed (those already there are skipped).

    A few rows (what one call, or a few sessions' calls, commit before a start) go as one
    prepared multi-row ``INSERT``: one round trip, and the server does not parse or plan
    it again (for 1-3 rows about a third faster than ``COPY``, which takes two round
    trips, on this project's machines; even at 8). More rows go by ``COPY``, whose rows
    cost less to send, or, to skip rows already there, which ``COPY`` cannot do, by one
    ``INSERT ... SELECT FROM unnest``.
    """
    if not rows:
        return
    if len(rows) <= VALUES_MAX:
        sql = _values_sql(schema, len(rows), again)
        params: list[object] = []
        for session_id, seq, ts, type_, turn_id, call_id, version, data in rows:
            params += (session_id, seq, host, ts, type_, turn_id, call_id, version, data)
        conn.execute(sql, params, prepare=True)
        return
    if again:
        columns = list(zip(*rows, strict=True))
        skip = _INSERT.replace("{s}", schema) + " ON CONFLICT (session_id, seq) DO NOTHING"
        conn.execute(skip.encode(), (host, *map(list, columns)))
        return
    copy = _COPY.replace("{s}", schema).encode()
    with conn.cursor() as cursor, cursor.copy(copy) as stream:
        for session_id, seq, ts, type_, turn_id, call_id, version, data in rows:
            stream.write_row((session_id, seq, host, ts, type_, turn_id, call_id, version, data))


VALUES_MAX: Final = 8
"""At most this many rows are inserted by a prepared multi-row ``INSERT`` (one prepared
statement per count, kept by the connection), more by ``COPY``."""


@functools.lru_cache(maxsize=256)
def _values_sql(schema: str, count: int, again: bool) -> bytes:
    sql = _VALUES.replace("{s}", schema) + ", ".join([_ROW] * count)
    if again:
        sql += " ON CONFLICT (session_id, seq) DO NOTHING"
    return sql.encode()


@functools.lru_cache(maxsize=256)
def values_sql(schema: str, count: int) -> bytes:
    """The multi-row ``INSERT`` of ``count`` rows with libpq's numbered parameters
    (``$1``, nine a row): the statement the event loop prepares (``_postgres_loop``)."""
    rows = (
        "(" + ", ".join(f"${row * 9 + column}" for column in range(1, 10)) + ")"
        for row in range(count)
    )
    return (_VALUES.replace("{s}", schema) + ", ".join(rows)).encode()


def lock_host(conn: Connection, database: PostgresDatabase, host: str) -> bool:
    """Take ``host``'s advisory lock on ``conn`` (held until unlocked or disconnected);
    False when another connection holds it."""
    row = conn.execute(
        "SELECT pg_try_advisory_lock(hashtext(%s), hashtext(%s))",
        (f"clearance:{database.schema}", host),
    ).fetchone()
    return bool(row and row[0])


def unlock_host(conn: Connection, database: PostgresDatabase, host: str) -> None:
    conn.execute(
        "SELECT pg_advisory_unlock(hashtext(%s), hashtext(%s))",
        (f"clearance:{database.schema}", host),
    )


def open_host(conn: Connection, schema: str, host: str, *, opening: bool) -> tuple[int, int]:
    """Close ``host``'s unfinished calls as ``interrupted`` and start its next generation,
    in one transaction; ``(generation, calls closed)``. The caller holds the host's lock.

    Args:
        opening: the host itself is opening (record its process and machine).
    """
    with conn.transaction():
        conn.execute(
            f"INSERT INTO {schema}.hosts (host_id) VALUES (%s) ON CONFLICT DO NOTHING", (host,)
        )
        row = conn.execute(
            f"SELECT generation, scan_from FROM {schema}.hosts WHERE host_id = %s FOR UPDATE",
            (host,),
        ).fetchone()
        assert row is not None
        generation, scan_from = int(row[0]), int(row[1])
        starts = conn.execute(_OPEN_STARTS.replace("{s}", schema), (host, scan_from)).fetchall()
        asked = conn.execute(_OPEN_ASKS.replace("{s}", schema), (host, scan_from)).fetchall()
        ends: list[PgRow] = []
        last: dict[str, int] = {}
        for open_row, ender in [
            *((start, interrupted_end) for start in starts),
            *((ask, asked_end) for ask in asked),
        ]:
            session_id = open_row[1]
            if session_id not in last:
                top = conn.execute(
                    f"SELECT max(seq) FROM {schema}.events WHERE session_id = %s", (session_id,)
                ).fetchone()
                last[session_id] = int(top[0]) if top and top[0] is not None else 0
            last[session_id] += 1
            end = ender(event_from_pg(open_row[1:]))
            ends.append(
                (
                    session_id,
                    last[session_id],
                    end.ts,
                    end.type,
                    end.turn_id,
                    end.call_id,
                    end.version,
                    encode_data(end.data),
                )
            )
        if ends:
            insert_rows(conn, schema, host, ends)
        _close_waiting_asks(conn, schema, host)
        # Nothing of this host before here is left open; its later rows get larger ids
        # (it writes only while holding the lock, which the caller holds now).
        top_id = conn.execute(f"SELECT COALESCE(max(id), 0) FROM {schema}.events").fetchone()
        bookmark = int(top_id[0]) + 1 if top_id else 1
        if opening:
            conn.execute(
                f"UPDATE {schema}.hosts SET generation = %s, scan_from = %s, hostname = %s, "
                "pid = %s, opened_at = %s WHERE host_id = %s",
                (generation + 1, bookmark, socket.gethostname(), os.getpid(), time.time(), host),
            )
        else:
            conn.execute(
                f"UPDATE {schema}.hosts SET generation = %s, scan_from = %s WHERE host_id = %s",
                (generation + 1, bookmark, host),
            )
    return generation + 1, len(starts) + len(asked)


def _close_waiting_asks(conn: Connection, schema: str, host: str) -> None:
    """Close, ``host gone``, the pending asks that calls of ``host`` waited on: no process
    runs the host now (the caller holds its lock), so none of those calls waits any more.
    A paused call's ask (no lease) stays open: it outlives its process on purpose."""
    rows = conn.execute(
        f"SELECT ask_id, body FROM {schema}.asks WHERE status = 'pending'"
    ).fetchall()
    for ask_id, body in rows:
        raw = json.loads(body)
        if raw.get("host") != host or not raw.get("instance"):
            continue
        raw.update(status="closed", closed_why="host gone")
        conn.execute(
            f"UPDATE {schema}.asks SET status = 'closed', body = %s "
            "WHERE ask_id = %s AND status = 'pending' AND body = %s",
            (json.dumps(raw, ensure_ascii=True, sort_keys=True), ask_id, body),
        )


def close_host(conn: Connection, schema: str, host: str) -> None:
    """Record a clean close: where the next recovery starts looking (the first start still
    open, or past everything), and that no process runs the host."""
    with conn.transaction():
        row = conn.execute(
            f"SELECT scan_from FROM {schema}.hosts WHERE host_id = %s", (host,)
        ).fetchone()
        scan_from = int(row[0]) if row else 0
        first = conn.execute(
            f"SELECT min(id) FROM ({_OPEN_STARTS.replace('{s}', schema)}) AS open_starts",
            (host, scan_from),
        ).fetchone()
        if first is None or first[0] is None:
            top = conn.execute(f"SELECT COALESCE(max(id), 0) FROM {schema}.events").fetchone()
            bookmark = int(top[0]) + 1 if top else scan_from
        else:
            bookmark = int(first[0])
        conn.execute(
            f"UPDATE {schema}.hosts SET scan_from = %s, pid = NULL WHERE host_id = %s",
            (bookmark, host),
        )


def recover_stopped_host(database: PostgresDatabase, host: str) -> int:
    """Close the unfinished calls of a host that is not running (``clearance store
    recover --host ID``); how many were closed.

    Raises:
        JournalError: no such host in the journal, or it is running (a process holds its
            lock: stop it first, or let it recover itself when it restarts).
        StoreError: the database is unreachable.
    """
    database.migrate()
    conn = database.connect()
    try:
        return _recover(conn, database, host)
    except ConnectionLost as exc:
        raise database.unavailable("cannot recover", exc) from None
    except DatabaseError as exc:
        raise StoreError(
            f"{database.label} refused the recovery: {exc}", store=database.label
        ) from None
    finally:
        conn.close()


def _recover(conn: Connection, database: PostgresDatabase, host: str) -> int:
    known = conn.execute(
        f"SELECT 1 FROM {database.schema}.hosts WHERE host_id = %s", (host,)
    ).fetchone()
    if known is None:
        raise JournalError(f"no host {host!r} has written to {database.label}")
    if not lock_host(conn, database, host):
        raise JournalError(
            f"host {host!r} is running (a process writing to {database.label} holds its "
            "lock); stop it first, or let it close its own calls when it restarts"
        )
    try:
        _, closed = open_host(conn, database.schema, host, opening=False)
    finally:
        unlock_host(conn, database, host)
    return closed
