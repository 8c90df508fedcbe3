"""``clearance suggest``: allow policies generalized from the calls that were allowed.

::

    clearance suggest JOURNAL_OR_CORPUS [--format cedar|local] [--config FILE] [--tools FILE]
                            [--enum-limit N] [--skip-bad] [--json]

The calls come from a journal (every call decided allow, or asked and approved: a SQLite or
JSON-lines file, or the journal of a PostgreSQL store given as its ``postgresql://`` URL) or
a corpus (lines expected to be allowed); tools as for ``clearance replay``. The suggestions are
replayed on the calls they came from: exit 1 when one of those calls would not get what it
got (allowed, or asked for the calls that were asked).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping
from typing import Any, Literal

import click

from clearance._text import printable
from clearance.cli._journal_read import StoreJournal
from clearance.cli._store import is_store_url
from clearance.cli._tools import command_tools_file
from clearance.cli.main import EXIT_FAILED, cli, fail, fail_too_deep, print_json
from clearance.cli.replay_cmd import config_options, require_existing
from clearance.errors import ClearanceError
from clearance.harness.journal import JournalEvent, read_journal
from clearance.tuning import (
    CorpusError,
    HarnessSpec,
    ReplayReport,
    allowed_calls,
    calls_from_events,
    corpus_record,
    replay,
    suggest,
)

__all__ = ["read_calls_source", "suggest_command"]

_TYPES = ("call_decided", "tool_finished")


def read_calls_source(path: str) -> tuple[list[str], str]:
    """The corpus lines of ``path``: a journal (SQLite database, JSON-lines journal, or a
    PostgreSQL store's journal named by its ``postgresql://`` URL) is exported as
    ``clearance journal export`` would; a corpus is read as is. Returns the lines and
    ``"journal"`` or ``"corpus"``.

    Raises:
        ClearanceError: a journal cannot be read (a store: unreachable, or no journal).
        OSError: the file cannot be read.
    """
    if is_store_url(path):
        return _store_lines(path), "journal"
    with open(path, "rb") as handle:
        head = handle.read(16)
    if head.startswith(b"SQLite format 3"):
        return _journal_lines(path), "journal"
    with open(path, encoding="utf-8") as text:
        lines = text.readlines()
    first = next((line for line in lines if line.strip()), "")
    try:
        raw = json.loads(first) if first else None
    except (json.JSONDecodeError, RecursionError):
        raw = None  # read as a corpus: the line's own error names it
    if isinstance(raw, dict) and "type" in raw and "seq" in raw and "tool" not in raw:
        return _journal_lines(path), "journal"
    return lines, "corpus"


def _journal_lines(path: str) -> list[str]:
    return _corpus_lines(read_journal(path, types=_TYPES))


def _store_lines(url: str) -> list[str]:
    journal = StoreJournal(url)
    try:
        return _corpus_lines(journal.read(_TYPES, session_id=None, call_id=None))
    finally:
        journal.close()


def _where(source: str) -> str:
    """How messages name ``source``: a store by its label (no password), a file by its path."""
    if not is_store_url(source):
        return source
    from clearance.harness.postgres import PostgresDatabase  # the ``postgres`` extra

    return PostgresDatabase(source).label


def _corpus_lines(events: list[JournalEvent]) -> list[str]:
    rows = calls_from_events(events)
    return [json.dumps(corpus_record(row), ensure_ascii=False) for row in rows]


@cli.command("suggest")
@click.argument("source", metavar="JOURNAL_OR_CORPUS")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["cedar", "local"]),
    default="cedar",
    show_default=True,
    help="Write the suggestions as Cedar policies or as local allow rules.",
)
@config_options
@click.option(
    "--enum-limit",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="Arguments with at most this many distinct values are listed exactly.",
)
@click.option("--skip-bad", is_flag=True, help="Skip lines that do not parse.")
@click.option("--json", "as_json", is_flag=True, help="Print the suggestions as JSON.")
def suggest_command(
    source: str,
    fmt: Literal["cedar", "local"],
    config_path: str | None,
    tools_path: str | None,
    enum_limit: int,
    skip_bad: bool,
    as_json: bool,
) -> None:
    """Suggest allow policies from the calls that were allowed: a journal (every call
    decided allow, or asked and approved) or a corpus (lines with "expected": "allow").

    Per principal and tool, argument values are generalized into the narrowest useful
    patterns: path prefixes (like "src/*"), URL hosts, exact lists of enum-like values,
    number ranges; rules that differ only in one exact value are merged into one. Calls
    that were asked and then approved get rules that keep the ask (@ask, or an ask rule),
    and no allow rule covers them: a suggestion never lets through without asking what was
    asked. Each suggestion lists the calls it covers and its scope; the suggestions are
    then replayed on those calls to show that each gets what it got (allowed, or asked):
    exit 1 if not. Review them before use: they describe what happened, not what should.
    """
    for value, what in ((config_path, "file"), (tools_path, "file")):
        require_existing(value, what)
    if not is_store_url(source):
        require_existing(source, "file")
    try:
        where = _where(source)
        lines, kind = read_calls_source(source)
        calls, left_out = allowed_calls(lines, path=where, skip_bad=skip_bad)
    except CorpusError as exc:
        fail(f"{exc} (use --skip-bad to skip such lines)")
    except (ClearanceError, OSError, UnicodeDecodeError) as exc:
        # A store's errors name it by its label (never its password).
        fail(str(exc) if is_store_url(source) else f"{source}: {exc}")
    if not calls:
        fail(f"{printable(where)}: no allowed calls with arguments to learn from")
    # With [[mcp_servers]] and no --tools: a snapshot of the servers' tools.
    tools_path = command_tools_file(config_path, tools_path)
    spec = HarnessSpec(config=config_path, tools=tools_path)
    try:
        registry = spec.build_registry()
    except ClearanceError as exc:
        fail(str(exc))
    except RecursionError:
        fail_too_deep(tools_path, config_path)
    suggestions = suggest(calls, registry, format=fmt, enum_limit=enum_limit)
    try:
        # Both renderings parse their text back and refuse one that says anything else.
        text = suggestions.to_cedar() if fmt == "cedar" else suggestions.to_local_toml()
    except ClearanceError as exc:
        fail(str(exc), EXIT_FAILED)
    left_alone = {line for line, _, _ in suggestions.skipped}
    corpus = [
        json.dumps(
            {
                "principal": _principal_json(c.principal),
                "tool": c.tool,
                "arguments": c.arguments,
                "expected": "ask" if c.expected == "ask" else "allow",
                "id": c.name,
            },
            ensure_ascii=False,
        )
        for c in calls
        if c.line not in left_alone
    ]
    cedar_log = logging.getLogger("clearance.policy.cedar")
    level = cedar_log.level
    cedar_log.setLevel(logging.ERROR)  # "no policy can permit tool X" is expected here
    try:
        check = replay(
            corpus,
            HarnessSpec(config=config_path, tools=tools_path, evaluator=suggestions.evaluator(fmt)),
        )
    except ClearanceError as exc:
        fail(f"the suggested policies do not load: {exc}")
    finally:
        cedar_log.setLevel(level)
    allowed = check.outcomes.get("allow", 0)
    asked = check.outcomes.get("ask", 0)
    as_recorded, _ = check.agreement
    keep_ask = sum(1 for x in suggestions.suggestions if x.ask)
    if as_json:
        print_json(
            {
                **suggestions.to_json(),
                "source": where,
                "source_kind": kind,
                "left_out": left_out,
                "format": fmt,
                "policies": text,
                "replay": {
                    "calls": check.calls,
                    "allowed": allowed,
                    "asked": asked,
                    "as_recorded": as_recorded,
                    "outcomes": dict(check.outcomes),
                    "recorded_vs_suggested": {e: dict(r) for e, r in check.confusion.items()},
                },
            }
        )
    else:
        mark = "//" if fmt == "cedar" else "#"
        click.echo(
            f"{mark} {len(suggestions.suggestions)} suggestion(s) from {len(calls)} allowed call(s) "
            f"in {printable(where)} ({kind}; {left_out} line(s) not allowed or withheld)"
        )
        if keep_ask:
            click.echo(
                f"{mark} {keep_ask} of them keep an ask: their calls were asked before they "
                "were approved"
            )
        # The generated text escapes what it quotes; printing it through printable as well
        # keeps the terminal safe should a rendering ever miss a character.
        for line, name, why in suggestions.skipped:
            click.echo(printable(f"{mark} left out line {line} ({name}): {why}"))
        click.echo(printable(text.rstrip("\n"), newlines=True))
        click.echo("")
        click.echo(f"{mark} {_check_line(check)}")
    if as_recorded < check.calls:
        sys.exit(EXIT_FAILED)


def _check_line(check: ReplayReport) -> str:
    """``replayed the 5 source call(s): 4 allowed, 1 asked; all as recorded``, or what
    differs."""
    counts = [f"{n} {'allowed' if o == 'allow' else 'asked' if o == 'ask' else o}"
              for o, n in check.outcomes.items() if n]  # fmt: skip
    text = f"replayed the {check.calls} source call(s): {', '.join(counts) or 'none'}"
    agree, _ = check.agreement
    if agree == check.calls:
        return text + "; every one as recorded"
    differ = [
        f"{n} {'allowed' if expected == 'allow' else 'asked'} call(s) now {actual}"
        for expected, row in check.confusion.items()
        for actual, n in row.items()
        if n and actual != expected
    ]
    return text + printable(f"; not as recorded: {', '.join(differ)}")


def _principal_json(principal: Any) -> Any:
    if not principal.attrs and not principal.parents:
        return str(principal)
    value: Mapping[str, Any] = {
        "type": principal.type,
        "id": principal.id,
        "attrs": dict(principal.attrs),
        "parents": [list(p) for p in principal.parents],
    }
    return value
