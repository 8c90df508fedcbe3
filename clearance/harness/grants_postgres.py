"""``PostgresGrantStore``: ``allow_always`` grants in PostgreSQL, shared by several hosts.

Works like :class:`~clearance.harness.grants_sqlite.SqliteGrantStore`: every store object
keeps the persisted grants in memory, and every lookup first reads one change counter that
a trigger in the database bumps on every change of the grants table, whoever makes it;
when it moved, the store reads the rows the change feed (``grants_changes``) names since
the version it holds (every row when it is further behind than the feed reaches, or has
read nothing yet) before answering. So a grant revoked on any host (or by ``clearance
grants revoke``, or by hand in ``psql``) authorizes nothing from the next lookup on, on
every host (rule R12). The counter read is one round trip (tens of microseconds on a
local network); a change costs a refresh the rows it touched, not the table.

The trigger also ``NOTIFY``s the change: each store refreshes in its listener thread as
soon as another host adds or revokes a grant (and after every reconnection), so that
lookups seldom pay for a refresh and :meth:`list` shows new grants within milliseconds.

:meth:`query` reads only the grants of one principal and tool (``clearance grants
list``), by columns a trigger keeps from each row's body, indexed.

When the database is unreachable a lookup raises :class:`~clearance.errors.StoreError`
naming the store, so the call that needed it is denied (rule R1); lookups work again, by
themselves, once the database is back. Schema: :mod:`clearance.harness.postgres`.
"""

from __future__ import annotations

import builtins
import json
import logging
import threading
from collections.abc import Mapping
from typing import Any

from clearance.harness._grant_rows import PersistedGrantStore, Row
from clearance.harness.grants import Grant
from clearance.harness.postgres import Connection, PostgresDatabase, open_database

__all__ = ["PostgresGrantStore"]

_log = logging.getLogger("clearance")


class PostgresGrantStore(PersistedGrantStore):
    """``allow_always`` grants in PostgreSQL; session grants stay in memory (see the
    module docstring).

    Args:
        database: a ``postgresql://`` URL (the store opens and closes its own
            connections) or a :class:`~clearance.harness.postgres.PostgresDatabase` shared
            with other stores.
        load: ``False`` for a store that only answers :meth:`query` and writes (``clearance
            grants``): no grant is read before the first lookup (a notice does not load
            them either).

    Raises:
        ConfigError: the URL is not a PostgreSQL URL.
    """

    def __init__(self, database: str | PostgresDatabase, *, load: bool = True) -> None:
        super().__init__()
        self.database, self._owned = open_database(database)
        self.path = self.database.name
        self._load = load
        self._version: int | None = None
        """The change counter the in-memory grants reflect."""
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

    def query(
        self, *, principal: str | None = None, tool: str | None = None
    ) -> builtins.list[Grant]:
        """The persisted grants of ``principal`` and ``tool`` (``None``: any), read with
        the filters applied in the query, without loading the others (``clearance grants
        list``). Unreadable rows are skipped, as by lookups.

        Raises:
            StoreError: the database is unreachable.
        """
        sql = f"SELECT grant_id, body FROM {self.database.schema}.grants"
        where, params = [], []
        for name, value in (("principal", principal), ("tool", tool)):
            if value is not None:
                where.append(f"{name} = %s")
                params.append(value)
        if where:
            sql += " WHERE " + " AND ".join(where)

        def read(conn: Connection) -> builtins.list[Row]:
            return [(str(a), str(b)) for a, b in conn.execute(sql, params).fetchall()]

        rows = self.database.run("read the grants", read, read=True)
        return self._filtered(rows, principal, tool)

    def add(self, grant: Grant) -> None:
        """Keep ``grant``; an ``always`` grant is written through.

        Raises:
            StoreError: the database is unreachable (the grant is not kept).
        """
        if grant.kind != "always":
            super().add(grant)
            return
        body = json.dumps(grant.to_json())  # ASCII: any str survives, lone surrogates too
        # No refresh between the write and the copy: one that read a revocation of this
        # grant made right after the INSERT would be undone by the copy, for good (the
        # feed would not name the grant again), and the grant would allow here (R12).
        with self._reload_lock:
            self.database.run(
                "add a grant",
                lambda conn: conn.execute(
                    f"INSERT INTO {self.database.schema}.grants (grant_id, body) "
                    "VALUES (%s, %s) ON CONFLICT (grant_id) DO UPDATE SET body = EXCLUDED.body",
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
        """A change on another host (or a reconnection): refresh now, off the lookups."""
        if self._version is None and not self._load:
            return  # nothing read yet, nor wanted before a lookup
        if payload is not None and self._version is not None:
            try:
                if int(payload) <= self._version:
                    return  # our own change, or one already read
            except ValueError:
                pass
        try:
            self._refresh()
        except Exception as exc:  # the next lookup tries again, and fails closed
            _log.debug("refreshing the grants after a notice failed: %r", exc)

    def _refresh(self) -> None:
        """Bring the persisted grants up to date when the database's change counter
        moved: the rows the change feed names since the version held, or every row.

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
        with self._reload_lock:  # one refresh at a time: each starts from the last one's
            seen = self._version
            if current is not None and current == seen:
                return  # another thread refreshed meanwhile

            def load(conn: Connection) -> tuple[int, builtins.list[Row], list[str] | None]:
                # The counter, the feed and the rows from one snapshot: the copy is
                # exactly the state at that version (see the migration to version 3).
                with conn.transaction():
                    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                    counter = conn.execute(
                        f"SELECT version, pruned FROM {schema}.grants_version"
                    ).fetchone()
                    now, pruned = counter if counter is not None else (0, 0)
                    changed: list[str] | None = None
                    if seen is not None and pruned <= seen <= now:
                        # Bounded on both sides: the planner then reads the index (a
                        # table never analyzed gives an open range a third of the rows).
                        ids = conn.execute(
                            f"SELECT DISTINCT grant_id FROM {schema}.grants_changes "
                            "WHERE version > %s AND version <= %s",
                            (seen, now),
                        ).fetchall()
                        if all(i is not None for (i,) in ids):  # NULL: a TRUNCATE
                            changed = sorted(str(i) for (i,) in ids)
                    if changed is None:
                        rows = conn.execute(f"SELECT grant_id, body FROM {schema}.grants")
                    else:
                        rows = conn.execute(
                            f"SELECT grant_id, body FROM {schema}.grants WHERE grant_id = ANY(%s)",
                            (changed,),
                        )
                    read = [(str(a), str(b)) for a, b in rows.fetchall()]
                return int(now), read, changed

            now, rows, changed = self.database.run("read the grants", load, read=True)
            with self._lock:
                self._apply_rows(rows, changed)
                self._version = now
