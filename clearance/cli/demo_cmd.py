"""``clearance demo``: watch a scripted coding agent work under the starter Cedar policies.

The bundled script (``clearance/demo``) runs in a temporary workspace through the same
driver as ``clearance run`` (:mod:`clearance.cli._scripted`), with the coding pack, the
bundled files and shell tools, a ``PathScope`` guardrail and an SQLite journal read back at
the end, one row per call (``clearance journal``'s table, fitted to the terminal's width).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from functools import partial
from importlib import resources
from pathlib import Path
from typing import Any

import click

from clearance._text import printable
from clearance.cli._live import LivePrinter
from clearance.cli._options import Approve
from clearance.cli._prompt import choose_answerer
from clearance.cli._render import print_json, print_table
from clearance.cli._scripted import ScriptedRun, call_rows, drive, id_width, run_sync
from clearance.cli.main import EXIT_USAGE, cli, fail
from clearance.config import (
    FILE_PATH_FIELDS,
    Config,
    EvaluatorConfig,
    FilesToolsConfig,
    GuardrailConfig,
    JournalConfig,
    ShellToolsConfig,
    ToolsConfig,
    pack_path,
)
from clearance.harness.approvals import PermissionAsk
from clearance.harness.journal import JournalEvent
from clearance.harness.providers import ScriptedProvider
from clearance.toolsets.confinement import landlock_abi
from clearance.tuning import calls_from_events
from clearance.types import Principal

__all__ = ["DEMO_PRINCIPAL", "demo", "demo_config"]

DEMO_PRINCIPAL = Principal("User", "alice")
"""Who the demo session acts for."""

_DEMO_DEFAULT_WHY = "stdin is not a terminal; workspace writes are allowed once, the rest denied"


def _demo_default(ask: PermissionAsk) -> str:
    """The demo's answer without a terminal: ``allow_once`` for the file tools (their paths
    were already confined to the workspace by the ``PathScope`` guardrail), ``deny`` for
    everything else."""
    return "allow_once" if ask.qualified_name.startswith("files.") else "deny"


def _demo_asset(name: str) -> Any:
    return json.loads(resources.files("clearance.demo").joinpath(name).read_text("utf-8"))


def _seed(workspace: Path) -> None:
    files: dict[str, str] = _demo_asset("workspace.json")["files"]
    for rel, text in files.items():
        target = workspace / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


_JOURNAL_HEADERS = ("call", "tool", "decision", "status", "duration", "policies")
"""The demo's journal table: ``clearance journal``'s columns without the time and the
principal (one session, one principal, named above it), with the call ids of the live log,
and the policies last, wrapped to the terminal's width."""


def _print_journal(events: Sequence[JournalEvent], columns: int) -> None:
    """The journal read back, one row per call, in ``columns`` columns."""
    rows = []
    for row in calls_from_events(events):
        _time, _host, _session, _principal, tool, decision, by, status, duration = row.cells()
        rows.append((row.call_id or "-", tool, decision, status, duration, by))
    print_table(_JOURNAL_HEADERS, rows, width=columns)


def demo_config(workspace: Path, db: Path, *, confined: bool = True) -> Config:
    """The demo's configuration: the coding Cedar pack over the files and shell tools in
    ``workspace``, a ``PathScope`` guardrail, journal and grants in ``db``; the shell's
    programs confined by Landlock unless ``confined`` is false."""
    return Config(
        evaluator=EvaluatorConfig("cedar", policies=pack_path("coding")),
        guardrails=(
            GuardrailConfig(
                "path_scope",
                "arguments",
                tools=("files.*",),
                fields=FILE_PATH_FIELDS,
                name="workspace",
            ),
        ),
        journal=JournalConfig(db),
        tools=ToolsConfig(
            files=FilesToolsConfig(workspace),
            shell=ShellToolsConfig(workspace, allowed_programs=("git", "ls", "pytest")),
            confinement="landlock" if confined else "none",
        ),
        base_dir=workspace,
    )


@cli.command("demo")
@click.option(
    "--db",
    metavar="PATH",
    default=None,
    help="The SQLite file for the journal and grants (default: a temporary one, deleted "
    "afterwards).",
)
@click.option(
    "--approve",
    type=click.Choice(["ask", "allow", "deny"]),
    default=None,
    help="How asks are answered: 'ask' prompts (default on a terminal), 'allow' answers "
    "allow_once, 'deny' denies. Without a terminal the default allows writes in the "
    "workspace once and denies everything else.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the calls and the journal as JSON.")
def demo(db: str | None, approve: Approve | None, as_json: bool) -> None:
    """Watch a scripted coding agent work under the starter Cedar policies.

    The agent works in a temporary workspace seeded with a small project, through the
    bundled files tools and shell.run. Reads are allowed, a path leaving the workspace is
    refused before any policy sees it (it cannot be canonicalized inside the workspace), a
    chained shell command is denied by the policy shell-no-chaining, and writing a file
    asks first. On a terminal you answer the ask
    (allow once / for the session / always / deny); otherwise it is auto-answered:
    allow_once for the files tools (the guardrail has already confined their paths to
    the workspace), deny for anything else. Every step goes to an SQLite journal, shown
    at the end.
    """
    script = _demo_asset("script.json")
    provider = ScriptedProvider.from_dict(script)
    echo = None if as_json else click.echo
    printer = LivePrinter(echo, id_width(provider))
    answerer = choose_answerer(
        approve, printer, fallback=_demo_default, fallback_why=_DEMO_DEFAULT_WHY, err=as_json
    )
    with tempfile.TemporaryDirectory(prefix="clearance-demo-") as tmp_name:
        tmp = Path(tmp_name)
        workspace = tmp / "workspace"
        workspace.mkdir()
        _seed(workspace)
        db_path = Path(db).resolve() if db else tmp / "clearance.db"
        if db and not db_path.parent.is_dir():
            fail(f"--db: the directory {str(db_path.parent)!r} does not exist", EXIT_USAGE)
        # The demo's script is fixed (git, ls, pytest in a scratch workspace): where the
        # kernel cannot confine programs (macOS, Linux without Landlock) it runs them
        # unconfined and says so, rather than stopping a newcomer's first command. A
        # configuration of one's own refuses to start there (R15) unless it says
        # confinement = "none".
        confined = landlock_abi() >= 1
        config = demo_config(workspace, db_path, confined=confined)
        if not confined:
            click.echo(
                "clearance demo: this system cannot confine the programs shell.run starts "
                "(no Landlock), so the demo's scripted commands run unconfined; your own "
                'configuration refuses to start here unless [tools] confinement = "none"',
                err=True,
            )
        if echo is not None:
            echo(click.style("clearance demo", bold=True) + ": a scripted coding agent")
            echo(f"  workspace  {printable(workspace)} (temporary)")
            echo("  policies   the coding Cedar pack (clearance/packs/coding)")
            echo(f"  journal    {printable(db_path)}" + ("" if db else " (temporary)"))
            echo(f"  principal  {printable(DEMO_PRINCIPAL)}")
            echo(f"  task       {printable(script.get('prompt', ''))}")
            echo("")

        s: ScriptedRun = run_sync(
            partial(
                drive,
                config,
                provider,
                principal=DEMO_PRINCIPAL,
                printer=printer,
                answerer=answerer,
                prompt=str(script.get("prompt", "")),
                echo=echo,
            )
        )
        rows = call_rows(s)
        if as_json:
            print_json(
                {
                    "session_id": s.session_id,
                    "principal": str(DEMO_PRINCIPAL),
                    "journal_path": str(db_path) if db else None,
                    "calls": rows,
                    "text": s.result.text,
                    "journal": [e.to_json() for e in s.journal],
                }
            )
            return
        click.echo()
        printer.say(printable(s.result.text, newlines=True))
        click.echo()
        where = printable(db_path) if db else "the temporary journal"
        click.echo(
            click.style("journal", bold=True)
            + f": {len(s.journal)} records in {where}, one row per call"
        )
        if db:
            click.echo(f"         clearance journal --db {printable(db)} shows them all")
        _print_journal(s.journal, printer.columns)
        click.echo()
        next_command = f"clearance policy test {printable(pack_path('coding'))}"
        if len(next_command) + 6 > printer.columns:
            next_command = f"clearance policy test \\\n        {printable(pack_path('coding'))}"
        click.echo(f"Next: {next_command}")
        click.echo("      runs the pack's decision tests;")
        click.echo("      clearance run SCRIPT runs your own script.")
