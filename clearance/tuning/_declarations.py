"""Tool declarations: tools a replay decides on without having them.

A corpus may name an application's own tools or an MCP server's. Declaring their name and
input schema (and read_only, annotations, sensitive fields) is enough to decide their
calls: the registered handler refuses to run, and a replay never runs one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from clearance.errors import ConfigError
from clearance.harness.tools import CallContext, Tool, ToolRegistry

__all__ = ["load_tool_declarations", "register_tool_declarations"]


def load_tool_declarations(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read tool declarations: a JSON list (or ``{"tools": [...]}``) of objects with
    ``name`` (qualified: ``banking.send_money``), ``input_schema`` (or MCP's
    ``inputSchema``), and optionally ``description``, ``read_only``, ``annotations``,
    ``sensitive``.

    Raises:
        ConfigError: the file cannot be read or a declaration is malformed.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read the tools file: {exc.strerror}", path=str(path)) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"the tools file is not JSON: {exc}", path=str(path)) from None
    items = data.get("tools") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise ConfigError('expected a JSON list of tools (or {"tools": [...]})', path=str(path))
    out: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(name, str) or "." not in name:
            raise ConfigError(
                f"tools[{index}]: 'name' must be a qualified name like banking.send_money",
                path=str(path),
            )
        out.append(item)
    return out


def _never_run(arguments: dict[str, Any], ctx: CallContext) -> str:
    raise RuntimeError("a replayed tool is never run")


def register_tool_declarations(
    registry: ToolRegistry, declarations: Iterable[Mapping[str, Any]]
) -> None:
    """Register declared tools (see :func:`load_tool_declarations`) with handlers that
    never run.

    Raises:
        ToolRegistrationError: a declaration is not a valid tool.
    """
    by_namespace: dict[str, list[Tool]] = {}
    for item in declarations:
        namespace, _, name = str(item["name"]).partition(".")
        schema = item.get("input_schema", item.get("inputSchema"))
        options: dict[str, Any] = {
            "description": str(item.get("description") or ""),
            "read_only": bool(item.get("read_only", False)),
            "annotations": dict(item.get("annotations") or {}),
            "sensitive": tuple(item.get("sensitive") or ()),
        }
        if schema is not None:
            options["input_schema"] = schema
        by_namespace.setdefault(namespace, []).append(Tool(name, _never_run, **options))
    for namespace, tools in by_namespace.items():
        registry.register(namespace, tools)
