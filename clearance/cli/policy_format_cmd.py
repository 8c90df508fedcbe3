"""``clearance policy format DIR``: format ``.cedar`` files the Cedar way."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from clearance._text import printable
from clearance.cli.main import EXIT_FAILED, EXIT_USAGE, fail
from clearance.cli.policy_cmd import policy, policy_directory
from clearance.errors import PolicyError

__all__ = ["format_command"]


def _format_cedar(text: str) -> str:
    """Cedar's formatter; refuses a result that does not parse to the same policies.

    Raises:
        ValueError: the text does not parse, or formatting would change its meaning.
    """
    from clearance.policy.cedar import format_policies

    return format_policies(text)


def _parse_problems(file: Path, text: str) -> str | None:
    """Where ``text`` does not parse (``file:line:column: ...`` and the code frame), or
    None when it parses."""
    from clearance.policy.cedar import CedarEngine

    try:
        CedarEngine([(str(file), text)])
    except PolicyError as exc:
        return printable(str(exc), newlines=True)
    return None


@policy.command("format")
@click.argument("directory", metavar="DIR")
@click.option("--check", is_flag=True, help="Change nothing; exit 1 if any file needs formatting.")
def format_command(directory: str, check: bool) -> None:
    """Format every .cedar file under DIR in place, the Cedar way (comments kept).

    With --check nothing is written: the files that would change are listed and the
    command exits 1 if there are any. A file that does not parse is left as it is and
    reported with the line and column of the error; the others are formatted all the same,
    and the command exits 2.
    """
    path = policy_directory(directory)
    files = sorted(p for p in path.rglob("*.cedar") if p.is_file())
    if not files:
        fail(f"{directory}: no .cedar files")
    changed: list[Path] = []
    broken: list[Path] = []
    for file in files:
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            fail(f"{file}: cannot read: {exc}")
        try:
            formatted = _format_cedar(text)
        except ValueError as exc:
            where = _parse_problems(file, text)
            click.echo(
                click.style("error: ", fg="red", bold=True)
                + (where or printable(f"{file}: {exc}")),
                err=True,
            )
            broken.append(file)
            continue
        if formatted != text:
            changed.append(file)
            if not check:
                file.write_text(formatted, encoding="utf-8")
    verb = "would reformat" if check else "reformatted"
    for file in changed:
        click.echo(f"{verb} {printable(file)}")
    unchanged = len(files) - len(changed) - len(broken)
    click.echo(
        f"{len(changed)} file(s) {verb}, {unchanged} file(s) already formatted"
        + (f", {len(broken)} file(s) do not parse" if broken else "")
    )
    if broken:
        sys.exit(EXIT_USAGE)
    if check and changed:
        sys.exit(EXIT_FAILED)
