"""AuthZEN requests as clearance calls: what ``clearance pdp`` decides for each evaluation.

An evaluation request (``subject``, ``action``, ``resource``, optional ``context``) becomes
one call of one registered tool:

=====================  ================================================================
the principal          ``Principal(subject.type, subject.id)``; ``subject.properties``
                       are its attributes, except ``parents`` when it is a list of
                       ``{"type", "id"}`` objects: those are its parents (Cedar ``in``)
the tool, when         ``resource.id``: clearance's own enforcement points (and the
``resource.type`` is   COAZ-MCP default mapping, whose action is ``tools/call``) name the
``"tool"``             tool there; ``action.name`` must be that tool or ``tools/call``
its arguments          ``context.arguments`` (an object; none: ``{}``)
the tool, otherwise    ``<resource.type>.<action.name>``, each part spelled as a tool
                       name (:func:`tool_part`): the interop Todo application's
                       ``can_update_todo`` on a ``todo`` is ``todo.can_update_todo``, the
                       API gateway scenario's ``GET`` on a ``route`` is ``route.-g-e-t``
its arguments          ``{"id": resource.id, "properties": resource.properties}`` (the
                       latter only when given)
=====================  ================================================================

Tool names are ``[a-z0-9_-]``; a resource type or an action name is any string (HTTP
methods are upper case). :func:`tool_part` spells one as a tool name, reversibly
(:func:`request_part` reads it back), by escaping with ``-``: a lower-case letter, a digit
and ``_`` stand for themselves, an upper-case letter is ``-`` and the letter in lower case
(``GET`` is ``-g-e-t``), ``-`` is ``--``, and any other character is ``-_``, its code
point in hexadecimal, and ``_`` (``/`` is ``-_2f_``). Names already valid and without
``-`` (every Todo scenario name) are unchanged.

``context.provenance``, when given, is where each argument came from, as the caller's
ledger saw it (what :class:`~clearance.policy.AuthZenEvaluator` sends with
``send_provenance``): an object naming arguments of the call, each with a record holding
exactly the attributes of :data:`~clearance.provenance.ORIGIN_ATTRIBUTES` (``sources`` and
``tool_values`` arrays of strings, the others booleans). A policy that reads an argument's
provenance reads that record; an argument without one counts as from a tool.

An ``evaluations`` request gives each evaluation the request's top-level ``subject``,
``action``, ``resource`` and ``context`` for a key it does not hold itself (a key it holds
replaces the default whole), then reads it as above. A request that lacks a required key
(after the defaults), or holds a key of the wrong JSON type, is a
:class:`BadRequest`: the whole request is answered 400, as the specification requires.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clearance.policy.authzen_wire import SEMANTICS
from clearance.provenance import ORIGIN_ATTRIBUTES
from clearance.types import Principal

__all__ = [
    "BadRequest",
    "Evaluation",
    "evaluation",
    "evaluations",
    "request_part",
    "tool_part",
    "wants_context",
]

_KEYS = ("subject", "action", "resource", "context")
"""The keys an evaluation request holds (and an evaluations request gives as defaults)."""
_TOOL_ACTIONS = ("tools/call",)
"""Action names that mean "call the tool the resource names" (COAZ-MCP's default)."""


class BadRequest(ValueError):
    """The request is not an AuthZEN request (answered 400 with this message)."""


@dataclass(frozen=True, slots=True)
class Evaluation:
    """One evaluation, as a clearance call."""

    principal: Principal
    tool: str
    """The qualified name of the tool the call is for (it may not be registered)."""
    arguments: dict[str, Any]
    mismatch: str | None = None
    """Why the request cannot name a call (a tool resource with another action): the
    evaluation is answered ``false`` with this, without deciding anything."""
    provenance: dict[str, dict[str, Any]] | None = None
    """The caller's provenance records, by argument (``context.provenance``), if sent."""


def tool_part(name: str) -> str:
    """``name`` (a resource type or an action name) spelled as part of a tool name (see
    the module docstring); :func:`request_part` reads it back."""
    out = []
    for char in name:
        if "a" <= char <= "z" or "0" <= char <= "9" or char == "_":
            out.append(char)
        elif "A" <= char <= "Z":
            out.append("-" + char.lower())
        elif char == "-":
            out.append("--")
        else:
            out.append(f"-_{ord(char):x}_")
    return "".join(out)


def request_part(part: str) -> str:
    """What :func:`tool_part` spelled as ``part``.

    Raises:
        ValueError: ``part`` is not a spelling :func:`tool_part` makes.
    """
    out = []
    index = 0
    while index < len(part):
        char = part[index]
        if char != "-":
            if not ("a" <= char <= "z" or "0" <= char <= "9" or char == "_"):
                raise ValueError(f"{part!r}: {char!r} is not written by tool_part")
            out.append(char)
            index += 1
            continue
        escaped = part[index + 1 : index + 2]
        if escaped == "-":
            out.append("-")
            index += 2
        elif "a" <= escaped <= "z":
            out.append(escaped.upper())
            index += 2
        elif escaped == "_":
            end = part.find("_", index + 2)
            digits = part[index + 2 : end] if end > 0 else ""
            if not digits or any(c not in "0123456789abcdef" for c in digits):
                raise ValueError(f"{part!r}: a broken escape at {index}")
            out.append(chr(int(digits, 16)))
            index = end + 1
        else:
            raise ValueError(f"{part!r}: a broken escape at {index}")
    return "".join(out)


def _object(value: Any, where: str, *, required: bool) -> dict[str, Any] | None:
    if value is None:
        if required:
            raise BadRequest(f"{where} is required")
        return None
    if not isinstance(value, dict):
        raise BadRequest(f"{where} must be a JSON object")
    return value


def _string(entity: dict[str, Any], key: str, where: str) -> str:
    value = entity.get(key)
    if not isinstance(value, str) or not value:
        raise BadRequest(f"{where}.{key} must be a non-empty string")
    return value


def _provenance(
    value: Any, arguments: dict[str, Any], where: str
) -> dict[str, dict[str, Any]] | None:
    """``context.provenance`` checked (see the module docstring), or None when absent.

    Raises:
        BadRequest: not an object, an argument the call does not have, or a record that
            is not one.
    """
    given = _object(value, f"{where}: context.provenance", required=False)
    if given is None:
        return None
    records: dict[str, dict[str, Any]] = {}
    for name, record in given.items():
        label = f"{where}: context.provenance.{name}"
        if name not in arguments:
            raise BadRequest(f"{label}: the call has no argument {name!r}")
        if not isinstance(record, dict) or set(record) != set(ORIGIN_ATTRIBUTES):
            raise BadRequest(
                f"{label} must be an object with exactly {', '.join(ORIGIN_ATTRIBUTES)}"
            )
        for key, kind in ORIGIN_ATTRIBUTES.items():
            item = record[key]
            if kind == "Bool" and not isinstance(item, bool):
                raise BadRequest(f"{label}.{key} must be true or false")
            if kind != "Bool" and not (
                isinstance(item, list) and all(isinstance(i, str) for i in item)
            ):
                raise BadRequest(f"{label}.{key} must be an array of strings")
        records[name] = dict(record)
    return records


def _parents(value: Any) -> tuple[tuple[str, str], ...] | None:
    """``properties.parents`` as ``(type, id)`` pairs when it has that shape, else None."""
    if not isinstance(value, list):
        return None
    pairs: list[tuple[str, str]] = []
    for item in value:
        if not (
            isinstance(item, dict)
            and isinstance(item.get("type"), str)
            and isinstance(item.get("id"), str)
            and item["type"]
            and item["id"]
        ):
            return None
        pairs.append((item["type"], item["id"]))
    return tuple(pairs)


def evaluation(request: Any, where: str = "the request") -> Evaluation:
    """One evaluation request as a call (see the module docstring).

    Raises:
        BadRequest: a required key is missing or a key has the wrong JSON type.
    """
    body = _object(request, where, required=True)
    assert body is not None
    subject = _object(body.get("subject"), f"{where}: subject", required=True)
    action = _object(body.get("action"), f"{where}: action", required=True)
    resource = _object(body.get("resource"), f"{where}: resource", required=True)
    context = _object(body.get("context"), f"{where}: context", required=False) or {}
    assert subject is not None and action is not None and resource is not None
    kind = _string(subject, "type", f"{where}: subject")
    ident = _string(subject, "id", f"{where}: subject")
    name = _string(action, "name", f"{where}: action")
    rtype = _string(resource, "type", f"{where}: resource")
    rid = _string(resource, "id", f"{where}: resource")
    for entity, label in ((subject, "subject"), (action, "action"), (resource, "resource")):
        _object(entity.get("properties"), f"{where}: {label}.properties", required=False)
    attrs = dict(subject.get("properties") or {})
    parents = _parents(attrs.get("parents"))
    if parents is not None:
        del attrs["parents"]
    principal = Principal(kind, ident, attrs, parents or ())
    if rtype == "tool":
        arguments = _object(context.get("arguments"), f"{where}: context.arguments", required=False)
        mismatch = None
        if name != rid and name not in _TOOL_ACTIONS:
            mismatch = (
                f"the action {name!r} is not the tool {rid!r}: a tool resource is called with "
                "its own name or 'tools/call'"
            )
        called = dict(arguments or {})
        provenance = _provenance(context.get("provenance"), called, where)
        return Evaluation(principal, rid, called, mismatch, provenance)
    arguments = {"id": rid}
    if resource.get("properties") is not None:
        arguments["properties"] = resource["properties"]
    provenance = _provenance(context.get("provenance"), arguments, where)
    return Evaluation(
        principal, f"{tool_part(rtype)}.{tool_part(name)}", arguments, None, provenance
    )


def wants_context(request: Any) -> bool:
    """Whether the request asks for each Decision's context (``"options":
    {"decision_context": true}``, on either endpoint; see :mod:`clearance.pdp._app`).

    Raises:
        BadRequest: ``options`` is not an object, or ``decision_context`` not a boolean.
    """
    if not isinstance(request, dict):
        return False
    options = _object(request.get("options"), "options", required=False) or {}
    value = options.get("decision_context", False)
    if not isinstance(value, bool):
        raise BadRequest("options.decision_context must be true or false")
    return value


def evaluations(request: Any, *, limit: int) -> tuple[list[Evaluation] | None, str]:
    """An evaluations request: its evaluations (None when it has none, and is then one
    evaluation: :func:`evaluation` of the request) and its semantic.

    Raises:
        BadRequest: an evaluation is malformed after the defaults, ``options`` is not an
            object, the semantic is unknown, or there are more than ``limit``.
    """
    body = _object(request, "the request", required=True)
    assert body is not None
    options = _object(body.get("options"), "options", required=False) or {}
    semantic = options.get("evaluations_semantic", "execute_all")
    if semantic not in SEMANTICS:
        raise BadRequest(f"options.evaluations_semantic must be one of {', '.join(SEMANTICS)}")
    items = body.get("evaluations")
    if items is None or items == []:
        return None, semantic
    if not isinstance(items, list):
        raise BadRequest("evaluations must be a JSON array")
    if len(items) > limit:
        raise BadRequest(f"at most {limit} evaluations in one request")
    defaults = {k: body[k] for k in _KEYS if k in body}
    found: list[Evaluation] = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise BadRequest(f"evaluations[{index}] must be a JSON object")
        merged = {**defaults, **{k: item[k] for k in _KEYS if k in item}}
        found.append(evaluation(merged, f"evaluations[{index}]"))
    return found, semantic
