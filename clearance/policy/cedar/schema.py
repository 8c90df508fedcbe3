"""Generate the Cedar schema that every policy is validated against, from the tool registry.

The schema mirrors how :class:`~clearance.policy.cedar.CedarEvaluator` builds requests:

* one action per tool, named by its qualified name (``Action::"files.read_file"``), member
  of the groups ``Action::"ns:files"``, ``Action::"read_only"`` or ``Action::"mutating"``,
  and ``Action::"call_tool"``;
* the resource is the tool entity ``Tool::"files.read_file"`` (attributes ``namespace``,
  ``read_only``, ``source``, optional ``server``; parent ``Namespace::"files"``);
* principals are the declared principal types (``User`` and ``Agent`` by default);
* each action's context is ``{input: <tool>Input, session: Session, tool: ToolContext}``,
  where ``<tool>Input`` is the tool's JSON Schema translated to Cedar types, plus
  ``facts: <tool>Facts`` for a tool that declares canonical facts (one record per
  declared argument, typed from its kind's attributes: see :mod:`clearance.facts`).

JSON Schema to Cedar: ``string`` → ``String``, ``integer`` → ``Long``, ``number`` →
``decimal``, ``boolean`` → ``Bool``, ``array`` → ``Set`` of the item type, ``object`` →
record (``required`` properties required, the others optional); a nullable type
(``["string", "null"]`` or ``anyOf`` of one type and ``null``) becomes an optional
attribute; ``$ref`` is resolved inside the tool's schema. Constructs Cedar cannot type
(mixed unions, tuples, maps through ``additionalProperties`` or ``patternProperties``,
recursive references, property names starting with ``__``) are left out of the record, so
a policy that reads them fails validation when it is loaded instead of silently never
matching. :func:`untyped_arguments` lists what was left out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from clearance import _pointer
from clearance.types import ToolCatalog, ToolLike

__all__ = [
    "DEFAULT_ENTITY_TYPES",
    "generate_schema",
    "schema_to_text",
    "untyped_arguments",
]

DEFAULT_ENTITY_TYPES: Mapping[str, Mapping[str, Any]] = {"User": {}, "Agent": {}}
"""Principal types declared when none are configured: ``User`` and ``Agent``, no attributes."""

CALL_TOOL = "call_tool"
READ_ONLY = "read_only"
MUTATING = "mutating"
TOOL_TYPE = "Tool"
NAMESPACE_TYPE = "Namespace"
RESERVED_TYPES = frozenset({TOOL_TYPE, NAMESPACE_TYPE, "Session", "ToolContext", "ToolAnnotations"})
_RESERVED_WORDS = frozenset(
    "true false if then else in is like has principal action resource context permit forbid "
    "when unless namespace entity type appliesTo tags enum Set Long String Bool Record Entity "
    "Extension Boolean __cedar".split()
)
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MAX_DEPTH = 32


def namespace_group(namespace: str) -> str:
    """The action group id of a tool namespace: ``ns:files``."""
    return f"ns:{namespace}"


# --- the Cedar types clearance produces -----------------------------------------------------


class CedarType:
    """A Cedar type the generator produces; also converts call-time values to Cedar JSON."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class Primitive(CedarType):
    """``String``, ``Long``, ``Boolean`` (``Bool``) or the ``decimal`` extension."""

    name: str

    def to_json(self) -> dict[str, Any]:
        if self.name == "decimal":
            return {"type": "Extension", "name": "decimal"}
        return {"type": self.name}


STRING = Primitive("String")
LONG = Primitive("Long")
BOOL = Primitive("Boolean")
DECIMAL = Primitive("decimal")


@dataclass(frozen=True, slots=True)
class SetType(CedarType):
    element: CedarType

    def to_json(self) -> dict[str, Any]:
        return {"type": "Set", "element": self.element.to_json()}


@dataclass(frozen=True, slots=True)
class Attribute:
    type: CedarType
    required: bool


@dataclass(frozen=True, slots=True)
class RecordType(CedarType):
    attributes: Mapping[str, Attribute]

    def to_json(self) -> dict[str, Any]:
        attrs: dict[str, Any] = {}
        for name, attr in self.attributes.items():
            item = attr.type.to_json()
            if not attr.required:
                item["required"] = False
            attrs[name] = item
        return {"type": "Record", "attributes": attrs}


class _Untypeable(Exception):
    """A JSON Schema construct Cedar has no type for."""


@dataclass(slots=True)
class _Translator:
    """Translates one tool's input schema, collecting what it had to leave out."""

    root: Mapping[str, Any]
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def record(self, schema: Mapping[str, Any], pointer: str, refs: tuple[str, ...]) -> RecordType:
        attrs: dict[str, Attribute] = {}
        required = schema.get("required", [])
        required = set(required) if isinstance(required, list) else set()
        props = schema.get("properties", {})
        if not isinstance(props, Mapping):
            props = {}
        for name, sub in props.items():
            where = f"{pointer}/{_pointer.escape(name)}"
            if name.startswith("__"):
                # Cedar's JSON value format reserves __entity / __extn / __expr keys.
                self.skipped.append((where, "property names starting with '__' are reserved"))
                continue
            try:
                typ, nullable = self.translate(sub, where, refs, 1)
            except _Untypeable as exc:
                self.skipped.append((where, str(exc)))
                continue
            attrs[name] = Attribute(typ, name in required and not nullable)
        return RecordType(attrs)

    def translate(
        self, schema: Any, pointer: str, refs: tuple[str, ...], depth: int
    ) -> tuple[CedarType, bool]:
        """The Cedar type of ``schema`` and whether it admits ``null``."""
        if depth > _MAX_DEPTH:
            raise _Untypeable("nested too deeply")
        if not isinstance(schema, Mapping):
            raise _Untypeable("accepts any value" if schema is True else "accepts no value")
        schema, refs = self._resolve(schema, refs)

        for key in ("anyOf", "oneOf"):
            if key in schema:
                return self._union(schema[key], pointer, refs, depth, key)
        if "allOf" in schema:
            parts = schema["allOf"]
            if isinstance(parts, list) and len(parts) == 1:
                return self.translate(parts[0], pointer, refs, depth + 1)
            raise _Untypeable("allOf with several schemas")

        kind = schema.get("type")
        nullable = False
        if isinstance(kind, list):
            kinds = [k for k in kind if k != "null"]
            nullable = len(kinds) < len(kind)
            if len(kinds) != 1:
                raise _Untypeable(f"mixed types {kind}")
            kind = kinds[0]
        if kind is None:
            kind = _infer_kind(schema)
        if kind == "string":
            return STRING, nullable
        if kind == "integer":
            return LONG, nullable
        if kind == "number":
            return DECIMAL, nullable
        if kind == "boolean":
            return BOOL, nullable
        if kind == "array":
            if "prefixItems" in schema:
                raise _Untypeable("tuple arrays (prefixItems)")
            items = schema.get("items")
            if items is None:
                raise _Untypeable("arrays without an item schema")
            element, item_nullable = self.translate(items, f"{pointer}/items", refs, depth + 1)
            if item_nullable:
                raise _Untypeable("arrays that may hold null")
            return SetType(element), nullable
        if kind == "object":
            props = schema.get("properties")
            if not isinstance(props, Mapping) or not props:
                if schema.get("additionalProperties") is False:
                    return RecordType({}), nullable
                raise _Untypeable("objects without properties (maps)")
            return self.record(schema, pointer, refs), nullable
        if kind == "null":
            raise _Untypeable("values that are always null")
        raise _Untypeable("no type Cedar can represent")

    def _union(
        self, branches: Any, pointer: str, refs: tuple[str, ...], depth: int, key: str
    ) -> tuple[CedarType, bool]:
        if not isinstance(branches, list) or not branches:
            raise _Untypeable(f"empty {key}")
        nullable = False
        types: list[CedarType] = []
        for branch in branches:
            if isinstance(branch, Mapping) and branch.get("type") == "null":
                nullable = True
                continue
            typ, branch_nullable = self.translate(branch, pointer, refs, depth + 1)
            nullable = nullable or branch_nullable
            types.append(typ)
        if not types:
            raise _Untypeable("values that are always null")
        if any(t != types[0] for t in types[1:]):
            raise _Untypeable(f"{key} of different types")
        return types[0], nullable

    def _resolve(
        self, schema: Mapping[str, Any], refs: tuple[str, ...]
    ) -> tuple[Mapping[str, Any], tuple[str, ...]]:
        seen = refs
        while "$ref" in schema:
            ref = schema["$ref"]
            if not isinstance(ref, str) or not ref.startswith("#"):
                raise _Untypeable(f"external reference {ref!r}")
            if ref in seen:
                raise _Untypeable(f"recursive reference {ref!r}")
            seen = (*seen, ref)
            target: Any = self.root
            for token in _pointer_tokens(ref[1:]):
                if isinstance(target, Mapping) and token in target:
                    target = target[token]
                else:
                    raise _Untypeable(f"unresolved reference {ref!r}")
            if not isinstance(target, Mapping):
                raise _Untypeable(f"reference {ref!r} is not a schema")
            siblings = {k: v for k, v in schema.items() if k != "$ref"}
            schema = {**target, **siblings} if _has_type_keywords(siblings) else target
        return schema, seen


def _has_type_keywords(schema: Mapping[str, Any]) -> bool:
    return any(k in schema for k in ("type", "properties", "items", "anyOf", "oneOf", "allOf"))


def _infer_kind(schema: Mapping[str, Any]) -> str | None:
    if "properties" in schema:
        return "object"
    if "items" in schema:
        return "array"
    values = schema["enum"] if isinstance(schema.get("enum"), list) else None
    if values is None and "const" in schema:
        values = [schema["const"]]
    if values:
        kinds = {_value_kind(v) for v in values}
        if len(kinds) == 1:
            return kinds.pop()
    return None


def _value_kind(value: Any) -> str | None:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, str):
        return "string"
    if isinstance(value, int):
        return "integer"
    return None


def _pointer_tokens(pointer: str) -> list[str]:
    if pointer in ("", "/"):
        return [] if pointer == "" else [""]
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer.lstrip("/").split("/")]


# --- the whole schema -----------------------------------------------------------------------


SESSION_TYPE = RecordType({"id": Attribute(STRING, True), "turn": Attribute(STRING, False)})


@dataclass(frozen=True, slots=True)
class ToolSchema:
    """What the schema says about one tool (used by the evaluator to build requests)."""

    tool: ToolLike
    input: RecordType
    skipped: tuple[tuple[str, str], ...]
    input_type_name: str
    facts: RecordType | None = None
    """The tool's ``context.facts`` record (None when it declares no facts)."""


_FACT_TYPES: Mapping[str, CedarType] = {
    "String": STRING,
    "Long": LONG,
    "Bool": BOOL,
    "decimal": DECIMAL,
}


def fact_attribute_type(name: str) -> CedarType:
    """The Cedar type of a fact attribute type name (``"Set<String>"`` → a Set of String)."""
    if name.startswith("Set<") and name.endswith(">"):
        return SetType(fact_attribute_type(name[4:-1]))
    return _FACT_TYPES[name]


def facts_type(tool: ToolLike) -> RecordType | None:
    """The record ``context.facts`` has for ``tool``: one attribute per declared fact (a
    record of the kind's attributes), required when the argument is required."""
    declared = getattr(tool, "declared_facts", ())
    if not declared:
        return None
    required = tool.input_schema.get("required", [])
    required = set(required) if isinstance(required, list) else set()
    return RecordType(
        {
            fact.field: Attribute(
                RecordType(
                    {
                        name: Attribute(fact_attribute_type(typ), True)
                        for name, typ in fact.attributes.items()
                    }
                ),
                fact.field in required,
            )
            for fact in declared
        }
    )


@dataclass(frozen=True, slots=True)
class SchemaModel:
    """The generated schema and the typed pieces the evaluator needs."""

    json: dict[str, Any]
    namespace: str
    tools: Mapping[str, ToolSchema]
    principal_types: tuple[str, ...]
    entity_types: Mapping[str, Mapping[str, Any]]
    annotations: RecordType

    def qualify(self, name: str) -> str:
        """``name`` with the schema's namespace prefix (``Clearance::Tool``)."""
        return f"{self.namespace}::{name}" if self.namespace else name

    @property
    def action_type(self) -> str:
        return self.qualify("Action")


def build_schema(
    registry: Iterable[ToolLike],
    *,
    entity_types: Mapping[str, Mapping[str, Any]] | None = None,
    principal_types: Sequence[str] | None = None,
    namespace: str = "",
) -> SchemaModel:
    """Build the schema model; see :func:`generate_schema` for the arguments.

    Raises:
        ValueError: an entity type or principal type is malformed or clashes with the
            generated ``Tool`` / ``Namespace`` types.
    """
    declared = dict(DEFAULT_ENTITY_TYPES if entity_types is None else entity_types)
    for name, decl in declared.items():
        if not isinstance(name, str) or not _IDENT.match(name):
            raise ValueError(f"entity type name {name!r} is not a Cedar identifier")
        if name in RESERVED_TYPES:
            raise ValueError(f"the name {name!r} is used by the generated schema")
        if not isinstance(decl, Mapping):
            raise ValueError(f"entity type {name!r} must be a Cedar JSON entity declaration")
    if principal_types is None:
        # Group types (named in another type's memberOfTypes) are not principals by default.
        groups = {g for decl in declared.values() for g in decl.get("memberOfTypes") or ()}
        principals = tuple(name for name in declared if name not in groups)
    else:
        principals = tuple(principal_types)
    if not principals:
        raise ValueError("at least one principal type is needed")
    for name in principals:
        if name not in declared:
            raise ValueError(f"principal type {name!r} is not a declared entity type")
    if namespace and not all(_IDENT.match(part) for part in namespace.split("::")):
        raise ValueError(f"namespace {namespace!r} is not a Cedar namespace")

    tools = sorted(registry, key=lambda t: t.qualified_name)
    annotations = _annotations_type(tools)
    common: dict[str, Any] = {
        "Session": SESSION_TYPE.to_json(),
        "ToolAnnotations": annotations.to_json(),
        "ToolContext": {
            "type": "Record",
            "attributes": {
                "read_only": {"type": "Boolean"},
                "annotations": {"type": "ToolAnnotations"},
            },
        },
    }
    used_names = set(common) | set(declared) | RESERVED_TYPES
    actions: dict[str, Any] = {CALL_TOOL: {}, READ_ONLY: {}, MUTATING: {}}
    tool_schemas: dict[str, ToolSchema] = {}
    for tool in tools:
        translator = _Translator(tool.input_schema)
        record = translator.record(tool.input_schema, "", ())
        type_name = _type_name(tool.model_alias, used_names)
        used_names.add(type_name)
        common[type_name] = record.to_json()
        context_attrs: dict[str, Any] = {
            "input": {"type": type_name},
            "session": {"type": "Session"},
            "tool": {"type": "ToolContext"},
        }
        facts = facts_type(tool)
        if facts is not None:
            facts_name = _type_name(tool.model_alias, used_names, suffix="Facts")
            used_names.add(facts_name)
            common[facts_name] = facts.to_json()
            context_attrs["facts"] = {"type": facts_name}
        tool_schemas[tool.qualified_name] = ToolSchema(
            tool, record, tuple(translator.skipped), type_name, facts
        )
        group = namespace_group(tool.namespace)
        actions.setdefault(group, {})
        actions[tool.qualified_name] = {
            "memberOf": [
                {"id": CALL_TOOL},
                {"id": READ_ONLY if tool.read_only else MUTATING},
                {"id": group},
            ],
            "appliesTo": {
                "principalTypes": list(principals),
                "resourceTypes": [TOOL_TYPE],
                "context": {"type": "Record", "attributes": context_attrs},
            },
        }

    entity_json: dict[str, Any] = {
        NAMESPACE_TYPE: {},
        TOOL_TYPE: {
            "memberOfTypes": [NAMESPACE_TYPE],
            "shape": {
                "type": "Record",
                "attributes": {
                    "namespace": {"type": "String"},
                    "read_only": {"type": "Boolean"},
                    "source": {"type": "String"},
                    "server": {"type": "String", "required": False},
                },
            },
        },
    }
    for name, decl in declared.items():
        entity_json[name] = dict(decl)
    schema = {namespace: {"entityTypes": entity_json, "actions": actions, "commonTypes": common}}
    return SchemaModel(schema, namespace, tool_schemas, principals, declared, annotations)


def generate_schema(
    registry: ToolCatalog | Iterable[ToolLike],
    *,
    entity_types: Mapping[str, Mapping[str, Any]] | None = None,
    principal_types: Sequence[str] | None = None,
    namespace: str = "",
) -> dict[str, Any]:
    """The Cedar schema (JSON format) for the tools in ``registry``.

    Args:
        registry: the tools (a :class:`~clearance.harness.tools.ToolRegistry` or any
            iterable of registered tools).
        entity_types: principal and other entity types, as Cedar JSON schema entity
            declarations (``{"User": {"memberOfTypes": ["Team"], "shape": {...}},
            "Team": {}}``). Default: ``User`` and ``Agent`` without attributes.
        principal_types: which of ``entity_types`` may be a principal. Default: every
            declared type that no declared type lists in its ``memberOfTypes`` (so
            ``User in [Team]`` makes ``User`` a principal type and ``Team`` a group).
        namespace: a Cedar namespace for everything generated (``""``, the default, puts
            it in the empty namespace: ``Tool::"files.read_file"``).

    Returns:
        A Cedar JSON schema: ``{namespace: {"entityTypes", "actions", "commonTypes"}}``.

    Raises:
        ValueError: ``entity_types``, ``principal_types`` or ``namespace`` is malformed.
    """
    return build_schema(
        registry, entity_types=entity_types, principal_types=principal_types, namespace=namespace
    ).json


def untyped_arguments(
    registry: ToolCatalog | Iterable[ToolLike],
) -> dict[str, list[tuple[str, str]]]:
    """Tool arguments left out of the schema: qualified name → ``(JSON pointer, why)``."""
    model = build_schema(registry)
    return {name: list(ts.skipped) for name, ts in model.tools.items() if ts.skipped}


def _type_name(alias: str, used: set[str], *, suffix: str = "Input") -> str:
    base = "".join(c if c.isalnum() or c == "_" else "_" for c in alias) + suffix
    if not _IDENT.match(base):
        base = "T_" + base
    name, n = base, 2
    while name in used:
        name, n = f"{base}{n}", n + 1
    return name


def _annotations_type(tools: Sequence[ToolLike]) -> RecordType:
    """One record type for every tool's annotations: each key optional, typed by value."""
    found: dict[str, CedarType | None] = {}
    for tool in tools:
        for key, value in tool.annotations.items():
            if not isinstance(key, str) or key.startswith("__"):
                continue
            typ = _value_type(value)
            if key in found and found[key] != typ:
                found[key] = None  # two tools disagree: leave it out
            else:
                found.setdefault(key, typ)
    return RecordType({k: Attribute(t, False) for k, t in sorted(found.items()) if t is not None})


def _value_type(value: Any) -> CedarType | None:
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int):
        return LONG
    if isinstance(value, str):
        return STRING
    if isinstance(value, list | tuple) and value and all(isinstance(v, str) for v in value):
        return SetType(STRING)
    return None


# --- Cedar schema text ----------------------------------------------------------------------


def schema_to_text(schema: Mapping[str, Any]) -> str:
    """Render a Cedar JSON schema (as :func:`generate_schema` returns) in Cedar schema syntax.

    Handles the constructs the generator and Cedar JSON entity declarations use
    (entity shapes, ``memberOfTypes``, ``tags``, ``enum``, common types, actions with
    ``memberOf`` and ``appliesTo``); anything else raises ``ValueError``.
    """
    blocks: list[str] = []
    for ns, body in schema.items():
        lines = _render_namespace(body, indent="  " if ns else "")
        if ns:
            blocks.append(f"namespace {ns} {{\n" + "\n".join(lines) + "\n}\n")
        else:
            blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)


def _render_namespace(body: Mapping[str, Any], indent: str) -> list[str]:
    out: list[str] = []
    for name, typ in sorted(body.get("commonTypes", {}).items()):
        out.append(f"{indent}type {name} = {_render_type(typ, indent)};")
        out.append("")
    for name, decl in sorted(body.get("entityTypes", {}).items()):
        text = f"{indent}entity {name}"
        if decl.get("enum") is not None:
            values = ", ".join(_quote(v) for v in decl["enum"])
            out.extend((f"{text} enum [{values}];", ""))
            continue
        parents = decl.get("memberOfTypes") or []
        if parents:
            text += " in [" + ", ".join(parents) + "]"
        shape = decl.get("shape")
        if shape and (shape.get("type") != "Record" or shape.get("attributes")):
            text += " = " + _render_type(shape, indent)
        if decl.get("tags") is not None:
            text += " tags " + _render_type(decl["tags"], indent)
        out.extend((text + ";", ""))
    for name, decl in sorted(body.get("actions", {}).items()):
        text = f"{indent}action {_quote(name)}"
        member_of = decl.get("memberOf") or []
        if member_of:
            refs = []
            for ref in member_of:
                kind = ref.get("type")
                refs.append(f"{kind + '::' if kind else 'Action::'}{_quote(ref['id'])}")
            text += " in [" + ", ".join(refs) + "]"
        applies = decl.get("appliesTo")
        if applies:
            inner = indent + "  "
            parts = [
                f"{inner}principal: [" + ", ".join(applies.get("principalTypes", [])) + "]",
                f"{inner}resource: [" + ", ".join(applies.get("resourceTypes", [])) + "]",
            ]
            if applies.get("context") is not None:
                parts.append(f"{inner}context: " + _render_type(applies["context"], inner))
            text += " appliesTo {\n" + ",\n".join(parts) + f"\n{indent}}}"
        out.extend((text + ";", ""))
    while out and out[-1] == "":
        out.pop()
    return out


def _render_type(typ: Mapping[str, Any], indent: str) -> str:
    kind = typ.get("type")
    if kind == "Record":
        attrs = typ.get("attributes", {})
        if not attrs:
            return "{}"
        inner = indent + "  "
        lines = []
        for name, sub in attrs.items():
            mark = "?" if sub.get("required", True) is False else ""
            lines.append(f"{inner}{_attr_name(name)}{mark}: {_render_type(sub, inner)}")
        return "{\n" + ",\n".join(lines) + f"\n{indent}}}"
    if kind == "Set":
        return f"Set<{_render_type(typ['element'], indent)}>"
    if kind == "Boolean":
        return "Bool"
    if kind in ("String", "Long"):
        return str(kind)
    if kind in ("Extension", "Entity", "EntityOrCommon"):
        return str(typ["name"])
    if isinstance(kind, str) and kind:
        return kind  # a common type reference
    raise ValueError(f"cannot render Cedar type {dict(typ)!r}")


def _attr_name(name: str) -> str:
    return name if _IDENT.match(name) and name not in _RESERVED_WORDS else _quote(name)


def _quote(text: str) -> str:
    escaped = (
        text.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .replace("\t", "\\t")
        .replace("\0", "\\0")
    )
    return f'"{escaped}"'
