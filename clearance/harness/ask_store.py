"""Durable asks: a pending ask has a stable id and lives in a store, so that it can be
answered from anywhere (another process, ``clearance asks``, an inbox, a framework's
approval API) and a paused run can resume, after a restart too.

A :class:`StoredAsk` is keyed by its ``ask_id`` and found again by the call it asks about:
the principal, the tool, the call id and the hash of the call's canonical arguments, so an
answer given for one call can never authorize another (a different call id, or the same
call id with other arguments, is a different ask). Its life:

``pending`` → ``answered`` (an answer, who gave it and through what) → ``consumed`` (the
pipeline applied it to the call: an ``allow_once`` answer authorizes that call once);
or ``pending`` → ``closed`` (withdrawn, timed out, the session closed, or its host gone).

An ask names the host that raised it (``host``: the journal's host id) with its session
and principal. An ask a call *waits* on in a process also names that process's lease
(``instance``): the call lives only as long as the process, so the ask does too. A shared
store keeps each lease (:class:`HostLease`), renewed by the waiting call a few times per
lease; once the process is gone (it ended, its lease lapsed, or, on the same machine, its
pid is dead) the ask reads as ``closed`` (``host gone``) and cannot be answered; the
journal gives the call its ``interrupted`` end when the host's journal is recovered (its
next start, or ``clearance store recover``). An ask a paused call left (``authorize``
came back ``pending``) names no lease: it outlives its process on purpose.

Only a person answers (rule R13): an answer is given with a
:class:`~clearance.harness.approvers.Credential` (a registered approver's key, or the
host's) and kept with its :class:`~clearance.harness.approvers.Seal`, an HMAC over
:func:`answer_message`. A store refuses a credential its keyring does not know, and
:func:`verified` is how a store reports an answer it reads: one whose seal does not verify
(written into the store by something without a key, or by an approver since removed) is
no answer: the ask reads as ``closed`` (``unverified answer``) and is never applied.

Stores: :class:`MemoryAskStore` (this process) and
:class:`~clearance.harness.ask_store_sqlite.SqliteAskStore` (a file shared by processes:
the CLI keeps it beside the grants).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal, Protocol, runtime_checkable

from clearance.errors import AskError
from clearance.harness.approvals import PermissionAsk, PermissionDecision
from clearance.harness.approvers import Approvers, Credential, Seal
from clearance.harness.grants import GrantScope

__all__ = [
    "HOST_GONE",
    "LEASE_COLUMNS",
    "AskStatus",
    "AskStore",
    "HostLease",
    "MemoryAskStore",
    "StoredAsk",
    "answer_message",
    "host_credential",
    "decision_from_json",
    "pid_alive",
    "refusal",
    "shown_asks",
    "decision_to_json",
    "sealed_answer",
    "sweep_expired",
    "verified",
]

log = logging.getLogger("clearance")

AskStatus = Literal["pending", "answered", "consumed", "closed"]

HOST_GONE: Final = "host gone"
"""``closed_why`` of an ask whose waiting call's process is gone."""


LEASE_COLUMNS: Final = "instance, host, hostname, pid, renewed_at, lease, ended"
"""The columns of an ``ask_hosts`` row that :meth:`HostLease.of_row` reads, in order."""


@dataclass(frozen=True, slots=True)
class HostLease:
    """A process's lease in a shared ask store, as the store last saw it renewed."""

    instance: str
    host: str
    hostname: str
    pid: int
    renewed_at: float
    lease: float
    """Seconds the lease holds after ``renewed_at``."""
    ended: bool = False
    """The process closed its harness."""

    @classmethod
    def of_row(cls, row: Sequence[Any]) -> HostLease:
        """The lease of an ``ask_hosts`` row read as :data:`LEASE_COLUMNS`."""
        return cls(
            str(row[0]),
            str(row[1]),
            str(row[2]),
            int(row[3]),
            float(row[4]),
            float(row[5]),
            bool(row[6]),
        )

    def gone(self, now: float) -> bool:
        """Whether the process is gone: it ended, its lease lapsed, or it ran on this
        machine and its pid is dead."""
        if self.ended or now > self.renewed_at + self.lease:
            return True
        return self.hostname == socket.gethostname() and not pid_alive(self.pid)


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid runs on this machine."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    except OSError:
        return True
    return True


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
    seal: Seal | None = None
    """The answer's seal (see :mod:`clearance.harness.approvers`)."""
    host: str = ""
    """The host that raised it (its journal host id; empty in asks older than hosts)."""
    instance: str | None = None
    """The lease of the process whose call waits on it, or None (a paused call's ask,
    which outlives its process)."""

    @classmethod
    def of(
        cls,
        ask: PermissionAsk,
        arguments_hash: str,
        *,
        call_key: str | None = None,
        host: str = "",
        instance: str | None = None,
    ) -> StoredAsk:
        """The stored form of ``ask``; ``call_key`` is what the call is found again by
        (default: its call id); ``host`` raised it, and ``instance`` is the lease of the
        process whose call waits on it (None: a paused call)."""
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
            host=host,
            instance=instance,
        )

    def to_json(self) -> dict[str, Any]:
        """The ask as JSON (a grant scope's exact-arguments hash is left out: R8)."""
        return {
            "ask_id": self.ask_id,
            "principal": self.principal,
            "tool": self.tool,
            "call_id": self.call_id,
            "session_id": self.session_id,
            "host": self.host,
            "instance": self.instance,
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


def answer_message(ask: StoredAsk, decision: PermissionDecision, approver: str) -> bytes:
    """What an answer's seal is the HMAC of: the ask it answers (its id, and what the
    call it is found again by is: principal, tool, call, arguments hash, when it was
    asked) and the whole answer (decision, scope, message, expiry, who, through what), and
    the name of the key that seals it. Changing any of these in a store breaks the seal."""
    body = {
        "v": 1,
        "ask_id": ask.ask_id,
        "principal": ask.principal,
        "tool": ask.tool,
        "call_id": ask.call_id,
        "session_id": ask.session_id,
        "arguments_hash": ask.arguments_hash,
        "created_at": ask.created_at,
        "answer": decision_to_json(decision),
        "answered_by": ask.answered_by,
        "via": ask.via,
        "answered_at": ask.answered_at,
        "approver": approver,
    }
    text = json.dumps(body, ensure_ascii=True, sort_keys=True, separators=(",", ":"))
    return b"clearance-answer\n" + text.encode("ascii")


def sealed_answer(
    ask: StoredAsk,
    decision: PermissionDecision,
    credential: Credential,
    approvers: Approvers,
    *,
    by: str | None = None,
    via: str | None = None,
) -> StoredAsk:
    """``ask`` answered with ``decision`` by the holder of ``credential``, sealed.

    An approver answers as themselves: the answer records the credential's name. The host
    answers for whoever it names (``by``).

    Raises:
        AskError: the ask is not pending, the credential is not one ``approvers`` knows,
            or ``by`` names someone else than the approver whose key answers.
    """
    if ask.status != "pending":
        raise AskError(refusal(ask))
    if not isinstance(credential, Credential) or not approvers.knows(credential):
        name = getattr(credential, "name", None)
        raise AskError(
            f"{name!r} is not a registered approver here; nothing answered"
            if name
            else "an answer needs an approver's credential; nothing answered"
        )
    if credential.is_host:
        who = by or decision.decided_by
    else:
        if by is not None and by != credential.name:
            raise AskError(f"answering as {by!r} needs {by!r}'s key; nothing answered")
        who = credential.name
    how = via or decision.via
    answered = replace(
        ask,
        status="answered",
        decision=replace(decision, decided_by=who, via=how),
        answered_by=who,
        via=how,
        answered_at=time.time(),
    )
    assert answered.decision is not None
    return replace(
        answered,
        seal=credential.seal(answer_message(answered, answered.decision, credential.name)),
    )


def shown_asks(store: Any, *, since: float = 0.0) -> list[StoredAsk]:
    """What a person is shown (``clearance asks list``, the inbox), oldest first: the
    pending asks, and the newest asks closed because their host is gone (raised after
    ``since``), so that a call whose host died is seen as such, not silently dropped."""
    found = list(store.pending())
    newest = getattr(store, "all", None)
    if callable(newest):
        found += [a for a in newest(limit=200) if a.closed_why == HOST_GONE]
    return sorted((a for a in found if a.created_at >= since), key=lambda a: a.created_at)


def refusal(ask: StoredAsk) -> str:
    """Why ``ask``, not pending, cannot be answered (the sentence every surface shows)."""
    if ask.status == "closed" and ask.closed_why == HOST_GONE:
        return (
            f"ask {ask.ask_id} cannot be answered: its host {ask.host or '?'!r} is gone "
            "(the process whose call waited on it stopped; the call ended interrupted); "
            "nothing answered"
        )
    why = f" ({ask.closed_why})" if ask.status == "closed" and ask.closed_why else ""
    return f"ask {ask.ask_id} is {ask.status}{why}, not pending"


def verified(ask: StoredAsk, approvers: Approvers) -> StoredAsk:
    """``ask`` as a store may report it: an answer (answered or consumed) whose seal does
    not verify under ``approvers`` is no answer, and the ask reads as ``closed``."""
    if ask.status not in ("answered", "consumed") and ask.decision is None:
        return ask
    if ask.status not in ("answered", "consumed"):
        return replace(ask, decision=None, seal=None)  # a decision on an unanswered ask
    seal = ask.seal
    if (
        ask.decision is not None
        and seal is not None
        and approvers.verify(seal, answer_message(ask, ask.decision, seal.approver))
    ):
        return ask
    log.warning(
        "ask %s: an answer in the store has no valid seal (approver %r); it is not applied",
        ask.ask_id,
        seal.approver if seal is not None else None,
    )
    return replace(
        ask,
        status="closed",
        decision=None,
        answered_by=None,
        via=None,
        seal=None,
        closed_why="unverified answer",
    )


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

    approvers: Approvers
    """The keys whose answers this store takes and reports (rule R13)."""

    def put(self, ask: StoredAsk, *, lease: float | None = None) -> None:
        """Store ``ask``. A shared store that keeps leases (it has ``renew(instance, host,
        lease)``, ``end(instance)`` and ``lease(instance)``) renews ``ask.instance``'s
        lease for ``lease`` seconds with it; another store ignores ``lease``."""
        ...

    def get(self, ask_id: str) -> StoredAsk | None:
        """The ask with this id (an answer whose seal does not verify reads ``closed``)."""
        ...

    def find(
        self, principal: str, tool: str, call_id: str, arguments_hash: str
    ) -> StoredAsk | None:
        """The newest ask of that call that is pending or answered (not consumed), with a
        verified answer if answered."""
        ...

    def pending(self) -> list[StoredAsk]: ...

    def answered(self) -> list[StoredAsk]:
        """The asks answered and not yet applied (``answered``, with a verified answer),
        oldest first: what a host resuming a paused call will apply."""
        ...

    def answer(
        self,
        ask_id: str,
        decision: PermissionDecision,
        *,
        credential: Credential,
        by: str | None = None,
        via: str | None = None,
    ) -> StoredAsk:
        """Record the answer of a pending ask, sealed with ``credential`` (see
        :func:`sealed_answer`).

        Raises:
            AskError: no such ask, it is not pending (answered, consumed or closed), or the
                credential is not one of :attr:`approvers`.
        """
        ...

    def consume(self, ask_id: str) -> bool:
        """Mark an answered ask as applied; False when it was not answered (or already
        consumed: an answer is applied once)."""
        ...

    def withdraw(self, ask_id: str, why: str) -> None:
        """Close a pending ask unanswered (a no-op otherwise)."""
        ...


ASK_LIFE = 86_400.0
"""Seconds a stored ask can be answered: a host's default ``pending_ask_ttl`` (past it, a
host applies no answer to the ask, and the stores close it as expired)."""


def sweep_expired(store: Any, max_age: float = ASK_LIFE) -> int:
    """Close as ``expired`` every pending ask of ``store`` older than ``max_age`` seconds
    (no host applies an answer to them): how many. A store with a ``sweep(before)`` of
    its own (every bundled store) does it in one query; another store through
    ``pending`` and ``withdraw``."""
    before = time.time() - max_age
    sweep = getattr(store, "sweep", None)
    if callable(sweep):
        return int(sweep(before))
    stale = [a for a in store.pending() if a.created_at < before]
    for ask in stale:
        store.withdraw(ask.ask_id, "expired")
    return len(stale)


def host_credential(store: Any) -> Credential:
    """The host's credential for answers it gives into ``store`` (see
    :mod:`clearance.harness.approvers`); a store without a keyring gets this process's
    in-memory one.

    Raises:
        ConfigError: the host key cannot be read or made.
    """
    approvers = getattr(store, "approvers", None)
    if not isinstance(approvers, Approvers):
        return _PROCESS_KEYRING.host()
    return approvers.host()


_PROCESS_KEYRING = Approvers(None)


class MemoryAskStore:
    """Asks in this process's memory.

    Args:
        approvers: the keys whose answers it takes (default: an in-memory keyring, whose
            only key is this process's host key).
    """

    shared = False

    def __init__(self, *, approvers: Approvers | None = None) -> None:
        self.approvers = approvers if approvers is not None else Approvers(None)
        self._asks: dict[str, StoredAsk] = {}
        self._lock = threading.Lock()

    def put(self, ask: StoredAsk, *, lease: float | None = None) -> None:
        with self._lock:  # one process: its asks live exactly as long as it does
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

    def answered(self) -> list[StoredAsk]:
        return sorted(
            (a for a in self._asks.values() if a.status == "answered"),
            key=lambda a: a.created_at,
        )

    def answer(
        self,
        ask_id: str,
        decision: PermissionDecision,
        *,
        credential: Credential,
        by: str | None = None,
        via: str | None = None,
    ) -> StoredAsk:
        with self._lock:
            ask = self._asks.get(ask_id)
            if ask is None:
                raise AskError(f"no ask {ask_id!r}")
            answered = sealed_answer(ask, decision, credential, self.approvers, by=by, via=via)
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

    def sweep(self, before: float) -> int:
        """Close as ``expired`` the pending asks created before ``before``: how many."""
        with self._lock:
            stale = [
                a for a in self._asks.values() if a.status == "pending" and a.created_at < before
            ]
            for ask in stale:
                self._asks[ask.ask_id] = replace(ask, status="closed", closed_why="expired")
            return len(stale)
