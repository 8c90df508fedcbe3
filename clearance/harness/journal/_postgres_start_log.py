"""The PostgreSQL journal's local start log (``PostgresJournal(start_log=PATH)``): the
SQLite journal's promise for a journal in PostgreSQL.

Before ``append("tool_started")`` returns, the start and every record appended before it
and not yet committed are written to a local file with one ``write`` (into the operating
system's page cache, no fsync; the same lines as ``SqliteJournal``'s start log, see
``_start_log``); the writer thread commits them in the background. A crash of the process
cannot lose the operating system's copy, so the next open as the same host inserts the
rows the server lacks (``ON CONFLICT (session_id, seq) DO NOTHING``) before it closes the
unfinished starts as ``interrupted``. The loss of the host's disk loses what only the log
held: that is the difference from the server commit of plain ``"normal"``.

Records are counted in the order they are queued (the *ordinal*; ``seq`` is per
session): the writer publishes how far everything is committed (``through``), the log how
far it holds (``logged``). The writer truncates the log once all it holds is committed
(every :data:`LOG_EVERY` commits, at a flush, or at :data:`LOG_MAX` bytes). When starts
keep coming so that the log never is wholly committed, at :data:`LOG_MAX` bytes it moves
the log aside (``PATH.old``) and starts a new one, and removes the old one once all it
held is committed; opening reads both. A clean close removes the log.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from clearance.errors import JournalError
from clearance.harness.journal._postgres_host import PgRow
from clearance.harness.journal._sqlite_writer import LOG_EVERY, LOG_MAX
from clearance.harness.journal._start_log import StartLog, read_start_log, row_line, set_aside

__all__ = ["PgStartLog", "pg_line", "read_pg_start_log"]

_log = logging.getLogger("clearance")


def pg_line(row: PgRow) -> str:
    """A PostgreSQL row as a start-log line (the SQLite journal's column order)."""
    session_id, seq, ts, type_, turn_id, call_id, version, data = row
    return row_line((seq, ts, type_, session_id, turn_id, call_id, version, data))


def read_pg_start_log(path: Path) -> list[PgRow]:
    """The rows a start log holds (the moved-aside one first); a torn last line is
    skipped.

    Raises:
        JournalError: a file cannot be read, or a line that is not a record (or whose id
            is not a string) cannot be set aside (see ``read_start_log``).
    """
    rows: list[PgRow] = []
    for part in (Path(f"{path}.old"), path):
        for row in read_start_log(part):
            seq, ts, type_, session_id, turn_id, call_id, version, data = row
            if not (
                isinstance(session_id, str)
                and isinstance(type_, str)
                and (turn_id is None or isinstance(turn_id, str))
                and (call_id is None or isinstance(call_id, str))
                and type(version) is int
            ):
                set_aside(part, row_line(row).encode("ascii"), "not a record of PostgresJournal")
                continue
            rows.append((session_id, seq, ts, type_, turn_id, call_id, version, data))
    return rows


class PgStartLog:
    """The open start log: written by the event loop (under :attr:`log`'s lock), kept
    small by the writer thread.

    Raises:
        JournalError: the file cannot be opened.
    """

    def __init__(self, path: Path) -> None:
        try:
            # Not truncated here: its rows are restored by the writer's first open.
            self.log = StartLog(path, truncate=False)
        except OSError as exc:
            raise JournalError(f"{path}: cannot open the start log: {exc.strerror}") from None
        self.path = path
        self.old = Path(f"{path}.old")
        self.old_logged: int | None = None
        """The ordinal the moved-aside log holds up to (None: there is none)."""

    def reset(self) -> None:
        """After the first open restored the rows: empty the log, remove the old one."""
        log = self.log
        with log.lock:
            os.ftruncate(log.fd, 0)
            log.size = 0
        self.old.unlink(missing_ok=True)
        self.old_logged = None

    def tend(self, through: int, commits: int, force: bool) -> None:
        """Keep the log small; ``through``: every record up to this ordinal is committed
        (called by the writer after its commits)."""
        log = self.log
        if self.old_logged is not None and through >= self.old_logged:
            try:
                self.old.unlink(missing_ok=True)
            except OSError as exc:
                _log.warning("%s: cannot remove: %s", self.old, exc.strerror)
            else:
                self.old_logged = None
        if not log.size or log.broken:
            return
        if log.logged <= through:
            if not force and log.size < LOG_MAX and commits - log.truncated_at < LOG_EVERY:
                return
            log.truncated_at = commits
            with log.lock:
                if log.logged <= through:  # no start written meanwhile
                    try:
                        os.ftruncate(log.fd, 0)
                    except OSError as exc:
                        _log.warning("%s: cannot truncate: %s", self.path, exc.strerror)
                    else:
                        log.size = 0
                    return
        if log.size >= LOG_MAX and self.old_logged is None:
            self._move_aside()

    def _move_aside(self) -> None:
        """Start a new log; the current one becomes ``PATH.old`` until it is committed."""
        log = self.log
        try:
            fd = os.open(
                f"{self.path}.new", os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_TRUNC, 0o600
            )
        except OSError as exc:
            _log.warning("%s: cannot start a new start log: %s", self.path, exc.strerror)
            return
        with log.lock:
            try:
                os.replace(self.path, self.old)
                os.replace(f"{self.path}.new", self.path)
            except OSError as exc:
                _log.warning("%s: cannot start a new start log: %s", self.path, exc.strerror)
                os.close(fd)
                return
            old_fd, log.fd, log.size = log.fd, fd, 0
            self.old_logged = log.logged
        os.close(old_fd)

    def close(self, *, remove: bool) -> None:
        """Stop writing it; ``remove``: everything it held is committed (a clean close)."""
        log = self.log
        with log.lock:
            if log.fd < 0:
                return
            os.close(log.fd)
            log.fd = -1
            log.broken = True
        if remove:
            for path in (self.path, self.old):
                try:
                    path.unlink(missing_ok=True)
                except OSError as exc:
                    _log.warning("%s: cannot remove: %s", path, exc.strerror)
