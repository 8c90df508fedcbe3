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

Where each part lives: the value types in ``_values``, reading Cedar text (locations, scopes,
schemas, error messages) in ``_parsing``, the scope index in ``_index``, the call into Cedar
in ``_call``; this module holds :class:`CedarEngine`, which puts them together, and
re-exports the public names.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, TypeAlias

import cedarpy
from cedarpy import pst

from clearance.errors import ConfigError, PolicyError
from clearance.policy.cedar._call import cedar_call
from clearance.policy.cedar._index import (
    MEMO_SIZE,
    Parents,
    ScopeIndex,
    Uid,
    Unit,
    as_uid,
    parents_of,
)
from clearance.policy.cedar._parsing import (
    EMPTY_ANNOTATIONS,
    Chunk,
    format_policies,
    normalize_sources,
    parse_error,
    parse_problems,
    parse_schema,
    policy_infos,
    split_policies,
)
from clearance.policy.cedar._values import (
    CedarError,
    CedarResponse,
    EngineStatistics,
    EntityRef,
    PolicyInfo,
    PolicyProblem,
    PolicySources,
    ScopeConstraint,
)

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
    "format_policies",
]

_Merged: TypeAlias = tuple[Any, Parents, dict[tuple[Uid, Uid, Uid], Any]]
"""An entity handle with per-request entities added, their parents, and its slice memo."""


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
        sources = normalize_sources(policies)
        self._chunks: list[Chunk] = []
        for path, text in sources:
            self._chunks.extend(split_policies(path, text))
        full_text = "\n".join(text for _, text in sources)
        try:
            policy_set = cedarpy.PolicySet.from_str(full_text)
        except ValueError as exc:
            problems = parse_problems(self._chunks, dict(sources)) or [
                PolicyProblem(str(exc), None, sources[0][0] if len(sources) == 1 else None, None)
            ]
            first = problems[0]
            raise PolicyError(
                f"policy {first.policy_id} does not parse: {first.message}"
                if first.policy_id
                else f"policies do not parse: {first.message}",
                path=first.path,
                line=first.line,
                column=first.column,
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
            self._schema_handle = parse_schema(schema)

        self._raw_entities: list[dict[str, Any]] = [dict(e) for e in entities or ()]
        try:
            self._entities = cedarpy.Entities.from_json_str(
                json.dumps(self._raw_entities), self._schema_handle
            )
        except ValueError as exc:
            detail = _nonconforming(self._raw_entities, schema)
            raise ConfigError(
                f"entities do not parse or conform to the schema: {exc}"
                + (f": {detail}" if detail else "")
            ) from exc
        # Read the entities back (with the schema's action entities added) so the index sees
        # the same parents graph, action groups included, that Cedar evaluates against.
        self._parents = parents_of(json.loads(str(self._entities)))

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
        infos = policy_infos(tree, self._chunks)
        self._tree = tree
        self._infos = infos
        self._policy_list = tuple(infos.values())
        self._order = {policy_id: n for n, policy_id in enumerate(infos)}
        self._annotations: dict[str, Mapping[str, str]] = {
            policy_id: i.annotations for policy_id, i in infos.items()
        }
        self._units = [
            Unit(i.id, i.principal, i.action, i.resource, i.template_id)
            for i in infos.values()
            if i.kind != "template"
        ]
        self._index = ScopeIndex(self._units, self._parents)
        # Request (principal, action, resource) → sliced PolicySet, for requests without
        # per-request entities (those have a memo of their own in _merged).
        self._memo: dict[tuple[Uid, Uid, Uid], Any] = {}
        # (allowed, *reasons) → the response of an answer without errors.
        self._responses: dict[tuple[Any, ...], CedarResponse] = {}

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
        handle = parse_schema(schema) if schema is not None else self._schema_handle
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

    # ---- slicing (R10) -----------------------------------------------------------------------

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
            return self._index.policy_ids
        overlay = parents_of(entities) if entities else None
        return self._index.select(as_uid(principal), as_uid(action), as_uid(resource), overlay)

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
                key = (as_uid(principal), as_uid(action), as_uid(resource))
                policy_set = memo.get(key)
            if policy_set is None:
                policy_set = self._slice_handle(self._index.select(*key, overlay))
                if len(memo) >= MEMO_SIZE:
                    memo.clear()
                memo[key] = policy_set
        else:
            policy_set = self._policy_set
        allowed, reasons, errors = cedar_call.authorize(
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
        overlay = parents_of(entities)
        try:
            handle = self._entities.with_added_json_str(delta, self._schema_handle)
        except ValueError as exc:
            if "duplicate entity entry" not in str(exc):
                raise
            # A per-request entity replaces the engine's entity with the same uid.
            kept = [e for e in self._raw_entities if as_uid(e["uid"]) not in overlay]
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
        # sorting and the error parsing are skipped when there is nothing to do, and such
        # a response (an immutable value: the decision, the reasons and their annotations)
        # is built once per distinct answer.
        if not raw_errors:
            key = (allowed, *reasons)
            cached = self._responses.get(key)
            if cached is None:
                cached = self._build_response(allowed, reasons, raw_errors)
                if len(self._responses) >= MEMO_SIZE:
                    self._responses.clear()
                self._responses[key] = cached
            return cached
        return self._build_response(allowed, reasons, raw_errors)

    def _build_response(
        self, allowed: bool, reasons: Sequence[str], raw_errors: Sequence[str]
    ) -> CedarResponse:
        order = self._order
        last = len(order)
        if len(reasons) > 1:
            reasons = sorted(reasons, key=lambda pid: order.get(pid, last))
        known = self._annotations
        annotations = {pid: known.get(pid, EMPTY_ANNOTATIONS) for pid in reasons}
        errors: tuple[CedarError, ...] = ()
        if raw_errors:
            errors = tuple(
                sorted(
                    (parse_error(text, self._infos) for text in raw_errors),
                    key=lambda e: order.get(e.policy_id, last) if e.policy_id else last + 1,
                )
            )
            for error in errors:
                if error.policy_id:
                    annotations[error.policy_id] = known.get(error.policy_id, EMPTY_ANNOTATIONS)
        return CedarResponse(
            "allow" if allowed else "deny",
            tuple(reasons),
            errors,
            MappingProxyType(annotations),  # read-only: responses without errors are shared
        )

    def statistics(self) -> EngineStatistics:
        """Counters for the policies, the index and the slice cache."""
        with self._lock:
            return EngineStatistics(
                policies=len(self._units),
                templates=len(self._tree.templates),
                links=len(self._tree.template_links),
                buckets=self._index.buckets,
                always=self._index.always,
                slices_cached=len(self._slices),
                slice_hits=self._hits,
                slice_misses=self._misses,
            )


_PROBE = {"principal": 'P::"p"', "action": 'Action::"probe"', "resource": 'P::"p"', "context": {}}
_CONFORM = "entity does not conform to the schema: "


def _nonconforming(entities: Sequence[Mapping[str, Any]], schema: Any) -> str | None:
    """What Cedar says is wrong with ``entities`` (which entity, which attribute, what
    type), which ``Entities.from_json_str`` leaves out and ``is_authorized`` reports."""
    if schema is None:
        return None
    text = schema if isinstance(schema, str) else json.dumps(schema)
    try:
        result = cedarpy.is_authorized(_PROBE, "", json.dumps(list(entities)), schema=text)
    except (ValueError, TypeError, RuntimeError):
        return None
    for error in result.diagnostics.errors:
        _, found, detail = str(error).partition(_CONFORM)
        if found:
            return detail.strip()
    return None
