"""A tool's declared facts, checked at registration and applied to each call's arguments.

``Tool(..., root="/srv/ws", facts={"/path": "path", "/to/*": "email", "/amount": "number"})``

A key is a JSON pointer to a top-level argument (``/path``) or to every element of a
top-level array argument (``/to/*``). A value is a built-in kind's name, a
:class:`~clearance.facts.FactKind` object, or a function (wrapped in
:class:`~clearance.facts.CustomFact`). Built-in names:

=============  ====================================================================
``path``       :class:`PathFact` under the tool's ``root`` (symlinks followed)
``path_entry`` :class:`PathFact` under ``root`` with ``follow_final=False``
``command``    :class:`CommandFact` (argv without a shell; paths checked under ``root``)
``url``        :class:`UrlFact`
``email``      :class:`EmailFact`
``number``     :class:`NumberFact`
=============  ====================================================================

For an array (``/to/*``) each element is canonicalized, and the fact record holds, for each
attribute, the set of the elements' values (``context.facts.to.domain`` is a
``Set<String>``; ``Set<String>`` attributes are united), so that a policy can say "every
recipient is in our domain" with ``["corp.com"].containsAll(context.facts.to.domain)``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from clearance.facts.base import (
    ATTRIBUTE_TYPES,
    Canonical,
    CustomFact,
    FactError,
    FactKind,
    SessionFact,
)
from clearance.facts.command import CommandFact
from clearance.facts.git import GitRefFact
from clearance.facts.numbers import NumberFact
from clearance.facts.patch import PatchFact
from clearance.facts.paths import PathFact
from clearance.facts.web import SPECIAL_SCHEMES, EmailFact, UrlFact

__all__ = [
    "DeclaredFact",
    "FactsError",
    "apply_facts",
    "declare_facts",
    "pattern_problem",
    "set_type",
]

FactSpec = str | FactKind | Callable[[Any], Any]


class FactsError(ValueError):
    """A ``facts=`` declaration is wrong (turned into ``ToolRegistrationError``)."""


@dataclass(frozen=True, slots=True)
class DeclaredFact:
    """One declared fact of a tool."""

    pointer: str
    """As declared: ``/path`` or ``/to/*``."""
    field: str
    """The top-level argument it reads; also its name under ``context.facts``."""
    many: bool
    """Whether the argument is an array whose elements are each canonicalized."""
    kind: FactKind

    @property
    def attributes(self) -> Mapping[str, str]:
        """The record's attribute types as policies see them (sets for arrays)."""
        if not self.many:
            return self.kind.attributes
        return {name: set_type(typ) for name, typ in self.kind.attributes.items()}


def set_type(typ: str) -> str:
    """The type of an attribute collected over an array's elements."""
    return typ if typ.startswith("Set<") else f"Set<{typ}>"


def _builtin(name: str, root: str | None, pointer: str) -> FactKind:
    if name in ("path", "path_entry"):
        if root is None:
            raise FactsError(f"{pointer}: a '{name}' fact needs the tool's root=")
        return PathFact(root, follow_final=name == "path")
    if name == "git_ref":
        return GitRefFact()
    if name == "patch":
        if root is None:
            raise FactsError(f"{pointer}: a 'patch' fact needs the tool's root=")
        return PatchFact(root)
    if name == "command":
        return CommandFact(root)
    if name == "url":
        return UrlFact()
    if name == "email":
        return EmailFact()
    if name == "number":
        return NumberFact()
    raise FactsError(
        f"{pointer}: unknown fact kind {name!r} "
        "(built-in: path, path_entry, patch, git_ref, command, url, email, number)"
    )


def declare_facts(
    facts: Mapping[str, FactSpec],
    *,
    root: str | os.PathLike[str] | None,
    schema: Mapping[str, Any],
) -> tuple[DeclaredFact, ...]:
    """Check a tool's ``facts=`` against its input schema and build the kinds.

    Raises:
        FactsError: a pointer is not a top-level argument (or its array elements), the
            argument's schema type does not fit the kind, a kind name is unknown, or a
            kind's attributes are malformed.
    """
    if not isinstance(facts, Mapping):
        raise FactsError('facts must be a mapping like {"/path": "path"}')
    root_text = os.fspath(root) if root is not None else None
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    declared: list[DeclaredFact] = []
    seen: set[str] = set()
    for pointer, spec in facts.items():
        if not isinstance(pointer, str) or not pointer.startswith("/"):
            raise FactsError(f"{pointer!r} is not a JSON pointer like '/path'")
        tokens = pointer[1:].split("/")
        many = len(tokens) == 2 and tokens[1] == "*"
        if len(tokens) > 2 or (len(tokens) == 2 and not many) or "~" in tokens[0]:
            raise FactsError(
                f"{pointer}: facts name a top-level argument ('/path') or its array "
                "elements ('/to/*')"
            )
        field = tokens[0]
        if field in seen:
            raise FactsError(f"{pointer}: the argument {field!r} has two facts")
        seen.add(field)
        if field not in properties:
            raise FactsError(f"{pointer}: {field!r} is not an argument in the input schema")
        if isinstance(spec, str):
            kind = _builtin(spec, root_text, pointer)
        elif isinstance(spec, FactKind):
            kind = spec
        elif callable(spec):
            kind = CustomFact(spec)
        else:
            raise FactsError(f"{pointer}: {spec!r} is not a fact kind")
        bad = {t for t in kind.attributes.values() if t not in ATTRIBUTE_TYPES}
        if bad or not kind.attributes:
            raise FactsError(f"{pointer}: kind {kind.name!r} has bad attribute types {bad}")
        _check_type(pointer, properties[field], many, kind)
        declared.append(DeclaredFact(pointer, field, many, kind))
    return tuple(declared)


def _check_type(pointer: str, prop: Any, many: bool, kind: FactKind) -> None:
    if not isinstance(prop, Mapping):
        return
    prop = _without_null(prop)
    if many:
        if prop.get("type") != "array":
            raise FactsError(f"{pointer}: the argument is not declared as an array")
        prop = prop.get("items")
        if not isinstance(prop, Mapping):
            return
    declared = prop.get("type")
    types = {declared} if isinstance(declared, str) else set(declared or ())
    types.discard("null")
    if types and not types <= set(kind.json_types):
        raise FactsError(
            f"{pointer}: a {kind.name!r} fact reads {'/'.join(sorted(kind.json_types))} "
            f"values, but the argument is {'/'.join(sorted(types))}"
        )


def _without_null(prop: Mapping[str, Any]) -> Mapping[str, Any]:
    """A union with one branch besides null as that branch: a nullable union
    (``{"anyOf": [X, {"type": "null"}]}``, what pydantic writes for ``list[str] | None``;
    null has no fact, see :func:`apply_facts`) or a union of one branch
    (``{"anyOf": [X]}``, which is X)."""
    for key in ("anyOf", "oneOf"):
        branches = prop.get(key)
        if isinstance(branches, list):
            rest = [b for b in branches if not (isinstance(b, Mapping) and b.get("type") == "null")]
            if len(rest) == 1 and isinstance(rest[0], Mapping):
                return rest[0]
    return prop


def apply_facts(
    declared: Sequence[DeclaredFact],
    arguments: dict[str, Any],
    *,
    session_id: str | None = None,
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Canonicalize ``arguments`` (validated against the tool's schema) for a call of the
    session ``session_id`` (a :class:`SessionFact` is read in it; without one it refuses).

    Returns the canonical arguments (a new dict; the input is not changed) and the facts
    by argument name. An argument that is absent (or null) has no fact.

    Raises:
        FactError: a value cannot be canonicalized; its message names the argument.
    """
    result = dict(arguments)
    facts: dict[str, dict[str, Any]] = {}
    for fact in declared:
        value = arguments.get(fact.field)
        if value is None:
            continue
        try:
            if fact.many:
                if not isinstance(value, list):
                    raise FactError("expected an array")
                canon = [_one(fact.kind, item, session_id) for item in value]
                result[fact.field] = [c.value for c in canon]
                facts[fact.field] = _collect(fact, canon)
            else:
                one = _one(fact.kind, value, session_id)
                result[fact.field] = one.value
                facts[fact.field] = dict(one.fact)
        except FactError as exc:
            raise FactError(f"argument {fact.pointer} ({fact.kind.name}): {exc.reason}") from None
    return result, facts


def _one(kind: FactKind, value: Any, session_id: str | None) -> Canonical:
    try:
        if session_id is not None and isinstance(kind, SessionFact):
            canon = kind.canonicalize_in(value, session_id)
        else:
            canon = kind.canonicalize(value)
    except FactError:
        raise
    except (ValueError, TypeError, OSError, RecursionError) as exc:
        raise FactError(f"it cannot be read ({type(exc).__name__})") from None
    if not isinstance(canon, Canonical):
        raise FactError(f"kind {kind.name!r} did not return a Canonical")
    missing = set(kind.attributes) - set(canon.fact)
    if missing:
        raise FactError(f"kind {kind.name!r} left out {', '.join(sorted(missing))}")
    return canon


def _collect(fact: DeclaredFact, canon: list[Canonical]) -> dict[str, Any]:
    record: dict[str, Any] = {}
    for name, typ in fact.kind.attributes.items():
        values: dict[Any, None] = {}  # ordered and without duplicates
        for c in canon:
            value = c.fact[name]
            values.update(dict.fromkeys(value if typ.startswith("Set<") else [value]))
        record[name] = list(values)
    return record


def pattern_problem(kind: FactKind, pattern: str) -> str | None:
    """Why a glob over an argument of this kind can never match its canonical value, or
    None: rules are checked against the canonical form (R11), so a rule written in another
    spelling would be silently dead (``*@Competitor.com`` against lower-case addresses,
    ``https://evil.example:443/**`` against URLs without the default port, an absolute
    path against paths relative to the root)."""

    if isinstance(kind, EmailFact) and pattern != pattern.lower():
        return f"e-mail addresses are compared in lower case: write {pattern.lower()!r}"
    if isinstance(kind, UrlFact):
        scheme, sep, rest = pattern.partition("://")
        if not sep:
            return None
        authority = rest.split("/", 1)[0]
        if scheme != scheme.lower() or authority != authority.lower():
            fixed = f"{scheme.lower()}://{authority.lower()}{rest[len(authority) :]}"
            return f"URL schemes and hosts are compared in lower case: write {fixed!r}"
        _, colon, port = authority.rpartition(":")
        if colon and port.isdigit() and SPECIAL_SCHEMES.get(scheme) == int(port):
            return f"URLs are compared without their default port: drop ':{port}'"
        return None
    if isinstance(kind, PathFact):
        if pattern.startswith("/"):
            return "paths are compared relative to the tool's root: write the path inside it"
        if pattern.startswith("~"):
            return "paths are compared relative to the tool's root; '~' is never one"
        segments = pattern.split("/")
        if any(seg in (".", "..") for seg in segments) or "" in segments[:-1]:
            return "paths are compared canonical: no '.', '..' or empty segments"
    return None
