"""``clearance policy schema``: the Cedar schema generated from the configured tools."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from clearance._text import printable
from clearance.cli._options import config_option
from clearance.cli._render import print_json
from clearance.cli._tools import command_tools, tools_note, tools_option
from clearance.cli.policy_cmd import bind_quietly, policy, policy_directory
from clearance.config import Config
from clearance.errors import ConfigError

__all__ = ["schema_command"]


@policy.command("schema")
@config_option
@tools_option
@click.option(
    "--policies",
    metavar="DIR",
    default=None,
    help="A policy directory whose schema.json declares principal and entity types "
    "(default: the configured Cedar directory, if any).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["cedar", "json"]),
    default="cedar",
    show_default=True,
    help="Cedar schema syntax or Cedar's JSON schema format.",
)
def schema_command(
    config_path: str | None, tools_path: str | None, policies: str | None, fmt: str
) -> None:
    """Print the Cedar schema generated from the configured tools.

    One action per tool (Action::"files.read_file") in the groups Action::"ns:files",
    Action::"read_only" or Action::"mutating", and Action::"call_tool"; the tool's
    arguments typed as context.input. Policies are validated against exactly this schema.
    The schema is printed even when the policies do not validate.

    The tools of the configured [[mcp_servers]] are listed by starting each server;
    --tools FILE (from `clearance tools export`) reads them from FILE instead.
    """
    from clearance.policy.cedar import CedarEvaluator, schema_to_text

    tools = command_tools(config_path, tools_path)
    tools_note(tools)
    config, registry = tools.config, tools.registry
    directory = _policies_dir(config, policies)
    if policies is not None:
        policy_directory(policies)
    fragment = _schema_declarations(directory) if directory is not None else None
    # An evaluator without policies yields the schema without validating any policy, so
    # the schema can be read while the policies are still being fixed.
    evaluator = CedarEvaluator("", schema=fragment)
    bind_quietly(evaluator, registry)
    schema = evaluator.schema
    if fmt == "json":
        print_json(schema)
    else:
        # Attribute names come from tool schemas (an MCP server's, say): nothing in them
        # may act on the terminal.
        click.echo(printable(schema_to_text(schema).rstrip("\n"), newlines=True))


def _schema_declarations(directory: Path) -> Mapping[str, Any] | None:
    path = directory / "schema.json"
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read: {exc}", path=str(path)) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not JSON: {exc.msg}", path=str(path), line=exc.lineno) from None
    except RecursionError:
        raise ConfigError("nested too deeply to read", path=str(path)) from None
    if not isinstance(value, Mapping):
        raise ConfigError("the schema declarations must be a JSON object", path=str(path))
    return value


def _policies_dir(config: Config, policies: str | None) -> Path | None:
    if policies is not None:
        return Path(policies)
    if config.evaluator.kind == "cedar":
        return config.evaluator.policies
    return None
