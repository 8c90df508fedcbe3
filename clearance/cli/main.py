"""The ``clearance`` command: the root group, how a verb fails, and the entry point.

Exit codes: 0 ok, 1 a check failed (a test, a validation), 2 bad usage or input.
``--json`` prints machine-readable output wherever a table is printed. Colour only on a
terminal, and not when ``NO_COLOR`` is set; ``clearance --color always|never`` decides
instead (see :mod:`clearance.cli._render`). Shell completion is click's: ``eval
"$(_CLEARANCE_COMPLETE=bash_source clearance)"`` (``zsh_source``, ``fish_source``).

Much of what the commands print was chosen by a model or a server (tool names, arguments,
results, call ids, messages). It is printed through :func:`clearance._text.printable` (or
:func:`~clearance._text.json_text` for JSON), so that no control or invisible character
reaches the terminal: :func:`fail` and the printers of :mod:`clearance.cli._render` do it
for what they print, the verbs for every other line, and log records go through a
formatter that does the same.

The verbs register themselves on :data:`cli` when :mod:`clearance.cli.commands` imports
them, which :mod:`clearance.cli` does before :func:`main` can be reached.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import click

from clearance import __version__
from clearance._text import printable
from clearance.cli._render import ColourMode, colour, print_json, print_table, set_colour, style
from clearance.errors import ClearanceError

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "cli",
    "fail",
    "fail_too_deep",
    "main",
    # Re-exported for the verbs that import them from here (they live in _render).
    "print_json",
    "print_table",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="clearance")
@click.option(
    "--color",
    "colour_mode",
    type=click.Choice(["auto", "always", "never"]),
    default="auto",
    show_default=True,
    help="Colour the output: on a terminal unless NO_COLOR is set (auto), always, or never.",
)
@click.pass_context
def cli(ctx: click.Context, colour_mode: ColourMode) -> None:
    """clearance: policy and guardrail authorization for AI-agent tool calls.

    Start with `clearance demo`. Shell completion: eval "$(_CLEARANCE_COMPLETE=bash_source
    clearance)" (zsh_source, fish_source for those shells).
    """
    # Every verb's context inherits this from the root's, and click.echo reads it.
    ctx.color = set_colour(colour_mode)


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print ``error: message`` to stderr and exit (2 = bad usage or input by default).

    The message is printed with its control characters escaped (it often quotes input)."""
    # colour(): this may run after the command's click context is gone (main's handler).
    click.echo(
        style("error: ", fg="red", bold=True) + printable(message, newlines=True),
        err=True,
        color=colour(),
    )
    sys.exit(code)


def fail_too_deep(*inputs: Any) -> NoReturn:
    """Exit 2 saying which input (the first of ``inputs`` that is given) is nested too
    deeply for the JSON or TOML parser (Python's parsers recurse, and give up around 1,000
    levels)."""
    named = [printable(i) for i in inputs if i is not None]
    fail(f"{' or '.join(named) or 'the input'}: nested too deeply to read")


class _PrintableFormatter(logging.Formatter):
    """Log records as ``logging`` would print them by default, control characters escaped
    (a warning may quote a server's tool name or a model's argument)."""

    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record), newlines=True)


def _log_to_stderr() -> None:
    """Warnings and errors go to stderr through :class:`_PrintableFormatter` (instead of
    ``logging``'s last-resort handler, which prints them raw)."""
    root = logging.getLogger()
    if root.handlers:  # configured by whoever embeds the command: theirs to format
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(_PrintableFormatter("%(message)s"))
    root.addHandler(handler)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the console script."""
    _log_to_stderr()
    try:
        cli.main(args=list(argv) if argv is not None else None, prog_name="clearance")
    except ClearanceError as exc:
        fail(str(exc))
    except RecursionError:
        # A verb that reads nested input (JSON, TOML) names the input itself; this is the
        # last line of defence for one that does not.
        fail("the input is nested too deeply to read")
