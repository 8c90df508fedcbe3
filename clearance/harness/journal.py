"""The journal: every step of every call, in order.

Each record has ``version``, ``seq`` (monotonic per journal, continued after a reopen),
``ts`` (Unix seconds), ``session_id``, ``turn_id``, ``call_id``, ``type`` and ``data``. Types:

- ``session_created``: principal, agent, selected tools; ``session_closed``;
- ``call_decided``: the explanation record, exactly one per call that entered the pipeline
  (schema check, each guardrail outcome, the verdict with reasons and errors, the ask and
  its answer, the grant used, the outcome, and the time each stage took in microseconds);
- ``permission_asked`` / ``permission_decided``;
- ``tool_started`` (final arguments, withheld values replaced), ``tool_progress``,
  ``tool_finished`` (status ``ok | error | failed | blocked | cancelled | timeout |
  interrupted``).

Rule R7: a call that started has exactly one ``tool_started`` and one ``tool_finished``.
Opening a durable journal (:class:`JsonlJournal`, :class:`SqliteJournal`) appends a
``tool_finished`` with status ``interrupted`` for every start left without an end by a
crash. Rule R8: sensitive or redacted values never reach a record (the pipeline withholds
them before it appends).

Sinks: :class:`MemoryJournal` (tests, short-lived apps), :class:`JsonlJournal` (one JSON
object per line, append-only) and :class:`SqliteJournal` (the embedded default: WAL, one
writer thread, indexed reads). The write path never validates: ``data`` is a plain dict,
encoded once. The pydantic models below (:func:`parse_event`) describe and check the
stored form for readers, exporters and tests.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol, TypeAlias, runtime_checkable

import anyio
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from clearance.errors import JournalError

if TYPE_CHECKING:
    from clearance.harness.journal_sqlite import SqliteJournal

__all__ = [
    "EVENT_TYPES",
    "JOURNAL_VERSION",
    "AskRecord",
    "CallDecidedData",
    "CallDecidedRecord",
    "Durability",
    "EventItem",
    "EventRecord",
    "GuardrailRecord",
    "JsonlJournal",
    "Journal",
    "JournalEvent",
    "MemoryJournal",
    "PermissionAskedData",
    "PermissionAskedRecord",
    "PermissionDecidedData",
    "PermissionDecidedRecord",
    "ResultReference",
    "SchemaCheck",
    "SessionClosedData",
    "SessionClosedRecord",
    "SessionCreatedData",
    "SessionCreatedRecord",
    "ShadowRecord",
    "SqliteJournal",
    "ToolFinishedData",
    "ToolFinishedRecord",
    "ToolProgressData",
    "ToolProgressRecord",
    "ToolStartedData",
    "ToolStartedRecord",
    "VerdictRecord",
    "encode_data",
    "event_json_schema",
    "parse_event",
    "read_journal",
]

log = logging.getLogger("clearance")

JOURNAL_VERSION = 1
"""Version of the record format, stored in every record's ``version`` field."""

EventType = Literal[
    "session_created",
    "session_closed",
    "call_decided",
    "permission_asked",
    "permission_decided",
    "tool_started",
    "tool_progress",
    "tool_finished",
]
EVENT_TYPES: tuple[str, ...] = EventType.__args__  # type: ignore[attr-defined]

Durability = Literal["full", "normal", "off"]
"""How far ``append`` waits before it returns (see :class:`SqliteJournal`):

- ``"full"``: every event is on stable storage (fsync) before its ``append`` returns;
- ``"normal"`` (default): ``tool_started``, and every event appended before it, is written
  to the operating system before its ``append`` returns (the handler never runs
  unrecorded); other events are written in the background, in order, within milliseconds;
- ``"off"``: nothing waits; the newest events can be lost in a crash.
"""

INTERRUPTED_MESSAGE = "the process stopped before the call finished; its effect is unknown"


@dataclass(slots=True)
class JournalEvent:
    """One journal record. ``seq`` is assigned by the journal when it is appended.

    Construction is deliberately cheap (no validation): the pipeline builds several per
    call. :func:`parse_event` checks one against the documented form.
    """

    type: EventType
    session_id: str
    turn_id: str | None
    call_id: str | None
    """``None`` for session records."""
    data: dict[str, Any]
    """The type's fields (see the ``*Data`` models); withheld values already replaced."""
    ts: float = field(default_factory=time.time)
    """Unix time in seconds."""
    seq: int = 0
    """Set by the journal's ``append``: 1, 2, 3... per journal."""
    version: int = JOURNAL_VERSION

    def to_json(self) -> dict[str, Any]:
        """The stable JSON form (the line a :class:`JsonlJournal` stores)."""
        return {
            "version": self.version,
            "seq": self.seq,
            "ts": self.ts,
            "type": self.type,
            "session_id": self.session_id,
            "turn_id": self.turn_id,
            "call_id": self.call_id,
            "data": self.data,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> JournalEvent:
        """Rebuild an event from :meth:`to_json` output (not validated)."""
        return cls(
            type=raw["type"],
            session_id=raw["session_id"],
            turn_id=raw.get("turn_id"),
            call_id=raw.get("call_id"),
            data=raw.get("data") or {},
            ts=float(raw.get("ts", 0.0)),
            seq=int(raw.get("seq", 0)),
            version=int(raw.get("version", JOURNAL_VERSION)),
        )


@runtime_checkable
class Journal(Protocol):
    """Where events go.

    ``append`` assigns ``seq`` and returns once the event is recorded as durably as the
    sink promises; the pipeline awaits it for ``tool_started`` before running a handler.
    Once ``append`` is called the event is recorded even if the caller is cancelled while
    it waits (a cancellation takes effect after it returns).
    """

    async def append(self, event: JournalEvent) -> JournalEvent: ...

    async def aclose(self) -> None: ...

    def events(
        self, *, session_id: str | None = None, call_id: str | None = None
    ) -> Iterable[JournalEvent]: ...


# --- encoding ------------------------------------------------------------------------------


def _json_default(value: object) -> object:
    # Never the value's repr: it could carry a withheld string (R8).
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    return f"<{type(value).__name__}>"


# One encoder, built once: json.dumps with options builds a new one per call. ASCII-only
# output cannot fail to encode (lone surrogates), for SQLite and files alike.
_ENCODER = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"), default=_json_default)


def encode_data(value: Any) -> str:
    """Encode a record (or its ``data``) as compact, ASCII-only JSON.

    Values that are not JSON become ``"<TypeName>"`` rather than failing the append.
    """
    return _ENCODER.encode(value)


def _wants_wait(durability: Durability, event_type: str) -> bool:
    return durability == "full" or (durability == "normal" and event_type == "tool_started")


def _check_durability(durability: str) -> Durability:
    if durability not in ("full", "normal", "off"):
        raise ValueError(f"durability must be 'full', 'normal' or 'off', not {durability!r}")
    return durability  # type: ignore[return-value]


def _interrupted(started: JournalEvent) -> JournalEvent:
    """The ``tool_finished`` that closes a start a crash left open (rule R7)."""
    data = started.data
    return JournalEvent(
        "tool_finished",
        started.session_id,
        started.turn_id,
        started.call_id,
        {
            "tool": data.get("tool"),
            "qualified_name": data.get("qualified_name"),
            "model_alias": data.get("model_alias"),
            "status": "interrupted",
            "duration_us": None,
            "correlation_id": data.get("correlation_id"),
            "message": INTERRUPTED_MESSAGE,
            "started_seq": started.seq,
        },
    )


def _matches(event: JournalEvent, session_id: str | None, call_id: str | None) -> bool:
    return (session_id is None or event.session_id == session_id) and (
        call_id is None or event.call_id == call_id
    )


# --- sinks ---------------------------------------------------------------------------------


class MemoryJournal:
    """Keeps events in a list; for tests, benchmarks and short-lived apps."""

    def __init__(self) -> None:
        self._events: list[JournalEvent] = []

    async def append(self, event: JournalEvent) -> JournalEvent:
        """Keep ``event``; assigns its ``seq``."""
        event.seq = len(self._events) + 1
        self._events.append(event)
        return event

    async def aclose(self) -> None:
        return None

    def events(
        self, *, session_id: str | None = None, call_id: str | None = None
    ) -> list[JournalEvent]:
        return [e for e in self._events if _matches(e, session_id, call_id)]

    def __len__(self) -> int:
        return len(self._events)


class _FileLock:
    """An exclusive advisory lock (``flock``) held while a journal is open for writing.

    Two writers would both recover (mark the other's running calls ``interrupted``) and
    hand out the same ``seq``. Readers (``clearance journal``) take no lock. Where
    ``fcntl`` is missing (Windows) the lock is a no-op.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            return
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise JournalError(f"{path}: cannot open the journal: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise JournalError(
                f"{path}: the journal is open for writing in another process or object"
            ) from None
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None


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
    ``tool_finished`` for every ``tool_started`` without an end (rule R7). One writer at a
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
        self.durability = _check_durability(durability)
        self._closed = False
        self._buffer: list[bytes] = []
        self._buffered = 0
        self._lock = _FileLock(self.path)
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
            log.warning("%s: cutting off a line torn by a crash at byte %d", self.path, torn)
            os.truncate(self.path, torn)
        elif raw and not raw.endswith(b"\n"):
            self._write_now(b"\n")  # a whole record that lost only its newline
        open_starts: dict[tuple[str, str | None], JournalEvent] = {}
        for event in events:
            if event.type == "tool_started":
                open_starts[(event.session_id, event.call_id)] = event
            elif event.type == "tool_finished":
                open_starts.pop((event.session_id, event.call_id), None)
        if open_starts:
            for started in sorted(open_starts.values(), key=lambda e: e.seq):
                self._write_now(self._line(_interrupted(started)))
            os.fsync(self._fd)
            log.warning("%s: marked %d unfinished call(s) interrupted", self.path, len(open_starts))

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
        return [e for e in events if _matches(e, session_id, call_id)]


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


def read_journal(
    path: str | os.PathLike[str],
    *,
    session_id: str | None = None,
    call_id: str | None = None,
    types: Iterable[str] | None = None,
    after_seq: int = 0,
) -> list[JournalEvent]:
    """Read the records of a journal file, SQLite or JSON lines (told apart by content),
    without writing to it: no recovery, no lock, safe while a harness appends.

    Filters combine with AND; ``after_seq`` skips records up to and including that
    ``seq`` (poll with the last ``seq`` seen to follow a journal).

    Raises:
        JournalError: the file is missing or is not a clearance journal.
    """
    from clearance.harness.journal_sqlite import is_sqlite_file, read_sqlite

    p = Path(path)
    if not p.is_file():
        raise JournalError(f"{p}: no such journal file")
    wanted = tuple(types) if types is not None else None
    if is_sqlite_file(p):
        return read_sqlite(
            p, session_id=session_id, call_id=call_id, types=wanted, after_seq=after_seq
        )
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise JournalError(f"{p}: cannot read the journal: {exc.strerror}") from None
    events, _ = read_jsonl(raw, str(p))
    return [
        e
        for e in events
        if e.seq > after_seq
        and _matches(e, session_id, call_id)
        and (wanted is None or e.type in wanted)
    ]


# --- the typed form ------------------------------------------------------------------------


class _Model(BaseModel):
    # Readers accept fields added by later versions; tests check none are undocumented.
    model_config = ConfigDict(extra="allow")


class _ToolIdentity(_Model):
    tool: str | None
    """The tool's model alias (the name as given when the tool is unknown)."""
    qualified_name: str | None
    model_alias: str | None


class SessionCreatedData(_Model):
    """``session_created``: who opened the session and what it may call."""

    principal: str
    """The principal entity, e.g. ``User::"alice"``."""
    agent: str
    tools: list[str]
    """Qualified names of the selected tools."""


class SessionClosedData(_Model):
    """``session_closed`` carries no data."""


class SchemaCheck(_Model):
    """The JSON Schema check of the arguments."""

    valid: bool
    error: str | None = None


class GuardrailRecord(_Model):
    """One guardrail's outcome on the arguments (or, in ``result_guardrails``, the result)."""

    name: str
    advisory: bool
    action: Literal["allow", "replace", "redact", "block", "ask", "error"] | None = None
    message: str | None = None
    pointers: list[str] | None = None
    """The JSON pointers a ``redact`` withheld."""
    error: str | None = None
    """The exception type when the guardrail failed, or why a replacement was refused."""


class VerdictRecord(_Model):
    """What the authority evaluator returned (``effect`` ``error`` when it failed)."""

    effect: Literal["allow", "deny", "ask", "error"]
    reasons: list[str]
    annotations: dict[str, Any] = Field(default_factory=dict)
    errors: list[str] = Field(default_factory=list)
    message: str | None = None
    evaluator: str | None = None


class ShadowRecord(_Model):
    """A shadow evaluator's verdict on the same request (recorded, never enforced)."""

    effect: str
    reasons: list[str] = Field(default_factory=list)
    agrees: bool


class AskRecord(_Model):
    """The ask and its answer (``answer`` ``grant`` when a stored grant answered)."""

    reason: str
    policies: list[str]
    ask_id: str | None = None
    answer: str | None = None
    how: str | None = None
    """``callback``, ``stream``, ``timeout``, ``closed``, ``unanswerable``, ``error``,
    ``unshowable`` (a deciding argument is withheld, so no person was asked)."""
    grant: str | None = None
    message: str | None = None
    grant_created: dict[str, Any] | None = None


class CallDecidedData(_ToolIdentity):
    """``call_decided``: the explanation record, one per call that entered the pipeline."""

    principal: str
    arguments: dict[str, Any] | None
    """The arguments as decided, withheld values replaced by ``[REDACTED]``; ``None`` when
    they were not a JSON object."""
    schema_: SchemaCheck | None = Field(default=None, alias="schema")
    facts: dict[str, Any] | None = None
    """The canonical facts of the declared arguments, by argument (none of a withheld one),
    or ``{"error": ...}`` when one could not be canonicalized (rule R11)."""
    guardrails: list[GuardrailRecord] | None = None
    verdict: VerdictRecord | None = None
    shadow: ShadowRecord | None = None
    ask: AskRecord | None = None
    stage: str | None = None
    """Where a call that did not run ended: ``resolve``, ``call_id``, ``schema``,
    ``facts``, ``guardrail``, ``evaluator``, ``ask`` or ``dispatch``."""
    duplicate_call_id: bool | None = None
    decision: Literal["allow", "deny", "ask", "error"] | None
    """The authorization decision; ``None`` when the call ended before the evaluator."""
    reasons: list[str]
    grant: str | None = None
    outcome: Literal[
        "dispatched", "denied", "blocked", "invalid", "overloaded", "cancelled", "error"
    ]
    """``dispatched`` (a ``tool_started`` follows) or how the call ended without running."""
    message: str | None = None
    correlation_id: str
    timing_us: dict[str, int]


class ToolStartedData(_ToolIdentity):
    """``tool_started``: recorded before the handler runs (committed, or, with
    ``SqliteJournal``'s default durability, in its start log; see ``docs/journal.md``)."""

    arguments: dict[str, Any] | None
    """The final arguments the handler gets, withheld values replaced."""
    correlation_id: str


class ToolProgressData(_ToolIdentity):
    """``tool_progress``: what a handler reported with ``ctx.progress``."""

    message: str
    data: dict[str, Any] | None = None


class ResultReference(_Model):
    """What the journal keeps of a result: text and structure; images by hash and size."""

    content: list[dict[str, Any]]
    structured_content: Any = None
    is_error: bool


class ToolFinishedData(_ToolIdentity):
    """``tool_finished``: exactly one per ``tool_started`` (rule R7)."""

    status: Literal["ok", "error", "failed", "cancelled", "timeout", "interrupted"]
    """How the handler ended."""
    duration_us: int | None
    """Handler run time; ``None`` for ``interrupted``."""
    correlation_id: str | None
    message: str | None = None
    result_blocked: bool = False
    """A result guardrail withheld the result from the model (it saw ``blocked``)."""
    result: ResultReference | None = None
    started_seq: int | None = None
    """On ``interrupted`` records: the ``seq`` of the start they close."""


class PermissionAskedData(_ToolIdentity):
    """``permission_asked``: the ask as its answerer saw it (withheld values replaced)."""

    ask_id: str
    call_id: str
    principal: str
    arguments: dict[str, Any] | None
    reason: str
    policies: list[str]
    suggestions: list[dict[str, Any]]
    deciding: list[str] = []
    """The arguments that decide what the call does, shown first and in full."""
    facts: dict[str, Any] = {}
    """Their canonical facts (none of a withheld argument)."""


class PermissionDecidedData(_ToolIdentity):
    """``permission_decided``: the answer, how it came, and the grant it created."""

    ask_id: str
    answer: str
    how: str
    grant: str | None = None


class _Envelope(_Model):
    version: int
    seq: int
    ts: float
    session_id: str
    turn_id: str | None
    call_id: str | None


class SessionCreatedRecord(_Envelope):
    """A ``session_created`` record."""

    type: Literal["session_created"]
    data: SessionCreatedData


class SessionClosedRecord(_Envelope):
    """A ``session_closed`` record."""

    type: Literal["session_closed"]
    data: SessionClosedData


class CallDecidedRecord(_Envelope):
    """A ``call_decided`` record."""

    type: Literal["call_decided"]
    data: CallDecidedData


class PermissionAskedRecord(_Envelope):
    """A ``permission_asked`` record."""

    type: Literal["permission_asked"]
    data: PermissionAskedData


class PermissionDecidedRecord(_Envelope):
    """A ``permission_decided`` record."""

    type: Literal["permission_decided"]
    data: PermissionDecidedData


class ToolStartedRecord(_Envelope):
    """A ``tool_started`` record."""

    type: Literal["tool_started"]
    data: ToolStartedData


class ToolProgressRecord(_Envelope):
    """A ``tool_progress`` record."""

    type: Literal["tool_progress"]
    data: ToolProgressData


class ToolFinishedRecord(_Envelope):
    """A ``tool_finished`` record."""

    type: Literal["tool_finished"]
    data: ToolFinishedData


EventRecord: TypeAlias = Annotated[
    SessionCreatedRecord
    | SessionClosedRecord
    | CallDecidedRecord
    | PermissionAskedRecord
    | PermissionDecidedRecord
    | ToolStartedRecord
    | ToolProgressRecord
    | ToolFinishedRecord,
    Field(discriminator="type"),
]
"""One validated record; the ``type`` field selects the model."""

_RECORD: TypeAdapter[EventRecord] = TypeAdapter(EventRecord)


def parse_event(event: JournalEvent | dict[str, Any]) -> EventRecord:
    """Validate one record (an event or its JSON form) and return its typed model.

    For readers, exporters and tests; the write path never calls it.

    Raises:
        pydantic.ValidationError: the record does not have the documented form.
    """
    raw = event.to_json() if isinstance(event, JournalEvent) else event
    return _RECORD.validate_python(raw)


def event_json_schema() -> dict[str, Any]:
    """The JSON Schema of a record, generated from the models (for docs and other tools)."""
    return _RECORD.json_schema(by_alias=True)


# --- events for UIs ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EventItem:
    """What ``session.events()`` yields: the event, with a summary a UI can show as is.

    ``dropped`` > 0 marks a gap: the subscriber was too slow and that many events were
    dropped before this one (the pipeline never waits for a subscriber).
    """

    session_id: str
    event: JournalEvent | None
    type: str
    call_id: str | None = None
    turn_id: str | None = None
    tool: str | None = None
    """The tool's model alias."""
    qualified_name: str | None = None
    model_alias: str | None = None
    status: str | None = None
    arguments: dict[str, Any] | None = None
    """Only on ``tool_started``; ``None`` when withheld."""
    dropped: int = 0


def summarize(event: JournalEvent) -> EventItem:
    data = event.data
    status = data.get("status") or data.get("outcome") or data.get("decision")
    return EventItem(
        session_id=event.session_id,
        event=event,
        type=event.type,
        call_id=event.call_id,
        turn_id=event.turn_id,
        tool=data.get("model_alias"),
        qualified_name=data.get("qualified_name"),
        model_alias=data.get("model_alias"),
        status=status,
        arguments=data.get("arguments") if event.type == "tool_started" else None,
    )


class _Subscriber:
    __slots__ = ("dropped", "receive", "send", "session_id")

    def __init__(self, session_id: str | None, buffer: int) -> None:
        self.send: MemoryObjectSendStream[EventItem]
        self.receive: MemoryObjectReceiveStream[EventItem]
        self.send, self.receive = anyio.create_memory_object_stream[EventItem](buffer)
        self.session_id = session_id
        self.dropped = 0


class EventHub:
    """Fans journal events out to subscribers with bounded buffers."""

    def __init__(self, buffer: int = 1024) -> None:
        self.buffer = buffer
        self._subscribers: list[_Subscriber] = []

    def publish(self, event: JournalEvent) -> None:
        if not self._subscribers:
            return
        item: EventItem | None = None
        for sub in list(self._subscribers):
            if sub.session_id is not None and sub.session_id != event.session_id:
                continue
            if item is None:
                item = summarize(event)
            try:
                if sub.dropped:
                    sub.send.send_nowait(
                        EventItem(event.session_id, None, "events_dropped", dropped=sub.dropped)
                    )
                    sub.dropped = 0
                sub.send.send_nowait(item)
            except anyio.WouldBlock:
                sub.dropped += 1
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._subscribers.remove(sub)

    def close_session(self, session_id: str) -> None:
        for sub in list(self._subscribers):
            if sub.session_id == session_id:
                sub.send.close()
                self._subscribers.remove(sub)

    def close(self) -> None:
        for sub in self._subscribers:
            sub.send.close()
        self._subscribers.clear()

    def subscribe(self, session_id: str | None = None) -> EventStream:
        """Start receiving events now (of one session, or all); iterate the result."""
        sub = _Subscriber(session_id, self.buffer)
        self._subscribers.append(sub)
        return EventStream(self, sub)

    def _drop(self, sub: _Subscriber) -> None:
        if sub in self._subscribers:
            self._subscribers.remove(sub)
        sub.send.close()


class EventStream:
    """An async iterator of :class:`EventItem`; subscribed from the moment it is created.

    Use it with ``async with`` (or call :meth:`aclose`) to unsubscribe early.
    """

    def __init__(self, hub: EventHub, sub: _Subscriber) -> None:
        self._hub = hub
        self._sub = sub

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> EventItem:
        try:
            return await self._sub.receive.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._hub._drop(self._sub)
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        self._hub._drop(self._sub)
        self._sub.receive.close()

    async def __aenter__(self) -> EventStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def __getattr__(name: str) -> Any:
    # SqliteJournal lives in its own module (it imports this one); load it on first use.
    if name == "SqliteJournal":
        from clearance.harness.journal_sqlite import SqliteJournal

        return SqliteJournal
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
