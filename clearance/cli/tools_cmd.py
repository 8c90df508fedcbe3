"""``clearance tools``: the tools policies are written for.

::

    clearance tools list   [--config FILE] [--tools FILE] [--json]
    clearance tools export [--config FILE] [-o FILE]

``export`` writes a snapshot of every configured tool (the bundled toolsets and the tools
of each ``[[mcp_servers]]``, learned by starting the server): names, descriptions, input
schemas, annotations, read_only, where each comes from, and the facts it declares as kind
names and options. Every policy command, ``replay`` and ``suggest`` read it back with
``--tools FILE``, so that CI validates and tests policies without starting any server.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from clearance._text import json_text, printable
from clearance.cli._options import config_option
from clearance.cli._render import print_json, print_table
from clearance.cli._tools import command_tools, tools_option
from clearance.cli.main import cli, fail
from clearance.tuning import tool_declarations

__all__ = ["export_command", "list_command", "tools"]


@cli.group("tools")
def tools() -> None:
    """The tools policies are written for: the configured toolsets and MCP servers.

    \b
      clearance tools list                 name, read-only, source of every tool
      clearance tools export > tools.json  a snapshot for --tools FILE (CI, no servers)
    """


@tools.command("export")
@config_option
@click.option(
    "-o",
    "--output",
    metavar="FILE",
    default=None,
    help="Write to FILE instead of standard output (roots inside FILE's directory are "
    "written relative to it).",
)
def export_command(config_path: str | None, output: str | None) -> None:
    """Write the declarations of every configured tool as JSON.

    The configured [[mcp_servers]] are started to list their tools, then stopped. The
    snapshot holds each tool's name, description, input schema, annotations, read_only,
    source and server, sensitive fields and declared facts (kind and options, such as the
    root a path is resolved under). Paths under the directory the snapshot is written to
    (the current directory for standard output) are written relative to it, and read
    back relative to the file's directory.

    \b
      clearance tools export > tools.json
      clearance policy validate policies --tools tools.json
    """
    found = command_tools(config_path, None)
    base = Path(output).resolve().parent if output is not None else Path.cwd()
    document = tool_declarations(found.registry, relative_to=base)
    text = json_text(document, indent=2) + "\n"
    if output is None:
        click.echo(text, nl=False)
    else:
        try:
            with open(output, "w", encoding="utf-8") as out:
                out.write(text)
        except OSError as exc:
            fail(f"cannot write {output!r}: {os.strerror(exc.errno or 0) or exc}")
    click.echo(
        printable(f"exported {found.summary()} from {found.origin}")
        + (printable(f" to {output}") if output is not None else ""),
        err=True,
    )


@tools.command("list")
@config_option
@tools_option
@click.option("--json", "as_json", is_flag=True, help="Print the tools as JSON.")
def list_command(config_path: str | None, tools_path: str | None, as_json: bool) -> None:
    """List the tools policies can name: qualified name, read-only or mutating, where it
    comes from (a bundled toolset, an MCP server) and the facts it declares."""
    found = command_tools(config_path, tools_path)
    rows = [
        [
            tool.qualified_name,
            "read-only" if tool.read_only else "mutating",
            f"mcp:{tool.server}" if tool.source == "mcp" and tool.server else tool.source,
            ", ".join(f"{f.field}:{f.kind.name}" for f in tool.declared_facts) or "-",
        ]
        for tool in sorted(found.registry, key=lambda t: t.qualified_name)
    ]
    if as_json:
        print_json(
            {
                "from": found.origin,
                "tools": [
                    dict(zip(("name", "kind", "source", "facts"), row, strict=True)) for row in rows
                ],
            }
        )
        return
    print_table(["tool", "kind", "source", "facts"], rows)
    click.echo(printable(f"{found.summary()} from {found.origin}"))
