"""The ``clearance`` command: the root group and what every verb shares.

Exit codes: 0 ok, 1 a check failed (a test, a validation), 2 bad usage or input.
``--json`` prints machine-readable output wherever a table is printed. Colour only on a
terminal.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import click

from clearance import __version__
from clearance.errors import ClearanceError

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "cli", "fail", "print_json", "print_table"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="clearance")
def cli() -> None:
    """clearance: policy and guardrail authorization for AI-agent tool calls.

    Start with `clearance demo`.
    """


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print ``error: message`` to stderr and exit (2 = bad usage or input by default)."""
    click.echo(click.style("error: ", fg="red", bold=True) + message, err=True)
    sys.exit(code)


def print_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """A plain aligned table (no colour when not on a terminal)."""
    cells = [[str(h) for h in headers]] + [
        ["" if c is None else str(c) for c in row] for row in rows
    ]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for n, row in enumerate(cells):
        line = "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        click.echo(click.style(line, bold=True) if n == 0 else line)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the console script."""
    from clearance.cli import commands  # noqa: F401  (registers the verbs)

    try:
        cli.main(args=list(argv) if argv is not None else None, prog_name="clearance")
    except ClearanceError as exc:
        fail(str(exc))
