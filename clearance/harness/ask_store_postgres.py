"""``PostgresAskStore``: durable asks in PostgreSQL, shared by several hosts.

The same rows and rules as :class:`~clearance.harness.ask_store_sqlite.SqliteAskStore`:
every method is one small statement; an answer is recorded with a conditional update
(``... WHERE status = 'pending'``), so two hosts answering at once cannot both win, and an
answer is applied once (``... WHERE status = 'answered'``).

A trigger ``NOTIFY``s every new ask and every change of status; :meth:`subscribe` passes
them on (an approval inbox shows a new ask, a waiting host sees its answer, within
milliseconds), and after a lost connection it passes ``None``: re-read, something may have
changed meanwhile. A call waiting for its answer also reads the store a few times a
second (see :mod:`clearance.harness._approval`), so an answer reaches it within a second
even without notices.

When the database is unreachable every method raises
:class:`~clearance.errors.StoreError` naming the store: a call that needs to ask is
denied (rule R1). Schema: :mod:`clearance.harness.postgres`.

The leases of the processes whose calls wait on asks (``ask_hosts``) are renewed and
judged by the server's clock (``clock_timestamp()``), so hosts whose clocks disagree do
not end each other's asks.

Answers are sealed and checked as in the SQLite store (rule R13,
:mod:`clearance.harness.approvers`): an answer whose seal does not verify under this
store's keyring reads as ``closed`` (``unverified answer``) and is closed in the table.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from clearance.errors import AskError
from clearance.harness.approvals import PermissionDecision
from clearance.harness.approvers import Approvers, Credential
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
    LEASE_COLUMNS,
    HostLease,
    StoredAsk,
    refusal,
    sealed_answer,
    verified,
)
from clearance.harness.ask_store_sqlite import ask_body, ask_from_row, host_gone, matches
from clearance.harness.postgres import Connection, PostgresDatabase, open_database

__all__ = ["PostgresAskStore"]

_COLUMNS = "ask_id, status, body"

_DIALECT = Dialect(
    mark="%s",
    field=lambda name: f"(body::jsonb ->> '{name}')",
    policies="jsonb_array_elements_text(body::jsonb -> 'policies')",
    first_policy="(body::jsonb -> 'policies' ->> 0)",
)
"""How PostgreSQL reads the JSON body (a text column, cast where a field is read)."""


class PostgresAskStore:
    """Durable asks in PostgreSQL (see the module docstring).

    Args:
        database: a ``postgresql://`` URL (the store opens and closes its own
            connections) or a :class:`~clearance.harness.postgres.PostgresDatabase` shared
            with other stores.
        approvers: the keys whose answers it takes and reports (default: the keyring of
            :func:`~clearance.harness.approvers.approvers_directory`).

    Raises:
        ConfigError: the URL is not a PostgreSQL URL.
    """

    shared = True

    def __init__(
        self, database: str | PostgresDatabase, *, approvers: Approvers | None = None
    ) -> None:
        self.approvers = approvers if approvers is not None else Approvers.default()
        self.database, self._owned = open_database(database)
        self.path = self.database.name
        self.location = self.database.location
        """What ``--db`` takes to open this store (a URL without its password)."""
        self._table = f"{self.database.schema}.asks"
        self._hosts = f"{self.database.schema}.ask_hosts"

    def __repr__(self) -> str:
        return f"PostgresAskStore({self.database!r})"

    def close(self) -> None:
        """Close the database when this store opened it."""
        if self._owned:
            self.database.close()

    def subscribe(self, callback: Callable[[str | None], None]) -> Callable[[], None]:
        """Call ``callback(ask_id)`` (from the listener thread) when an ask is raised or
        changes status on any host, and ``callback(None)`` after a reconnection; returns
        the unsubscribe function. The callback must be quick and must not raise."""

        def notice(payload: str | None) -> None:
            callback(None if payload is None else payload.rsplit(" ", 1)[0])

        return self.database.subscribe("asks", notice)

    # -- writing ----------------------------------------------------------------------------

    def renew(self, instance: str, host: str, lease: float) -> None:
        """Renew this process's lease ``instance`` (of host ``host``) for ``lease`` seconds.

        Raises:
            StoreError: the database is unreachable.
        """
        self.database.run(
            "renew a host's lease", lambda conn: self._renew(conn, instance, host, lease)
        )

    def _renew(self, conn: Connection, instance: str, host: str, lease: float) -> None:
        conn.execute(
            f"INSERT INTO {self._hosts} VALUES (%s, %s, %s, %s, "
            "extract(epoch FROM clock_timestamp()), %s, false) ON CONFLICT (instance) DO "
            "UPDATE SET renewed_at = EXCLUDED.renewed_at, lease = EXCLUDED.lease",
            (instance, host, socket.gethostname(), os.getpid(), lease),
        )

    def end(self, instance: str) -> None:
        """The process of lease ``instance`` stopped (its asks read ``host gone``).

        Raises:
            StoreError: the database is unreachable.
        """
        self.database.run(
            "end a host's lease",
            lambda conn: conn.execute(
                f"UPDATE {self._hosts} SET ended = true WHERE instance = %s", (instance,)
            ),
        )

    def lease(self, instance: str) -> HostLease | None:
        """The lease ``instance`` as last renewed, in this machine's time, or None.

        Raises:
            StoreError: the database is unreachable.
        """
        return self._leases([instance])[0].get(instance)

    def _leases(self, instances: list[str] | None) -> tuple[dict[str, HostLease], float]:
        """The leases of ``instances`` (None: every lease) and the server's time
        (``renewed_at`` and the time compare on the server's clock)."""

        def query(conn: Connection) -> tuple[list[tuple[Any, ...]], float]:
            select = f"SELECT {LEASE_COLUMNS} FROM {self._hosts}"
            rows = (
                conn.execute(select).fetchall()
                if instances is None
                else conn.execute(f"{select} WHERE instance = ANY(%s)", (instances,)).fetchall()
            )
            now = conn.execute("SELECT extract(epoch FROM clock_timestamp())").fetchone()
            return [tuple(r) for r in rows], float(now[0]) if now else 0.0

        rows, now = self.database.run("read the hosts' leases", query, read=True)
        return {str(r[0]): HostLease.of_row(r) for r in rows}, now

    def gone_leases(self) -> set[str]:
        """The leases whose process is gone (ended, lapsed on the server's clock, or its
        pid dead on this machine).

        Raises:
            StoreError: the database is unreachable.
        """
        leases, now = self._leases(None)
        return {instance for instance, lease in leases.items() if lease.gone(now)}

    def pending_ids(self, since: float) -> list[str]:
        """The ids of the pending asks raised since ``since`` (as the rows say).

        Raises:
            StoreError: the database is unreachable.
        """
        rows = self._fetch(
            "read the pending asks",
            f"SELECT ask_id FROM {self._table} WHERE status = 'pending' AND created_at >= %s",
            (since,),
        )
        return [str(r[0]) for r in rows]

    def put(self, ask: StoredAsk, *, lease: float | None = None) -> None:
        """Store ``ask`` (replacing one with its id); with ``lease``, renew its
        ``instance``'s lease in the same transaction.

        Raises:
            StoreError: the database is unreachable or refused it.
        """

        def write(conn: Connection) -> None:
            with conn.transaction():
                if ask.instance is not None and lease is not None:
                    self._renew(conn, ask.instance, ask.host, lease)
                self._insert(conn, ask)

        self.database.run("store an ask", write)

    def _insert(self, conn: Connection, ask: StoredAsk) -> None:
        conn.execute(
            f"INSERT INTO {self._table} VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (ask_id) DO UPDATE SET principal = EXCLUDED.principal, "
            "tool = EXCLUDED.tool, call_id = EXCLUDED.call_id, "
            "arguments_hash = EXCLUDED.arguments_hash, status = EXCLUDED.status, "
            "created_at = EXCLUDED.created_at, body = EXCLUDED.body",
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
        """Record the answer of a pending ask, sealed with ``credential``.

        Raises:
            AskError: no such ask, it is not pending, or the credential is not one of
                this store's keyring.
            StoreError: the database is unreachable.
        """
        found = self.get(ask_id)
        if found is None:
            raise AskError(f"no ask {ask_id!r}")
        answered = sealed_answer(found, decision, credential, self.approvers, by=by, via=via)
        done = self._change("record an answer", answered, "pending")
        if not done:
            now = self.get(ask_id)
            raise AskError(refusal(now) if now else f"ask {ask_id} is gone, not pending")
        return answered

    def adopt(self, ask_id: str, instance: str, host: str, lease: float) -> bool:
        """Make the pending ask ``ask_id`` wait on lease ``instance`` (a paused call's ask
        that a call of this process now waits on: it ends with this process), renewing the
        lease in the same transaction; False when it is no longer pending.

        Raises:
            StoreError: the database is unreachable.
        """
        found = self.get(ask_id)
        if found is None or found.status != "pending":
            return False
        adopted = replace(found, instance=instance)

        def write(conn: Connection) -> bool:
            with conn.transaction():
                self._renew(conn, instance, host, lease)
                done = conn.execute(
                    f"UPDATE {self._table} SET body = %s WHERE ask_id = %s AND status = 'pending'",
                    (ask_body(adopted), ask_id),
                )
                return done.rowcount == 1

        return self.database.run("adopt an ask", write)

    def consume(self, ask_id: str) -> bool:
        """Mark an answered ask as applied; False when it was not answered (or already
        applied).

        Raises:
            StoreError: the database is unreachable.
        """
        found = self.get(ask_id)
        if found is None or found.status != "answered":
            return False
        return self._change("apply an answer", replace(found, status="consumed"), "answered")

    def withdraw(self, ask_id: str, why: str) -> None:
        """Close a pending ask unanswered (a no-op otherwise).

        Raises:
            StoreError: the database is unreachable.
        """
        found = self.get(ask_id)
        if found is None or found.status != "pending":
            return
        self._change("withdraw an ask", replace(found, status="closed", closed_why=why), "pending")

    def sweep(self, before: float) -> int:
        """Close as ``expired`` the pending asks created before ``before``: how many.

        Raises:
            StoreError: the database is unreachable.
        """
        stale = self._select("WHERE status = 'pending' AND created_at < %s", (before,))
        return sum(
            self._change(
                "close an expired ask", replace(a, status="closed", closed_why="expired"), "pending"
            )
            for a in stale
            if a.status == "pending"
        )

    def _change(self, what: str, ask: StoredAsk, expected: str) -> bool:
        """Write ``ask`` (its new status and body) if its row still has ``expected``."""
        return self.database.run(
            what,
            lambda conn: (
                conn.execute(
                    f"UPDATE {self._table} SET status = %s, body = %s "
                    "WHERE ask_id = %s AND status = %s",
                    (ask.status, ask_body(ask), ask.ask_id, expected),
                ).rowcount
                == 1
            ),
        )

    # -- reading ----------------------------------------------------------------------------

    def get(self, ask_id: str) -> StoredAsk | None:
        """The ask with this id, or None.

        Raises:
            StoreError: the database is unreachable.
        """
        rows = self._select("WHERE ask_id = %s", (ask_id,))
        return rows[0] if rows else None

    def find(
        self, principal: str, tool: str, call_id: str, arguments_hash: str
    ) -> StoredAsk | None:
        """The newest ask of that call that is pending or answered (not consumed).

        Raises:
            StoreError: the database is unreachable.
        """
        rows = self._select(
            "WHERE principal = %s AND tool = %s AND call_id = %s AND arguments_hash = %s "
            "AND status IN ('pending', 'answered') ORDER BY created_at DESC LIMIT 1",
            (principal, tool, call_id, arguments_hash),
        )
        if not rows or not matches(rows[0], principal, tool, call_id, arguments_hash):
            return None
        return rows[0]

    def pending(self) -> list[StoredAsk]:
        """The asks waiting for an answer, oldest first.

        Raises:
            StoreError: the database is unreachable.
        """
        found = self._select("WHERE status = 'pending' ORDER BY created_at", ())
        return [a for a in found if a.status == "pending"]

    def answered(self) -> list[StoredAsk]:
        """The asks answered and not yet applied, oldest first.

        Raises:
            StoreError: the database is unreachable.
        """
        found = self._select("WHERE status = 'answered' ORDER BY created_at", ())
        return [a for a in found if a.status == "answered"]

    def all(self, *, limit: int = 100) -> list[StoredAsk]:
        """The newest asks, whatever their status.

        Raises:
            StoreError: the database is unreachable.
        """
        return self._select("ORDER BY created_at DESC LIMIT %s", (limit,))

    def shown_page(
        self, where: AskFilter, *, offset: int, limit: int, group: GroupBy | None = None
    ) -> ShownPage:
        """One page of the shown asks ``where`` holds, and how many it holds (see
        :func:`~clearance.harness.ask_query.shown_page`).

        Raises:
            StoreError: the database is unreachable.
        """
        rows_sql, count_sql, params = page_sql(_DIALECT, self._table, _COLUMNS, where, group)
        total, waiting = self._fetch("count the asks", count_sql, tuple(params))[0]
        page = self._reported_rows(rows_sql, (*params, limit, offset))
        return ShownPage(page, int(total), int(waiting))

    def shown_groups(self, where: AskFilter, by: GroupBy) -> list[tuple[str, int]]:
        """The values of ``by`` among the shown asks ``where`` holds, with their counts.

        Raises:
            StoreError: the database is unreachable.
        """
        query, params = groups_sql(_DIALECT, self._table, where, by)
        return [(str(v), int(n)) for v, n in self._fetch("group the asks", query, tuple(params))]

    def shown_states(self, since: float) -> dict[str, str]:
        """Every shown ask's state by id, reading no body whole.

        Raises:
            StoreError: the database is unreachable.
        """
        source, params = shown_sql(_DIALECT, self._table, AskFilter(since=since))
        rows = self._fetch(
            "read the asks' states",
            f"SELECT ask_id, status, {_DIALECT.field('instance')} {source}",
            tuple(params),
        )
        instances = sorted({str(r[2]) for r in rows if r[1] == "pending" and r[2]})
        leases, now = self._leases(instances) if instances else ({}, 0.0)
        gone = {i: i not in leases or leases[i].gone(now) for i in instances}
        return states_of(rows, gone)

    def _fetch(self, what: str, query: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """The rows of one read."""

        def run(conn: Connection) -> list[tuple[Any, ...]]:
            return [tuple(row) for row in conn.execute(query, params).fetchall()]

        return self.database.run(what, run, read=True)

    def _select(self, where: str, params: tuple[Any, ...]) -> list[StoredAsk]:
        """The asks of the rows ``where`` selects (see :meth:`_reported_rows`)."""
        return self._reported_rows(f"SELECT {_COLUMNS} FROM {self._table} {where}", params)

    def _reported_rows(self, query: str, params: tuple[Any, ...]) -> list[StoredAsk]:
        """The asks of the ``(ask_id, status, body)`` rows ``query`` reads, as this store
        reports them: an answer whose seal does not verify is no answer, and a pending ask
        whose host is gone is closed (and its row is closed, unless it changed
        meanwhile)."""
        rows = self._fetch("read the asks", query, params)
        asks = [ask_from_row(row) for row in rows]
        waiting = sorted({a.instance for a in asks if a.status == "pending" and a.instance})
        leases, now = self._leases(waiting) if waiting else ({}, 0.0)
        reported = []
        for row, ask in zip(rows, asks, strict=True):
            shown = verified(ask, self.approvers)
            if shown.status == "pending" and shown.instance is not None:
                shown = host_gone(shown, leases.get(shown.instance), now)
            if shown.status != ask.status:
                self._close_unverified(shown, row)
            reported.append(shown)
        return reported

    def _close_unverified(self, shown: StoredAsk, row: tuple[Any, ...]) -> None:
        self.database.run(
            "close an unverified answer",
            lambda conn: conn.execute(
                f"UPDATE {self._table} SET status = %s, body = %s "
                "WHERE ask_id = %s AND status = %s AND body = %s",
                (shown.status, ask_body(shown), shown.ask_id, row[1], row[2]),
            ),
        )
