"""Plain Cedar with parsed handles and scope slicing: the engine under ``CedarEvaluator``.

``CedarEngine`` parses Cedar policy text, an optional schema and an optional entity store once
into ``cedarpy`` handles, and answers ``is_authorized`` requests with a ``CedarResponse`` that
mirrors Cedar's own response: a decision, the determining policy ids (``reasons``) and the
policies that errored (``errors``). Nothing from ``cedarpy`` appears in the public API.

Slicing (DESIGN rule R10): a request is evaluated only against the policies whose *scope*
(``principal`` / ``action`` / ``resource`` constraints) matches it. Scopes are read once from
``PolicySet.to_pst()``; each policy is indexed under its most selective constraint: the entity
it names (``==``, ``in``, ``is in``, every entity of an ``action in [...]`` list, a linked
template's slot value) or the entity type (``is``); policies that constrain nothing go to an
always-included bucket. For a request the engine computes the ancestors-and-self closure of
the principal, action and resource (the engine's entities, the schema's action groups and the
per-request entities, which replace engine entities with the same uid), looks each one up,
checks the candidates' three constraints with Cedar's semantics, and evaluates a ``PolicySet``
of exactly the matching policies: built from the PST nodes once per distinct set and kept in
a bounded LRU, with a memo from (principal, action, resource) to that handle in front of it.

``when`` / ``unless`` conditions are never indexed. Cedar checks a policy's scope before its
conditions, so a policy whose scope does not match can neither be satisfied nor error: the
sliced answer equals the whole-set answer (same decision, same reasons, same errors), and the
cost of a decision depends on how many policies match a request, not on how many exist.
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, TypeAlias

import cedarpy
from cedarpy import pst

from clearance.errors import ConfigError, PolicyError

__all__ = [
    "CedarEngine",
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

_Uid: TypeAlias = tuple[str, str]
"""An entity uid as ``(type, id)``; the engine's internal, hashable form."""

_EMPTY_ANNOTATIONS: Mapping[str, str] = MappingProxyType({})


# --------------------------------------------------------------------------------------------
# Public value types
# --------------------------------------------------------------------------------------------


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

    def as_dict(self) -> dict[str, object]:
        """The problem in ``PolicyError.problems`` form."""
        return {
            "path": self.path,
            "line": self.line,
            "policy_id": self.policy_id,
            "message": self.message,
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


# --------------------------------------------------------------------------------------------
# Source splitting: where each policy starts, so parse errors and PolicyInfo name a line
# --------------------------------------------------------------------------------------------

# Cedar has string literals (with backslash escapes) and `//` line comments, nothing else that
# can hide a `;`. A policy ends at the first `;` outside those.
_TOKEN_RE = re.compile(r'"(?:[^"\\]|\\.)*"?|//[^\n]*|;', re.DOTALL)
_TRIVIA_RE = re.compile(r"(?:\s+|//[^\n]*)*")
_ID_ANNOTATION_RE = re.compile(r'@id\s*\(\s*"((?:[^"\\]|\\.)*)"\s*\)')


@dataclass(frozen=True, slots=True)
class _Chunk:
    path: str | None
    line: int
    text: str


def _split_policies(path: str | None, text: str) -> list[_Chunk]:
    """Split one source into its policies' texts, each with the line it starts on."""
    chunks: list[_Chunk] = []
    start = _TRIVIA_RE.match(text, 0)
    pos = start.end() if start else 0
    line, last = 1, 0
    for m in _TOKEN_RE.finditer(text, pos):
        if m.group() != ";" or m.start() < pos:
            continue
        line += text.count("\n", last, pos)
        last = pos
        chunks.append(_Chunk(path, line, text[pos : m.end()]))
        nxt = _TRIVIA_RE.match(text, m.end())
        pos = nxt.end() if nxt else m.end()
    if pos < len(text):
        # Text after the last `;` (a policy missing its `;`): Cedar will reject it; keep it so
        # the parse error can be pinned to its line.
        line += text.count("\n", last, pos)
        chunks.append(_Chunk(path, line, text[pos:]))
    return chunks


def _normalize_sources(policies: PolicySources) -> list[tuple[str | None, str]]:
    if isinstance(policies, str):
        return [(None, policies)]
    out: list[tuple[str | None, str]] = []
    for item in policies:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], str)):
            raise TypeError("policies must be Cedar text or a sequence of (path, text) pairs")
        out.append((str(item[0]), item[1]))
    return out


def _parse_problems(chunks: list[_Chunk]) -> list[PolicyProblem]:
    """Parse each policy alone to find which ones Cedar rejects (only on the error path)."""
    problems: list[PolicyProblem] = []
    for index, chunk in enumerate(chunks):
        try:
            cedarpy.PolicySet.from_str(chunk.text)
        except ValueError as exc:
            m = _ID_ANNOTATION_RE.search(chunk.text)
            cedar_id = f"policy{index}"
            problems.append(
                PolicyProblem(
                    message=str(exc),
                    policy_id=m.group(1) if m else cedar_id,
                    path=chunk.path,
                    line=chunk.line,
                    cedar_id=cedar_id,
                )
            )
    return problems


# --------------------------------------------------------------------------------------------
# PST → public scope values and index keys
# --------------------------------------------------------------------------------------------


def _uid(e: pst.EntityUid) -> _Uid:
    return (str(e.type), e.id)


def _ref(e: pst.EntityUid) -> EntityRef:
    return EntityRef(str(e.type), e.id)


def _resolve(
    entity: pst.EntityUid | pst.Slot, values: Mapping[str, pst.EntityUid]
) -> pst.EntityUid | pst.Slot:
    if isinstance(entity, pst.Slot) and entity.name in values:
        return values[entity.name]
    return entity


def _scope(constraint: Any, values: Mapping[str, pst.EntityUid]) -> ScopeConstraint:
    """Translate a PST scope constraint, filling template slots from ``values``."""
    if isinstance(constraint, pst.ScopeAny):
        return ScopeConstraint("any")
    if isinstance(constraint, pst.ActionEq):
        return ScopeConstraint("==", (_ref(constraint.entity),))
    if isinstance(constraint, pst.ActionIn):
        return ScopeConstraint("in", tuple(_ref(e) for e in constraint.entities))
    if isinstance(constraint, pst.ScopeIs):
        return ScopeConstraint("is", entity_type=str(constraint.entity_type))
    if isinstance(constraint, pst.ScopeEq | pst.ScopeIn | pst.ScopeIsIn):
        op: Literal["==", "in", "is in"] = (
            "=="
            if isinstance(constraint, pst.ScopeEq)
            else "in"
            if isinstance(constraint, pst.ScopeIn)
            else "is in"
        )
        entity_type = str(constraint.entity_type) if isinstance(constraint, pst.ScopeIsIn) else None
        target = _resolve(constraint.entity, values)
        if isinstance(target, pst.Slot):
            return ScopeConstraint(op, entity_type=entity_type, slot=f"?{target.name}")
        return ScopeConstraint(op, (_ref(target),), entity_type=entity_type)
    # A constraint kind newer than this code: describe it as unconstrained, which only makes
    # the index include the policy more often (never wrongly exclude it).
    return ScopeConstraint("any")


# --------------------------------------------------------------------------------------------
# Entities
# --------------------------------------------------------------------------------------------


def _as_uid(value: Any) -> _Uid:
    """A ``{"type", "id"}`` (or ``{"__entity": {...}}``) dict as an internal uid."""
    if isinstance(value, Mapping):
        inner = value.get("__entity", value)
        if isinstance(inner, Mapping) and "type" in inner and "id" in inner:
            return (str(inner["type"]), str(inner["id"]))
    raise ValueError(f"not an entity uid (expected {{'type': ..., 'id': ...}}): {value!r}")


def _parents_of(entities: Sequence[Mapping[str, Any]]) -> dict[_Uid, tuple[_Uid, ...]]:
    return {_as_uid(e["uid"]): tuple(_as_uid(p) for p in e.get("parents", ())) for e in entities}


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
_Parents: TypeAlias = Mapping[_Uid, tuple[_Uid, ...]]
_Merged: TypeAlias = tuple[Any, _Parents, dict[tuple[_Uid, _Uid, _Uid], Any]]
"""An entity handle with per-request entities added, their parents, and its slice memo."""
_MEMO_SIZE = 8192
"""Bound of each request → slice memo and of the closure memo (cleared when full)."""


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


def _matches(matcher: _Matcher, uid: _Uid, closure: frozenset[_Uid]) -> bool:
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


_ERROR_PREFIX = "error while evaluating policy `"
_ERROR_RE = re.compile(r"error while evaluating policy `(.*?)`: (.*)", re.DOTALL)


# --------------------------------------------------------------------------------------------
# The engine
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Unit:
    """An evaluable policy (static or link) as the index sees it."""

    id: str
    principal: ScopeConstraint
    action: ScopeConstraint
    resource: ScopeConstraint
    template_id: str | None


class CedarEngine:
    """Cedar policies, schema and entities parsed once; sliced evaluation per request.

    Example::

        engine = CedarEngine(
            [("policies/base.cedar", text)],
            schema=schema_text,
            entities=[{"uid": {"type": "User", "id": "alice"}, "attrs": {},
                       "parents": [{"type": "Group", "id": "devs"}]}],
        )
        response = engine.is_authorized(
            {"type": "User", "id": "alice"},
            {"type": "Action", "id": "files.read_file"},
            {"type": "Tool", "id": "files.read_file"},
            context={"path": "README.md"},
        )
        response.decision, response.reasons, response.errors

    Entities passed to the engine and per request are in Cedar's JSON entity form:
    ``{"uid": {"type": "User", "id": "alice"}, "attrs": {...}, "parents": [{"type": ...,
    "id": ...}]}`` (``"tags"`` too when the schema declares them).

    The engine is safe to share between threads; handles are immutable and the slice cache is
    locked.
    """

    def __init__(
        self,
        policies: PolicySources,
        schema: str | Mapping[str, Any] | None = None,
        entities: Sequence[Mapping[str, Any]] | None = None,
        *,
        links: Sequence[Mapping[str, Any]] = (),
        slicing: bool = True,
        cache_size: int = 1024,
    ) -> None:
        """Parse everything once.

        Args:
            policies: Cedar policy text, or ``(path, text)`` pairs. Policy ids are positional
                over the concatenation of the sources (``policy0``, ``policy1``, ...), as
                Cedar assigns them when parsing that text.
            schema: a Cedar schema as Cedar schema text, JSON text or a dict. When given,
                requests and entities are checked against it, and its action groups take part
                in ``action in`` matching.
            entities: the engine's entity store (Cedar JSON entity dicts), e.g. users and
                their groups; merged with each request's own entities.
            links: template links, each ``{"template_id": ..., "new_id": ..., "values":
                {"?principal": {"type": ..., "id": ...}, "?resource": ...}}``. ``template_id``
                is the template's Cedar id or its ``@id``.
            slicing: evaluate only the policies whose scope can match (R10); ``False``
                evaluates the whole set every time (same answers, slower: for comparison).
            cache_size: how many sliced policy sets (and merged entity sets) to keep.

        Raises:
            PolicyError: a policy does not parse (``.path``, ``.line``, ``.policy_id`` name
                the first; ``.problems`` lists all), or a link is invalid.
            ConfigError: the schema or the entities do not parse or do not conform.
        """
        sources = _normalize_sources(policies)
        self._chunks: list[_Chunk] = []
        for path, text in sources:
            self._chunks.extend(_split_policies(path, text))
        full_text = "\n".join(text for _, text in sources)
        try:
            policy_set = cedarpy.PolicySet.from_str(full_text)
        except ValueError as exc:
            problems = _parse_problems(self._chunks) or [
                PolicyProblem(str(exc), None, sources[0][0] if len(sources) == 1 else None, None)
            ]
            first = problems[0]
            raise PolicyError(
                f"policy {first.policy_id} does not parse: {first.message}"
                if first.policy_id
                else f"policies do not parse: {first.message}",
                path=first.path,
                line=first.line,
                policy_id=first.policy_id,
                problems=[p.as_dict() for p in problems],
            ) from exc
        self._policy_text = full_text
        if links:
            try:
                policy_set = policy_set.with_linked_batch([dict(link) for link in links])
            except (ValueError, KeyError) as exc:
                raise PolicyError(f"cannot link templates: {exc}") from exc
        self._policy_set = policy_set

        self._schema_handle: Any = None
        if schema is not None:
            self._schema_handle = _parse_schema(schema)

        self._raw_entities: list[dict[str, Any]] = [dict(e) for e in entities or ()]
        try:
            self._entities = cedarpy.Entities.from_json_str(
                json.dumps(self._raw_entities), self._schema_handle
            )
        except ValueError as exc:
            raise ConfigError(f"entities do not parse or conform to the schema: {exc}") from exc
        # Read the entities back (with the schema's action entities added) so the index sees
        # the same parents graph, action groups included, that Cedar evaluates against.
        self._parents = _parents_of(json.loads(str(self._entities)))

        self._slicing = slicing
        self._cache_size = max(1, cache_size)
        self._lock = threading.Lock()
        self._slices: OrderedDict[frozenset[str], Any] = OrderedDict()
        self._merged: OrderedDict[str, _Merged] = OrderedDict()
        self._hits = 0
        self._misses = 0

        self._load_pst(policy_set.to_pst())

    # ---- policies ---------------------------------------------------------------------------

    def _load_pst(self, tree: pst.PolicySet) -> None:
        located = len(self._chunks) == len(tree.static_policies) + len(tree.templates)
        infos: dict[str, PolicyInfo] = {}
        order: list[str] = []

        def where(policy_id: str) -> tuple[str | None, int | None, str | None]:
            if located and policy_id.startswith("policy") and policy_id[6:].isdigit():
                index = int(policy_id[6:])
                if index < len(self._chunks):
                    chunk = self._chunks[index]
                    return chunk.path, chunk.line, chunk.text
            return None, None, None

        def info(
            policy_id: str,
            node: pst.Template,
            kind: Literal["static", "template", "link"],
            values: Mapping[str, pst.EntityUid],
            template_id: str | None = None,
        ) -> PolicyInfo:
            path, line, text = where(template_id or policy_id)
            return PolicyInfo(
                id=policy_id,
                effect=node.effect,
                kind=kind,
                annotations=MappingProxyType(dict(node.annotations)) or _EMPTY_ANNOTATIONS,
                principal=_scope(node.principal, values),
                action=_scope(node.action, values),
                resource=_scope(node.resource, values),
                conditions=len(node.clauses),
                path=path,
                line=line,
                template_id=template_id,
                text=text,
            )

        for policy_id, node in (*tree.static_policies.items(), *tree.templates.items()):
            kind: Literal["static", "template"] = (
                "template" if policy_id in tree.templates else "static"
            )
            infos[policy_id] = info(policy_id, node, kind, {})
        # Source order (policy0, policy1, ...), whatever order the PST maps come in.
        order.extend(sorted(infos, key=_positional_key))
        for link in tree.template_links:
            template = tree.templates[link.template_id]
            values = {str(slot): uid for slot, uid in link.values.items()}
            infos[link.new_id] = info(link.new_id, template, "link", values, link.template_id)
            order.append(link.new_id)

        self._tree = tree
        self._infos = infos
        self._policy_list = tuple(infos[policy_id] for policy_id in order)
        self._order = {policy_id: n for n, policy_id in enumerate(order)}
        self._annotations: dict[str, Mapping[str, str]] = {
            policy_id: i.annotations for policy_id, i in infos.items()
        }
        self._units = [
            _Unit(i.id, i.principal, i.action, i.resource, i.template_id)
            for i in (infos[policy_id] for policy_id in order)
            if i.kind != "template"
        ]
        self._build_index()

    @property
    def policies(self) -> tuple[PolicyInfo, ...]:
        """Every policy, template and link, in source order (links last)."""
        return self._policy_list

    def policy(self, policy_id: str) -> PolicyInfo:
        """The policy, template or link with this Cedar id.

        Raises:
            KeyError: no policy has this id.
        """
        return self._infos[policy_id]

    def validate(self, schema: str | Mapping[str, Any] | None = None) -> tuple[PolicyProblem, ...]:
        """Validate the policies (templates included) against a schema with Cedar's validator.

        Args:
            schema: the schema to validate against; defaults to the engine's.

        Returns:
            Every problem found, each with the policy's label, file and line; empty when the
            policies validate.

        Raises:
            ValueError: no schema was given here or to the engine.
            ConfigError: ``schema`` does not parse.
        """
        handle = _parse_schema(schema) if schema is not None else self._schema_handle
        if handle is None:
            raise ValueError("validate() needs a schema: pass one here or to the engine")
        result = cedarpy.validate_policies(self._policy_text, handle)
        problems: list[PolicyProblem] = []
        for error in result.errors:
            cedar_id = error.policy_id or None
            info = self._infos.get(cedar_id) if cedar_id else None
            problems.append(
                PolicyProblem(
                    message=error.error,
                    policy_id=info.label if info else cedar_id,
                    path=info.path if info else None,
                    line=info.line if info else None,
                    cedar_id=cedar_id,
                )
            )
        return tuple(problems)

    # ---- index (R10) -------------------------------------------------------------------------

    def _build_index(self) -> None:
        """Put each evaluable policy in the bucket(s) of its most selective scope constraint.

        A constraint's keys are the entity it names (``==``, ``in``, ``is in``; every entity of
        an ``action in [...]`` list) or, for ``is``, the entity type. A request can only match
        the constraint if one of its keys is the request's entity, one of that entity's
        ancestors, or its type, so looking those up finds every policy that can match.
        Indexing one constraint per policy is enough, since the candidates are then checked
        against all three; the cheapest is the one whose keys are shared by the fewest
        policies (a thousand ``principal in Group::"devs"`` policies spread over a thousand
        actions land in the action buckets).
        """
        options: list[list[tuple[int, tuple[Any, ...]]]] = []
        counts: dict[tuple[int, Any], int] = {}
        for unit in self._units:
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
        self._bucket_count = len(members)
        self._always = tuple(always)
        self._matchers: list[tuple[str, _Matcher, _Matcher, _Matcher]] = [
            (u.id, _matcher(u.principal), _matcher(u.action), _matcher(u.resource))
            for u in self._units
        ]
        self._closures: dict[_Uid, frozenset[_Uid]] = {}
        # Request (principal, action, resource) → sliced PolicySet, for requests without
        # per-request entities (those have a memo of their own in _merged).
        self._memo: dict[tuple[_Uid, _Uid, _Uid], Any] = {}

    def _closure(self, uid: _Uid, overlay: _Parents | None) -> frozenset[_Uid]:
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
            if len(self._closures) >= _MEMO_SIZE:
                self._closures.clear()
            self._closures[uid] = closure
        return closure

    def _select(
        self, principal: _Uid, action: _Uid, resource: _Uid, overlay: _Parents | None
    ) -> frozenset[str]:
        """The ids of exactly the policies whose scope matches the request."""
        tables = self._tables
        candidates = set(self._always)
        closures = []
        for dim, uid in ((_PRINCIPAL, principal), (_ACTION, action), (_RESOURCE, resource)):
            closure = self._closure(uid, overlay)
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

    def _slice_handle(self, ids: frozenset[str]) -> Any:
        """The ``PolicySet`` of exactly these policies, from the LRU or built from the PST.

        Building costs Cedar about as much per policy as parsing it, so slices are kept and
        shared by every request whose scope matches the same policies.
        """
        with self._lock:
            handle = self._slices.get(ids)
            if handle is not None:
                self._slices.move_to_end(ids)
                self._hits += 1
                return handle
            self._misses += 1
        tree = self._tree
        static = {i: tree.static_policies[i] for i in ids if i in tree.static_policies}
        links = tuple(link for link in tree.template_links if link.new_id in ids)
        templates = {link.template_id: tree.templates[link.template_id] for link in links}
        handle = cedarpy.PolicySet.from_pst(
            pst.PolicySet(templates=templates, static_policies=static, template_links=links)
        )
        with self._lock:
            self._slices[ids] = handle
            if len(self._slices) > self._cache_size:
                self._slices.popitem(last=False)
        return handle

    def slice(
        self,
        principal: Mapping[str, Any],
        action: Mapping[str, Any],
        resource: Mapping[str, Any],
        entities: Sequence[Mapping[str, Any]] | None = None,
    ) -> frozenset[str]:
        """The ids of the policies ``is_authorized`` evaluates for such a request.

        Exactly the evaluable policies (static policies and template links) whose scope
        matches the request, with ``in`` resolved through the entities' parents and the
        schema's action groups; every policy without slicing. For tests, benchmarks and
        explanations.

        Args:
            principal: as for ``is_authorized``.
            action: as for ``is_authorized``.
            resource: as for ``is_authorized``.
            entities: as for ``is_authorized``; their parents count for ``in``.

        Raises:
            ValueError: an entity is not a ``{"type", "id"}`` dict.
        """
        if not self._slicing:
            return frozenset(m[0] for m in self._matchers)
        overlay = _parents_of(entities) if entities else None
        return self._select(_as_uid(principal), _as_uid(action), _as_uid(resource), overlay)

    # ---- evaluation --------------------------------------------------------------------------

    def is_authorized(
        self,
        principal: Mapping[str, Any],
        action: Mapping[str, Any],
        resource: Mapping[str, Any],
        context: Mapping[str, Any] | None = None,
        entities: Sequence[Mapping[str, Any]] | None = None,
    ) -> CedarResponse:
        """Decide one request, exactly as Cedar would on the whole policy set.

        Args:
            principal: ``{"type": ..., "id": ...}``.
            action: ``{"type": "Action", "id": ...}`` (or ``"MyApp::Action"``).
            resource: ``{"type": ..., "id": ...}``.
            context: the request context (a JSON-like dict); ``None`` is ``{}``.
            entities: per-request entities (Cedar JSON entity dicts), e.g. the principal with
                its attributes and parents, or the tool. They are added to the engine's; one
                with the same uid as an engine entity replaces it for this request.

        Returns:
            The decision, the determining policies and the policies that errored. A request or
            per-request entities that do not conform to the schema give ``"deny"`` with an
            error whose ``policy_id`` is ``None`` (Cedar's "no decision").

        Raises:
            ValueError: ``principal``, ``action``, ``resource`` or an entity's ``uid`` is not
                a ``{"type", "id"}`` dict.
        """
        request = {
            "principal": principal,
            "action": action,
            "resource": resource,
            "context": context if context is not None else {},
        }
        if entities:
            try:
                merged = self._merged_entities(entities)
            except ValueError as exc:
                return CedarResponse("deny", (), (CedarError(None, str(exc)),))
            entity_handle, overlay, memo = merged
        else:
            entity_handle, overlay, memo = self._entities, None, self._memo
        if self._slicing:
            try:
                key = (
                    (principal["type"], principal["id"]),
                    (action["type"], action["id"]),
                    (resource["type"], resource["id"]),
                )
                policy_set = memo.get(key)
            except (KeyError, TypeError):
                # Not plain {"type", "id"} dicts: normalize (or raise ValueError).
                key = (_as_uid(principal), _as_uid(action), _as_uid(resource))
                policy_set = memo.get(key)
            if policy_set is None:
                policy_set = self._slice_handle(self._select(*key, overlay))
                if len(memo) >= _MEMO_SIZE:
                    memo.clear()
                memo[key] = policy_set
        else:
            policy_set = self._policy_set
        allowed, reasons, errors = _authorize(
            request, policy_set, entity_handle, self._schema_handle
        )
        return self._response(allowed, reasons, errors)

    def _merged_entities(self, entities: Sequence[Mapping[str, Any]]) -> _Merged:
        """The engine's entities plus ``entities``, their parents, and a slice memo for them.

        Cached by the entities' JSON: merging clones the whole entity store (and revalidates it
        against the schema), which costs far more than a decision, while the same principal or
        tool entity usually comes back request after request.
        """
        delta = json.dumps(entities if isinstance(entities, list) else list(entities))
        with self._lock:
            cached = self._merged.get(delta)
            if cached is not None:
                self._merged.move_to_end(delta)
                return cached
        overlay = _parents_of(entities)
        try:
            handle = self._entities.with_added_json_str(delta, self._schema_handle)
        except ValueError as exc:
            if "duplicate entity entry" not in str(exc):
                raise
            # A per-request entity replaces the engine's entity with the same uid.
            kept = [e for e in self._raw_entities if _as_uid(e["uid"]) not in overlay]
            kept.extend(dict(e) for e in entities)
            handle = cedarpy.Entities.from_json_str(json.dumps(kept), self._schema_handle)
        merged: _Merged = (handle, overlay, {})
        with self._lock:
            self._merged[delta] = merged
            if len(self._merged) > self._cache_size:
                self._merged.popitem(last=False)
        return merged

    def _response(
        self, allowed: bool, reasons: Sequence[str], raw_errors: Sequence[str]
    ) -> CedarResponse:
        # On the hot path: a decision usually has one or two reasons and no errors, so the
        # sorting and the error parsing are skipped when there is nothing to do.
        order = self._order
        last = len(order)
        if len(reasons) > 1:
            reasons = sorted(reasons, key=lambda pid: order.get(pid, last))
        known = self._annotations
        annotations = {pid: known.get(pid, _EMPTY_ANNOTATIONS) for pid in reasons}
        errors: tuple[CedarError, ...] = ()
        if raw_errors:
            errors = tuple(
                sorted(
                    (self._error(text) for text in raw_errors),
                    key=lambda e: order.get(e.policy_id, last) if e.policy_id else last + 1,
                )
            )
            for error in errors:
                if error.policy_id:
                    annotations[error.policy_id] = known.get(error.policy_id, _EMPTY_ANNOTATIONS)
        return CedarResponse("allow" if allowed else "deny", tuple(reasons), errors, annotations)

    def _error(self, text: str) -> CedarError:
        m = _ERROR_RE.match(text)
        if m and m.group(1) in self._infos:
            return CedarError(m.group(1), m.group(2))
        if text.startswith(_ERROR_PREFIX):
            # A link id may itself contain "`: "; find the known id the message names.
            rest = text[len(_ERROR_PREFIX) :]
            for policy_id in self._infos:
                if rest.startswith(f"{policy_id}`: "):
                    return CedarError(policy_id, rest[len(policy_id) + 3 :])
        return CedarError(None, text)

    def statistics(self) -> EngineStatistics:
        """Counters for the policies, the index and the slice cache."""
        with self._lock:
            return EngineStatistics(
                policies=len(self._units),
                templates=len(self._tree.templates),
                links=len(self._tree.template_links),
                buckets=self._bucket_count,
                always=len(self._always),
                slices_cached=len(self._slices),
                slice_hits=self._hits,
                slice_misses=self._misses,
            )


def _positional_key(policy_id: str) -> tuple[int, int, str]:
    if policy_id.startswith("policy") and policy_id[6:].isdigit():
        return (0, int(policy_id[6:]), "")
    return (1, 0, policy_id)


def _parse_schema(schema: str | Mapping[str, Any]) -> Any:
    try:
        if isinstance(schema, Mapping):
            return cedarpy.Schema.from_json_str(json.dumps(schema))
        if schema.lstrip().startswith("{"):
            return cedarpy.Schema.from_json_str(schema)
        return cedarpy.Schema.from_str(schema)
    except ValueError as exc:
        raise ConfigError(f"the Cedar schema does not parse: {exc}") from exc


def format_policies(text: str) -> str:
    """Cedar's own formatting of policy text (comments kept).

    Raises:
        ValueError: the text does not parse, or formatting would change the policies it
            parses to (the result is checked against the original).
    """
    formatted: str = cedarpy.format_policies(text)
    if cedarpy.policies_to_json_str(formatted) != cedarpy.policies_to_json_str(text):
        raise ValueError("formatting would change the policies; left as is")
    return formatted


# --- the call into Cedar ----------------------------------------------------------------------

_INTERNAL: Any = getattr(getattr(cedarpy, "_internal", None), "is_authorized_batch", None)
_fast: bool | None = None
"""Whether the direct path agrees with ``cedarpy.is_authorized`` (checked on first use)."""


def _authorize(
    request: dict[str, Any], policies: Any, entities: Any, schema: Any
) -> tuple[bool, list[str], list[str]]:
    """One Cedar decision: ``(allowed, determining policy ids, error messages)``.

    ``cedarpy.is_authorized`` wraps the Rust call in a batch of one, copies the request and
    builds result objects, about a third of a decision's cost. The Rust entry point under it
    is called directly instead, the same way the wrapper calls it, once a first decision
    has shown that both paths answer alike; otherwise (another cedarpy, a different
    answer) every decision goes through the public function. The R10 property compares
    this engine with the public function on every run.
    """
    global _fast
    if _fast is not False and _INTERNAL is not None:
        try:
            fast = _fast_authorize(request, policies, entities, schema)
        except Exception:  # an internal API that changed shape: stop using it
            _fast = False
        else:
            if _fast is None:
                public = cedarpy.is_authorized(request, policies, entities, schema)
                slow = (public.allowed, public.diagnostics.reasons, public.diagnostics.errors)
                _fast = fast == slow
                return slow
            return fast
    result = cedarpy.is_authorized(request, policies, entities, schema)
    return result.allowed, result.diagnostics.reasons, result.diagnostics.errors


def _fast_authorize(
    request: dict[str, Any], policies: Any, entities: Any, schema: Any
) -> tuple[bool, list[str], list[str]]:
    context = request.get("context")
    call = {**request, "context": json.dumps(context)} if context is not None else request
    raw = json.loads(_INTERNAL([call], policies, entities._inner, schema, False)[0])
    diagnostics = raw.get("diagnostics") or {}
    return (
        raw["decision"] == "Allow",
        diagnostics.get("reason", []),
        diagnostics.get("errors", []),
    )
