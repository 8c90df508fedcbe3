"""What a canonical fact is, and the protocol every fact kind follows (rule R11).

A tool declares how some of its arguments are *interpreted* by what it runs: ``/path`` is a
file path under a root, ``/command`` a command line, ``/to`` an e-mail address. For each
such argument the pipeline asks the argument's :class:`FactKind` for its canonical form,
once, right after schema validation:

- the **canonical value** replaces the argument: guardrails, evaluators, grants, asks, the
  journal and the handler all see it (a resolved workspace-relative path, the command line
  re-joined from the argv that will run, a lower-case address, a number as a number);
- the **fact** is a small record derived from it (``program``, ``subcommand``, ``host``,
  ``domain``...) that policies read as ``context.facts.<argument>``.

A value that cannot be canonicalized raises :class:`FactError`, and the call is refused:
it never runs with the raw value (R1, R11). Canonicalizing a canonical value gives it back
unchanged (kinds are idempotent; the facts property tests check it).

A fact record has a fixed shape, declared by :attr:`FactKind.attributes` with the types
``"String"``, ``"Long"``, ``"Bool"``, ``"decimal"`` and ``"Set<String>"`` (the Cedar
schema is generated from it). Every attribute is always present.

A :class:`SessionFact` is a kind whose value names something the calling session holds
(a process it started: ``process.write``'s ``id``). Its canonical form depends on the
session, so the pipeline canonicalizes it with the session (:meth:`SessionFact.
canonicalize_in`); without one it is refused. Since the thing it names lives and goes with
the session, no grant may leave it free (a grant for "any arguments" would cover whatever
the session holds later), and a person asked sees what it names beside the value
(:meth:`SessionFact.describe`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from clearance.errors import FactError

__all__ = [
    "ATTRIBUTE_TYPES",
    "Canonical",
    "CustomFact",
    "FactError",
    "FactKind",
    "SessionFact",
]

ATTRIBUTE_TYPES = frozenset({"String", "Long", "Bool", "decimal", "Set<String>"})
"""The types a fact attribute may have."""


@dataclass(frozen=True, slots=True)
class Canonical:
    """The canonical form of one argument value."""

    value: Any
    """What replaces the argument (same JSON type as the original)."""
    fact: Mapping[str, Any] = field(default_factory=dict)
    """The record policies read, with exactly the kind's attributes."""


@runtime_checkable
class FactKind(Protocol):
    """How one kind of argument is interpreted.

    Implementations are immutable and thread-safe: one kind object serves every call.
    """

    @property
    def name(self) -> str:
        """The kind's name in records, schemas and ``explain`` (``"path"``, ``"url"``...)."""
        ...

    @property
    def attributes(self) -> Mapping[str, str]:
        """The fact record's attributes and their types (see :data:`ATTRIBUTE_TYPES`)."""
        ...

    @property
    def json_types(self) -> frozenset[str]:
        """The JSON Schema types an argument of this kind may have (``{"string"}``)."""
        ...

    def canonicalize(self, value: Any) -> Canonical:
        """The canonical form of ``value``.

        Raises:
            FactError: the value cannot be canonicalized (the call is refused).
        """
        ...


@runtime_checkable
class SessionFact(FactKind, Protocol):
    """A fact kind whose value names something of the calling session (see the module
    docstring). :meth:`FactKind.canonicalize`, without a session, refuses every value."""

    def canonicalize_in(self, value: Any, session_id: str) -> Canonical:
        """The canonical form of ``value`` in the session ``session_id``.

        Raises:
            FactError: the value names nothing of this session (the same refusal whether
                it names nothing at all or something of another session).
        """
        ...

    def describe(self, fact: Mapping[str, Any]) -> str:
        """What a fact record names, in words, for a person asked to approve the call."""
        ...


class CustomFact:
    """A fact kind made from a function: ``facts={"/ticket": CustomFact(normalize_ticket)}``.

    ``function(value)`` returns the canonical value (a string unless ``attributes`` and
    ``json_types`` say otherwise) or raises ``ValueError`` / :class:`FactError` to refuse
    it. The fact record is ``{"value": <canonical value>}`` unless the function returns a
    :class:`Canonical` itself.

    Args:
        function: the canonicalizer; it must be idempotent and must not do I/O that an
            attacker can race (it runs before the policy sees the value).
        name: the kind's name (default: the function's name).
        attributes: the record's attributes (default ``{"value": "String"}``).
        json_types: the argument's JSON types (default ``{"string"}``).
    """

    def __init__(
        self,
        function: Callable[[Any], Any],
        *,
        name: str | None = None,
        attributes: Mapping[str, str] | None = None,
        json_types: frozenset[str] | set[str] | None = None,
    ) -> None:
        if not callable(function):
            raise TypeError("CustomFact needs a callable")
        self._function = function
        self._name = str(name or getattr(function, "__name__", "custom"))
        self._attributes = dict(attributes or {"value": "String"})
        bad = {t for t in self._attributes.values() if t not in ATTRIBUTE_TYPES}
        if bad:
            raise ValueError(f"unknown fact attribute type(s): {', '.join(sorted(bad))}")
        self._json_types = frozenset(json_types or {"string"})

    @property
    def name(self) -> str:
        return self._name

    @property
    def attributes(self) -> Mapping[str, str]:
        return self._attributes

    @property
    def json_types(self) -> frozenset[str]:
        return self._json_types

    def canonicalize(self, value: Any) -> Canonical:
        try:
            result = self._function(value)
        except FactError:
            raise
        except ValueError as exc:
            raise FactError(str(exc) or f"not a valid {self._name}") from None
        if isinstance(result, Canonical):
            return result
        return Canonical(result, {"value": result})

    def __repr__(self) -> str:
        return f"CustomFact({self._name})"
