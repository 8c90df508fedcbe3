"""Every store a harness takes, importable from one place.

A harness keeps three things apart from the process: the asks waiting for a person
(``ask_store=``), the grants people gave (``grant_store=``) and the journal
(``journal=``). Each comes in kinds that a deployment picks by where its hosts run:

- asks: :class:`MemoryAskStore` (one process), :class:`SqliteAskStore` (a file several
  processes of one machine open), ``PostgresAskStore`` (several hosts);
- grants: :class:`MemoryGrantStore`, :class:`SqliteGrantStore`, ``PostgresGrantStore``;
- the journal: :class:`MemoryJournal`, :class:`SqliteJournal` or :class:`JsonlJournal` (a
  file), ``PostgresJournal``.

An ask answered from another process (``clearance asks approve``, the inbox) needs a store
that process opens too: SQLite (the same file, ``--db``) or PostgreSQL::

    from clearance.stores import SqliteAskStore, SqliteGrantStore

    harness = Harness(registry, evaluator=evaluator,
                      ask_store=SqliteAskStore("state.db"), grant_store=SqliteGrantStore("state.db"))

The PostgreSQL stores need the ``postgres`` extra (psycopg), so they are imported when first
asked for and are not in ``__all__``: without the extra, using one raises
:class:`~clearance.errors.MissingExtraError`, saying how to install it. The memory and SQLite
stores, and the protocols, are also importable from :mod:`clearance` itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from clearance._lazy import lazy_attributes
from clearance.harness.approvals import GrantStore, MemoryGrantStore, SqliteGrantStore
from clearance.harness.ask_store import AskStore, MemoryAskStore
from clearance.harness.ask_store_sqlite import SqliteAskStore
from clearance.harness.journal import Journal, JsonlJournal, MemoryJournal, SqliteJournal

if TYPE_CHECKING:
    from clearance.harness.ask_store_postgres import PostgresAskStore as PostgresAskStore
    from clearance.harness.grants_postgres import PostgresGrantStore as PostgresGrantStore
    from clearance.harness.journal import PostgresJournal as PostgresJournal

__all__ = [
    "AskStore",
    "GrantStore",
    "Journal",
    "JsonlJournal",
    "MemoryAskStore",
    "MemoryGrantStore",
    "MemoryJournal",
    "SqliteAskStore",
    "SqliteGrantStore",
    "SqliteJournal",
]


# The PostgreSQL stores need psycopg (the ``postgres`` extra): imported when first read, so
# that this module imports without it.
__getattr__, __dir__ = lazy_attributes(
    __name__,
    {
        "clearance.harness.ask_store_postgres": ("PostgresAskStore",),
        "clearance.harness.grants_postgres": ("PostgresGrantStore",),
        "clearance.harness.journal": ("PostgresJournal",),
    },
)
