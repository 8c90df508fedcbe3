"""Which of an MCP server's tools are registered, under which names, with which flags.

The server's tool names become clearance names (lower case, ``[a-z0-9_-]``); two names
that become one are both refused. Only the tools selected by ``tools`` are kept, and a
pattern that then matches nothing is an error. A tool is read-only only when the
registration says so (``read_only``), or ``trust_annotations`` is set and the server says
``readOnlyHint``; ``Tool.annotations`` records which under ``clearance.read_only_source``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from fnmatch import fnmatchcase
from typing import Any, Protocol

import mcp_types

from clearance.errors import ConfigError, ToolRegistrationError
from clearance.harness.tools import CallContext, Tool, ToolRegistry

__all__ = ["READ_ONLY_SOURCE_KEY", "ToolSource", "check_patterns", "prepare_tools"]

_log = logging.getLogger("clearance.mcp")

READ_ONLY_SOURCE_KEY = "clearance.read_only_source"
"""The annotation that says where a tool's read-only flag came from: ``config``,
``server`` or ``default``."""

_NAME = re.compile(r"[^a-z0-9_-]")


class ToolSource(Protocol):
    """What tool selection needs of an upstream server."""

    @property
    def name(self) -> str:
        """The namespace of its tools."""
        ...

    def handler(self, remote_name: str) -> Callable[[dict[str, Any], CallContext], Any]:
        """The handler that forwards a call of ``remote_name`` to the server."""
        ...


def check_patterns(what: str, patterns: Sequence[str] | None) -> None:
    """Refuse ``tools`` or ``read_only`` that are not a list of globs.

    Raises:
        ConfigError: naming ``what``.
    """
    if patterns is None:
        return
    if isinstance(patterns, str) or not all(isinstance(p, str) and p for p in patterns):
        raise ConfigError(f"{what} must be a list of tool-name globs")


def _matches(pattern: str, qualified: str, local: str, remote: str) -> bool:
    if "." in pattern:
        return fnmatchcase(qualified, pattern)
    return fnmatchcase(local, pattern) or fnmatchcase(remote, pattern)


def prepare_tools(
    upstream: ToolSource,
    listed: Sequence[mcp_types.Tool],
    tools: Sequence[str] | None,
    read_only: Sequence[str] | None,
    trust_annotations: bool,
) -> list[Tool]:
    """The tools of ``listed`` to register, as clearance tools.

    Args:
        upstream: the server; its ``handler(remote_name)`` runs a call of that tool.
        listed: what the server listed.
        tools: globs selecting the tools (``None``: every tool).
        read_only: globs of the tools to mark read-only.
        trust_annotations: take the server's ``readOnlyHint`` for the others.

    Returns:
        The tools to register, each checked as the registry would check it (a tool the
        registry would refuse is skipped with a logged warning).

    Raises:
        ConfigError: a ``tools`` pattern matches no usable tool (a skipped tool that was
            asked for is never silent).
    """
    namespace = upstream.name
    candidates = _local_names(namespace, listed)

    selected: list[tuple[str, mcp_types.Tool]] = []
    for local, remote in candidates:
        qualified = f"{namespace}.{local}"
        if tools is None or any(_matches(p, qualified, local, remote.name) for p in tools):
            selected.append((local, remote))

    prepared: list[Tool] = []
    for local, remote in selected:
        qualified = f"{namespace}.{local}"
        hints = (
            remote.annotations.model_dump(by_alias=True, mode="json", exclude_none=True)
            if remote.annotations is not None
            else {}
        )
        if read_only and any(_matches(p, qualified, local, remote.name) for p in read_only):
            ro, source = True, "config"
        elif trust_annotations and hints.get("readOnlyHint") is True:
            ro, source = True, "server"
        else:
            ro, source = False, "default"
        tool = Tool(
            local,
            upstream.handler(remote.name),
            description=remote.description or hints.get("title") or remote.title or "",
            input_schema=remote.input_schema,
            read_only=ro,
            annotations={**hints, READ_ONLY_SOURCE_KEY: source},
            source="mcp",
            server=namespace,
        )
        try:
            # A scratch registry applies the same checks as the real one, tool by
            # tool, so one bad schema costs that tool only.
            ToolRegistry().register(namespace, [tool])
        except ToolRegistrationError as exc:
            _log.warning("MCP server %r: skipped tool %r: %s", namespace, remote.name, exc.reason)
            continue
        prepared.append(tool)

    if tools is not None:
        kept = {t.name for t in prepared}
        available = sorted(f"{namespace}.{t.name}" for t in prepared) or ["(none)"]
        for pattern in tools:
            if not any(
                _matches(pattern, f"{namespace}.{local}", local, remote.name)
                for local, remote in selected
                if local in kept
            ):
                raise ConfigError(
                    f"MCP server {namespace!r}: tools pattern {pattern!r} matches no usable "
                    f"tool (usable: {', '.join(available)})"
                )
    if read_only:
        for pattern in read_only:
            if not any(
                _matches(pattern, f"{namespace}.{local}", local, remote.name)
                for local, remote in selected
            ):
                _log.warning(
                    "MCP server %r: read_only pattern %r matches no selected tool",
                    namespace,
                    pattern,
                )
    return prepared


def _local_names(
    namespace: str, listed: Sequence[mcp_types.Tool]
) -> list[tuple[str, mcp_types.Tool]]:
    """``(clearance name, tool)`` for each listed tool that gets a name of its own.

    Two tools whose names map to the same clearance name (``GIT_STATUS`` and
    ``git_status``) are both refused: registering either would let configuration, policies
    and the model's calls meant for one reach the other.
    """
    by_local: dict[str, list[mcp_types.Tool]] = {}
    for remote in listed:
        local = _local_name(remote.name)
        if local is None:
            _log.warning(
                "MCP server %r: skipped tool %r: its name cannot be made a clearance name",
                namespace,
                remote.name,
            )
            continue
        by_local.setdefault(local, []).append(remote)
    named: list[tuple[str, mcp_types.Tool]] = []
    for local, remotes in by_local.items():
        if len(remotes) > 1:
            _log.warning(
                "MCP server %r: skipped tools %s: their names all become the clearance name "
                "%r, so no name or pattern could tell them apart",
                namespace,
                ", ".join(repr(remote.name) for remote in remotes),
                local,
            )
            continue
        named.append((local, remotes[0]))
    return named


def _local_name(remote: str) -> str | None:
    """The clearance name for an MCP tool name: lower case, ``[a-z0-9_-]``, 64 characters."""
    local = _NAME.sub("_", remote.lower()).lstrip("_")[:64]
    return local or None
