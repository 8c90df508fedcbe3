"""Which store a command reads: the PostgreSQL store several hosts share, or a local file.

One rule for every verb that takes ``--db``: a ``postgresql://`` URL given with ``--db``
names the PostgreSQL store; a path given with ``--db`` names a file (even when the
configuration has a store: the user chose); without ``--db``, the configuration's
``store = "postgresql://..."`` when it has one (then its SQLite files are not read), else
its SQLite file.
"""

from __future__ import annotations

from clearance.cli._options import load_cli_config

__all__ = ["is_store_url", "store_url"]

_SCHEMES = ("postgresql://", "postgres://")


def is_store_url(db: str) -> bool:
    """Whether ``--db`` names a PostgreSQL store rather than a file."""
    return db.startswith(_SCHEMES)


def store_url(db: str | None, config_path: str | None) -> str | None:
    """The PostgreSQL store to read: ``--db`` when it is a URL, the configuration's
    ``store`` when ``--db`` is not given, else ``None`` (read a file).

    Raises:
        ConfigError: the configuration is missing or wrong (only read without ``--db``).
    """
    if db is not None:
        return db if is_store_url(db) else None
    return load_cli_config(config_path).store
