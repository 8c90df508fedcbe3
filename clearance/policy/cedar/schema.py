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
  declared argument, typed from its kind's attributes: see :mod:`clearance.facts`), and
  ``provenance: <tool>Provenance``: one record of the common type ``Provenance`` per
  top-level argument of ``<tool>Input`` (where its value came from: see
  :mod:`clearance.provenance`), required when the argument is.

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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from clearance.policy.cedar._cedar_types import (
    BOOL,
    DECIMAL,
    IDENT,
    LONG,
    STRING,
    Attribute,
    CedarType,
    Primitive,
    RecordType,
    SetType,
)
from clearance.policy.cedar._json_schema import Translator
from clearance.policy.cedar._schema_text import schema_to_text
from clearance.provenance import ORIGIN_ATTRIBUTES
from clearance.types import ToolCatalog, ToolLike

__all__ = [
    "BOOL",
    "CALL_TOOL",
    "DECIMAL",
    "DEFAULT_ENTITY_TYPES",
    "LONG",
    "MUTATING",
    "NAMESPACE_TYPE",
    "ORIGIN_TYPE",
    "PROVENANCE_TYPE",
    "READ_ONLY",
    "RESERVED_TYPES",
    "SESSION_TYPE",
    "STRING",
    "TOOL_TYPE",
    "Attribute",
    "CedarType",
    "Primitive",
    "RecordType",
    "SchemaModel",
    "SetType",
    "ToolSchema",
    "build_schema",
    "fact_attribute_type",
    "facts_type",
    "generate_schema",
    "namespace_group",
    "provenance_type",
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
PROVENANCE_TYPE = "Provenance"
RESERVED_TYPES = frozenset(
    {TOOL_TYPE, NAMESPACE_TYPE, "Session", "ToolContext", "ToolAnnotations", PROVENANCE_TYPE}
)


def namespace_group(namespace: str) -> str:
    """The action group id of a tool namespace: ``ns:files``."""
    return f"ns:{namespace}"


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
    provenance: RecordType | None = None
    """The tool's ``context.provenance`` record: one ``Provenance`` per argument."""


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
    declared = tool.declared_facts
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


ORIGIN_TYPE = RecordType(
    {name: Attribute(fact_attribute_type(typ), True) for name, typ in ORIGIN_ATTRIBUTES.items()}
)
"""The record of one argument's provenance (the common type ``Provenance``)."""


def provenance_type(input_record: RecordType) -> RecordType:
    """The record ``context.provenance`` has for a tool whose ``context.input`` is
    ``input_record``: one ``Provenance`` per argument, required when the argument is."""
    return RecordType(
        {
            name: Attribute(ORIGIN_TYPE, attr.required)
            for name, attr in input_record.attributes.items()
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


def _with_common(record_json: dict[str, Any], name: str) -> dict[str, Any]:
    """A record's JSON whose attributes all name the common type ``name``."""
    for attr in record_json.get("attributes", {}).values():
        required = attr.get("required", True)
        attr.clear()
        attr["type"] = name
        if not required:
            attr["required"] = False
    return record_json


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
        if not isinstance(name, str) or not IDENT.match(name):
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
    if namespace and not all(IDENT.match(part) for part in namespace.split("::")):
        raise ValueError(f"namespace {namespace!r} is not a Cedar namespace")

    tools = sorted(registry, key=lambda t: t.qualified_name)
    annotations = _annotations_type(tools)
    common: dict[str, Any] = {
        PROVENANCE_TYPE: ORIGIN_TYPE.to_json(),
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
        translator = Translator(tool.input_schema)
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
        origins = provenance_type(record)
        origins_name = _type_name(tool.model_alias, used_names, suffix="Provenance")
        used_names.add(origins_name)
        common[origins_name] = _with_common(origins.to_json(), PROVENANCE_TYPE)
        context_attrs["provenance"] = {"type": origins_name}
        tool_schemas[tool.qualified_name] = ToolSchema(
            tool, record, tuple(translator.skipped), type_name, facts, origins
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
    if not IDENT.match(base):
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
