"""A tool's JSON Schema (2020-12) as Cedar types, leaving out what Cedar cannot type.

``string`` → ``String``, ``integer`` → ``Long``, ``number`` → ``decimal``, ``boolean`` →
``Bool``, ``array`` → ``Set`` of the item type, ``object`` → record (``required`` properties
required, the others optional); a nullable type (``["string", "null"]`` or ``anyOf`` of one
type and ``null``) becomes an optional attribute; ``$ref`` is resolved inside the tool's
schema. Constructs Cedar cannot type (mixed unions, tuples, maps, recursive references,
property names starting with ``__``) are left out of the record and listed in
:attr:`Translator.skipped`, so that a policy reading them fails validation at load.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from clearance import _pointer
from clearance.policy.cedar._cedar_types import (
    BOOL,
    DECIMAL,
    LONG,
    STRING,
    Attribute,
    CedarType,
    RecordType,
    SetType,
)

__all__ = ["MAX_DEPTH", "Translator", "Untypeable"]

MAX_DEPTH = 32
"""How deep a schema is followed before the construct counts as untypeable."""


class Untypeable(Exception):
    """A JSON Schema construct Cedar has no type for."""


@dataclass(slots=True)
class Translator:
    """Translates one tool's input schema, collecting what it had to leave out."""

    root: Mapping[str, Any]
    """The tool's whole input schema (``$ref`` targets are looked up in it)."""
    skipped: list[tuple[str, str]] = field(default_factory=list)
    """``(JSON pointer, why)`` of each argument left out."""

    def record(self, schema: Mapping[str, Any], pointer: str, refs: tuple[str, ...]) -> RecordType:
        """The record type of an object schema's properties (the untypeable ones skipped)."""
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
            except Untypeable as exc:
                self.skipped.append((where, str(exc)))
                continue
            attrs[name] = Attribute(typ, name in required and not nullable)
        return RecordType(attrs)

    def translate(
        self, schema: Any, pointer: str, refs: tuple[str, ...], depth: int
    ) -> tuple[CedarType, bool]:
        """The Cedar type of ``schema`` and whether it admits ``null``."""
        if depth > MAX_DEPTH:
            raise Untypeable("nested too deeply")
        if not isinstance(schema, Mapping):
            raise Untypeable("accepts any value" if schema is True else "accepts no value")
        schema, refs = self._resolve(schema, refs)

        for key in ("anyOf", "oneOf"):
            if key in schema:
                return self._union(schema[key], pointer, refs, depth, key)
        if "allOf" in schema:
            parts = schema["allOf"]
            if isinstance(parts, list) and len(parts) == 1:
                return self.translate(parts[0], pointer, refs, depth + 1)
            raise Untypeable("allOf with several schemas")

        kind = schema.get("type")
        nullable = False
        if isinstance(kind, list):
            kinds = [k for k in kind if k != "null"]
            nullable = len(kinds) < len(kind)
            if len(kinds) != 1:
                raise Untypeable(f"mixed types {kind}")
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
                raise Untypeable("tuple arrays (prefixItems)")
            items = schema.get("items")
            if items is None:
                raise Untypeable("arrays without an item schema")
            element, item_nullable = self.translate(items, f"{pointer}/items", refs, depth + 1)
            if item_nullable:
                raise Untypeable("arrays that may hold null")
            return SetType(element), nullable
        if kind == "object":
            props = schema.get("properties")
            if not isinstance(props, Mapping) or not props:
                if schema.get("additionalProperties") is False:
                    return RecordType({}), nullable
                raise Untypeable("objects without properties (maps)")
            return self.record(schema, pointer, refs), nullable
        if kind == "null":
            raise Untypeable("values that are always null")
        raise Untypeable("no type Cedar can represent")

    def _union(
        self, branches: Any, pointer: str, refs: tuple[str, ...], depth: int, key: str
    ) -> tuple[CedarType, bool]:
        if not isinstance(branches, list) or not branches:
            raise Untypeable(f"empty {key}")
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
            raise Untypeable("values that are always null")
        if any(t != types[0] for t in types[1:]):
            raise Untypeable(f"{key} of different types")
        return types[0], nullable

    def _resolve(
        self, schema: Mapping[str, Any], refs: tuple[str, ...]
    ) -> tuple[Mapping[str, Any], tuple[str, ...]]:
        seen = refs
        while "$ref" in schema:
            ref = schema["$ref"]
            if not isinstance(ref, str) or not ref.startswith("#"):
                raise Untypeable(f"external reference {ref!r}")
            if ref in seen:
                raise Untypeable(f"recursive reference {ref!r}")
            seen = (*seen, ref)
            target: Any = self.root
            for token in _pointer_tokens(ref[1:]):
                if isinstance(target, Mapping) and token in target:
                    target = target[token]
                else:
                    raise Untypeable(f"unresolved reference {ref!r}")
            if not isinstance(target, Mapping):
                raise Untypeable(f"reference {ref!r} is not a schema")
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
