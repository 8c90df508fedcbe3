"""``JsonlJournal``: one JSON record per line in an append-only file, and its reader."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import anyio
import anyio.to_thread

from clearance.errors import JournalError
from clearance.harness.journal._durable import (
    Durability,
    FileLock,
    asked_end,
    check_durability,
    interrupted_end,
)
from clearance.harness.journal._event import EVENT_TYPES, JournalEvent, encode_data, matches

__all__ = ["JsonlJournal", "read_jsonl"]

_log = logging.getLogger("clearance")


class JsonlJournal:
    """An append-only file with one JSON record per line (:meth:`JournalEvent.to_json`).

    Simple to ship, grep and tail; :class:`SqliteJournal` is the better store for
    anything long-lived (indexed reads, no full read at open). Each append is one
    ``write`` of a whole line on the event loop thread (a page-cache copy, microseconds);
    with ``durability="full"`` the ``fsync`` runs in a worker thread.

    Guarantees: ``"normal"`` (default): every line whose ``append`` returned is in the
    operating system and survives a crash of the process, not necessarily a power loss.
    ``"full"``: every line whose ``append`` returned was fsync'd and survives a power
    loss. ``"off"``: lines are buffered in the process (up to 64 KiB) and a crash loses
    the buffer. A line torn by a power loss is cut off at the next open.

    Opening reads the whole file: it continues ``seq`` and appends an ``interrupted``
    ``tool_finished`` for every ``tool_started`` without an end (rule R7), and an
    ``interrupted`` ``call_decided`` for every call that waited on its ask when the process
    stopped (a ``permission_asked`` with no ``call_decided`` after it), as SQLite does. One writer at a
    time: a second open of the same file for writing raises :class:`JournalError`.

    Args:
        path: the file; created (mode 0600) when missing.
        durability: ``"full"``, ``"normal"`` or ``"off"`` as above.

    Raises:
        JournalError: the file cannot be opened, is locked by another writer, or holds
            a line that is not a journal record.
    """

    _BUFFER = 64 * 1024

    def __init__(self, path: str | os.PathLike[str], *, durability: Durability = "normal") -> None:
        self.path = Path(path)
        self.durability = check_durability(durability)
        self._closed = False
        self._buffer: list[bytes] = []
        self._buffered = 0
        self._lock = FileLock(self.path)
        try:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        except OSError as exc:
            self._lock.release()
            raise JournalError(f"{self.path}: cannot open the journal: {exc.strerror}") from None
        try:
            self._recover()
        except BaseException:
            os.close(self._fd)
            self._lock.release()
            raise

    def _recover(self) -> None:
        try:
            raw = self.path.read_bytes()
        except OSError as exc:
            raise JournalError(f"{self.path}: cannot read the journal: {exc.strerror}") from None
        events, torn = read_jsonl(raw, str(self.path), repair=True)
        self._seq = max((e.seq for e in events), default=0)
        if torn is not None:
            _log.warning("%s: cutting off a line torn by a crash at byte %d", self.path, torn)
            os.truncate(self.path, torn)
        elif raw and not raw.endswith(b"\n"):
            self._write_now(b"\n")  # a whole record that lost only its newline
        # A start without its end, and a call that waited on its ask when the process
        # stopped (a permission_asked and no call_decided after it), as SQLite recovers.
        open_starts: dict[tuple[str, str | None], JournalEvent] = {}
        open_asks: dict[tuple[str, str | None], JournalEvent] = {}
        for event in events:
            key = (event.session_id, event.call_id)
            if event.type == "tool_started":
                open_starts[key] = event
            elif event.type == "tool_finished":
                open_starts.pop(key, None)
            elif event.type == "permission_asked":
                open_asks[key] = event
            elif event.type == "call_decided":
                open_asks.pop(key, None)
        ends = [
            *map(interrupted_end, sorted(open_starts.values(), key=lambda e: e.seq)),
            *map(asked_end, sorted(open_asks.values(), key=lambda e: e.seq)),
        ]
        if ends:
            for end in ends:
                self._write_now(self._line(end))
            os.fsync(self._fd)
            _log.warning(
                "%s: marked %d unfinished call(s) interrupted (%d waiting on an ask)",
                self.path,
                len(ends),
                len(open_asks),
            )

    def _line(self, event: JournalEvent) -> bytes:
        self._seq += 1
        event.seq = self._seq
        return (encode_data(event.to_json()) + "\n").encode("ascii")

    def _write_now(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]

    def _flush_buffer(self) -> None:
        if self._buffer:
            data = b"".join(self._buffer)
            self._buffer.clear()
            self._buffered = 0
            self._write_now(data)

    async def append(self, event: JournalEvent) -> JournalEvent:
        """Write ``event`` as one line; assigns its ``seq``.

        Raises:
            JournalError: the journal is closed or the file cannot be written.
        """
        if self._closed:
            raise JournalError(f"{self.path}: the journal is closed")
        line = self._line(event)
        try:
            if self.durability == "off":
                self._buffer.append(line)
                self._buffered += len(line)
                if self._buffered >= self._BUFFER:
                    self._flush_buffer()
                return event
            self._write_now(line)
            if self.durability == "full":
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(os.fsync, self._fd)
        except OSError as exc:
            raise JournalError(f"{self.path}: cannot write the journal: {exc.strerror}") from None
        return event

    async def flush(self) -> None:
        """Write buffered lines (``durability="off"``) and fsync the file."""
        if self._closed:
            return
        self._flush_buffer()
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(os.fsync, self._fd)

    def close(self) -> None:
        """Write what is buffered and close the file (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._flush_buffer()
            if self.durability != "off":
                os.fsync(self._fd)
        finally:
            os.close(self._fd)
            self._lock.release()

    async def aclose(self) -> None:
        """Write what is buffered and close the file (idempotent)."""
        self.close()

    def events(
        self, *, session_id: str | None = None, call_id: str | None = None
    ) -> list[JournalEvent]:
        """Every record (of one session and/or call), in ``seq`` order; reads the file."""
        if not self._closed:
            self._flush_buffer()
        try:
            raw = self.path.read_bytes()
        except OSError as exc:
            raise JournalError(f"{self.path}: cannot read the journal: {exc.strerror}") from None
        events, _ = read_jsonl(raw, str(self.path))
        return [e for e in events if matches(e, session_id, call_id)]


def read_jsonl(
    raw: bytes, where: str, *, repair: bool = False
) -> tuple[list[JournalEvent], int | None]:
    """Parse JSON-lines journal bytes into events.

    A last line without its newline that does not parse is a write torn by a crash: with
    ``repair`` its start offset is returned so the caller can cut it off; without, it is
    skipped. Any other unparsable line raises.

    Raises:
        JournalError: a line is not a journal record.
    """
    events: list[JournalEvent] = []
    torn: int | None = None
    offset = 0
    for number, line in enumerate(raw.splitlines(keepends=True), 1):
        start, offset = offset, offset + len(line)
        if not line.strip():
            continue
        try:
            value = json.loads(line)
            event = JournalEvent.from_json(value)
            if event.type not in EVENT_TYPES or not isinstance(event.session_id, str):
                raise ValueError(f"unknown record type {event.type!r}")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            # A torn last line; when only reading, a file of nothing else is no journal.
            if offset == len(raw) and not line.endswith(b"\n") and (repair or events):
                torn = start if repair else None
                break
            raise JournalError(f"{where}:{number}: not a journal record ({exc})") from None
        events.append(event)
    return events, torn
