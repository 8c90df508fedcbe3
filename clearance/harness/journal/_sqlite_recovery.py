"""Opening the SQLite journal after a crash: restore what only the start log holds, and
close every start left without an end as ``interrupted``, and every call that waited on
an ask (a ``permission_asked`` without a ``call_decided``) with a ``call_decided`` whose
outcome is ``interrupted`` (rule R7)."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

from clearance.errors import JournalError
from clearance.harness.journal._durable import asked_end, interrupted_end
from clearance.harness.journal._event import encode_data
from clearance.harness.journal._sqlite_read import event_from_row
from clearance.harness.journal._sqlite_schema import (
    INSERT,
    OPEN_ASKS,
    OPEN_STARTS,
    Row,
    migrate,
    set_meta,
    sql_columns,
)
from clearance.harness.journal._start_log import read_start_log, row_line, set_aside

__all__ = ["recover"]

_log = logging.getLogger("clearance")


def recover(db: sqlite3.Connection, path: Path, start_log: Path) -> tuple[int, int]:
    """Migrate, restore the start log's rows, recover; return ``(last seq, scan_from)``.

    The start log is left for the caller to empty once this has committed.

    Raises:
        JournalError: the database cannot be migrated or written, or the start log
            cannot be read (a record it holds that cannot be restored is set aside).
    """
    logged = read_start_log(start_log)
    try:
        migrate(db, path)
        db.execute("BEGIN IMMEDIATE")
        try:
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
            scan_from = int(meta.get("scan_from", "0"))
            restored = 0
            if logged:
                # Rows whose commit the crash lost; the others are already there.
                before = db.total_changes
                restore = INSERT.replace("INSERT", "INSERT OR IGNORE")
                try:
                    db.executemany(restore, logged)
                except (ValueError, TypeError, OverflowError):
                    # A row the driver cannot bind (read_start_log checks rows, so only
                    # a bug gets here): restore the others, set that one aside.
                    for row in logged:
                        try:
                            db.execute(restore, row)
                        except (ValueError, TypeError, OverflowError) as exc:
                            set_aside(
                                start_log,
                                row_line(row).encode("ascii"),
                                f"record {row[0]} cannot be restored ({type(exc).__name__})",
                            )
                restored = db.total_changes - before
                scan_from = min(scan_from, min(row[0] for row in logged))
            seq = db.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0]
            starts = [
                event_from_row(row)
                for row in db.execute(OPEN_STARTS.format(columns=sql_columns("s")), (scan_from,))
            ]
            asked = [
                event_from_row(row)
                for row in db.execute(OPEN_ASKS.format(columns=sql_columns("s")), (scan_from,))
            ]
            rows: list[Row] = []
            for end in [*map(interrupted_end, starts), *map(asked_end, asked)]:
                seq += 1
                rows.append(
                    (
                        seq,
                        end.ts,
                        end.type,
                        end.session_id,
                        end.turn_id,
                        end.call_id,
                        end.version,
                        encode_data(end.data),
                    )
                )
            db.executemany(INSERT, rows)
            scan_from = seq + 1
            set_meta(db, "scan_from", scan_from)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
    except sqlite3.Error as exc:
        raise JournalError(f"{path}: cannot open the journal: {exc}") from None
    if restored:
        _log.warning("%s: restored %d record(s) from %s", path, restored, start_log.name)
    if starts or asked:
        _log.warning(
            "%s: marked %d unfinished call(s) interrupted (%d waiting on an ask)",
            path,
            len(starts) + len(asked),
            len(asked),
        )
    return seq, scan_from
