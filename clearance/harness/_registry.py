"""Tools and the registry that names them.

A tool has a qualified name ``namespace.name`` (what policies and records use) and a model
alias ``namespace__name`` (what the model sees, since many model APIs refuse dots).
Registration checks every option, compiles the input schema (``_tool_schema``) and the
declared facts, or raises :class:`~clearance.errors.ToolRegistrationError`; a function
registered with :meth:`ToolRegistry.tool` gets its schema from its signature
(``_signature``).
"""

from __future__ import annotations

import inspect
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from types import MappingProxyType
from typing import Any

from clearance import _pointer
from clearance.errors import ToolRegistrationError, UnknownToolError
from clearance.facts.base import FactError
from clearance.facts.declared import DeclaredFact, FactsError, declare_facts
from clearance.harness._context import Handler
from clearance.harness._deciding import NO_DECIDING, Deciding, deciding_of
from clearance.harness._signature import from_signature, is_async_handler
from clearance.harness._tool_schema import compile_schema
from clearance.types import ToolInfo

__all__ = ["RESERVED_NAMESPACES", "Tool", "ToolRegistry"]

RESERVED_NAMESPACES = frozenset({"clearance", "mcp"})
"""Namespaces no registered tool may use."""
_NAME = re.compile(r"^[a-z0-9_-]{1,64}$")


@dataclass(slots=True)
class Tool:
    """A tool the model may call.

    Qualified name and model alias are set when the tool is registered under a namespace.
    """

    name: str
    """The tool's name inside its namespace: ``[a-z0-9_-]``, at most 64 characters."""
    handler: Handler
    """``(arguments, ctx) -> result``, sync (runs in a worker thread) or async."""
    description: str = ""
    input_schema: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}, "additionalProperties": False}
    )
    """JSON Schema 2020-12 of the arguments; the root must be an object schema."""
    read_only: bool = False
    """Read-only calls of a session may run together; mutating ones run alone."""
    concurrency: int | None = None
    """At most this many calls of this tool run at once (harness-wide)."""
    timeout: float | None = None
    """Seconds a call may run before it ends with status ``timeout``."""
    sensitive: Sequence[str] = ()
    """JSON pointers of arguments withheld from the journal and asks."""
    annotations: Mapping[str, Any] = field(default_factory=dict)
    """Free-form hints (MCP-style ``title``, ``destructiveHint``...), visible to policies."""
    source: str = "callback"
    server: str | None = None
    root: str | os.PathLike[str] | None = None
    """The directory ``path`` and ``command`` facts are resolved against."""
    facts: Mapping[str, Any] = field(default_factory=dict)
    """How arguments are interpreted, by JSON pointer: ``{"/path": "path", "/to/*":
    "email"}`` (see :mod:`clearance.facts`). Each is canonicalized once per call, and every
    stage after schema validation, the handler included, sees the canonical value (R11)."""
    on_session_close: Callable[[str], None] | None = None
    """Called with a session's id when a session that may call this tool closes (and so
    when the harness closes), in a worker thread, after the session's calls have ended:
    for tools that keep something per session (``process.start``'s processes). Tools
    that share one callable have it called once per session."""
    namespace: str = field(default="", init=False)
    qualified_name: str = field(default="", init=False)
    model_alias: str = field(default="", init=False)
    validator: Any = field(default=None, init=False, repr=False)
    is_async: bool = field(default=False, init=False, repr=False)
    info: ToolInfo = field(init=False, repr=False)
    declared_facts: tuple[DeclaredFact, ...] = field(default=(), init=False, repr=False)
    """The checked form of ``facts`` (set at registration)."""
    deciding: Deciding = field(default=NO_DECIDING, init=False, repr=False)
    """Which arguments decide what a call does (:mod:`clearance.harness._deciding`; set
    at registration)."""


class ToolRegistry:
    """Every tool a harness knows, by qualified name and by model alias.

    Register with :meth:`register` or the :meth:`tool` decorator. The registry freezes when
    the first session is created; registering after that raises ``ToolRegistrationError``.
    """

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self._aliases: dict[str, Tool] = {}
        self._frozen = False
        self._by_name: dict[tuple[str, ...], Mapping[str, Tool]] = {}

    @property
    def frozen(self) -> bool:
        """Whether registering is over (a session was created)."""
        return self._frozen

    def freeze(self) -> None:
        """End registration: :meth:`register` raises from now on."""
        self._frozen = True

    def register(self, namespace: str, tools: Iterable[Tool]) -> list[Tool]:
        """Register ``tools`` under ``namespace``; all or nothing."""
        tools = list(tools)
        prepared = [self._prepare(namespace, tool) for tool in tools]
        seen: set[str] = set()
        for tool in prepared:
            for key in (tool.qualified_name, tool.model_alias):
                if key in self._tools or key in self._aliases or key in seen:
                    raise ToolRegistrationError(
                        tool.qualified_name,
                        f"the name {key!r} is already registered"
                        if key == tool.qualified_name
                        else f"its model alias {key!r} collides with another tool's",
                    )
                seen.add(key)
        for tool in prepared:
            self._tools[tool.qualified_name] = tool
            self._aliases[tool.model_alias] = tool
        return prepared

    def tool(
        self,
        qualified_name: str,
        *,
        description: str | None = None,
        read_only: bool = False,
        concurrency: int | None = None,
        timeout: float | None = None,
        sensitive: Sequence[str] = (),
        annotations: Mapping[str, Any] | None = None,
        **unknown: Any,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register a function as a tool; its input schema comes from its signature.

        Parameters become the arguments (typed through pydantic); a parameter annotated
        ``CallContext`` receives the call context instead::

            @registry.tool("app.show_status")
            async def show_status(text: str, ctx: CallContext) -> dict: ...
        """
        if unknown:
            raise ToolRegistrationError(
                qualified_name, f"unknown option(s): {', '.join(sorted(unknown))}"
            )
        namespace, dot, name = qualified_name.partition(".")
        if not dot:
            raise ToolRegistrationError(qualified_name, "name it 'namespace.name'")

        def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
            schema, handler = from_signature(qualified_name, fn)
            doc = inspect.getdoc(fn) or ""
            self.register(
                namespace,
                [
                    Tool(
                        name,
                        handler,
                        description=description if description is not None else doc,
                        input_schema=schema,
                        read_only=read_only,
                        concurrency=concurrency,
                        timeout=timeout,
                        sensitive=sensitive,
                        annotations=dict(annotations or {}),
                    )
                ],
            )
            return fn

        return decorate

    def get(self, name: str) -> Tool:
        """Look a tool up by qualified name or model alias."""
        tool = self._tools.get(name) or self._aliases.get(name)
        if tool is None:
            raise UnknownToolError(name)
        return tool

    def find(self, name: str) -> Tool | None:
        """Look a tool up by qualified name or model alias; None when there is none."""
        return self._tools.get(name) or self._aliases.get(name)

    def select(self, patterns: Iterable[str] | None) -> dict[str, Tool]:
        """The tools matching qualified-name globs (all when ``patterns`` is None).

        A pattern that matches nothing raises ``UnknownToolError``: an agent that names a
        tool that does not exist is a configuration mistake, not a narrower agent.
        """
        if patterns is None:
            return dict(self._tools)
        chosen: dict[str, Tool] = {}
        for pattern in patterns:
            hits = [t for q, t in self._tools.items() if fnmatchcase(q, pattern)]
            if not hits:
                raise UnknownToolError(pattern, f"no registered tool matches {pattern!r}")
            for t in hits:
                chosen[t.qualified_name] = t
        return chosen

    def by_name(self, selected: Mapping[str, Tool]) -> Mapping[str, Tool]:
        """``selected`` (a :meth:`select` answer) by qualified name and by model alias,
        read-only: what a session resolves a call's name in.

        Once the registry is frozen, the tools a selection names cannot change, so every
        session of the same selection shares one mapping: with a thousand tools, a copy
        per session would cost about 70 KB each.
        """
        key = tuple(selected)
        found = self._by_name.get(key) if self._frozen else None
        if found is None:
            names: dict[str, Tool] = {}
            for tool in selected.values():
                names[tool.qualified_name] = tool
                names[tool.model_alias] = tool
            found = MappingProxyType(names)
            if self._frozen:
                self._by_name[key] = found
        return found

    def __iter__(self) -> Iterator[Tool]:
        return iter(list(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self._tools or name in self._aliases)

    def _prepare(self, namespace: str, tool: Tool) -> Tool:
        if self._frozen:
            raise ToolRegistrationError(
                f"{namespace}.{getattr(tool, 'name', '?')}",
                "the registry is frozen (a session was created); register tools before that",
            )
        if not isinstance(tool, Tool):
            raise ToolRegistrationError(f"{namespace}.?", f"expected a Tool, got {tool!r}")
        qualified = f"{namespace}.{tool.name}"
        if not isinstance(namespace, str) or not _NAME.match(namespace):
            raise ToolRegistrationError(
                qualified, f"namespace {namespace!r} is not [a-z0-9_-]{{1,64}}"
            )
        if namespace in RESERVED_NAMESPACES:
            raise ToolRegistrationError(qualified, f"the namespace {namespace!r} is reserved")
        if not isinstance(tool.name, str) or not _NAME.match(tool.name):
            raise ToolRegistrationError(qualified, f"name {tool.name!r} is not [a-z0-9_-]{{1,64}}")
        if "__" in namespace or namespace.endswith("_") or tool.name.startswith("_"):
            # The alias namespace__name must split back into exactly one tool.
            raise ToolRegistrationError(
                qualified, "names may not make the model alias ambiguous ('__' at the join)"
            )
        if not callable(tool.handler):
            raise ToolRegistrationError(qualified, "handler is not callable")
        if not isinstance(tool.read_only, bool):
            raise ToolRegistrationError(qualified, "read_only must be True or False")
        if tool.concurrency is not None and (
            not isinstance(tool.concurrency, int)
            or isinstance(tool.concurrency, bool)
            or tool.concurrency < 1
        ):
            raise ToolRegistrationError(qualified, "concurrency must be a positive integer")
        if tool.timeout is not None and (
            not isinstance(tool.timeout, int | float)
            or isinstance(tool.timeout, bool)
            or tool.timeout <= 0
        ):
            raise ToolRegistrationError(qualified, "timeout must be a positive number of seconds")
        if not isinstance(tool.description, str):
            raise ToolRegistrationError(qualified, "description must be a string")
        if isinstance(tool.sensitive, str):
            raise ToolRegistrationError(qualified, "sensitive must be a list of JSON pointers")
        for pointer in tool.sensitive:
            try:
                _pointer.parse(pointer)
            except (ValueError, AttributeError):
                raise ToolRegistrationError(
                    qualified, f"sensitive entry {pointer!r} is not a JSON pointer"
                ) from None
        if not isinstance(tool.annotations, Mapping):
            raise ToolRegistrationError(qualified, "annotations must be a mapping")
        if tool.on_session_close is not None and not callable(tool.on_session_close):
            raise ToolRegistrationError(qualified, "on_session_close is not callable")
        schema = tool.input_schema
        if not isinstance(schema, Mapping):
            raise ToolRegistrationError(qualified, "input_schema must be a JSON object")
        schema = dict(schema)
        schema.setdefault("$schema", "https://json-schema.org/draft/2020-12/schema")
        try:
            json.dumps(schema)
        except (TypeError, ValueError) as exc:
            raise ToolRegistrationError(qualified, f"input_schema is not JSON: {exc}") from None
        except RecursionError:
            raise ToolRegistrationError(qualified, "input_schema is nested too deeply") from None
        validator = compile_schema(qualified, schema)
        if schema.get("type") != "object":
            raise ToolRegistrationError(
                qualified, 'the root of input_schema must be {"type": "object", ...}'
            )
        try:
            declared = declare_facts(tool.facts, root=tool.root, schema=schema)
        except (FactsError, FactError) as exc:
            raise ToolRegistrationError(qualified, f"facts: {exc}") from None
        tool = Tool(
            tool.name,
            tool.handler,
            description=tool.description,
            input_schema=schema,
            read_only=tool.read_only,
            concurrency=tool.concurrency,
            timeout=float(tool.timeout) if tool.timeout is not None else None,
            sensitive=tuple(tool.sensitive),
            annotations=dict(tool.annotations),
            source=tool.source,
            server=tool.server,
            root=tool.root,
            facts=dict(tool.facts),
            on_session_close=tool.on_session_close,
        )
        tool.declared_facts = declared
        tool.deciding = deciding_of(declared, schema)
        tool.namespace = namespace
        tool.qualified_name = qualified
        tool.model_alias = f"{namespace}__{tool.name}"
        tool.validator = validator
        tool.is_async = is_async_handler(tool.handler)
        tool.info = ToolInfo(
            qualified_name=qualified,
            namespace=namespace,
            name=tool.name,
            read_only=tool.read_only,
            annotations=tool.annotations,
            source=tool.source,
            server=tool.server,
        )
        return tool
