"""``SqliteJournal``: the embedded durable journal (stdlib ``sqlite3``, WAL, one writer).

One thread owns the connection and takes events from a queue; ``append`` encodes the
event on the caller's side (so later changes to its ``data`` cannot leak in), queues it,
and, when the durability asks for it, awaits the commit without blocking the event loop:
the writer wakes the waiting task through the loop's own ``run_sync_soon``. The writer
commits whatever is queued in one transaction, so concurrent calls share commits.

The start log (``<path>-starts`` beside the real file, ``"normal"`` durability only) is
what lets ``append("tool_started")`` return without waiting for the writer: before it
returns, the start and every record before it not yet committed are written to that file
with one ``write`` (one JSON array per line: the row's columns, ``data`` last as raw JSON). A
process crash cannot lose the operating system's copy of either file, so the next open
restores the rows the database lacks; the database and the log together always hold
every record up to the last start, so ``seq`` has no gaps. The writer truncates the log
once all it holds is committed (or, when records keep coming, replaces it with a file
holding only what is not), and a clean close removes it.

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
import ctypes
import errno
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
from json.encoder import encode_basestring_ascii
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
# The writer truncates the start log, once all it holds is committed, every this many
# commits (a truncation frees pages: not worth it per commit); at this size it does not
# wait that long, and if records keep coming it replaces the log by one holding only the
# uncommitted rows.
_LOG_EVERY = 64
_LOG_MAX = 1 << 20
# Non-start records kept for the next start's log write are trimmed of committed ones
# once there are this many.
_UNLOGGED_TRIM = 256

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


class _StartLog:
    """The open start log: written by the event loop, truncated by the writer thread."""

    __slots__ = (
        "base",
        "broken",
        "fd",
        "lock",
        "logged",
        "path",
        "size",
        "truncated_at",
        "write",
    )

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()  # writes vs truncation and replacement
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.ftruncate(self.fd, 0)  # its rows were restored by the open
        except OSError:
            os.close(self.fd)
            raise
        self.size = 0
        self.logged = 0
        """The highest ``seq`` written (every earlier row is written or committed)."""
        self.truncated_at = 0
        """The writer's commit count at the last truncation or replacement."""
        self.base = 0
        """The size right after the last replacement (0 after a truncation)."""
        self.broken = False
        """A write failed: the log is no longer written (it is still truncated)."""
        self.write: Callable[[int, bytes], object] = _append


class SqliteJournal:
    """The embedded durable journal: a SQLite file in WAL mode, written by one thread.

    Durability (``append`` never blocks the event loop):

    - ``"normal"`` (default). No ``append`` waits for the writer thread. Before
      ``append("tool_started")`` returns, that record and every record appended before
      it are in the database or in the start log (``<path>-starts``, one ``write`` into
      the operating system's page cache, no fsync), so a handler never runs
      unrecorded. The writer commits records in the background, in order, within a few
      milliseconds; :meth:`flush` and :meth:`aclose` wait for them. SQLite runs with
      ``synchronous=NORMAL``: a commit is in the operating system, not yet on disk.
      *Process crash* (kill -9, a fatal error): the start of every handler that ran
      survives, with everything recorded before it; the next open restores from the
      start log what the database lacks and marks each started call without an end
      ``interrupted`` (rule R7). Records appended after the last start and not yet
      committed (the end of a call that had just finished, decisions of calls that
      never ran, a few milliseconds' worth) can be lost. *Power loss or OS crash*: no
      fsync, so the last records can be lost from both files; the database stays
      consistent and recovery works the same way.
    - ``"full"``. Every ``append`` returns after its commit, with ``synchronous=FULL``
      (an fsync per commit; concurrent calls share commits). Every record whose
      ``append`` returned survives a power loss. Costs a disk flush per event.
    - ``"off"``. ``append`` does not wait and there is no start log; records are
      committed in the background as in ``"normal"``. A crash can also lose a
      ``tool_started`` whose handler ran.

    In every mode at most 10,000 records wait for the writer: beyond that ``append``
    waits for a commit, so memory, and what a crash can lose, stay bounded. In
    ``"normal"``, if the start log cannot be written, ``tool_started`` waits for its
    commit instead. Readers see a record once it is committed; records a crash left only
    in the start log appear when the journal is next opened for writing.

    Opening the file creates or migrates the schema, restores the rows a crash left only
    in the start log, continues ``seq`` after both and appends an ``interrupted``
    ``tool_finished`` for every ``tool_started`` left without an end. One writer at a
    time: opening a file another writer holds raises
    :class:`~clearance.errors.JournalError` (an advisory lock on ``<real path>.lock``,
    where symlinks, ``.`` and ``..`` are resolved, so every name of the file meets the same
    lock; hard links are not detected); the start log (``<real path>-starts``) belongs to
    that writer.
    Readers (``clearance journal``, :func:`read_sqlite`) never block the writer.

    When a commit fails (disk full), every waiting ``append`` and every later one raises
    ``JournalError``, so calls are denied rather than run unrecorded (rule R1); reopen
    the journal to continue.

    Args:
        path: the database file; created (mode 0600) when missing.
        durability: ``"normal"``, ``"full"`` or ``"off"`` as above.

    Raises:
        JournalError: the file is not a SQLite database, holds a newer schema, is open
            in another writer, or cannot be written, or its start log is corrupt (a line
            other than a torn last one is not a record).
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
        # Written by the writer after each commit; read by the event loop as a hint.
        self._committed = 0
        self._commits = 0
        # "normal": every record since the last start written to the start log, for the
        # next start to write with it (those already committed are skipped).
        self._unlogged: deque[Row] = deque()
        self._start_log: _StartLog | None = None
        # Everything that must be one per database goes by the file's real path: a second
        # writer through a symlink or another spelling (./x/../db) meets the same lock,
        # and a crash's start log is found whichever name the next open uses.
        real = Path(os.path.realpath(self.path))
        self._lock = _FileLock(Path(f"{real}.lock"))
        log_path = Path(f"{real}-starts")
        try:
            self._db = _connect(real, durability)
            try:
                self._seq, self._scan_from = _open(self._db, self.path, log_path)
                self._committed = self._seq
                self._start_log = _open_start_log(log_path, durability)
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
        if self.durability == "normal":
            self._unlogged.append(row)
            if len(self._pending) < _MAX_PENDING:
                if event.type != "tool_started":
                    self._pending.append((row, None))
                    if len(self._unlogged) > _UNLOGGED_TRIM:
                        self._trim_unlogged()
                    if self._idle:
                        self._wake.set()
                    return event
                if self._log_start(row):
                    if self._idle:
                        self._wake.set()
                    return event
        elif self.durability == "off" and len(self._pending) < _MAX_PENDING:
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

    def _trim_unlogged(self) -> None:
        unlogged, committed = self._unlogged, self._committed
        while unlogged and unlogged[0][0] <= committed:
            unlogged.popleft()

    def _log_start(self, row: Row) -> bool:
        """Write ``row`` (a start, last in ``_unlogged``) and the uncommitted records
        before it to the start log and queue it; False when the log cannot be written
        (then the caller waits for the commit instead)."""
        start_log = self._start_log
        if start_log is None or start_log.broken:
            return False
        self._trim_unlogged()
        data = "".join(map(_line, self._unlogged)).encode("ascii")
        # One write of a few kilobytes into the page cache, on the event loop thread:
        # a couple of microseconds (see _append), no fsync, no waiting for the writer
        # thread; it does not block the loop in any meaningful way. The writer holds the
        # lock only to truncate the file or swap in its replacement.
        with start_log.lock:
            try:
                start_log.write(start_log.fd, data)
            except OSError as exc:
                self._start_log_failed(start_log, exc)
                return False
            start_log.size += len(data)
            # Queued under the lock: a replacement of the log (which carries over the
            # queued rows it holds) then sees every row the log holds.
            self._pending.append((row, None))
            start_log.logged = row[0]
        self._unlogged.clear()
        return True

    def _start_log_failed(self, start_log: _StartLog, exc: OSError) -> None:
        """Stop writing the start log (under its lock): later starts wait for their
        commit, as with ``"full"`` but without the fsync. What it holds stays until
        committed."""
        start_log.broken = True
        try:
            os.ftruncate(start_log.fd, start_log.size)  # cut off a partial line
        except OSError:
            pass  # a torn last line is ignored at the next open
        log.warning(
            "%s: cannot write the start log (%s); tool_started now waits for its commit",
            start_log.path,
            exc.strerror,
        )

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
                if self._start_log is not None:
                    self._tend_start_log(self._start_log)
        except BaseException as exc:  # a bug: fail every later append rather than hang
            self._failure = JournalError(f"{self.path}: the journal writer stopped: {exc!r}")
            log.exception("the journal writer for %s stopped", self.path)
            self._close_start_log()
            self._drain([])
            raise

    def _commit(self, rows: list[Row], waiters: list[_Waiter]) -> None:
        if rows and self._failure is None:
            db = self._db
            try:
                db.execute("BEGIN IMMEDIATE")
                db.executemany(_INSERT, rows)
                db.execute("COMMIT")
                self._committed = rows[-1][0]
                self._commits += 1
            except sqlite3.Error as exc:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                self._failure = JournalError(f"{self.path}: cannot write the journal: {exc}")
                log.error("journal write failed (%d records lost): %s", len(rows), exc)
        if waiters:
            _wake(waiters, self._failure)

    def _tend_start_log(self, start_log: _StartLog) -> None:
        """Keep the start log small (called when every record taken is committed)."""
        if not start_log.size or self._failure is not None:
            return  # after a failed commit the log must stay for the next open
        if start_log.logged <= self._committed:
            if start_log.size < _LOG_MAX and self._commits - start_log.truncated_at < _LOG_EVERY:
                return
            start_log.truncated_at = self._commits
            with start_log.lock:
                if start_log.logged <= self._committed:  # no start written meanwhile
                    try:
                        os.ftruncate(start_log.fd, 0)
                    except OSError as exc:
                        log.warning("%s: cannot truncate: %s", start_log.path, exc.strerror)
                    else:
                        start_log.size = start_log.base = 0
                    return
        # A replacement copies what is not committed: with a large backlog, wait until
        # the log is several times that, so that copying stays a fraction of writing.
        if start_log.size >= max(_LOG_MAX, 4 * start_log.base):
            start_log.truncated_at = self._commits
            self._replace_start_log(start_log)

    def _replace_start_log(self, start_log: _StartLog) -> None:
        """Replace the start log by a file holding only the rows not committed yet.

        For when starts keep coming faster than commits end, so that no moment has the
        whole log committed. Every row not committed is queued (everything taken from the
        queue is committed), so the queue says what to carry over. The bulk is written
        outside the lock; under it, only what was logged meanwhile, the rename and the
        swap, so that the event loop never waits long for its next start.
        """
        with start_log.lock:
            logged = start_log.logged
            queued = list(self._pending)  # one C-level copy
        carried = [item[0] for item in queued if type(item) is tuple and item[0][0] <= logged]
        tmp = Path(f"{start_log.path}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_TRUNC, 0o600)
        except OSError as exc:
            log.warning("%s: cannot replace the start log: %s", start_log.path, exc.strerror)
            return
        old = fd
        try:
            size = _write_all(fd, "".join(map(_line, carried)).encode("ascii"))
            with start_log.lock:
                if start_log.logged > logged:  # starts written since: their rows are queued
                    later = start_log.logged
                    size += _write_all(
                        fd,
                        "".join(
                            _line(item[0])
                            for item in list(self._pending)
                            if type(item) is tuple and logged < item[0][0] <= later
                        ).encode("ascii"),
                    )
                os.replace(tmp, start_log.path)
                old, start_log.fd, start_log.size = start_log.fd, fd, size
                start_log.base = size
        except OSError as exc:
            log.warning("%s: cannot replace the start log: %s", start_log.path, exc.strerror)
            tmp.unlink(missing_ok=True)
        finally:
            os.close(old)  # the replaced file, or the new one when replacing failed

    def _close_start_log(self) -> None:
        """Close the start log; remove it when everything it held is committed."""
        start_log = self._start_log
        if start_log is None:
            return
        with start_log.lock:
            if start_log.fd < 0:
                return
            os.close(start_log.fd)
            start_log.fd = -1
            start_log.broken = True
            if self._failure is None:
                try:
                    start_log.path.unlink(missing_ok=True)
                except OSError as exc:
                    log.warning("%s: cannot remove: %s", start_log.path, exc.strerror)

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
            self._close_start_log()
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


# --- the start log -------------------------------------------------------------------------


def _line(row: Row) -> str:
    """A row as one start-log line: a JSON array of the columns, ``data`` embedded as is."""
    seq, ts, type_, session_id, turn_id, call_id, version, data = row
    try:
        if type(ts) is float and ts - ts == 0.0 and type(version) is int:  # finite
            return (
                f"[{seq},{ts!r},{encode_basestring_ascii(type_)},"
                f"{encode_basestring_ascii(session_id)},"
                f"{'null' if turn_id is None else encode_basestring_ascii(turn_id)},"
                f"{'null' if call_id is None else encode_basestring_ascii(call_id)},"
                f"{version},{data}]\n"
            )
    except TypeError:  # an id that is not a string: the general encoder handles it
        pass
    return f"{encode_data(row[:7])[:-1]},{data}]\n"


def _parse_line(line: bytes) -> Row:
    """A start-log line back as the row it was written from."""
    value = json.loads(line)
    if not (isinstance(value, list) and len(value) == 8 and type(value[0]) is int):
        raise ValueError("not a row")
    seq, ts, type_, session_id, turn_id, call_id, version, data = value
    if not isinstance(ts, int | float):
        raise ValueError("ts is not a number")
    # Encoded by the same encoder as on append: the same text as the row had.
    return (seq, float(ts), type_, session_id, turn_id, call_id, version, encode_data(data))


def _read_start_log(path: Path) -> list[Row]:
    """The rows of a start log (none when it is missing); a torn last line is skipped.

    Raises:
        JournalError: the file cannot be read or another line is not a row.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise JournalError(f"{path}: cannot read the start log: {exc.strerror}") from None
    lines = raw.splitlines(keepends=True)
    rows: list[Row] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rows.append(_parse_line(line))
        except (ValueError, TypeError) as exc:
            if number == len(lines) and not line.endswith(b"\n"):
                log.warning("%s: ignoring a line torn by a crash", path)
                break
            raise JournalError(
                f"{path}:{number}: not a start-log record ({exc}); move the file away to "
                "open the journal without it"
            ) from None
    return rows


def _write_all(fd: int, data: bytes) -> int:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    return len(data)


def _libc_write() -> Callable[[int, bytes, int], int] | None:
    """libc's ``write`` called through ``ctypes.PyDLL``, which keeps the GIL during the
    call; None where no libc is reachable that way (Windows)."""
    try:
        write = ctypes.PyDLL(None, use_errno=True).write
    except (OSError, TypeError, AttributeError):  # pragma: no cover - not POSIX
        return None
    write.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t)
    write.restype = ctypes.c_ssize_t
    return write


_WRITE_HOLDING_GIL = _libc_write()
# Larger writes (a burst of records, a large result) release the GIL as usual.
_HOLD_GIL_UP_TO = 64 * 1024


def _append(fd: int, data: bytes) -> None:
    """Write ``data`` whole, from the event loop thread.

    A small write keeps the GIL. The write itself is a copy into the page cache (a few
    microseconds), but ``os.write`` releases the GIL around it, and the journal's writer
    thread, next to a busy event loop, is nearly always waiting for the GIL: it takes it
    and the loop waits for its Python work. Measured on a 2-vCPU VM: 10 us per start at
    the median with ``os.write``, 2 us holding the GIL.
    """
    write = _WRITE_HOLDING_GIL
    if write is None or len(data) > _HOLD_GIL_UP_TO:
        _write_all(fd, data)
        return
    while data:
        written = write(fd, data, len(data))
        if written < 0:
            error = ctypes.get_errno()
            if error == errno.EINTR:
                continue
            raise OSError(error, os.strerror(error))
        data = data[written:]


def _open_start_log(path: Path, durability: Durability) -> _StartLog | None:
    """After recovery: an empty start log for ``"normal"``, none (and no file) otherwise.

    Raises:
        JournalError: the file cannot be created, truncated or removed.
    """
    try:
        Path(f"{path}.tmp").unlink(missing_ok=True)  # a replacement a crash interrupted
        if durability == "normal":
            return _StartLog(path)
        path.unlink(missing_ok=True)
    except OSError as exc:
        raise JournalError(f"{path}: cannot open the start log: {exc.strerror}") from None
    return None


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


def _open(db: sqlite3.Connection, path: Path, start_log: Path) -> tuple[int, int]:
    """Migrate, restore the start log's rows, recover; return ``(last seq, scan_from)``.

    The start log is left for the caller to empty once this has committed.
    """
    logged = _read_start_log(start_log)
    try:
        _migrate(db, path)
        db.execute("BEGIN IMMEDIATE")
        try:
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
            scan_from = int(meta.get("scan_from", "0"))
            restored = 0
            if logged:
                # Rows whose commit the crash lost; the others are already there.
                before = db.total_changes
                db.executemany(_INSERT.replace("INSERT", "INSERT OR IGNORE"), logged)
                restored = db.total_changes - before
                scan_from = min(scan_from, min(row[0] for row in logged))
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
    if restored:
        log.warning("%s: restored %d record(s) from %s", path, restored, start_log.name)
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
