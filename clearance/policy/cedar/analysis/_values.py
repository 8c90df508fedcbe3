"""Symbolic Cedar values: what a request's parts are while the solver looks for one.

A value has the static type the schema gives it (the policies validate in strict mode, so
each expression has one type in each request environment):

* ``Bool``, ``Long``, ``String``: one z3 term (a ``Long`` variable is bounded to 64 bits);
* a set: a fixed number of *slots*, each an element and a "present" flag. A literal set has
  its elements, all present. A set the request carries gets ``bound`` slots: enough for any
  request the policies can tell apart (see :func:`set_bound`), so a bounded search misses
  nothing;
* a record: its attributes, each with a "present" flag (optional attributes may be absent).
  A record the request carries makes its variables when a policy reads an attribute, so
  what no policy reads costs nothing and is filled with a plain value in the example;
* an entity: its type (always known: one environment per principal type), its id (a z3
  string for the principal, a constant otherwise), its attributes and, for the principal,
  how ``in`` is decided (see ``_world``).

:func:`decode` turns a symbolic value and a z3 model into Cedar JSON, the request cedarpy
then decides.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import z3

from clearance.policy.cedar._cedar_types import (
    BOOL,
    LONG,
    STRING,
    CedarType,
    RecordType,
    SetType,
)

__all__ = [
    "LONG_MAX",
    "LONG_MIN",
    "EntityVal",
    "TRUE",
    "Outside",
    "RecordVal",
    "Scalar",
    "SetVal",
    "Value",
    "constant",
    "decode",
    "fresh",
    "plain",
    "pin",
    "present_and",
    "string_of",
]

TRUE = z3.BoolVal(True)
"""The one "always present" flag: :func:`present_and` skips it."""
LONG_MIN = -(2**63)
LONG_MAX = 2**63 - 1


class Outside(Exception):
    """A construct outside the Cedar subset the analysis encodes (the message says which)."""


@dataclass(frozen=True, slots=True)
class Scalar:
    """A ``Bool``, ``Long`` or ``String`` value: one z3 term."""

    kind: str
    term: Any


@dataclass(frozen=True, slots=True)
class SetVal:
    """A set: (present, element) slots; the element kind is ``element``."""

    element: str
    slots: tuple[tuple[Any, Value], ...]


@dataclass(slots=True)
class RecordVal:
    """A record: attribute → (present, value); symbolic ones make their variables lazily."""

    fields: dict[str, tuple[Any, Value]] = field(default_factory=dict)
    shape: RecordType | None = None
    """The schema type of a symbolic record (None: a literal, every attribute given)."""
    name: str = ""
    bound: int = 0
    facts: list[Any] = field(default_factory=list)
    """Constraints on the variables made so far (Long bounds), shared with the query."""

    def get(self, attr: str) -> tuple[Any, Value] | None:
        """The attribute's (present, value), or None when the record cannot have it."""
        found = self.fields.get(attr)
        if found is not None or self.shape is None:
            return found
        declared = self.shape.attributes.get(attr)
        if declared is None:
            return None
        present = TRUE if declared.required else z3.Bool(f"{self.name}.{attr}?")
        value = fresh(declared.type, f"{self.name}.{attr}", self.bound, self.facts)
        self.fields[attr] = (present, value)
        return present, value


@dataclass(slots=True)
class EntityVal:
    """An entity: its type, its id (a z3 string or a constant), attributes, ancestors."""

    type: str
    id: Any
    attrs: RecordVal | None = None
    ancestors: frozenset[tuple[str, str]] = frozenset()
    """For a constant entity: every ancestor (type, id), transitively."""
    member_of: Callable[[str, str], Any] | None = None
    """For the principal: ``in`` an entity, as a z3 Bool (None: a constant entity)."""

    @property
    def constant(self) -> bool:
        return isinstance(self.id, str)


Value: TypeAlias = Scalar | SetVal | RecordVal | EntityVal


def present_and(present: Any, term: Any) -> Any:
    """``present && term``, without the conjunction when ``present`` is :data:`TRUE`
    (literal sets and required attributes: building z3 terms is most of the cost)."""
    return term if present is TRUE else z3.And(present, term)


def fresh(typ: CedarType, name: str, bound: int, facts: list[Any]) -> Value:
    """A symbolic value of ``typ`` named ``name`` (``facts`` collects its bounds).

    Raises:
        Outside: the type is not one the analysis encodes (extension types, entities in
            the context, sets of records or of sets).
    """
    if typ is BOOL or typ == BOOL:
        return Scalar("Bool", z3.Bool(name))
    if typ == LONG:
        term = z3.Int(name)
        facts.append(z3.And(term >= LONG_MIN, term <= LONG_MAX))
        return Scalar("Long", term)
    if typ == STRING:
        return Scalar("String", z3.String(name))
    if isinstance(typ, SetType):
        element = _element_kind(typ.element, name)
        slots = tuple(
            (z3.Bool(f"{name}[{i}]?"), fresh(typ.element, f"{name}[{i}]", bound, facts))
            for i in range(bound)
        )
        return SetVal(element, slots)
    if isinstance(typ, RecordType):
        return RecordVal(shape=typ, name=name, bound=bound, facts=facts)
    raise Outside(f"{name} has the type {typ.to_json()}, which the analysis does not encode")


def _element_kind(typ: CedarType, name: str) -> str:
    for kind, known in (("Bool", BOOL), ("Long", LONG), ("String", STRING)):
        if typ == known:
            return kind
    raise Outside(f"{name} is a set of {typ.to_json()}; only sets of strings, longs or booleans")


def constant(value: Any, typ: CedarType | None = None) -> Value:
    """A Cedar JSON value as a constant (records and sets of scalars)."""
    if isinstance(value, bool):
        return Scalar("Bool", z3.BoolVal(value))
    if isinstance(value, int):
        return Scalar("Long", z3.IntVal(value))
    if isinstance(value, str):
        return Scalar("String", z3.StringVal(value))
    if isinstance(value, Mapping) and ("__entity" in value or "__extn" in value):
        raise Outside("an entity or extension value in an attribute")
    if isinstance(value, Mapping):
        shape = typ if isinstance(typ, RecordType) else None
        return RecordVal(
            {
                k: (
                    TRUE,
                    constant(
                        v, shape.attributes[k].type if shape and k in shape.attributes else None
                    ),
                )
                for k, v in value.items()
            }
        )
    if isinstance(value, list):
        items = tuple((TRUE, constant(v)) for v in value)
        return SetVal(_kind_of_elements(items), items)
    raise Outside(f"the value {value!r} is not one the analysis encodes")


def _kind_of_elements(items: tuple[tuple[Any, Value], ...]) -> str:
    kinds = {v.kind if isinstance(v, Scalar) else type(v).__name__ for _, v in items}
    return kinds.pop() if len(kinds) == 1 else ("String" if not kinds else "mixed")


def string_of(model: z3.ModelRef, term: Any) -> str:
    """The string ``term`` has in ``model``, character by character (z3's printed form
    escapes characters, which would not round-trip)."""
    length = model.eval(z3.Length(term), model_completion=True).as_long()
    chars = [
        model.eval(z3.StrToCode(z3.SubString(term, i, 1)), model_completion=True).as_long()
        for i in range(length)
    ]
    return "".join(map(chr, chars))


def decode(
    model: z3.ModelRef, value: Value, typ: CedarType | None = None, *, fill: bool = True
) -> Any:
    """``value`` in ``model`` as Cedar JSON; attributes of ``typ`` no policy read get a
    plain value (required ones) or are left out (optional ones); ``fill=False`` leaves
    out every attribute no policy read."""
    if isinstance(value, Scalar):
        term = model.eval(value.term, model_completion=True)
        if value.kind == "Bool":
            return z3.is_true(term)
        if value.kind == "Long":
            return term.as_long()
        return string_of(model, term)
    if isinstance(value, SetVal):
        out: list[Any] = []
        for present, item in value.slots:
            if z3.is_true(model.eval(present, model_completion=True)):
                element = decode(model, item)
                if element not in out:
                    out.append(element)
        return out
    if isinstance(value, RecordVal):
        shape = value.shape if value.shape is not None else typ
        record: dict[str, Any] = {}
        for name, (present, item) in value.fields.items():
            if z3.is_true(model.eval(present, model_completion=True)):
                sub = shape.attributes[name].type if isinstance(shape, RecordType) else None
                record[name] = decode(model, item, sub, fill=fill)
        if fill and isinstance(shape, RecordType):
            for name, attr in shape.attributes.items():
                if name not in record and name not in value.fields and attr.required:
                    record[name] = plain(attr.type)
        return record
    return {"__entity": {"type": value.type, "id": _entity_id(model, value)}}


def _entity_id(model: z3.ModelRef, value: EntityVal) -> str:
    return value.id if isinstance(value.id, str) else string_of(model, value.id)


def plain(typ: CedarType) -> Any:
    """A plain value of ``typ`` for a part of the request no policy reads."""
    if typ == BOOL:
        return False
    if typ == LONG:
        return 0
    if typ == STRING:
        return ""
    if isinstance(typ, SetType):
        return []
    if isinstance(typ, RecordType):
        return {n: plain(a.type) for n, a in typ.attributes.items() if a.required}
    raise Outside(f"no plain value for the type {typ.to_json()}")


def pin(value: Value, given: Any) -> list[Any]:
    """Constraints making ``value`` equal the Cedar JSON ``given`` (its variables so far;
    the parts no variable stands for need none).

    Raises:
        ValueError: ``given`` holds more distinct elements than a set has slots.
    """
    if isinstance(value, Scalar):
        return [value.term == constant(given).term]  # type: ignore[union-attr]
    if isinstance(value, SetVal):
        if all(p is TRUE for p, _ in value.slots):
            return []  # a literal
        items = list(dict.fromkeys(json.dumps(i, sort_keys=True) for i in given))
        if len(items) > len(value.slots):
            raise ValueError(f"{len(items)} elements for a set of {len(value.slots)} slots")
        out: list[Any] = []
        for n, (present, item) in enumerate(value.slots):
            out.append(present == z3.BoolVal(n < len(items)))
            if n < len(items):
                out.extend(pin(item, json.loads(items[n])))
        return out
    if isinstance(value, RecordVal):
        out = []
        for name, (present, item) in value.fields.items():
            out.append(present == z3.BoolVal(name in given))
            if name in given:
                out.extend(pin(item, given[name]))
        return out
    return []
