"""The PostgreSQL journal's writer thread: one connection, holding the host's lock,
commits what the event loop queues, in order, many records per statement.

The rules it keeps (rule R7 across hosts and outages):

- **Every record that got a ``seq`` is written**, in ``seq`` order per session, so a
  session's ``seq`` has no gaps. When the connection is lost during a commit, the batch's
  rows are kept and written again after the reconnection (``ON CONFLICT DO NOTHING``: the
  lost commit may have succeeded); rows queued meanwhile wait behind them.
- **A waiting ``append`` is answered at once when the connection is lost**: it raises, so
  its call is denied and no handler runs. A ``tool_started`` answered so will still be
  written (above), so the writer writes an end for it too: ``tool_finished`` with status
  ``cancelled`` ("the call did not run"). Every start has exactly one end.
- **A host whose calls were closed by another process while it was disconnected**
  (``clearance store recover``) stops writing: its generation moved (see
  ``_postgres_host``), and its running calls already have their ``interrupted`` ends.

The connection is used by whoever holds :attr:`PgWriter.lock`: the thread, except while it
waits for work, when the event loop may take it to commit an awaited start itself (see
``_postgres_loop``: no hand-over to this thread and back, about half of a call's cost at
one session). Everything the thread keeps about the connection (``_conn``, ``down``,
``failure``, ``_again``, ``_stopping``) changes only under the lock.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Final, Protocol, TypeAlias

from clearance._text import printable
from clearance.errors import JournalError, StoreError
from clearance.harness.journal._durable import Durability
from clearance.harness.journal._event import encode_data
from clearance.harness.journal._postgres_host import (
    PgRow,
    close_host,
    insert_rows,
    lock_host,
    open_host,
)
from clearance.harness.journal._postgres_start_log import PgStartLog
from clearance.harness.journal._sqlite_writer import Waiter, wake_waiters
from clearance.harness.postgres import (
    Connection,
    ConnectionLost,
    DatabaseError,
    PostgresDatabase,
    RowRefused,
)

__all__ = [
    "MAX_PENDING",
    "NOT_RUN_MESSAGE",
    "STOP",
    "Claim",
    "InFlight",
    "Item",
    "PgControl",
    "PgWriter",
    "SessionSeqs",
]

_log = logging.getLogger("clearance")

_BATCH = 4096
_LINGER = 0.002
MAX_PENDING: Final = 10_000
"""Records queued without a waiter, at most (as in the SQLite journal)."""
_CLOSE_WAIT = 5.0
"""Seconds a closing journal keeps trying to reach the database for its last records."""
NOT_RUN_MESSAGE: Final = (
    "the call did not run: the journal lost its database connection while recording the start"
)
STOP: Final = "stop"


class SessionSeqs:
    """The last ``seq`` of each session this host writes (shared by the event loop and
    the writer thread, under :attr:`lock`)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.last: dict[str, int] = {}

    def known(self, session_id: str) -> bool:
        with self.lock:
            return session_id in self.last

    def next(self, session_id: str) -> int | None:
        """Hand out the session's next ``seq``; None when the session is not known here
        (it must be claimed first)."""
        with self.lock:
            last = self.last.get(session_id)
            if last is None:
                return None
            self.last[session_id] = last + 1
            return last + 1


class PgControl:
    """Work for the writer after everything queued before it is committed:
    ``fn(connection)``, its result or exception delivered to ``future``."""

    __slots__ = ("fn", "future")

    def __init__(self, fn: Callable[[Connection], Any]) -> None:
        self.fn = fn
        self.future: concurrent.futures.Future[Any] = concurrent.futures.Future()


class Claim:
    """Take a session for this host and learn its last ``seq``; the event loop waits on
    ``waiter``, the outcome is in ``error``."""

    __slots__ = ("error", "session_id", "waiter")

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.waiter = Waiter()
        self.error: JournalError | None = None


class InFlight(Protocol):
    """A batch the event loop is sending (``_postgres_loop.Flight``)."""

    thread: int
    """The event loop's thread."""

    def settle(self) -> None:
        """Finish it, blocking (on :attr:`thread`)."""
        ...


Item: TypeAlias = tuple[PgRow, Waiter | None] | PgControl | Claim | str


class PgWriter:
    """The writer thread (see the module docstring).

    The event loop appends to :attr:`pending` and sets :attr:`wake` when :attr:`idle`;
    :meth:`put` is for work someone waits for. :attr:`down` says why the database cannot
    be reached now (waiting appends then fail at once); :attr:`failure` is final (the
    host id is taken, the host was recovered by another process, a bug).
    """

    def __init__(
        self,
        database: PostgresDatabase,
        host: str,
        durability: Durability,
        seqs: SessionSeqs,
        *,
        start_log: PgStartLog | None = None,
        restore: list[PgRow] | None = None,
    ) -> None:
        self.database = database
        self.start_log = start_log
        self._restore = restore or []
        """Rows the start log held at open: inserted (when missing) by the first open."""
        self.through = 0
        """Every record the event loop queued up to this ordinal is committed (with a
        start log: the event loop counts the rows it queues, the writer those it
        commits; only the event loop queues rows then, since no start waits)."""
        self._taken = 0
        self.host = host
        self.durability = durability
        self.seqs = seqs
        self.pending: deque[Item] = deque()
        self.lock = threading.Lock()
        """Held by whoever uses the connection: the thread, except in :meth:`_wait`."""
        self.loop_prepared: set[int] = set()
        """Row counts whose ``INSERT`` the event loop has prepared on this connection."""
        self.flight: InFlight | None = None
        """The event loop's commit under way, for a synchronous caller on the event loop's
        thread to finish before it waits for this thread (which waits for :attr:`lock`)."""
        self.wake = threading.Event()
        self.idle = False
        self.urgent = False
        self.down: str | None = None
        self.failure: JournalError | None = None
        self.opened = threading.Event()
        """Set once the first attempt to open is over (whatever its outcome)."""
        self.generation: int | None = None
        self.recovered = 0
        """How many calls the first open closed as ``interrupted``."""
        self.committed = 0
        """Rows committed so far (for statistics and tests)."""
        self.commits = 0
        self._conn: Connection | None = None
        self._again: list[PgRow] = []
        """Rows whose commit was lost: written (``ON CONFLICT DO NOTHING``) before more."""
        self._stopping: float | None = None
        self._thread = threading.Thread(
            target=self._run, name=f"clearance-journal:{host}", daemon=True
        )

    # -- the event loop's side -----------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def join(self) -> None:
        self._thread.join()

    def put(self, item: Item) -> None:
        """Queue work someone waits for: the writer takes it at once."""
        self.pending.append(item)
        self.urgent = True
        self.wake.set()

    def stop(self) -> None:
        """Commit everything queued (trying for a few seconds if the database is down),
        record the recovery bookmark and stop; see :meth:`join`."""
        self.put(STOP)

    # -- the event loop's commits (``_postgres_loop``) --------------------------------------

    def take(self, limit: int) -> tuple[Connection, list[tuple[PgRow, Waiter | None]]] | None:
        """On the event loop: the connection and every queued row, to commit there, when
        the thread waits (:attr:`lock` is free), the connection is up, nothing is to be
        written again, and only rows are queued, ``limit`` at most (anything else is the
        thread's: a control, a stop, a batch for ``COPY``, a start log's rows); else
        None. The caller holds :attr:`lock` until :meth:`landed`, :meth:`lost` or
        :meth:`give_back`."""
        if not self.lock.acquire(blocking=False):
            return None
        pending = self.pending
        count = len(pending)
        if (
            self._conn is None
            or self.failure is not None
            or self._again
            or self._stopping is not None
            or self.start_log is not None
            or not 0 < count <= limit
            or any(type(item) is not tuple for item in pending)
        ):
            self.lock.release()
            return None
        items: list[tuple[PgRow, Waiter | None]] = [pending.popleft() for _ in range(count)]  # type: ignore[misc]
        return self._conn, items

    def landed(self, items: list[tuple[PgRow, Waiter | None]]) -> list[Waiter]:
        """The event loop committed ``items``: count them and give the connection back;
        their waiters, for the caller to wake."""
        rows = [row for row, _ in items]
        self._taken += len(rows)
        self.committed += len(rows)
        self.commits += 1
        self.through = self._taken
        self._forget_closed(rows)
        self.lock.release()
        return [waiter for _, waiter in items if waiter is not None]

    def lost(self, exc: BaseException, items: list[tuple[PgRow, Waiter | None]]) -> None:
        """The connection was lost while the event loop committed ``items``, which may or
        may not be committed: as in the thread, they are written again after the
        reconnection, their waiters get the error and each start so answered its end."""
        self._taken += len(items)
        self._lose_connection(exc)
        waited = [(row, waiter) for row, waiter in items if waiter is not None]
        self._lost_rows([row for row, _ in items], waited, self.down or "the connection was lost")
        self.lock.release()
        self.urgent = True
        self.wake.set()  # to reconnect

    def give_back(self, items: list[tuple[PgRow, Waiter | None]]) -> None:
        """The server refused the event loop's statement (nothing was committed): the
        thread writes ``items`` first, with everything it does about a refused row."""
        self.pending.extendleft(reversed(items))
        self.lock.release()
        self.urgent = True
        self.wake.set()

    # -- the thread ------------------------------------------------------------------------

    def _wait(self, timeout: float | None = None) -> None:
        """Wait for :attr:`wake` (at most ``timeout`` seconds) without the connection: the
        event loop may commit meanwhile (it takes :attr:`lock` only when it is free)."""
        self.lock.release()
        try:
            self.wake.wait(timeout)
        finally:
            self.lock.acquire()

    def _run(self) -> None:
        delay = 0.1
        self.lock.acquire()
        try:
            while True:
                if self.failure is not None:
                    self.opened.set()
                    if self._drain(self.failure) or self._stopping is not None:
                        self._close_connection()
                        return
                    self._wait()
                    self.wake.clear()
                    continue
                if self._conn is None and not self._open():
                    self.opened.set()
                    if self.failure is not None:
                        continue
                    self._refuse_waiting()
                    if self._stopping is not None and self._give_up():
                        return
                    self._wait(delay)
                    self.wake.clear()
                    delay = min(delay * 2, 1.0)
                    continue
                self.opened.set()
                delay = 0.1
                if self._stopping is not None:
                    if self._finish():
                        return
                    continue
                lingered = False
                if not self.pending and not self._again:
                    # Just committed: the next records usually follow within the linger
                    # (the end of the call that was waiting, the next call's decision and
                    # start). Wait for them without being idle, so that records nobody
                    # waits for do not each wake this thread (a thread switch, and the
                    # GIL taken from the busy event loop); an awaited one wakes it.
                    if not self.urgent:
                        lingered = True
                        self._wait(_LINGER)
                    if not self.pending:
                        lingered = False
                        self.idle = True
                        if not self.pending:
                            self._wait()
                        self.idle = False
                self.wake.clear()
                if not self.urgent and not lingered:
                    self._wait(_LINGER)
                    self.wake.clear()
                self.urgent = False
                self._batch()
        except BaseException as exc:  # a bug: fail every later append rather than hang
            self.failure = JournalError(
                f"{self.database.label}: the journal writer stopped: {exc!r}"
            )
            _log.exception("the journal writer for %s stopped", self.database.label)
            self._drain(self.failure)
            self._close_connection()
            raise
        finally:
            self.lock.release()
            if self.start_log is not None:  # kept for the next open, unless removed
                self.start_log.close(remove=False)

    def _batch(self) -> None:
        """Take what is queued and commit it in order (a STOP only marks the stop: the
        loop finishes once everything before it is written)."""
        pending = self.pending
        items = [pending.popleft() for _ in range(min(len(pending), _BATCH))]
        rows: list[PgRow] = []
        waited: list[tuple[PgRow, Waiter]] = []
        start_log = self.start_log
        for item in items:
            if type(item) is tuple:
                rows.append(item[0])
                if item[1] is not None:
                    waited.append((item[0], item[1]))
                continue
            self._commit(rows, waited)
            rows, waited = [], []
            if item == STOP:
                if self._stopping is None:
                    self._stopping = time.monotonic()
                continue
            if start_log is not None and self.failure is None and not self._again:
                # A flush (or a read) empties the log before it returns.
                start_log.tend(self.through, self.commits, True)
            self._control(item)  # type: ignore[arg-type]
        self._commit(rows, waited)
        if start_log is not None and self.failure is None and not self._again:
            start_log.tend(self.through, self.commits, False)

    def _commit(self, rows: list[PgRow], waited: list[tuple[PgRow, Waiter]]) -> None:
        self._taken += len(rows)
        if not rows and not self._again:
            return
        conn = self._conn
        if conn is None:
            self._lost_rows(rows, waited, self.down or "not connected")
            return
        try:
            if self._again:
                with conn.transaction():
                    insert_rows(conn, self.database.schema, self.host, self._again, again=True)
                    if rows:
                        insert_rows(conn, self.database.schema, self.host, rows)
                self.committed += len(self._again)
                self._again = []
            elif rows:
                insert_rows(conn, self.database.schema, self.host, rows)
        except ConnectionLost as exc:
            self._lose_connection(exc)
            self._lost_rows(rows, waited, self.down or "the connection was lost")
            return
        except RowRefused:
            # A row the server or the driver cannot take (append checks ids, so only a
            # bug gets here): commit the others, refuse that one, keep serving.
            try:
                rows, waited = self._commit_each(conn, rows, waited)
            except ConnectionLost as exc:
                self._lose_connection(exc)
                self._lost_rows(rows, waited, self.down or "the connection was lost")
                return
            except DatabaseError as exc:
                self._failed(exc, rows, waited)
                return
        except DatabaseError as exc:
            self._failed(exc, rows, waited)
            return
        self.committed += len(rows)
        self.commits += 1
        self.through = self._taken  # in order, and nothing is left to write again
        if waited:
            wake_waiters([w for _, w in waited], None)
        self._forget_closed(rows)

    def _failed(
        self, exc: BaseException, rows: list[PgRow], waited: list[tuple[PgRow, Waiter]]
    ) -> None:
        self.failure = JournalError(
            f"{self.database.label}: cannot write the journal: {_line(exc)}"
        )
        _log.error("journal write failed (%d records lost): %s", len(rows), exc)
        wake_waiters([w for _, w in waited], self.failure)

    def _commit_each(
        self, conn: Connection, rows: list[PgRow], waited: list[tuple[PgRow, Waiter]]
    ) -> tuple[list[PgRow], list[tuple[PgRow, Waiter]]]:
        """Write the rows again (and any to write again) one by one, each in a savepoint,
        in one transaction; refuse those the server or the driver cannot take (their
        waiters get the error). The rows written and their waiters.

        Raises:
            DatabaseError: as a commit.
        """
        schema, again = self.database.schema, self._again
        kept: list[PgRow] = []
        refused: dict[tuple[str, int], str] = {}
        with conn.transaction():
            for row, repeated in [(row, True) for row in again] + [(row, False) for row in rows]:
                try:
                    with conn.transaction():
                        insert_rows(conn, schema, self.host, [row], again=repeated)
                except RowRefused as exc:
                    refused[(row[0], row[1])] = f"cannot record a record ({_line(exc)}); refused"
                    _log.error(
                        "%s: refused record %s/%d (%s): %s",
                        self.database.label,
                        printable(row[0]),
                        row[1],
                        printable(row[3]),
                        printable(_line(exc)),
                    )
                else:
                    if not repeated:
                        kept.append(row)
        self.committed += len(again)
        self._again = []
        bad = [w for row, w in waited if (row[0], row[1]) in refused]
        if bad:
            wake_waiters(
                bad, JournalError(f"{self.database.label}: {next(iter(refused.values()))}")
            )
        return kept, [(row, w) for row, w in waited if (row[0], row[1]) not in refused]

    def _lost_rows(self, rows: list[PgRow], waited: list[tuple[PgRow, Waiter]], why: str) -> None:
        """Keep rows whose commit failed for later, answer their waiters with the error,
        and give every start so answered its ``cancelled`` end (right after it)."""
        error = JournalError(
            f"cannot record the call: {self.database.label} is unreachable ({why})"
        )
        answered = {(row[0], row[1]) for row, _ in waited if row[3] == "tool_started"}
        for row in rows:
            self._again.append(row)
            if (row[0], row[1]) in answered:
                end = self.end_unstarted(row)
                if end is not None:
                    self._again.append(end)
        if waited:
            wake_waiters([w for _, w in waited], error)

    def end_unstarted(self, row: PgRow, message: str = NOT_RUN_MESSAGE) -> PgRow | None:
        """The end of a start whose ``append`` failed (its call did not run)."""
        session_id, seq, _, _, turn_id, call_id, version, data = row
        try:
            started = json.loads(data)
        except ValueError:  # pragma: no cover - the writer encoded it
            started = {}
        with self.seqs.lock:
            last = self.seqs.last.get(session_id)
            if last is None:  # pragma: no cover - a session is known until it closed
                _log.error("cannot end the unstarted call %s of %s", call_id, session_id)
                return None
            self.seqs.last[session_id] = last + 1
        end = {
            "tool": started.get("tool"),
            "qualified_name": started.get("qualified_name"),
            "model_alias": started.get("model_alias"),
            "status": "cancelled",
            "duration_us": None,
            "correlation_id": started.get("correlation_id"),
            "message": message,
            "started_seq": seq,
        }
        return (
            session_id,
            last + 1,
            time.time(),
            "tool_finished",
            turn_id,
            call_id,
            version,
            encode_data(end),
        )

    def _forget_closed(self, rows: list[PgRow]) -> None:
        """A closed session's counter is dropped once its last record is committed (one
        that comes back is claimed again, its ``seq`` read from the database)."""
        for row in rows:
            if row[3] == "session_closed":
                with self.seqs.lock:
                    if self.seqs.last.get(row[0]) == row[1]:
                        del self.seqs.last[row[0]]

    def _control(self, item: PgControl | Claim) -> None:
        conn = self._conn
        if isinstance(item, Claim):
            if conn is None:
                item.error = JournalError(self._down_message())
            else:
                try:
                    self._claim(conn, item.session_id)
                except ConnectionLost as exc:
                    self._lose_connection(exc)
                    item.error = JournalError(self._down_message())
                except JournalError as exc:
                    item.error = exc
                except DatabaseError as exc:
                    item.error = JournalError(f"{self.database.label}: {_line(exc)}")
            wake_waiters([item.waiter], None)
            return
        if conn is None:
            item.future.set_exception(JournalError(self._down_message()))
            return
        try:
            item.future.set_result(item.fn(conn))
        except ConnectionLost as exc:
            self._lose_connection(exc)
            item.future.set_exception(JournalError(self._down_message()))
        except BaseException as exc:
            item.future.set_exception(exc)

    def _claim(self, conn: Connection, session_id: str) -> None:
        schema = self.database.schema
        with conn.transaction():
            conn.execute(
                f"INSERT INTO {schema}.journal_sessions VALUES (%s, %s) ON CONFLICT DO NOTHING",
                (session_id, self.host),
            )
            owner = conn.execute(
                f"SELECT host_id FROM {schema}.journal_sessions WHERE session_id = %s",
                (session_id,),
            ).fetchone()
            if owner is None or owner[0] != self.host:
                raise JournalError(
                    f"session {session_id!r} is journaled by host "
                    f"{owner[0] if owner else '?'!r}, not {self.host!r}: a session is "
                    "written by one host"
                )
            top = conn.execute(
                f"SELECT max(seq) FROM {schema}.events WHERE session_id = %s", (session_id,)
            ).fetchone()
        last = int(top[0]) if top is not None and top[0] is not None else 0
        with self.seqs.lock:
            self.seqs.last[session_id] = max(self.seqs.last.get(session_id, 0), last)

    # -- connecting ------------------------------------------------------------------------

    def _open(self) -> bool:
        """Connect, take the host's lock, and on the first open recover; False when the
        database cannot be reached (:attr:`down` says why) or a final failure was set."""
        database = self.database
        try:
            if not database.migrated:
                database.migrate()
            conn = database.connect()
        except StoreError as exc:
            self.down = str(exc)
            return False
        except JournalError as exc:
            self.failure = exc
            return False
        try:
            conn.execute(
                "SET synchronous_commit = " + ("on" if self.durability == "full" else "off")
            )
            if not lock_host(conn, database, self.host):
                conn.close()
                if self.generation is None:
                    self.failure = JournalError(
                        f"host {self.host!r} is already writing to {database.label} (another "
                        "process holds its lock): give each process its own host id "
                        "(PostgresJournal(host=...), or CLEARANCE_HOST)"
                    )
                else:
                    self.down = "another process holds this host's lock"
                return False
            if self.generation is None:
                if self._restore:
                    self._restore_rows(conn)
                self.generation, self.recovered = open_host(
                    conn, database.schema, self.host, opening=True
                )
                if self.recovered:
                    _log.warning(
                        "%s: marked %d unfinished call(s) of host %s interrupted",
                        database.label,
                        self.recovered,
                        self.host,
                    )
                if self.start_log is not None:
                    try:
                        self.start_log.reset()  # its rows are in the database now
                    except OSError as exc:
                        conn.close()
                        self.failure = JournalError(
                            f"{self.start_log.path}: cannot empty the start log: {exc.strerror}"
                        )
                        return False
            else:
                row = conn.execute(
                    f"SELECT generation FROM {database.schema}.hosts WHERE host_id = %s",
                    (self.host,),
                ).fetchone()
                if row is None or int(row[0]) != self.generation:
                    conn.close()
                    self.failure = JournalError(
                        f"{database.label}: the calls of host {self.host!r} were closed as "
                        "interrupted by another process while this one was disconnected "
                        "(clearance store recover); this journal writes no more: reopen it"
                    )
                    return False
        except ConnectionLost as exc:
            conn.close()
            self.down = _line(exc)
            return False
        except DatabaseError as exc:
            conn.close()
            self.failure = JournalError(f"{database.label}: cannot open the journal: {_line(exc)}")
            return False
        except JournalError as exc:  # the start log is another host's
            conn.close()
            self.failure = exc
            return False
        if self.down is not None:
            _log.warning("%s: the journal of host %s writes again", database.label, self.host)
        self._conn, self.down = conn, None
        self.loop_prepared = set()
        return True

    def _restore_rows(self, conn: Connection) -> None:
        """Insert the rows a crash left only in the start log (those the server has are
        skipped); the caller holds the host's lock, recovery follows.

        Raises:
            JournalError: a row's session is not this host's (the log is another
                host's: open it with that host id).
        """
        schema, rows = self.database.schema, self._restore
        sessions = sorted({row[0] for row in rows})
        with conn.transaction():
            owners = dict(
                conn.execute(
                    f"SELECT session_id, host_id FROM {schema}.journal_sessions "
                    "WHERE session_id = ANY(%s)",
                    (sessions,),
                ).fetchall()
            )
            for session_id in sessions:
                if owners.get(session_id) != self.host:
                    raise JournalError(
                        f"{self.start_log.path if self.start_log else 'the start log'}: "
                        f"session {session_id!r} is not host {self.host!r}'s (its journal "
                        f"host is {owners.get(session_id)!r}): open the start log with that "
                        "host id"
                    )
            for at in range(0, len(rows), 1000):
                insert_rows(conn, schema, self.host, rows[at : at + 1000], again=True)
        _log.warning(
            "%s: restored what the database lacked of the %d record(s) in host %s's start log",
            self.database.label,
            len(rows),
            self.host,
        )
        self._restore = []

    def _lose_connection(self, exc: BaseException) -> None:
        self.down = _line(exc)
        _log.warning(
            "%s: the journal lost its connection (%s); waiting calls are denied until it "
            "reconnects",
            self.database.label,
            self.down,
        )
        self._close_connection()

    def _close_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # pragma: no cover - already broken
                pass

    def _down_message(self) -> str:
        return f"cannot record the call: {self.database.label} is unreachable ({self.down})"

    def _refuse_waiting(self) -> None:
        """While disconnected: answer everyone waiting with the error. Their rows stay
        queued, and a start so answered is followed by its ``cancelled`` end."""
        error = JournalError(self._down_message())
        kept: deque[Item] = deque()
        while self.pending:
            item = self.pending.popleft()
            if type(item) is tuple:
                row, waiter = item
                kept.append((row, None))
                if waiter is not None:
                    if row[3] == "tool_started":
                        end = self.end_unstarted(row)
                        if end is not None:
                            kept.append((end, None))
                    wake_waiters([waiter], error)
            elif isinstance(item, Claim):
                item.error = error
                wake_waiters([item.waiter], None)
            elif isinstance(item, PgControl):
                item.future.set_exception(error)
            elif self._stopping is None:
                self._stopping = time.monotonic()
        # Anything appended meanwhile goes after what was kept.
        self.pending.extendleft(reversed(kept))

    def _give_up(self) -> bool:
        """A closing journal that cannot reach the database: after a few seconds, stop and
        say how much is lost."""
        assert self._stopping is not None
        if time.monotonic() - self._stopping < _CLOSE_WAIT:
            return False
        lost = len(self._again) + sum(1 for item in self.pending if type(item) is tuple)
        if lost:
            _log.error(
                "%s: closing without the database: %d journal record(s) of host %s are lost",
                self.database.label,
                lost,
                self.host,
            )
        self._drain(JournalError(f"{self.database.label}: the journal is closed"))
        return True

    def _finish(self) -> bool:
        """Stopping: commit what remains, record the bookmark, close; False when the
        connection was lost meanwhile (the loop reconnects and comes back)."""
        while (self.pending or self._again) and self._conn is not None:
            if self.failure is not None:
                return False
            self._batch()
        if self._conn is None:
            return False
        try:
            close_host(self._conn, self.database.schema, self.host)
        except DatabaseError as exc:
            _log.warning(
                "%s: could not record the recovery bookmark: %s", self.database.label, _line(exc)
            )
        self._close_connection()
        if self.start_log is not None and self.failure is None:
            self.start_log.close(remove=True)  # everything it held is committed
        self._drain(JournalError(f"{self.database.label}: the journal is closed"))
        return True

    def _drain(self, error: JournalError) -> bool:
        """Answer everything queued with ``error``; True when a stop was among it."""
        stopped = False
        while self.pending:
            item = self.pending.popleft()
            if type(item) is tuple:
                if item[1] is not None:
                    wake_waiters([item[1]], error)
            elif isinstance(item, Claim):
                item.error = error
                wake_waiters([item.waiter], None)
            elif isinstance(item, PgControl):
                item.future.set_exception(error)
            else:
                stopped = True
                if self._stopping is None:
                    self._stopping = time.monotonic()
        return stopped


def _line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
