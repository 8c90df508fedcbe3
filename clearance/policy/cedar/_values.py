"""The Cedar engine's public value types: what ``CedarEngine`` reports, free of ``cedarpy``.

An entity uid (:class:`EntityRef`), a policy's scope (:class:`ScopeConstraint`) and what the
engine knows about it (:class:`PolicyInfo`), an answer (:class:`CedarResponse` with its
:class:`CedarError` s), a parse or validation problem (:class:`PolicyProblem`) and the
engine's counters (:class:`EngineStatistics`). Re-exported by
:mod:`clearance.policy.cedar.engine` and :mod:`clearance.policy.cedar`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

__all__ = [
    "CedarError",
    "CedarResponse",
    "EngineStatistics",
    "EntityRef",
    "PolicyInfo",
    "PolicyProblem",
    "PolicySources",
    "ScopeConstraint",
]

PolicySources: TypeAlias = str | Sequence[tuple[str, str]]
"""Cedar policy text, or a sequence of ``(path, text)`` pairs (one per file)."""


@dataclass(frozen=True, slots=True)
class EntityRef:
    """A Cedar entity uid, e.g. ``User::"alice"``."""

    type: str
    """The entity type, with its namespace (``"MyApp::User"``)."""
    id: str
    """The entity id (``"alice"``)."""

    def __str__(self) -> str:
        # json.dumps escapes quotes and backslashes the way Cedar string literals do.
        return f"{self.type}::{json.dumps(self.id, ensure_ascii=False)}"


@dataclass(frozen=True, slots=True)
class ScopeConstraint:
    """One of a policy's three scope constraints (``principal``, ``action`` or ``resource``).

    ``op`` is ``"any"`` (no constraint), ``"=="``, ``"in"``, ``"is"`` or ``"is in"``. An
    ``action in [A, B]`` list has several ``entities``; a ``principal`` / ``resource`` ``==``,
    ``in`` or ``is in`` constraint has one, or none and a ``slot`` on an unlinked template.
    """

    op: Literal["any", "==", "in", "is", "is in"]
    entities: tuple[EntityRef, ...] = ()
    entity_type: str | None = None
    slot: str | None = None
    """``"?principal"`` or ``"?resource"`` when the constraint is a template slot."""

    def render(self, var: str) -> str:
        """The constraint as Cedar text, e.g. ``principal in Group::"devs"``.

        Args:
            var: ``"principal"``, ``"action"`` or ``"resource"``.
        """
        if self.op == "any":
            return var
        if self.op == "is":
            return f"{var} is {self.entity_type}"
        if self.slot:
            target = self.slot
        elif len(self.entities) == 1:
            target = str(self.entities[0])
        else:
            target = "[" + ", ".join(str(e) for e in self.entities) + "]"
        if self.op == "is in":
            return f"{var} is {self.entity_type} in {target}"
        return f"{var} {self.op} {target}"


@dataclass(frozen=True, slots=True)
class PolicyInfo:
    """What the engine knows about one policy, template or template link.

    ``id`` is the id Cedar reports in reasons and errors: the positional ``policy0``,
    ``policy1``, ... across all the sources in order, or a link's ``new_id``. The ``@id``
    annotation, when present, is in ``annotations["id"]`` (and ``label``).
    """

    id: str
    effect: Literal["permit", "forbid"]
    kind: Literal["static", "template", "link"]
    """``"static"`` for a plain policy, ``"template"`` for a policy with slots (it authorizes
    nothing by itself), ``"link"`` for a template linked to values."""
    annotations: Mapping[str, str]
    """Every annotation, e.g. ``{"id": "devs-read", "ask": "why"}``; a link has its
    template's."""
    principal: ScopeConstraint
    action: ScopeConstraint
    resource: ScopeConstraint
    conditions: int
    """How many ``when`` / ``unless`` clauses the policy has."""
    path: str | None
    """The file the policy came from, when the sources named one."""
    line: int | None
    """The 1-based line the policy starts on (its first annotation) in that file."""
    template_id: str | None = None
    """For a link: the id of its template."""
    text: str | None = None
    """The policy's source text (a link shows its template's)."""
    column: int | None = None
    """The 1-based column of ``line`` the policy starts at."""

    @property
    def label(self) -> str:
        """The ``@id`` annotation when present, else the Cedar id: the name to show people."""
        return self.annotations.get("id", self.id)

    @property
    def location(self) -> str:
        """``path:line`` (or as much of it as is known), for messages."""
        if self.path and self.line:
            return f"{self.path}:{self.line}"
        if self.line:
            return f"line {self.line}"
        return self.path or "<policies>"


@dataclass(frozen=True, slots=True)
class CedarError:
    """A policy that errored while evaluating (Cedar skips it and records this).

    Not an exception: errors are part of a ``CedarResponse``, as in Cedar's diagnostics.
    """

    policy_id: str | None
    """The erroring policy's Cedar id; ``None`` for an error not tied to a policy (a request
    or per-request entities that do not conform to the schema)."""
    message: str
    """Cedar's message, without the ``error while evaluating policy `...`:`` prefix."""

    def __str__(self) -> str:
        return f"{self.policy_id}: {self.message}" if self.policy_id else self.message


@dataclass(frozen=True, slots=True)
class CedarResponse:
    """Cedar's answer to one request."""

    decision: Literal["allow", "deny"]
    reasons: tuple[str, ...]
    """The determining policies' Cedar ids (the satisfied forbids on deny, the satisfied
    permits on allow), in policy order."""
    errors: tuple[CedarError, ...] = ()
    """Policies skipped because they errored, in policy order, then non-policy errors."""
    annotations: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Policy id → its annotations, for every policy in ``reasons`` and ``errors``."""

    @property
    def allowed(self) -> bool:
        """True when the decision is ``"allow"``."""
        return self.decision == "allow"


@dataclass(frozen=True, slots=True)
class PolicyProblem:
    """A parse or validation problem, located in its source."""

    message: str
    policy_id: str | None
    """The policy's ``@id`` when annotated, else its Cedar id (as ``PolicyError.policy_id``)."""
    path: str | None
    line: int | None
    cedar_id: str | None = None
    """The policy's Cedar id (``policy3``), when known."""
    column: int | None = None
    """The 1-based column of the problem in ``line``, when it could be placed."""
    frame: str | None = None
    """The source line(s) with a caret under the problem, when the text is known."""

    def as_dict(self) -> dict[str, object]:
        """The problem in ``PolicyError.problems`` form."""
        return {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "policy_id": self.policy_id,
            "message": self.message,
            "frame": self.frame,
        }


@dataclass(frozen=True, slots=True)
class EngineStatistics:
    """Counters describing an engine and its slice cache."""

    policies: int
    """Policies that can authorize: static policies plus template links."""
    templates: int
    links: int
    buckets: int
    """Index buckets (distinct scope keys)."""
    always: int
    """Policies whose scope names nothing indexable; they are in every slice."""
    slices_cached: int
    slice_hits: int
    slice_misses: int
