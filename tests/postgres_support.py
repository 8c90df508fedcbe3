"""The PostgreSQL server the store tests use, a schema of their own, and an outage switch.

The server is ``$CLEARANCE_TEST_POSTGRES`` (default ``postgresql://postgres@127.0.0.1:5432/test``,
which ``.ci/run`` starts). Without a reachable server the PostgreSQL tests are skipped with
the reason, except in CI (``CI`` set), where that is a failure. Each test gets a schema of
its own (``?schema=t_<random>``), dropped afterwards.

:class:`Outage` is a TCP proxy in front of the server that a test can cut (every
connection through it drops, new ones are refused) and restore: a database that goes away
and comes back, without touching the server other tests use.
"""

from __future__ import annotations

import functools
import os
import secrets
import selectors
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

import pytest

PG_URL = os.environ.get("CLEARANCE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


@functools.cache
def _reachable() -> str | None:
    """None when the server answers, else why not."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install 'clearance[postgres]')"
    try:
        with psycopg.connect(PG_URL, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return f"PostgreSQL is not reachable at {PG_URL}: {str(exc).strip().splitlines()[0]}"
    return None


def require_postgres() -> None:
    """Skip the test (fail it in CI) when the server cannot be reached."""
    why = _reachable()
    if why is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{why} (.ci/run starts one; set CLEARANCE_TEST_POSTGRES)")
    pytest.skip(f"{why}; set CLEARANCE_TEST_POSTGRES to run the PostgreSQL tests")


def with_schema(url: str, schema: str) -> str:
    """``url`` with ``schema=...`` added to its query."""
    parts = urlsplit(url)
    query = f"{parts.query}&schema={schema}" if parts.query else f"schema={schema}"
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, ""))


def drop_schema(schema: str) -> None:
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE".encode())


@contextmanager
def fresh_schema(base_url: str = PG_URL) -> Iterator[tuple[str, str]]:
    """``(url, schema)``: a schema no other test uses, dropped on exit."""
    require_postgres()
    schema = "t_" + secrets.token_hex(6)
    try:
        yield with_schema(base_url, schema), schema
    finally:
        drop_schema(schema)


def sql(schema: str, statement: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """Run one statement on a connection of its own (as another client would); the rows
    it returns, if any. ``{s}`` in the statement is the schema."""
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        cursor = conn.execute(statement.replace("{s}", schema).encode(), params)
        return [tuple(r) for r in cursor.fetchall()] if cursor.description else []


class Outage:
    """A TCP proxy to the test server that can be cut and restored (see the module
    docstring). Use as a context manager; :meth:`url` is the server's URL through it."""

    def __init__(self) -> None:
        parts = urlsplit(PG_URL)
        self._target = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._up = True
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> Outage:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.cut()
        self._listener.close()
        self._thread.join(5)

    def url(self, schema: str) -> str:
        parts = urlsplit(PG_URL)
        netloc = parts.netloc.rpartition("@")
        host = f"127.0.0.1:{self.port}"
        netloc_new = f"{netloc[0]}@{host}" if netloc[1] else host
        base = urlunsplit((parts.scheme, netloc_new, parts.path, parts.query, ""))
        return with_schema(base, schema)

    def cut(self) -> None:
        """Drop every connection through the proxy and refuse new ones."""
        with self._lock:
            self._up = False
            pairs, self._pairs = self._pairs, []
        for a, b in pairs:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def restore(self) -> None:
        """Let connections through again."""
        with self._lock:
            self._up = True

    def _serve(self) -> None:
        self._listener.settimeout(0.1)
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                up = self._up
            if not up:
                client.close()
                continue
            try:
                upstream = socket.create_connection(self._target, timeout=3)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pairs.append((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        selector = selectors.DefaultSelector()
        try:
            selector.register(a, selectors.EVENT_READ, b)
            selector.register(b, selectors.EVENT_READ, a)
            while True:
                for key, _ in selector.select(timeout=0.5):
                    source = key.fileobj
                    assert isinstance(source, socket.socket)
                    data = source.recv(65536)
                    if not data:
                        return
                    key.data.sendall(data)
        except (OSError, ValueError):
            return
        finally:
            selector.close()
            for s in (a, b):
                try:
                    s.close()
                except OSError:
                    pass
