"""``clearance approvers``: the people who may answer asks on this machine (rule R13).

Each approver has a key in the approver directory (``$CLEARANCE_APPROVERS_DIR``, else
``$XDG_CONFIG_HOME/clearance``, else ``~/.config/clearance``: outside every workspace);
``clearance asks approve`` and ``clearance inbox`` seal answers with it, and hosts apply
only answers sealed by a key registered there. See ``docs/approvals.md``.
"""

from __future__ import annotations

import click

from clearance._text import printable
from clearance.cli._render import print_json
from clearance.cli.main import cli, fail
from clearance.errors import ConfigError
from clearance.harness.approvers import Approvers

__all__ = ["add_command", "approvers", "list_command", "remove_command"]


@cli.group("approvers")
def approvers() -> None:
    """Register the people who may answer asks (each gets a key only they can use)."""


@approvers.command("add")
@click.argument("name")
def add_command(name: str) -> None:
    """Register NAME as an approver: make their key (mode 0600) in the approver
    directory. Exits 2 when NAME exists or is not a valid name."""
    keyring = Approvers.default()
    try:
        keyring.add(name)
    except ConfigError as exc:
        fail(str(exc))
    click.echo(f"approver {printable(name)} added (key in {printable(str(keyring.path))})")


@approvers.command("remove")
@click.argument("name")
def remove_command(name: str) -> None:
    """Remove the approver NAME: answers sealed with their key stop counting from now on
    (those not applied yet are never applied). Exits 2 when there is no such approver."""
    if not Approvers.default().remove(name):
        fail(f"no approver named {name!r}")
    click.echo(f"approver {printable(name)} removed")


@approvers.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the names as JSON.")
def list_command(as_json: bool) -> None:
    """List the registered approvers (whose keys are usable)."""
    names = Approvers.default().names()
    if as_json:
        print_json(names)
        return
    if not names:
        click.echo("no approvers")
        return
    for name in names:
        click.echo(printable(name))
