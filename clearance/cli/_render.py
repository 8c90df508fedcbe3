"""How the commands print: JSON, tables and coloured status words.

Much of what the commands print was chosen by a model or a server (tool names, arguments,
results, call ids, messages). Everything here goes through :func:`clearance._text.printable`
(or :func:`~clearance._text.json_text` for JSON), so that no control or invisible character
reaches the terminal. Colour only on a terminal (click strips styles elsewhere).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from clearance._text import json_text, printable

__all__ = ["LABEL_COLOURS", "plain_rows", "print_json", "print_table", "styled"]

LABEL_COLOURS = {
    "allowed": "green",
    "ok": "green",
    "asked": "yellow",
    "answer": "cyan",
    "denied": "red",
    "blocked": "red",
    "invalid": "red",
    "failed": "red",
    "error": "magenta",
}
"""The colour of each status word of the live log and the explanations."""


def print_json(value: Any) -> None:
    """``value`` as indented JSON, with control and invisible characters ``\\u``-escaped."""
    click.echo(json_text(value, indent=2, default=str))


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """A plain aligned table (no colour when not on a terminal); every cell is printed
    through :func:`printable`."""
    cells = [[printable(h) for h in headers]] + [
        ["" if c is None else printable(c) for c in row] for row in rows
    ]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for n, row in enumerate(cells):
        line = "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        click.echo(click.style(line, bold=True) if n == 0 else line)


def plain_rows(rows: list[list[str]]) -> None:
    """Rows aligned in columns, without a header."""
    rows = [[printable(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def styled(label: str, width: int = 8) -> str:
    """A status word, padded, coloured on a terminal (click strips styles elsewhere)."""
    colour = LABEL_COLOURS.get(label)
    padded = label.ljust(width)
    return click.style(padded, fg=colour, bold=label in ("denied", "blocked")) if colour else padded
