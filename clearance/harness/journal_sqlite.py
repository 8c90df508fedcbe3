"""``SqliteJournal``: the embedded durable journal (stdlib ``sqlite3``, WAL, one writer).

One thread owns the connection and takes events from a queue; ``append`` encodes the
event on the caller's side (so later changes to its ``data`` cannot leak in), queues it,
and, when the durability asks for it, awaits the commit without blocking the event loop:
the writer wakes the waiting task through the loop's own ``run_sync_soon``. The writer
commits whatever is queued in one transaction, so concurrent calls share commits.

Schema (versioned from the first release; ``MIGRATIONS`` lists every step)::

    meta(key TEXT PRIMARY KEY, value TEXT)          schema_version, scan_from, created_at
    events(seq INTEGER PRIMARY KEY, ts REAL, type TEXT, session_id TEXT, turn_id TEXT,
           call_id TEXT, version INTEGER, data TEXT)   -- data: the record's JSON
    indexes: (session_id, call_id), (call_id), (seq) WHERE type = 'tool_started'

``scan_from`` bounds crash recovery: no ``tool_started`` before it is left open, so an
open reads only the records written since the last clean close.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import json
import logging
import os
import sqlite3
import threading
import time
import urllib.parse
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import anyio
import anyio.lowlevel

from clearance.errors import JournalError
from clearance.harness.journal import (
    Durability,
    JournalEvent,
    _check_durability,
    _FileLock,
    _interrupted,
    encode_data,
)

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SqliteJournal", "is_sqlite_file", "read_sqlite"]

log = logging.getLogger("clearance")

SCHEMA_VERSION: Final = 1
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
)
"""``(version, statements)``: each step runs in one transaction and sets ``schema_version``."""

_INSERT = "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
_COLUMNS = "seq, ts, type, session_id, turn_id, call_id, version, data"
_OPEN_STARTS = """
    SELECT {columns} FROM events AS s
    WHERE s.type = 'tool_started' AND s.seq >= ?
      AND NOT EXISTS (
        SELECT 1 FROM events AS f
        WHERE f.session_id = s.session_id AND f.call_id IS s.call_id
          AND f.type = 'tool_finished' AND f.seq > s.seq)
    ORDER BY s.seq
"""
_SQLITE_MAGIC = b"SQLite format 3\x00"
_BATCH = 4096
_LINGER = 0.002
# Records queued without a waiter, at most; beyond it append waits for the writer (which a
# busy event loop can starve of the GIL), so memory and what a crash can lose stay bounded.
_MAX_PENDING = 10_000

Row = tuple[int, float, str, str, str | None, str | None, int, str]


class _Waiter:
    """A task waiting for its event's commit, and the loop to wake it in."""

    __slots__ = ("done", "error", "token")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.token = anyio.lowlevel.current_token()
        self.error: JournalError | None = None


class _Control:
    """Work for the writer thread after everything queued before it is committed."""

    __slots__ = ("fn", "future", "waiter")

    def __init__(
        self,
        fn: Callable[[sqlite3.Connection], Any] | None,
        *,
        waiter: _Waiter | None = None,
        future: concurrent.futures.Future[Any] | None = None,
    ) -> None:
        self.fn = fn
        self.waiter = waiter
        self.future = future


_STOP: Final = "stop"


class SqliteJournal:
    """The embedded durable journal: a SQLite file in WAL mode, written by one thread.

    Durability (``append`` never blocks the event loop; it awaits the writer thread):

    - ``"normal"`` (default). ``append("tool_started")`` returns after that record and
      every record appended before it are committed, so a handler never runs unrecorded.
      Other records are committed by the writer in the background, in order, usually
      within a millisecond; :meth:`flush` and :meth:`aclose` wait for them. SQLite runs
      with ``synchronous=NORMAL``: a commit is in the operating system, not yet on disk.
      *Process crash* (kill -9, a fatal error): every committed record survives; records
      still queued (ends of calls that had just finished, decisions of calls that never
      ran, a few milliseconds' worth) can be lost, and the next open marks each started
      call without an end ``interrupted`` (rule R7). *Power loss or OS crash*: the file
      stays consistent, but the last transactions before it can roll back (up to the
      last WAL checkpoint), which recovery handles the same way.
    - ``"full"``. Every ``append`` returns after its commit, with ``synchronous=FULL``
      (an fsync per commit; concurrent calls share commits). Every record whose
      ``append`` returned survives a power loss. Costs a disk flush per event.
    - ``"off"``. ``append`` does not wait; records are committed in the background as
      in ``"normal"``. A crash can also lose a ``tool_started`` whose handler ran.

    In every mode at most 10,000 records wait for the writer: beyond that ``append``
    waits for a commit, so memory, and what a crash can lose, stay bounded.

    Opening the file creates or migrates the schema, continues ``seq`` and appends an
    ``interrupted`` ``tool_finished`` for every ``tool_started`` left without an end.
    One writer at a time: opening a file another writer holds raises
    :class:`~clearance.errors.JournalError` (an advisory lock on ``<path>.lock``).
    Readers (``clearance journal``, :func:`read_sqlite`) never block the writer.

    When a commit fails (disk full), every waiting ``append`` and every later one raises
    ``JournalError``, so calls are denied rather than run unrecorded (rule R1); reopen
    the journal to continue.

    Args:
        path: the database file; created (mode 0600) when missing.
        durability: ``"normal"``, ``"full"`` or ``"off"`` as above.

    Raises:
        JournalError: the file is not a SQLite database, holds a newer schema, is open
            in another writer, or cannot be written.
    """

    def __init__(self, path: str | os.PathLike[str], *, durability: Durability = "normal") -> None:
        self.path = Path(path)
        self.durability = _check_durability(durability)
        self._closed = False
        self._failure: JournalError | None = None
        self._pending: deque[tuple[Row, _Waiter | None] | _Control | str] = deque()
        self._wake = threading.Event()
        self._idle = False
        self._urgent = False
        self._lock = _FileLock(Path(f"{self.path}.lock"))
        try:
            self._db = _connect(self.path, durability)
            try:
                self._seq, self._scan_from = _open(self._db, self.path)
            except BaseException:
                self._db.close()
                raise
        except BaseException:
            self._lock.release()
            raise
        self._thread = threading.Thread(
            target=self._run, name=f"clearance-journal:{self.path.name}", daemon=True
        )
        self._thread.start()
        _OPEN.add(self)

    def __repr__(self) -> str:
        return f"SqliteJournal({str(self.path)!r}, durability={self.durability!r})"

    # -- writing ------------------------------------------------------------------------

    async def append(self, event: JournalEvent) -> JournalEvent:
        """Record ``event``; assigns its ``seq`` and waits as the durability says.

        Raises:
            JournalError: the journal is closed, a commit failed, or the data cannot be
                encoded.
        """
        if self._closed or self._failure is not None:
            raise JournalError(str(self._failure or f"{self.path}: the journal is closed"))
        try:
            data = encode_data(event.data)
        except (TypeError, ValueError) as exc:
            raise JournalError(f"cannot encode a {event.type} record: {exc}") from None
        self._seq += 1
        event.seq = seq = self._seq
        row: Row = (
            seq,
            event.ts,
            event.type,
            event.session_id,
            event.turn_id,
            event.call_id,
            event.version,
            data,
        )
        if (
            self.durability == "off"
            or (self.durability == "normal" and event.type != "tool_started")
        ) and len(self._pending) < _MAX_PENDING:
            self._pending.append((row, None))
            if self._idle:
                self._wake.set()
            return event
        waiter = _Waiter()
        self._put((row, waiter))
        # Once queued the record will be committed; a cancellation must not make the
        # caller believe otherwise, so it takes effect after the commit (see Journal).
        with anyio.CancelScope(shield=True):
            await waiter.done.wait()
        if waiter.error is not None:
            raise JournalError(str(waiter.error))
        return event

    async def flush(self) -> None:
        """Wait until every record appended so far is committed.

        Raises:
            JournalError: a commit failed.
        """
        await self._control_async(None)
        if self._failure is not None:
            raise JournalError(str(self._failure))

    async def aclose(self) -> None:
        """Commit what is queued, stop the writer and close the file (idempotent)."""
        if self._closed:
            return
        self._closed = True
        _OPEN.discard(self)
        self._put(_STOP)  # the writer commits everything queued before it, then stops
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._thread.join)
        self._lock.release()

    def close(self) -> None:
        """:meth:`aclose` for synchronous code (blocks until the writer has stopped)."""
        if self._closed:
            return
        self._closed = True
        _OPEN.discard(self)
        self._put(_STOP)
        self._thread.join()
        self._lock.release()

    # -- reading ------------------------------------------------------------------------

    def events(
        self, *, session_id: str | None = None, call_id: str | None = None
    ) -> list[JournalEvent]:
        """Every record (of one session and/or call), in ``seq`` order.

        Synchronous: while the journal is open it waits for the writer to commit what is
        queued and runs the query on the writer's connection (milliseconds; do not call
        it per event from a busy event loop).
        """

        def query(db: sqlite3.Connection) -> list[JournalEvent]:
            return _select(db, session_id=session_id, call_id=call_id)

        if not self._closed and self._thread.is_alive():
            future: concurrent.futures.Future[list[JournalEvent]] = concurrent.futures.Future()
            self._put(_Control(query, future=future))
            while True:
                try:
                    return future.result(timeout=0.25)
                except concurrent.futures.TimeoutError:
                    if not self._thread.is_alive():  # closed meanwhile
                        break
        return read_sqlite(self.path, session_id=session_id, call_id=call_id)

    # -- the writer thread --------------------------------------------------------------

    async def _control_async(self, fn: Callable[[sqlite3.Connection], Any] | None) -> None:
        if self._closed:
            return
        waiter = _Waiter()
        self._put(_Control(fn, waiter=waiter))
        with anyio.CancelScope(shield=True):
            while not waiter.done.is_set() and self._thread.is_alive():
                with anyio.move_on_after(1):
                    await waiter.done.wait()

    def _put(self, item: tuple[Row, _Waiter | None] | _Control | str) -> None:
        """Queue work someone waits for: the writer takes it at once."""
        self._pending.append(item)
        self._urgent = True  # after the append: the writer resets it before it drains
        self._wake.set()

    def _run(self) -> None:
        # Records nobody waits for are not worth a thread switch each: while busy the
        # writer lingers up to _LINGER seconds to commit them together with the next
        # awaited record; an awaited record or a control item wakes it at once.
        pending, wake = self._pending, self._wake
        try:
            while True:
                if not pending:
                    self._idle = True
                    if not pending:
                        wake.wait()
                    self._idle = False
                wake.clear()
                if not self._urgent:
                    wake.wait(_LINGER)
                    wake.clear()
                self._urgent = False
                items = [pending.popleft() for _ in range(min(len(pending), _BATCH))]
                rows: list[Row] = []
                waiters: list[_Waiter] = []
                for n, item in enumerate(items):
                    if type(item) is tuple:
                        rows.append(item[0])
                        if item[1] is not None:
                            waiters.append(item[1])
                        continue
                    self._commit(rows, waiters)
                    rows, waiters = [], []
                    if item == _STOP:
                        self._shutdown(items[n + 1 :])
                        return
                    assert isinstance(item, _Control)
                    self._control(item)
                self._commit(rows, waiters)
        except BaseException as exc:  # a bug: fail every later append rather than hang
            self._failure = JournalError(f"{self.path}: the journal writer stopped: {exc!r}")
            log.exception("the journal writer for %s stopped", self.path)
            self._drain([])
            raise

    def _commit(self, rows: list[Row], waiters: list[_Waiter]) -> None:
        if rows and self._failure is None:
            db = self._db
            try:
                db.execute("BEGIN IMMEDIATE")
                db.executemany(_INSERT, rows)
                db.execute("COMMIT")
            except sqlite3.Error as exc:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                self._failure = JournalError(f"{self.path}: cannot write the journal: {exc}")
                log.error("journal write failed (%d records lost): %s", len(rows), exc)
        if waiters:
            _wake(waiters, self._failure)

    def _control(self, control: _Control) -> None:
        result: Any = None
        error: BaseException | None = None
        if control.fn is not None:
            try:
                result = control.fn(self._db)
            except BaseException as exc:
                error = exc
        if control.future is not None:
            if error is not None:
                control.future.set_exception(error)
            else:
                control.future.set_result(result)
        if control.waiter is not None:
            _wake([control.waiter], self._failure)

    def _shutdown(self, rest: list[Any]) -> None:
        """Record how far the next open must scan for open starts, then close."""
        try:
            if self._failure is None:
                first_open = self._db.execute(
                    "SELECT MIN(seq) FROM (" + _OPEN_STARTS.format(columns="s.seq") + ")",
                    (self._scan_from,),
                ).fetchone()[0]
                _set_meta(self._db, "scan_from", first_open or self._seq + 1)
        except sqlite3.Error as exc:
            log.warning("%s: could not record the recovery bookmark: %s", self.path, exc)
        finally:
            self._db.close()
            self._drain(rest)

    def _drain(self, items: list[Any]) -> None:
        """Wake everyone still queued (after a stop or a writer failure)."""
        error = self._failure or JournalError(f"{self.path}: the journal is closed")
        while True:
            if items:
                item = items.pop(0)
            elif self._pending:
                item = self._pending.popleft()
            else:
                return
            if type(item) is tuple and item[1] is not None:
                _wake([item[1]], error)
            elif isinstance(item, _Control):
                if item.future is not None:
                    item.future.set_exception(error)
                if item.waiter is not None:
                    _wake([item.waiter], error)


def _wake(waiters: Sequence[_Waiter], error: JournalError | None) -> None:
    """Set every waiter's event in its own event loop, one hop per loop."""
    by_loop: dict[int, tuple[Any, list[anyio.Event]]] = {}
    for waiter in waiters:
        waiter.error = error
        token = waiter.token
        entry = by_loop.get(id(token.native_token))
        if entry is None:
            by_loop[id(token.native_token)] = (token, [waiter.done])
        else:
            entry[1].append(waiter.done)
    for token, events in by_loop.values():
        try:
            token.backend_class.run_sync_soon(_set_all, (events,), token.native_token)
        except Exception:  # the loop is gone; nobody is waiting any more
            log.debug("journal waiter's event loop has finished")


def _set_all(events: list[anyio.Event]) -> None:
    for event in events:
        event.set()


# Journals still open at interpreter exit commit what is queued (the writer is a daemon).
_OPEN: weakref.WeakSet[SqliteJournal] = weakref.WeakSet()


@atexit.register
def _close_open_journals() -> None:
    for journal in list(_OPEN):
        try:
            journal.close()
        except Exception:  # pragma: no cover - best effort at exit
            log.exception("closing %r at exit failed", journal)


# --- opening ---------------------------------------------------------------------------


def _connect(path: Path, durability: Durability) -> sqlite3.Connection:
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
            log.warning("%s: WAL is not available here (journal_mode=%s)", path, mode)
        db.execute(f"PRAGMA synchronous = {'FULL' if durability == 'full' else 'NORMAL'}")
    except sqlite3.Error as exc:
        db.close()
        raise JournalError(f"{path}: not a usable SQLite database: {exc}") from None
    return db


def _open(db: sqlite3.Connection, path: Path) -> tuple[int, int]:
    """Migrate, recover; return ``(last seq, scan_from)``."""
    try:
        _migrate(db, path)
        db.execute("BEGIN IMMEDIATE")
        try:
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
            scan_from = int(meta.get("scan_from", "0"))
            seq = db.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0]
            starts = [
                _event(row)
                for row in db.execute(_OPEN_STARTS.format(columns=_sql_columns("s")), (scan_from,))
            ]
            rows: list[Row] = []
            for started in starts:
                seq += 1
                end = _interrupted(started)
                rows.append(
                    (
                        seq,
                        end.ts,
                        end.type,
                        end.session_id,
                        end.turn_id,
                        end.call_id,
                        end.version,
                        encode_data(end.data),
                    )
                )
            db.executemany(_INSERT, rows)
            scan_from = seq + 1
            _set_meta(db, "scan_from", scan_from)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
    except sqlite3.Error as exc:
        raise JournalError(f"{path}: cannot open the journal: {exc}") from None
    if starts:
        log.warning("%s: marked %d unfinished call(s) interrupted", path, len(starts))
    return seq, scan_from


def _migrate(db: sqlite3.Connection, path: Path) -> None:
    version = _schema_version(db, path)
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
                _set_meta(db, "created_at", time.time())
            _set_meta(db, "schema_version", target)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        version = target


def _schema_version(db: sqlite3.Connection, path: Path) -> int:
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


def _set_meta(db: sqlite3.Connection, key: str, value: object) -> None:
    db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, str(value)))


def _sql_columns(alias: str) -> str:
    return ", ".join(f"{alias}.{c.strip()}" for c in _COLUMNS.split(","))


def _event(row: Sequence[Any]) -> JournalEvent:
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


def _select(
    db: sqlite3.Connection,
    *,
    session_id: str | None = None,
    call_id: str | None = None,
    types: Sequence[str] | None = None,
    after_seq: int = 0,
    limit: int | None = None,
) -> list[JournalEvent]:
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
    sql = f"SELECT {_COLUMNS} FROM events WHERE {' AND '.join(where)} ORDER BY seq"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    return [_event(row) for row in db.execute(sql, params)]


# --- reading without writing ---------------------------------------------------------


def is_sqlite_file(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` starts with the SQLite file header."""
    try:
        with open(path, "rb") as fh:
            return fh.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC
    except OSError:
        return False


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
        version = _schema_version(db, p)
        if version == 0:
            raise JournalError(f"{p}: not a clearance journal (no schema version)")
        if version > SCHEMA_VERSION:
            raise JournalError(
                f"{p}: the journal has schema version {version}; this clearance reads up to "
                f"{SCHEMA_VERSION} (upgrade clearance)"
            )
        return _select(
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
