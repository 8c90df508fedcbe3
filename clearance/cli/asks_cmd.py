"""``clearance asks``: list, show and answer the asks waiting in the ask store.

Asks live in the SQLite ask store beside the grants (``[approvals] grants``, default the
journal file in the state directory), or the file given with ``--db``. A host paused on an
ask (``session.authorize`` came back pending) gets the answer when it tries the call
again; a call waiting in another process goes on within a moment.

Only a person answers (rule R13): an answer is sealed with an approver's key
(``clearance approvers add NAME``, kept outside every workspace), chosen with
``--approver`` (default: the login name's, or the only one there is). The answer is
recorded as that approver's, through the CLI; a host applies it only when the key is
registered in its own approver directory.
"""

from __future__ import annotations

import getpass
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from clearance._text import printable
from clearance.cli._options import config_option, load_cli_config
from clearance.cli._render import print_json, print_table
from clearance.cli._store import store_url
from clearance.cli.main import cli, fail
from clearance.errors import AskError
from clearance.harness.approvals import coerce_decision
from clearance.harness.approvers import Approvers, Credential
from clearance.harness.ask_display import ask_lines, deciding_fields
from clearance.harness.ask_store import ASK_LIFE, HOST_GONE, StoredAsk, shown_asks, sweep_expired
from clearance.harness.ask_store_sqlite import SqliteAskStore

__all__ = ["approve_command", "asks", "deny_command", "list_command", "show_command"]

_ANSWERS = ("allow_once", "allow_session", "allow_always")


def _db_option(fn: click.decorators.FC) -> click.decorators.FC:
    return click.option(
        "--db",
        metavar="PATH",
        default=None,
        help="The ask store: a SQLite file or a postgresql:// URL (default: store of the "
        "configuration, else [approvals] grants, else the journal file).",
    )(fn)


def _open_store(db: str | None, config_path: str | None) -> Any:
    """The ask store: ``--db`` (a file or a ``postgresql://`` URL), else the
    configuration's ``store``, else its SQLite file."""
    url = store_url(db, config_path)
    if url is not None:
        # Imported here: psycopg is the optional ``postgres`` extra.
        from clearance.harness.ask_store_postgres import PostgresAskStore

        return PostgresAskStore(url)
    path = Path(db) if db is not None else load_cli_config(config_path).grants_path
    if not path.is_file():
        fail(f"no ask store at {str(path)!r} (give the file with --db)")
    return SqliteAskStore(path)


def _approver_option(fn: click.decorators.FC) -> click.decorators.FC:
    return click.option(
        "--approver",
        "--by",
        "by",
        metavar="NAME",
        default=None,
        help="The approver whose key seals the answer (see `clearance approvers`; default: "
        "the login name's, or the only approver).",
    )(fn)


def _credential(name: str | None) -> Credential:
    """The key an answer is sealed with: ``name``'s, else the login name's, else the only
    approver's."""
    keyring = Approvers.default()
    if name is not None:
        found = keyring.credential(name)
        if found is None:
            fail(f"no approver key for {name!r} on this machine; nothing answered")
        return found
    login = keyring.credential(_login())
    if login is not None:
        return login
    names = keyring.names()
    if len(names) == 1:
        only = keyring.credential(names[0])
        if only is not None:
            return only
    if names:
        fail("several approvers are registered: choose one with --approver; nothing answered")
    fail("no approver key on this machine; nothing answered")


def _when(ts: float | None) -> str:
    return "-" if ts is None else datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def _find(store: SqliteAskStore, ask_id: str) -> StoredAsk:
    found = store.get(ask_id)
    if found is None:
        fail(f"no ask with id {ask_id!r} in {store.path}")
    return found


@cli.group("asks")
def asks() -> None:
    """List and answer the asks waiting for a person (durable asks)."""


def _max_age_option(fn: click.decorators.FC) -> click.decorators.FC:
    return click.option(
        "--max-age",
        type=click.FloatRange(min=0, min_open=True),
        default=ASK_LIFE,
        show_default=True,
        metavar="SECONDS",
        help="How long an ask can be answered (the hosts' pending_ask_ttl): older pending "
        "asks are closed as expired.",
    )(fn)


@asks.command("list")
@_db_option
@config_option
@click.option("--all", "show_all", is_flag=True, help="Also answered and closed asks.")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="With --all: at most this many, the newest.",
)
@_max_age_option
@click.option("--json", "as_json", is_flag=True, help="Print the asks as JSON.")
def list_command(
    db: str | None,
    config_path: str | None,
    show_all: bool,
    limit: int,
    max_age: float,
    as_json: bool,
) -> None:
    """List the pending asks: which host's call (and session) wants which tool called for
    which principal, and why; an ask whose host is gone is listed as "host gone" (it
    cannot be answered). Pending asks older than --max-age are closed as expired first."""
    store = _open_store(db, config_path)
    try:
        sweep_expired(store, max_age)
        # One more than asked: whether the list stops at its limit.
        found = store.all(limit=limit + 1) if show_all else shown_asks(store)
    finally:
        store.close()
    more = show_all and len(found) > limit
    found = found[:limit] if show_all else found
    if more:
        click.echo(
            f"showing the newest {limit} asks; older ones are left out (--limit N)", err=True
        )
    if as_json:
        print_json([a.to_json() for a in found])
        return
    if not found:
        click.echo("no pending asks" if not show_all else "no asks")
        return
    print_table(
        ["ID", "STATUS", "HOST", "SESSION", "PRINCIPAL", "TOOL", "CALL", "ASKED", "REASON"],
        [
            [
                a.ask_id,
                _status(a),
                a.host or "-",
                a.session_id or "-",
                a.principal,
                a.tool,
                a.call_id,
                _when(a.created_at),
                a.reason,
            ]
            for a in found
        ],
    )


def _status(ask: StoredAsk) -> str:
    """The status a person reads: ``host gone`` for an ask whose host stopped."""
    return HOST_GONE if ask.closed_why == HOST_GONE else ask.status


@asks.command("show")
@click.argument("ask_id", metavar="ID")
@_db_option
@config_option
@click.option("--json", "as_json", is_flag=True, help="Print the ask as JSON.")
def show_command(ask_id: str, db: str | None, config_path: str | None, as_json: bool) -> None:
    """Show an ask whole: every argument (the deciding ones first), the facts, the
    reasons and the scopes an answer may take."""
    store = _open_store(db, config_path)
    try:
        found = _find(store, ask_id)
    finally:
        store.close()
    if as_json:
        print_json(found.to_json())
        return
    click.echo(f"ask      {printable(found.ask_id)} ({_status(found)})")
    if found.closed_why == HOST_GONE:
        click.echo(
            f"         its host {printable(found.host or '?')} is gone: the call ended "
            "interrupted; it cannot be answered"
        )
    click.echo(f"who      {printable(found.principal)}")
    click.echo(
        f"host     {printable(found.host or '-')}  session {printable(found.session_id or '-')}"
    )
    click.echo(f"tool     {printable(found.tool)}  call {printable(found.call_id)}")
    click.echo(f"why      {printable(found.reason)}")
    if found.policies:
        click.echo(f"policies {printable(', '.join(found.policies))}")
    click.echo("arguments")
    for line in ask_lines(
        dict(found.arguments),
        deciding_fields(found),
        width=100,
        elide_values=False,
        notes=found.notes,
    ):
        click.echo(f"  {line}")
    if found.suggestions:
        click.echo("scopes (--scope N)")
        for index, scope in enumerate(found.suggestions, 1):
            click.echo(f"  {index}. {printable(scope.description or scope.kind)}")
    if found.decision is not None:
        click.echo(
            f"answer   {found.decision.decision} by {printable(found.answered_by or '-')} "
            f"via {printable(found.via or '-')}"
        )


@asks.command("approve")
@click.argument("ask_id", metavar="ID")
@_db_option
@config_option
@click.option(
    "--answer",
    type=click.Choice(_ANSWERS),
    default="allow_once",
    show_default=True,
    help="allow_once: this call; allow_session: while its session lasts; allow_always: kept.",
)
@click.option(
    "--scope",
    "scope_index",
    type=int,
    default=None,
    help="For allow_session/allow_always: the number of a scope `asks show` lists "
    "(default: exactly this call).",
)
@_approver_option
@_max_age_option
@click.option("--json", "as_json", is_flag=True, help="Print the answered ask as JSON.")
def approve_command(
    ask_id: str,
    db: str | None,
    config_path: str | None,
    answer: str,
    scope_index: int | None,
    by: str | None,
    max_age: float,
    as_json: bool,
) -> None:
    """Approve the ask ID. Exits 2 when there is no such pending ask, or it is past its
    life (--max-age: no host would apply the answer; it is closed as expired)."""
    _answer(ask_id, db, config_path, answer, scope_index, by, max_age, as_json)


@asks.command("deny")
@click.argument("ask_id", metavar="ID")
@_db_option
@config_option
@_approver_option
@_max_age_option
@click.option("--json", "as_json", is_flag=True, help="Print the answered ask as JSON.")
def deny_command(
    ask_id: str,
    db: str | None,
    config_path: str | None,
    by: str | None,
    max_age: float,
    as_json: bool,
) -> None:
    """Deny the ask ID. Exits 2 when there is no such pending ask, or it is past its life."""
    _answer(ask_id, db, config_path, "deny", None, by, max_age, as_json)


def _answer(
    ask_id: str,
    db: str | None,
    config_path: str | None,
    answer: str,
    scope_index: int | None,
    by: str | None,
    max_age: float,
    as_json: bool,
) -> None:
    credential = _credential(by)
    store = _open_store(db, config_path)
    try:
        found = _find(store, ask_id)
        if found.status == "pending" and time.time() - found.created_at > max_age:
            store.withdraw(ask_id, "expired")
            fail(
                f"ask {printable(ask_id)} expired at {_when(found.created_at + max_age)} "
                f"(asks can be answered for {max_age:g} s, --max-age): no host would apply "
                "an answer; it is closed as expired, nothing answered"
            )
        scope = None
        if scope_index is not None:
            if answer not in ("allow_session", "allow_always"):
                fail("--scope goes with --answer allow_session or allow_always")
            if not 1 <= scope_index <= len(found.suggestions):
                fail(f"--scope: ask {ask_id} offers scopes 1 to {len(found.suggestions)}")
            scope = found.suggestions[scope_index - 1]
        who = credential.name
        try:
            answered = store.answer(
                ask_id,
                coerce_decision(answer, scope=scope),
                credential=credential,
                via="cli",
            )
        except AskError as exc:
            fail(str(exc))
    finally:
        store.close()
    if as_json:
        print_json(answered.to_json())
    else:
        click.echo(f"{answer} {printable(ask_id)} by {printable(who)}")


def _login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"
