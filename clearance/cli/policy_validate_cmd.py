"""``clearance policy validate DIR``: check policies against the schema of the tools."""

from __future__ import annotations

import sys
from collections.abc import Mapping

import click

from clearance._text import printable
from clearance.cli._options import config_option
from clearance.cli._render import print_json
from clearance.cli._tools import command_tools, tools_note, tools_option
from clearance.cli.main import EXIT_FAILED
from clearance.cli.policy_cmd import policy, policy_directory, quiet_cedar_log
from clearance.errors import PolicyError

__all__ = ["validate_command"]


def _problem_text(problem: Mapping[str, object]) -> str:
    """``path:line:column: policy <id>: message`` and its code frame, printable."""
    return printable(PolicyError.format_problem(problem), newlines=True)


@policy.command("validate")
@click.argument("directory", metavar="DIR")
@config_option
@tools_option
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def validate_command(
    directory: str, config_path: str | None, tools_path: str | None, as_json: bool
) -> None:
    """Check every .cedar file in DIR against the schema of the configured tools.

    Reports every problem on standard output, each with file:line:column, the policy's
    @id and the line with a caret under the error: syntax errors (a file that does not
    parse does not hide the problems of the others), unknown attributes, actions, tools
    or namespaces (with the nearest name), type errors (with a hint). Exits 1 when any
    policy is invalid, 2 when DIR or the tools cannot be read.

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
        click.echo(
            f"ok: {check.policies} policies in {printable(path)} validate against the schema "
            f"of {len(registry)} tools from {printable(tools.origin)}"
        )
        if check.ungoverned:
            click.echo(
                "note: no policy can permit these tools, so every call of them is denied: "
                + printable(", ".join(check.ungoverned))
            )
    if problems:
        sys.exit(EXIT_FAILED)
