"""What the durable sinks (JSON lines, SQLite) share: how far ``append`` waits, one
writer per file, and the record that closes a start a crash left open (rule R7)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from clearance.errors import JournalError
from clearance.harness.journal._event import JournalEvent

__all__ = [
    "ASK_INTERRUPTED_MESSAGE",
    "INTERRUPTED_MESSAGE",
    "Durability",
    "FileLock",
    "asked_end",
    "check_durability",
    "interrupted_end",
]

Durability = Literal["full", "normal", "off"]
"""How far ``append`` waits before it returns (see :class:`SqliteJournal`):

- ``"full"``: every event is on stable storage (fsync) before its ``append`` returns;
- ``"normal"`` (default): ``tool_started``, and every event appended before it, is written
  to the operating system before its ``append`` returns (the handler never runs
  unrecorded); other events are written in the background, in order, within milliseconds;
- ``"off"``: nothing waits; the newest events can be lost in a crash.
"""

INTERRUPTED_MESSAGE = "the process stopped before the call finished; its effect is unknown"
ASK_INTERRUPTED_MESSAGE = (
    "the process stopped while the call waited for its approval; the call did not run and "
    "its ask can no longer be answered"
)


def check_durability(durability: str) -> Durability:
    """``durability`` itself when it is one of the three.

    Raises:
        ValueError: it is not ``"full"``, ``"normal"`` or ``"off"``.
    """
    if durability not in ("full", "normal", "off"):
        raise ValueError(f"durability must be 'full', 'normal' or 'off', not {durability!r}")
    return durability  # type: ignore[return-value]


def interrupted_end(started: JournalEvent) -> JournalEvent:
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


def asked_end(asked: JournalEvent) -> JournalEvent:
    """The ``call_decided`` that ends a call a crash left waiting on its ask (rule R7: a
    call that entered the pipeline has one ``call_decided``; it never started)."""
    data = asked.data
    return JournalEvent(
        "call_decided",
        asked.session_id,
        asked.turn_id,
        asked.call_id,
        {
            "tool": data.get("tool"),
            "qualified_name": data.get("qualified_name"),
            "model_alias": data.get("model_alias"),
            "principal": data.get("principal"),
            "host": data.get("host"),
            "arguments": data.get("arguments"),
            "ask": {
                "reason": data.get("reason"),
                "policies": data.get("policies") or [],
                "ask_id": data.get("ask_id"),
                "answer": None,
                "how": "host gone",
            },
            "stage": "ask",
            "decision": "ask",
            "reasons": data.get("policies") or [],
            "outcome": "interrupted",
            "message": ASK_INTERRUPTED_MESSAGE,
            "correlation_id": str(data.get("ask_id") or ""),
            "timing_us": {},
            "asked_seq": asked.seq,
        },
    )


class FileLock:
    """An exclusive advisory lock (``flock``) held while a journal is open for writing.

    Two writers would both recover (mark the other's running calls ``interrupted``) and
    hand out the same ``seq``. Readers (``clearance journal``) take no lock. Where
    ``fcntl`` is missing (Windows) the lock is a no-op.

    Raises:
        JournalError: the lock file cannot be opened, or another writer holds the lock.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        try:
            import fcntl  # POSIX only: the package imports without it (see the README)
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
        """Drop the lock (idempotent)."""
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None
