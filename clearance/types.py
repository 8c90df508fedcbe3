"""Value types and protocols shared by every layer: who calls, which tool, in which session.

This is the bottom of the package (next to :mod:`clearance.errors`): it imports nothing else
from clearance, so that :mod:`clearance.policy` and :mod:`clearance.guardrails` can describe
a tool without importing the runtime that registers it (:mod:`clearance.harness`).

- :class:`Principal`, :class:`ToolInfo`, :class:`SessionInfo`: the values an evaluator and a
  guardrail see.
- :class:`ToolLike`: what policy code reads of one registered tool.
  :class:`clearance.harness.tools.Tool` has all of it.
- :class:`ToolCatalog`: the registered tools, iterable. A
  :class:`clearance.harness.tools.ToolRegistry` is one, and so is a plain list of tools.

Both protocols are structural: nothing subclasses them. ``tests/test_types.py`` checks (with
mypy, and at run time) that ``Tool`` and ``ToolRegistry`` satisfy them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "ArgumentValidator",
    "Principal",
    "SessionInfo",
    "ToolCatalog",
    "ToolInfo",
    "ToolLike",
]


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a session acts for: a Cedar-style entity ``Type::"id"``.

    ``Principal("User", "alice", attrs={"team": "infra"}, parents=[("Team", "infra")])``
    """

    type: str
    """Entity type, e.g. ``"User"`` or ``"Agent"``."""
    id: str
    """Entity id, e.g. ``"alice"``."""
    attrs: Mapping[str, Any] = field(default_factory=dict)
    """Attributes policies may read (``principal.team``)."""
    parents: Sequence[tuple[str, str]] = ()
    """Parent entities as ``(type, id)`` pairs, for Cedar ``in`` checks."""

    def __str__(self) -> str:
        # Cedar's entity syntax; an id holding a quote or a backslash is escaped, so that
        # two principals never print alike and :meth:`parse` reads the text back.
        if '"' in self.id or "\\" in self.id:
            return f"{self.type}::{json.dumps(self.id, ensure_ascii=False)}"
        return f'{self.type}::"{self.id}"'

    def __hash__(self) -> int:
        return hash((self.type, self.id))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Principal):
            return NotImplemented
        return (self.type, self.id) == (other.type, other.id)

    @classmethod
    def from_json(cls, value: Any) -> Principal:
        """A principal from ``'User::"alice"'`` text or ``{"type", "id", "attrs",
        "parents"}`` (parents as ``[["Team", "infra"]]`` pairs or ``'Team::"infra"'`` text).

        Raises:
            ValueError: the value has neither form.
        """
        if isinstance(value, str):
            return cls.parse(value)
        if isinstance(value, Mapping):
            kind, ident = value.get("type"), value.get("id")
            if not isinstance(kind, str) or not isinstance(ident, str):
                raise ValueError("'principal' needs a string 'type' and 'id'")
            attrs = value.get("attrs", {})
            if not isinstance(attrs, Mapping):
                raise ValueError("'principal.attrs' must be an object")
            parents = value.get("parents", [])
            return cls(kind, ident, dict(attrs), _parents(parents))
        raise ValueError('\'principal\' must be like "User::\\"alice\\"" or {"type", "id"}')

    @classmethod
    def parse(cls, text: str) -> Principal:
        """Parse Cedar's entity syntax, ``'User::"alice"'`` or ``'Acme::User::"alice"'``,
        into a principal: a type name (``::``-separated identifiers, no spaces) and a
        quoted id (JSON escapes).

        Raises:
            ValueError: ``text`` is not in that form (``User::alice`` and
                ``User :: "alice"`` included: Cedar refuses both), naming what to write.
        """
        m = _ENTITY_RE.fullmatch(text)
        if m is not None:
            try:
                ident = json.loads(m.group(2), strict=False)
            except ValueError:
                ident = None
            if isinstance(ident, str):
                return cls(m.group(1), ident)
        hint = ""
        bare = _BARE_ENTITY_RE.fullmatch(text.strip())
        if bare is not None:
            kind = re.sub(r"\s+", "", bare.group(1))
            hint = f"; did you mean {kind}::{json.dumps(bare.group(2))}?" if bare.group(2) else ""
        raise ValueError(
            f'principal must look like User::"alice" (a type, ::, a quoted id), got {text!r}{hint}'
        )


_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_ENTITY_RE = re.compile(rf'({_NAME}(?:::{_NAME})*)::("(?:[^"\\]|\\.)*")')
_BARE_ENTITY_RE = re.compile(rf'\s*({_NAME}(?:\s*::\s*{_NAME})*?)\s*::\s*"?([^"]*?)"?\s*')


def _parents(parents: Any) -> tuple[tuple[str, str], ...]:
    pairs: list[tuple[str, str]] = []
    for parent in parents if isinstance(parents, list) else [None]:
        if (
            isinstance(parent, list)
            and len(parent) == 2
            and all(isinstance(p, str) for p in parent)
        ):
            pairs.append((parent[0], parent[1]))
        elif isinstance(parent, str):
            p = Principal.parse(parent)
            pairs.append((p.type, p.id))
        else:
            raise ValueError('\'principal.parents\' must be a list like [["Team", "infra"]]')
    return tuple(pairs)


@dataclass(frozen=True, slots=True)
class ToolInfo:
    """The tool being called, as evaluators see it."""

    qualified_name: str
    namespace: str
    name: str
    read_only: bool
    annotations: Mapping[str, Any] = field(default_factory=dict)
    source: str = "callback"
    """``"callback"`` for Python handlers, ``"mcp"`` for tools from an MCP server."""
    server: str | None = None
    """The MCP server's registration name, for MCP tools."""


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """The session a call belongs to, as evaluators see it."""

    id: str
    turn_id: str | None = None


class ArgumentValidator(Protocol):
    """A compiled JSON Schema of a tool's arguments (what ``Tool.validator`` holds)."""

    def is_valid(self, instance: Any) -> bool:
        """Whether ``instance`` matches the schema."""
        ...

    def iter_errors(self, instance: Any) -> Iterator[Any]:
        """Each way ``instance`` fails the schema; ``str()`` of one describes it."""
        ...


@runtime_checkable
class ToolLike(Protocol):
    """What policy code reads of one registered tool (all read-only).

    :class:`clearance.harness.tools.Tool` satisfies it once registered; policy code never
    imports the harness to name it.
    """

    @property
    def qualified_name(self) -> str:
        """``namespace.name``, what policies and records use."""
        ...

    @property
    def namespace(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def model_alias(self) -> str:
        """``namespace__name``, what the model sees."""
        ...

    @property
    def read_only(self) -> bool: ...

    @property
    def annotations(self) -> Mapping[str, Any]: ...

    @property
    def source(self) -> str:
        """``"callback"`` or ``"mcp"``."""
        ...

    @property
    def server(self) -> str | None: ...

    @property
    def input_schema(self) -> Mapping[str, Any]:
        """The JSON Schema 2020-12 of the arguments (an object schema)."""
        ...

    @property
    def validator(self) -> ArgumentValidator | None:
        """The compiled ``input_schema``; ``None`` before the tool is registered."""
        ...

    @property
    def declared_facts(self) -> Sequence[Any]:
        """The tool's declared facts, each a :class:`clearance.facts.DeclaredFact` (typed
        loosely here so that this module imports nothing from clearance)."""
        ...

    @property
    def info(self) -> ToolInfo:
        """The tool as an :class:`~clearance.policy.AuthzRequest` carries it."""
        ...


@runtime_checkable
class ToolCatalog(Protocol):
    """The registered tools, in registration order: a
    :class:`~clearance.harness.tools.ToolRegistry`, or any iterable of tools."""

    def __iter__(self) -> Iterator[ToolLike]: ...
