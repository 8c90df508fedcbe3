"""Without the ``postgres`` extra, clearance imports and works, and every PostgreSQL store
raises one MissingExtraError saying how to install it (checked in a child process where
``psycopg`` cannot be imported)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_without_psycopg_the_stores_say_how_to_install_it() -> None:
    code = textwrap.dedent(
        """
        import sys
        sys.modules["psycopg"] = None  # as if it were not installed
        sys.modules["psycopg_pool"] = None
        import clearance
        from clearance import Harness, SqliteJournal
        from clearance.errors import MissingExtraError
        import clearance.harness.journal as journal_package
        attempts = {
            "grants": lambda: __import__("clearance.harness.grants_postgres"),
            "asks": lambda: __import__("clearance.harness.ask_store_postgres"),
            "journal": lambda: journal_package.PostgresJournal,
            "config": lambda: __import__("clearance.config").config.open_store("postgresql://x/db"),
        }
        for name, attempt in attempts.items():
            try:
                attempt()
            except MissingExtraError as exc:
                assert exc.extra == "postgres", exc
                assert str(exc).endswith("pip install 'clearance[postgres]'"), exc
                print(name, "ok")
            else:
                raise AssertionError(name + " imported without psycopg")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["grants", "ok", "asks", "ok", "journal", "ok", "config", "ok"]
