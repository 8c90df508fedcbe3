"""``PostgresGrantStore``: ``allow_always`` grants in PostgreSQL, shared by several hosts.

Works like :class:`~clearance.harness.grants_sqlite.SqliteGrantStore`: every store object
keeps the persisted grants in memory, and every lookup first reads one change counter that
a trigger in the database bumps on every change of the grants table, whoever makes it;
when it moved, the store reloads the grants before answering. So a grant revoked on any
host (or by ``clearance grants revoke``, or by hand in ``psql``) authorizes nothing from
the next lookup on, on every host (rule R12). The counter read is one round trip (tens of
microseconds on a local network).

The trigger also ``NOTIFY``s the change: each store reloads in its listener thread as soon
as another host adds or revokes a grant (and after every reconnection), so that lookups
seldom pay for a reload and :meth:`list` shows new grants within milliseconds.

When the database is unreachable a lookup raises :class:`~clearance.errors.StoreError`
naming the store, so the call that needed it is denied (rule R1); lookups work again, by
themselves, once the database is back. Schema: :mod:`clearance.harness.postgres`.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from clearance.harness.grants import Grant, MemoryGrantStore
from clearance.harness.postgres import Connection, PostgresDatabase, open_database

__all__ = ["PostgresGrantStore"]

_log = logging.getLogger("clearance")


class PostgresGrantStore(MemoryGrantStore):
    """``allow_always`` grants in PostgreSQL; session grants stay in memory (see the
    module docstring).

    Args:
        database: a ``postgresql://`` URL (the store opens and closes its own
            connections) or a :class:`~clearance.harness.postgres.PostgresDatabase` shared
            with other stores.

    Raises:
        ConfigError: the URL is not a PostgreSQL URL.
    """

    reads_database = True
    """Lookups query the database: the pipeline runs them off the event loop."""

    def __init__(self, database: str | PostgresDatabase) -> None:
        super().__init__()
        self.database, self._owned = open_database(database)
        self.path = self.database.name
        self._version: int | None = None
        """The change counter the in-memory grants reflect."""
        self._rows: dict[str, tuple[str, Grant]] = {}
        self._skipped: set[str] = set()
        self._reload_lock = threading.Lock()
        self._unsubscribe = self.database.subscribe("grants", self._notice)

    def __repr__(self) -> str:
        return f"PostgresGrantStore({self.database!r})"

    def find(
        self, principal: str, tool: str, arguments: Mapping[str, Any], session_id: str
    ) -> Grant | None:
        """The first grant covering the call, as the database holds them now.

        Raises:
            StoreError: the database is unreachable (the pipeline then denies: R1).
        """
        self._refresh()
        return super().find(principal, tool, arguments, session_id)

    def list(self, *, principal: str | None = None, tool: str | None = None) -> list[Grant]:
        """The grants (session and persisted), as the database holds them now.

        Raises:
            StoreError: the database is unreachable.
        """
        self._refresh()
        return super().list(principal=principal, tool=tool)

    def add(self, grant: Grant) -> None:
        """Keep ``grant``; an ``always`` grant is written through.

        Raises:
            StoreError: the database is unreachable (the grant is not kept).
        """
        if grant.kind == "always":
            body = json.dumps(grant.to_json())  # ASCII: any str survives, lone surrogates too
            self.database.run(
                "add a grant",
                lambda conn: conn.execute(
                    f"INSERT INTO {self.database.schema}.grants VALUES (%s, %s) "
                    "ON CONFLICT (grant_id) DO UPDATE SET body = EXCLUDED.body",
                    (grant.grant_id, body),
                ),
            )
        super().add(grant)

    def revoke(self, grant_id: str) -> bool:
        """Revoke a grant, persisted or session; False when no grant has this id.

        Raises:
            StoreError: the database is unreachable (nothing is revoked; the revocation
                must be tried again).
        """
        deleted = self.database.run(
            "revoke a grant",
            lambda conn: (
                conn.execute(
                    f"DELETE FROM {self.database.schema}.grants WHERE grant_id = %s", (grant_id,)
                ).rowcount
                > 0
            ),
        )
        with self._lock:
            self._skipped.discard(grant_id)
            held = self._grants.get(grant_id)
            forgot = super().revoke(grant_id)
            # A persisted grant counts as revoked only if the database held it: the copy
            # in memory may be one another host (or a TRUNCATE) already removed.
            return deleted or (forgot and held is not None and held.kind != "always")

    def close(self) -> None:
        """Stop listening; close the database when this store opened it."""
        self._unsubscribe()
        if self._owned:
            self.database.close()

    # -- the persisted grants ----------------------------------------------------------------

    def _notice(self, payload: str | None) -> None:
        """A change on another host (or a reconnection): reload now, off the lookups."""
        if payload is not None and self._version is not None:
            try:
                if int(payload) <= self._version:
                    return  # our own change, or one already loaded
            except ValueError:
                pass
        try:
            self._refresh()
        except Exception as exc:  # the next lookup tries again, and fails closed
            _log.debug("reloading the grants after a notice failed: %r", exc)

    def _refresh(self) -> None:
        """Reload the persisted grants when the database's change counter moved.

        Raises:
            StoreError: the database is unreachable.
        """
        schema = self.database.schema

        def version(conn: Connection) -> int | None:
            row = conn.execute(f"SELECT version FROM {schema}.grants_version").fetchone()
            return None if row is None else int(row[0])

        current = self.database.run("read the grants", version, read=True)
        if current is not None and current == self._version:
            return
        with self._reload_lock:
            if current is not None and current == self._version:
                return  # another thread reloaded meanwhile

            def load(conn: Connection) -> tuple[int | None, list[tuple[str, str]]]:
                # The counter and the rows from one snapshot: the copy is exactly the
                # state at that version.
                with conn.transaction():
                    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                    seen = version(conn)
                    rows = conn.execute(f"SELECT grant_id, body FROM {schema}.grants").fetchall()
                return seen, [(str(a), str(b)) for a, b in rows]

            seen, rows = self.database.run("read the grants", load, read=True)
            with self._lock:
                if seen is not None and self._version is not None and seen < self._version:
                    return  # a newer copy is already in place
                self._replace_always(self._parse(rows))
                self._version = seen

    def _parse(self, rows: Iterable[tuple[str, str]]) -> tuple[Grant, ...]:
        known, self._rows = self._rows, {}
        for grant_id, body in rows:
            cached = known.get(grant_id)
            if cached is not None and cached[0] == body:
                self._rows[grant_id] = cached
                continue
            try:
                grant = Grant.from_json(json.loads(body))
                if grant.kind != "always" or grant.grant_id != grant_id:
                    raise ValueError("not a persisted grant")
            except (ValueError, TypeError, KeyError, RecursionError) as exc:
                if grant_id not in self._skipped:
                    self._skipped.add(grant_id)
                    _log.warning("%s: skipping grant %r: %s", self.path, grant_id, exc)
                continue
            self._rows[grant_id] = (body, grant)
        return tuple(grant for _, grant in self._rows.values())
