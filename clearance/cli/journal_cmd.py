"""``clearance journal``: read a journal as one row per call, follow it, export it.

::

    clearance journal [--db FILE] [--session S] [--call C] [--follow] [--json]
    clearance journal export [--db FILE] [--session S] --format jsonl [-o FILE]

A row joins a call's ``call_decided`` record with its ``tool_finished`` (by session and
call id). The file is read, never written: it may be a :class:`SqliteJournal` database a
harness is writing right now, or a :class:`JsonlJournal` file.

The export is the corpus format ``clearance replay`` reads, one call per line (rows and
records are built by :func:`clearance.tuning.calls_from_events` and
:func:`clearance.tuning.corpus_record`, which describe the format).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

import click

from clearance._text import json_text, printable
from clearance.cli.main import cli, fail, print_json, print_table
from clearance.cli.run_cmd import load_cli_config
from clearance.errors import ConfigError, JournalError
from clearance.harness.journal import JournalEvent, read_journal
from clearance.tuning import CallFolder, CallRow, calls_from_events, corpus_record

__all__ = ["default_db", "journal"]


def default_db() -> str:
    """The journal of the current directory's configuration: ``[journal] path`` of
    ./clearance.toml, else the state directory's ``clearance.db`` for this directory (where
    ``clearance run`` and the gateway write it). Never a ``clearance.db`` lying in the
    workspace: an agent could have written that one."""
    try:
        return str(load_cli_config(None).journal.path)
    except ConfigError as exc:
        fail(f"{exc} (or give the journal with --db)")


_CALL_TYPES = ("call_decided", "tool_started", "tool_finished")
_HEADERS = ("time", "principal", "tool", "decision", "policies", "status", "duration")


def _read(db: str, **filters: Any) -> list[JournalEvent]:
    try:
        return read_journal(db, types=_CALL_TYPES, **filters)
    except JournalError as exc:
        if not Path(db).exists():
            fail(f"no journal at {db!r} (give the file with --db)")
        fail(str(exc))


def _db_option(fn: Any) -> Any:
    return click.option(
        "--db",
        metavar="PATH",
        default=None,
        help="The journal: a SQLite database or a JSON-lines file (default: [journal] path "
        "of ./clearance.toml, else this directory's journal in the state directory).",
    )(fn)


@cli.group("journal", invoke_without_command=True)
@_db_option
@click.option("--session", "session_id", metavar="ID", default=None, help="Only this session.")
@click.option("--call", "call_id", metavar="ID", default=None, help="Only calls with this id.")
@click.option(
    "--follow", "-f", is_flag=True, help="Keep printing calls as they end (Ctrl-C stops)."
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.01),
    default=0.5,
    show_default=True,
    help="Seconds between reads with --follow.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="JSON: a list, or one object per line with --follow."
)
@click.pass_context
def journal(
    ctx: click.Context,
    db: str | None,
    session_id: str | None,
    call_id: str | None,
    follow: bool,
    interval: float,
    as_json: bool,
) -> None:
    """Show the calls in a journal: time, principal, tool, decision, the deciding
    policies, how each call ended and how long it took."""
    ctx.ensure_object(dict)
    ctx.obj["journal_db"] = db
    if ctx.invoked_subcommand is not None:
        return
    path = db or default_db()
    if follow:
        _follow(path, session_id, call_id, interval, as_json)
        return
    rows = calls_from_events(_read(path, session_id=session_id, call_id=call_id))
    if as_json:
        print_json([row.to_json() for row in rows])
    elif rows:
        print_table(_HEADERS, [row.cells() for row in rows])
    else:
        click.echo("no calls", err=True)


def _follow(
    path: str, session_id: str | None, call_id: str | None, interval: float, as_json: bool
) -> None:
    calls = CallFolder()
    after = 0
    widths = (19, 18, 24, 8, 24, 11, 9)
    try:
        if not as_json:
            click.echo(click.style(_line(_HEADERS, widths), bold=True))
        while True:
            events = _read(path, session_id=session_id, call_id=call_id, after_seq=after)
            for event in events:
                after = max(after, event.seq)
                row = calls.feed(event)
                if row is None:
                    continue
                if as_json:
                    click.echo(json_text(row.to_json()))
                else:
                    click.echo(_line(row.cells(), widths))
            time.sleep(interval)
    except KeyboardInterrupt:
        return


def _line(cells: Iterable[str], widths: Iterable[int]) -> str:
    """One row of ``--follow``, each cell printed through :func:`printable`."""
    return "  ".join(printable(c).ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()


@journal.command("export")
@_db_option
@click.option("--session", "session_id", metavar="ID", default=None, help="Only this session.")
@click.option(
    "--format",
    "format_",
    type=click.Choice(["jsonl"]),
    default="jsonl",
    show_default=True,
    help="jsonl: one call per line, the corpus format of `clearance replay`.",
)
@click.option(
    "-o",
    "--output",
    metavar="FILE",
    type=click.Path(dir_okay=False, writable=True, allow_dash=True),
    default="-",
    help="Where to write (default: standard output).",
)
@click.pass_context
def export_command(
    ctx: click.Context, db: str | None, session_id: str | None, format_: str, output: str
) -> None:
    """Export the calls as a replay corpus: principal, tool, arguments, decision,
    expected (the decision taken) and outcome, one call per line."""
    given: str | None = ctx.obj.get("journal_db") if isinstance(ctx.obj, dict) else None
    path = db or given or default_db()
    rows = calls_from_events(_read(path, session_id=session_id))
    lines = _corpus_lines(rows)
    if output == "-":
        for line in lines:
            click.echo(line, nl=False)
        return
    try:
        with open(output, "w", encoding="utf-8") as fh:
            _write_lines(fh, lines)
    except OSError as exc:
        fail(f"cannot write {output!r}: {exc.strerror}")
    click.echo(f"exported {len(rows)} call(s) to {printable(output)}", err=True)


def _corpus_lines(rows: Iterable[CallRow]) -> Iterator[str]:
    for row in rows:
        yield json.dumps(corpus_record(row), separators=(",", ":")) + "\n"


def _write_lines(stream: TextIO, lines: Iterable[str]) -> None:
    for line in lines:
        stream.write(line)
    stream.flush()
