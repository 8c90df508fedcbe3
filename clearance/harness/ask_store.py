"""Durable asks: a pending ask has a stable id and lives in a store, so that it can be
answered from anywhere (another process, ``clearance asks``, an inbox, a framework's
approval API) and a paused run can resume, after a restart too.

A :class:`StoredAsk` is keyed by its ``ask_id`` and found again by the call it asks about:
the principal, the tool, the call id and the hash of the call's canonical arguments, so an
answer given for one call can never authorize another (a different call id, or the same
call id with other arguments, is a different ask). Its life:

``pending`` → ``answered`` (an answer, who gave it and through what) → ``consumed`` (the
pipeline applied it to the call: an ``allow_once`` answer authorizes that call once);
or ``pending`` → ``closed`` (withdrawn, timed out, the session closed).

Stores: :class:`MemoryAskStore` (this process) and
:class:`~clearance.harness.ask_store_sqlite.SqliteAskStore` (a file shared by processes:
the CLI keeps it beside the grants).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, runtime_checkable

from clearance.errors import AskError
from clearance.harness.approvals import PermissionAsk, PermissionDecision
from clearance.harness.grants import GrantScope

__all__ = [
    "AskStatus",
    "AskStore",
    "MemoryAskStore",
    "StoredAsk",
    "decision_from_json",
    "decision_to_json",
]

AskStatus = Literal["pending", "answered", "consumed", "closed"]


@dataclass(frozen=True, slots=True)
class StoredAsk:
    """An ask as the store keeps it (withheld values already masked in ``arguments``)."""

    ask_id: str
    principal: str
    tool: str
    """The qualified name."""
    call_id: str
    session_id: str
    arguments_hash: str
    """The hash of the call's canonical arguments (``arguments_hash``): the answer holds
    for exactly those."""
    arguments: Mapping[str, Any]
    reason: str
    policies: tuple[str, ...] = ()
    suggestions: tuple[GrantScope, ...] = ()
    deciding: tuple[str, ...] = ()
    facts: Mapping[str, Any] = field(default_factory=dict)
    notes: Mapping[str, str] = field(default_factory=dict)
    """Per deciding argument, a warning to show beside it (see ``PermissionAsk.notes``)."""
    created_at: float = field(default_factory=time.time)
    status: AskStatus = "pending"
    decision: PermissionDecision | None = None
    answered_by: str | None = None
    via: str | None = None
    answered_at: float | None = None
    closed_why: str | None = None

    @classmethod
    def of(
        cls, ask: PermissionAsk, arguments_hash: str, *, call_key: str | None = None
    ) -> StoredAsk:
        """The stored form of ``ask``; ``call_key`` is what the call is found again by
        (default: its call id)."""
        return cls(
            ask_id=ask.ask_id,
            principal=ask.principal,
            tool=ask.qualified_name,
            call_id=call_key or ask.call_id,
            session_id=ask.session_id,
            arguments_hash=arguments_hash,
            arguments=dict(ask.arguments),
            reason=ask.reason,
            policies=tuple(ask.policies),
            suggestions=tuple(ask.suggestions),
            deciding=tuple(ask.deciding),
            facts=dict(ask.facts),
            notes=dict(ask.notes),
            created_at=ask.created_at,
        )

    def to_json(self) -> dict[str, Any]:
        """The ask as JSON (a grant scope's exact-arguments hash is left out: R8)."""
        return {
            "ask_id": self.ask_id,
            "principal": self.principal,
            "tool": self.tool,
            "call_id": self.call_id,
            "session_id": self.session_id,
            "arguments": dict(self.arguments),
            "reason": self.reason,
            "policies": list(self.policies),
            "suggestions": [s.to_json(public=True) for s in self.suggestions],
            "deciding": list(self.deciding),
            "facts": dict(self.facts),
            "notes": dict(self.notes),
            "created_at": self.created_at,
            "status": self.status,
            "answer": self.decision.decision if self.decision else None,
            "answered_by": self.answered_by,
            "via": self.via,
            "answered_at": self.answered_at,
            "closed_why": self.closed_why,
        }


def decision_to_json(decision: PermissionDecision) -> dict[str, Any]:
    return {
        "decision": decision.decision,
        "scope": decision.scope.to_json() if decision.scope is not None else None,
        "message": decision.message,
        "expires_in": decision.expires_in,
        "decided_by": decision.decided_by,
        "via": decision.via,
    }


def decision_from_json(raw: Mapping[str, Any]) -> PermissionDecision:
    scope = raw.get("scope")
    return PermissionDecision(
        raw["decision"],
        scope=GrantScope.from_json(scope) if scope else None,
        message=raw.get("message"),
        expires_in=raw.get("expires_in"),
        decided_by=raw.get("decided_by"),
        via=raw.get("via"),
    )


@runtime_checkable
class AskStore(Protocol):
    """Where asks live while they wait, and their answers (see the module docstring)."""

    shared: bool
    """Whether other processes see this store (then a waiting call polls it)."""

    def put(self, ask: StoredAsk) -> None: ...

    def get(self, ask_id: str) -> StoredAsk | None: ...

    def find(
        self, principal: str, tool: str, call_id: str, arguments_hash: str
    ) -> StoredAsk | None:
        """The newest ask of that call that is pending or answered (not consumed)."""
        ...

    def pending(self) -> list[StoredAsk]: ...

    def answer(
        self,
        ask_id: str,
        decision: PermissionDecision,
        *,
        by: str | None = None,
        via: str | None = None,
    ) -> StoredAsk:
        """Record the answer of a pending ask.

        Raises:
            AskError: no such ask, or it is not pending (answered, consumed or closed).
        """
        ...

    def consume(self, ask_id: str) -> bool:
        """Mark an answered ask as applied; False when it was not answered (or already
        consumed: an answer is applied once)."""
        ...

    def withdraw(self, ask_id: str, why: str) -> None:
        """Close a pending ask unanswered (a no-op otherwise)."""
        ...


class MemoryAskStore:
    """Asks in this process's memory."""

    shared = False

    def __init__(self) -> None:
        self._asks: dict[str, StoredAsk] = {}
        self._lock = threading.Lock()

    def put(self, ask: StoredAsk) -> None:
        with self._lock:
            self._asks[ask.ask_id] = ask

    def get(self, ask_id: str) -> StoredAsk | None:
        return self._asks.get(ask_id)

    def find(
        self, principal: str, tool: str, call_id: str, arguments_hash: str
    ) -> StoredAsk | None:
        found = [
            a
            for a in self._asks.values()
            if a.principal == principal
            and a.tool == tool
            and a.call_id == call_id
            and a.arguments_hash == arguments_hash
            and a.status in ("pending", "answered")
        ]
        return max(found, key=lambda a: a.created_at) if found else None

    def pending(self) -> list[StoredAsk]:
        return sorted(
            (a for a in self._asks.values() if a.status == "pending"), key=lambda a: a.created_at
        )

    def answer(
        self,
        ask_id: str,
        decision: PermissionDecision,
        *,
        by: str | None = None,
        via: str | None = None,
    ) -> StoredAsk:
        with self._lock:
            ask = self._asks.get(ask_id)
            if ask is None:
                raise AskError(f"no ask {ask_id!r}")
            if ask.status != "pending":
                raise AskError(f"ask {ask_id} is {ask.status}, not pending")
            answered = replace(
                ask,
                status="answered",
                decision=replace(
                    decision, decided_by=by or decision.decided_by, via=via or decision.via
                ),
                answered_by=by or decision.decided_by,
                via=via or decision.via,
                answered_at=time.time(),
            )
            self._asks[ask_id] = answered
            return answered

    def consume(self, ask_id: str) -> bool:
        with self._lock:
            ask = self._asks.get(ask_id)
            if ask is None or ask.status != "answered":
                return False
            self._asks[ask_id] = replace(ask, status="consumed")
            return True

    def withdraw(self, ask_id: str, why: str) -> None:
        with self._lock:
            ask = self._asks.get(ask_id)
            if ask is not None and ask.status == "pending":
                self._asks[ask_id] = replace(ask, status="closed", closed_why=why)
