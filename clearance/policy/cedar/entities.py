"""Cedar values and entities: call-time arguments, the principal, tools and extra entities.

Everything here produces plain Cedar JSON (dicts and lists); the engine parses it. Values are
converted against the types the schema declares, and a value that does not fit (a float
where a ``Long`` is declared, a number with more than four decimal places for ``decimal``,
a string with a lone surrogate) raises :class:`ValueMismatch` so the evaluator can deny the
call with a clear message instead of letting Cedar fail or round.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from clearance.errors import ConfigError
from clearance.policy.cedar._cedar_types import EntityType, ExtensionType
from clearance.policy.cedar.schema import (
    BOOL,
    DECIMAL,
    LONG,
    NAMESPACE_TYPE,
    STRING,
    TOOL_TYPE,
    Attribute,
    CedarType,
    RecordType,
    SetType,
)
from clearance.types import Principal, ToolLike

__all__ = [
    "DECIMAL_MAX",
    "DECIMAL_MIN",
    "LONG_MAX",
    "LONG_MIN",
    "EntitiesSource",
    "EntityType",
    "ExtensionType",
    "Need",
    "ValueMismatch",
    "decimal_text",
    "load_entities",
    "principal_entity",
    "to_cedar",
    "tool_entities",
    "type_from_json",
    "uid_key",
]

EntitiesSource = (
    Sequence[Mapping[str, Any]] | str | Path | Callable[[], Sequence[Mapping[str, Any]]]
)
"""Extra entities: Cedar JSON entity dicts, a path to an entities JSON file, or a callable
returning entity dicts (called on every load and reload)."""

LONG_MIN = -(2**63)
LONG_MAX = 2**63 - 1
DECIMAL_MIN = Decimal("-922337203685477.5808")
DECIMAL_MAX = Decimal("922337203685477.5807")

Need = Mapping[str, "Need"] | None
"""Which parts of a value to send: ``None`` is all of it, a mapping names the record
attributes needed (each with its own need); an empty mapping sends an empty record."""


class ValueMismatch(Exception):
    """A value does not fit the Cedar type the schema declares for it.

    Attributes:
        path: where the value is (``input.limit``, ``principal.level``).
        reason: what is wrong with it.
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def to_cedar(typ: CedarType, value: Any, path: str, need: Need = None) -> Any:
    """Convert a JSON value to Cedar JSON for ``typ``; only the parts in ``need``.

    Raises:
        ValueMismatch: the value does not fit ``typ``.
    """
    if type(typ) is RecordType or isinstance(typ, RecordType):
        # type() first: isinstance against the Mapping ABC costs more than the rest here.
        if type(value) is not dict and not isinstance(value, Mapping):
            raise ValueMismatch(path, f"expected an object, got {_kind(value)}")
        out: dict[str, Any] = {}
        names: Iterable[str] = typ.attributes if need is None else need
        for name in names:
            attr = typ.attributes.get(name)
            if attr is None:
                continue
            sub = value.get(name)
            if sub is None:
                if attr.required:
                    raise ValueMismatch(f"{path}.{name}", "required value is missing")
                continue
            out[name] = to_cedar(
                attr.type, sub, f"{path}.{name}", None if need is None else need[name]
            )
        return out
    if typ is STRING:
        if type(value) is not str and not isinstance(value, str):
            raise ValueMismatch(path, f"expected a string, got {_kind(value)}")
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueMismatch(path, "the string holds a lone surrogate") from None
        return value
    if typ is LONG:
        return _long(value, path)
    if typ is BOOL:
        if not isinstance(value, bool):
            raise ValueMismatch(path, f"expected a boolean, got {_kind(value)}")
        return value
    if typ is DECIMAL:
        return {"__extn": {"fn": "decimal", "arg": decimal_text(value, path)}}
    if isinstance(typ, SetType):
        if not isinstance(value, list | tuple):
            raise ValueMismatch(path, f"expected an array, got {_kind(value)}")
        return [to_cedar(typ.element, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(typ, EntityType):
        return {"__entity": _uid(value, path, typ.name)}
    if isinstance(typ, ExtensionType):
        if not isinstance(value, str):
            raise ValueMismatch(path, f"expected {typ.name} text, got {_kind(value)}")
        # Cedar's JSON names the ipaddr constructor `ip`.
        return {"__extn": {"fn": "ip" if typ.name == "ipaddr" else typ.name, "arg": value}}
    raise ValueMismatch(path, f"no conversion to {typ!r}")  # pragma: no cover


def _long(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueMismatch(path, f"expected an integer, got {_kind(value)}")
    if isinstance(value, float) and not value.is_integer():
        raise ValueMismatch(path, f"expected an integer, got {value!r}")
    number = int(value)
    if not LONG_MIN <= number <= LONG_MAX:
        raise ValueMismatch(path, f"{number} is outside Cedar's Long range (64-bit)")
    return number


def decimal_text(value: Any, path: str) -> str:
    """``value`` as the argument of Cedar's ``decimal()``: four decimal places, exact.

    Raises:
        ValueMismatch: not a number, not finite, more than four decimal places, or outside
            Cedar's decimal range (about ±9.2e14).
    """
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise ValueMismatch(path, f"expected a number, got {_kind(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueMismatch(path, f"{value!r} is not a finite number")
    try:
        # repr() is the shortest text that round-trips, i.e. the number the caller sent.
        exact = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    except InvalidOperation:  # pragma: no cover - guarded above
        raise ValueMismatch(path, f"{value!r} is not a number") from None
    if not exact.is_finite():
        raise ValueMismatch(path, f"{value!r} is not a finite number")
    if not DECIMAL_MIN <= exact <= DECIMAL_MAX:
        raise ValueMismatch(
            path, f"{value!r} is outside Cedar's decimal range (±922337203685477.5807)"
        )
    if exact != exact.quantize(Decimal("0.0001")):
        raise ValueMismatch(
            path, f"{value!r} has more than 4 decimal places (Cedar decimal is exact to 4)"
        )
    text = f"{exact:.4f}"
    return "0.0000" if text == "-0.0000" else text


def _uid(value: Any, path: str, expected: str | None = None) -> dict[str, str]:
    if (
        isinstance(value, Mapping)
        and isinstance(value.get("type"), str)
        and isinstance(value.get("id"), str)
    ):
        uid = {"type": value["type"], "id": value["id"]}
    elif (
        isinstance(value, tuple | list)
        and len(value) == 2
        and all(isinstance(v, str) for v in value)
    ):
        uid = {"type": value[0], "id": value[1]}
    elif isinstance(value, str) and "::" in value:
        kind, _, ident = value.rpartition("::")
        uid = {"type": kind, "id": ident.strip('"')}
    else:
        raise ValueMismatch(path, f'expected an entity like Type::"id", got {_kind(value)}')
    if expected is not None and uid["type"] != expected:
        raise ValueMismatch(path, f"expected a {expected} entity, got {uid['type']}")
    return uid


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "an array"
    return type(value).__name__


# --- Cedar JSON schema types back to CedarType (for declared principal attributes) ----------


def type_from_json(
    typ: Mapping[str, Any], common: Mapping[str, Any], namespace: str = ""
) -> CedarType:
    """The :class:`CedarType` of a Cedar JSON schema type (for principal attributes).

    Raises:
        ValueError: the type is not one clearance can fill from Python values.
    """
    kind = typ.get("type")
    name = typ.get("name")
    if kind in ("EntityOrCommon", "Entity", "Extension") or kind not in (
        "String",
        "Long",
        "Boolean",
        "Set",
        "Record",
    ):
        ref = name if kind in ("EntityOrCommon", "Entity", "Extension") else kind
        if not isinstance(ref, str):
            raise ValueError(f"malformed Cedar type {dict(typ)!r}")
        if kind != "Entity" and ref in common:
            return type_from_json(common[ref], common, namespace)
        if kind == "Extension" or ref in ("decimal", "ipaddr", "datetime", "duration"):
            return DECIMAL if ref == "decimal" else ExtensionType(ref)
        if kind in ("String", "Long", "Boolean") or ref in ("String", "Long", "Bool", "Boolean"):
            return {"String": STRING, "Long": LONG}.get(ref, BOOL)
        qualified = ref if "::" in ref or not namespace else f"{namespace}::{ref}"
        return EntityType(qualified)
    if kind == "String":
        return STRING
    if kind == "Long":
        return LONG
    if kind == "Boolean":
        return BOOL
    if kind == "Set":
        return SetType(type_from_json(typ["element"], common, namespace))
    attrs = {
        k: Attribute(type_from_json(v, common, namespace), v.get("required", True) is not False)
        for k, v in typ.get("attributes", {}).items()
    }
    return RecordType(attrs)


# --- entities -------------------------------------------------------------------------------


def tool_entities(tools: Iterable[ToolLike], namespace: str = "") -> list[dict[str, Any]]:
    """The ``Tool`` entity of every tool and one ``Namespace`` entity per tool namespace."""
    tool_type = f"{namespace}::{TOOL_TYPE}" if namespace else TOOL_TYPE
    ns_type = f"{namespace}::{NAMESPACE_TYPE}" if namespace else NAMESPACE_TYPE
    out: list[dict[str, Any]] = []
    namespaces: set[str] = set()
    for tool in tools:
        attrs: dict[str, Any] = {
            "namespace": tool.namespace,
            "read_only": tool.read_only,
            "source": tool.source,
        }
        if tool.server is not None:
            attrs["server"] = tool.server
        out.append(
            {
                "uid": {"type": tool_type, "id": tool.qualified_name},
                "attrs": attrs,
                "parents": [{"type": ns_type, "id": tool.namespace}],
            }
        )
        namespaces.add(tool.namespace)
    out.extend(
        {"uid": {"type": ns_type, "id": ns}, "attrs": {}, "parents": []}
        for ns in sorted(namespaces)
    )
    return out


def principal_entity(
    principal: Principal,
    shape: CedarType | None,
    *,
    namespace: str = "",
    known: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The principal as a Cedar entity: declared attributes converted, the rest dropped.

    ``known`` is the same entity from the extra entities, if there is one: its attributes
    and parents are kept, the principal's own override and add to them.

    Raises:
        ValueMismatch: a declared attribute does not fit its type, or a required one is
            missing.
    """
    kind = (
        principal.type
        if "::" in principal.type or not namespace
        else f"{namespace}::{principal.type}"
    )
    attrs: dict[str, Any] = dict(known.get("attrs", {})) if known else {}
    parents: list[dict[str, str]] = list(known.get("parents", [])) if known else []
    given = dict(principal.attrs)
    if isinstance(shape, RecordType):
        for name, attr in shape.attributes.items():
            if name in given and given[name] is not None:
                attrs[name] = to_cedar(attr.type, given[name], f"principal.{name}")
            elif name not in attrs and attr.required:
                raise ValueMismatch(f"principal.{name}", "required attribute is missing")
    for ptype, pid in principal.parents:
        uid = {
            "type": ptype if "::" in ptype or not namespace else f"{namespace}::{ptype}",
            "id": pid,
        }
        if uid not in parents:
            parents.append(uid)
    return {"uid": {"type": kind, "id": principal.id}, "attrs": attrs, "parents": parents}


def load_entities(source: EntitiesSource | None) -> list[dict[str, Any]]:
    """Read extra entities from a list, a JSON file or a callable.

    Raises:
        ConfigError: the file cannot be read or is not a JSON list of entity objects.
    """
    if source is None:
        return []
    path: str | None = None
    if isinstance(source, str | Path):
        path = str(source)
        try:
            data: Any = json.loads(Path(source).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read entities: {exc.strerror}", path=path) from None
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"entities are not JSON: {exc.msg}", path=path, line=exc.lineno
            ) from None
    elif callable(source):
        data = source()
    else:
        data = source
    if not isinstance(data, list | tuple) or not all(
        isinstance(e, Mapping) and isinstance(e.get("uid"), Mapping) for e in data
    ):
        raise ConfigError(
            'entities must be a JSON list of {"uid": {"type", "id"}, "attrs", "parents"}', path=path
        )
    return [dict(e) for e in data]


def uid_key(uid: Mapping[str, Any]) -> tuple[str, str]:
    """A hashable key for an entity uid dict."""
    return (str(uid.get("type")), str(uid.get("id")))
