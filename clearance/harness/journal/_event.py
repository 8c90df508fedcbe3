"""One journal record as the write path builds it, and its encoding.

:class:`JournalEvent` is cheap to build (no validation: the pipeline builds several per
call) and :func:`encode_data` turns one into compact ASCII JSON once. The typed, validated
form for readers is in ``_records``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from json.encoder import (  # type: ignore[attr-defined]
    c_make_encoder,
    encode_basestring_ascii,
)
from typing import Any, Literal

__all__ = [
    "EVENT_TYPES",
    "JOURNAL_VERSION",
    "EventType",
    "JournalEvent",
    "encode_data",
    "matches",
]

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
    "authorization_withdrawn",
    "message_added",
    "policies_reloaded",
]
EVENT_TYPES: tuple[str, ...] = EventType.__args__  # type: ignore[attr-defined]


@dataclass(slots=True)
class JournalEvent:
    """One journal record. ``seq`` is assigned by the journal when it is appended.

    Construction is deliberately cheap (no validation): the pipeline builds several per
    call. :func:`~clearance.harness.journal.parse_event` checks one against the documented
    form.
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


def matches(event: JournalEvent, session_id: str | None, call_id: str | None) -> bool:
    """Whether ``event`` is of that session and that call (``None``: any)."""
    return (session_id is None or event.session_id == session_id) and (
        call_id is None or event.call_id == call_id
    )


def _json_default(value: object) -> object:
    # Never the value's repr: it could carry a withheld string (R8).
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    return f"<{type(value).__name__}>"


# One encoder, built once: json.dumps with options builds a new one per call, and even a
# JSONEncoder builds its C encoder on every encode(), a sixth of encoding a call_decided.
# ASCII-only output cannot fail to encode (lone surrogates), for SQLite and files alike.
_ENCODER = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"), default=_json_default)
_C_ENCODER = (
    c_make_encoder(None, _json_default, encode_basestring_ascii, None, ":", ",", False, False, True)
    if c_make_encoder is not None
    else None
)


def encode_data(value: Any) -> str:
    """Encode a record (or its ``data``) as compact, ASCII-only JSON.

    Values that are not JSON become ``"<TypeName>"`` rather than failing the append.

    Raises:
        ValueError: a value refers to itself (or nests deeper than Python recurses).
    """
    if _C_ENCODER is None or type(value) is not dict:  # pragma: no cover - CPython has it
        return _ENCODER.encode(value)
    try:
        return "".join(_C_ENCODER(value, 0))
    except RecursionError:
        # The C encoder is built without json's check for circular references (it
        # cannot be shared with one); a cycle ends here instead, as the same ValueError.
        raise ValueError("Circular reference detected") from None
