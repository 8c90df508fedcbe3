"""``clearance journal``: read a journal as one row per call, follow it, export it.

::

    clearance journal [--db FILE] [--session S] [--call C] [--follow] [--json]
    clearance journal export [--db FILE] [--session S] --format jsonl [-o FILE]

A row joins a call's ``call_decided`` record with its ``tool_finished`` (by session and
call id). The file is read, never written: it may be a :class:`SqliteJournal` database a
harness is writing right now, or a :class:`JsonlJournal` file.

The export is the corpus format ``clearance replay`` reads, one call per line::

    {"principal": "User::\\"alice\\"", "tool": "files.read_file", "arguments": {...},
     "decision": "allow", "expected": "allow", "reasons": [...], "outcome": "ok",
     "id": "<session>/<call>", "group": "<session>", "session_id": "...", "call_id": "...",
     "turn_id": null, "ts": 1767225600.0}

``arguments`` is ``null`` when any value was withheld (the journal never had it).
``expected`` is the decision taken, so a replay reports every call whose decision flips;
calls that ended before the evaluator (unknown tool, invalid arguments) have
``decision: null`` and no ``expected``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

import click

from clearance import _pointer
from clearance._text import json_text, printable
from clearance.cli.main import cli, fail, print_json, print_table
from clearance.errors import JournalError
from clearance.harness.journal import JournalEvent, read_journal

__all__ = ["CallRow", "calls_from_events", "corpus_record", "journal"]

def default_db() -> str:
    """The journal of the current directory's configuration: ``[journal] path`` of
    ./clearance.toml, else the state directory's ``clearance.db`` for this directory (where
    ``clearance run`` and the gateway write it). Never a ``clearance.db`` lying in the
    workspace: an agent could have written that one."""
    from clearance.cli.run_cmd import load_cli_config
    from clearance.errors import ConfigError

    try:
        return str(load_cli_config(None).journal.path)
    except ConfigError as exc:
        fail(f"{exc} (or give the journal with --db)")
_CALL_TYPES = ("call_decided", "tool_started", "tool_finished")
_HEADERS = ("time", "principal", "tool", "decision", "policies", "status", "duration")


@dataclass(slots=True)
class CallRow:
    """One call, as the table and the export show it."""

    seq: int
    """The ``seq`` of its ``call_decided`` record."""
    ts: float
    session_id: str
    call_id: str | None
    turn_id: str | None
    principal: str | None
    tool: str
    """The qualified name (the name as given when the tool was unknown)."""
    decision: str | None
    reasons: list[str]
    status: str
    """How the call ended (``ok``, ``denied``...); ``running`` while a started call has no
    end; ``not started`` for an allowed call whose start is not (or not yet) recorded."""
    decision_us: int | None
    run_us: int | None = None
    arguments: dict[str, Any] | None = None
    withheld: bool = False
    message: str | None = None
    correlation_id: str | None = None
    finished: bool = field(default=False)

    @property
    def duration_us(self) -> int | None:
        """Deciding plus running (the handler's time), when known."""
        if self.decision_us is None and self.run_us is None:
            return None
        return (self.decision_us or 0) + (self.run_us or 0)

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "ts": self.ts,
            "session_id": self.session_id,
            "call_id": self.call_id,
            "turn_id": self.turn_id,
            "principal": self.principal,
            "tool": self.tool,
            "decision": self.decision,
            "reasons": self.reasons,
            "status": self.status,
            "duration_us": self.duration_us,
            "message": self.message,
            "correlation_id": self.correlation_id,
        }

    def cells(self) -> tuple[str, ...]:
        return (
            datetime.fromtimestamp(self.ts).strftime("%Y-%m-%d %H:%M:%S"),
            self.principal or "-",
            self.tool,
            self.decision or "-",
            ",".join(self.reasons) or "-",
            self.status,
            _duration(self.duration_us),
        )


class _Calls:
    """Folds records into calls; feed it records in ``seq`` order."""

    def __init__(self) -> None:
        self.rows: list[CallRow] = []
        self._running: dict[tuple[str, str | None], CallRow] = {}

    def feed(self, event: JournalEvent) -> CallRow | None:
        """Take one record; return the call it completes, if any."""
        data = event.data
        if event.type == "call_decided":
            timing = data.get("timing_us") or {}
            arguments = data.get("arguments")
            withheld = _has_redacted(arguments)
            outcome = str(data.get("outcome") or "unknown")
            row = CallRow(
                seq=event.seq,
                ts=event.ts,
                session_id=event.session_id,
                call_id=event.call_id,
                turn_id=event.turn_id,
                principal=data.get("principal"),
                tool=str(data.get("qualified_name") or data.get("tool") or "?"),
                decision=data.get("decision"),
                reasons=[str(r) for r in data.get("reasons") or ()],
                # A dispatched call runs once its start is recorded; until then (or for
                # good, when the journal failed to record the start) it has not started.
                status="not started" if outcome == "dispatched" else outcome,
                decision_us=timing.get("total"),
                arguments=None if withheld or not isinstance(arguments, dict) else arguments,
                withheld=withheld,
                message=data.get("message"),
                correlation_id=data.get("correlation_id"),
            )
            self.rows.append(row)
            if outcome == "dispatched":
                self._running[(event.session_id, event.call_id)] = row
                return None
            row.finished = True
            return row
        if event.type == "tool_started":
            started = self._running.get((event.session_id, event.call_id))
            if started is not None:
                started.status = "running"
            return None
        if event.type == "tool_finished":
            row_or_none = self._running.pop((event.session_id, event.call_id), None)
            if row_or_none is None:
                return None
            row_or_none.status = str(data.get("status") or "unknown")
            if data.get("result_blocked"):  # the handler ran; the model saw "blocked"
                row_or_none.status = "result blocked"
            row_or_none.run_us = data.get("duration_us")
            row_or_none.message = data.get("message") or row_or_none.message
            row_or_none.finished = True
            return row_or_none
        return None


def calls_from_events(events: Iterable[JournalEvent]) -> list[CallRow]:
    """One row per call (in the order the calls were decided), from records in ``seq``
    order. A started call with no end yet has status ``running``."""
    calls = _Calls()
    for event in events:
        calls.feed(event)
    return calls.rows


def corpus_record(row: CallRow) -> dict[str, Any]:
    """A call in the corpus format of ``clearance replay`` (see the module doc)."""
    record: dict[str, Any] = {
        "principal": row.principal,
        "tool": row.tool,
        "arguments": row.arguments,
        "decision": row.decision,
    }
    if row.decision is not None:
        record["expected"] = row.decision
    record.update(
        reasons=row.reasons,
        outcome=row.status,
        id=f"{row.session_id}/{row.call_id}",
        group=row.session_id,
        session_id=row.session_id,
        call_id=row.call_id,
        turn_id=row.turn_id,
        ts=row.ts,
    )
    return record


def _has_redacted(value: Any) -> bool:
    return any(text == _pointer.REDACTED for _, text in _pointer.iter_strings(value))


def _duration(us: int | None) -> str:
    if us is None:
        return "-"
    if us < 1000:
        return f"{us} us"
    if us < 1_000_000:
        return f"{us / 1000:.1f} ms"
    return f"{us / 1_000_000:.2f} s"


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
    calls = _Calls()
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
