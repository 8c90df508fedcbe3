"""``SqliteAskStore``: durable asks in a SQLite file, shared by every process that opens it.

Schema::

    asks(ask_id TEXT PRIMARY KEY, principal TEXT, tool TEXT, call_id TEXT,
         arguments_hash TEXT, status TEXT, created_at REAL, body TEXT)
    -- body: StoredAsk.to_json() plus the full answer (scope included), ASCII JSON

    ask_hosts(instance TEXT PRIMARY KEY, host TEXT, hostname TEXT, pid INTEGER,
              renewed_at REAL, lease REAL, ended INTEGER)
    -- the lease of each process whose calls wait on asks (see HostLease)

Every method is one small transaction; an answer is recorded with a conditional update
(``... WHERE status = 'pending'``), so two processes answering at once cannot both win, and
an answer is consumed once (``... WHERE status = 'answered'``).

An answer is recorded only with a credential of the store's keyring, sealed, and an answer
is reported only when its seal verifies (rule R13, :mod:`clearance.harness.approvers`): a
row whose answer does not verify (written into the file by hand) reads as ``closed``
(``unverified answer``), and is closed in the file too.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from clearance.errors import AskError, ConfigError
from clearance.harness.approvals import PermissionDecision
from clearance.harness.approvers import Approvers, Credential, Seal
from clearance.harness.ask_query import (
    AskFilter,
    Dialect,
    GroupBy,
    ShownPage,
    groups_sql,
    page_sql,
    shown_sql,
    states_of,
)
from clearance.harness.ask_store import (
    HOST_GONE,
    LEASE_COLUMNS,
    HostLease,
    StoredAsk,
    decision_from_json,
    decision_to_json,
    sealed_answer,
    verified,
)
from clearance.harness.grants import GrantScope

__all__ = ["SqliteAskStore", "ask_body", "ask_from_row", "host_gone", "matches"]

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS asks (ask_id TEXT PRIMARY KEY, principal TEXT NOT NULL, "
    "tool TEXT NOT NULL, call_id TEXT NOT NULL, arguments_hash TEXT NOT NULL, "
    "status TEXT NOT NULL, created_at REAL NOT NULL, body TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS asks_by_call ON asks (principal, tool, call_id, arguments_hash)",
    "CREATE INDEX IF NOT EXISTS asks_by_status ON asks (status, created_at)",
    "CREATE TABLE IF NOT EXISTS ask_hosts (instance TEXT PRIMARY KEY, host TEXT NOT NULL, "
    "hostname TEXT NOT NULL, pid INTEGER NOT NULL, renewed_at REAL NOT NULL, "
    "lease REAL NOT NULL, ended INTEGER NOT NULL DEFAULT 0)",
)
_COLUMNS = "ask_id, status, body"

_DIALECT = Dialect(
    mark="?",
    field=lambda name: f"json_extract(body, '$.{name}')",
    policies="json_each(body, '$.policies')",
    first_policy="json_extract(body, '$.policies[0]')",
)
"""How SQLite reads the JSON body (its JSON1 functions, built in since 3.38)."""


class SqliteAskStore:
    """Durable asks in a SQLite file (see the module docstring).

    Args:
        path: the file.
        approvers: the keys whose answers it takes and reports (default: the keyring of
            :func:`~clearance.harness.approvers.approvers_directory`).

    Raises:
        ConfigError: the file cannot be opened or is not a SQLite database.
    """

    shared = True

    def __init__(self, path: str | Path, *, approvers: Approvers | None = None) -> None:
        self.path = str(path)
        self.location = os.path.abspath(self.path)
        """What ``--db`` takes to open this store, from any directory."""
        self.approvers = approvers if approvers is not None else Approvers.default()
        self._lock = threading.Lock()
        self._writes = 0
        try:
            self._db = sqlite3.connect(
                self.path, check_same_thread=False, isolation_level=None, timeout=10
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            for statement in _SCHEMA:
                self._db.execute(statement)
        except sqlite3.Error as exc:
            raise ConfigError(f"cannot open the ask store: {exc}", path=self.path) from None

    def close(self) -> None:
        self._db.close()

    # -- writing ----------------------------------------------------------------------------

    def renew(self, instance: str, host: str, lease: float) -> None:
        """Renew this process's lease ``instance`` (of host ``host``) for ``lease`` seconds."""
        with self._lock:
            self._renew(instance, host, lease)

    def _renew(self, instance: str, host: str, lease: float) -> None:
        self._writes += 1
        self._db.execute(
            "INSERT INTO ask_hosts VALUES (?, ?, ?, ?, ?, ?, 0) ON CONFLICT (instance) DO "
            "UPDATE SET renewed_at = excluded.renewed_at, lease = excluded.lease",
            (instance, host, socket.gethostname(), os.getpid(), time.time(), lease),
        )

    def end(self, instance: str) -> None:
        """The process of lease ``instance`` stopped (its asks read ``host gone``)."""
        with self._lock:
            self._writes += 1
            self._db.execute("UPDATE ask_hosts SET ended = 1 WHERE instance = ?", (instance,))

    def lease(self, instance: str) -> HostLease | None:
        """The lease ``instance`` as last renewed, or None."""
        row = self._db.execute(
            f"SELECT {LEASE_COLUMNS} FROM ask_hosts WHERE instance = ?", (instance,)
        ).fetchone()
        return HostLease.of_row(row) if row is not None else None

    def gone_leases(self) -> set[str]:
        """The leases whose process is gone (ended, lapsed, or its pid dead here)."""
        now = time.time()
        rows = self._db.execute(f"SELECT {LEASE_COLUMNS} FROM ask_hosts").fetchall()
        return {str(r[0]) for r in rows if HostLease.of_row(r).gone(now)}

    def put(self, ask: StoredAsk, *, lease: float | None = None) -> None:
        """Store ``ask``; with ``lease``, renew its ``instance``'s lease in the same
        transaction (the ask is never seen without a live lease)."""
        with self._lock:
            if ask.instance is not None and lease is not None:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    self._renew(ask.instance, ask.host, lease)
                    self._insert(ask)
                    self._db.execute("COMMIT")
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                return
            self._insert(ask)

    def _insert(self, ask: StoredAsk) -> None:
        self._writes += 1
        self._db.execute(
            "INSERT OR REPLACE INTO asks VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                ask.ask_id,
                ask.principal,
                ask.tool,
                ask.call_id,
                ask.arguments_hash,
                ask.status,
                ask.created_at,
                ask_body(ask),
            ),
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
            found = self.get(ask_id)
            if found is None:
                raise AskError(f"no ask {ask_id!r}")
            answered = sealed_answer(found, decision, credential, self.approvers, by=by, via=via)
            self._writes += 1
            done = self._db.execute(
                "UPDATE asks SET status = 'answered', body = ? "
                "WHERE ask_id = ? AND status = 'pending'",
                (ask_body(answered), ask_id),
            )
            if done.rowcount != 1:
                raise AskError(f"ask {ask_id} is {found.status}, not pending")
            return answered

    def adopt(self, ask_id: str, instance: str, host: str, lease: float) -> bool:
        """Make the pending ask ``ask_id`` wait on lease ``instance`` (a paused call's ask
        that a call of this process now waits on: it ends with this process), renewing the
        lease in the same transaction; False when it is no longer pending."""
        with self._lock:
            found = self.get(ask_id)
            if found is None or found.status != "pending":
                return False
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._renew(instance, host, lease)
                self._writes += 1
                done = self._db.execute(
                    "UPDATE asks SET body = ? WHERE ask_id = ? AND status = 'pending'",
                    (ask_body(replace(found, instance=instance)), ask_id),
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            return done.rowcount == 1

    def consume(self, ask_id: str) -> bool:
        with self._lock:
            found = self.get(ask_id)
            if found is None or found.status != "answered":
                return False
            self._writes += 1
            done = self._db.execute(
                "UPDATE asks SET status = 'consumed', body = ? "
                "WHERE ask_id = ? AND status = 'answered'",
                (ask_body(replace(found, status="consumed")), ask_id),
            )
            return done.rowcount == 1

    def withdraw(self, ask_id: str, why: str) -> None:
        with self._lock:
            found = self.get(ask_id)
            if found is None or found.status != "pending":
                return
            self._writes += 1
            self._db.execute(
                "UPDATE asks SET status = 'closed', body = ? "
                "WHERE ask_id = ? AND status = 'pending'",
                (ask_body(replace(found, status="closed", closed_why=why)), ask_id),
            )

    def sweep(self, before: float) -> int:
        """Close as ``expired`` the pending asks created before ``before``: how many."""
        with self._lock:
            ids = [
                r[0]
                for r in self._db.execute(
                    "SELECT ask_id FROM asks WHERE status = 'pending' AND created_at < ?",
                    (before,),
                )
            ]
        for ask_id in ids:
            self.withdraw(ask_id, "expired")  # a no-op for one answered meanwhile
        return len(ids)

    # -- reading ----------------------------------------------------------------------------

    def get(self, ask_id: str) -> StoredAsk | None:
        row = self._db.execute(
            f"SELECT {_COLUMNS} FROM asks WHERE ask_id = ?", (ask_id,)
        ).fetchone()
        return self._reported(row) if row is not None else None

    def find(
        self, principal: str, tool: str, call_id: str, arguments_hash: str
    ) -> StoredAsk | None:
        row = self._db.execute(
            f"SELECT {_COLUMNS} FROM asks WHERE principal = ? AND tool = ? AND call_id = ? "
            "AND arguments_hash = ? AND status IN ('pending', 'answered') "
            "ORDER BY created_at DESC LIMIT 1",
            (principal, tool, call_id, arguments_hash),
        ).fetchone()
        found = self._reported(row) if row is not None else None
        if found is None or not matches(found, principal, tool, call_id, arguments_hash):
            return None
        return found

    def pending(self) -> list[StoredAsk]:
        rows = self._db.execute(
            f"SELECT {_COLUMNS} FROM asks WHERE status = 'pending' ORDER BY created_at"
        ).fetchall()
        return [a for a in map(self._reported, rows) if a.status == "pending"]

    def answered(self) -> list[StoredAsk]:
        rows = self._db.execute(
            f"SELECT {_COLUMNS} FROM asks WHERE status = 'answered' ORDER BY created_at"
        ).fetchall()
        return [a for a in map(self._reported, rows) if a.status == "answered"]

    def all(self, *, limit: int = 100) -> list[StoredAsk]:
        """The newest asks, whatever their status."""
        rows = self._db.execute(
            f"SELECT {_COLUMNS} FROM asks ORDER BY created_at DESC LIMIT ?", (limit,)
        ).fetchall()
        return [self._reported(r) for r in rows]

    def shown_page(
        self, where: AskFilter, *, offset: int, limit: int, group: GroupBy | None = None
    ) -> ShownPage:
        """One page of the shown asks ``where`` holds, and how many it holds (see
        :func:`~clearance.harness.ask_query.shown_page`)."""
        rows_sql, count_sql, params = page_sql(_DIALECT, "asks", _COLUMNS, where, group)
        rows = self._db.execute(rows_sql, (*params, limit, offset)).fetchall()
        total, waiting = self._db.execute(count_sql, params).fetchone()
        return ShownPage([self._reported(r) for r in rows], int(total), int(waiting))

    def shown_groups(self, where: AskFilter, by: GroupBy) -> list[tuple[str, int]]:
        """The values of ``by`` among the shown asks ``where`` holds, with their counts
        (see :func:`~clearance.harness.ask_query.shown_groups`)."""
        query, params = groups_sql(_DIALECT, "asks", where, by)
        return [(str(v), int(n)) for v, n in self._db.execute(query, params)]

    def shown_states(self, since: float) -> dict[str, str]:
        """Every shown ask's state by id (see
        :func:`~clearance.harness.ask_query.shown_states`), reading no body whole."""
        source, params = shown_sql(_DIALECT, "asks", AskFilter(since=since))
        rows = self._db.execute(
            f"SELECT ask_id, status, {_DIALECT.field('instance')} {source}", params
        ).fetchall()
        now = time.time()
        instances = {str(r[2]) for r in rows if r[1] == "pending" and r[2]}
        gone = {}
        for instance in instances:
            lease = self.lease(instance)
            gone[instance] = lease is None or lease.gone(now)
        return states_of(rows, gone)

    def pending_ids(self, since: float) -> list[str]:
        """The ids of the pending asks raised since ``since`` (as the rows say: one whose
        host is gone reads pending until it is read)."""
        rows = self._db.execute(
            "SELECT ask_id FROM asks WHERE status = 'pending' AND created_at >= ?", (since,)
        )
        return [str(r[0]) for r in rows]

    def version(self) -> tuple[int, int]:
        """Changes to the file: another connection's commits (SQLite's ``data_version``)
        and this store's own writes. Equal versions: nothing was written in between (a
        lease may still have lapsed)."""
        (data,) = self._db.execute("PRAGMA data_version").fetchone()
        return int(data), self._writes

    def _reported(self, row: tuple[Any, ...]) -> StoredAsk:
        """The ask of a row as this store reports it: an answer whose seal does not
        verify is no answer, and a pending ask whose host is gone is closed (and its row
        is closed, unless it changed meanwhile)."""
        ask = ask_from_row(row)
        shown = verified(ask, self.approvers)
        if shown.status == "pending" and shown.instance is not None:
            shown = host_gone(shown, self.lease(shown.instance), time.time())
        if shown.status != ask.status:
            self._db.execute(
                "UPDATE asks SET status = ?, body = ? WHERE ask_id = ? AND status = ? AND body = ?",
                (shown.status, ask_body(shown), ask.ask_id, row[1], row[2]),
            )
        return shown


def ask_body(ask: StoredAsk) -> str:
    """The stored text of ``ask``: its JSON with the full answer and scopes (ASCII)."""
    raw = ask.to_json()
    raw["arguments_hash"] = ask.arguments_hash
    raw["suggestions"] = [s.to_json() for s in ask.suggestions]
    raw["decision"] = decision_to_json(ask.decision) if ask.decision is not None else None
    raw["seal"] = ask.seal.to_json() if ask.seal is not None else None
    return json.dumps(raw, ensure_ascii=True, sort_keys=True)


def ask_from_row(row: tuple[Any, ...]) -> StoredAsk:
    """The ask of an ``(ask_id, status, body)`` row."""
    ask_id, status, body = row
    raw = json.loads(body)
    decision = raw.get("decision")
    seal = raw.get("seal")
    return StoredAsk(
        ask_id=ask_id,
        principal=raw["principal"],
        tool=raw["tool"],
        call_id=raw["call_id"],
        session_id=raw.get("session_id", ""),
        arguments_hash=raw["arguments_hash"],
        arguments=raw.get("arguments") or {},
        reason=raw.get("reason", ""),
        policies=tuple(raw.get("policies") or ()),
        suggestions=tuple(GrantScope.from_json(s) for s in raw.get("suggestions") or ()),
        deciding=tuple(raw.get("deciding") or ()),
        facts=raw.get("facts") or {},
        notes=raw.get("notes") or {},
        created_at=float(raw.get("created_at", 0.0)),
        status=status,
        decision=decision_from_json(decision) if decision else None,
        answered_by=raw.get("answered_by"),
        via=raw.get("via"),
        answered_at=raw.get("answered_at"),
        closed_why=raw.get("closed_why"),
        host=str(raw.get("host") or ""),
        instance=raw.get("instance") if isinstance(raw.get("instance"), str) else None,
        seal=Seal(str(seal.get("approver")), str(seal.get("mac")))
        if isinstance(seal, dict)
        else None,
    )


def host_gone(ask: StoredAsk, lease: HostLease | None, now: float) -> StoredAsk:
    """``ask`` closed (``host gone``) when the process whose call waits on it is gone
    (its lease is missing, ended, lapsed or its pid dead), else ``ask`` itself."""
    if lease is not None and not lease.gone(now):
        return ask
    return replace(ask, status="closed", closed_why=HOST_GONE)


def matches(ask: StoredAsk, principal: str, tool: str, call_id: str, arguments_hash: str) -> bool:
    """Whether ``ask`` is the open ask of that call, as ``find`` reports it: pending or
    answered (an unverified answer reads closed), and its sealed body, not the row's index
    columns (which nothing seals), names that call."""
    return ask.status in ("pending", "answered") and (
        ask.principal,
        ask.tool,
        ask.call_id,
        ask.arguments_hash,
    ) == (
        principal,
        tool,
        call_id,
        arguments_hash,
    )
