"""How the commands print: JSON, tables and coloured status words.

Much of what the commands print was chosen by a model or a server (tool names, arguments,
results, call ids, messages). Everything here goes through :func:`clearance._text.printable`
(or :func:`~clearance._text.json_text` for JSON), so that no control or invisible character
reaches the terminal.

Colour: on a terminal, unless ``NO_COLOR`` is set to anything but the empty string
(https://no-color.org); ``clearance --color always|never`` overrides both. The root command
resolves the choice once (:func:`set_colour`) into click's context, which every
``click.echo`` of the command reads, and here, which :func:`styled` and :func:`colour` read
where no click context is current (the ask prompt's thread, the final error line).

:class:`ProgressLine` is the one-line status long commands redraw on a terminal (``policy
test``, ``replay``).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from typing import Any, Literal, TextIO

import click

from clearance._text import json_text, printable

__all__ = [
    "LABEL_COLOURS",
    "ColourMode",
    "ProgressLine",
    "colour",
    "plain_rows",
    "print_json",
    "print_table",
    "set_colour",
    "style",
    "styled",
    "wrap_cell",
]

ColourMode = Literal["auto", "always", "never"]
"""``--color``: colour on a terminal unless ``NO_COLOR`` is set (auto), or always, or never."""

_colour: bool | None = None
"""The resolved choice: True (always), False (never) or None (on a terminal only)."""


def set_colour(mode: ColourMode, environ: Any = None) -> bool | None:
    """Resolve ``--color`` with ``NO_COLOR`` (read from ``environ``, default
    ``os.environ``) and remember it; returns the value for ``click.Context.color``:
    True (keep styles even when not on a terminal), False (strip them everywhere) or
    None (click's own rule: styles on a terminal only)."""
    global _colour
    env = os.environ if environ is None else environ
    if mode == "always":
        _colour = True
    elif mode == "never" or env.get("NO_COLOR", ""):
        _colour = False
    else:
        _colour = None
    return _colour


def colour() -> bool | None:
    """The resolved colour choice (see :func:`set_colour`), for ``click.echo(color=...)``
    where no click context is current."""
    return _colour


def style(text: str, **styles: Any) -> str:
    """``click.style(text, **styles)``, or ``text`` itself when colour is off: no escape
    sequence is even produced then, whatever stream the text ends up on."""
    if _colour is False:
        return text
    return click.style(text, **styles)


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


def print_table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], *, width: int | None = None
) -> None:
    """A plain aligned table (no colour when not on a terminal); every cell is printed
    through :func:`printable`.

    With ``width``, a last column that would make a line longer is wrapped onto
    continuation lines under itself (after a comma or a space where it can, anywhere in a
    word longer than the room), so that no line is longer than ``width`` while the other
    columns leave at least 12 columns for it."""
    cells = [[printable(h) for h in headers]] + [
        ["" if c is None else printable(c) for c in row] for row in rows
    ]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    start = sum(w + 2 for w in widths[:-1])
    room = None if width is None or width - start < 12 else width - start
    for n, row in enumerate(cells):
        last = [row[-1]] if room is None else wrap_cell(row[-1], room)
        for k, part in enumerate(last):
            head = row[:-1] if k == 0 else [""] * (len(row) - 1)
            line = "  ".join(c.ljust(w) for c, w in zip([*head, part], widths, strict=True))
            line = line.rstrip()
            click.echo(style(line, bold=True) if n == 0 else line)


def wrap_cell(text: str, room: int) -> list[str]:
    """``text`` cut into lines of at most ``room`` characters, after a comma or a space
    where it can (the separator stays at the end of its line, a space is dropped)."""
    lines: list[str] = []
    while len(text) > room:
        cut = max(text.rfind(",", 0, room), text.rfind(" ", 0, room + 1))
        if cut <= 0:
            lines.append(text[:room])
            text = text[room:]
        elif text[cut] == ",":
            lines.append(text[: cut + 1])
            text = text[cut + 1 :].lstrip(" ")
        else:
            lines.append(text[:cut])
            text = text[cut + 1 :]
    return [*lines, text]


def plain_rows(rows: list[list[str]]) -> None:
    """Rows aligned in columns, without a header."""
    rows = [[printable(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def styled(label: str, width: int = 8) -> str:
    """A status word, padded, coloured on a terminal (click strips styles elsewhere)."""
    fg = LABEL_COLOURS.get(label)
    padded = label.ljust(width)
    return style(padded, fg=fg, bold=label in ("denied", "blocked")) if fg else padded


class ProgressLine:
    """A one-line status on a terminal's stderr, redrawn in place (``\\r``) at most every
    ``interval`` seconds, and erased by :meth:`clear`. It does nothing when stderr is not a
    terminal (a log file gets no progress noise).

    The line is erased by overwriting it with spaces rather than with an escape sequence:
    it works on any terminal, with or without colour.
    """

    def __init__(
        self, *, stream: TextIO | None = None, interval: float = 0.2, enabled: bool | None = None
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.interval = interval
        self._shown = 0
        self._last = 0.0

    def show(self, text: str, *, force: bool = False) -> None:
        """Draw ``text`` (printed through :func:`printable`) unless the last draw is less
        than ``interval`` seconds old (``force``: draw anyway)."""
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._last < self.interval:
            return
        self._last = now
        line = printable(text)
        pad = " " * max(0, self._shown - len(line))
        self._write("\r" + line + pad)
        self._shown = len(line)

    def clear(self) -> None:
        """Erase the line (the next output starts at its beginning)."""
        if self.enabled and self._shown:
            self._write("\r" + " " * self._shown + "\r")
            self._shown = 0

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (BrokenPipeError, ValueError):  # the terminal went away: stop drawing
            self.enabled = False
