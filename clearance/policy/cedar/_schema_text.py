"""Cedar schema syntax for a Cedar JSON schema, rendered by clearance: cedarpy's own
rendering qualifies every builtin as ``__cedar::String``, which is noise to a reader.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from clearance.policy.cedar._cedar_types import IDENT

__all__ = ["schema_to_text"]

_RESERVED_WORDS = frozenset(
    "true false if then else in is like has principal action resource context permit forbid "
    "when unless namespace entity type appliesTo tags enum Set Long String Bool Record Entity "
    "Extension Boolean __cedar".split()
)


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
    return name if IDENT.match(name) and name not in _RESERVED_WORDS else _quote(name)


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
