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

Where each part lives: where a policy set comes from (text, a directory snapshot) in
``_sources``; loading it against the tools in ``_loading``, with its checks in
``_validation`` and the per-tool request plans (which context attributes to send) in
``_plans``; the mapping of Cedar's answer in ``_verdicts``. This module holds the
evaluator: binding, reloading and watching, and putting one call to Cedar.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from clearance.errors import ConfigError, PolicyError
from clearance.policy.base import AuthzRequest, Evaluator, Verdict, provenance_of
from clearance.policy.cedar._loading import LoadedSet, build_engine, load_set
from clearance.policy.cedar._sources import (
    PolicyDirectory,
    PolicyInput,
    Snapshot,
    Sources,
    policy_pairs,
    schema_fragment,
)
from clearance.policy.cedar._verdicts import EVALUATOR_NAME, deny
from clearance.policy.cedar.engine import CedarEngine
from clearance.policy.cedar.entities import (
    EntitiesSource,
    ValueMismatch,
    load_entities,
    principal_entity,
    to_cedar,
)
from clearance.policy.cedar.schema import SESSION_TYPE
from clearance.types import Principal, ToolCatalog, ToolLike

__all__ = ["CedarEvaluator", "PolicyInput", "PolicyReload"]

_log = logging.getLogger("clearance.policy.cedar")

_PRINCIPAL_CACHE = 4096


@dataclass(frozen=True, slots=True)
class PolicyReload:
    """One reload of a :class:`CedarEvaluator`'s policies, as its ``on_reload`` listeners
    get it: a harness journals it (``policies_reloaded``) and counts it in its telemetry
    (``clearance.policy.reloads``), so a set that failed to load is seen where the
    decisions are, not only in a log."""

    loaded: bool
    """True when the new set is in force; False when it failed to load and the previous
    set stayed (without the permits of files that are gone)."""
    how: Literal["watch", "reload"]
    """``watch``: a change the directory watch found; ``reload``: :meth:`CedarEvaluator.reload`
    (SIGHUP in the gateway)."""
    policy_version: str | None
    """The digest of the set in force after it (``Verdict.policy_version``)."""
    error: str | None = None
    """Why the new set did not load (file, line and policy where known)."""
    directory: str | None = None
    """The policy directory, when the set came from one."""


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

    name = EVALUATOR_NAME
    _registry: list[ToolLike] | None
    _state: LoadedSet | None
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
        self._sources = Sources(
            policy_pairs(policies), load_entities(entities), schema_fragment(schema, None)
        )
        # Parse now so a syntax error surfaces at construction, not at the first session.
        self._unbound_engine = build_engine(self._sources.policies, self._sources.entities)

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
        self._pending: Snapshot | None = None
        self._registry = None
        self._state = None
        self._unbound_engine = None
        self.last_error = None
        self.on_reload: list[Callable[[PolicyReload], None]] = []
        """Called with each :class:`PolicyReload` (a failure to load included), in the
        thread that reloaded; an exception in one is logged, never raised."""

    def _reported(self, how: Literal["watch", "reload"], error: Exception | None) -> None:
        """Tell the ``on_reload`` listeners how a reload ended."""
        if not self.on_reload:
            return
        event = PolicyReload(
            loaded=error is None,
            how=how,
            policy_version=self.policy_version,
            error=None if error is None else str(error),
            directory=None if self._directory is None else str(self._directory),
        )
        for listener in list(self.on_reload):
            try:
                listener(event)
            except Exception as exc:
                _log.error("a policy reload listener failed: %r", exc)

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
        self._sources = self._directory_files().read()
        self._unbound_engine = build_engine(self._sources.policies, self._sources.entities)
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
    def policy_version(self) -> str | None:
        """The digest of the policy set in force (``Verdict.policy_version``); ``None``
        before :meth:`bind`."""
        state = self._state
        return state.verdicts.version if state else None

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
        if state is None:
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
            _log.warning(
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
                sources = Sources(
                    policy_pairs(policies),
                    load_entities(self._entities_source),
                    self._sources.schema,
                )
            elif self._directory is not None:
                sources = self._directory_files().read()
            else:
                sources = Sources(
                    self._sources.policies,
                    load_entities(self._entities_source),
                    self._sources.schema,
                )
            self._swap(sources)
        except (PolicyError, ConfigError) as exc:
            self.last_error = exc
            self._reported("reload", exc)
            raise
        self._reported("reload", None)

    def _swap(self, sources: Sources) -> None:
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
                engine = build_engine(sources.policies, sources.entities)
                with self._lock:
                    self._sources = sources
                    self._unbound_engine = engine
        except (PolicyError, ConfigError) as exc:
            self.last_error = exc
            raise
        self.last_error = None

    def _directory_files(self) -> PolicyDirectory:
        directory = self._directory
        assert directory is not None
        return PolicyDirectory(directory, self._entities_source)

    def _load(self, sources: Sources, tools: list[ToolLike]) -> LoadedSet:
        return load_set(
            sources, tools, namespace=self._namespace, principal_types=self._principal_types
        )

    # ---- evaluation -------------------------------------------------------------------------

    def evaluate(self, request: AuthzRequest) -> Verdict:
        """Decide one call; see the module docstring for how Cedar's answer maps."""
        if self._watch:
            self._check_for_changes()
        state = self._state
        if state is None:
            return deny("the Cedar evaluator is not bound to a tool registry (call bind())")
        plan = state.plans.get(request.tool.qualified_name)
        if plan is None:
            return deny(
                f"tool {request.tool.qualified_name!r} is not in the Cedar schema "
                "(it was not registered when the policies were loaded)",
                state.verdicts.version,
            )
        principal = request.principal
        try:
            found = self._principal(state, principal)
            if found is None:
                return deny(
                    f"principal type {principal.type!r} is not declared in the Cedar schema "
                    f"(declared: {', '.join(state.principal_shapes)})",
                    state.verdicts.version,
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
            if plan.send_provenance and plan.provenance_type is not None:
                context["provenance"] = to_cedar(
                    plan.provenance_type,
                    provenance_of(request),
                    "provenance",
                    plan.provenance_need,
                )
        except ValueMismatch as exc:
            return deny(f"cannot put the call to Cedar: {exc}", state.verdicts.version)
        uid, entities = found
        response = state.engine.is_authorized(uid, plan.action, plan.resource, context, entities)
        return state.verdicts.verdict(response, principal, plan.label)

    def _principal(
        self, state: LoadedSet, principal: Principal
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
        kind = principal.type if "::" in principal.type else state.qualify(principal.type)
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
                signature = self._directory_files().signature()
                if signature == current.signature:
                    return
            snapshot = self._directory_files().look()
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
            self._swap(self._directory_files().sources_from(snapshot))
            self._reported("watch", None)
            if snapshot.contents:
                _log.info("reloaded Cedar policies from %s", self._directory)
            else:
                _log.warning(
                    "the Cedar policy directory %s is gone or holds no *.cedar file: "
                    "nothing is permitted until policies are back",
                    self._directory,
                )
        except (PolicyError, ConfigError) as exc:
            # Keep the previous set, but never the permits of a file that is gone (its
            # forbids stay: deny wins until a set that loads says otherwise). Remember the
            # failure so the same files are not retried.
            kept = self._without_gone_permits(current, snapshot)
            self.last_error = exc
            self._sources = dataclasses.replace(
                kept, signature=snapshot.signature, contents=snapshot.contents
            )
            _log.error(
                "Cedar policies in %s failed to reload; keeping the previous set%s: %s",
                self._directory,
                "" if kept is current else " without the permits of the files that are gone",
                exc,
            )
            self._reported("watch", exc)

    def _without_gone_permits(self, current: Sources, snapshot: Snapshot) -> Sources:
        """``current`` without the permits of its policy files that ``snapshot`` no
        longer holds (``current`` itself when none is gone), put in force."""
        present = {name for name, _ in snapshot.contents}
        gone = {path for path, _ in current.policies if path not in present}
        if not gone:
            return current
        policies = [(path, text) for path, text in current.policies if path not in gone]
        for path in sorted(gone):
            forbids = [
                i.text
                for i in self.engine.policies
                if i.path == path and i.kind == "static" and i.effect == "forbid" and i.text
            ]
            if forbids:
                policies.append((path, "\n".join(forbids)))
        kept = dataclasses.replace(current, policies=policies)
        try:
            self._swap(kept)
        except (PolicyError, ConfigError):
            # A part of a set that loaded should load; if it does not, permit nothing.
            kept = dataclasses.replace(current, policies=[])
            self._swap(kept)
        return kept
