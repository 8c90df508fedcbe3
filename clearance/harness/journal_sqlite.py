"""``SqliteJournal`` and its file format, by their former module path.

The home of these names is the :mod:`clearance.harness.journal` package (the writer in
its ``_sqlite`` module, the schema in ``_sqlite_schema``); this module re-exports them so
that ``from clearance.harness.journal_sqlite import ...`` keeps working.
"""

from __future__ import annotations

from clearance.harness.journal import (
    MIGRATIONS,
    SCHEMA_VERSION,
    SqliteJournal,
    is_sqlite_file,
    read_sqlite,
)

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SqliteJournal", "is_sqlite_file", "read_sqlite"]
