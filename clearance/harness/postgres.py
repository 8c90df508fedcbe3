"""One PostgreSQL database shared by several hosts: connections, change notices, health,
and the versioned schema the PostgreSQL stores live in.

A :class:`PostgresDatabase` is what :class:`~clearance.harness.grants_postgres.PostgresGrantStore`,
:class:`~clearance.harness.ask_store_postgres.PostgresAskStore` and
:class:`~clearance.harness.journal.PostgresJournal` share in one process (each also takes a
URL and then opens its own):

- a pool of connections (``psycopg_pool``) for the stores' small reads and writes;
- one listening connection in a thread (``LISTEN``): the stores' triggers ``NOTIFY`` every
  change, and the listener calls the subscribers of its channel within milliseconds. When the
  connection is lost it reconnects (backing off up to a second) and then calls every
  subscriber with ``None`` ("re-check everything"): a notice sent while disconnected is
  never missed;
- health: an operation that loses its connection marks the database *down*; while it is
  down every operation fails at once with :class:`~clearance.errors.StoreError` naming the
  store (a call that needs the store is denied, and no event loop waits on a dead socket),
  until the listener has a working connection again. So a host recovers by itself when the
  database returns;
- migrations: the schema (default ``clearance``) is created and brought to
  :data:`SCHEMA_VERSION` on first use, under an advisory lock so that hosts starting
  together migrate once; :func:`migrate` (``clearance store migrate``) does it explicitly.

URLs are libpq's (``postgresql://user@host:5432/db``) with one addition: a ``schema`` query
parameter (``...?schema=team_a``) names the schema, which lets teams or tests share a
database. Messages name the store by its URL without the password.

Schema (version 3; ``MIGRATIONS`` lists each step)::

    meta(key text PRIMARY KEY, value text)           schema_version, created_at
    grants(grant_id text PRIMARY KEY, body text,     body: Grant.to_json(), ASCII JSON
           principal text, tool text)                (version 3) kept from the body by a
                                                      row trigger, indexed
    grants_version(id int PRIMARY KEY CHECK (id = 1), version bigint, pruned bigint)
        a trigger before each statement on grants bumps version and NOTIFYs
        "<schema>.grants"
    grants_changes(version bigint, grant_id text)    (version 3) the change feed: the
                                                      grants each version touched (NULL:
                                                      all, a TRUNCATE); versions up to
                                                      pruned are gone
    asks(ask_id text PRIMARY KEY, principal, tool, call_id, arguments_hash, status text,
         created_at float8, body text)
        a row trigger NOTIFYs "<schema>.asks" with "<ask_id> <status>"
    hosts(host_id text PRIMARY KEY, generation bigint, hostname text, pid int,
          opened_at float8, scan_from bigint)         one row per journal host
    journal_sessions(session_id text PRIMARY KEY, host_id text)   who writes a session
    events(id bigint identity PRIMARY KEY, session_id text, seq bigint, host_id text,
           ts float8, type text, turn_id text, call_id text, version int, data text,
           UNIQUE (session_id, seq))                  data: the record's JSON (text, not
                                                      jsonb: jsonb refuses \\u0000)
    ask_hosts(instance text PRIMARY KEY, host text, hostname text, pid int,
              renewed_at float8, lease float8, ended bool)   (version 2) the lease of
                                                      each process whose calls wait on asks
                                                      (renewed_at: the server's clock)
"""

from __future__ import annotations

import atexit
import logging
import re
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, Final, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from clearance._text import printable
from clearance.errors import ConfigError, MissingExtraError, StoreError

try:
    import psycopg
    from psycopg_pool import ConnectionPool
except ImportError as _exc:  # pragma: no cover - exercised without the extra installed
    raise MissingExtraError("postgres", "the PostgreSQL store") from _exc

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "Connection",
    "ConnectionLost",
    "DatabaseError",
    "PostgresDatabase",
    "RowRefused",
    "check_schema_name",
    "check_url",
    "shown_url",
    "Subscriber",
    "migrate",
    "open_database",
]

_log = logging.getLogger("clearance")

T = TypeVar("T")
Connection = psycopg.Connection[Any]
DatabaseError = psycopg.Error
"""Any error of the database driver (for the journal's modules, which import no driver)."""
ConnectionLost = psycopg.OperationalError
"""The driver's error for a database that cannot be reached or a connection that broke."""
RowRefused = (psycopg.DataError, ValueError, TypeError, OverflowError)
"""What a value the server or the driver cannot take raises (a NUL in ``text``, a lone
surrogate, an integer out of range): the row's fault, not the database's."""
Subscriber = Callable[[str | None], None]
"""Called from the listener thread with a notice's payload, or ``None`` after a reconnect
(anything may have changed). It must be quick and must not raise."""

SCHEMA_VERSION: Final = 3
"""The newest schema this version of clearance writes and reads."""

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")

MIGRATIONS: Final[tuple[tuple[int, tuple[str, ...]], ...]] = (
    (
        1,
        (
            # grants: one counter every change bumps (the R12 check of each lookup), and a
            # notice so that other hosts refresh their copy early.
            "CREATE TABLE {s}.grants (grant_id text PRIMARY KEY, body text NOT NULL)",
            "CREATE TABLE {s}.grants_version "
            "(id integer PRIMARY KEY CHECK (id = 1), version bigint NOT NULL)",
            "INSERT INTO {s}.grants_version VALUES (1, 0)",
            """CREATE FUNCTION {s}.grants_bump() RETURNS trigger LANGUAGE plpgsql AS $$
            DECLARE v bigint;
            BEGIN
                UPDATE {s}.grants_version SET version = version + 1 WHERE id = 1
                    RETURNING version INTO v;
                PERFORM pg_notify('{s}.grants', v::text);
                RETURN NULL;
            END $$""",
            "CREATE TRIGGER grants_bump AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE "
            "ON {s}.grants FOR EACH STATEMENT EXECUTE FUNCTION {s}.grants_bump()",
            # asks
            "CREATE TABLE {s}.asks (ask_id text PRIMARY KEY, principal text NOT NULL, "
            "tool text NOT NULL, call_id text NOT NULL, arguments_hash text NOT NULL, "
            "status text NOT NULL, created_at double precision NOT NULL, body text NOT NULL)",
            "CREATE INDEX asks_by_call ON {s}.asks (principal, tool, call_id, arguments_hash)",
            "CREATE INDEX asks_by_status ON {s}.asks (status, created_at)",
            """CREATE FUNCTION {s}.asks_notify() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                PERFORM pg_notify('{s}.asks', left(NEW.ask_id, 200) || ' ' || NEW.status);
                RETURN NULL;
            END $$""",
            "CREATE TRIGGER asks_notify AFTER INSERT OR UPDATE ON {s}.asks "
            "FOR EACH ROW EXECUTE FUNCTION {s}.asks_notify()",
            # the journal
            "CREATE TABLE {s}.hosts (host_id text PRIMARY KEY, "
            "generation bigint NOT NULL DEFAULT 0, hostname text, pid integer, "
            "opened_at double precision, scan_from bigint NOT NULL DEFAULT 0)",
            "CREATE TABLE {s}.journal_sessions "
            "(session_id text PRIMARY KEY, host_id text NOT NULL)",
            """CREATE TABLE {s}.events (
                id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                session_id text NOT NULL,
                seq bigint NOT NULL,
                host_id text NOT NULL,
                ts double precision NOT NULL,
                type text NOT NULL,
                turn_id text,
                call_id text,
                version integer NOT NULL,
                data text NOT NULL,
                UNIQUE (session_id, seq)
            )""",
            # Rows up to a page stay inline and uncompressed: a call_decided record is a
            # few kilobytes, and compressing it costs the server more than it saves.
            "ALTER TABLE {s}.events SET (toast_tuple_target = 8160)",
            # Reading a call, and recovery's "is this start ended?" (a session's calls).
            "CREATE INDEX events_session_call ON {s}.events (session_id, call_id)",
            # What recovery reads: one host's starts from its bookmark on.
            "CREATE INDEX events_host_starts ON {s}.events (host_id, id) "
            "WHERE type = 'tool_started'",
        ),
    ),
    (
        2,
        (
            # The leases of the processes whose calls wait on asks (issue 34): an ask
            # whose process is gone reads "host gone" and cannot be answered.
            "CREATE TABLE {s}.ask_hosts (instance text PRIMARY KEY, host text NOT NULL, "
            "hostname text NOT NULL, pid integer NOT NULL, "
            "renewed_at double precision NOT NULL, lease double precision NOT NULL, "
            "ended boolean NOT NULL DEFAULT false)",
            # What recovery reads too: one host's asks from its bookmark on.
            "CREATE INDEX events_host_asks ON {s}.events (host_id, id) "
            "WHERE type = 'permission_asked'",
        ),
    ),
    (
        3,
        (
            # The grants' change feed (issue 38): each change names the grants it touched
            # under the version it made, so a store reads only those rows, not the table.
            # The counter is bumped BEFORE each statement: its row lock orders the
            # writers, so versions commit in order and a snapshot that sees version V
            # sees every change up to V (an identity column's values commit out of order).
            "ALTER TABLE {s}.grants_version ADD COLUMN pruned bigint NOT NULL DEFAULT 0",
            "CREATE TABLE {s}.grants_changes (version bigint NOT NULL, grant_id text)",
            "CREATE INDEX grants_changes_by_version ON {s}.grants_changes (version)",
            "DROP TRIGGER grants_bump ON {s}.grants",
            """CREATE OR REPLACE FUNCTION {s}.grants_bump() RETURNS trigger
            LANGUAGE plpgsql AS $$
            DECLARE v bigint;
            BEGIN
                UPDATE {s}.grants_version SET version = version + 1 WHERE id = 1
                    RETURNING version INTO v;
                IF v % 1000 = 0 THEN  -- keep the last 10,000 versions' changes
                    DELETE FROM {s}.grants_changes WHERE version <= v - 10000;
                    UPDATE {s}.grants_version SET pruned = v - 10000
                        WHERE id = 1 AND pruned < v - 10000;
                END IF;
                IF TG_OP = 'TRUNCATE' THEN  -- every grant: a NULL id (reload all)
                    INSERT INTO {s}.grants_changes VALUES (v, NULL);
                END IF;
                PERFORM pg_notify('{s}.grants', v::text);
                RETURN NULL;
            END $$""",
            "CREATE TRIGGER grants_bump BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE "
            "ON {s}.grants FOR EACH STATEMENT EXECUTE FUNCTION {s}.grants_bump()",
            """CREATE FUNCTION {s}.grants_feed() RETURNS trigger LANGUAGE plpgsql AS $$
            DECLARE v bigint;
            BEGIN
                SELECT version INTO v FROM {s}.grants_version WHERE id = 1;
                IF TG_OP <> 'INSERT' THEN
                    INSERT INTO {s}.grants_changes VALUES (v, OLD.grant_id);
                END IF;
                IF TG_OP <> 'DELETE' THEN
                    INSERT INTO {s}.grants_changes VALUES (v, NEW.grant_id);
                END IF;
                RETURN NULL;
            END $$""",
            "CREATE TRIGGER grants_feed AFTER INSERT OR UPDATE OR DELETE "
            "ON {s}.grants FOR EACH ROW EXECUTE FUNCTION {s}.grants_feed()",
            # Whose grant and which tool, as columns kept from the body (a body that is
            # not JSON gives NULLs: it matches no filter), indexed for `grants list`.
            "ALTER TABLE {s}.grants ADD COLUMN principal text, ADD COLUMN tool text",
            """CREATE FUNCTION {s}.grants_keys() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                BEGIN
                    NEW.principal := NEW.body::json ->> 'principal';
                    NEW.tool := NEW.body::json ->> 'tool';
                EXCEPTION WHEN others THEN
                    NEW.principal := NULL;
                    NEW.tool := NULL;
                END;
                RETURN NEW;
            END $$""",
            "CREATE TRIGGER grants_keys BEFORE INSERT OR UPDATE OF body "
            "ON {s}.grants FOR EACH ROW EXECUTE FUNCTION {s}.grants_keys()",
            "UPDATE {s}.grants SET body = body",
            "CREATE INDEX grants_by_key ON {s}.grants (principal, tool)",
        ),
    ),
)
"""``(version, statements)``: each step runs in one transaction (``{s}``: the schema)."""

_RECONNECT_MAX = 1.0
"""Seconds between reconnection attempts, at most (they start at 0.1 and double)."""
_LISTEN_TICK = 0.1
"""Seconds the listener waits for a notice before it looks at its own state again."""


def open_database(url_or_database: str | PostgresDatabase) -> tuple[PostgresDatabase, bool]:
    """``(database, owned)``: the database given, or a new one for a URL (owned: the
    caller closes it)."""
    if isinstance(url_or_database, PostgresDatabase):
        return url_or_database, False
    if not isinstance(url_or_database, str):
        raise TypeError("a PostgreSQL store takes a postgresql:// URL or a PostgresDatabase")
    return PostgresDatabase(url_or_database), True


class PostgresDatabase:
    """A PostgreSQL database as the stores use it (see the module docstring).

    Nothing connects when it is built: the pool and the listener connect in the background,
    and the schema is migrated on first use. Close it with :meth:`close` (the stores that
    opened one from a URL close it with themselves).

    Args:
        url: ``postgresql://...`` (libpq's URL), optionally with ``?schema=NAME``.
        schema: the schema the tables live in (default: the URL's ``schema`` parameter,
            else ``clearance``); lower-case letters, digits and ``_``.
        pool_size: the most pooled connections (the listener and a journal's writer have
            their own).
        timeout: seconds to connect, and to wait for a pooled connection, before an
            operation fails (it then denies the call that needed it).

    Raises:
        ConfigError: the URL is not a ``postgresql://`` URL or the schema name is invalid.
    """

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        pool_size: int = 4,
        timeout: float = 3.0,
    ) -> None:
        self.conninfo, url_schema, self.name = _parse_url(url)
        schema = schema if schema is not None else url_schema or "clearance"
        check_schema_name(schema)
        self.schema = schema
        self.url = url
        self.timeout = timeout
        self.label = f"the PostgreSQL store at {self.name} (schema {schema})"
        """How messages name this store."""
        self.location = shown_url(url, schema=schema)
        """What ``--db`` takes to open this store again, printed for a person: the URL
        with its parameters and schema, without its password (libpq then reads it from
        ``PGPASSWORD`` or ``~/.pgpass``)."""
        self._connect_options: dict[str, Any] = {
            "autocommit": True,
            "connect_timeout": max(1, round(timeout)),
            "application_name": "clearance",
            # A peer that vanishes (a network partition, not a restart) is noticed within
            # seconds, not after the kernel's two hours.
            "keepalives": 1,
            "keepalives_idle": 5,
            "keepalives_interval": 2,
            "keepalives_count": 2,
            "tcp_user_timeout": int(timeout * 1000),
        }
        self.pool = ConnectionPool(
            self.conninfo,
            min_size=1,
            max_size=max(1, pool_size),
            kwargs=self._connect_options,
            timeout=timeout,
            reconnect_timeout=float("inf"),  # never give up: the database will return
            name=f"clearance:{self.schema}",
            open=False,
        )
        self._lock = threading.Lock()
        self._migrated = False
        self._subscribers: dict[str, list[Subscriber]] = {}
        self.down: str | None = None
        """Why the database is unreachable, or None while it is reachable."""
        self._closing = threading.Event()
        self._listening = threading.Event()
        self._listener: threading.Thread | None = None
        self._opened = False
        _OPEN.add(self)

    def __repr__(self) -> str:
        return f"PostgresDatabase({self.name!r}, schema={self.schema!r})"

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Open the pool and start the listener (idempotent; operations call it)."""
        with self._lock:
            if self._opened:
                return
            if self._closing.is_set():
                raise StoreError(f"{self.label} is closed", store=self.label)
            self._opened = True
            self.pool.open(wait=False)
            self._listener = threading.Thread(
                target=self._listen, name=f"clearance-listen:{self.schema}", daemon=True
            )
            self._listener.start()

    def close(self) -> None:
        """Stop the listener and close every pooled connection (idempotent)."""
        self._closing.set()
        with self._lock:
            opened, self._opened = self._opened, False
        if opened:
            if self._listener is not None and self._listener is not threading.current_thread():
                self._listener.join()
            self.pool.close()
        _OPEN.discard(self)

    @property
    def closed(self) -> bool:
        return self._closing.is_set()

    @property
    def migrated(self) -> bool:
        """Whether this object brought (or found) the schema at :data:`SCHEMA_VERSION`."""
        return self._migrated

    def wait_listening(self, timeout: float = 5.0) -> bool:
        """Wait until the listener is connected and listening (for tests and tools that
        must not miss the first notice); False on timeout."""
        self.start()
        return self._listening.wait(timeout)

    # -- connections -----------------------------------------------------------------------

    def connect(self, **options: Any) -> Connection:
        """A new connection of its own (not pooled), with the store's options.

        Raises:
            StoreError: the database cannot be reached.
        """
        try:
            return psycopg.connect(self.conninfo, **{**self._connect_options, **options})
        except psycopg.Error as exc:
            raise self.unavailable("cannot connect", exc) from None

    def run(self, what: str, fn: Callable[[Connection], T], *, read: bool = False) -> T:
        """``fn(connection)`` on a pooled connection, the schema migrated.

        A read that loses its connection is tried once more on another one (a connection
        the pool kept across a database restart fails at its first use).

        Args:
            what: what is being done, for the error ("read the grants").
            fn: the work; a transaction is the caller's (``with conn.transaction()``).
            read: whether ``fn`` may safely run twice.

        Raises:
            StoreError: the database is down or unreachable, or refused the work.
        """
        self.start()
        self.check_up(what)
        if not self._migrated:
            self._ensure_migrated()
        attempts = 2 if read else 1
        for attempt in range(attempts):
            try:
                with self.pool.connection(timeout=self.timeout) as conn:
                    return fn(conn)
            except psycopg.OperationalError as exc:
                if attempt + 1 < attempts:
                    continue
                self.mark_down(exc)
                raise self.unavailable(f"cannot {what}", exc) from None
            except psycopg.Error as exc:
                raise StoreError(
                    f"{self.label} refused to {what}: {_first_line(exc)}", store=self.label
                ) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def check_up(self, what: str) -> None:
        """Fail at once while the database is known to be down.

        Raises:
            StoreError: it is down.
        """
        down = self.down
        if down is not None:
            raise StoreError(
                f"cannot {what}: {self.label} is unreachable ({down}); calls that need it "
                "are denied until it returns",
                store=self.label,
            )

    def unavailable(self, what: str, exc: BaseException) -> StoreError:
        """The error for an operation that could not reach the database."""
        return StoreError(
            f"{what}: {self.label} is unreachable ({_first_line(exc)}); calls that need it "
            "are denied until it returns",
            store=self.label,
        )

    def mark_down(self, exc: BaseException | str) -> None:
        """Note that the database is unreachable; the listener notes when it is back."""
        reason = exc if isinstance(exc, str) else _first_line(exc)
        if self.down is None and not self._closing.is_set():
            _log.warning("%s is unreachable: %s; calls that need it are denied", self.label, reason)
        self.down = reason

    # -- migrations ------------------------------------------------------------------------

    def migrate(self) -> tuple[int, int]:
        """Bring the schema to :data:`SCHEMA_VERSION` now; ``(before, after)`` versions.

        Raises:
            StoreError: the database is unreachable, refused, or holds a newer schema.
        """
        if self._closing.is_set():
            raise StoreError(f"{self.label} is closed", store=self.label)
        try:
            with self.connect() as conn:
                result = migrate(conn, self.schema, label=self.label)
        except psycopg.OperationalError as exc:
            raise self.unavailable("cannot migrate", exc) from None
        except psycopg.Error as exc:
            raise StoreError(
                f"{self.label} refused the migration: {_first_line(exc)}", store=self.label
            ) from None
        self._migrated = True
        return result

    def _ensure_migrated(self) -> None:
        with self._lock:
            if self._migrated:
                return
        self.migrate()

    # -- notices ---------------------------------------------------------------------------

    def channel(self, name: str) -> str:
        """The notice channel of one table in this schema (``"<schema>.<name>"``)."""
        return f"{self.schema}.{name}"

    def subscribe(self, name: str, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback`` with every notice of channel ``name`` (``"grants"``,
        ``"asks"``), and with ``None`` after every reconnection; returns the unsubscribe
        function."""
        channel = self.channel(name)
        with self._lock:
            self._subscribers.setdefault(channel, []).append(callback)
        self.start()

        def unsubscribe() -> None:
            with self._lock:
                callbacks = self._subscribers.get(channel, [])
                if callback in callbacks:
                    callbacks.remove(callback)

        return unsubscribe

    def _listen(self) -> None:
        delay = 0.1
        while not self._closing.is_set():
            try:
                conn = psycopg.connect(self.conninfo, **self._connect_options)
            except psycopg.Error as exc:
                self._listening.clear()
                self.mark_down(exc)
                self._closing.wait(delay)
                delay = min(delay * 2, _RECONNECT_MAX)
                continue
            try:
                with conn:
                    self._serve(conn)
            except psycopg.Error as exc:
                self._listening.clear()
                self.mark_down(exc)
            except Exception:  # a bug in a subscriber: keep listening, say so
                _log.exception("the PostgreSQL listener of %s failed", self.label)
                self._closing.wait(delay)
            delay = 0.1

    def _serve(self, conn: Connection) -> None:
        """Listen on ``conn`` until it fails or the database closes."""
        for channel in (self.channel("grants"), self.channel("asks")):
            conn.execute(f'LISTEN "{channel}"')
        was_down = self.down is not None
        if was_down:
            # Connections the pool kept across the outage are dead: replace them.
            try:
                self.pool.drain()
            except Exception as exc:  # pragma: no cover - best effort
                _log.debug("draining the pool failed: %r", exc)
        self.down = None
        if was_down:
            _log.warning("%s is reachable again", self.label)
        self._dispatch_all(None)  # anything may have changed while we were not listening
        self._listening.set()
        while not self._closing.is_set():
            for notice in conn.notifies(timeout=_LISTEN_TICK):
                self._dispatch(notice.channel, notice.payload)
            if self.down is not None:
                # An operation lost its connection; if ours still works, the database is
                # up (that connection was one the pool kept from before a restart).
                conn.execute("SELECT 1")
                try:
                    self.pool.drain()
                except Exception as exc:  # pragma: no cover - best effort
                    _log.debug("draining the pool failed: %r", exc)
                self.down = None
                self._dispatch_all(None)

    def _dispatch(self, channel: str, payload: str | None) -> None:
        with self._lock:
            callbacks = list(self._subscribers.get(channel, ()))
        for callback in callbacks:
            try:
                callback(payload)
            except Exception:
                _log.exception("a subscriber of %s failed", channel)

    def _dispatch_all(self, payload: str | None) -> None:
        with self._lock:
            channels = list(self._subscribers)
        for channel in channels:
            self._dispatch(channel, payload)


def migrate(conn: Connection, schema: str, *, label: str | None = None) -> tuple[int, int]:
    """Create ``schema`` and bring it to :data:`SCHEMA_VERSION` on ``conn``, one
    transaction for all steps, under an advisory lock (hosts starting together wait for
    the first); ``(before, after)`` versions.

    Raises:
        StoreError: the schema holds a newer version than this clearance reads.
        psycopg.Error: the database refused.
    """
    label = label or f"schema {schema}"
    check_schema_name(schema)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"clearance:{schema}:migrate",))
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {schema}.meta (key text PRIMARY KEY, value text NOT NULL)"
        )
        row = conn.execute(
            f"SELECT value FROM {schema}.meta WHERE key = 'schema_version'"
        ).fetchone()
        before = int(row[0]) if row is not None else 0
        if before > SCHEMA_VERSION:
            raise StoreError(
                f"{label} has schema version {before}; this clearance reads up to "
                f"{SCHEMA_VERSION} (upgrade clearance)",
                store=label,
            )
        for target, statements in MIGRATIONS:
            if target <= before:
                continue
            for statement in statements:
                conn.execute(statement.replace("{s}", schema).encode())
        if before == 0:
            _set_meta(conn, schema, "created_at", str(time.time()))
        _set_meta(conn, schema, "schema_version", str(SCHEMA_VERSION))
    return before, SCHEMA_VERSION


def _set_meta(conn: Connection, schema: str, key: str, value: str) -> None:
    conn.execute(
        f"INSERT INTO {schema}.meta VALUES (%s, %s) "
        "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
        (key, value),
    )


def check_schema_name(schema: str) -> None:
    """Refuse a schema name the stores cannot use.

    Raises:
        ConfigError: not lower-case letters, digits and ``_`` (at most 63, not starting
            with a digit), or starting with ``pg_``, which PostgreSQL keeps for its own
            schemas (``CREATE SCHEMA pg_x`` fails, so every request would).
    """
    if not (isinstance(schema, str) and _SCHEMA_NAME.fullmatch(schema)):
        raise ConfigError(
            f"invalid schema name {printable(repr(schema))} for the PostgreSQL store: use "
            "lower-case letters, digits and _ (at most 63), not starting with a digit"
        )
    if schema.startswith("pg_"):
        raise ConfigError(
            f"invalid schema name {schema!r} for the PostgreSQL store: names starting with "
            "pg_ are reserved for PostgreSQL's own schemas"
        )


def check_url(url: str) -> str:
    """Check a store URL without connecting: a ``postgresql://`` URL whose schema (the
    ``schema`` parameter, default ``clearance``) the stores can use; that schema.

    Raises:
        ConfigError: as :class:`PostgresDatabase` would for this URL.
    """
    schema = _parse_url(url)[1] or "clearance"
    check_schema_name(schema)
    return schema


def _parse_url(url: str) -> tuple[str, str | None, str]:
    """``(conninfo, schema, name)``: the URL without its ``schema`` parameter, that
    parameter, and the URL without a password (for messages).

    Raises:
        ConfigError: not a ``postgresql://`` URL.
    """
    if not isinstance(url, str):
        raise ConfigError("the store must be a postgresql:// URL")
    try:
        parts = urlsplit(url)
        host_port = parts.netloc.rpartition("@")[2]
    except ValueError as exc:
        raise ConfigError(f"invalid store URL: {exc}") from None
    if parts.scheme not in ("postgresql", "postgres"):
        raise ConfigError(
            "the store must be a postgresql:// URL (PostgreSQL), not "
            + (repr(parts.scheme + "://...") if parts.scheme else "a path")
        )
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((v for k, v in query if k == "schema"), None)
    rest = urlencode([(k, v) for k, v in query if k != "schema"])
    conninfo = urlunsplit((parts.scheme, parts.netloc, parts.path, rest, ""))
    user = parts.username
    shown_netloc = f"{user}@{host_port}" if user else host_port
    name = urlunsplit((parts.scheme, shown_netloc, parts.path, "", ""))
    return conninfo, schema, name


def shown_url(url: str, *, schema: str | None = None) -> str:
    """``url`` without its password, with ``schema`` as its ``schema`` parameter (kept
    when None): a URL to print in a command for a person.

    Raises:
        ConfigError: not a ``postgresql://`` URL.
    """
    _parse_url(url)
    parts = urlsplit(url)
    host_port = parts.netloc.rpartition("@")[2]
    netloc = f"{parts.username}@{host_port}" if parts.username else host_port
    query = parse_qsl(parts.query, keep_blank_values=True)
    if schema is not None:
        query = [(k, v) for k, v in query if k != "schema"]
        if schema != "clearance":
            query.append(("schema", schema))
    return urlunsplit((parts.scheme, netloc, parts.path, urlencode(query), ""))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


# Databases still open at interpreter exit close their pools (threads would hang the exit).
_OPEN: weakref.WeakSet[PostgresDatabase] = weakref.WeakSet()


@atexit.register
def _close_open() -> None:  # pragma: no cover - at exit
    for database in list(_OPEN):
        try:
            database.close()
        except Exception:
            _log.debug("closing %r at exit failed", database)
