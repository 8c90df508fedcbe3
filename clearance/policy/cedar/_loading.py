"""Loading a policy set against the registered tools: the schema generated from them, the
tool and action entities, the engine, the checks, and per-tool request plans, all in one
:class:`LoadedSet` that the evaluator swaps whole on reload.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clearance.errors import ConfigError
from clearance.policy.cedar._parsing import SCHEMA_DOES_NOT_PARSE
from clearance.policy.cedar._plans import ToolPlan, tool_plans
from clearance.policy.cedar._sources import ENTITIES_FILE, SCHEMA_FILE, Sources
from clearance.policy.cedar._validation import check_policies
from clearance.policy.cedar._verdicts import VerdictMap
from clearance.policy.cedar.engine import CedarEngine
from clearance.policy.cedar.entities import tool_entities, type_from_json, uid_key
from clearance.policy.cedar.schema import CedarType, SchemaModel, build_schema
from clearance.types import ToolLike

__all__ = ["LoadedSet", "build_engine", "load_set", "policy_set_version"]


@dataclass(slots=True)
class LoadedSet:
    """One loaded policy set: swapped whole on reload."""

    engine: CedarEngine
    model: SchemaModel
    plans: dict[str, ToolPlan]
    """Per tool (qualified name): the static parts of its requests."""
    principal_shapes: dict[str, CedarType | None]
    """Per declared principal type (qualified): its attributes' type."""
    extra_by_uid: dict[tuple[str, str], Mapping[str, Any]]
    """The extra entities (``entities.json``) by uid."""
    verdicts: VerdictMap
    ungoverned: tuple[str, ...]
    """Tools no permit can ever match."""
    principals: dict[Any, tuple[dict[str, str], list[dict[str, Any]] | None]] = field(
        default_factory=dict
    )
    """A cache: principal → its uid and the per-request entities that carry it."""

    def qualify(self, name: str) -> str:
        """``name`` with the schema's namespace prefix."""
        return self.model.qualify(name)


def build_engine(policies: list[tuple[str, str]], entities: list[dict[str, Any]]) -> CedarEngine:
    """The engine over ``policies`` and ``entities``, without a schema.

    Raises:
        PolicyError: a policy does not parse.
        ConfigError: the entities are malformed.
    """
    return CedarEngine(policies or "", entities=entities)


def load_set(
    sources: Sources,
    tools: Sequence[ToolLike],
    *,
    namespace: str,
    principal_types: Sequence[str] | None,
) -> LoadedSet:
    """Load ``sources`` for ``tools``.

    Raises:
        PolicyError: a policy does not validate, or names a tool, namespace or action that
            is not registered (``problems`` lists them all).
        ConfigError: the schema cannot be generated, or the entities or entity type
            declarations do not fit it.
    """
    fragment = sources.schema or {}
    entity_types = fragment.get("entityTypes")
    principal_types = principal_types or fragment.get("principalTypes")
    try:
        model = build_schema(
            tools,
            entity_types=entity_types,
            principal_types=principal_types,
            namespace=namespace,
        )
    except ValueError as exc:
        raise ConfigError(f"cannot generate the Cedar schema: {exc}") from None
    common = dict(fragment.get("commonTypes") or {})
    if common:
        body = model.json[namespace]
        clash = set(common) & set(body["commonTypes"])
        if clash:
            raise ConfigError(f"common types {sorted(clash)} clash with generated ones")
        body["commonTypes"].update(common)

    ns = namespace
    generated = tool_entities(tools, ns)
    # The schema is checked here, once; requests then go to Cedar without it, so the
    # context can carry only what policies read (see clearance.policy.cedar._plans).
    files = [name for name, _ in sources.contents or ()]
    try:
        CedarEngine("", schema=model.json, entities=[*generated, *sources.entities])
    except ConfigError as exc:
        if exc.message.startswith(SCHEMA_DOES_NOT_PARSE):
            raise ConfigError(
                f"the schema declarations do not make a valid Cedar schema: {exc.message}",
                path=next((n for n in files if Path(n).name == SCHEMA_FILE), None),
            ) from None
        raise ConfigError(
            f"the entities do not fit the generated schema: {exc.message}",
            path=next((n for n in files if Path(n).name == ENTITIES_FILE), None),
        ) from None
    actions = _action_entities(model)
    engine = build_engine(sources.policies, [*generated, *actions, *sources.entities])

    tree = check_policies(engine, sources.policies, model, tools)

    infos = engine.policies
    plans, ungoverned = tool_plans(model, tools, infos, tree)
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
    verdicts = VerdictMap(infos, policy_set_version(sources))
    return LoadedSet(engine, model, plans, shapes, extra, verdicts, ungoverned)


def policy_set_version(sources: Sources) -> str:
    """``sha256:`` and 16 hex digits over the set's policy files (paths and texts, in
    order), extra entities and schema declarations: equal sets, equal versions."""
    body = json.dumps(
        [sources.policies, sources.entities, sources.schema],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    )
    return "sha256:" + hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _action_entities(model: SchemaModel) -> list[dict[str, Any]]:
    """Action entities with their groups: Cedar needs them when no schema is passed."""
    kind = model.action_type
    out: list[dict[str, Any]] = []
    for name, decl in model.json[model.namespace]["actions"].items():
        parents = [{"type": kind, "id": ref["id"]} for ref in decl.get("memberOf", [])]
        out.append({"uid": {"type": kind, "id": name}, "attrs": {}, "parents": parents})
    return out
