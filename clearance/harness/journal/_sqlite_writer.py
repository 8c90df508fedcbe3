"""The SQLite journal's writer thread: one thread owns the connection and commits what
the event loop queues.

``append`` queues each row on :attr:`Writer.pending`; the writer commits whatever is
queued in one transaction, so concurrent calls share commits. A row may carry a
:class:`Waiter`: a task waiting for its commit, woken through its loop's own
``run_sync_soon`` (the event loop never blocks). A :class:`Control` runs a function on the
connection once everything queued before it is committed. Between commits the writer
keeps the start log small (see ``_start_log``).
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import sqlite3
import threading
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, TypeAlias

import anyio
import anyio.lowlevel

from clearance._text import printable
from clearance.errors import JournalError
from clearance.harness.journal._sqlite_schema import INSERT, OPEN_STARTS, Row, set_meta
from clearance.harness.journal._start_log import StartLog, row_line, write_all

__all__ = [
    "LOG_EVERY",
    "LOG_MAX",
    "MAX_PENDING",
    "STOP",
    "Control",
    "Item",
    "Waiter",
    "Writer",
    "wake_waiters",
]

_log = logging.getLogger("clearance")

_BATCH = 4096
_LINGER = 0.002
MAX_PENDING: Final = 10_000
"""Records queued without a waiter, at most; beyond it ``append`` waits for the writer
(which a busy event loop can starve of the GIL), so memory and what a crash can lose stay
bounded."""
LOG_EVERY = 64
"""The writer truncates the start log, once all it holds is committed, every this many
commits (a truncation frees pages: not worth it per commit)."""
LOG_MAX = 1 << 20
"""At this size the writer truncates the start log without waiting for :data:`LOG_EVERY`
commits, and if records keep coming it replaces the log by one holding only the
uncommitted rows."""


class Waiter:
    """A task waiting for its event's commit, and the loop to wake it in."""

    __slots__ = ("done", "error", "token")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.token = anyio.lowlevel.current_token()
        self.error: JournalError | None = None


class Control:
    """Work for the writer thread after everything queued before it is committed."""

    __slots__ = ("fn", "future", "waiter")

    def __init__(
        self,
        fn: Callable[[sqlite3.Connection], Any] | None,
        *,
        waiter: Waiter | None = None,
        future: concurrent.futures.Future[Any] | None = None,
    ) -> None:
        self.fn = fn
        self.waiter = waiter
        self.future = future


STOP: Final = "stop"
"""Queued last: the writer commits everything before it, then closes and stops."""

Item: TypeAlias = tuple[Row, Waiter | None] | Control | str
"""What the queue holds: a row (and who waits for its commit), a control, or :data:`STOP`."""


class Writer:
    """The thread that owns the journal's connection (see the module docstring).

    The event loop appends to :attr:`pending` and sets :attr:`wake` when :attr:`idle`;
    :meth:`put` is for work someone waits for. The writer publishes :attr:`committed`,
    :attr:`commits` and :attr:`failure` for the event loop to read.

    Args:
        db: the connection, recovered (the writer closes it when it stops).
        path: the journal's path, for messages.
        start_log: the open start log (``"normal"`` durability) or None.
        committed: the last ``seq`` in the database.
        scan_from: where the next open's recovery scan starts so far.
    """

    def __init__(
        self,
        db: sqlite3.Connection,
        path: Path,
        *,
        start_log: StartLog | None,
        committed: int,
        scan_from: int,
    ) -> None:
        self.path = path
        self.pending: deque[Item] = deque()
        self.wake = threading.Event()
        self.idle = False
        self.urgent = False
        self.committed = committed
        """The last ``seq`` committed (written by the writer; a hint for the loop)."""
        self.commits = 0
        self.failure: JournalError | None = None
        """Set when a commit failed or the writer stopped on a bug: every later append fails."""
        self.start_log = start_log
        self._db = db
        self._scan_from = scan_from
        self._last_seq = committed
        self._thread = threading.Thread(
            target=self._run, name=f"clearance-journal:{path.name}", daemon=True
        )

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def is_alive(self) -> bool:
        """Whether the thread is still running."""
        return self._thread.is_alive()

    def join(self) -> None:
        """Wait until the thread has stopped."""
        self._thread.join()

    def stop(self, last_seq: int) -> None:
        """Commit everything queued, record the recovery bookmark and stop (see
        :meth:`join`); ``last_seq`` is the last ``seq`` handed out."""
        self._last_seq = last_seq  # stored before STOP is queued: the writer reads it after
        self.put(STOP)

    def put(self, item: Item) -> None:
        """Queue work someone waits for: the writer takes it at once."""
        self.pending.append(item)
        self.urgent = True  # after the append: the writer resets it before it drains
        self.wake.set()

    async def run_after_commits(self, fn: Callable[[sqlite3.Connection], Any] | None) -> None:
        """Wait until everything queued so far is committed and then ``fn`` (if any) has
        run on the connection, or the thread has stopped. Not cancellable."""
        waiter = Waiter()
        self.put(Control(fn, waiter=waiter))
        with anyio.CancelScope(shield=True):
            while not waiter.done.is_set() and self._thread.is_alive():
                with anyio.move_on_after(1):
                    await waiter.done.wait()

    def _run(self) -> None:
        # Records nobody waits for are not worth a thread switch each: while busy the
        # writer lingers up to _LINGER seconds to commit them together with the next
        # awaited record; an awaited record or a control item wakes it at once.
        pending, wake = self.pending, self.wake
        try:
            while True:
                if not pending:
                    self.idle = True
                    if not pending:
                        wake.wait()
                    self.idle = False
                wake.clear()
                if not self.urgent:
                    wake.wait(_LINGER)
                    wake.clear()
                self.urgent = False
                items = [pending.popleft() for _ in range(min(len(pending), _BATCH))]
                rows: list[Row] = []
                waiters: list[tuple[Row, Waiter]] = []
                for n, item in enumerate(items):
                    if type(item) is tuple:
                        rows.append(item[0])
                        if item[1] is not None:
                            waiters.append(item)  # type: ignore[arg-type]
                        continue
                    self._commit(rows, waiters)
                    rows, waiters = [], []
                    if item == STOP:
                        self._shutdown(items[n + 1 :])
                        return
                    assert isinstance(item, Control)
                    self._control(item)
                self._commit(rows, waiters)
                if self.start_log is not None:
                    self._tend_start_log(self.start_log)
        except BaseException as exc:  # a bug: fail every later append rather than hang
            self.failure = JournalError(f"{self.path}: the journal writer stopped: {exc!r}")
            _log.exception("the journal writer for %s stopped", self.path)
            self._close_start_log()
            self._drain([])
            raise

    def _commit(self, rows: list[Row], waiters: list[tuple[Row, Waiter]]) -> None:
        refused: dict[int, str] = {}
        if rows and self.failure is None:
            db = self._db
            try:
                db.execute("BEGIN IMMEDIATE")
                db.executemany(INSERT, rows)
                db.execute("COMMIT")
                self.committed = rows[-1][0]
                self.commits += 1
            except sqlite3.Error as exc:
                self._failed(db, exc, len(rows))
            except (ValueError, TypeError, OverflowError):
                # A row SQLite's driver cannot bind (append checks ids, so only a bug
                # gets here): commit the others, refuse that one, keep serving.
                if db.in_transaction:
                    db.execute("ROLLBACK")
                refused = self._commit_each(rows)
        if waiters:
            if refused:
                bad = [w for row, w in waiters if row[0] in refused]
                wake_waiters(bad, JournalError(f"{self.path}: {next(iter(refused.values()))}"))
                waiters = [(row, w) for row, w in waiters if row[0] not in refused]
            wake_waiters([w for _, w in waiters], self.failure)

    def _commit_each(self, rows: list[Row]) -> dict[int, str]:
        """Commit ``rows`` one by one in one transaction; the ones the driver refuses are
        left out, reported, and returned (by ``seq``, with why)."""
        db = self._db
        refused: dict[int, str] = {}
        try:
            db.execute("BEGIN IMMEDIATE")
            for row in rows:
                try:
                    db.execute(INSERT, row)
                except (ValueError, TypeError, OverflowError) as exc:
                    refused[row[0]] = f"cannot record a record ({type(exc).__name__}); refused"
                    _log.error(
                        "%s: refused record %d (%s): %s",
                        self.path,
                        row[0],
                        printable(row[2]),
                        printable(exc),
                    )
            db.execute("COMMIT")
            self.committed = rows[-1][0]
            self.commits += 1
        except sqlite3.Error as exc:
            self._failed(db, exc, len(rows))
        return refused

    def _failed(self, db: sqlite3.Connection, exc: sqlite3.Error, lost: int) -> None:
        if db.in_transaction:
            db.execute("ROLLBACK")
        self.failure = JournalError(f"{self.path}: cannot write the journal: {exc}")
        _log.error("journal write failed (%d records lost): %s", lost, exc)

    def _tend_start_log(self, start_log: StartLog) -> None:
        """Keep the start log small (called when every record taken is committed)."""
        if not start_log.size or self.failure is not None:
            return  # after a failed commit the log must stay for the next open
        if start_log.logged <= self.committed:
            if start_log.size < LOG_MAX and self.commits - start_log.truncated_at < LOG_EVERY:
                return
            start_log.truncated_at = self.commits
            with start_log.lock:
                if start_log.logged <= self.committed:  # no start written meanwhile
                    try:
                        os.ftruncate(start_log.fd, 0)
                    except OSError as exc:
                        _log.warning("%s: cannot truncate: %s", start_log.path, exc.strerror)
                    else:
                        start_log.size = start_log.base = 0
                    return
        # A replacement copies what is not committed: with a large backlog, wait until
        # the log is several times that, so that copying stays a fraction of writing.
        if start_log.size >= max(LOG_MAX, 4 * start_log.base):
            start_log.truncated_at = self.commits
            self._replace_start_log(start_log)

    def _replace_start_log(self, start_log: StartLog) -> None:
        """Replace the start log by a file holding only the rows not committed yet.

        For when starts keep coming faster than commits end, so that no moment has the
        whole log committed. Every row not committed is queued (everything taken from the
        queue is committed), so the queue says what to carry over. The bulk is written
        outside the lock; under it, only what was logged meanwhile, the rename and the
        swap, so that the event loop never waits long for its next start.
        """
        with start_log.lock:
            logged = start_log.logged
            queued = list(self.pending)  # one C-level copy
        carried = [item[0] for item in queued if type(item) is tuple and item[0][0] <= logged]
        tmp = Path(f"{start_log.path}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_TRUNC, 0o600)
        except OSError as exc:
            _log.warning("%s: cannot replace the start log: %s", start_log.path, exc.strerror)
            return
        old = fd
        try:
            size = write_all(fd, "".join(map(row_line, carried)).encode("ascii"))
            with start_log.lock:
                if start_log.logged > logged:  # starts written since: their rows are queued
                    later = start_log.logged
                    size += write_all(
                        fd,
                        "".join(
                            row_line(item[0])
                            for item in list(self.pending)
                            if type(item) is tuple and logged < item[0][0] <= later
                        ).encode("ascii"),
                    )
                os.replace(tmp, start_log.path)
                old, start_log.fd, start_log.size = start_log.fd, fd, size
                start_log.base = size
        except OSError as exc:
            _log.warning("%s: cannot replace the start log: %s", start_log.path, exc.strerror)
            tmp.unlink(missing_ok=True)
        finally:
            os.close(old)  # the replaced file, or the new one when replacing failed

    def _close_start_log(self) -> None:
        """Close the start log; remove it when everything it held is committed."""
        start_log = self.start_log
        if start_log is None:
            return
        with start_log.lock:
            if start_log.fd < 0:
                return
            os.close(start_log.fd)
            start_log.fd = -1
            start_log.broken = True
            if self.failure is None:
                try:
                    start_log.path.unlink(missing_ok=True)
                except OSError as exc:
                    _log.warning("%s: cannot remove: %s", start_log.path, exc.strerror)

    def _control(self, control: Control) -> None:
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
            wake_waiters([control.waiter], self.failure)

    def _shutdown(self, rest: list[Any]) -> None:
        """Record how far the next open must scan for open starts, then close."""
        try:
            if self.failure is None:
                first_open = self._db.execute(
                    "SELECT MIN(seq) FROM (" + OPEN_STARTS.format(columns="s.seq") + ")",
                    (self._scan_from,),
                ).fetchone()[0]
                set_meta(self._db, "scan_from", first_open or self._last_seq + 1)
        except sqlite3.Error as exc:
            _log.warning("%s: could not record the recovery bookmark: %s", self.path, exc)
        finally:
            self._db.close()
            self._close_start_log()
            self._drain(rest)

    def _drain(self, items: list[Any]) -> None:
        """Wake everyone still queued (after a stop or a writer failure)."""
        error = self.failure or JournalError(f"{self.path}: the journal is closed")
        while True:
            if items:
                item = items.pop(0)
            elif self.pending:
                item = self.pending.popleft()
            else:
                return
            if type(item) is tuple and item[1] is not None:
                wake_waiters([item[1]], error)
            elif isinstance(item, Control):
                if item.future is not None:
                    item.future.set_exception(error)
                if item.waiter is not None:
                    wake_waiters([item.waiter], error)


def wake_waiters(waiters: Sequence[Waiter], error: JournalError | None) -> None:
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
            _log.debug("journal waiter's event loop has finished")


def _set_all(events: list[anyio.Event]) -> None:
    # Runs in the waiters' event loop.
    for event in events:
        event.set()
