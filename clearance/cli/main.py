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

Each verb registers itself on :data:`cli` when its module is imported, and :data:`cli`
imports a verb's modules only when that verb is used (:data:`VERBS` names them): a
person who runs ``clearance asks list`` again and again waits for the ask store, not for
Cedar, pydantic and the MCP SDK (issue 34; ``tests/cli/test_startup.py`` guards it).
:mod:`clearance.cli.commands` imports every verb at once, for whoever wants them all.
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Sequence
from typing import Any, NamedTuple, NoReturn

import click

from clearance._text import printable
from clearance._version import __version__
from clearance.cli._render import ColourMode, colour, print_json, print_table, set_colour, style
from clearance.errors import ClearanceError

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "VERBS",
    "Verb",
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


class Verb(NamedTuple):
    """Where a verb of the root group is defined, and what ``clearance --help`` says of it."""

    modules: tuple[str, ...]
    """The modules that register the verb and its subcommands, in import order."""
    summary: str
    """The first paragraph of the verb's help (``tests/cli/test_startup.py`` checks that
    it is), which the root's help shortens as click would."""


def _verb(module: str, summary: str, *more: str) -> Verb:
    return Verb(tuple(f"clearance.cli.{m}" for m in (module, *more)), summary)


VERBS: dict[str, Verb] = {
    "approvers": _verb(
        "approvers_cmd",
        "Register the people who may answer asks (each gets a key only they can use).",
    ),
    "asks": _verb("asks_cmd", "List and answer the asks waiting for a person (durable asks)."),
    "demo": _verb(
        "demo_cmd", "Watch a scripted coding agent work under the starter Cedar policies."
    ),
    "gateway": _verb(
        "gateway_cmd",
        "Run an MCP gateway: every tool call passes clearance before it reaches a server.",
    ),
    "grants": _verb("grants_cmd", 'List and revoke remembered approvals ("allow always" answers).'),
    "inbox": _verb(
        "inbox_cmd", "Serve the pending asks on a page in the browser, to approve or deny."
    ),
    "journal": _verb(
        "journal_cmd",
        "Show the calls in a journal: time, the host and session that decided each, principal,"
        " tool, decision, the deciding policies, how each call ended and how long it took.",
    ),
    "pdp": _verb(
        "pdp_cmd", "Serve the configured evaluator as an AuthZEN PDP (/access/v1/evaluation)."
    ),
    "policy": _verb(
        "policy_cmd",
        "Write, check and understand Cedar policies for your tools.",
        "policy_analyze_cmd",
        "policy_explain_cmd",
        "policy_format_cmd",
        "policy_schema_cmd",
        "policy_test_cmd",
        "policy_validate_cmd",
    ),
    "replay": _verb(
        "replay_cmd",
        'Decide every call of CORPUS (JSON lines; "-" reads standard input) with the real'
        ' pipeline stages and report: decisions, agreement with each call\'s "expected", the'
        " confusion table, utility (benign groups fully allowed) and security (attack groups"
        " stopped), how often each policy decided and which never did, evaluation errors,"
        " p50/p99 decision time per stage and, with --baseline, every call whose decision"
        " flips.",
    ),
    "run": _verb(
        "run_cmd", "Run a scripted agent session (a ScriptedProvider JSON script) under the policy."
    ),
    "store": _verb(
        "store_cmd",
        "The PostgreSQL store several hosts share: migrate it, recover a stopped host.",
    ),
    "suggest": _verb(
        "suggest_cmd",
        "Suggest allow policies from the calls that were allowed: a journal (every call decided"
        ' allow, or asked and approved) or a corpus (lines with "expected": "allow").',
    ),
    "tools": _verb(
        "tools_cmd", "The tools policies are written for: the configured toolsets and MCP servers."
    ),
}
"""The root group's verbs: each is imported when it is first asked for (see the module's
docstring)."""


class _Verbs(click.Group):
    """The root group: a verb's modules are imported when the verb is looked up (to run it,
    show its help or complete it), and the root's help lists every verb from
    :data:`VERBS` without importing any."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(VERBS.keys() | self.commands.keys())

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        verb = VERBS.get(cmd_name)
        if cmd_name not in self.commands and verb is not None:
            for module in verb.modules:
                importlib.import_module(module)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        listed = [
            self.commands.get(name) or click.Command(name, help=VERBS[name].summary)
            for name in self.list_commands(ctx)
        ]
        click.Group(commands=listed).format_commands(ctx, formatter)


@click.group(
    cls=_Verbs,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
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
