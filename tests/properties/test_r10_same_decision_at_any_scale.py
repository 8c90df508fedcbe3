"""R10: the sliced Cedar engine decides exactly as Cedar does on the whole policy set.

A differential property: random policy sets (permit and forbid; scopes with ``==``, ``in``,
``is``, ``is in``, ``any`` and action lists; ``when`` / ``unless`` conditions that can error;
templates linked to values), random entity hierarchies (users in groups in groups, files in
folders in folders, actions in action groups), random requests with per-request entities, with
and without a schema. ``CedarEngine`` must return the decision, reasons and erroring policies
that ``cedarpy.is_authorized`` returns on the whole, unsliced set.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import cedarpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clearance.policy.cedar.engine import CedarEngine

USERS = ["alice", "bob", 'c"q']  # one id needs escaping in Cedar text
GROUPS = ["g0", "g1", "g2", "g3"]
FILES = ["f0", "f1", "f2"]
FOLDERS = ["d0", "d1", "d2"]
ACTIONS = ["read", "write", "delete"]
ACTION_GROUPS = ["ag0", "ag1"]


def uid(type_: str, id_: str) -> dict[str, str]:
    return {"type": type_, "id": id_}


def lit(type_: str, id_: str) -> str:
    return f"{type_}::{json.dumps(id_)}"


# ---- entities ------------------------------------------------------------------------------


@st.composite
def worlds(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Every entity with parents forming a DAG (an entity's parents come later in its list)."""
    entities: list[dict[str, Any]] = []

    def parents_from(type_: str, ids: list[str]) -> list[dict[str, str]]:
        chosen = draw(st.lists(st.sampled_from(ids), unique=True, max_size=2)) if ids else []
        return [uid(type_, i) for i in chosen]

    for user in USERS:
        attrs: dict[str, Any] = {}
        if draw(st.booleans()):
            attrs["level"] = draw(st.integers(0, 3))
        if draw(st.booleans()):
            attrs["admin"] = draw(st.booleans())
        parents = parents_from("Group", GROUPS)
        entities.append({"uid": uid("User", user), "attrs": attrs, "parents": parents})
    for n, group in enumerate(GROUPS):
        parents = parents_from("Group", GROUPS[n + 1 :])
        entities.append({"uid": uid("Group", group), "attrs": {}, "parents": parents})
    for file in FILES:
        parents = parents_from("Folder", FOLDERS)
        entities.append({"uid": uid("File", file), "attrs": {}, "parents": parents})
    for n, folder in enumerate(FOLDERS):
        parents = parents_from("Folder", FOLDERS[n + 1 :])
        entities.append({"uid": uid("Folder", folder), "attrs": {}, "parents": parents})
    for action in ACTIONS:
        parents = parents_from("Action", ACTION_GROUPS)
        entities.append({"uid": uid("Action", action), "attrs": {}, "parents": parents})
    for n, group in enumerate(ACTION_GROUPS):
        parents = parents_from("Action", ACTION_GROUPS[n + 1 :])
        entities.append({"uid": uid("Action", group), "attrs": {}, "parents": parents})
    return entities


def schema_for(entities: list[dict[str, Any]]) -> str:
    """A Cedar schema whose action groups are the generated action hierarchy."""
    lines = [
        "entity Group in [Group];",
        "entity User in [Group] { level?: Long, admin?: Bool };",
        "entity Folder in [Folder];",
        "entity File in [Folder];",
    ]
    for entity in entities:
        if entity["uid"]["type"] != "Action":
            continue
        name = json.dumps(entity["uid"]["id"])
        member = ", ".join(json.dumps(p["id"]) for p in entity["parents"])
        in_clause = f" in [{member}]" if member else ""
        applies = (
            " appliesTo { principal: [User, Group], resource: [File, Folder],"
            " context: { x?: Long, flag?: Bool } }"
            if entity["uid"]["id"] in ACTIONS
            else ""
        )
        lines.append(f"action {name}{in_clause}{applies};")
    return "\n".join(lines)


# ---- policies ------------------------------------------------------------------------------

PRINCIPAL_SCOPES = st.sampled_from(
    ["principal"] * 3
    + [f"principal == {lit('User', u)}" for u in USERS]
    + [f"principal in {lit('Group', g)}" for g in GROUPS]
    + [f"principal in {lit('User', USERS[0])}"]
    + ["principal is User", "principal is Group"]
    + [f"principal is User in {lit('Group', g)}" for g in GROUPS[:2]]
    + ["principal == ?principal", "principal in ?principal", "principal is User in ?principal"]
)
ACTION_SCOPES = st.one_of(
    st.just("action"),
    st.sampled_from(ACTIONS + ACTION_GROUPS).map(lambda a: f"action == {lit('Action', a)}"),
    st.sampled_from(ACTIONS + ACTION_GROUPS).map(lambda a: f"action in {lit('Action', a)}"),
    st.lists(st.sampled_from(ACTIONS + ACTION_GROUPS), min_size=1, max_size=3, unique=True).map(
        lambda acts: "action in [" + ", ".join(lit("Action", a) for a in acts) + "]"
    ),
)
RESOURCE_SCOPES = st.sampled_from(
    ["resource"] * 3
    + [f"resource == {lit('File', f)}" for f in FILES]
    + [f"resource in {lit('Folder', d)}" for d in FOLDERS]
    + ["resource is File", "resource is Folder"]
    + [f"resource is File in {lit('Folder', d)}" for d in FOLDERS[:2]]
    + ["resource == ?resource", "resource in ?resource"]
)
CONDITIONS = st.sampled_from(
    [
        "when { context.x > 1 }",  # errors when the context has no x
        "when { context has x && context.x > 1 }",
        "unless { context has flag && context.flag }",
        "when { principal.level > 1 }",  # errors when the principal has no level
        "when { principal has admin && principal.admin }",
        "unless { principal.admin }",
        f"when {{ resource in {lit('Folder', FOLDERS[0])} }}",
        f"when {{ principal in {lit('Group', GROUPS[1])} }}",
        'when { action in Action::"ag0" }',
        "when { 1 + context.x > 2 }",
    ]
)


@dataclass(frozen=True)
class Case:
    text: str
    links: list[dict[str, Any]]
    base: list[dict[str, Any]]
    schema: str | None
    requests: list[tuple[dict[str, str], dict[str, str], dict[str, str], dict[str, Any], list[Any]]]


@st.composite
def policy_texts(draw: st.DrawFn) -> str:
    annotations = ""
    if draw(st.booleans()):
        annotations += f'@id("p{draw(st.integers(0, 99))}")\n'
    if draw(st.booleans()):
        annotations += '@ask("why")\n'
    # Mostly permits, few conditions: else nearly every request is denied and the reasons
    # and template links the property should compare rarely show up.
    effect = draw(st.sampled_from(["permit", "permit", "permit", "forbid"]))
    scope = f"{draw(PRINCIPAL_SCOPES)}, {draw(ACTION_SCOPES)}, {draw(RESOURCE_SCOPES)}"
    clauses = " ".join(draw(st.lists(CONDITIONS, max_size=2)) if draw(st.booleans()) else [])
    return f"{annotations}{effect}({scope}) {clauses};"


def slot_values(draw: st.DrawFn, text: str) -> dict[str, dict[str, str]]:
    values: dict[str, dict[str, str]] = {}
    if "?principal" in text:
        if "principal is User in ?principal" in text or draw(st.booleans()):
            values["?principal"] = uid("Group", draw(st.sampled_from(GROUPS)))
        else:
            values["?principal"] = uid("User", draw(st.sampled_from(USERS)))
    if "?resource" in text:
        if draw(st.booleans()):
            values["?resource"] = uid("Folder", draw(st.sampled_from(FOLDERS)))
        else:
            values["?resource"] = uid("File", draw(st.sampled_from(FILES)))
    return values


@st.composite
def cases(draw: st.DrawFn) -> Case:
    texts = draw(st.lists(policy_texts(), min_size=1, max_size=12))
    links: list[dict[str, Any]] = []
    for n, text in enumerate(texts):
        if "?principal" not in text and "?resource" not in text:
            continue
        links.extend(
            {
                "template_id": f"policy{n}",
                "new_id": f"link{n}_{k}",
                "values": slot_values(draw, text),
            }
            for k in range(draw(st.integers(0, 2)))
        )
    world = draw(worlds())
    use_schema = draw(st.booleans())
    schema = schema_for(world) if use_schema else None
    if use_schema:
        # The schema declares the actions and their groups; entities must not repeat them.
        world = [e for e in world if e["uid"]["type"] != "Action"]
    # Each entity is in the engine's store, sent with the request, or missing altogether.
    placement = draw(
        st.lists(
            st.sampled_from(["base", "request", "missing"]),
            min_size=len(world),
            max_size=len(world),
        )
    )
    base = [e for e, where in zip(world, placement, strict=True) if where == "base"]
    per_request = [e for e, where in zip(world, placement, strict=True) if where == "request"]

    principals = [uid("User", u) for u in USERS] + [uid("Group", g) for g in GROUPS[:2]]
    resources = [uid("File", f) for f in FILES] + [uid("Folder", d) for d in FOLDERS[:2]]
    actions = [uid("Action", a) for a in ACTIONS + ACTION_GROUPS[:1]]
    requests = []
    for _ in range(draw(st.integers(1, 4))):
        context: dict[str, Any] = {}
        if draw(st.booleans()):
            context["x"] = draw(st.integers(0, 3))
        if draw(st.booleans()):
            context["flag"] = draw(st.booleans())
        delta = (
            draw(st.lists(st.sampled_from(per_request), unique_by=lambda e: json.dumps(e["uid"])))
            if per_request
            else []
        )
        requests.append(
            (
                draw(st.sampled_from(principals)),
                draw(st.sampled_from(actions)),
                draw(st.sampled_from(resources)),
                context,
                delta,
            )
        )
    return Case("\n".join(texts), links, base, schema, requests)


def whole_set(case: Case, request: tuple[Any, ...]) -> Any:
    principal, action, resource, context, delta = request
    policies = cedarpy.PolicySet.from_str(case.text)
    if case.links:
        policies = policies.with_linked_batch(case.links)
    return cedarpy.is_authorized(
        {"principal": principal, "action": action, "resource": resource, "context": context},
        policies,
        case.base + delta,
        schema=case.schema,
    )


# Each example builds an engine and checks up to four requests (a few ms); half as many again
# as the active profile asks for (the default's 100 or the ci profile's), since the space of
# scopes x hierarchies x requests is large. No deadline: the first engine build is slower.
@settings(
    max_examples=settings().max_examples * 3 // 2,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(cases())
def test_r10_sliced_engine_decides_as_the_whole_set(case: Case) -> None:
    engine = CedarEngine(case.text, schema=case.schema, entities=case.base, links=case.links)
    for request in case.requests:
        principal, action, resource, context, delta = request
        expected = whole_set(case, request)
        got = engine.is_authorized(principal, action, resource, context, entities=delta)

        assert got.decision == ("allow" if expected.allowed else "deny")
        assert set(got.reasons) == set(expected.diagnostics.reasons)
        expected_errors = expected.diagnostics.errors
        assert sorted(e.policy_id or "" for e in got.errors) == sorted(
            text.split("`")[1] if text.startswith("error while evaluating policy") else ""
            for text in expected_errors
        )
        assert sorted(str(e) if e.policy_id is None else e.message for e in got.errors) == sorted(
            text.split("`: ", 1)[1] if text.startswith("error while evaluating policy") else text
            for text in expected_errors
        )
        # The slice really is a slice: it holds every policy Cedar found determining or
        # erroring, and (checked on the set sizes) it is never larger than the whole set.
        sliced = engine.slice(principal, action, resource, entities=delta)
        assert set(got.reasons) <= sliced
        assert {e.policy_id for e in got.errors if e.policy_id} <= sliced
