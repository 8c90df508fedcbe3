"""``clearance run SCRIPT``: a scripted agent session under the configured policy.

The script (a :class:`~clearance.ScriptedProvider` JSON script) runs through a real harness
built from the configuration (tools, guardrails, evaluator, journal, grant store); each call
is printed as it happens (:mod:`clearance.cli._live`), then a table of outcomes. Asks are
answered on the terminal when stdin is one, and automatically otherwise; ``--approve``
chooses explicitly (:mod:`clearance.cli._prompt`).
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import click

from clearance._text import printable
from clearance.cli._live import LivePrinter
from clearance.cli._options import (
    Approve,
    config_option,
    default_principal,
    load_cli_config,
    principal_option,
)
from clearance.cli._prompt import choose_answerer
from clearance.cli._render import print_json
from clearance.cli._scripted import (
    ScriptedRun,
    call_rows,
    drive,
    id_width,
    print_calls_table,
    run_sync,
)
from clearance.cli.main import cli
from clearance.harness.providers import ScriptedProvider
from clearance.types import Principal

__all__ = [
    # Also reachable from here for the verbs that import it from this module.
    "load_cli_config",
    "run",
]


@cli.command("run")
@click.argument("script", metavar="SCRIPT")
@config_option
@click.option(
    "--approve",
    type=click.Choice(["ask", "allow", "deny"]),
    default=None,
    help="How asks are answered: 'ask' prompts on the terminal (the default when stdin is "
    "one; answers are read from stdin otherwise), 'allow' answers allow_once, 'deny' "
    "denies. Default without a terminal: [approvals] non_interactive (deny).",
)
@principal_option
@click.option("--json", "as_json", is_flag=True, help="Print the calls and outcomes as JSON.")
def run(
    script: str,
    config_path: str | None,
    approve: Approve | None,
    principal: Principal | None,
    as_json: bool,
) -> None:
    """Run a scripted agent session (a ScriptedProvider JSON script) under the policy.

    Every tool call in SCRIPT goes through the configured pipeline: schema check,
    guardrails, evaluator, asks, then the real tool. Calls are printed as they happen,
    then a table of outcomes (or one JSON document with --json). A denied call is an
    outcome, not an error: the command exits 0 when the script ran, 2 when the script,
    the configuration or the policies are wrong.

    \b
    Script format:
      {"prompt": "...", "turns": [
         {"tool_calls": [{"id": "c1", "name": "files__read_file",
                          "args": {"path": "README.md"}}]},
         {"text": "Done."}]}
    """
    config = load_cli_config(config_path)
    provider = ScriptedProvider.from_file(script)
    raw_prompt = _script_prompt(script)
    principal = principal or default_principal()
    echo = None if as_json else click.echo
    printer = LivePrinter(echo, id_width(provider))
    fallback = config.approvals.non_interactive
    answerer = choose_answerer(
        approve,
        printer,
        fallback=lambda ask: fallback,
        fallback_why=f"no terminal; [approvals] non_interactive = {fallback}",
        err=as_json,
    )

    s: ScriptedRun = run_sync(
        partial(
            drive,
            config,
            provider,
            principal=principal,
            printer=printer,
            answerer=answerer,
            prompt=raw_prompt,
            echo=echo,
        )
    )
    rows = call_rows(s)
    if as_json:
        print_json(
            {
                "session_id": s.session_id,
                "principal": str(principal),
                "journal": str(config.journal.path),
                "calls": rows,
                "text": s.result.text,
            }
        )
        return
    click.echo()
    print_calls_table(rows)
    if s.result.text:
        click.echo()
        click.echo(printable(s.result.text, newlines=True))


def _script_prompt(path: str) -> str:
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    prompt = raw.get("prompt") if isinstance(raw, dict) else None
    return prompt if isinstance(prompt, str) else ""
