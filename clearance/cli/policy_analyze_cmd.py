"""``clearance policy analyze DIR [--against OLD]``: prove things about a policy set.

Over every request the schema generated from the tools allows (not a sample of them):
which policies can never apply, which permits forbids wholly shadow, and with
``--against OLD`` every tool on which DIR (the proposed set) decides some call differently
from OLD (the current one), each with a request Cedar decides that way under both sets.

Exit codes fit CI: 1 when the proposed set loosens anything (deny → ask, deny → allow,
ask → allow), or the solver could not decide whether it does, or with ``--deny-warnings``
when a policy is impossible or shadowed; a tightening is reported and exits 0 (it denies
or asks more, which a review should see but a job need not fail on). 2 when a directory
cannot be read or analysed (a policy outside the encoded subset is named with its
file:line), or the ``analysis`` extra is not installed.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from clearance._text import printable
from clearance.cli._options import config_option
from clearance.cli._render import print_json
from clearance.cli._tools import command_tools, tools_note, tools_option
from clearance.cli.main import EXIT_FAILED
from clearance.cli.policy_cmd import policy, policy_directory, quiet_cedar_log

if TYPE_CHECKING:
    from clearance.policy.cedar.analysis import Analysis, Finding

__all__ = ["analyze_command", "warning_lines"]


def _finding_json(finding: Finding) -> dict[str, Any]:
    request = finding.request
    return {
        "kind": finding.kind,
        "message": finding.message,
        "policy": finding.policy,
        "location": finding.location,
        "change": finding.change,
        "shadowed_by": list(finding.by),
        "request": None
        if request is None
        else {
            "tool": request.tool,
            "principal": request.principal,
            "action": request.action,
            "resource": request.resource,
            "context": request.context,
        },
    }


def warning_lines(analysis: Analysis) -> list[str]:
    """``path:line: warning: ...`` for each impossible or shadowed policy, with its example."""
    lines: list[str] = []
    for finding in analysis.of("impossible", "shadowed"):
        where = f"{finding.location}: " if finding.location else ""
        lines.append(printable(f"{where}warning: {finding.message}"))
        if finding.request is not None:
            lines.append(printable(f"  for example: {finding.request.describe()}"))
    return lines


@policy.command("analyze")
@click.argument("directory", metavar="DIR")
@click.option(
    "--against",
    "against",
    metavar="OLD",
    default=None,
    help="The current policy directory: report every call DIR decides differently.",
)
@click.option(
    "--deny-warnings",
    is_flag=True,
    help="Exit 1 when a policy can never apply or a permit is shadowed by forbids.",
)
@config_option
@tools_option
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def analyze_command(
    directory: str,
    against: str | None,
    deny_warnings: bool,
    config_path: str | None,
    tools_path: str | None,
    as_json: bool,
) -> None:
    """Prove, over every request the tools' schema allows, what DIR's policies can do.

    \b
    Reports each policy that can never apply (`when { false }`, contradictory
    conditions), each permit every match of which a forbid denies, and with
    --against OLD each change of decision from OLD to DIR with a request that shows it:
    loosens (deny->ask, deny->allow, ask->allow) or tightens (the reverse). Every request
    shown is decided by Cedar under the sets before it is printed. Exits 1 when DIR
    loosens anything (or with --deny-warnings when a policy is impossible or shadowed),
    2 when a directory cannot be read or a policy uses a construct the analysis does not
    encode (extension functions, tags, template links).

    Needs the analysis extra: pip install 'clearance[analysis]'.
    """
    from clearance.policy.cedar.analysis import analyze_directory, compare_directories

    path = policy_directory(directory)
    old = policy_directory(against) if against is not None else None
    tools = command_tools(config_path, tools_path)
    tools_note(tools)
    registry = list(tools.registry)
    with quiet_cedar_log():
        analysis = analyze_directory(path, registry)
        changes = compare_directories(old, path, registry) if old is not None else None
    warnings = analysis.of("impossible", "shadowed")
    loosened = changes.of("loosens", "undecided") if changes is not None else []
    tightened = changes.of("tightens") if changes is not None else []
    if as_json:
        print_json(
            {
                "directory": str(path),
                "against": str(old) if old is not None else None,
                "policies": analysis.policies,
                "tools": analysis.tools,
                "applies": analysis.applies,
                "findings": [_finding_json(f) for f in analysis.findings],
                "changes": None
                if changes is None
                else [_finding_json(f) for f in changes.findings],
                "seconds": round(analysis.seconds + (changes.seconds if changes else 0), 3),
            }
        )
    else:
        for line in warning_lines(analysis):
            click.echo(line)
        for finding in changes.findings if changes is not None else ():
            click.echo(printable(f"{finding.kind} ({finding.change}): {finding.message}"))
            if finding.request is not None:
                click.echo(printable(f"  for example: {finding.request.describe()}"))
        impossible = len(analysis.of("impossible"))
        shadowed = len(analysis.of("shadowed"))
        summary = (
            f"{analysis.policies} policies in {printable(path)} over {analysis.tools} tools: "
            f"{impossible} can never apply, {shadowed} shadowed"
        )
        if changes is not None and old is not None:
            summary += (
                f"; against {printable(old)}: {len(loosened)} loosening(s), "
                f"{len(tightened)} tightening(s)"
            )
        seconds = analysis.seconds + (changes.seconds if changes is not None else 0)
        click.echo(f"{summary} ({seconds:.2f} s)")
    if loosened or (deny_warnings and warnings):
        sys.exit(EXIT_FAILED)
