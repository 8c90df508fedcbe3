"""The tools a command decides for, and ``--tools FILE``.

Policies are written for tools, so every command that validates, tests, explains, replays
or suggests needs them (names, schemas, read_only, annotations, facts). They come from:

- the configuration (``--config``, else ./clearance.toml, else the built-in default): the
  bundled toolsets ``[tools]`` enables, and the tools of its ``[[mcp_servers]]``, learned
  by starting each server (and stopping it once its tools are listed);
- or, with ``--tools FILE``, the declarations in FILE (``clearance tools export`` writes
  them) instead of starting the servers: CI tests policies without any server. The
  configured toolsets stay (a declaration of a tool they already provide is left out);
  with ``--tools`` and no configuration file at all, only the declared tools.

:func:`command_tools` does this for the policy commands and ``tools export``;
:func:`tools_file_for` (:func:`command_tools_file` inside a command) gives ``replay`` and ``suggest`` (which build their harnesses from
a file, in worker processes too) a snapshot file of the servers' tools when there is no
``--tools``. :func:`tools_note` (and :func:`implicit_config_note` for those two) names the
implicit ./clearance.toml and the tool count.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import click

from clearance._text import printable
from clearance.cli._options import load_cli_config
from clearance.config import Config, build_registry, find_config, load_mcp_servers
from clearance.errors import ConfigError
from clearance.harness.journal import MemoryJournal
from clearance.harness.session import Harness
from clearance.harness.tools import ToolRegistry
from clearance.policy.local import LocalEvaluator
from clearance.tuning import load_tool_declarations, register_tool_declarations, tool_declarations

if TYPE_CHECKING:
    from clearance.mcp import McpServerConfig

__all__ = [
    "CommandTools",
    "command_tools",
    "command_tools_file",
    "implicit_config_note",
    "learn_server_tools",
    "start_servers",
    "tool_count",
    "tools_file_for",
    "tools_note",
    "tools_option",
]


def tools_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--tools FILE``: tool declarations instead of starting the configured MCP servers."""
    return click.option(
        "--tools",
        "tools_path",
        metavar="FILE",
        default=None,
        help="Tool declarations (written by `clearance tools export`) to decide for, "
        "instead of starting the configured MCP servers to list their tools.",
    )(fn)


@dataclass(frozen=True, slots=True)
class CommandTools:
    """The tools a command decides for, and where they came from."""

    registry: ToolRegistry
    config: Config
    config_label: str | None
    """``./clearance.toml`` when found implicitly, the ``--config`` path as given, or None
    for the built-in default."""
    implicit: bool
    """True when ./clearance.toml was used without ``--config``."""
    tools_path: str | None
    servers: tuple[str, ...]
    """The MCP servers started to learn their tools."""

    @property
    def origin(self) -> str:
        """Where the tools came from, for messages: ``./clearance.toml and tools.json``."""
        parts = [self.config_label] if self.config_label is not None else []
        if self.tools_path is not None:
            parts.append(self.tools_path)
        return " and ".join(parts) or "the built-in default"

    def summary(self) -> str:
        """``8 tools (files 5, shell 1, time 2)``."""
        return tool_count(self.registry)


def command_tools(config_path: str | None, tools_path: str | None) -> CommandTools:
    """The configuration and the tools of a command (see the module docstring).

    Raises:
        ConfigError: the configuration or the tools file is wrong, or a server does not
            start or list its tools.
        MissingExtraError: the configuration has MCP servers and the ``mcp`` extra is
            missing (``--tools`` needs no extra).
        ToolRegistrationError: a declaration is not a valid tool.
    """
    if tools_path is not None and not Path(tools_path).is_file():
        raise ConfigError("no such file", path=tools_path)
    found = find_config() if config_path is None else None
    config = load_cli_config(config_path)
    label = config_path if config_path is not None else (f"./{found}" if found else None)
    servers: tuple[McpServerConfig, ...] = ()
    if tools_path is not None:
        declarations = load_tool_declarations(tools_path)
        registry = ToolRegistry() if label is None else build_registry(config)
    else:
        registry = build_registry(config)
        if config.path is not None:
            servers = load_mcp_servers(config.path)
        declarations = learn_server_tools(servers) if servers else []
    register_tool_declarations(registry, declarations)
    return CommandTools(
        registry=registry,
        config=config,
        config_label=label,
        implicit=found is not None,
        tools_path=tools_path,
        servers=tuple(s.name for s in servers),
    )


def tools_note(tools: CommandTools) -> None:
    """Say on stderr which implicit configuration (./clearance.toml) the tools came from,
    and how many there are: a file picked up without being named is always named."""
    if tools.implicit:
        click.echo(printable(f"clearance: using {tools.origin}: {tools.summary()}"), err=True)


def implicit_config_note(config_path: str | None, registry: ToolRegistry) -> None:
    """:func:`tools_note` for a command that built its registry itself (``replay``,
    ``suggest``): names ./clearance.toml and the tool count when it was used without
    ``--config``."""
    found = find_config() if config_path is None else None
    if found is None:
        return
    click.echo(printable(f"clearance: using ./{found}: {tool_count(registry)}"), err=True)


def tool_count(registry: ToolRegistry) -> str:
    """``8 tools (files 5, shell 1, time 2)``."""
    count = Counter(tool.namespace for tool in registry)
    total = sum(count.values())
    by = ", ".join(f"{ns} {n}" for ns, n in sorted(count.items()))
    return f"{total} tool{'' if total == 1 else 's'}" + (f" ({by})" if by else "")


# --- MCP servers ----------------------------------------------------------------------------


async def start_servers(harness: Harness, servers: Sequence[McpServerConfig]) -> None:
    """Start every server at once in ``harness`` (each takes a process start and a
    handshake); the first failure is raised once all have tried.

    Raises:
        ConfigError: a server did not start or list its tools.
    """
    failures: list[BaseException] = []

    async def start(server: McpServerConfig) -> None:
        try:
            await server.start(harness)
        except Exception as exc:
            failures.append(exc)

    async with anyio.create_task_group() as tg:
        for server in servers:
            tg.start_soon(start, server)
    if failures:
        raise failures[0]


def learn_server_tools(servers: Sequence[McpServerConfig]) -> list[dict[str, Any]]:
    """Start ``servers``, list their tools as declarations, and stop them.

    A scratch harness holds the connections (it decides nothing: no session is opened);
    the servers are closed with it.

    Raises:
        ConfigError: a server did not start or list its tools.
    """

    async def learn() -> list[dict[str, Any]]:
        harness = Harness(ToolRegistry(), evaluator=LocalEvaluator(), journal=MemoryJournal())
        async with harness:
            await start_servers(harness, servers)
            tools: list[dict[str, Any]] = tool_declarations(harness.registry)["tools"]
            return tools

    return anyio.run(learn)


def command_tools_file(config_path: str | None, tools_path: str | None) -> str | None:
    """:func:`tools_file_for` for the running command: the snapshot file lives until the
    command ends (its click context closes), and ./clearance.toml, when used without
    ``--config``, is named on stderr with its tool count.

    Raises:
        ConfigError: the configuration is wrong or a server does not start.
        MissingExtraError: servers are configured and the ``mcp`` extra is missing.
    """
    ctx = click.get_current_context()
    tools_file: str | None = ctx.with_resource(tools_file_for(config_path, tools_path))
    if config_path is None and find_config() is not None:
        config = load_cli_config(None)
        registry = build_registry(config)
        if tools_file is not None:
            register_tool_declarations(registry, load_tool_declarations(tools_file))
        implicit_config_note(None, registry)
    return tools_file


@contextmanager
def tools_file_for(config_path: str | None, tools_path: str | None) -> Iterator[str | None]:
    """The ``--tools`` file a ``replay`` or ``suggest`` harness should read: ``tools_path``
    itself when given, else, when the configuration has ``[[mcp_servers]]``, a snapshot of
    their tools (written to a temporary file, removed on exit), else None.

    Raises:
        ConfigError: the configuration is wrong or a server does not start.
        MissingExtraError: servers are configured and the ``mcp`` extra is missing.
    """
    if tools_path is not None:
        yield tools_path
        return
    config = load_cli_config(config_path)
    servers = load_mcp_servers(config.path) if config.path is not None else ()
    if not servers:
        yield None
        return
    document = {"version": 1, "tools": learn_server_tools(servers)}
    handle, name = tempfile.mkstemp(prefix="clearance-tools-", suffix=".json")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(document, out)
        yield name
    finally:
        Path(name).unlink(missing_ok=True)
