"""``clearance store``: the PostgreSQL store that several hosts share.

The store is named by ``store = "postgresql://..."`` in ``clearance.toml`` (``--config``)
or given with ``--url``. ``migrate`` creates its schema or brings it up to date (the stores
also do it on first use); ``recover`` closes, as ``interrupted``, the calls a host left
running when it stopped for good (a host that restarts closes its own).
"""

from __future__ import annotations

import click

from clearance.cli._options import config_option, load_cli_config
from clearance.cli._render import print_json
from clearance.cli.main import cli, fail

__all__ = ["migrate_command", "recover_command", "store"]


def _url_option(fn: click.decorators.FC) -> click.decorators.FC:
    return click.option(
        "--url",
        metavar="URL",
        default=None,
        help='The store, "postgresql://user@host:5432/db" (default: store = ... in the '
        "configuration). A ?schema=NAME parameter names the schema (default: clearance).",
    )(fn)


def _store_url(url: str | None, config_path: str | None) -> str:
    if url is not None:
        return url
    configured = load_cli_config(config_path).store
    if configured is None:
        fail(
            'no store: set store = "postgresql://..." in clearance.toml, or give --url '
            "(the SQLite files need no migration)"
        )
    return configured


@cli.group("store")
def store() -> None:
    """The PostgreSQL store several hosts share: migrate it, recover a stopped host."""


@store.command("migrate")
@_url_option
@config_option
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def migrate_command(url: str | None, config_path: str | None, as_json: bool) -> None:
    """Create the store's schema, or bring it to this clearance's version.

    Safe to run at any time and from several hosts at once (they migrate one after the
    other). Exits 2 when the database cannot be reached or holds a newer schema.
    """
    from clearance.harness.postgres import PostgresDatabase

    database = PostgresDatabase(_store_url(url, config_path))
    try:
        before, after = database.migrate()
    finally:
        database.close()
    if as_json:
        print_json({"store": database.name, "schema": database.schema, "from": before, "to": after})
    elif before == after:
        click.echo(f"{database.label} is at schema version {after}: nothing to do")
    else:
        click.echo(f"{database.label}: schema version {before} -> {after}")


@store.command("recover")
@click.option(
    "--host",
    "host",
    metavar="ID",
    required=True,
    help="The host whose unfinished calls to close (its journal's host id).",
)
@_url_option
@config_option
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def recover_command(host: str, url: str | None, config_path: str | None, as_json: bool) -> None:
    """Close, as interrupted, every call host ID started and never finished.

    For a host that stopped and will not come back (a host that restarts does it itself).
    Refused while a process runs as that host. Their effect is unknown: each call may or
    may not have done its work.
    """
    from clearance.harness.journal import PostgresJournal
    from clearance.harness.postgres import PostgresDatabase

    database = PostgresDatabase(_store_url(url, config_path))
    try:
        closed = PostgresJournal.recover_host(database, host)
    finally:
        database.close()
    if as_json:
        print_json({"host": host, "interrupted": closed})
    else:
        click.echo(f"host {host}: {closed} unfinished call(s) closed as interrupted")
