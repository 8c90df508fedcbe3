"""The scope index behind sliced evaluation (DESIGN rule R10): which policies can match a
request, found without looking at the others.

Each evaluable policy (static or template link) is indexed under its most selective scope
constraint: the entity it names (``==``, ``in``, ``is in``, every entity of an
``action in [...]`` list, a linked template's slot value) or the entity type (``is``);
policies that constrain nothing go to an always-included bucket. For a request,
:meth:`ScopeIndex.select` computes the ancestors-and-self closure of the principal, action
and resource (through the engine's parents graph and the per-request entities), looks each
one up, and keeps the candidates whose three constraints match with Cedar's semantics.

Why that is exact: Cedar checks a policy's scope before its ``when`` / ``unless``
conditions, so a policy whose scope does not match can neither be satisfied nor error; the
selected policies give the same decision, reasons and errors as the whole set.
``tests/properties/test_r10_same_decision_at_any_scale.py`` checks it against
``cedarpy.is_authorized`` on the whole set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from clearance.policy.cedar._values import ScopeConstraint

__all__ = [
    "MEMO_SIZE",
    "Parents",
    "ScopeIndex",
    "Uid",
    "Unit",
    "as_uid",
    "parents_of",
]

Uid: TypeAlias = tuple[str, str]
"""An entity uid as ``(type, id)``; the engine's internal, hashable form."""
Parents: TypeAlias = Mapping[Uid, tuple[Uid, ...]]
"""Each entity's parents, as uids."""
MEMO_SIZE = 8192
"""Bound of each request → slice memo and of the closure memo (cleared when full)."""


def as_uid(value: Any) -> Uid:
    """A ``{"type", "id"}`` (or ``{"__entity": {...}}``) dict as an internal uid.

    Raises:
        ValueError: ``value`` is neither.
    """
    if isinstance(value, Mapping):
        inner = value.get("__entity", value)
        if isinstance(inner, Mapping) and "type" in inner and "id" in inner:
            return (str(inner["type"]), str(inner["id"]))
    raise ValueError(f"not an entity uid (expected {{'type': ..., 'id': ...}}): {value!r}")


def parents_of(entities: Sequence[Mapping[str, Any]]) -> dict[Uid, tuple[Uid, ...]]:
    """The parents graph of Cedar JSON entity dicts."""
    return {as_uid(e["uid"]): tuple(as_uid(p) for p in e.get("parents", ())) for e in entities}


@dataclass(slots=True)
class Unit:
    """An evaluable policy (static or link) as the index sees it."""

    id: str
    principal: ScopeConstraint
    action: ScopeConstraint
    resource: ScopeConstraint
    template_id: str | None


# Lookup tables: (principal | action | resource) x (by entity uid | by entity type).
_PRINCIPAL, _ACTION, _RESOURCE = 0, 2, 4
_TABLES = 6


def _keys(scope: ScopeConstraint) -> tuple[Any, ...]:
    """The index keys of a scope constraint: entity uids, or an entity type (a ``str``) for
    ``is``; empty when it constrains nothing indexable (``any``, an unfilled slot)."""
    if scope.op == "is":
        return (scope.entity_type,)
    return tuple((e.type, e.id) for e in scope.entities)


# How a candidate policy's scope constraint is checked against a request entity, its
# ancestors-and-self closure and its type: (op, operand, operand).
_ANY, _EQ, _IN, _IS, _IS_IN, _IN_ANY = range(6)
_Matcher: TypeAlias = tuple[int, Any, Any]


def _matcher(scope: ScopeConstraint) -> _Matcher:
    uids = tuple((e.type, e.id) for e in scope.entities)
    if scope.op == "==" and len(uids) == 1:
        return (_EQ, uids[0], None)
    if scope.op == "in" and len(uids) == 1:
        return (_IN, uids[0], None)
    if scope.op == "in" and uids:
        return (_IN_ANY, frozenset(uids), None)
    if scope.op == "is":
        return (_IS, scope.entity_type, None)
    if scope.op == "is in" and len(uids) == 1:
        return (_IS_IN, scope.entity_type, uids[0])
    # "any", or something unexpected (an unfilled slot): keep the policy, never drop it.
    return (_ANY, None, None)


def _matches(matcher: _Matcher, uid: Uid, closure: frozenset[Uid]) -> bool:
    """Cedar's scope semantics: ``in`` is "equal to or a descendant of"."""
    op, first, second = matcher
    if op == _ANY:
        return True
    if op == _EQ:
        return bool(uid == first)
    if op == _IN:
        return first in closure
    if op == _IS:
        return bool(uid[0] == first)
    if op == _IS_IN:
        return bool(uid[0] == first) and second in closure
    return not closure.isdisjoint(first)


class ScopeIndex:
    """The policies of ``units`` by scope key, over the entities' ``parents`` graph.

    Safe to share between threads: the tables never change after construction, and the
    closure memo is a plain dict whose entries two threads compute alike.
    """

    def __init__(self, units: Sequence[Unit], parents: Parents) -> None:
        """Put each policy in the bucket(s) of its most selective scope constraint.

        A constraint's keys are the entity it names (``==``, ``in``, ``is in``; every entity of
        an ``action in [...]`` list) or, for ``is``, the entity type. A request can only match
        the constraint if one of its keys is the request's entity, one of that entity's
        ancestors, or its type, so looking those up finds every policy that can match.
        Indexing one constraint per policy is enough, since the candidates are then checked
        against all three; the cheapest is the one whose keys are shared by the fewest
        policies (a thousand ``principal in Group::"devs"`` policies spread over a thousand
        actions land in the action buckets).
        """
        self._parents = parents
        options: list[list[tuple[int, tuple[Any, ...]]]] = []
        counts: dict[tuple[int, Any], int] = {}
        for unit in units:
            unit_options = [
                (dim, keys)
                for dim, keys in (
                    (_ACTION, _keys(unit.action)),
                    (_RESOURCE, _keys(unit.resource)),
                    (_PRINCIPAL, _keys(unit.principal)),
                )
                if keys
            ]
            options.append(unit_options)
            for dim, keys in unit_options:
                for key in keys:
                    counts[(dim, key)] = counts.get((dim, key), 0) + 1

        members: dict[tuple[int, Any], list[int]] = {}
        always: list[int] = []
        for index, unit_options in enumerate(options):
            if not unit_options:
                always.append(index)
                continue
            dim, keys = min(unit_options, key=lambda o: sum(counts[(o[0], k)] for k in o[1]))
            for key in keys:
                members.setdefault((dim, key), []).append(index)

        # One lookup table per (dimension, key kind): entity uid → policies, entity type →
        # policies. Buckets hold positions in self._matchers.
        self._tables: tuple[dict[Any, tuple[int, ...]], ...] = tuple({} for _ in range(_TABLES))
        for (dim, key), indices in members.items():
            self._tables[dim + (1 if isinstance(key, str) else 0)][key] = tuple(indices)
        self.buckets = len(members)
        """How many buckets (distinct scope keys) the index has."""
        self.always = len(always)
        """How many policies constrain nothing indexable (they are in every selection)."""
        self._always = tuple(always)
        self._matchers: list[tuple[str, _Matcher, _Matcher, _Matcher]] = [
            (u.id, _matcher(u.principal), _matcher(u.action), _matcher(u.resource)) for u in units
        ]
        self._closures: dict[Uid, frozenset[Uid]] = {}

    @property
    def policy_ids(self) -> frozenset[str]:
        """Every indexed policy's id (what an unsliced evaluation uses)."""
        return frozenset(m[0] for m in self._matchers)

    def closure(self, uid: Uid, overlay: Parents | None) -> frozenset[Uid]:
        """``uid`` and all its ancestors, through the engine's parents graph and ``overlay``
        (per-request entities, which replace engine entities with the same uid)."""
        if overlay is None:
            cached = self._closures.get(uid)
            if cached is not None:
                return cached
        base = self._parents
        seen = {uid}
        stack = [uid]
        while stack:
            node = stack.pop()
            parents = overlay[node] if overlay and node in overlay else base.get(node, ())
            for parent in parents:
                if parent not in seen:
                    seen.add(parent)
                    stack.append(parent)
        closure = frozenset(seen)
        if overlay is None:
            # The engine's graph never changes, so its closures stay valid; the memo is only
            # bounded (requests may name ever new resources). Plain dict operations are
            # atomic, and two threads computing the same closure agree.
            if len(self._closures) >= MEMO_SIZE:
                self._closures.clear()
            self._closures[uid] = closure
        return closure

    def select(
        self, principal: Uid, action: Uid, resource: Uid, overlay: Parents | None
    ) -> frozenset[str]:
        """The ids of exactly the policies whose scope matches the request."""
        tables = self._tables
        candidates = set(self._always)
        closures = []
        for dim, uid in ((_PRINCIPAL, principal), (_ACTION, action), (_RESOURCE, resource)):
            closure = self.closure(uid, overlay)
            closures.append(closure)
            by_uid = tables[dim]
            if by_uid:
                for node in closure:
                    bucket = by_uid.get(node)
                    if bucket is not None:
                        candidates.update(bucket)
            bucket = tables[dim + 1].get(uid[0])
            if bucket is not None:
                candidates.update(bucket)
        p_closure, a_closure, r_closure = closures
        matchers = self._matchers
        return frozenset(
            policy_id
            for policy_id, p, a, r in (matchers[i] for i in candidates)
            if _matches(p, principal, p_closure)
            and _matches(a, action, a_closure)
            and _matches(r, resource, r_closure)
        )
