"""The Cedar types clearance produces: the schema generator writes them out, and
:func:`~clearance.policy.cedar.entities.to_cedar` converts call-time values by them.

Primitives (``String``, ``Long``, ``Boolean``, the ``decimal`` extension), sets, records of
attributes, entity-typed attributes (:class:`EntityType`: a *type*; an entity *value* is
:class:`clearance.policy.cedar.EntityRef`) and the other extension types.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BOOL",
    "DECIMAL",
    "IDENT",
    "LONG",
    "STRING",
    "Attribute",
    "CedarType",
    "EntityType",
    "ExtensionType",
    "Primitive",
    "RecordType",
    "SetType",
]

IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
"""A Cedar identifier (a type name, an unquoted attribute name, a namespace part)."""


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
    """``Set<element>``."""

    element: CedarType

    def to_json(self) -> dict[str, Any]:
        return {"type": "Set", "element": self.element.to_json()}


@dataclass(frozen=True, slots=True)
class Attribute:
    """One attribute of a record type."""

    type: CedarType
    required: bool


@dataclass(frozen=True, slots=True)
class RecordType(CedarType):
    """A record: attribute name → :class:`Attribute`."""

    attributes: Mapping[str, Attribute]

    def to_json(self) -> dict[str, Any]:
        attrs: dict[str, Any] = {}
        for name, attr in self.attributes.items():
            item = attr.type.to_json()
            if not attr.required:
                item["required"] = False
            attrs[name] = item
        return {"type": "Record", "attributes": attrs}


class EntityType(CedarType):
    """An entity-typed attribute (principal attributes may reference entities).

    Named for what it is, a type beside :class:`ExtensionType` and the schema's
    ``SetType`` / ``RecordType``; an entity *value* is
    :class:`clearance.policy.cedar.EntityRef`."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def to_json(self) -> dict[str, Any]:
        return {"type": "Entity", "name": self.name}


class ExtensionType(CedarType):
    """``ipaddr``, ``datetime`` or ``duration`` given as their string argument."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def to_json(self) -> dict[str, Any]:
        return {"type": "Extension", "name": self.name}
