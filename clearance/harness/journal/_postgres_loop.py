"""Committing an awaited start on the event loop itself, while the writer thread waits.

A start (``tool_started``, with the records queued before it) must be committed on the
server before its call runs. Handing it to the writer thread and back costs two thread
switches, each a wake-up that a loaded machine may make wait: at one session, about half
of what a call costs (issue 34). When the thread waits for work (its connection lock is
free) and the connection is up, the event loop takes the connection and sends the rows
itself, as one prepared multi-row ``INSERT`` over libpq's non-blocking calls: the loop
waits for the socket, never blocks, and other sessions run meanwhile.

Group commit: one batch is in flight per event loop. A start appended meanwhile waits for
it to land, then the first of them sends everything queued by then in the next batch (all
the starts that waited, and the records before them), and each caller is woken when its
batch is committed. A failed batch fails every call in it closed (rule R1): a lost
connection answers each waiter with the error and leaves the rows to be written again
after the reconnection, as in the thread; a statement the server refuses (nothing
committed) goes back to the head of the queue, for the thread's handling of a refused row.
Everything else (a control, a stop, a batch bigger than :data:`LOOP_ROWS` for ``COPY``,
rows to write again, reconnecting) stays the thread's.
"""

from __future__ import annotations

import select
import threading
from collections.abc import Callable
from typing import Final

import anyio
import anyio.lowlevel
from psycopg import OperationalError, pq

from clearance.harness.journal._postgres_host import PgRow, values_sql
from clearance.harness.journal._postgres_writer import PgWriter
from clearance.harness.journal._sqlite_writer import Waiter, wake_waiters
from clearance.harness.postgres import Connection

__all__ = ["LOOP_ROWS", "Flight", "commit_here"]

LOOP_ROWS: Final = 64
"""Rows the event loop sends at most (one prepared statement per count); more are the
thread's (``COPY``)."""


class _Refused(Exception):
    """The server refused the statement; nothing was committed."""


class Flight:
    """One batch sent from the event loop: :meth:`poll` advances it without blocking,
    :meth:`settle` finishes it blocking (for a synchronous caller on the loop's thread),
    :meth:`land` applies the outcome once."""

    def __init__(
        self,
        writer: PgWriter,
        conn: Connection,
        items: list[tuple[PgRow, Waiter | None]],
        schema: str,
    ) -> None:
        self.writer = writer
        self.items = items
        self.pgconn = conn.pgconn
        self.thread = threading.get_ident()
        self.scope = anyio.CancelScope()
        """Around the loop's waits for the socket: cancelled when :meth:`settle` finished
        the batch."""
        self.error: BaseException | None = None
        self.landed = False
        count = len(items)
        name = b"clearance_rows_%d" % count
        params = _params(items, writer.host)
        pgconn = self.pgconn
        self._steps: list[Callable[[], None]] = []
        if count not in writer.loop_prepared:
            self._steps.append(lambda: pgconn.send_prepare(name, values_sql(schema, count)))
        self._steps.append(lambda: pgconn.send_query_prepared(name, params))
        self._prepares = count if count not in writer.loop_prepared else None
        self._sent = False
        self.writing = False
        """Waiting to send the rest of the statement (the socket's buffer was full)."""

    def poll(self) -> bool:
        """Send and read what can be without blocking; True once the batch is over (its
        outcome in :attr:`error`: None when committed)."""
        pgconn = self.pgconn
        try:
            while True:
                if not self._sent:
                    if not self._steps or self.error is not None:
                        return True
                    self._steps.pop(0)()
                    self._sent = True
                self.writing = bool(pgconn.flush())
                if self.writing:
                    return False
                pgconn.consume_input()
                while not pgconn.is_busy():
                    result = pgconn.get_result()
                    if result is None:  # this statement is over
                        self._sent = False
                        break
                    if result.status != pq.ExecStatus.COMMAND_OK and self.error is None:
                        message = (result.error_message or b"").decode(errors="replace")
                        self.error = (
                            OperationalError(message)
                            if pgconn.status == pq.ConnStatus.BAD
                            else _Refused(message)
                        )
                else:
                    return False
                if self.error is None and self._prepares is not None:
                    self.writer.loop_prepared.add(self._prepares)
                    self._prepares = None
        except OperationalError as exc:  # the connection is lost
            self.error = exc
            return True

    async def run(self) -> None:
        """Wait for the socket until the batch is over (or :meth:`settle` ended it).

        Interrupted before it is (a native cancellation pierces the caller's shield), the
        batch counts as lost: whether it was committed is unknown, so the connection is
        closed, every call in it is denied and its rows are written again once
        reconnected, rather than the connection left taken for good."""
        fd = self.pgconn.socket
        try:
            with self.scope:
                while not self.poll():
                    if self.writing:
                        await anyio.wait_writable(fd)
                    else:
                        await anyio.wait_readable(fd)
        except BaseException as exc:
            if not self.landed:
                self.error = OperationalError(f"the batch was interrupted ({exc!r})")
                self.land()
            raise
        self.land()

    def settle(self) -> None:
        """Finish the batch blocking, on the event loop's thread, whose task sending it
        is suspended (a synchronous read or close would otherwise wait for a thread that
        waits for this batch)."""
        fd = self.pgconn.socket if not self.landed else -1
        while not self.landed and not self.poll():
            if self.writing:
                select.select([], [fd], [], 1.0)
            else:
                select.select([fd], [], [], 1.0)
        self.land()
        self.scope.cancel()

    def land(self) -> None:
        """Apply the outcome (once): wake the waiters, or fail them closed."""
        if self.landed:
            return
        self.landed = True
        writer, items, error = self.writer, self.items, self.error
        writer.flight = None
        if error is None:
            _wake_here(writer.landed(items))
        elif isinstance(error, OperationalError):
            writer.lost(error, items)
        else:
            writer.give_back(items)


async def commit_here(writer: PgWriter, schema: str) -> bool:
    """Commit every queued row (the caller's start among them) on the event loop and wake
    their waiters; False when the thread has to (see the module docstring)."""
    taken = writer.take(LOOP_ROWS)
    if taken is None:
        return False
    conn, items = taken
    try:
        flight = Flight(writer, conn, items, schema)
    except UnicodeEncodeError:  # the thread refuses such a row alone
        writer.give_back(items)
        return True
    writer.flight = flight
    await flight.run()
    return True


def _params(items: list[tuple[PgRow, Waiter | None]], host: str) -> list[bytes | None]:
    """The statement's parameters in PostgreSQL's text format, nine a row."""
    params: list[bytes | None] = []
    host_text = host.encode()
    for (session_id, seq, ts, type_, turn_id, call_id, version, data), _ in items:
        params += (
            session_id.encode(),
            b"%d" % seq,
            host_text,
            repr(float(ts)).encode(),
            type_.encode(),
            None if turn_id is None else turn_id.encode(),
            None if call_id is None else call_id.encode(),
            b"%d" % version,
            data.encode(),
        )
    return params


def _wake_here(waiters: list[Waiter]) -> None:
    """Wake ``waiters``: those of this event loop at once, others in their own loop."""
    token = anyio.lowlevel.current_token()
    here = [w for w in waiters if w.token.native_token is token.native_token]
    for waiter in here:
        waiter.error = None
        waiter.done.set()
    if len(here) < len(waiters):
        wake_waiters([w for w in waiters if w.token.native_token is not token.native_token], None)
