"""``CedarEvaluator``: Cedar policies over tool calls, validated against the registry's schema.

Loading (``bind``) generates the Cedar schema from the tool registry (see
:mod:`clearance.policy.cedar.schema`), validates every policy against it in strict mode,
checks that each tool, namespace and action a policy names exists, and builds the tool and
action entities. Anything wrong raises one :class:`~clearance.errors.PolicyError` listing
every problem with its file, line and policy id.

Evaluating a call builds a Cedar request from structured parts cached per tool: principal
``User::"alice"`` (from the session principal), action ``Action::"files.read_file"``,
resource ``Tool::"files.read_file"``, and the context. Only the context attributes that a
policy able to apply to the tool reads are sent (which keeps a decision cheap; a policy that
cannot apply to a tool can neither be satisfied nor error on it, so the decision is the same).
The Cedar answer becomes a :class:`~clearance.policy.base.Verdict`:

* Allow, and every satisfied permit carries ``@ask("why")`` → ``ask`` with the reasons;
* Allow with any satisfied permit without ``@ask`` → ``allow``;
* Deny → ``deny``: the satisfied forbids as reasons, or none and "no policy permits ...".

Reasons name policies by their ``@id`` (Cedar's positional id when there is none).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import cedarpy
from cedarpy import pst

from clearance.errors import ConfigError, PolicyError
from clearance.policy.base import AuthzRequest, Evaluator, Principal, Verdict
from clearance.policy.cedar.engine import CedarEngine, CedarResponse, PolicyInfo, PolicyProblem
from clearance.policy.cedar.entities import (
    EntitiesSource,
    ValueMismatch,
    load_entities,
    principal_entity,
    to_cedar,
    tool_entities,
    type_from_json,
    uid_key,
)
from clearance.policy.cedar.schema import (
    BOOL,
    CALL_TOOL,
    MUTATING,
    NAMESPACE_TYPE,
    READ_ONLY,
    SESSION_TYPE,
    TOOL_TYPE,
    Attribute,
    CedarType,
    RecordType,
    SchemaModel,
    build_schema,
    namespace_group,
)
from clearance.types import ToolCatalog, ToolLike

__all__ = ["CedarEvaluator"]

log = logging.getLogger("clearance.policy.cedar")

PolicyInput = str | Sequence[tuple[str, str]]
"""Cedar policy text, or ``(path, text)`` pairs, one per file."""

_ENTITIES_FILE = "entities.json"
_SCHEMA_FILE = "schema.json"
_PRINCIPAL_CACHE = 4096
_VERDICT_CACHE = 8192


# --- which context attributes policies read -------------------------------------------------

# A need is None ("send all of it") or a dict naming the attributes needed, each a need.
_Need = dict[str, Any] | None


def _merge(a: _Need, b: _Need) -> _Need:
    if a is None or b is None:
        return None
    out = dict(a)
    for key, sub in b.items():
        out[key] = _merge(out[key], sub) if key in out else sub
    return out


def _mark(root: dict[str, Any], path: Sequence[str], full: bool) -> dict[str, Any] | None:
    """Record that ``context.<path>`` is read (``full``) or tested with ``has``."""
    if not path:
        return None if full else root
    node: dict[str, Any] = root
    for i, key in enumerate(path):
        last = i == len(path) - 1
        if key in node and node[key] is None:
            return root  # already needed whole
        if last:
            node[key] = None if full else node.get(key, {})
        else:
            node = node.setdefault(key, {})
    return root


def _context_path(expr: Any) -> list[str] | None:
    attrs: list[str] = []
    while isinstance(expr, pst.GetAttr):
        attrs.append(expr.attr)
        expr = expr.base
    if isinstance(expr, pst.Var) and expr.name == "context":
        attrs.reverse()
        return attrs
    return None


def _context_need(template: pst.Template) -> _Need:
    """The context attributes ``template``'s conditions read."""
    root: dict[str, Any] | None = {}

    def visit(node: Any) -> None:
        nonlocal root
        if root is None:
            return
        if isinstance(node, pst.GetAttr):
            path = _context_path(node)
            if path is not None:
                root = _mark(root, path, full=True)
                return
        elif isinstance(node, pst.HasAttr):
            path = _context_path(node.base)
            if path is not None:
                root = _mark(root, [*path, *node.attrs], full=False)
                return
        elif isinstance(node, pst.Var):
            if node.name == "context":
                root = None
            return
        if isinstance(node, tuple | list):
            for item in node:
                visit(item)
        elif isinstance(node, Mapping):
            for item in node.values():
                visit(item)
        elif hasattr(node, "__dataclass_fields__"):
            for name in node.__dataclass_fields__:
                visit(getattr(node, name))

    visit(template.clauses)
    return root


# --- loaded state ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _ToolPlan:
    """The static parts of every request for one tool."""

    action: dict[str, str]
    resource: dict[str, str]
    input_type: RecordType
    input_need: _Need
    send_input: bool
    session_need: _Need
    send_session: bool
    tool_value: Any
    send_tool: bool
    label: str
    facts_type: RecordType | None = None
    facts_need: _Need = None
    send_facts: bool = False


@dataclass(slots=True)
class _State:
    """One loaded policy set: swapped whole on reload."""

    engine: CedarEngine
    model: SchemaModel | None
    plans: dict[str, _ToolPlan]
    principal_shapes: dict[str, CedarType | None]
    extra_by_uid: dict[tuple[str, str], Mapping[str, Any]]
    labels: dict[str, str]
    ask: dict[str, str]
    ungoverned: tuple[str, ...]
    principals: dict[Any, tuple[dict[str, str], list[dict[str, Any]] | None]] = field(
        default_factory=dict
    )
    verdicts: dict[tuple[Any, ...], Verdict] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Sources:
    policies: list[tuple[str, str]]
    entities: list[dict[str, Any]]
    schema: Mapping[str, Any] | None
    signature: tuple[Any, ...] = ()
    contents: tuple[tuple[str, bytes], ...] | None = None
    """The directory's files as read (``None``: not read from a directory)."""


@dataclass(frozen=True, slots=True)
class _Snapshot:
    """What a policy directory held at one look: each file's bytes, and its stat
    signature (which was the same before and after the files were read)."""

    signature: tuple[Any, ...]
    contents: tuple[tuple[str, bytes], ...]


class CedarEvaluator(Evaluator):
    """Authorize tool calls with Cedar policies (see the module docstring for the mapping).

    Example::

        evaluator = CedarEvaluator.from_directory("policies/coding")
        evaluator.bind(registry)          # the harness does this when it starts
        verdict = evaluator.evaluate(request)

    ``evaluate`` denies, with a message, a call it cannot put to Cedar: before ``bind``,
    for a tool that was not in the bound registry, for a principal type the schema does
    not declare, and for argument values that do not fit their declared Cedar type.
    """

    name = "cedar"
    _registry: list[ToolLike] | None
    _state: _State | None
    _unbound_engine: CedarEngine | None
    _directory: Path | None
    last_error: PolicyError | ConfigError | None
    """The error of the last failed reload (the previous set stayed in force)."""

    def __init__(
        self,
        policies: PolicyInput = "",
        *,
        schema: Mapping[str, Any] | None = None,
        entities: EntitiesSource | None = None,
        principal_types: Sequence[str] | None = None,
        namespace: str = "",
    ) -> None:
        """Parse the policies (validation against the tools happens in :meth:`bind`).

        Args:
            policies: Cedar policy text, or ``(path, text)`` pairs (paths appear in errors).
            schema: declarations merged into the generated schema: a Cedar JSON schema
                fragment with ``entityTypes`` (the principal types and any group types
                they belong to) and optionally ``commonTypes``; ``principalTypes`` may list
                which entity types can be principals. Default: ``User`` and ``Agent``
                without attributes, both principals.
            entities: extra entities (users, groups): Cedar JSON entity dicts, a path to an
                entities JSON file, or a callable returning them (called on each load).
            principal_types: which declared entity types may be principals (overrides
                ``principalTypes`` in ``schema``). Default: the declared types that are no
                other declared type's parent (``User in [Team]``: ``User``, not ``Team``).
            namespace: a Cedar namespace for the generated types and actions (default none:
                ``Tool::"files.read_file"``, ``Action::"files.read_file"``).

        Raises:
            PolicyError: a policy does not parse.
            ConfigError: the entities or the schema fragment are malformed.
        """
        self._setup(namespace, entities, principal_types, None, False, 1.0)
        self._sources = _Sources(
            _policy_pairs(policies), load_entities(entities), _schema_fragment(schema, None)
        )
        # Parse now so a syntax error surfaces at construction, not at the first session.
        self._unbound_engine = _engine(self._sources.policies, self._sources.entities)

    def _setup(
        self,
        namespace: str,
        entities: EntitiesSource | None,
        principal_types: Sequence[str] | None,
        directory: Path | None,
        watch: bool,
        watch_interval: float,
    ) -> None:
        self._namespace = namespace
        self._entities_source = entities
        self._principal_types = principal_types
        self._directory = directory
        self._watch = watch
        self._watch_interval = watch_interval
        self._next_check = time.monotonic() + watch_interval
        self._lock = threading.Lock()
        self._pending: _Snapshot | None = None
        self._registry = None
        self._state = None
        self._unbound_engine = None
        self.last_error = None

    @classmethod
    def from_directory(
        cls,
        directory: str | os.PathLike[str],
        *,
        entities: EntitiesSource | None = None,
        watch: bool = False,
        watch_interval: float = 1.0,
        principal_types: Sequence[str] | None = None,
        namespace: str = "",
    ) -> CedarEvaluator:
        """Load every ``*.cedar`` file under ``directory`` (sorted by path).

        ``entities.json`` in the directory supplies extra entities (unless ``entities`` is
        given) and ``schema.json`` the entity type declarations (see ``schema`` in
        :meth:`__init__`). ``*.tests.json`` files are decision tests
        (:mod:`clearance.policy.testing`) and are not read here.

        Args:
            directory: the policy directory.
            entities: extra entities instead of ``entities.json``.
            watch: reload when a file in the directory changes: checked during
                :meth:`evaluate`, at most once per ``watch_interval`` seconds, with no
                background thread. A change is loaded only once the directory reads the
                same at two checks in a row, so a file caught halfway through its
                writing is never enforced, even when its first part parses on its own.
                (A writer that pauses longer than ``watch_interval`` halfway cannot be
                told from two edits: write the new file under another name and rename
                it into place.) A set that fails to load is logged and kept out; the
                previous set stays in force (see :attr:`last_error`).
            watch_interval: seconds between checks for changes.
            principal_types: see :meth:`__init__`.
            namespace: see :meth:`__init__`.

        Raises:
            ConfigError: the directory does not exist, holds no policy, or its
                ``entities.json`` / ``schema.json`` is malformed.
            PolicyError: a policy does not parse.
        """
        self = cls.__new__(cls)
        self._setup(namespace, entities, principal_types, Path(directory), watch, watch_interval)
        self._sources = self._read_directory()
        self._unbound_engine = _engine(self._sources.policies, self._sources.entities)
        return self

    # ---- loading ----------------------------------------------------------------------------

    @property
    def bound(self) -> bool:
        """True once :meth:`bind` succeeded."""
        return self._state is not None

    @property
    def bound_tools(self) -> tuple[ToolLike, ...]:
        """The tools of the registry the evaluator is bound to (empty before :meth:`bind`)."""
        return tuple(self._registry or ())

    def policy_ids(self) -> tuple[str, ...]:
        """Each policy's ``@id`` (else Cedar's id), as in ``Verdict.reasons``; templates
        are left out (they decide nothing until linked)."""
        return tuple(dict.fromkeys(i.label for i in self.engine.policies if i.kind != "template"))

    @property
    def ungoverned(self) -> tuple[str, ...]:
        """Tools no permit can ever match (found by :meth:`bind`): always denied."""
        state = self._state
        return state.ungoverned if state else ()

    @property
    def engine(self) -> CedarEngine:
        """The Cedar engine holding the current policy set."""
        state = self._state
        if state is not None:
            return state.engine
        assert self._unbound_engine is not None
        return self._unbound_engine

    @property
    def schema(self) -> dict[str, Any]:
        """The generated Cedar schema (JSON) the policies were validated against.

        Raises:
            ConfigError: the evaluator is not bound to a registry yet.
        """
        state = self._state
        if state is None or state.model is None:
            raise ConfigError("the schema is generated from the registry: call bind() first")
        return state.model.json

    def bind(self, catalog: ToolCatalog | Iterable[ToolLike]) -> None:
        """Generate the schema from ``registry``, validate every policy and build entities.

        Called once by the harness when it freezes the registry. Tools no permit can
        match are listed in :attr:`ungoverned` and logged as a warning.

        Raises:
            PolicyError: a policy does not validate against the schema, or names a tool,
                namespace or action that is not registered; ``problems`` lists them all.
            ConfigError: the entities or entity type declarations do not fit the schema.
        """
        tools = list(catalog)
        state = self._load(self._sources, tools)
        with self._lock:
            self._registry = tools
            self._state = state
            self._unbound_engine = None
        if state.ungoverned:
            names = ", ".join(state.ungoverned[:10])
            more = len(state.ungoverned) - 10
            log.warning(
                "no Cedar policy can permit %d tool(s), so every call of them is denied: %s%s",
                len(state.ungoverned),
                names,
                f" and {more} more" if more > 0 else "",
            )

    def reload(self, policies: PolicyInput | None = None) -> None:
        """Re-read the directory (or take new ``policies``) and swap in the new set.

        The swap is atomic between calls: an ``evaluate`` sees the old set or the new one,
        never a mix. A set that does not parse or validate leaves the previous one in force.

        Raises:
            PolicyError: the new set does not parse or validate (the old one stays).
            ConfigError: the directory or its entities / schema declarations are unreadable.
        """
        try:
            if policies is not None:
                sources = _Sources(
                    _policy_pairs(policies),
                    load_entities(self._entities_source),
                    self._sources.schema,
                )
            elif self._directory is not None:
                sources = self._read_directory()
            else:
                sources = _Sources(
                    self._sources.policies,
                    load_entities(self._entities_source),
                    self._sources.schema,
                )
            self._swap(sources)
        except (PolicyError, ConfigError) as exc:
            self.last_error = exc
            raise

    def _swap(self, sources: _Sources) -> None:
        """Load ``sources`` and put them in force (the previous set stays on error).

        Raises:
            PolicyError: the set does not parse or validate.
            ConfigError: its entities or schema declarations are malformed.
        """
        try:
            if self._registry is not None:
                state = self._load(sources, list(self._registry))
                with self._lock:
                    self._sources = sources
                    self._state = state
            else:
                engine = _engine(sources.policies, sources.entities)
                with self._lock:
                    self._sources = sources
                    self._unbound_engine = engine
        except (PolicyError, ConfigError) as exc:
            self.last_error = exc
            raise
        self.last_error = None

    def _read_directory(self) -> _Sources:
        return self._sources_from(self._snapshot())

    def _policy_files(self) -> list[Path]:
        directory = self._directory
        assert directory is not None
        return sorted(p for p in directory.rglob("*.cedar") if p.is_file())

    def _snapshot(self) -> _Snapshot:
        """Read every file the set is made of, with their signature before and after.

        Raises:
            ConfigError: the directory is missing or empty, or a file cannot be read, or
                the files changed while they were read (a later look will do).
        """
        directory = self._directory
        assert directory is not None
        if not directory.is_dir():
            raise ConfigError("the policy directory does not exist", path=str(directory))
        files = self._policy_files()
        if not files:
            raise ConfigError("the policy directory holds no *.cedar file", path=str(directory))
        extra = [directory / _SCHEMA_FILE]
        if self._entities_source is None:
            extra.append(directory / _ENTITIES_FILE)
        signature = _signature(directory, files)
        contents: list[tuple[str, bytes]] = []
        for path in [*files, *(p for p in extra if p.is_file())]:
            try:
                contents.append((str(path), path.read_bytes()))
            except OSError as exc:
                raise ConfigError(f"cannot read: {exc}", path=str(path)) from None
        if _signature(directory, files) != signature:
            raise ConfigError("the files changed while they were read", path=str(directory))
        return _Snapshot(signature, tuple(contents))

    def _sources_from(self, snapshot: _Snapshot) -> _Sources:
        """The policy set a snapshot holds (nothing is read again).

        Raises:
            ConfigError: a file is not UTF-8, or ``entities.json`` / ``schema.json`` is
                malformed.
        """
        directory = self._directory
        assert directory is not None
        texts: dict[str, str] = {}
        for name, data in snapshot.contents:
            try:
                texts[name] = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ConfigError(f"cannot read the file: {exc}", path=name) from None
        schema_path = str(directory / _SCHEMA_FILE)
        entities_path = str(directory / _ENTITIES_FILE)
        policies = [(n, t) for n, t in texts.items() if n not in (schema_path, entities_path)]
        entities_source: EntitiesSource | None = self._entities_source
        if entities_source is None and entities_path in texts:
            entities_source = _json_file(texts[entities_path], entities_path, "entities are")
        schema: Mapping[str, Any] | None = None
        if schema_path in texts:
            schema = _json_file(texts[schema_path], schema_path, "")
        return _Sources(
            policies,
            load_entities(entities_source),
            _schema_fragment(schema, schema_path),
            snapshot.signature,
            snapshot.contents,
        )

    def _load(self, sources: _Sources, tools: list[ToolLike]) -> _State:
        fragment = sources.schema or {}
        entity_types = fragment.get("entityTypes")
        principal_types = self._principal_types or fragment.get("principalTypes")
        try:
            model = build_schema(
                tools,
                entity_types=entity_types,
                principal_types=principal_types,
                namespace=self._namespace,
            )
        except ValueError as exc:
            raise ConfigError(f"cannot generate the Cedar schema: {exc}") from None
        common = dict(fragment.get("commonTypes") or {})
        if common:
            body = model.json[self._namespace]
            clash = set(common) & set(body["commonTypes"])
            if clash:
                raise ConfigError(f"common types {sorted(clash)} clash with generated ones")
            body["commonTypes"].update(common)

        ns = self._namespace
        generated = tool_entities(tools, ns)
        # The schema is checked here, once; requests then go to Cedar without it, so the
        # context can carry only what policies read (see the module docstring).
        try:
            CedarEngine("", schema=model.json, entities=[*generated, *sources.entities])
        except ConfigError as exc:
            raise ConfigError(f"the entities do not fit the generated schema: {exc}") from None
        actions = _action_entities(model)
        engine = _engine(sources.policies, [*generated, *actions, *sources.entities])

        tree = _policy_tree(engine, sources.policies)
        uids = {policy_id: pst.entity_uids(node) for policy_id, node in tree.items()}
        problems = [_locate(p, engine, model) for p in _validate(engine, uids, model)]
        reported = {(p["policy_id"], str(p["message"])) for p in problems}
        for problem in _naming_problems(engine, uids, model, tools):
            name = str(problem["message"]).split(" is not ", 1)[0]
            if not any(pid == problem["policy_id"] and name in msg for pid, msg in reported):
                problems.append(problem)
        if problems:
            problems.sort(key=lambda p: (str(p["path"] or ""), int(str(p["line"] or 0))))
            first = problems[0]
            count = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise PolicyError(
                f"policy {first['policy_id']}: {first['message']}{count}",
                path=_opt_str(first["path"]),
                line=_opt_int(first["line"]),
                policy_id=_opt_str(first["policy_id"]),
                problems=problems,
            )

        infos = engine.policies
        labels = {i.id: i.label for i in infos}
        ask = {i.id: i.annotations["ask"] for i in infos if "ask" in i.annotations}
        plans, ungoverned = _plans(model, tools, infos, tree)
        shapes: dict[str, CedarType | None] = {}
        commons = model.json[ns].get("commonTypes", {})
        for name in model.principal_types:
            shape = model.entity_types[name].get("shape")
            try:
                shapes[model.qualify(name)] = (
                    type_from_json(shape, commons, ns) if shape is not None else None
                )
            except (ValueError, KeyError, TypeError) as exc:
                raise ConfigError(f"cannot read the attributes of {name}: {exc}") from None
        extra: dict[tuple[str, str], Mapping[str, Any]] = {
            uid_key(e["uid"]): e for e in sources.entities
        }
        return _State(engine, model, plans, shapes, extra, labels, ask, ungoverned)

    # ---- evaluation -------------------------------------------------------------------------

    def evaluate(self, request: AuthzRequest) -> Verdict:
        """Decide one call; see the module docstring for how Cedar's answer maps."""
        if self._watch:
            self._check_for_changes()
        state = self._state
        if state is None:
            return _deny("the Cedar evaluator is not bound to a tool registry (call bind())")
        plan = state.plans.get(request.tool.qualified_name)
        if plan is None:
            return _deny(
                f"tool {request.tool.qualified_name!r} is not in the Cedar schema "
                "(it was not registered when the policies were loaded)"
            )
        principal = request.principal
        try:
            found = self._principal(state, principal)
            if found is None:
                return _deny(
                    f"principal type {principal.type!r} is not declared in the Cedar schema "
                    f"(declared: {', '.join(state.principal_shapes)})"
                )
            context: dict[str, Any] = {}
            if plan.send_input:
                context["input"] = to_cedar(
                    plan.input_type, request.arguments, "input", plan.input_need
                )
            if plan.send_session:
                session = {"id": request.session.id, "turn": request.session.turn_id}
                context["session"] = to_cedar(SESSION_TYPE, session, "session", plan.session_need)
            if plan.send_tool:
                context["tool"] = plan.tool_value
            if plan.send_facts and plan.facts_type is not None:
                context["facts"] = to_cedar(
                    plan.facts_type, request.facts, "facts", plan.facts_need
                )
        except ValueMismatch as exc:
            return _deny(f"cannot put the call to Cedar: {exc}")
        uid, entities = found
        response = state.engine.is_authorized(uid, plan.action, plan.resource, context, entities)
        return _verdict(response, state, principal, plan)

    def _principal(
        self, state: _State, principal: Principal
    ) -> tuple[dict[str, str], list[dict[str, Any]] | None] | None:
        """The principal's uid and the per-request entities that carry it (cached).

        A principal without attributes or parents that the extra entities do not know is
        not sent as an entity at all: Cedar treats it the same (no attributes, no
        ancestors) and the request is cheaper.

        Raises:
            ValueMismatch: a declared attribute does not fit its type.
        """
        attrs = principal.attrs
        parents = principal.parents
        key = (
            principal.type,
            principal.id,
            json.dumps(attrs, sort_keys=True, default=repr) if attrs else "",
            tuple(tuple(p) for p in parents) if parents else (),
        )
        cached = state.principals.get(key)
        if cached is not None:
            return cached
        kind = principal.type if "::" in principal.type else _qualify(state, principal.type)
        if kind not in state.principal_shapes:
            return None
        known = state.extra_by_uid.get((kind, principal.id))
        entity = principal_entity(
            principal, state.principal_shapes[kind], namespace=self._namespace, known=known
        )
        bare = not entity["attrs"] and not entity["parents"] and known is None
        found = (entity["uid"], None if bare else [entity])
        if len(state.principals) >= _PRINCIPAL_CACHE:
            state.principals.clear()
        state.principals[key] = found
        return found

    def _check_for_changes(self) -> None:
        """Look at the directory (at most once per ``watch_interval``) and load a change
        once it has read the same at two looks in a row: a file caught halfway through
        its writing is never loaded, even when its first part parses."""
        now = time.monotonic()
        if now < self._next_check or self._directory is None:
            return
        self._next_check = now + self._watch_interval
        if not self._lock.acquire(blocking=False):
            return  # another call is checking
        try:
            current = self._sources
            if self._pending is None:
                signature = _signature(self._directory, self._policy_files())
                if signature == current.signature:
                    return
            snapshot = self._snapshot()
        except (OSError, ConfigError):
            self._pending = None  # missing, unreadable or changing: look again later
            return
        finally:
            self._lock.release()
        pending, self._pending = self._pending, snapshot
        if pending is None or pending.contents != snapshot.contents:
            return  # changed since the last look (or first seen now): not settled yet
        self._pending = None
        if snapshot.contents == current.contents:  # touched, not changed
            self._sources = dataclasses.replace(current, signature=snapshot.signature)
            return
        try:
            self._swap(self._sources_from(snapshot))
            log.info("reloaded Cedar policies from %s", self._directory)
        except (PolicyError, ConfigError) as exc:
            # Keep the previous set; remember the failure so the same files are not retried.
            self._sources = dataclasses.replace(
                current, signature=snapshot.signature, contents=snapshot.contents
            )
            log.error(
                "Cedar policies in %s failed to reload; keeping the previous set: %s",
                self._directory,
                exc,
            )


def _qualify(state: _State, name: str) -> str:
    return state.model.qualify(name) if state.model is not None else name


# --- helpers --------------------------------------------------------------------------------


def _deny(message: str) -> Verdict:
    return Verdict("deny", message=message, evaluator=CedarEvaluator.name)


def _verdict(
    response: CedarResponse, state: _State, principal: Principal, plan: _ToolPlan
) -> Verdict:
    """Map Cedar's answer to a verdict; answers without errors are cached (they repeat)."""
    if response.errors:
        return _make_verdict(response, state, principal, plan)
    if response.reasons:
        key: tuple[Any, ...] = (response.decision, response.reasons)
    else:
        # The message names the principal and the tool.
        key = (response.decision, plan.label, principal.type, principal.id)
    cache = state.verdicts
    verdict = cache.get(key)
    if verdict is None:
        verdict = _make_verdict(response, state, principal, plan)
        if len(cache) >= _VERDICT_CACHE:
            cache.clear()
        cache[key] = verdict
    return verdict


def _make_verdict(
    response: CedarResponse, state: _State, principal: Principal, plan: _ToolPlan
) -> Verdict:
    labels = state.labels
    errors = tuple(
        f"{labels.get(e.policy_id, e.policy_id)}: {e.message}" if e.policy_id else e.message
        for e in response.errors
    )
    reasons = tuple(labels.get(r, r) for r in response.reasons)
    names = MappingProxyType(
        {labels[r]: r for r in response.reasons if r in labels and labels[r] != r}
    )
    if response.decision == "allow":
        asks = [state.ask[r] for r in response.reasons if r in state.ask]
        if len(asks) == len(response.reasons):
            why = "; ".join(dict.fromkeys(a for a in asks if a)) or (
                "approval required by " + ", ".join(reasons)
            )
            return Verdict("ask", reasons, errors, why, CedarEvaluator.name, names)
        return Verdict("allow", reasons, errors, None, CedarEvaluator.name, names)
    if reasons:
        message = f"forbidden by {', '.join(reasons)}"
    elif any(e.policy_id is None for e in response.errors):
        message = "Cedar could not evaluate the request: " + "; ".join(
            e.message for e in response.errors if e.policy_id is None
        )
    else:
        message = f"no policy permits {principal} to call {plan.label}"
    return Verdict("deny", reasons, errors, message, CedarEvaluator.name, names)


def _policy_pairs(policies: PolicyInput) -> list[tuple[str, str]]:
    if isinstance(policies, str):
        return [("<policies>", policies)] if policies.strip() else []
    pairs = []
    for item in policies:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], str)):
            raise TypeError("policies must be Cedar text or a sequence of (path, text) pairs")
        pairs.append((str(item[0]), item[1]))
    return pairs


def _engine(policies: list[tuple[str, str]], entities: list[dict[str, Any]]) -> CedarEngine:
    return CedarEngine(policies or "", entities=entities)


def _schema_fragment(
    schema: Mapping[str, Any] | None, path: str | None
) -> Mapping[str, Any] | None:
    """Normalize a schema fragment to ``{"entityTypes", "commonTypes", "principalTypes"}``."""
    if schema is None:
        return None
    if not isinstance(schema, Mapping):
        raise ConfigError("the schema declarations must be a JSON object", path=path)
    body: Mapping[str, Any] = schema
    keys = {"entityTypes", "commonTypes", "principalTypes", "actions"}
    if not set(schema) & keys and len(schema) == 1:
        (inner,) = schema.values()  # the namespaced form {"": {...}}
        if isinstance(inner, Mapping):
            body = inner
    unknown = set(body) - keys
    if unknown:
        raise ConfigError(f"unknown keys in the schema declarations: {sorted(unknown)}", path=path)
    if body.get("actions"):
        raise ConfigError(
            "the schema declarations may not declare actions: they are generated from the "
            "tool registry",
            path=path,
        )
    entity_types = body.get("entityTypes")
    if entity_types is not None and not isinstance(entity_types, Mapping):
        raise ConfigError("entityTypes must be an object", path=path)
    principal_types = body.get("principalTypes")
    if principal_types is not None and (
        not isinstance(principal_types, list)
        or not all(isinstance(p, str) for p in principal_types)
    ):
        raise ConfigError("principalTypes must be a list of entity type names", path=path)
    return {k: v for k, v in body.items() if k != "actions"}


def _json_file(text: str, path: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{what} not JSON: {exc.msg}".lstrip(), path=path, line=exc.lineno
        ) from None


def _signature(directory: Path, files: Sequence[Path]) -> tuple[Any, ...]:
    parts: list[Any] = []
    for path in [*files, directory / _ENTITIES_FILE, directory / _SCHEMA_FILE]:
        try:
            st = path.stat()
        except OSError:
            continue
        parts.append((str(path), st.st_mtime_ns, st.st_size))
    return tuple(parts)


def _action_entities(model: SchemaModel) -> list[dict[str, Any]]:
    """Action entities with their groups: Cedar needs them when no schema is passed."""
    kind = model.action_type
    out: list[dict[str, Any]] = []
    for name, decl in model.json[model.namespace]["actions"].items():
        parents = [{"type": kind, "id": ref["id"]} for ref in decl.get("memberOf", [])]
        out.append({"uid": {"type": kind, "id": name}, "attrs": {}, "parents": parents})
    return out


def _validate(
    engine: CedarEngine, uids: Mapping[str, frozenset[pst.EntityUid]], model: SchemaModel
) -> list[PolicyProblem]:
    """Cedar's strict validation of every policy against the generated schema.

    Validating against a schema with a thousand tool actions costs Cedar milliseconds per
    policy, so the policies are grouped by the tool actions their scope can apply to and each
    group is validated against a schema cut down to those actions (plus the action groups and
    the actions the group's policies name). A policy's validation depends only on those:
    the request types its scope admits and the names it uses, so the problems are the same.
    """
    infos = [i for i in engine.policies if i.kind != "link"]
    if not infos:
        return []
    if any(i.text is None for i in infos):
        return list(engine.validate(model.json))
    body = model.json[model.namespace]
    actions: Mapping[str, Any] = body["actions"]
    action_type = model.action_type
    groups = {name for name, decl in actions.items() if "appliesTo" not in decl}
    members: dict[str, set[str]] = {}
    for name, decl in actions.items():
        for ref in decl.get("memberOf", ()):
            members.setdefault(ref["id"], set()).add(name)
    by_key: dict[frozenset[str] | None, list[PolicyInfo]] = {}
    for info in infos:
        key: frozenset[str] | None = None
        if info.action.op != "any":
            applicable: set[str] = set()
            for entity in info.action.entities:
                if entity.type != action_type:
                    continue
                if entity.id in groups and info.action.op == "in":
                    applicable |= members.get(entity.id, set())
                elif entity.id in actions:
                    applicable.add(entity.id)
            key = frozenset(applicable)
        by_key.setdefault(key, []).append(info)
    if len(by_key) == 1 and None in by_key:
        return list(engine.validate(model.json))

    inputs = {ts.input_type_name: name for name, ts in model.tools.items()}
    problems: list[PolicyProblem] = []
    for key, group in by_key.items():
        if key is None:
            schema: Mapping[str, Any] = model.json
        else:
            named = {
                uid.id
                for info in group
                for uid in uids.get(info.id, ())
                if str(uid.type) == action_type
            }
            cut: dict[str, Any] = {name: actions[name] for name in groups}
            for name in named - key:
                if name in actions and name not in cut:
                    cut[name] = {k: v for k, v in actions[name].items() if k != "appliesTo"}
            cut.update((name, actions[name]) for name in key)
            common = {
                name: typ
                for name, typ in body["commonTypes"].items()
                if name not in inputs or inputs[name] in key
            }
            schema = {
                model.namespace: {
                    "entityTypes": body["entityTypes"],
                    "commonTypes": common,
                    "actions": cut,
                }
            }
        result = cedarpy.validate_policies(
            "\n".join(str(i.text) for i in group), json.dumps(schema)
        )
        for error in result.errors:
            local = error.policy_id
            index = int(local[6:]) if local.startswith("policy") and local[6:].isdigit() else -1
            owner = group[index] if 0 <= index < len(group) else None
            if owner is None:
                problems.append(PolicyProblem(error.error, None, None, None))
                continue
            message = error.error.replace(f"for policy `{local}`", f"for policy `{owner.id}`", 1)
            problems.append(PolicyProblem(message, owner.label, owner.path, owner.line, owner.id))
    return problems


def _policy_tree(engine: CedarEngine, policies: list[tuple[str, str]]) -> dict[str, pst.Template]:
    """Each policy's PST by the engine's Cedar id (the engine parses the joined text)."""
    if not policies:
        return {}
    tree = cedarpy.policies_to_pst("\n".join(text for _, text in policies))
    nodes: dict[str, pst.Template] = {**tree.static_policies, **tree.templates}
    infos = {i.id: i for i in engine.policies if i.kind != "link"}
    if set(nodes) != set(infos) or any(nodes[k].effect != infos[k].effect for k in infos):
        # Should not happen (same text, same positional ids); fail closed if it does.
        raise PolicyError("internal error: policy ids disagree between parses")
    return nodes


@dataclass(slots=True)
class _Group:
    """What the policies naming one action (or no action) need and cover, merged."""

    need: _Need = field(default_factory=dict)
    covers_all: bool = False
    tools: set[str] = field(default_factory=set)
    namespaces: set[str] = field(default_factory=set)

    def add(self, info: PolicyInfo, need: _Need, model: SchemaModel) -> None:
        self.need = _merge(self.need, need)
        if info.effect != "permit":
            return
        cover = _resource_cover(info, model)
        if cover == "all":
            self.covers_all = True
        elif cover is not None:
            (self.tools if cover[0] == "tool" else self.namespaces).add(cover[1])

    def covers(self, tool: ToolLike) -> bool:
        return (
            self.covers_all
            or tool.qualified_name in self.tools
            or tool.namespace in self.namespaces
        )


def _resource_cover(info: PolicyInfo, model: SchemaModel) -> str | tuple[str, str] | None:
    """Which tools a permit's resource scope can match: all, one tool, one namespace, none."""
    scope = info.resource
    tool_type = model.qualify(TOOL_TYPE)
    if scope.op == "any" or scope.slot:
        return "all"  # a template slot: any link may name any tool
    if scope.op == "is":
        return "all" if scope.entity_type == tool_type else None
    if scope.op == "is in" and scope.entity_type != tool_type:
        return None
    if not scope.entities:
        return "all"
    target = scope.entities[0]
    if target.type == tool_type:
        return ("tool", target.id)
    if scope.op != "==" and target.type == model.qualify(NAMESPACE_TYPE):
        return ("ns", target.id)
    return None  # a tool's only ancestor is its namespace


def _plans(
    model: SchemaModel,
    tools: list[ToolLike],
    infos: Sequence[PolicyInfo],
    tree: Mapping[str, pst.Template],
) -> tuple[dict[str, _ToolPlan], tuple[str, ...]]:
    """Per tool: whether any permit can match it, and the context its policies read.

    Policies are grouped by the action ids their scope names (one group for no action
    constraint), so the work is linear in policies plus tools, not their product.
    """
    action_type = model.action_type
    unconstrained = _Group()
    by_action: dict[str, _Group] = {}
    for info in infos:
        if info.kind == "template":
            continue  # a template authorizes nothing; its links are listed separately
        node = tree.get(info.template_id or info.id)
        reads = _context_need(node) if node is not None else None
        if info.action.op == "any":
            unconstrained.add(info, reads, model)
            continue
        for entity in info.action.entities:
            if entity.type == action_type:
                by_action.setdefault(entity.id, _Group()).add(info, reads, model)
    tool_type = model.qualify(TOOL_TYPE)
    tool_ctx = RecordType(
        {"read_only": Attribute(BOOL, True), "annotations": Attribute(model.annotations, True)}
    )
    plans: dict[str, _ToolPlan] = {}
    ungoverned: list[str] = []
    for tool in tools:
        ids = (
            tool.qualified_name,
            CALL_TOOL,
            READ_ONLY if tool.read_only else MUTATING,
            namespace_group(tool.namespace),
        )
        groups = [unconstrained, *(by_action[i] for i in ids if i in by_action)]
        if not any(g.covers(tool) for g in groups):
            ungoverned.append(tool.qualified_name)
        need: _Need = {}
        for group in groups:
            need = _merge(need, group.need)
        top = (
            need
            if need is not None
            else {"input": None, "session": None, "tool": None, "facts": None}
        )
        tool_need: _Need = top.get("tool", {})
        tool_value = (
            to_cedar(
                tool_ctx,
                {"read_only": tool.read_only, "annotations": dict(tool.annotations)},
                "tool",
                tool_need,
            )
            if "tool" in top
            else None
        )
        plans[tool.qualified_name] = _ToolPlan(
            action={"type": action_type, "id": tool.qualified_name},
            resource={"type": tool_type, "id": tool.qualified_name},
            input_type=model.tools[tool.qualified_name].input,
            input_need=top.get("input"),
            send_input="input" in top,
            session_need=top.get("session"),
            send_session="session" in top,
            tool_value=tool_value,
            send_tool="tool" in top,
            label=tool.qualified_name,
            facts_type=model.tools[tool.qualified_name].facts,
            facts_need=top.get("facts"),
            send_facts="facts" in top,
        )
    return plans, tuple(ungoverned)


def _naming_problems(
    engine: CedarEngine,
    uids: Mapping[str, frozenset[pst.EntityUid]],
    model: SchemaModel,
    tools: list[ToolLike],
) -> list[dict[str, object]]:
    """Policies naming a tool, namespace or action that is not registered."""
    known = {
        model.qualify(TOOL_TYPE): {t.qualified_name for t in tools},
        model.qualify(NAMESPACE_TYPE): {t.namespace for t in tools},
        model.action_type: set(model.json[model.namespace]["actions"]),
    }
    what = {
        model.qualify(TOOL_TYPE): "registered tool",
        model.qualify(NAMESPACE_TYPE): "tool namespace",
        model.action_type: "tool action or action group",
    }
    problems: list[dict[str, object]] = []
    for info in engine.policies:
        for uid in sorted(uids.get(info.id, ()), key=str):
            kind = str(uid.type)
            if kind in known and uid.id not in known[kind]:
                hint = difflib.get_close_matches(uid.id, sorted(known[kind]), n=1)
                message = f"{uid} is not a {what[kind]}" + (
                    f"; did you mean {kind}::{json.dumps(hint[0])}?" if hint else ""
                )
                problems.append(
                    {
                        "path": info.path,
                        "line": _line_of(info, uid.id) or info.line,
                        "policy_id": info.label,
                        "message": message,
                    }
                )
    # Cedar reports an unknown action too; keep one message per policy and name.
    return problems


_TICKED = re.compile(r"`([^`]+)`")


def _locate(problem: PolicyProblem, engine: CedarEngine, model: SchemaModel) -> dict[str, object]:
    """A validation problem with the line of the offending name and a spelling hint."""
    out = problem.as_dict()
    info = None
    if problem.cedar_id:
        try:
            info = engine.policy(problem.cedar_id)
        except KeyError:
            info = None
    message = problem.message
    prefix = f"for policy `{problem.cedar_id}`, "
    if message.startswith(prefix):
        message = message[len(prefix) :]
    ticked = _TICKED.findall(message)
    if info is not None and ticked:
        name = ticked[0].split(".")[-1].strip('"')
        if "::" in name:
            name = name.split("::", 1)[1].strip('"')
        line = _line_of(info, name)
        if line:
            out["line"] = line
    missing = re.match(r"attribute `([^`]+)` in context for (\S+) not found", message)
    if missing:
        message += _hint(missing.group(1), missing.group(2), model)
    out["message"] = message
    return out


def _hint(attr_path: str, action: str, model: SchemaModel) -> str:
    """``; did you mean `input.path`?`` for a misspelled argument."""
    parts = attr_path.split(".")
    m = re.search(r'"(.*)"$', action)
    tool = model.tools.get(m.group(1)) if m else None
    if tool is None or len(parts) < 2 or parts[0] != "input":
        return ""
    record: Any = tool.input
    for part in parts[1:-1]:
        attr = record.attributes.get(part) if isinstance(record, RecordType) else None
        if attr is None:
            return ""
        record = attr.type
    if not isinstance(record, RecordType):
        return ""
    hint = difflib.get_close_matches(parts[-1], list(record.attributes), n=1)
    if hint:
        return f"; did you mean `{'.'.join([*parts[:-1], hint[0]])}`?"
    skipped = [p for p, _ in tool.skipped if p.rsplit("/", 1)[-1] == parts[-1]]
    if skipped:
        return f"; `{attr_path}` has no Cedar type (see docs/cedar.md), so policies cannot read it"
    return ""


def _line_of(info: PolicyInfo, name: str) -> int | None:
    if not info.text or not info.line or not name:
        return None
    m = re.search(r"(?<![A-Za-z0-9_])" + re.escape(name) + r"(?![A-Za-z0-9_])", info.text)
    if not m:
        return None
    return info.line + info.text.count("\n", 0, m.start())


def _opt_str(value: object) -> str | None:
    return None if value is None else str(value)


def _opt_int(value: object) -> int | None:
    return value if isinstance(value, int) else None
