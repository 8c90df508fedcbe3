"""Tool declarations: tools a command decides on without having them.

A corpus, a policy directory or its decision tests may be about an application's own tools
or an MCP server's. Declaring each tool's name and input schema (and read_only,
annotations, sensitive fields, where it comes from, the facts it declares) is enough to
decide its calls: the registered handler refuses to run, and nothing here ever runs one.

``clearance tools export`` writes the declarations of every configured tool (the MCP
servers' too, learned by starting them) with :func:`tool_declarations`; ``--tools FILE``
reads them back with :func:`load_tool_declarations` and :func:`register_tool_declarations`,
so that CI decides exactly as the configured tools would, without starting a server::

    {"version": 1, "tools": [
      {"name": "time.get_current_time", "description": "...",
       "input_schema": {"type": "object", ...}, "read_only": true,
       "annotations": {"readOnlyHint": true}, "source": "mcp", "server": "time",
       "sensitive": [], "facts": {}},
      {"name": "files.read_file", ..., "facts": {"/path": {"kind": "path", "root": "."}}}
    ]}

A fact is a kind name (``"path"``, resolved under the declaration's ``root``) or an object
with ``kind`` and the kind's options (``root``, ``max_length``, ``default_scheme``). A
relative ``root`` is relative to the directory of the file that declares it. A ``process``
fact (the id of ``process.read``, ``process.write``, ``process.stop``) names a process of a
running session, and a declared tool has none: every id is refused, unless a decision
test supposes its record (``facts``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from clearance.errors import ConfigError, ToolRegistrationError
from clearance.facts import EmailFact, NumberFact, PathFact, UrlFact
from clearance.facts.command import CommandFact
from clearance.facts.git import GitRefFact
from clearance.facts.patch import PatchFact
from clearance.harness.tools import CallContext, Tool, ToolRegistry
from clearance.toolsets.process import ProcessFact

__all__ = [
    "DECLARATIONS_VERSION",
    "load_tool_declarations",
    "register_tool_declarations",
    "tool_declaration",
    "tool_declarations",
]

DECLARATIONS_VERSION = 1
"""The ``version`` of the files :func:`tool_declarations` describes."""

_KEYS = frozenset(
    {
        "name",
        "description",
        "input_schema",
        "inputSchema",
        "read_only",
        "annotations",
        "sensitive",
        "source",
        "server",
        "root",
        "facts",
    }
)
# What an MCP tools/list answer holds beside those: accepted, and not used to decide.
_MCP_KEYS = frozenset({"title", "outputSchema", "icons", "_meta", "execution"})
_FACT_OPTIONS = {
    "path": {"root"},
    "path_entry": {"root"},
    "patch": {"root"},
    "git_ref": set(),
    "command": {"root", "max_length"},
    "url": {"default_scheme"},
    "email": set(),
    "number": set(),
    "process": set(),
}


# --- writing --------------------------------------------------------------------------------


def tool_declarations(
    tools: Iterable[Tool], *, relative_to: str | os.PathLike[str] | None = None
) -> dict[str, Any]:
    """The declarations of ``tools`` as one JSON document (``{"version", "tools"}``).

    Args:
        tools: registered tools (a :class:`ToolRegistry` iterates its tools).
        relative_to: roots inside this directory are written relative to it (the directory
            of the file being written), so that the file can be used from a checkout
            elsewhere; other roots stay absolute.

    Raises:
        ConfigError: a tool declares a fact of a custom kind (a function), which a file
            cannot carry.
    """
    base = os.path.realpath(relative_to) if relative_to is not None else None
    return {
        "version": DECLARATIONS_VERSION,
        "tools": [tool_declaration(tool, relative_to=base) for tool in tools],
    }


def tool_declaration(tool: Tool, *, relative_to: str | None = None) -> dict[str, Any]:
    """One registered tool as a declaration (see :func:`tool_declarations`).

    Raises:
        ConfigError: the tool declares a fact of a custom kind.
    """
    facts = {
        fact.pointer: _fact_spec(tool.qualified_name, fact.pointer, fact.kind, relative_to)
        for fact in tool.declared_facts
    }
    return {
        "name": tool.qualified_name,
        "description": tool.description,
        "input_schema": dict(tool.input_schema),
        "read_only": tool.read_only,
        "annotations": dict(tool.annotations),
        "source": tool.source,
        "server": tool.server,
        "sensitive": list(tool.sensitive),
        "facts": facts,
    }


def _fact_spec(tool: str, pointer: str, kind: Any, relative_to: str | None) -> dict[str, Any]:
    if isinstance(kind, PathFact):
        name = "path" if kind.follow_final else "path_entry"
        return {"kind": name, "root": _root_text(kind.root, relative_to)}
    if isinstance(kind, GitRefFact):
        return {"kind": "git_ref"}
    if isinstance(kind, PatchFact):
        return {"kind": "patch", "root": _root_text(kind.root, relative_to)}
    if isinstance(kind, CommandFact):
        spec: dict[str, Any] = {"kind": "command", "root": _root_text(kind.root, relative_to)}
        if kind.max_length != CommandFact().max_length:
            spec["max_length"] = kind.max_length
        return spec
    if isinstance(kind, UrlFact):
        return {
            "kind": "url",
            **({"default_scheme": kind.default_scheme} if kind.default_scheme else {}),
        }
    if isinstance(kind, EmailFact):
        return {"kind": "email"}
    if isinstance(kind, NumberFact):
        return {"kind": "number"}
    if isinstance(kind, ProcessFact):
        return {"kind": "process"}
    raise ConfigError(
        f"tool {tool}: the fact {pointer} is of a custom kind ({getattr(kind, 'name', kind)!r}), "
        "which a tools file cannot carry"
    )


def _root_text(root: str | None, relative_to: str | None) -> str | None:
    if root is None or relative_to is None:
        return root
    if root == relative_to:
        return "."
    if root.startswith(relative_to.rstrip(os.sep) + os.sep):
        return Path(os.path.relpath(root, relative_to)).as_posix()
    return root


# --- reading --------------------------------------------------------------------------------


def load_tool_declarations(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read tool declarations: a JSON list, or an object with ``tools`` (and ``version``),
    of objects with ``name`` (qualified: ``banking.send_money``), ``input_schema`` (or
    MCP's ``inputSchema``), and optionally ``description``, ``read_only``,
    ``annotations``, ``sensitive``, ``source``, ``server``, ``root`` and ``facts``.

    A relative ``root`` (of a declaration or of a fact) is made absolute here, against
    the file's directory.

    Raises:
        ConfigError: the file cannot be read, is nested too deeply, or a declaration is
            malformed (an unknown key, a value of the wrong type).
    """
    where = str(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read the tools file: {exc.strerror}", path=where) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"the tools file is not JSON: {exc}", path=where) from None
    except RecursionError:
        raise ConfigError("nested too deeply to read", path=where) from None
    if isinstance(data, dict):
        version = data.get("version", DECLARATIONS_VERSION)
        if version != DECLARATIONS_VERSION:
            raise ConfigError(
                f"tools file version {version!r} is not supported (this clearance reads "
                f"version {DECLARATIONS_VERSION})",
                path=where,
            )
        items = data.get("tools")
    else:
        items = data
    if not isinstance(items, list):
        raise ConfigError('expected a JSON list of tools (or {"tools": [...]})', path=where)
    base = Path(path).resolve().parent
    return [_checked(item, index, where, base) for index, item in enumerate(items)]


def _checked(item: Any, index: int, where: str, base: Path) -> dict[str, Any]:
    """One declaration, checked, with its roots made absolute."""
    name = item.get("name") if isinstance(item, dict) else None
    if not isinstance(name, str) or "." not in name:
        raise ConfigError(
            f"tools[{index}]: 'name' must be a qualified name like banking.send_money",
            path=where,
        )
    label = f"tools[{index}] ({name})"

    def bad(message: str) -> ConfigError:
        return ConfigError(f"{label}: {message}", path=where)

    assert isinstance(item, dict)
    unknown = sorted(set(item) - _KEYS - _MCP_KEYS)
    if unknown:
        raise bad(f"unknown key(s) {', '.join(map(repr, unknown))}")
    out = {k: v for k, v in item.items() if k not in _MCP_KEYS}
    for key, types, what in (
        ("description", (str,), "a string"),
        ("read_only", (bool,), "true or false"),
        ("annotations", (dict,), "an object"),
        ("input_schema", (dict,), "an object"),
        ("inputSchema", (dict,), "an object"),
        ("sensitive", (list,), "a list of JSON pointers"),
        ("source", (str,), "a string"),
        ("server", (str, type(None)), "a string or null"),
        ("root", (str, type(None)), "a directory or null"),
        ("facts", (dict,), 'an object like {"/path": "path"}'),
    ):
        if key in out and not isinstance(out[key], types):
            raise bad(f"{key!r} must be {what}")
    if isinstance(out.get("root"), str):
        out["root"] = str(base / out["root"])
    facts: dict[str, Any] = {}
    for pointer, spec in (out.get("facts") or {}).items():
        facts[pointer] = _checked_fact(spec, pointer, base, bad)
    if facts:
        out["facts"] = facts
    return out


def _checked_fact(spec: Any, pointer: str, base: Path, bad: Any) -> Any:
    """A fact spec: a kind name, or ``{"kind", ...options}`` with its root made absolute."""
    if isinstance(spec, str):
        kind, options = spec, {}
    elif isinstance(spec, dict) and isinstance(spec.get("kind"), str):
        kind, options = spec["kind"], {k: v for k, v in spec.items() if k != "kind"}
    else:
        raise bad(f"fact {pointer}: expected a kind name or an object with 'kind'")
    if kind not in _FACT_OPTIONS:
        raise bad(
            f"fact {pointer}: unknown kind {kind!r} (a tools file declares "
            f"{', '.join(_FACT_OPTIONS)})"
        )
    extra = sorted(set(options) - _FACT_OPTIONS[kind])
    if extra:
        raise bad(f"fact {pointer}: a {kind!r} fact takes no {', '.join(map(repr, extra))}")
    root = options.get("root")
    if root is not None:
        if not isinstance(root, str):
            raise bad(f"fact {pointer}: 'root' must be a directory or null")
        options["root"] = str(base / root)
    return {"kind": kind, **options} if options or isinstance(spec, dict) else kind


# --- registering ----------------------------------------------------------------------------


def _never_run(arguments: dict[str, Any], ctx: CallContext) -> str:
    raise RuntimeError("a declared tool is never run")


def register_tool_declarations(
    registry: ToolRegistry, declarations: Iterable[Mapping[str, Any]]
) -> list[Tool]:
    """Register declared tools (see :func:`load_tool_declarations`) with handlers that
    never run. A declaration of a tool the registry already holds is left out: the
    registered tool (from the configuration) is the one that runs, and a file exported
    from that configuration declares it too.

    Returns:
        The tools registered.

    Raises:
        ToolRegistrationError: a declaration is not a valid tool (its schema, its facts,
            a root that is not a directory).
    """
    by_namespace: dict[str, list[Tool]] = {}
    for item in declarations:
        qualified = str(item["name"])
        if registry.find(qualified) is not None:
            continue
        namespace, _, name = qualified.partition(".")
        schema = item.get("input_schema", item.get("inputSchema"))
        root = item.get("root")
        options: dict[str, Any] = {
            "description": str(item.get("description") or ""),
            "read_only": bool(item.get("read_only", False)),
            "annotations": dict(item.get("annotations") or {}),
            "sensitive": tuple(item.get("sensitive") or ()),
            "source": str(item.get("source") or "callback"),
            "server": item.get("server"),
            "root": root,
            "facts": {
                pointer: _fact_kind(spec, root, qualified, pointer)
                for pointer, spec in (item.get("facts") or {}).items()
            },
        }
        if schema is not None:
            options["input_schema"] = schema
        by_namespace.setdefault(namespace, []).append(Tool(name, _never_run, **options))
    registered: list[Tool] = []
    for namespace, tools in by_namespace.items():
        registered.extend(registry.register(namespace, tools))
    return registered


def _fact_kind(spec: Any, root: str | None, tool: str, pointer: str) -> Any:
    """A fact spec as ``Tool(facts=...)`` takes it: a kind name (resolved under the tool's
    root when registered) or a built kind.

    Raises:
        ToolRegistrationError: the kind cannot be built (a root that is not a directory).
    """
    if (spec if isinstance(spec, str) else spec["kind"]) == "process":
        # A process id names a process of a running session: a declared tool has none.
        return ProcessFact()
    if isinstance(spec, str):
        return spec
    options = {k: v for k, v in spec.items() if k != "kind"}
    kind = spec["kind"]
    try:
        if kind in ("path", "path_entry"):
            where = options.get("root") or root
            if where is None:
                return kind  # registration says that the root is missing
            return PathFact(where, follow_final=kind == "path")
        if kind == "patch":
            where = options.get("root") or root
            return kind if where is None else PatchFact(where)
        if kind == "command":
            extra = {"max_length": options["max_length"]} if "max_length" in options else {}
            return CommandFact(options.get("root", root), **extra)
        if kind == "url":
            return UrlFact(default_scheme=options.get("default_scheme"))
    except (ValueError, TypeError) as exc:  # FactError is a ValueError
        raise ToolRegistrationError(tool, f"fact {pointer}: {exc}") from None
    return kind
