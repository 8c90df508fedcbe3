"""``clearance grants``: list and revoke the persisted ``allow_always`` grants.

Grants live in the SQLite grant store named by ``[approvals] grants`` (default: the journal
file, ``clearance.db`` in the state directory, outside the workspace), the configuration's
PostgreSQL ``store``, or what ``--db`` names (a file or a URL). Session grants die with
their session and are never stored. ``list`` applies its filters in the query: the other
grants are never read.

A revoke takes effect at once everywhere (rule R12): every harness and gateway that
shares the file, in this process or another, stops honouring the grant at its next
lookup, without a restart.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import click

from clearance.cli._options import config_option, load_cli_config
from clearance.cli._render import print_json, print_table
from clearance.cli._store import store_url
from clearance.cli.main import cli, fail
from clearance.harness.approvals import Grant, SqliteGrantStore
from clearance.types import Principal

__all__ = ["grants", "list_command", "revoke_command"]


def _db_option(fn: click.decorators.FC) -> click.decorators.FC:
    return click.option(
        "--db",
        metavar="PATH",
        default=None,
        help="The grant store: a SQLite file or a postgresql:// URL (default: store of the "
        "configuration, else [approvals] grants, else the journal file).",
    )(fn)


def _open_store(db: str | None, config_path: str | None) -> Any:
    """The grant store: ``--db`` (a file or a ``postgresql://`` URL), else the
    configuration's ``store``, else its SQLite file."""
    url = store_url(db, config_path)
    if url is not None:
        # Imported here: psycopg is the optional ``postgres`` extra.
        from clearance.harness.grants_postgres import PostgresGrantStore

        return PostgresGrantStore(url, load=False)
    path = Path(db) if db is not None else load_cli_config(config_path).grants_path
    if not path.is_file():
        fail(f"no grant store at {str(path)!r} (give the file with --db)")
    return SqliteGrantStore(path, load=False)


def _when(ts: float | None) -> str:
    return "-" if ts is None else datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


@cli.group("grants")
def grants() -> None:
    """List and revoke remembered approvals ("allow always" answers)."""


@grants.command("list")
@_db_option
@config_option
@click.option(
    "--principal", metavar="ENTITY", default=None, help="Only this principal's: 'User::\"alice\"'."
)
@click.option(
    "--tool", metavar="NAME", default=None, help="Only grants for this tool (qualified name)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the grants as JSON.")
def list_command(
    db: str | None,
    config_path: str | None,
    principal: str | None,
    tool: str | None,
    as_json: bool,
) -> None:
    """List the persisted grants: who may call which tool with which arguments."""
    if principal is not None:
        try:
            principal = str(Principal.parse(principal))
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="'--principal'") from None
    store = _open_store(db, config_path)
    try:
        # The filters are applied in the query (SQLite and PostgreSQL), the other grants
        # never loaded.
        listed = store.query(principal=principal, tool=tool)
        found: list[Grant] = sorted(listed, key=lambda g: g.created_at)
    finally:
        store.close()
    if as_json:
        print_json([g.to_json() for g in found])
        return
    if not found:
        click.echo("no grants")
        return
    print_table(
        ["ID", "PRINCIPAL", "TOOL", "SCOPE", "CREATED", "EXPIRES", "BY"],
        [
            [
                g.grant_id,
                g.principal,
                g.tool,
                g.scope.description or g.scope.kind,
                _when(g.created_at),
                _when(g.expires_at),
                g.decided_by or "-",
            ]
            for g in found
        ],
    )


@grants.command("revoke")
@click.argument("grant_id", metavar="ID")
@_db_option
@config_option
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def revoke_command(grant_id: str, db: str | None, config_path: str | None, as_json: bool) -> None:
    """Revoke the grant ID: later calls it covered are asked again.

    Running harnesses and gateways that share the grant store see the revoke at their next
    lookup; nothing needs a restart. Exits 2 when no grant has this id.
    """
    store = _open_store(db, config_path)
    try:
        revoked = store.revoke(grant_id)
    finally:
        store.close()
    if not revoked:
        fail(f"no grant with id {grant_id!r} in {store.path}")
    if as_json:
        print_json({"revoked": grant_id})
    else:
        click.echo(f"revoked {grant_id}")
