"""``PostgresJournal``: one journal in PostgreSQL for several hosts (the event loop's
side; the writer thread is in ``_postgres_writer``, hosts and recovery in
``_postgres_host``)."""

from __future__ import annotations

import concurrent.futures
import logging
import os
import threading
from collections import deque
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from clearance._limits import storable
from clearance.errors import JournalError, StoreError
from clearance.harness.journal._durable import Durability, FileLock, check_durability
from clearance.harness.journal._event import JournalEvent, encode_data
from clearance.harness.journal._postgres_host import (
    COLUMNS,
    PgRow,
    default_host,
    event_from_pg,
    recover_stopped_host,
)
from clearance.harness.journal._postgres_loop import commit_here
from clearance.harness.journal._postgres_start_log import (
    PgStartLog,
    pg_line,
    read_pg_start_log,
)
from clearance.harness.journal._postgres_writer import (
    MAX_PENDING,
    STOP,
    Claim,
    PgControl,
    PgWriter,
    SessionSeqs,
)
from clearance.harness.journal._sqlite_writer import Waiter
from clearance.harness.postgres import Connection, PostgresDatabase, open_database

__all__ = ["PostgresJournal"]

_log = logging.getLogger("clearance")

# Records kept for the next start's log write are trimmed of committed ones once there
# are this many (as in SqliteJournal).
_UNLOGGED_TRIM = 256
_LOG_FAILED_MESSAGE = "the call did not run: the journal could not write its start log"


class PostgresJournal:
    """The journal of several hosts in one PostgreSQL database.

    Each host (a process; by default named ``$CLEARANCE_HOST`` or the machine's name)
    writes its own sessions through one writer thread and connection, many records per
    statement. The records are the same as every journal's; ``seq`` is counted **per
    session** (1, 2, 3... without gaps), since sessions of many hosts interleave.

    Durability (``append`` never blocks the event loop):

    - ``"normal"`` (default): ``tool_started`` is committed before its ``append``
      returns, with every record appended before it, so a handler never runs unrecorded,
      even if the host then vanishes for good (its disk with it); other records are
      committed in the background within a few milliseconds (concurrent calls and
      sessions share commits). A round trip to the server per started call.
      Commits run with ``synchronous_commit=off``: the server has the records (every host
      sees them, and they survive a crash of this host and a clean restart of the
      server), but a crash of the server itself can lose its last fraction of a second,
      as a ``SqliteJournal`` in ``"normal"`` can lose its last records to a power loss.
    - ``"full"``: every ``append`` returns after its commit, and commits wait until the
      server has flushed them to disk (``synchronous_commit=on``).
    - ``"off"``: nothing waits; a crash of this host can lose a start whose handler ran.

    ``start_log=PATH`` (``"normal"`` only) makes the promise ``SqliteJournal``'s instead:
    ``append("tool_started")`` writes the start and every record before it not yet
    committed to a local file with one ``write`` (the page cache, no fsync) and returns
    without waiting for the server; the writer commits in the background and empties the
    file once it is committed; a clean close removes it. A crash of the process is
    survived: reopening as the same host (with the same ``start_log``) first inserts the
    rows the server lacks, then closes the unfinished starts as ``interrupted``. The loss
    of the host's disk (or a host that never comes back: ``clearance store recover``
    cannot read its file) loses the starts only the file held, and the records after
    them. If the file cannot be written, the call is denied (its ``seq`` is not used).
    While the database is unreachable, a start still proceeds on the file alone while
    fewer than half of the 10,000 queued records are used (the other half keeps room for
    the ends of running calls), then calls are denied; a session's first record always
    needs the database (it claims the session).

    Rule R7 across hosts: opening the journal closes, as ``interrupted``, every start the
    same host id left without an end (a crash); ``clearance store recover --host ID``
    does it for a host that will not come back. A host id is written by one process at a
    time (a second raises :class:`~clearance.errors.JournalError`).

    Fail closed: while the database is unreachable a waiting ``append`` (a
    ``tool_started``) raises ``JournalError`` naming the store, so the call is denied and
    its handler never runs. Other records wait in memory (at most 10,000) and are written
    when the database returns; the journal reconnects by itself. See ``_postgres_writer``
    for what happens to a start whose commit was cut off.

    Args:
        database: a ``postgresql://`` URL (the journal opens and closes its own
            connections) or a shared :class:`~clearance.harness.postgres.PostgresDatabase`.
        host: this host's id (default: ``$CLEARANCE_HOST``, else the machine's name);
            stable across restarts, so that a restart closes the calls a crash left open.
        durability: ``"normal"``, ``"full"`` or ``"off"`` as above.
        start_log: a local file for starts (see above); one journal writes it at a
            time (a lock on ``PATH.lock``); ``PATH.old`` may hold a part of it.

    Raises:
        ValueError: a start log with a durability other than ``"normal"``.
        JournalError: another process writes as this host, or the start log cannot be
            opened, read (a line other than a torn last one is not a record) or is
            another host's, or the database refused to
            open the journal (an unreachable database is not an error here: the
            journal connects when it can, and denies calls until then).
        ConfigError: the URL is not a PostgreSQL URL.
    """

    def __init__(
        self,
        database: str | PostgresDatabase,
        *,
        host: str | None = None,
        durability: Durability = "normal",
        start_log: str | os.PathLike[str] | None = None,
    ) -> None:
        self.durability = check_durability(durability)
        if start_log is not None and self.durability != "normal":
            raise ValueError("a start log is for durability 'normal' only")
        host = default_host() if host is None else host
        if not isinstance(host, str) or not host or len(host) > 200 or "\x00" in host:
            raise JournalError("a journal host id is a non-empty string of at most 200 characters")
        self.host = host
        self._closed = False
        self._seqs = SessionSeqs()
        self._claims: dict[str, anyio.Event] = {}
        self._landed: anyio.Event | None = None
        """Set when the batch this event loop sent last has landed (``_postgres_loop``)."""
        # With a start log: the rows queued (their ordinal, see _postgres_start_log), and
        # every record since the last start written to the log, for the next start.
        self._appended = 0
        self._unlogged: deque[PgRow] = deque()
        self._start_log: PgStartLog | None = None
        self._log_lock: FileLock | None = None
        restore: list[PgRow] = []
        if start_log is not None:
            # One writer per log, whichever name it is opened by.
            real = Path(os.path.realpath(start_log))
            self._log_lock = FileLock(Path(f"{real}.lock"))
            try:
                restore = read_pg_start_log(real)
                self._start_log = PgStartLog(real)
            except BaseException:
                self._log_lock.release()
                raise
        try:
            self.database, self._owned = open_database(database)
        except BaseException:
            self._release_log()
            raise
        self.path = self.database.name
        self._writer = PgWriter(
            self.database,
            host,
            self.durability,
            self._seqs,
            start_log=self._start_log,
            restore=restore,
        )
        self._writer.start()
        # The first open (connect, lock, recover) before the journal is used: a host id
        # already in use is an error here, not at the first call.
        self._writer.opened.wait(self.database.timeout * 2 + 1)
        if self._writer.failure is not None:
            self._stop_now()
            raise self._writer.failure
        if self._writer.down is not None:
            _log.warning(
                "%s: the journal cannot reach the database yet (%s); calls are denied until "
                "it does",
                self.database.label,
                self._writer.down,
            )

    def __repr__(self) -> str:
        return f"PostgresJournal({self.database!r}, host={self.host!r})"

    @staticmethod
    def recover_host(database: str | PostgresDatabase, host: str) -> int:
        """Close, as ``interrupted``, every call that ``host`` started and never finished,
        for a host that stopped and will not come back (``clearance store recover``);
        how many were closed.

        Raises:
            JournalError: no such host, or a process runs as it now.
            StoreError: the database is unreachable.
        """
        db, owned = open_database(database)
        try:
            return recover_stopped_host(db, host)
        finally:
            if owned:
                db.close()

    @property
    def recovered(self) -> int:
        """How many calls opening the journal closed as ``interrupted``."""
        return self._writer.recovered

    # -- writing ------------------------------------------------------------------------

    async def append(self, event: JournalEvent) -> JournalEvent:
        """Record ``event``; assigns its ``seq`` (per session) and waits as the durability
        says.

        Raises:
            JournalError: the journal is closed or cannot reach its database (the call is
                then denied), the session is another host's, or the data cannot be
                encoded.
        """
        waiting = self.append_now(event)
        if waiting is not None:
            await waiting
        return event

    def append_now(self, event: JournalEvent) -> Awaitable[None] | None:
        """:meth:`append` without a coroutine where no wait is needed: ``None`` once the
        event is queued as the durability says (its ``seq`` assigned), else an awaitable
        that finishes recording it (a session's first record claims the session; a
        ``tool_started`` in ``"normal"`` waits for its commit).

        Raises:
            JournalError: as :meth:`append` (the awaitable raises it for a failed commit
                or claim).
        """
        writer = self._writer
        if self._closed or writer.failure is not None:
            raise JournalError(str(writer.failure or f"{self.path}: the journal is closed"))
        try:
            data = encode_data(event.data)
        except (TypeError, ValueError) as exc:
            raise JournalError(f"cannot encode a {event.type} record: {exc}") from None
        session_id = event.session_id
        turn_id, call_id, type_ = event.turn_id, event.call_id, event.type
        if not (
            storable(session_id)
            and (turn_id is None or storable(turn_id))
            and (call_id is None or storable(call_id))
            and storable(type_)
        ):
            # Refused here, for this record alone: in a batch it would fail every record
            # of the batch (and a model chooses its call ids).
            raise JournalError(
                f"cannot record a {type_} record: an id holds a NUL or a lone surrogate"
            )
        pending = writer.pending
        if self._start_log is not None:
            if len(pending) >= MAX_PENDING // 2:
                self._check_room(type_, len(pending))
            seq = self._seqs.next(session_id)
            if seq is None:  # the session's first record here: claim it first
                return self._append_claimed(event, data, False)
            event.seq = seq
            return self._queue_logged(
                (session_id, seq, event.ts, type_, turn_id, call_id, event.version, data)
            )
        durability = self.durability
        waits = durability == "full" or (durability == "normal" and type_ == "tool_started")
        if writer.down is not None and (waits or len(pending) >= MAX_PENDING):
            raise JournalError(self._down_message())
        seq = self._seqs.next(session_id)
        if seq is None:  # the session's first record here: claim it first
            return self._append_claimed(event, data, waits)
        event.seq = seq
        row: PgRow = (session_id, seq, event.ts, type_, turn_id, call_id, event.version, data)
        if not waits and len(pending) < MAX_PENDING:
            pending.append((row, None))
            if writer.idle:
                writer.wake.set()
            return None
        return self._committed(row)

    async def _append_claimed(self, event: JournalEvent, data: str, waits: bool) -> None:
        """The rest of :meth:`append_now` for a session not yet claimed here."""
        session_id = event.session_id
        seq = self._seqs.next(session_id)
        while seq is None:
            await self._claim(session_id)
            seq = self._seqs.next(session_id)
        event.seq = seq
        row: PgRow = (
            session_id,
            seq,
            event.ts,
            event.type,
            event.turn_id,
            event.call_id,
            event.version,
            data,
        )
        if self._start_log is not None:
            waiting = self._queue_logged(row)
            if waiting is not None:
                await waiting
            return
        writer = self._writer
        if not waits and len(writer.pending) < MAX_PENDING:
            writer.pending.append((row, None))
            if writer.idle:
                writer.wake.set()
            return
        await self._committed(row)

    def _queue_logged(self, row: PgRow) -> Awaitable[None] | None:
        """Queue ``row`` with a start log: a start is first written to the log with the
        uncommitted records before it; None once queued, else an awaitable for its commit
        (a record other than a start when the queue is full).

        Raises:
            JournalError: the start log cannot be written (the start is not recorded: its
                call is denied).
        """
        writer = self._writer
        pending = writer.pending
        unlogged = self._unlogged
        if row[3] == "tool_started":
            self._log_start(row)
        elif len(pending) < MAX_PENDING:
            pending.append((row, None))
            self._appended += 1
            unlogged.append(row)
            if len(unlogged) > _UNLOGGED_TRIM:
                self._trim_unlogged()
        else:
            self._appended += 1
            unlogged.append(row)
            return self._committed(row)
        if writer.idle:
            writer.wake.set()
        return None

    def _trim_unlogged(self) -> None:
        unlogged, through = self._unlogged, self._writer.through
        first = self._appended - len(unlogged) + 1
        while unlogged and first <= through:
            unlogged.popleft()
            first += 1

    def _log_start(self, row: PgRow) -> None:
        """Write the start ``row`` and the uncommitted records before it to the start
        log with one ``write``, then queue it.

        Raises:
            JournalError: the log cannot be written; the start's ``seq`` is given back (or,
                when a later one was handed out meanwhile, the start is recorded with a
                ``cancelled`` end), and the caller's call does not run.
        """
        start_log = self._start_log
        assert start_log is not None
        log = start_log.log
        self._trim_unlogged()
        unlogged = self._unlogged
        if unlogged:
            data = ("".join(map(pg_line, unlogged)) + pg_line(row)).encode("ascii")
        else:
            data = pg_line(row).encode("ascii")
        # One write into the page cache on the event loop thread (see write_holding_gil).
        with log.lock:
            error: OSError | None = None
            if log.broken:
                error = OSError(0, "it could not be written before")
            else:
                try:
                    log.write(log.fd, data)
                except OSError as exc:
                    error = exc
                    try:
                        os.ftruncate(log.fd, log.size)  # cut off a partial line
                    except OSError:
                        log.broken = True  # a torn line followed by more would be corrupt
            if error is None:
                log.size += len(data)
                self._writer.pending.append((row, None))
                self._appended += 1
                log.logged = self._appended
                unlogged.clear()
                return
        self._give_back(row)
        raise JournalError(
            f"cannot record the call: {start_log.path}: cannot write the start log "
            f"({error.strerror}); the call is denied"
        )

    def _give_back(self, row: PgRow) -> None:
        """Undo the ``seq`` of a start that was not recorded; when a later one was handed
        out meanwhile, queue the start with its ``cancelled`` end instead (no gap)."""
        session_id, seq = row[0], row[1]
        seqs = self._seqs
        with seqs.lock:
            if seqs.last.get(session_id) == seq:
                seqs.last[session_id] = seq - 1
                return
        end = self._writer.end_unstarted(row, _LOG_FAILED_MESSAGE)
        for queued in (row, end):
            if queued is not None:
                self._writer.pending.append((queued, None))
                self._appended += 1
                self._unlogged.append(queued)

    async def _committed(self, row: PgRow) -> None:
        """Queue ``row`` for the writer at once and wait for its commit.

        Raises:
            JournalError: the commit failed or the database is unreachable.
        """
        waiter = Waiter()
        writer = self._writer
        # Once queued the record will be written; a cancellation takes effect after the
        # answer (see Journal).
        with anyio.CancelScope(shield=True):
            if self._start_log is not None:
                writer.put((row, waiter))
            else:
                writer.pending.append((row, waiter))
                await self._commit_queued(waiter)
            await waiter.done.wait()
        if waiter.error is not None:
            raise JournalError(str(waiter.error))

    async def _commit_queued(self, waiter: Waiter) -> None:
        """Get the queued rows (``waiter``'s among them) committed: on this event loop
        when the writer thread waits, in one batch with every start queued while the
        previous batch was in flight (``_postgres_loop``), else by the thread."""
        writer = self._writer
        while not waiter.done.is_set():
            flight = writer.flight
            if flight is not None and flight.thread == threading.get_ident():
                assert self._landed is not None  # set by whoever sent it
                await self._landed.wait()  # the batch in flight, then the next one
                continue
            landed = self._landed = anyio.Event()
            try:
                here = await commit_here(writer, self.database.schema)
            finally:
                landed.set()
            if not here:
                writer.urgent = True
                writer.wake.set()
            return

    async def _claim(self, session_id: str) -> None:
        """Take ``session_id`` for this host (one round trip, at a session's first
        record); concurrent first records of a session share it.

        Raises:
            JournalError: the database is unreachable or the session is another host's.
        """
        running = self._claims.get(session_id)
        if running is not None:
            await running.wait()
            if self._seqs.known(session_id):
                return
            raise JournalError(f"cannot record session {session_id!r}: its claim failed")
        done = self._claims[session_id] = anyio.Event()
        claim = Claim(session_id)
        try:
            self._writer.put(claim)
            with anyio.CancelScope(shield=True):
                await claim.waiter.done.wait()
        finally:
            del self._claims[session_id]
            done.set()
        if claim.error is not None or claim.waiter.error is not None:
            raise JournalError(str(claim.error or claim.waiter.error))

    def _check_room(self, type_: str, pending: int) -> None:
        """With a start log, the queue's bound: a start is refused once half of it is
        used while the database is away (the other half keeps room for the ends of the
        calls running), or once it is full; another record once it is full while the
        database is away (else it waits for its commit).

        Raises:
            JournalError: no room.
        """
        down = self._writer.down
        if down is not None and (type_ == "tool_started" or pending >= MAX_PENDING):
            raise JournalError(f"{self._down_message()} ({pending} records wait for it)")
        if type_ == "tool_started" and pending >= MAX_PENDING:
            raise JournalError(
                f"cannot record the call: {pending} records wait for {self.database.label}; "
                "the call is denied"
            )

    def _down_message(self) -> str:
        return (
            f"cannot record the call: {self.database.label} is unreachable "
            f"({self._writer.down}); calls are denied until it returns"
        )

    async def flush(self) -> None:
        """Wait until every record appended so far is committed.

        Raises:
            JournalError: the database is unreachable or the journal failed.
        """
        await self._run_after_commits(lambda conn: None)

    async def aclose(self) -> None:
        """Commit what is queued (trying for a few seconds if the database is away), stop
        the writer and close (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._writer.stop()
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._writer.join)
        if self._owned:
            self.database.close()
        self._release_log()

    def close(self) -> None:
        """:meth:`aclose` for synchronous code (blocks until the writer has stopped)."""
        if self._closed:
            return
        self._closed = True
        self._stop_now()

    def _stop_now(self) -> None:
        self._settle()
        self._writer.put(STOP)
        self._writer.join()
        if self._owned:
            self.database.close()
        self._release_log()

    def _settle(self) -> None:
        """Before a synchronous wait for the writer thread: finish the batch this thread's
        event loop has in flight (the thread would wait for it, and it for this wait)."""
        flight = self._writer.flight
        if flight is not None and flight.thread == threading.get_ident():
            flight.settle()

    def _release_log(self) -> None:
        if self._start_log is not None:
            self._start_log.close(remove=False)  # the writer removed it if it could
        if self._log_lock is not None:
            self._log_lock.release()

    # -- reading ------------------------------------------------------------------------

    def events(
        self, *, session_id: str | None = None, call_id: str | None = None
    ) -> list[JournalEvent]:
        """Every record of this database (of one session and/or call; every host's), in
        ``seq`` order within a session and commit order across sessions.

        Synchronous: it waits until this host's queued records are committed, then reads
        (milliseconds; do not call it per event from a busy event loop).

        Raises:
            JournalError: the database is unreachable.
        """
        schema = self.database.schema

        def query(conn: Connection) -> list[JournalEvent]:
            where, params = [], []
            if session_id is not None:
                where.append("session_id = %s")
                params.append(session_id)
            if call_id is not None:
                where.append("call_id = %s")
                params.append(call_id)
            sql = f"SELECT {COLUMNS} FROM {schema}.events"
            if where:
                sql += " WHERE " + " AND ".join(where)
            sql += " ORDER BY seq" if session_id is not None else " ORDER BY id"
            return [event_from_pg(tuple(r)) for r in conn.execute(sql.encode(), params)]

        if self._closed or not self._writer.is_alive():
            return self._read_alone(query)
        self._settle()
        control = PgControl(query)
        self._writer.put(control)
        try:
            result: list[JournalEvent] = control.future.result(timeout=60)
        except concurrent.futures.TimeoutError:
            raise JournalError(f"{self.database.label}: reading the journal timed out") from None
        return result

    def _read_alone(self, query: Any) -> list[JournalEvent]:
        """Read without the writer (closed, or stopped): a closed journal reads as every
        sink does, over a connection of its own once its database closed with it."""
        import psycopg

        database = self.database
        try:
            if not database.closed:
                result: list[JournalEvent] = database.run("read the journal", query, read=True)
                return result
            with database.connect() as conn:
                result = query(conn)
                return result
        except StoreError as exc:
            raise JournalError(str(exc)) from None
        except psycopg.Error as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise JournalError(f"{database.label}: cannot read the journal: {first}") from None

    async def _run_after_commits(self, fn: Any) -> Any:
        control = PgControl(fn)
        self._writer.put(control)
        with anyio.CancelScope(shield=True):
            return await anyio.to_thread.run_sync(control.future.result)
