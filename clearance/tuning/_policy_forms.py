"""How a :class:`~clearance.tuning._patterns.Pattern` is written in each policy language,
and whether it can be.

Cedar types ``context.input`` from the tool's JSON Schema, so a pattern fits only an
argument of the matching Cedar type (:func:`cedar_kind`). Local rules are globs with no
escape character: a literal special character is written as a one-character class, and a
pattern no glob can say (a range, a set of values, an absent argument) cannot be written.

Modules of :mod:`clearance.policy.cedar` are imported where they are used, so that cedarpy
loads only when Cedar is (as :mod:`clearance.policy` does).
"""

from __future__ import annotations

import json
from typing import Any

from clearance.harness.tools import Tool
from clearance.tuning._patterns import ArgumentConstraint
from clearance.tuning._policy_text import cedar_string

__all__ = ["cedar_kind", "cedar_value", "expressible", "local_globs", "local_quote"]


def cedar_value(value: Any, kind: str) -> str:
    """``value`` as a Cedar literal of ``kind`` (as :func:`cedar_kind` names it)."""
    if kind == "decimal":
        from clearance.policy.cedar.entities import decimal_text

        return f'decimal("{decimal_text(value, "value")}")'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(int(value))
    return cedar_string(str(value))


_RECORDS: dict[int, tuple[Any, Any]] = {}
"""The Cedar input record of each tool seen (schema generation is not free)."""


def cedar_kind(tool: Tool | None, name: str) -> tuple[str, bool]:
    """The Cedar type of ``context.input.<name>`` ("string", "long", "decimal", "bool",
    "set:<element>", "other" or "untyped") and whether it is required."""
    if tool is None:
        return "untyped", False
    from clearance.policy.cedar.schema import (
        BOOL,
        DECIMAL,
        LONG,
        STRING,
        SetType,
        build_schema,
    )

    cached = _RECORDS.get(id(tool))
    if cached is None or cached[0] is not tool:
        try:
            record: Any = build_schema([tool]).tools[tool.qualified_name].input
        except (ValueError, KeyError):
            record = None
        if len(_RECORDS) >= 1024:
            _RECORDS.clear()
        # The tool is kept in the entry so that its id cannot be reused while cached.
        _RECORDS[id(tool)] = cached = (tool, record)
    record = cached[1]
    if record is None:
        return "untyped", False
    attr = record.attributes.get(name)
    if attr is None:
        return "untyped", False
    names = {STRING: "string", LONG: "long", DECIMAL: "decimal", BOOL: "bool"}

    def kind_of(typ: Any) -> str:
        if isinstance(typ, SetType):
            return "set:" + kind_of(typ.element)
        return names.get(typ, "other")

    return kind_of(attr.type), attr.required


def _fix_brackets(text: str) -> str:
    """``text`` as a local glob matching it literally (the glob language has no escape
    character, so a one-character class stands for each special character)."""
    special = {"[": "[[]", "*": "[*]", "?": "[?]", "]": "?"}
    return "".join(special.get(ch, ch) for ch in text)


def _exact_glob(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return _fix_brackets(text)


def local_globs(pattern: ArgumentConstraint) -> list[str] | None:
    """Glob alternatives for a local rule (``None``: the argument stays free)."""
    if pattern.kind == "exact":
        return [_exact_glob(pattern.value)]
    if pattern.kind == "oneof":
        return [_exact_glob(v) for v in pattern.value]
    if pattern.kind == "prefix":
        return [_fix_brackets(pattern.value) + "/**"]
    if pattern.kind == "host":
        base = _fix_brackets(pattern.value)
        return [base, base + "/**"]
    if pattern.kind == "subset" and len(pattern.value) == 1:
        only = pattern.value[0]
        return [_fix_brackets(only if isinstance(only, str) else json.dumps(only))]
    return None


def local_quote(glob: str) -> str:
    """``glob`` as the value of a local rule's ``name=value``: bare, or quoted when it holds
    a character the rule syntax reads."""
    if glob and not any(c in glob for c in ",()\"' \t") and glob == glob.strip():
        return glob
    if '"' not in glob:
        return f'"{glob}"'
    return f"'{glob}'"


def expressible(
    format: str, tool: Tool | None, name: str, pattern: ArgumentConstraint
) -> str | None:
    """Why ``pattern`` cannot be written in ``format`` (``None``: it can)."""
    if not all(_writable(v) for v in _strings(pattern.value)):
        return "a lone surrogate cannot be written in a policy"
    if format == "local":
        if pattern.kind == "range":
            return "local rules cannot express a range"
        if pattern.kind == "subset" and len(pattern.value) != 1:
            return "local rules cannot express a set of values"
        if pattern.kind == "absent":
            return "local rules cannot require an argument to be absent"
        globs = local_globs(pattern)
        if (
            globs is None
            or "]" in str(pattern.value)
            or any(not g or ("'" in g and '"' in g) for g in globs)
        ):
            return "the value cannot be written as a local glob"
        return None
    kind, required = cedar_kind(tool, name)
    if kind in ("untyped", "other"):
        return "not typed in the Cedar schema"
    value = pattern.value
    if pattern.kind == "absent":
        return "required by the schema" if required else None
    if pattern.kind in ("prefix", "host"):
        return None if kind == "string" else f"not a string in the Cedar schema ({kind})"
    if pattern.kind == "subset":
        element = kind[4:] if kind.startswith("set:") else None
        if element is None:
            return f"not a set in the Cedar schema ({kind})"
        return None if all(_fits(v, element) for v in value) else "elements do not fit"
    if pattern.kind == "range":
        return (
            None
            if kind in ("long", "decimal") and all(_fits(v, kind) for v in value)
            else (f"a range of {kind} values")
        )
    if pattern.kind == "oneof":
        return None if all(_fits(v, kind) for v in value) else f"a value does not fit {kind}"
    return None if _fits(value, kind) else f"the value does not fit {kind}"


def _writable(text: str) -> bool:
    """Whether a policy can hold ``text`` (a lone surrogate is no Unicode scalar value)."""
    return not any(0xD800 <= ord(ch) <= 0xDFFF for ch in text)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple):
        return [v for v in value if isinstance(v, str)]
    return []


def _fits(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str) and _writable(value)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "long":
        return isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63
    if kind == "decimal":
        from clearance.policy.cedar.entities import ValueMismatch, decimal_text

        try:
            decimal_text(value, "value")
        except ValueMismatch:
            return False
        return True
    return False
