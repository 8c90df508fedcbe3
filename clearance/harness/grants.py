"""Grants: remembered approvals, the argument scopes they cover, and the stores that keep them.

A grant binds a principal, a tool and a :class:`GrantScope`. Scopes (rule R5):

- ``exact``: exactly the asked arguments (a hash of their canonical JSON);
- ``prefix``: every path field of the call, each under its own directory prefix. A call is
  covered only when *all* of the scope's fields are present and under their prefixes, so a
  grant for ``move_file`` from ``src/`` to ``public/`` never moves ``.env`` (issue 19);
- ``tool``: any arguments.

Stores: :class:`MemoryGrantStore` here, ``SqliteGrantStore`` in
:mod:`clearance.harness.grants_sqlite`. A persisted grant that is
revoked, by this store, another store object on the same file or another process
(``clearance grants revoke``), authorizes nothing from the next lookup on (rule R12).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import posixpath
import re
import secrets
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from clearance import _pointer

__all__ = [
    "Grant",
    "GrantScope",
    "GrantStore",
    "MemoryGrantStore",
    "arguments_hash",
    "find_grant",
    "guess_path_fields",
    "new_grant_id",
    "suggest_scopes",
]

# Argument names taken for paths when the tool declares none (see suggest_scopes).
_PATHISH = ("path", "source", "destination", "dest", "src", "file", "dir", "directory", "root")
_SCOPE_KINDS = ("exact", "prefix", "tool")
# A field name shown as is in a scope's description; anything else is shown as a quoted
# JSON pointer, so that a field name cannot read as part of the description.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_-]+")


def arguments_hash(arguments: Mapping[str, Any]) -> str:
    """A stable hash of arguments (canonical JSON, SHA-256).

    Any Python string hashes, lone surrogates included: they are encoded as their code
    points (``surrogatepass``), which is injective and leaves the hash of every other
    string what it always was (so persisted exact grants keep matching).
    """
    text = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class GrantScope:
    """Which arguments a grant covers.

    - ``GrantScope.exact(arguments)``: exactly these arguments;
    - ``GrantScope.prefix_of("/path", "src/")``: any call whose ``/path`` is under ``src/``
      (no ``..`` steps, no absolute paths unless the prefix is absolute);
    - ``GrantScope.prefixes_of({"/source": "src/", "/destination": "public/"})``: any call
      whose ``/source`` is under ``src/`` *and* whose ``/destination`` is under ``public/``;
      a call lacking one of the fields is not covered;
    - ``GrantScope.tool()``: any arguments.

    Build scopes with these constructors: they validate what they are given.
    """

    kind: Literal["exact", "prefix", "tool"]
    arguments_hash: str | None = None
    """For ``exact``: :func:`arguments_hash` of the covered arguments."""
    prefixes: tuple[tuple[str, str], ...] = ()
    """For ``prefix``: ``(JSON pointer, prefix)`` pairs, every one of which a call must meet."""
    description: str = field(default="", init=False, compare=False)
    """What the scope covers, in words (derived from the above, never set by hand)."""

    def __post_init__(self) -> None:
        if self.kind not in _SCOPE_KINDS:
            raise ValueError(f"a grant scope kind is one of {', '.join(_SCOPE_KINDS)}")
        if self.kind == "exact" and not isinstance(self.arguments_hash, str):
            raise ValueError("an exact grant scope needs the hash of its arguments")
        if self.kind != "exact" and self.arguments_hash is not None:
            raise ValueError(f"a {self.kind} grant scope has no arguments hash")
        if self.kind == "prefix":
            _check_prefixes(self.prefixes)
        elif self.prefixes:
            raise ValueError(f"a {self.kind} grant scope has no prefixes")
        object.__setattr__(self, "description", _describe(self))

    @classmethod
    def exact(cls, arguments: Mapping[str, Any]) -> GrantScope:
        return cls("exact", arguments_hash=arguments_hash(arguments))

    @classmethod
    def prefix_of(cls, field: str, prefix: str) -> GrantScope:
        """One field (a JSON pointer) under a prefix.

        Raises:
            ValueError: ``field`` is not a JSON pointer to a field or ``prefix`` is empty.
        """
        return cls.prefixes_of({field: prefix})

    @classmethod
    def prefixes_of(cls, prefixes: Mapping[str, str]) -> GrantScope:
        """Every field (JSON pointer) under its own prefix.

        Raises:
            ValueError: no fields, a field that is not a JSON pointer to a field, or an
                empty prefix.
        """
        return cls("prefix", prefixes=tuple(prefixes.items()))

    @classmethod
    def tool(cls) -> GrantScope:
        return cls("tool")

    @property
    def widened(self) -> bool:
        return self.kind != "exact"

    @property
    def field(self) -> str | None:
        """The pointer of a one-field prefix scope (``None`` for other scopes)."""
        return self.prefixes[0][0] if len(self.prefixes) == 1 else None

    @property
    def prefix(self) -> str | None:
        """The prefix of a one-field prefix scope (``None`` for other scopes)."""
        return self.prefixes[0][1] if len(self.prefixes) == 1 else None

    @property
    def fields(self) -> tuple[str, ...]:
        """The pointers a prefix scope constrains (``()`` for other scopes)."""
        return tuple(pointer for pointer, _ in self.prefixes)

    def covers(self, arguments: Mapping[str, Any]) -> bool:
        if self.kind == "tool":
            return True
        if self.kind == "exact":
            return self.arguments_hash == arguments_hash(arguments)
        return all(_all_under(arguments, pointer, prefix) for pointer, prefix in self.prefixes)

    def to_json(self, *, public: bool = False) -> dict[str, Any]:
        """The scope as JSON. ``public=True`` (asks, journal records) leaves out the hash of
        the exact arguments: a hash of a low-entropy secret can be reversed by guessing.

        ``prefixes`` maps each pointer to its prefix. ``field`` and ``prefix`` repeat a
        one-field scope's pair (the format before multi-field scopes) and are null for a
        scope of several fields, so that a reader knowing only them fails instead of
        checking one field of several.
        """
        return {
            "kind": self.kind,
            "arguments_hash": None if public else self.arguments_hash,
            "field": self.field,
            "prefix": self.prefix,
            "prefixes": dict(self.prefixes) if self.kind == "prefix" else None,
            "description": self.description,
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> GrantScope:
        """A scope from :meth:`to_json` output, or from the one-field format before it.

        Raises:
            ValueError: the JSON is not a valid scope.
        """
        if not isinstance(raw, Mapping):
            raise ValueError("a grant scope is a JSON object")
        kind = raw.get("kind")
        if kind != "prefix":
            return cls(kind, raw.get("arguments_hash"))  # type: ignore[arg-type]
        single = (raw.get("field"), raw.get("prefix"))
        many = raw.get("prefixes")
        if many is None:
            return cls.prefix_of(*single)  # type: ignore[arg-type]
        if not isinstance(many, Mapping):
            raise ValueError("a prefix grant scope's prefixes are a JSON object")
        scope = cls.prefixes_of(many)
        if single != (None, None) and single != (scope.field, scope.prefix):
            raise ValueError("a prefix grant scope's field and prefix disagree with prefixes")
        return scope


def _check_prefixes(prefixes: Any) -> None:
    if not isinstance(prefixes, tuple) or not prefixes:
        raise ValueError("a prefix grant scope needs at least one field")
    seen: set[str] = set()
    for pair in prefixes:
        if not (isinstance(pair, tuple) and len(pair) == 2):
            raise ValueError("a prefix grant scope's prefixes are (pointer, prefix) pairs")
        pointer, prefix = pair
        if not isinstance(pointer, str) or not _pointer.parse(pointer):
            raise ValueError(f"{pointer!r} is not a JSON pointer to a field")
        if not isinstance(prefix, str) or not prefix:
            raise ValueError(f"the prefix for {pointer} must be a non-empty string")
        if pointer in seen:
            raise ValueError(f"{pointer} appears twice in a prefix grant scope")
        seen.add(pointer)


def _describe(scope: GrantScope) -> str:
    if scope.kind == "exact":
        return "this exact call"
    if scope.kind == "tool":
        return "any arguments"
    parts = [f"{_label(pointer)} under {prefix}" for pointer, prefix in scope.prefixes]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _label(pointer: str) -> str:
    tokens = _pointer.parse(pointer)
    if len(tokens) == 1 and _PLAIN_NAME.fullmatch(tokens[0]):
        return tokens[0]
    return json.dumps(pointer)


def _all_under(arguments: Mapping[str, Any], pointer: str, prefix: str) -> bool:
    values = [v for _, v in _pointer.find(arguments, pointer)]
    return bool(values) and all(_under(v, prefix) for v in values)


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


def guess_path_fields(arguments: Mapping[str, Any]) -> tuple[str, ...]:
    """Top-level argument names taken for paths when a tool declares none: ``path``,
    ``source``, ``destination``, ``dest``, ``src``, ``file``, ``dir``, ``directory``,
    ``root`` (any case)."""
    return tuple(k for k in arguments if isinstance(k, str) and k.lower() in _PATHISH)


def suggest_scopes(
    arguments: Mapping[str, Any],
    *,
    withheld: Iterable[str] = (),
    path_fields: Iterable[str] | None = None,
    other_facts: Iterable[str] = (),
    pinned: Iterable[str] = (),
) -> tuple[GrantScope, ...]:
    """Scopes that make sense for a grant on this call: the exact call, at most one prefix
    scope, and the tool (only the exact call when the tool has a ``pinned`` field).

    The prefix scope constrains *every* path field of the call, each to the directory its
    value is in (``source under src/ and destination under public/``). It is offered only
    when every path field can be constrained that way: each is present, not withheld, a
    string, and has a parent directory it lies plainly under; and when the tool has no
    other deciding field (``other_facts``), which a directory prefix cannot constrain,
    whether or not this call carries it (a later call that does would be covered with it
    free). Otherwise a grant wider than the exact call would leave a deciding field free,
    so none but ``tool`` (whose description says "any arguments") is offered.

    Args:
        arguments: the call's final arguments.
        withheld: JSON pointers of sensitive or redacted values. Suggestions are shown to
            people and recorded (R8), so a withheld path is never turned into a prefix
            (and then no prefix scope is offered).
        path_fields: the top-level argument names that are paths (a tool's declared path
            facts). ``None``: guessed by name (:func:`guess_path_fields`).
        other_facts: the tool's other deciding arguments (a declared fact of another
            kind: command, url, email, number...; for a tool without facts, every
            argument that is not a path, and ``"*"`` when its schema admits others).
        pinned: deciding arguments that name something the session holds (a process id,
            :class:`~clearance.facts.base.SessionFact`): a scope wider than the exact call
            would cover whatever the session holds later, so none is offered (and an
            answer naming one is refused: it leaves the field free).
    """
    scopes = [GrantScope.exact(arguments)]
    if tuple(pinned):
        return tuple(scopes)
    prefix = _prefix_scope(arguments, withheld, path_fields)
    if prefix is not None and not tuple(other_facts):
        scopes.append(prefix)
    scopes.append(GrantScope.tool())
    return tuple(scopes)


def _prefix_scope(
    arguments: Mapping[str, Any], withheld: Iterable[str], path_fields: Iterable[str] | None
) -> GrantScope | None:
    names = guess_path_fields(arguments) if path_fields is None else tuple(path_fields)
    if not names:
        return None
    # A top-level argument is hidden when a withheld pointer reaches it or into it.
    hidden = {(_pointer.parse(p) or ("*",))[0] for p in withheld}
    prefixes: dict[str, str] = {}
    for name in names:
        value = arguments.get(name)
        if name in hidden or "*" in hidden or not isinstance(value, str):
            return None
        directory = posixpath.dirname(value)
        # The whole path must be plain, its directory too: "src/../x/" is not shown to a
        # person as a prefix (it reads as src/ and reaches x/).
        if directory in ("", "/") or not _under(value, "/" if value.startswith("/") else ""):
            return None
        prefixes["/" + _pointer.escape(name)] = directory + "/"
    return GrantScope.prefixes_of(prefixes)


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
        """A grant from :meth:`to_json` output.

        Raises:
            ValueError: the JSON is not a valid grant.
        """
        try:
            grant = cls(
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
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a grant: {exc!r}") from None
        texts = (grant.grant_id, grant.principal, grant.tool)
        if not all(isinstance(t, str) for t in texts) or grant.kind not in ("session", "always"):
            raise ValueError("not a grant: bad id, principal, tool or kind")
        expires = grant.expires_at
        if expires is not None and (
            isinstance(expires, bool) or not isinstance(expires, float | int)
        ):
            raise ValueError("not a grant: expires_at is not a number")
        return grant


def new_grant_id() -> str:
    return "g_" + secrets.token_hex(8)


@runtime_checkable
class GrantStore(Protocol):
    """Where grants live. Lookups are synchronous and fast (the pipeline calls ``find``).

    A store shared between processes must make a revocation effective at every
    process's next ``find`` (rule R12).
    """

    def find(
        self, principal: str, tool: str, arguments: Mapping[str, Any], session_id: str
    ) -> Grant | None: ...

    def add(self, grant: Grant) -> None: ...

    def list(self, *, principal: str | None = None, tool: str | None = None) -> list[Grant]: ...

    def revoke(self, grant_id: str) -> bool: ...

    def end_session(self, session_id: str) -> None: ...


class _Bucket:
    """The grants of one principal and tool, by scope kind: exact grants by the hash of
    their arguments, the others in insertion order. Changes are made under the store's
    lock so that a lookup without it stays valid: an addition appends (a list iterated
    meanwhile is safe to grow) or sets one dictionary entry; a removal puts a new list in
    place."""

    __slots__ = ("exact", "prefix", "tool")

    def __init__(self) -> None:
        self.exact: dict[str, list[Grant]] = {}
        self.prefix: list[Grant] = []
        self.tool: list[Grant] = []

    def __len__(self) -> int:
        return len(self.exact) + len(self.prefix) + len(self.tool)

    def put(self, grant: Grant) -> None:
        scope = grant.scope
        if scope.kind == "exact":
            assert scope.arguments_hash is not None
            self.exact[scope.arguments_hash] = [
                *self.exact.get(scope.arguments_hash, ()),
                grant,
            ]
        elif scope.kind == "prefix":
            self.prefix.append(grant)
        else:
            self.tool.append(grant)

    def drop(self, grant: Grant) -> None:
        scope, grant_id = grant.scope, grant.grant_id
        if scope.kind == "exact":
            assert scope.arguments_hash is not None
            kept = [g for g in self.exact.get(scope.arguments_hash, ()) if g.grant_id != grant_id]
            if kept:
                self.exact[scope.arguments_hash] = kept
            else:
                self.exact.pop(scope.arguments_hash, None)
        elif scope.kind == "prefix":
            self.prefix = [g for g in self.prefix if g.grant_id != grant_id]
        else:
            self.tool = [g for g in self.tool if g.grant_id != grant_id]


class MemoryGrantStore:
    """Grants in memory: ``allow_always`` lasts as long as the process.

    Lookups are indexed: by principal and tool, then by scope kind; an exact grant is
    found by the hash of the call's canonical arguments (computed once per lookup), so a
    lookup costs the same with 10 or 100,000 exact grants on one principal and tool
    (``benchmarks/bench_grant_lookup.py``). Of the grants covering a call, the one added
    first is returned, as when every grant was scanned in order.
    """

    def __init__(self) -> None:
        self._grants: dict[str, Grant] = {}
        self._index: dict[tuple[str, str], _Bucket] = {}
        self._order: dict[str, int] = {}
        """Each grant's insertion number: the first-added covering grant wins."""
        self._next = 0
        self._lock = threading.RLock()

    def find(
        self, principal: str, tool: str, arguments: Mapping[str, Any], session_id: str
    ) -> Grant | None:
        bucket = self._index.get((principal, tool))
        if bucket is None:
            return None
        now, order = time.time(), self._order
        best: Grant | None = None
        candidates: list[Iterable[Grant]] = [bucket.tool, bucket.prefix]
        if bucket.exact:
            candidates.append(bucket.exact.get(arguments_hash(arguments), ()))
        for grants in candidates:
            for grant in grants:
                if grant.covers(principal, tool, arguments, session_id, now):
                    if best is None or order.get(grant.grant_id, 0) < order.get(best.grant_id, 0):
                        best = grant
                    break  # each kind's grants are in insertion order
        return best

    def add(self, grant: Grant) -> None:
        with self._lock:
            self._forget(grant.grant_id)
            self._put(grant)

    def list(self, *, principal: str | None = None, tool: str | None = None) -> list[Grant]:
        if principal is not None and tool is not None:
            bucket = self._index.get((principal, tool))
            if bucket is None:
                return []
            grants = [
                *bucket.tool,
                *bucket.prefix,
                *(g for gs in bucket.exact.values() for g in gs),
            ]
            order = self._order
            return sorted(grants, key=lambda g: order.get(g.grant_id, 0))
        return [
            g
            for g in list(self._grants.values())
            if (principal is None or g.principal == principal) and (tool is None or g.tool == tool)
        ]

    def revoke(self, grant_id: str) -> bool:
        with self._lock:
            return self._forget(grant_id)

    def end_session(self, session_id: str) -> None:
        # Session grants are only ever in memory: nothing to write, whatever the store.
        with self._lock:
            for grant in [
                g
                for g in self._grants.values()
                if g.session_id == session_id and g.kind == "session"
            ]:
                self._forget(grant.grant_id)

    def _put(self, grant: Grant) -> None:
        """Index a grant whose id is not held (under the lock)."""
        self._grants[grant.grant_id] = grant
        self._order[grant.grant_id] = self._next
        self._next += 1
        key = (grant.principal, grant.tool)
        bucket = self._index.get(key)
        if bucket is None:
            bucket = _Bucket()
            bucket.put(grant)
            self._index[key] = bucket
        else:
            bucket.put(grant)

    def _forget(self, grant_id: str) -> bool:
        """Drop a grant from the index (under the lock); whether it was held."""
        grant = self._grants.pop(grant_id, None)
        if grant is None:
            return False
        self._order.pop(grant_id, None)
        key = (grant.principal, grant.tool)
        bucket = self._index.get(key)
        if bucket is not None:
            bucket.drop(grant)
            if not len(bucket):
                del self._index[key]
        return True

    def _replace_always(self, grants: Iterable[Grant]) -> None:
        """Keep the session grants, replace every ``always`` grant by ``grants``."""
        with self._lock:
            kept = [g for g in self._grants.values() if g.kind == "session"]
            by_id = {g.grant_id: g for g in (*kept, *grants)}
            index: dict[tuple[str, str], _Bucket] = {}
            order: dict[str, int] = {}
            for grant in by_id.values():
                order[grant.grant_id] = self._next
                self._next += 1
                index.setdefault((grant.principal, grant.tool), _Bucket()).put(grant)
            # Each assignment atomic; a find sees the old or the new index (the order of
            # a grant missing from the one it holds counts as 0: harmless).
            self._order, self._index, self._grants = order, index, by_id

    def _apply_always(self, put: Iterable[Grant], gone: Iterable[str]) -> None:
        """Apply changes of the persisted grants: ``put`` added or changed, ``gone``
        removed (ids; a session grant of that id is kept)."""
        with self._lock:
            for grant_id in gone:
                held = self._grants.get(grant_id)
                if held is not None and held.kind == "always":
                    self._forget(grant_id)
            for grant in put:
                held = self._grants.get(grant.grant_id)
                if held is not None and held == grant:
                    continue
                self._forget(grant.grant_id)
                self._put(grant)


async def find_grant(
    store: GrantStore, principal: str, tool: str, arguments: Mapping[str, Any], session_id: str
) -> Grant | None:
    """``store.find``, in a worker thread when the store reads a database
    (``reads_database``: SQLite, PostgreSQL), so that a lookup waiting on a file lock or
    a round trip does not hold up the event loop's other calls."""
    if getattr(store, "reads_database", False):
        return await asyncio.to_thread(store.find, principal, tool, arguments, session_id)
    return store.find(principal, tool, arguments, session_id)
