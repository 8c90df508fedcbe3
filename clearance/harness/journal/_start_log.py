"""The SQLite journal's start log: how ``append("tool_started")`` returns without waiting
for the writer thread.

The start log (``<path>-starts`` beside the real file, ``"normal"`` durability only)
holds, before ``append`` of a start returns, the start and every record before it not yet
committed, written with one ``write`` (one JSON array per line: the row's columns,
``data`` last as raw JSON). A process crash cannot lose the operating system's copy of
either file, so the next open restores the rows the database lacks (see
``_sqlite_recovery``); the database and the log together always hold every record up to
the last start, so ``seq`` has no gaps. The writer thread truncates the log once all it
holds is committed (or, when records keep coming, replaces it with a file holding only
what is not), and a clean close removes it.
"""

from __future__ import annotations

import ctypes
import errno
import json
import logging
import os
import threading
from collections.abc import Callable
from json.encoder import encode_basestring_ascii
from pathlib import Path

from clearance._limits import storable
from clearance.errors import JournalError
from clearance.harness.journal._durable import Durability
from clearance.harness.journal._event import encode_data
from clearance.harness.journal._sqlite_schema import Row

__all__ = [
    "StartLog",
    "open_start_log",
    "parse_line",
    "read_start_log",
    "row_line",
    "set_aside",
    "write_all",
    "write_holding_gil",
]

_log = logging.getLogger("clearance")

_MAX_SEQ = 1 << 63
"""SQLite's and PostgreSQL's integers are 64-bit."""


def row_line(row: Row) -> str:
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


def parse_line(line: bytes) -> Row:
    """A start-log line back as the row it was written from.

    Raises:
        ValueError: the line is not a row, or a row no store can hold (an id with a NUL or
            a lone surrogate, a ``seq`` out of range).
    """
    value = json.loads(line)
    if not (isinstance(value, list) and len(value) == 8 and type(value[0]) is int):
        raise ValueError("not a row")
    seq, ts, type_, session_id, turn_id, call_id, version, data = value
    if not 0 < seq < _MAX_SEQ:
        raise ValueError("seq is out of range")
    if not isinstance(ts, int | float) or isinstance(ts, bool):
        raise ValueError("ts is not a number")
    if type(version) is not int or not -_MAX_SEQ < version < _MAX_SEQ:
        raise ValueError("version is not an integer")
    if not isinstance(type_, str) or not isinstance(session_id, str):
        raise ValueError("type or session_id is not a string")
    for column in (type_, session_id, turn_id, call_id):
        if isinstance(column, str) and not storable(column):
            raise ValueError("an id holds a NUL or a lone surrogate")
        if isinstance(column, int) and not -_MAX_SEQ < column < _MAX_SEQ:
            raise ValueError("an id is out of range")
    # Encoded by the same encoder as on append: the same text as the row had.
    return (seq, float(ts), type_, session_id, turn_id, call_id, version, encode_data(data))


def read_start_log(path: Path) -> list[Row]:
    """The rows of a start log (none when it is missing); a torn last line is skipped.

    A line that is not a row a store can hold never stops the journal from opening: it is
    reported and set aside, appended to ``<path>.rejected``, and the other rows are kept.

    Raises:
        JournalError: the file cannot be read, or a line cannot be set aside.
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
            rows.append(parse_line(line))
        except (ValueError, TypeError, RecursionError) as exc:
            if number == len(lines) and not line.endswith(b"\n"):
                _log.warning("%s: ignoring a line torn by a crash", path)
                break
            set_aside(path, line, f"line {number}: not a start-log record ({exc})")
    return rows


def set_aside(path: Path, line: bytes, why: str) -> None:
    """Keep a start-log line the journal cannot restore in ``<path>.rejected`` (mode
    0600), and say so.

    Raises:
        JournalError: the file cannot be written.
    """
    rejected = Path(f"{path}.rejected")
    if not line.endswith(b"\n"):
        line += b"\n"
    try:
        fd = os.open(rejected, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            write_all(fd, line)
        finally:
            os.close(fd)
    except OSError as exc:
        raise JournalError(
            f"{path}: {why}, and it cannot be set aside in {rejected.name}: {exc.strerror}"
        ) from None
    _log.error("%s: %s; set aside in %s, the other records are kept", path, why, rejected.name)


def write_all(fd: int, data: bytes) -> int:
    """Write ``data`` whole with ``os.write`` (which releases the GIL); its length."""
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


def write_holding_gil(fd: int, data: bytes) -> None:
    """Write ``data`` whole, from the event loop thread.

    A small write keeps the GIL. The write itself is a copy into the page cache (a few
    microseconds), but ``os.write`` releases the GIL around it, and the journal's writer
    thread, next to a busy event loop, is nearly always waiting for the GIL: it takes it
    and the loop waits for its Python work. Measured on a 2-vCPU VM: 10 us per start at
    the median with ``os.write``, 2 us holding the GIL.
    """
    write = _WRITE_HOLDING_GIL
    if write is None or len(data) > _HOLD_GIL_UP_TO:
        write_all(fd, data)
        return
    while data:
        written = write(fd, data, len(data))
        if written < 0:
            error = ctypes.get_errno()
            if error == errno.EINTR:
                continue
            raise OSError(error, os.strerror(error))
        data = data[written:]


class StartLog:
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

    def __init__(self, path: Path, *, truncate: bool = True) -> None:
        self.path = path
        self.lock = threading.Lock()  # writes vs truncation and replacement
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            if truncate:
                os.ftruncate(self.fd, 0)  # its rows were restored by the open
            # else: the rows are not restored yet (PostgresJournal truncates it later)
            size = 0 if truncate else os.fstat(self.fd).st_size
        except OSError:
            os.close(self.fd)
            raise
        self.size = size
        self.logged = 0
        """The highest ``seq`` written (every earlier row is written or committed)."""
        self.truncated_at = 0
        """The writer's commit count at the last truncation or replacement."""
        self.base = 0
        """The size right after the last replacement (0 after a truncation)."""
        self.broken = False
        """A write failed: the log is no longer written (it is still truncated)."""
        self.write: Callable[[int, bytes], object] = write_holding_gil
        """How a line is written (:func:`write_all` to compare in benchmarks)."""

    def mark_broken(self, exc: OSError) -> None:
        """Stop writing the start log (call under its lock): later starts wait for their
        commit, as with ``"full"`` but without the fsync. What it holds stays until
        committed."""
        self.broken = True
        try:
            os.ftruncate(self.fd, self.size)  # cut off a partial line
        except OSError:
            pass  # a torn last line is ignored at the next open
        _log.warning(
            "%s: cannot write the start log (%s); tool_started now waits for its commit",
            self.path,
            exc.strerror,
        )


def open_start_log(path: Path, durability: Durability) -> StartLog | None:
    """After recovery: an empty start log for ``"normal"``, none (and no file) otherwise.

    Raises:
        JournalError: the file cannot be created, truncated or removed.
    """
    try:
        Path(f"{path}.tmp").unlink(missing_ok=True)  # a replacement a crash interrupted
        if durability == "normal":
            return StartLog(path)
        path.unlink(missing_ok=True)
    except OSError as exc:
        raise JournalError(f"{path}: cannot open the start log: {exc.strerror}") from None
    return None
