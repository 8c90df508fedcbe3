"""``clearance policy validate DIR``: check policies against the schema of the tools."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import click

from clearance._text import printable
from clearance.cli._options import config_option, load_cli_config
from clearance.cli._render import print_json
from clearance.cli.main import EXIT_FAILED
from clearance.cli.policy_cmd import bind_quietly, policy, policy_directory
from clearance.config import build_registry
from clearance.errors import PolicyError

__all__ = ["validate_command"]


def _problem_line(problem: Mapping[str, Any]) -> str:
    where = str(problem.get("path") or "<policies>")
    if problem.get("line"):
        where += f":{problem['line']}"
    pid = problem.get("policy_id")
    line = f"{where}: " + (f"policy {pid}: " if pid else "") + str(problem.get("message"))
    return printable(line, newlines=True)


@policy.command("validate")
@click.argument("directory", metavar="DIR")
@config_option
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def validate_command(directory: str, config_path: str | None, as_json: bool) -> None:
    """Check every .cedar file in DIR against the schema of the configured tools.

    Reports each problem with file:line and the policy's @id: syntax errors, unknown
    attributes, actions, tools or namespaces, type errors. Exits 1 when any policy is
    invalid, 2 when DIR cannot be read.
    """
    from clearance.policy.cedar import CedarEvaluator

    path = policy_directory(directory)
    config = load_cli_config(config_path)
    registry = build_registry(config)
    problems: list[Mapping[str, Any]] = []
    count = 0
    ungoverned: tuple[str, ...] = ()
    try:
        evaluator = CedarEvaluator.from_directory(path)
        count = len([p for p in evaluator.engine.policies if p.kind != "template"])
        bind_quietly(evaluator, registry)
        ungoverned = evaluator.ungoverned
    except PolicyError as exc:
        problems = list(exc.problems) or [
            {"path": exc.path, "line": exc.line, "policy_id": exc.policy_id, "message": exc.message}
        ]
    if as_json:
        print_json(
            {
                "valid": not problems,
                "directory": str(path),
                "policies": count,
                "tools": len(registry),
                "problems": [dict(p) for p in problems],
                "ungoverned": list(ungoverned),
            }
        )
    elif problems:
        for problem in problems:
            click.echo(_problem_line(problem), err=True)
        click.echo(f"{len(problems)} problem(s) in {printable(path)}", err=True)
    else:
        click.echo(
            f"ok: {count} policies in {printable(path)} validate against the schema of "
            f"{len(registry)} tools"
        )
        if ungoverned:
            click.echo(
                "note: no policy can permit these tools, so every call of them is denied: "
                + printable(", ".join(ungoverned))
            )
    if problems:
        sys.exit(EXIT_FAILED)
