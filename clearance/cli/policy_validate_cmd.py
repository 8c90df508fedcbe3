"""``clearance policy validate DIR``: check policies against the schema of the tools."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

import click

from clearance._text import printable
from clearance.cli._options import config_option
from clearance.cli._render import print_json
from clearance.cli._tools import command_tools, tools_note, tools_option
from clearance.cli.main import EXIT_FAILED, fail
from clearance.cli.policy_cmd import policy, policy_directory, quiet_cedar_log
from clearance.errors import MissingExtraError, PolicyError
from clearance.harness.tools import ToolRegistry

__all__ = ["validate_command"]

_ANALYZED_UP_TO = 2000
"""The largest set ``validate`` proves every policy of without being asked."""


def _problem_text(problem: Mapping[str, object]) -> str:
    """``path:line:column: policy <id>: message`` and its code frame, printable."""
    return printable(PolicyError.format_problem(problem), newlines=True)


@policy.command("validate")
@click.argument("directory", metavar="DIR")
@config_option
@tools_option
@click.option(
    "--deny-warnings",
    is_flag=True,
    help="Exit 1 when a policy can never apply (a warning otherwise).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def validate_command(
    directory: str,
    config_path: str | None,
    tools_path: str | None,
    deny_warnings: bool,
    as_json: bool,
) -> None:
    """Check every .cedar file in DIR against the schema of the configured tools.

    Reports every problem on standard output, each with file:line:column, the policy's
    @id and the line with a caret under the error: syntax errors (a file that does not
    parse does not hide the problems of the others), unknown attributes, actions, tools
    or namespaces (with the nearest name), type errors (with a hint). A policy that
    validates but can never apply (`when { false }`, contradictory conditions) is a
    warning, proved by `clearance policy analyze` (the analysis extra). Exits 1 when any
    policy is invalid (or, with --deny-warnings, can never apply), 2 when DIR or the
    tools cannot be read.

    The tools of the configured [[mcp_servers]] are listed by starting each server;
    --tools FILE (from `clearance tools export`) reads them from FILE instead.
    """
    from clearance.policy.cedar import check_directory

    path = policy_directory(directory)
    tools = command_tools(config_path, tools_path)
    tools_note(tools)
    registry = tools.registry
    with quiet_cedar_log():
        check = check_directory(path, registry)
    problems = check.problems
    warnings = _impossible(path, check.policies, registry, deny_warnings) if not problems else []
    if as_json:
        print_json(
            {
                "valid": check.valid,
                "directory": str(path),
                "policies": check.policies,
                "tools": len(registry),
                "tools_from": tools.origin,
                "problems": [dict(p) for p in problems],
                "ungoverned": list(check.ungoverned),
                "warnings": warnings,
            }
        )
    elif problems:
        for problem in problems:
            click.echo(_problem_text(problem))
        files = len({p.get("path") for p in problems})
        click.echo(
            f"{len(problems)} problem(s) in {files} file(s) in {printable(path)} "
            f"(schema of {tools.summary()} from {printable(tools.origin)})"
        )
    else:
        for warning in warnings:
            click.echo(printable(warning))
        if deny_warnings and warnings:
            click.echo(
                f"{len(warnings)} warning(s) in {printable(path)}, denied by --deny-warnings"
            )
            sys.exit(EXIT_FAILED)
        click.echo(
            f"ok: {check.policies} policies in {printable(path)} validate against the schema "
            f"of {len(registry)} tools from {printable(tools.origin)}"
        )
        if check.ungoverned:
            click.echo(
                "note: no policy can permit these tools, so every call of them is denied: "
                + printable(", ".join(check.ungoverned))
            )
    if problems or (deny_warnings and warnings):
        sys.exit(EXIT_FAILED)


def _impossible(path: Path, policies: int, registry: ToolRegistry, required: bool) -> list[str]:
    """A warning for each policy that can never apply, proved by the analysis.

    Without the analysis extra, or for a set it does not encode, validation still passes:
    a note says what was not checked (with ``required``, --deny-warnings, it is an error,
    since the warnings asked for cannot be proved absent). A set larger than
    :data:`_ANALYZED_UP_TO` is not analysed unless asked (the proof costs some
    milliseconds a policy, which would make validating ten thousand a matter of minutes).
    """
    if policies > _ANALYZED_UP_TO and not required:
        click.echo(
            f"note: {policies} policies: not checked for policies that can never apply "
            "(--deny-warnings or `clearance policy analyze` checks them)",
            err=True,
        )
        return []
    try:
        from clearance.policy.cedar.analysis import analyze_directory
    except MissingExtraError as exc:
        if required:
            raise
        click.echo(f"note: not checked for policies that can never apply: {exc}", err=True)
        return []
    try:
        with quiet_cedar_log():
            analysis = analyze_directory(path, list(registry), shadows=False)
    except PolicyError as exc:
        if required:
            fail(f"cannot prove that every policy can apply: {exc}")
        click.echo(f"note: not checked for policies that can never apply: {exc}", err=True)
        return []
    return [
        f"{f.location + ': ' if f.location else ''}warning: {f.message}"
        for f in analysis.of("impossible")
    ]
