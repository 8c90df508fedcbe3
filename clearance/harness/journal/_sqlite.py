"""``SqliteJournal``: the embedded durable journal (stdlib ``sqlite3``, WAL, one writer).

This module is the event loop's side: ``append`` encodes the event on the caller's side
(so later changes to its ``data`` cannot leak in), queues it for the writer thread
(``_sqlite_writer``), and, when the durability asks for it, awaits the commit without
blocking the event loop. With ``"normal"`` durability a start is written to the start log
(``_start_log``) before ``append`` returns instead. Opening recovers from a crash
(``_sqlite_recovery``); the file's schema is in ``_sqlite_schema``.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import logging
import os
import sqlite3
import weakref
from collections import deque
from collections.abc import Awaitable
from pathlib import Path

import anyio
import anyio.to_thread

from clearance._limits import storable
from clearance._text import printable
from clearance.errors import JournalError
from clearance.harness.journal._durable import Durability, FileLock, check_durability
from clearance.harness.journal._event import JournalEvent, encode_data
from clearance.harness.journal._sqlite_read import read_sqlite, select
from clearance.harness.journal._sqlite_recovery import recover
from clearance.harness.journal._sqlite_schema import Row, connect
from clearance.harness.journal._sqlite_writer import MAX_PENDING, Control, Waiter, Writer
from clearance.harness.journal._start_log import StartLog, open_start_log, row_line

__all__ = ["SqliteJournal"]

_log = logging.getLogger("clearance")

# Non-start records kept for the next start's log write are trimmed of committed ones
# once there are this many.
_UNLOGGED_TRIM = 256


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
            in another writer, or cannot be written, or its start log cannot be read. A
            start-log line that is not a record the journal can restore is reported and
            set aside in ``<path>-starts.rejected``; the other records are restored.
    """

    def __init__(self, path: str | os.PathLike[str], *, durability: Durability = "normal") -> None:
        self.path = Path(path)
        self.durability = check_durability(durability)
        self._closed = False
        # "normal": every record since the last start written to the start log, for the
        # next start to write with it (those already committed are skipped).
        self._unlogged: deque[Row] = deque()
        # Everything that must be one per database goes by the file's real path: a second
        # writer through a symlink or another spelling (./x/../db) meets the same lock,
        # and a crash's start log is found whichever name the next open uses.
        real = Path(os.path.realpath(self.path))
        self._lock = FileLock(Path(f"{real}.lock"))
        log_path = Path(f"{real}-starts")
        try:
            db = connect(real, durability)
            try:
                self._seq, scan_from = recover(db, self.path, log_path)
                self._start_log: StartLog | None = open_start_log(log_path, durability)
            except BaseException:
                db.close()
                raise
        except BaseException:
            self._lock.release()
            raise
        self._writer = Writer(
            db, self.path, start_log=self._start_log, committed=self._seq, scan_from=scan_from
        )
        self._writer.start()
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
        waiting = self.append_now(event)
        if waiting is not None:
            await waiting
        return event

    def append_now(self, event: JournalEvent) -> Awaitable[None] | None:
        """:meth:`append` without a coroutine where no wait is needed: ``None`` once the
        event is recorded as the durability says, else an awaitable that waits for its
        commit (the event is queued already, and is committed even if the waiter is
        cancelled).

        Raises:
            JournalError: as :meth:`append` (the awaitable raises it for a failed commit).
        """
        writer = self._writer
        if self._closed or writer.failure is not None:
            raise JournalError(str(writer.failure or f"{self.path}: the journal is closed"))
        try:
            data = encode_data(event.data)
        except (TypeError, ValueError) as exc:
            raise JournalError(f"cannot encode a {event.type} record: {exc}") from None
        if not _ids_storable(event):
            # Refused here, for this record alone: the writer would fail on it (and the
            # start log would hold it for every later open). A model chooses call ids.
            raise JournalError(
                f"cannot record a {printable(event.type)} record: "
                "an id holds a NUL or a lone surrogate"
            )
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
        pending = writer.pending
        if self.durability == "normal":
            self._unlogged.append(row)
            if len(pending) < MAX_PENDING:
                if event.type != "tool_started":
                    pending.append((row, None))
                    if len(self._unlogged) > _UNLOGGED_TRIM:
                        self._trim_unlogged()
                    if writer.idle:
                        writer.wake.set()
                    return None
                if self._log_start(row):
                    if writer.idle:
                        writer.wake.set()
                    return None
        elif self.durability == "off" and len(pending) < MAX_PENDING:
            pending.append((row, None))
            if writer.idle:
                writer.wake.set()
            return None
        waiter = Waiter()
        writer.put((row, waiter))
        return _committed(waiter)

    def _trim_unlogged(self) -> None:
        unlogged, committed = self._unlogged, self._writer.committed
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
        data = "".join(map(row_line, self._unlogged)).encode("ascii")
        # One write of a few kilobytes into the page cache, on the event loop thread:
        # a couple of microseconds (see write_holding_gil), no fsync, no waiting for the
        # writer thread; it does not block the loop in any meaningful way. The writer
        # holds the lock only to truncate the file or swap in its replacement.
        with start_log.lock:
            try:
                start_log.write(start_log.fd, data)
            except OSError as exc:
                start_log.mark_broken(exc)
                return False
            start_log.size += len(data)
            # Queued under the lock: a replacement of the log (which carries over the
            # queued rows it holds) then sees every row the log holds.
            self._writer.pending.append((row, None))
            start_log.logged = row[0]
        self._unlogged.clear()
        return True

    async def flush(self) -> None:
        """Wait until every record appended so far is committed.

        Raises:
            JournalError: a commit failed.
        """
        if not self._closed:
            await self._writer.run_after_commits(None)
        if self._writer.failure is not None:
            raise JournalError(str(self._writer.failure))

    async def aclose(self) -> None:
        """Commit what is queued, stop the writer and close the file (idempotent)."""
        if self._closed:
            return
        self._closed = True
        _OPEN.discard(self)
        self._writer.stop(self._seq)  # commits everything queued before it, then stops
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._writer.join)
        self._lock.release()

    def close(self) -> None:
        """:meth:`aclose` for synchronous code (blocks until the writer has stopped)."""
        if self._closed:
            return
        self._closed = True
        _OPEN.discard(self)
        self._writer.stop(self._seq)
        self._writer.join()
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
            return select(db, session_id=session_id, call_id=call_id)

        writer = self._writer
        if not self._closed and writer.is_alive():
            future: concurrent.futures.Future[list[JournalEvent]] = concurrent.futures.Future()
            writer.put(Control(query, future=future))
            while True:
                try:
                    return future.result(timeout=0.25)
                except concurrent.futures.TimeoutError:
                    if not writer.is_alive():  # closed meanwhile
                        break
        return read_sqlite(self.path, session_id=session_id, call_id=call_id)


def _ids_storable(event: JournalEvent) -> bool:
    """Whether the event's text columns are text every store holds (see ``storable``)."""
    for value in (event.type, event.session_id, event.turn_id, event.call_id):
        if type(value) is str and not storable(value):
            return False
    return True


async def _committed(waiter: Waiter) -> None:
    """Wait for a queued record's commit.

    Raises:
        JournalError: the commit failed.
    """
    # Once queued the record will be committed; a cancellation must not make the caller
    # believe otherwise, so it takes effect after the commit (see Journal).
    with anyio.CancelScope(shield=True):
        await waiter.done.wait()
    if waiter.error is not None:
        raise JournalError(str(waiter.error))


# Journals still open at interpreter exit commit what is queued (the writer is a daemon).
_OPEN: weakref.WeakSet[SqliteJournal] = weakref.WeakSet()


@atexit.register
def _close_open_journals() -> None:
    for journal in list(_OPEN):
        try:
            journal.close()
        except Exception:  # pragma: no cover - best effort at exit
            _log.exception("closing %r at exit failed", journal)
