"""``SqliteGrantStore``: ``allow_always`` grants persisted in a SQLite file.

Every store object keeps the persisted grants in memory and checks, at each lookup, one
change counter that triggers in the file maintain; when another connection changed the
grants it reloads them first. So a grant revoked anywhere (another store object, another
process, ``clearance grants revoke``) authorizes nothing from the next lookup on (rule R12).

Schema::

    grants(grant_id TEXT PRIMARY KEY, body TEXT)       -- body: Grant.to_json(), ASCII JSON
    grants_version(id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER)
    triggers grants_bump_{insert,update,delete}: every change of grants bumps version
    grants_changes(seq INTEGER PRIMARY KEY AUTOINCREMENT, grant_id TEXT)
    triggers grants_feed_{insert,update,delete}: the ids each change touched (the last
        10,000 changes are kept): a store reads only the rows changed since its last look
"""

from __future__ import annotations

import builtins
import json
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from clearance.errors import ConfigError
from clearance.harness._grant_rows import FEED_KEPT, PersistedGrantStore, Row
from clearance.harness.grants import Grant

__all__ = ["SqliteGrantStore"]

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS grants (grant_id TEXT PRIMARY KEY, body TEXT NOT NULL)",
    # One counter that every change of the grants table bumps, whoever makes it (any
    # clearance version, the sqlite3 shell): triggers live in the database file.
    "CREATE TABLE IF NOT EXISTS grants_version "
    "(id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)",
    "INSERT OR IGNORE INTO grants_version VALUES (1, 0)",
    *(
        f"CREATE TRIGGER IF NOT EXISTS grants_bump_{event.lower()} AFTER {event} ON grants "
        "BEGIN UPDATE grants_version SET version = version + 1 WHERE id = 1; END"
        for event in ("INSERT", "UPDATE", "DELETE")
    ),
    # The change feed: which grant every change touched, in order. A store that has seen
    # up to seq N reads only the rows changed since (and reloads everything when the feed
    # was pruned past N, or it has seen nothing yet).
    "CREATE TABLE IF NOT EXISTS grants_changes "
    "(seq INTEGER PRIMARY KEY AUTOINCREMENT, grant_id TEXT NOT NULL)",
    "CREATE TRIGGER IF NOT EXISTS grants_feed_insert AFTER INSERT ON grants "
    "BEGIN INSERT INTO grants_changes (grant_id) VALUES (NEW.grant_id); END",
    "CREATE TRIGGER IF NOT EXISTS grants_feed_update AFTER UPDATE ON grants "
    "BEGIN INSERT INTO grants_changes (grant_id) VALUES (OLD.grant_id); "
    "INSERT INTO grants_changes (grant_id) VALUES (NEW.grant_id); END",
    "CREATE TRIGGER IF NOT EXISTS grants_feed_delete AFTER DELETE ON grants "
    "BEGIN INSERT INTO grants_changes (grant_id) VALUES (OLD.grant_id); END",
)
_VERSION = "SELECT version FROM grants_version WHERE id = 1"
_IN_CHUNK = 500


class SqliteGrantStore(PersistedGrantStore):
    """``allow_always`` grants persisted in a SQLite file; session grants stay in memory.

    Lookups (``find``, ``list``) read the persisted grants from memory after one query
    of a change counter that triggers in the file keep: when another connection (another
    store object, ``clearance grants revoke``, another host process) added or revoked a
    grant since, the store first reads the rows the change feed names (all of them when
    it is further behind than the feed reaches). So a
    revocation holds from the next lookup on, everywhere (rule R12). Why not ``PRAGMA
    data_version``: it changes with every commit to the file, and the grant store shares
    ``clearance.db`` with the journal by default, whose writer commits every few
    milliseconds. The query costs about 4 us on a file of its own; right after another
    connection committed to the file (a journal sharing it) SQLite revalidates its cache
    and it costs 10-30 us (``benchmarks/bench_grants.py``).

    Adding or revoking a grant writes through (a small synchronous transaction, rare by
    nature). A stored row that cannot be read (written by a newer clearance, or damaged)
    is skipped with a warning: it authorizes nothing, and can still be revoked by id.

    Raises:
        ConfigError: the file cannot be opened or is not a SQLite database.
    """

    def __init__(self, path: str | Path, *, load: bool = True) -> None:
        super().__init__()
        self.path = str(path)
        self._version: int | None = None
        """The change counter the in-memory grants reflect."""
        self._seq: int | None = None
        """The last change of the feed the in-memory grants reflect."""
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        except sqlite3.Error as exc:
            raise ConfigError(f"cannot open the grant store: {exc}", path=self.path) from None
        try:
            # Waits for the journal's writer when it shares the file (the default).
            self._db.execute("PRAGMA busy_timeout = 5000")
            self._db.execute("PRAGMA journal_mode=WAL")
            for statement in _SCHEMA:
                self._db.execute(statement)
            self._cursor = self._db.cursor()
        except sqlite3.Error as exc:
            self._db.close()
            raise ConfigError(f"cannot open the grant store: {exc}", path=self.path) from None
        if not load:
            return  # the first lookup loads the grants
        try:
            self._refresh()
        except ConfigError:
            self._db.close()
            raise

    def find(
        self, principal: str, tool: str, arguments: Mapping[str, Any], session_id: str
    ) -> Grant | None:
        """The first grant covering the call, as the file holds them now.

        Raises:
            ConfigError: the file cannot be read (the pipeline then denies: R1).
        """
        self._refresh()
        return super().find(principal, tool, arguments, session_id)

    def list(self, *, principal: str | None = None, tool: str | None = None) -> list[Grant]:
        self._refresh()
        return super().list(principal=principal, tool=tool)

    def query(
        self, *, principal: str | None = None, tool: str | None = None
    ) -> builtins.list[Grant]:
        """The persisted grants of ``principal`` and ``tool`` (``None``: any), read from
        the file with the filters applied in the query, without loading the others
        (``clearance grants list``). Unreadable rows are skipped, as by lookups.

        Raises:
            ConfigError: the file cannot be read.
        """
        sql = "SELECT grant_id, body FROM grants"
        where, params = [], []
        for name, value in (("principal", principal), ("tool", tool)):
            if value is not None:
                # A damaged row (not JSON) matches no filter instead of failing the query.
                where.append(
                    f"(CASE WHEN json_valid(body) THEN json_extract(body, '$.{name}') END) = ?"
                )
                params.append(value)
        if where:
            sql += " WHERE " + " AND ".join(where)
        with self._lock:
            try:
                rows = self._db.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise ConfigError(f"cannot read the grant store: {exc}", path=self.path) from None
        return self._filtered(rows, principal, tool)

    def add(self, grant: Grant) -> None:
        with self._lock:
            if grant.kind == "always":
                body = json.dumps(grant.to_json())  # ASCII: any str survives, lone surrogates too
                self._write("INSERT OR REPLACE INTO grants VALUES (?, ?)", (grant.grant_id, body))
            super().add(grant)

    def revoke(self, grant_id: str) -> bool:
        """Revoke a grant, persisted or session; False when no grant has this id."""
        with self._lock:
            deleted = self._write("DELETE FROM grants WHERE grant_id = ?", (grant_id,))
            self._skipped.discard(grant_id)
            return super().revoke(grant_id) or deleted

    def close(self) -> None:
        self._db.close()

    def _write(self, sql: str, params: tuple[str, ...]) -> bool:
        """Run one change in a transaction; True when it changed a row."""
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    before = self._db.execute(_VERSION).fetchone()
                    feed = self._db.execute("SELECT max(seq) FROM grants_changes").fetchone()[0]
                    changed = self._db.execute(sql, params).rowcount > 0
                    after = self._db.execute(_VERSION).fetchone()
                    last = self._db.execute("SELECT max(seq) FROM grants_changes").fetchone()[0]
                    if last is not None:  # one range of the primary key: cheap
                        self._db.execute(
                            "DELETE FROM grants_changes WHERE seq <= ?", (last - FEED_KEPT,)
                        )
                    self._db.execute("COMMIT")
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise ConfigError(f"cannot write the grant store: {exc}", path=self.path) from None
            # Our own change needs no reload, unless another one came in since the last
            # (then the next lookup reloads, which includes ours).
            if (
                before is not None
                and before[0] == self._version
                and after is not None
                and feed == self._seq
            ):
                self._version = after[0]
                self._seq = last
            return changed

    def _refresh(self) -> None:
        """Bring the persisted grants up to date when the file's change counter moved:
        only the rows the change feed names since the last refresh, or all of them."""
        with self._lock:
            try:
                row = self._cursor.execute(_VERSION).fetchone()
                version = None if row is None else row[0]
                if version is not None and version == self._version:
                    return
                # One read transaction: the counter, the feed and the rows are one snapshot.
                self._db.execute("BEGIN")
                try:
                    row = self._db.execute(_VERSION).fetchone()
                    version = None if row is None else row[0]
                    # Two queries: each is one index probe (together, a scan of the feed).
                    first = self._db.execute("SELECT min(seq) FROM grants_changes").fetchone()[0]
                    last = self._db.execute("SELECT max(seq) FROM grants_changes").fetchone()[0]
                    seen = self._seq
                    if (
                        seen is None
                        or last is None
                        or last < seen
                        or (first is not None and first > seen + 1)
                    ):
                        rows: list[Row] = self._db.execute(
                            "SELECT grant_id, body FROM grants"
                        ).fetchall()
                        changed: list[str] | None = None
                    else:
                        changed = sorted(
                            {
                                r[0]
                                for r in self._db.execute(
                                    "SELECT grant_id FROM grants_changes WHERE seq > ?", (seen,)
                                )
                            }
                        )
                        rows = []
                        for n in range(0, len(changed), _IN_CHUNK):
                            chunk = changed[n : n + _IN_CHUNK]
                            marks = ",".join("?" * len(chunk))
                            rows += self._db.execute(
                                f"SELECT grant_id, body FROM grants WHERE grant_id IN ({marks})",
                                chunk,
                            ).fetchall()
                finally:
                    self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise ConfigError(f"cannot read the grant store: {exc}", path=self.path) from None
            self._apply_rows(rows, changed)
            self._version = version
            self._seq = last if last is not None else self._seq
