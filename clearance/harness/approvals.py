"""Permission asks, their answers, and the grants that remember them.

When the evaluator or a guardrail says ``ask``, the pipeline first looks for a matching
grant; failing that it raises a :class:`PermissionAsk`, answered by the session's
``on_permission_ask`` callback or through ``session.permission_asks()``:

- ``allow_once``: this call only (never stored; it authorizes exactly the asked call);
- ``allow_session``: a grant that dies with the session;
- ``allow_always``: a grant kept in the grant store (persisted by ``SqliteGrantStore``);
- ``deny``: the call is denied.

A grant binds a principal, a tool and an argument scope: the exact arguments by default,
wider only when the answer names one of the ask's ``suggestions`` (or an explicit
:class:`GrantScope`). Grants are consulted only for calls that would otherwise be asked:
a deny never reaches them (rule R3).
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import secrets
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import anyio

from clearance import _pointer
from clearance.errors import AskError, ConfigError

__all__ = [
    "ANSWERS",
    "Answer",
    "Grant",
    "GrantScope",
    "GrantStore",
    "MemoryGrantStore",
    "PermissionAsk",
    "PermissionDecision",
    "SqliteGrantStore",
    "arguments_hash",
]

Answer = Literal["allow_once", "allow_session", "allow_always", "deny"]
ANSWERS: tuple[str, ...] = ("allow_once", "allow_session", "allow_always", "deny")
_PATHISH = ("path", "source", "destination", "dest", "src", "file", "dir", "directory", "root")


def arguments_hash(arguments: Mapping[str, Any]) -> str:
    """A stable hash of arguments (canonical JSON, SHA-256)."""
    text = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class GrantScope:
    """Which arguments a grant covers.

    - ``GrantScope.exact(arguments)``: exactly these arguments;
    - ``GrantScope.prefix("/path", "src/")``: any call whose ``/path`` is under ``src/``
      (no ``..`` steps, no absolute paths unless the prefix is absolute);
    - ``GrantScope.tool()``: any arguments.
    """

    kind: Literal["exact", "prefix", "tool"]
    arguments_hash: str | None = None
    field: str | None = None
    prefix: str | None = None
    description: str = ""

    @classmethod
    def exact(cls, arguments: Mapping[str, Any]) -> GrantScope:
        return cls("exact", arguments_hash=arguments_hash(arguments), description="this exact call")

    @classmethod
    def prefix_of(cls, field: str, prefix: str) -> GrantScope:
        _pointer.parse(field)
        if not prefix:
            raise ValueError("a prefix scope needs a non-empty prefix")
        return cls("prefix", field=field, prefix=prefix, description=f"{field} under {prefix}")

    @classmethod
    def tool(cls) -> GrantScope:
        return cls("tool", description="any arguments")

    @property
    def widened(self) -> bool:
        return self.kind != "exact"

    def covers(self, arguments: Mapping[str, Any]) -> bool:
        if self.kind == "tool":
            return True
        if self.kind == "exact":
            return self.arguments_hash == arguments_hash(arguments)
        assert self.field is not None and self.prefix is not None
        values = [v for _, v in _pointer.find(arguments, self.field)]
        if not values:
            return False
        return all(_under(v, self.prefix) for v in values)

    def to_json(self, *, public: bool = False) -> dict[str, Any]:
        """The scope as JSON. ``public=True`` (asks, journal records) leaves out the hash of
        the exact arguments: a hash of a low-entropy secret can be reversed by guessing."""
        return {
            "kind": self.kind,
            "arguments_hash": None if public else self.arguments_hash,
            "field": self.field,
            "prefix": self.prefix,
            "description": self.description,
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> GrantScope:
        return cls(
            raw["kind"],
            raw.get("arguments_hash"),
            raw.get("field"),
            raw.get("prefix"),
            raw.get("description", ""),
        )


def _under(value: Any, prefix: str) -> bool:
    """Whether a path value lies under ``prefix``: a plain relative path below it, with no
    parent steps, no encoded dots, no whitespace or control characters and no empty or
    ``.`` segments, so that a prefix cannot be stretched to reach anything else."""
    if not isinstance(value, str) or not value.startswith(prefix):
        return False
    if any(ch.isspace() or ord(ch) < 32 or ch == "\x7f" for ch in value) or "\\" in value:
        return False
    if "%2e" in value.lower() or "%2f" in value.lower():
        return False
    if value.startswith("/") and not prefix.startswith("/"):
        return False
    rest = value[len(prefix) :]
    segments = rest.split("/")
    return bool(rest) and all(s not in ("", ".", "..") for s in segments)


def suggest_scopes(
    arguments: Mapping[str, Any], *, withheld: Iterable[str] = ()
) -> tuple[GrantScope, ...]:
    """Scopes that make sense for a grant on this call: exact, directory prefixes of
    path-like arguments (by name: ``path``, ``source``, ``destination``...), the tool.

    A withheld (sensitive or redacted) argument never becomes a prefix: suggestions are
    shown to people and recorded (R8).
    """
    # A top-level argument is hidden when a withheld pointer reaches it or into it.
    hidden = {(_pointer.parse(p) or ("*",))[0] for p in withheld}
    scopes = [GrantScope.exact(arguments)]
    for key, value in arguments.items():
        pointer = "/" + _pointer.escape(key)
        if key in hidden or "*" in hidden:
            continue
        if not isinstance(value, str) or key.lower() not in _PATHISH:
            continue
        directory = posixpath.dirname(value.rstrip("/"))
        if directory and _under(value, directory + "/"):
            scopes.append(GrantScope.prefix_of(pointer, directory + "/"))
    scopes.append(GrantScope.tool())
    return tuple(scopes)


@dataclass(frozen=True, slots=True)
class PermissionDecision:
    """An answer to an ask, with an optional wider scope and a message for the record."""

    decision: Answer
    scope: GrantScope | None = None
    """For ``allow_session``/``allow_always``: one of the ask's suggestions (or an explicit
    scope); default is the exact call."""
    message: str | None = None
    expires_in: float | None = None
    """Seconds until the grant expires (``None``: no expiry)."""
    decided_by: str | None = None
    """Who answered (a user name), recorded with the grant."""

    def __post_init__(self) -> None:
        if self.decision not in ANSWERS:
            raise AskError(f"{self.decision!r} is not one of {', '.join(ANSWERS)}")


@dataclass(eq=False)
class PermissionAsk:
    """A call waiting for a person's or the app's approval.

    Answer it by returning a decision from ``on_permission_ask`` or with
    ``await ask.respond("allow_once")`` when it came from ``session.permission_asks()``.
    """

    ask_id: str
    session_id: str
    turn_id: str | None
    call_id: str
    tool: str
    """The tool's model alias (what the model called)."""
    qualified_name: str
    model_alias: str
    principal: str
    arguments: dict[str, Any]
    """The arguments with sensitive and redacted values replaced by ``[REDACTED]``."""
    reason: str
    policies: tuple[str, ...] = ()
    """The policies, rules or guardrails that asked."""
    suggestions: tuple[GrantScope, ...] = ()
    created_at: float = field(default_factory=time.time)
    _answer: PermissionDecision | None = field(default=None, repr=False)
    _closed: str | None = field(default=None, repr=False)
    _event: anyio.Event = field(default_factory=anyio.Event, repr=False)

    @property
    def answered(self) -> bool:
        return self._answer is not None

    async def respond(
        self,
        decision: Answer | PermissionDecision,
        *,
        scope: GrantScope | None = None,
        message: str | None = None,
    ) -> None:
        """Answer the ask.

        Raises:
            AskError: it was already answered, timed out, withdrawn, or the answer is not
                one of ``allow_once``, ``allow_session``, ``allow_always``, ``deny``.
        """
        self._settle(coerce_decision(decision, scope=scope, message=message))

    def _settle(self, decision: PermissionDecision) -> None:
        if self._closed is not None:
            raise AskError(f"ask {self.ask_id} is closed ({self._closed})")
        if self._answer is not None:
            raise AskError(f"ask {self.ask_id} was already answered")
        self._answer = decision
        self._event.set()

    def _close(self, why: str) -> None:
        if self._closed is None and self._answer is None:
            self._closed = why
            self._event.set()

    def to_json(self) -> dict[str, Any]:
        return {
            "ask_id": self.ask_id,
            "call_id": self.call_id,
            "tool": self.tool,
            "qualified_name": self.qualified_name,
            "model_alias": self.model_alias,
            "principal": self.principal,
            "arguments": self.arguments,
            "reason": self.reason,
            "policies": list(self.policies),
            "suggestions": [s.to_json(public=True) for s in self.suggestions],
        }


def coerce_decision(
    value: Any, *, scope: GrantScope | None = None, message: str | None = None
) -> PermissionDecision:
    """Turn a callback's return value into a decision, or raise ``AskError``."""
    if isinstance(value, PermissionDecision):
        if scope is not None or message is not None:
            return replace(value, scope=scope or value.scope, message=message or value.message)
        return value
    if isinstance(value, str) and value in ANSWERS:
        return PermissionDecision(value, scope=scope, message=message)  # type: ignore[arg-type]
    raise AskError(f"an ask must be answered with one of {', '.join(ANSWERS)}, not {value!r}")


AskCallback = Callable[
    [PermissionAsk], "Answer | PermissionDecision | Awaitable[Answer | PermissionDecision]"
]


# --- grants --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Grant:
    """A remembered approval."""

    grant_id: str
    principal: str
    tool: str
    scope: GrantScope
    kind: Literal["session", "always"]
    session_id: str | None = None
    created_at: float = field(default_factory=time.time)
    expires_at: float | None = None
    decided_by: str | None = None
    widened_by: str | None = None
    """Who chose a scope wider than the exact call (``None`` when not widened)."""

    def covers(
        self, principal: str, tool: str, arguments: Mapping[str, Any], session_id: str, now: float
    ) -> bool:
        if self.principal != principal or self.tool != tool:
            return False
        if self.kind == "session" and self.session_id != session_id:
            return False
        if self.expires_at is not None and now >= self.expires_at:
            return False
        return self.scope.covers(arguments)

    def to_json(self, *, public: bool = False) -> dict[str, Any]:
        """The grant as JSON (``public``: see :meth:`GrantScope.to_json`)."""
        return {
            "grant_id": self.grant_id,
            "principal": self.principal,
            "tool": self.tool,
            "scope": self.scope.to_json(public=public),
            "kind": self.kind,
            "session_id": self.session_id,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "decided_by": self.decided_by,
            "widened_by": self.widened_by,
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Grant:
        return cls(
            raw["grant_id"],
            raw["principal"],
            raw["tool"],
            GrantScope.from_json(raw["scope"]),
            raw["kind"],
            raw.get("session_id"),
            float(raw.get("created_at", 0.0)),
            raw.get("expires_at"),
            raw.get("decided_by"),
            raw.get("widened_by"),
        )


def new_grant_id() -> str:
    return "g_" + secrets.token_hex(8)


@runtime_checkable
class GrantStore(Protocol):
    """Where grants live. Lookups are synchronous and fast (the pipeline calls ``find``)."""

    def find(
        self, principal: str, tool: str, arguments: Mapping[str, Any], session_id: str
    ) -> Grant | None: ...

    def add(self, grant: Grant) -> None: ...

    def list(self, *, principal: str | None = None, tool: str | None = None) -> list[Grant]: ...

    def revoke(self, grant_id: str) -> bool: ...

    def end_session(self, session_id: str) -> None: ...


class MemoryGrantStore:
    """Grants in memory: ``allow_always`` lasts as long as the process."""

    def __init__(self) -> None:
        self._grants: dict[str, Grant] = {}
        self._by_key: dict[tuple[str, str], list[Grant]] = {}
        self._lock = threading.Lock()

    def find(
        self, principal: str, tool: str, arguments: Mapping[str, Any], session_id: str
    ) -> Grant | None:
        now = time.time()
        for grant in self._by_key.get((principal, tool), ()):
            if grant.covers(principal, tool, arguments, session_id, now):
                return grant
        return None

    def add(self, grant: Grant) -> None:
        with self._lock:
            self._grants[grant.grant_id] = grant
            self._by_key.setdefault((grant.principal, grant.tool), []).append(grant)

    def list(self, *, principal: str | None = None, tool: str | None = None) -> list[Grant]:
        return [
            g
            for g in self._grants.values()
            if (principal is None or g.principal == principal) and (tool is None or g.tool == tool)
        ]

    def revoke(self, grant_id: str) -> bool:
        with self._lock:
            grant = self._grants.pop(grant_id, None)
            if grant is None:
                return False
            self._by_key[(grant.principal, grant.tool)].remove(grant)
            return True

    def end_session(self, session_id: str) -> None:
        for grant in [
            g for g in self._grants.values() if g.session_id == session_id and g.kind == "session"
        ]:
            self.revoke(grant.grant_id)


class SqliteGrantStore(MemoryGrantStore):
    """``allow_always`` grants persisted in a SQLite file; session grants stay in memory.

    Every persisted grant is loaded at open, so lookups never touch the disk; adding or
    revoking one writes through (a small synchronous transaction, rare by nature).
    """

    def __init__(self, path: str | Path) -> None:
        super().__init__()
        self.path = str(path)
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS grants (grant_id TEXT PRIMARY KEY, body TEXT NOT NULL)"
            )
            rows = self._db.execute("SELECT body FROM grants").fetchall()
        except sqlite3.Error as exc:
            raise ConfigError(f"cannot open the grant store: {exc}", path=self.path) from None
        for (body,) in rows:
            super().add(Grant.from_json(json.loads(body)))

    def add(self, grant: Grant) -> None:
        if grant.kind == "always":
            with self._lock:
                self._db.execute(
                    "INSERT OR REPLACE INTO grants VALUES (?, ?)",
                    (grant.grant_id, json.dumps(grant.to_json())),
                )
        super().add(grant)

    def revoke(self, grant_id: str) -> bool:
        with self._lock:
            self._db.execute("DELETE FROM grants WHERE grant_id = ?", (grant_id,))
        return super().revoke(grant_id)

    def close(self) -> None:
        self._db.close()


def grant_from_answer(
    ask: PermissionAsk,
    decision: PermissionDecision,
    arguments: Mapping[str, Any],
) -> Grant | None:
    """The grant an ``allow_session``/``allow_always`` answer creates (None otherwise).

    Raises:
        AskError: the answer names a scope that is not one of the ask's suggestions and
            does not cover the asked call.
    """
    if decision.decision not in ("allow_session", "allow_always"):
        return None
    scope = decision.scope or GrantScope.exact(arguments)
    if scope not in ask.suggestions and not scope.covers(arguments):
        raise AskError("the grant scope does not cover the asked call")
    now = time.time()
    return Grant(
        grant_id=new_grant_id(),
        principal=ask.principal,
        tool=ask.qualified_name,
        scope=scope,
        kind="session" if decision.decision == "allow_session" else "always",
        session_id=ask.session_id if decision.decision == "allow_session" else None,
        created_at=now,
        expires_at=now + decision.expires_in if decision.expires_in else None,
        decided_by=decision.decided_by,
        widened_by=(decision.decided_by or "unknown") if scope.widened else None,
    )
