"""``clearance inbox``: the pending asks in a browser, answered by the people named.

It serves :class:`clearance.inbox.Inbox` on ``127.0.0.1`` over the ask store that
``clearance asks`` reads (``--db``: a SQLite file or a ``postgresql://`` URL; else the
configuration's ``store``; else its SQLite file, ``[approvals] grants`` or the journal
file in the state directory), and prints one link per person (``--user``, repeatable;
default the login name), with the person's token after ``#``. Each person must be an
approver (``clearance approvers add NAME``): their answers are sealed with their key (rule
R13), recorded as theirs, through the inbox, and the host waiting on the ask goes on.

The inbox needs Starlette and uvicorn, which the optional ``mcp`` extra installs. The
command is always listed; without the extra, ``clearance inbox`` (with or without
``--help``) prints how to install it and exits 2. :mod:`clearance.inbox` is imported only
when the command runs.
"""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from clearance._text import printable
from clearance.cli._options import config_option, load_cli_config
from clearance.cli._serve import serve_until_signal
from clearance.cli._store import store_url
from clearance.cli.main import EXIT_USAGE, cli, fail
from clearance.errors import ClearanceError, MissingExtraError
from clearance.harness.ask_store_sqlite import SqliteAskStore

if TYPE_CHECKING:
    from clearance.inbox import InboxStarted

__all__ = ["inbox"]


class _NeedsInbox(click.Command):
    """A command that says how to install the extra the inbox needs, before parsing
    anything (``--help`` included), when it is missing."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            import clearance.inbox  # noqa: F401
        except MissingExtraError as exc:
            fail(str(exc), EXIT_USAGE)
        return super().parse_args(ctx, args)


def _open_store(db: str | None, config_path: str | None) -> Any:
    """The ask store, as ``clearance asks`` finds it."""
    try:
        url = store_url(db, config_path)
        if url is not None:
            # Imported here: psycopg is the optional ``postgres`` extra.
            from clearance.harness.ask_store_postgres import PostgresAskStore

            return PostgresAskStore(url)
        path = Path(db) if db is not None else load_cli_config(config_path).grants_path
    except ClearanceError as exc:
        fail(str(exc))
    if not path.is_file():
        fail(f"no ask store at {str(path)!r} (give the file with --db)")
    return SqliteAskStore(path)


def _login() -> str:
    try:
        return getpass.getuser() or "user"
    except (KeyError, OSError):  # no login name (some containers)
        return "user"


def _default_users(store: Any) -> list[str]:
    """Who the inbox is for without ``--user``: the login name when it is an approver,
    else every approver."""
    keyring = store.approvers
    login = _login()
    if keyring.credential(login) is not None:
        return [login]
    found: list[str] = keyring.names()
    if not found:
        fail(
            "no approver to serve: a person registers with `clearance approvers add NAME` "
            "(then --user NAME)"
        )
    return found


@cli.command("inbox", cls=_NeedsInbox)
@click.option(
    "--db",
    metavar="PATH",
    default=None,
    help="The ask store: a SQLite file or a postgresql:// URL (default: store of the "
    "configuration, else [approvals] grants, else the journal file).",
)
@config_option
@click.option(
    "--user",
    "users",
    metavar="NAME",
    multiple=True,
    help="Who may answer, and is recorded as answering: an approver (repeat for several "
    "people, each with a link of their own; default: the login name if it is an approver, "
    "else every approver).",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8766,
    show_default=True,
    help="The port on 127.0.0.1 (0: any free port).",
)
def inbox(db: str | None, config_path: str | None, users: tuple[str, ...], port: int) -> None:
    """Serve the pending asks on a page in the browser, to approve or deny.

    Prints a link per person, which signs them in: open it in a browser and keep it to
    yourself (the token after '#' is your authority to answer). Each person is an approver
    (`clearance approvers add NAME`). New asks appear on the page as hosts raise them; an
    answer goes to the ask store, and the waiting host goes on. Stop with Ctrl-C.
    """
    from clearance.inbox import Inbox

    store = _open_store(db, config_path)
    try:
        names = list(users) or _default_users(store)
        try:
            server = Inbox(store, users=names)
        except ValueError as exc:
            fail(f"--user: {exc}")

        def ready(started: InboxStarted) -> None:
            click.echo(f"clearance inbox on {printable(started.url)} for {printable(server.label)}")
            click.echo("Open your link in a browser; it signs you in (keep it to yourself):")
            for user, link in started.links.items():
                click.echo(f"  {printable(user)}: {printable(link)}")
            click.echo("Stop with Ctrl-C.", nl=True)

        serve_until_signal(lambda: server.serve(port=port, ready=ready))
    finally:
        store.close()
