"""Every request a tool can receive, as z3 variables, and each policy set's verdict on it.

For a tool the action and the resource are fixed (``Action::"files.read_file"`` on
``Tool::"files.read_file"``, its groups and namespace known), and so is ``context.tool``
(the tool's ``read_only`` and annotations). What varies is the principal (each declared
principal type is an *environment*, picked by one selector variable; its id, its
attributes and the groups the host puts it in are variables) and the rest of the context
(variables of the types the schema gives them).

A principal is ``in`` a group when the host gives it that group (or a group below it in
the set's ``entities.json``) as a parent, or when its id is an entity of ``entities.json``
that is in the group. Two policy sets compared share the request's variables, each with
its own entities.

Verdicts follow ``_verdicts``: a forbid that applies or errs denies; otherwise a permit
that applies allows, and only ``@ask`` permits applying asks; nothing applying denies.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import z3
from cedarpy import pst

from clearance.errors import PolicyError
from clearance.policy.cedar._cedar_types import RecordType
from clearance.policy.cedar._loading import LoadedSet
from clearance.policy.cedar._values import PolicyInfo
from clearance.policy.cedar.analysis._encode import Env, encode_policy, scope_holds
from clearance.policy.cedar.analysis._values import (
    EntityVal,
    Outside,
    RecordVal,
    constant,
    decode,
    fresh,
    pin,
    string_of,
)
from clearance.policy.cedar.entities import to_cedar, tool_entities, type_from_json, uid_key
from clearance.types import ToolLike

__all__ = ["Request", "SetView", "ToolWorld", "nodes_under", "set_bound"]

_SET_BOUND_LIMIT = 48
_SCALARS = (pst.BoolLit, pst.LongLit, pst.StringLit, pst.EntityLit)
"""Literals that are not sets: an equality with one compares no sets."""


@dataclass(slots=True)
class SetView:
    """One loaded policy set, as the analysis reads it."""

    loaded: LoadedSet
    nodes: Mapping[str, pst.Template]
    infos: tuple[PolicyInfo, ...]
    """The static policies (templates and links are refused before this is built)."""
    ancestors: dict[tuple[str, str], frozenset[tuple[str, str]]] = field(default_factory=dict)
    attrs: dict[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)
    entities: list[dict[str, Any]] = field(default_factory=list)
    """Every entity the set's engine holds (tools, namespaces, actions, ``entities.json``)."""
    _by_action: dict[tuple[str, str] | None, list[tuple[int, PolicyInfo]]] | None = None

    @classmethod
    def of(
        cls, loaded: LoadedSet, nodes: Mapping[str, pst.Template], tools: Sequence[ToolLike]
    ) -> SetView:
        model = loaded.model
        action_type = model.action_type
        entities: list[dict[str, Any]] = [*tool_entities(tools, model.namespace)]
        for name, decl in model.json[model.namespace]["actions"].items():
            groups = [{"type": action_type, "id": r["id"]} for r in decl.get("memberOf", [])]
            entities.append(
                {"uid": {"type": action_type, "id": name}, "attrs": {}, "parents": groups}
            )
        entities.extend(dict(e) for e in loaded.extra_by_uid.values())
        parents = {uid_key(e["uid"]): [uid_key(p) for p in e.get("parents", [])] for e in entities}
        view = cls(loaded, nodes, tuple(i for i in loaded.engine.policies if i.kind == "static"))
        view.entities = entities
        for e in entities:
            key = uid_key(e["uid"])
            view.attrs[key] = e.get("attrs", {})
            seen: set[tuple[str, str]] = set()
            todo = list(parents.get(key, []))
            while todo:
                up = todo.pop()
                if up not in seen:
                    seen.add(up)
                    todo.extend(parents.get(up, []))
            view.ancestors[key] = frozenset(seen)
        return view

    def candidates(self, tool: str) -> list[PolicyInfo]:
        """The policies whose action scope can match ``tool``'s action, in set order
        (indexed once, so that the work is linear in policies plus tools)."""
        if self._by_action is None:
            self._by_action = {}
            for n, info in enumerate(self.infos):
                action = self.nodes[info.id].action
                targets = (
                    [None]
                    if isinstance(action, pst.ScopeAny)
                    else [action.entity]
                    if isinstance(action, pst.ActionEq)
                    else list(action.entities)
                )
                for target in targets:
                    key = None if target is None else (str(target.type), target.id)
                    self._by_action.setdefault(key, []).append((n, info))
        key = (self.loaded.model.action_type, tool)
        found: dict[int, PolicyInfo] = {}
        for k in (None, key, *self.ancestors.get(key, ())):
            found.update(self._by_action.get(k, []))
        return [found[n] for n in sorted(found)]

    def entity(self, kind: str, ident: str) -> EntityVal:
        """A constant entity; one the set does not hold has no attributes (Cedar's ``has``
        is false on it)."""
        attrs = self.attrs.get((kind, ident))
        record: RecordVal | None = None
        if attrs is not None:
            try:
                value = constant(dict(attrs))
                record = value if isinstance(value, RecordVal) else None
            except Outside as exc:
                record = _Opaque(f"the attributes of {kind}::{json.dumps(ident)} ({exc})")
        return EntityVal(kind, ident, record, self.ancestors.get((kind, ident), frozenset()))


class _Opaque(RecordVal):
    """The attributes of an entity the analysis cannot encode: reading one is refused."""

    def __init__(self, why: str) -> None:
        super().__init__()
        self.name = why

    def get(self, attr: str) -> tuple[Any, Any] | None:
        raise Outside(self.name)


def set_bound(nodes: Sequence[pst.Template]) -> int:
    """How many elements a set in the request needs, at most, for the policies ``nodes``
    to tell every request apart: one per set operation (a witness for ``contains``,
    ``containsAny``, a non-empty set, a missing element) plus the size of each literal set
    a request's set must hold (``s.containsAll([...])``, ``s == [...]``). Removing every
    other element of a satisfying request's sets changes no operation's result.

    Raises:
        Outside: more than the analysis takes on.
    """
    total = 1
    for node in nodes_under(*nodes):
        if isinstance(node, pst.BinaryOp | pst.UnaryOp):
            op = node.op
            if op in ("contains", "contains_any", "is_empty"):
                total += 1
            elif op == "contains_all":
                inside = node.right  # type: ignore[union-attr]
                total += 1 + (len(inside.elements) if isinstance(inside, pst.Set) else 0)
            elif op in ("eq", "not_eq") and not (
                isinstance(node.left, _SCALARS) or isinstance(node.right, _SCALARS)  # type: ignore[union-attr]
            ):
                literal = [s for s in (node.left, node.right) if isinstance(s, pst.Set)]  # type: ignore[union-attr]
                total += 1 + sum(len(s.elements) for s in literal)
    if total > _SET_BOUND_LIMIT:
        raise Outside(
            f"{total} set operations on one tool (the analysis takes up to {_SET_BOUND_LIMIT})"
        )
    return total


@dataclass(slots=True)
class Request:
    """A concrete request the solver found, in the engine's terms."""

    tool: str
    principal: dict[str, Any]
    """The principal entity (uid, attrs, parents)."""
    action: dict[str, str]
    resource: dict[str, str]
    context: dict[str, Any]
    read: dict[str, Any] = field(default_factory=dict)
    """The context attributes the policies read (what the example is about)."""

    def describe(self) -> str:
        """One line: who calls which tool with what the policies read."""
        uid = self.principal["uid"]
        who = f"{uid['type']}::{json.dumps(uid['id'], ensure_ascii=False)}"
        groups = [
            f"{p['type']}::{json.dumps(p['id'], ensure_ascii=False)}"
            for p in self.principal["parents"]
        ]
        if groups:
            who += f" (in {', '.join(groups)})"
        if self.principal["attrs"]:
            who += (
                f" with {json.dumps(self.principal['attrs'], ensure_ascii=False, sort_keys=True)}"
            )
        read = json.dumps(self.read, ensure_ascii=False, sort_keys=True)
        return f"{who} calls {self.tool} with context {read}"


class ToolWorld:
    """The requests for one tool, shared by the sets compared, and each set's formulas."""

    def __init__(self, tool: ToolLike, views: Sequence[SetView], index: int) -> None:
        self.tool = tool
        self.views = views
        first = views[0].loaded
        model = first.model
        name = tool.qualified_name
        prefix = f"t{index}"
        self.facts: list[Any] = []
        candidates = [view.candidates(name) for view in views]
        relevant = [
            view.nodes[i.id] for view, infos in zip(views, candidates, strict=True) for i in infos
        ]
        try:
            self.bound = bound = set_bound(relevant)
        except Outside as exc:
            raise PolicyError(f"tool {name}: {exc}") from None
        ns = model.namespace
        commons = model.json[ns].get("commonTypes", {})
        decl = model.json[ns]["actions"][name]["appliesTo"]["context"]
        context_type = type_from_json(decl, commons, ns)
        if not isinstance(context_type, RecordType):
            raise PolicyError(f"tool {name}: its context is not a record")
        self.context = RecordVal(
            shape=context_type, name=f"{prefix}.context", bound=bound, facts=self.facts
        )
        tool_type = context_type.attributes["tool"].type
        tool_value = to_cedar(
            tool_type, {"read_only": tool.read_only, "annotations": dict(tool.annotations)}, "tool"
        )
        self.tool_value = tool_value
        """``context.tool``: fixed for the tool."""
        self.context.fields["tool"] = (z3.BoolVal(True), constant(tool_value, tool_type))
        self.principal_id = z3.String(f"{prefix}.principal")
        self.types = tuple(model.qualify(t) for t in model.principal_types)
        self.selector = z3.Int(f"{prefix}.principal_type")
        self.facts.append(z3.And(self.selector >= 0, self.selector < len(self.types)))
        self.attrs: dict[str, RecordVal] = {}
        for t, shape in first.principal_shapes.items():
            attrs = fresh(shape, f"{prefix}.{t}", bound, self.facts) if shape else RecordVal()
            self.attrs[t] = attrs if isinstance(attrs, RecordVal) else RecordVal()
        self.direct: dict[tuple[str, str], Any] = {}
        """The groups the host may give the principal (created as policies ask)."""
        self.action = {"type": model.action_type, "id": name}
        self.resource = {"type": model.qualify("Tool"), "id": name}
        self.encoded: list[dict[str, list[tuple[Any, Any]]]] = []
        same_store = all(
            (v.ancestors, v.attrs) == (views[0].ancestors, views[0].attrs) for v in views
        )
        cache: dict[tuple[Any, ...], tuple[Any, Any] | None] = {}
        for which, view in enumerate(views):
            per_policy: dict[str, list[tuple[Any, Any]]] = {}
            envs = [self._env(view, kind) for kind in self.types]
            for info in candidates[which]:
                node = view.nodes[info.id]
                # A policy that does not name the principal encodes alike for every
                # principal type, and alike in every set holding the same entities.
                own = _names_principal(node)
                store = None if same_store else which
                for i, env in enumerate(envs if own else envs[:1]):
                    key = (node, i if own else None, store)
                    if key not in cache:
                        cache[key] = self._encode(node, env, info)
                    found = cache[key]
                    if found is not None:
                        sat, err = found
                        if own:
                            sat, err = (
                                z3.And(self.selector == i, sat),
                                z3.And(self.selector == i, err),
                            )
                        per_policy.setdefault(info.id, []).append((sat, err))
            self.encoded.append(per_policy)

    @staticmethod
    def _encode(node: pst.Template, env: Env, info: PolicyInfo) -> tuple[Any, Any] | None:
        """(satisfied, errs) of ``node`` in ``env``; None when its scope cannot match."""
        try:
            if not scope_holds(node, env):
                return None
            return encode_policy(node, env)
        except Outside as exc:
            raise PolicyError(
                f"policy {info.label}: {exc} is outside what the analysis encodes",
                path=info.path,
                line=info.line,
                policy_id=info.label,
            ) from None

    def _env(self, view: SetView, kind: str) -> Env:
        allowed = set(
            view.loaded.model.entity_types.get(kind.rsplit("::", 1)[-1], {}).get("memberOfTypes")
            or ()
        )
        allowed = {view.loaded.model.qualify(t) for t in allowed}
        known = [k for k in view.ancestors if k[0] == kind]

        def member_of(group_type: str, group_id: str) -> Any:
            target = (group_type, group_id)
            # The principal is in itself (known to the set or not), and in the groups of
            # the entity of entities.json it is.
            options = [self.principal_id == z3.StringVal(group_id)] if group_type == kind else []
            options += [
                self.principal_id == z3.StringVal(k[1])
                for k in known
                if target in view.ancestors[k]
            ]
            below = [k for k in view.ancestors if target in view.ancestors[k]]
            options.extend(self._direct(p) for p in [target, *below] if p[0] in allowed)
            return z3.Or(z3.BoolVal(False), *options)

        principal = EntityVal(
            kind, self.principal_id, self.attrs.get(kind) or RecordVal(), member_of=member_of
        )
        action = view.entity(self.action["type"], self.action["id"])
        resource = view.entity(self.resource["type"], self.resource["id"])
        return Env(principal, action, resource, self.context, view.entity)

    def _direct(self, group: tuple[str, str]) -> Any:
        var = self.direct.get(group)
        if var is None:
            var = self.direct[group] = z3.Bool(f"{self.principal_id}.in.{group[0]}::{group[1]}")
        return var

    def relevant(self, which: int) -> bool:
        """Whether any policy of the set can apply to this tool."""
        return bool(self.encoded[which])

    def applies(self, which: int, policy_id: str) -> Any:
        """The requests where the policy is satisfied."""
        return z3.Or(z3.BoolVal(False), *(s for s, _ in self.encoded[which].get(policy_id, [])))

    def hits(self, which: int, policy_id: str) -> Any:
        """The requests where the policy is satisfied or errs."""
        return z3.Or(
            z3.BoolVal(False), *(z3.Or(s, e) for s, e in self.encoded[which].get(policy_id, []))
        )

    def _infos(self, which: int, effect: str) -> list[PolicyInfo]:
        """The set's policies of ``effect`` that can apply to this tool, in set order."""
        encoded = self.encoded[which]
        return [i for i in self.views[which].infos if i.effect == effect and i.id in encoded]

    def forbidden(self, which: int) -> Any:
        """The requests where a forbid of the set applies or errs (both deny)."""
        return _or(self.hits(which, i.id) for i in self._infos(which, "forbid"))

    def verdicts(self, which: int) -> dict[str, Any]:
        """``allow``, ``ask``, ``deny``: the requests the set decides each way."""
        forbid = self.forbidden(which)
        permits = self._infos(which, "permit")
        plain = _or(self.applies(which, i.id) for i in permits if "ask" not in i.annotations)
        asked = _or(self.applies(which, i.id) for i in permits if "ask" in i.annotations)
        allow = z3.And(z3.Not(forbid), plain)
        ask = z3.And(z3.Not(forbid), z3.Not(plain), asked)
        return {"allow": allow, "ask": ask, "deny": z3.Not(z3.Or(allow, ask))}

    def pinned(self, request: Request) -> list[Any]:
        """Constraints that make the world's variables ``request`` (for checking the
        encoding against Cedar on a given request: the verdict formulas then hold or not).

        Raises:
            ValueError: a set of ``request`` is larger than the world's sets.
        """
        uid = request.principal["uid"]
        parents = [(p["type"], p["id"]) for p in request.principal["parents"]]
        out = [
            self.selector == self.types.index(uid["type"]),
            self.principal_id == z3.StringVal(uid["id"]),
            *(var == z3.BoolVal(group in parents) for group, var in self.direct.items()),
            *pin(self.context, request.context),
        ]
        attrs = self.attrs.get(uid["type"])
        if attrs is not None:
            out.extend(pin(attrs, request.principal["attrs"]))
        return out

    def request(self, model: z3.ModelRef, which: int = 0) -> Request:
        """The concrete request ``model`` describes."""
        kind = self.types[model.eval(self.selector, model_completion=True).as_long()]
        ident = string_of(model, self.principal_id)
        attrs = self.attrs.get(kind)
        principal_attrs = (
            decode(model, attrs) if isinstance(attrs, RecordVal) and attrs.shape else {}
        )
        parents = [
            {"type": t, "id": i}
            for (t, i), var in sorted(self.direct.items())
            if z3.is_true(model.eval(var, model_completion=True))
        ]
        known = self.views[which].loaded.extra_by_uid.get((kind, ident))
        if known is not None:
            parents += [dict(p) for p in known.get("parents", []) if dict(p) not in parents]
            principal_attrs = {**known.get("attrs", {}), **principal_attrs}
        return Request(
            self.tool.qualified_name,
            {"uid": {"type": kind, "id": ident}, "attrs": principal_attrs, "parents": parents},
            dict(self.action),
            dict(self.resource),
            decode(model, self.context),
            {k: v for k, v in decode(model, self.context, fill=False).items() if k != "tool"},
        )


def _names_principal(node: pst.Template) -> bool:
    """Whether ``node``'s scope constrains the principal or a condition reads it."""
    if not isinstance(node.principal, pst.ScopeAny):
        return True
    return any(isinstance(n, pst.Var) and n.name == "principal" for n in nodes_under(*node.clauses))


def nodes_under(*roots: Any) -> Iterator[Any]:
    """Every PST node under ``roots`` (and the roots), depth first."""
    stack: list[Any] = list(roots)
    while stack:
        node = stack.pop()
        yield node
        if hasattr(node, "__dataclass_fields__"):
            stack.extend(getattr(node, f) for f in node.__dataclass_fields__)
        elif isinstance(node, tuple):
            stack.extend(node)
        elif isinstance(node, Mapping):
            stack.extend(node.values())


def _or(terms: Iterable[Any]) -> Any:
    return z3.Or(z3.BoolVal(False), *terms)
