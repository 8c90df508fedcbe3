"""``clearance journal``: read a journal as one row per call, follow it, export it.

::

    clearance journal [--db FILE|URL] [--config FILE] [--session S] [--call C] [--follow] [--json]
    clearance journal export [--db FILE|URL] [--session S] --format jsonl [-o FILE]

A row joins a call's ``call_decided`` record with its ``tool_finished`` (by session and
call id). The journal is read, never written: a :class:`SqliteJournal` database a harness
is writing right now, a :class:`JsonlJournal` file, or the journal of a PostgreSQL store
that several hosts write (``--db postgresql://...``, or the configuration's ``store``:
then that store is read, and an unreachable store is an error, never a reason to read a
local file; see :mod:`clearance.cli._journal_read`). ``--follow`` polls, every
``--interval`` seconds, a file or the store alike.

The export is the corpus format ``clearance replay`` reads, one call per line (rows and
records are built by :func:`clearance.tuning.calls_from_events` and
:func:`clearance.tuning.corpus_record`, which describe the format).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

import click

from clearance._text import json_text, printable
from clearance.cli._journal_read import JournalSource, open_journal
from clearance.cli._options import config_option
from clearance.cli.main import cli, fail, print_json, print_table
from clearance.errors import ClearanceError, ConfigError, StoreError
from clearance.harness.journal import JournalEvent
from clearance.tuning import CallFolder, CallRow, calls_from_events, corpus_record

__all__ = ["export_command", "journal"]

_CALL_TYPES = ("call_decided", "tool_started", "tool_finished", "authorization_withdrawn")
_EXPORT_TYPES = (*_CALL_TYPES, "message_added")
"""An export also reads what the host gave each session: the calls' conversations."""
_HEADERS = (
    "time",
    "host",
    "session",
    "principal",
    "tool",
    "decision",
    "policies",
    "status",
    "duration",
)


def _open(db: str | None, config_path: str | None) -> JournalSource:
    """The journal to read (see :func:`open_journal`); exits 2 naming what is wrong."""
    try:
        return open_journal(db, config_path)
    except ConfigError as exc:
        fail(f"{exc} (or give the journal with --db)" if db is None else str(exc))
    except ClearanceError as exc:
        fail(str(exc))


def _read(
    source: JournalSource, types: tuple[str, ...] = _CALL_TYPES, **filters: Any
) -> list[JournalEvent]:
    try:
        return source.read(types, **filters)
    except ClearanceError as exc:
        fail(str(exc))


def _db_option(fn: Any) -> Any:
    return click.option(
        "--db",
        metavar="PATH|URL",
        default=None,
        help="The journal: a SQLite database, a JSON-lines file or a postgresql:// store "
        "(default: the configuration's store, else its [journal] path, else this "
        "directory's journal in the state directory).",
    )(fn)


@cli.group("journal", invoke_without_command=True)
@_db_option
@config_option
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
    config_path: str | None,
    session_id: str | None,
    call_id: str | None,
    follow: bool,
    interval: float,
    as_json: bool,
) -> None:
    """Show the calls in a journal: time, the host and session that decided each,
    principal, tool, decision, the deciding policies, how each call ended and how long
    it took.

    With store = "postgresql://..." in the configuration (or --db postgresql://...),
    the journal every host shares; an unreachable store is an error (exit 2).
    """
    ctx.ensure_object(dict)
    ctx.obj["journal_db"] = db
    ctx.obj["config_path"] = config_path
    if ctx.invoked_subcommand is not None:
        return
    source = _open(db, config_path)
    try:
        if follow:
            _follow(source, session_id, call_id, interval, as_json)
            return
        events = _read(source, session_id=session_id, call_id=call_id)
    finally:
        source.close()
    rows = calls_from_events(events)
    if as_json:
        print_json([row.to_json() for row in rows])
    elif rows:
        print_table(_HEADERS, [row.cells() for row in rows])
    else:
        click.echo("no calls", err=True)


def _follow(
    source: JournalSource,
    session_id: str | None,
    call_id: str | None,
    interval: float,
    as_json: bool,
) -> None:
    calls = CallFolder()
    widths = (19, 12, 14, 18, 24, 8, 24, 11, 9)
    lost: str | None = None
    try:
        if not as_json:
            click.echo(click.style(_line(_HEADERS, widths), bold=True))
        while True:
            try:
                events = source.read_new(_CALL_TYPES, session_id=session_id, call_id=call_id)
            except StoreError as exc:
                # The store went away after the start: say so once and keep polling (the
                # hosts wait for it too); nothing is skipped, the next read goes on from
                # the last record printed.
                if lost is None:
                    click.echo(f"warning: {printable(str(exc))}; retrying", err=True)
                lost = str(exc)
                time.sleep(interval)
                continue
            except ClearanceError as exc:
                fail(str(exc))
            if lost is not None:
                click.echo(f"reading {printable(source.label)} again", err=True)
                lost = None
            for event in events:
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
@config_option
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
    ctx: click.Context,
    db: str | None,
    config_path: str | None,
    session_id: str | None,
    format_: str,
    output: str,
) -> None:
    """Export the calls as a replay corpus: principal, tool, arguments, decision,
    expected (the decision taken), outcome and the conversation each call was decided
    in (the messages and tool results its session had seen), one call per line."""
    group: dict[str, Any] = ctx.obj if isinstance(ctx.obj, dict) else {}
    source = _open(db or group.get("journal_db"), config_path or group.get("config_path"))
    folder = CallFolder(conversations=True)
    try:
        for event in _read(source, _EXPORT_TYPES, session_id=session_id, call_id=None):
            folder.feed(event)
    finally:
        source.close()
    rows = folder.rows
    unheard = sum(
        1 for r in rows if r.read_provenance and r.session_id not in folder.sessions_with_messages
    )
    if unheard:
        click.echo(
            f"note: {unheard} call(s) were decided on provenance in sessions whose messages "
            "were not journaled: a replay sees their tool results but not what the user "
            "wrote (Harness(journal_messages=True), or [journal] messages = true)",
            err=True,
        )
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
