"""CedarEngine: parsing with locations, Cedar's answers (reasons, errors, annotations), slicing."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import cedarpy
import pytest

from clearance.errors import ConfigError, PolicyError
from clearance.policy.cedar.engine import (
    CedarEngine,
    CedarError,
    CedarResponse,
    EntityRef,
    PolicyInfo,
    ScopeConstraint,
)

ALICE = {"type": "User", "id": "alice"}
BOB = {"type": "User", "id": "bob"}
READ = {"type": "Action", "id": "read"}
WRITE = {"type": "Action", "id": "write"}
REPORT = {"type": "File", "id": "report"}

ENTITIES: list[dict[str, Any]] = [
    {"uid": ALICE, "attrs": {"level": 2}, "parents": [{"type": "Group", "id": "devs"}]},
    {
        "uid": {"type": "Group", "id": "devs"},
        "attrs": {},
        "parents": [{"type": "Group", "id": "staff"}],
    },
    {"uid": REPORT, "attrs": {}, "parents": [{"type": "Folder", "id": "docs"}]},
    {"uid": READ, "attrs": {}, "parents": [{"type": "Action", "id": "readers"}]},
]


def entity(uid: dict[str, str], *parents: dict[str, str], **attrs: Any) -> dict[str, Any]:
    return {"uid": uid, "attrs": attrs, "parents": list(parents)}


# ---- parsing and locations -----------------------------------------------------------------


def test_parse_error_names_file_line_and_policy() -> None:
    good = "permit(principal, action, resource);\n"
    bad = (
        "// the second file\n"
        "permit(principal, action, resource);\n"
        "\n"
        '@id("broken")\n'
        "forbid(principal ==, action, resource);\n"
        "permit(principal, action, resource) when { nope };\n"
    )
    with pytest.raises(PolicyError) as caught:
        CedarEngine([("a.cedar", good), ("b.cedar", bad)])
    error = caught.value
    # The line and column of the error (the `,` after `==`), not the policy's first line.
    assert (error.path, error.line, error.column, error.policy_id) == ("b.cedar", 5, 20, "broken")
    assert "b.cedar:5:20" in str(error)
    # Every policy that does not parse is listed, the unnamed one by its Cedar id.
    assert [(p["path"], p["line"], p["column"], p["policy_id"]) for p in error.problems] == [
        ("b.cedar", 5, 20, "broken"),
        ("b.cedar", 6, 44, "policy3"),
    ]


def test_missing_semicolon_is_pinned_to_the_last_policy() -> None:
    text = (
        'permit(principal, action, resource);\n\n@id("last")\npermit(principal, action, resource)'
    )
    with pytest.raises(PolicyError) as caught:
        CedarEngine(text)
    # Just after the last token: where the `;` is missing.
    assert (caught.value.line, caught.value.column, caught.value.policy_id) == (4, 36, "last")


def test_semicolons_inside_strings_and_comments_do_not_split_policies() -> None:
    text = (
        "// a comment; with a semicolon\n"
        '@id("semi;colon")\n'
        'permit(principal, action, resource) when { context.s == "a;b\\";c" };\n'
        "forbid(principal, action, resource) unless { context has s }; // trailing; comment\n"
    )
    engine = CedarEngine(text)
    assert [(p.id, p.line, p.label) for p in engine.policies] == [
        ("policy0", 2, "semi;colon"),
        ("policy1", 4, "policy1"),
    ]
    assert engine.is_authorized(ALICE, READ, REPORT, {"s": 'a;b";c'}).reasons == ("policy0",)


def test_policy_info_gives_ids_effects_annotations_scopes_and_locations() -> None:
    first = '@id("devs-read")\n@ask("reading needs a look")\npermit(principal in Group::"devs", action in [Action::"read", Action::"write"], resource is File in Folder::"docs");\n'
    second = (
        "\n"
        'forbid(principal is User, action == Action::"write", resource) when { context.x > 1 };\n'
        '@id("owner")\npermit(principal == ?principal, action, resource in ?resource);\n'
    )
    engine = CedarEngine(
        [("one.cedar", first), ("two.cedar", second)],
        links=[
            {
                "template_id": "owner",
                "new_id": "bob-docs",
                "values": {"?principal": BOB, "?resource": {"type": "Folder", "id": "docs"}},
            }
        ],
    )
    by_id = {p.id: p for p in engine.policies}
    assert list(by_id) == ["policy0", "policy1", "policy2", "bob-docs"]

    devs = engine.policy("policy0")
    assert isinstance(devs, PolicyInfo)
    assert (devs.effect, devs.kind, devs.path, devs.line, devs.location) == (
        "permit",
        "static",
        "one.cedar",
        1,
        "one.cedar:1",
    )
    assert dict(devs.annotations) == {"id": "devs-read", "ask": "reading needs a look"}
    assert devs.label == "devs-read"
    assert devs.principal == ScopeConstraint("in", (EntityRef("Group", "devs"),))
    assert devs.action.render("action") == 'action in [Action::"read", Action::"write"]'
    assert devs.resource.render("resource") == 'resource is File in Folder::"docs"'
    assert devs.text is not None and devs.text.startswith('@id("devs-read")')

    forbid = engine.policy("policy1")
    assert (forbid.effect, forbid.path, forbid.line, forbid.conditions) == (
        "forbid",
        "two.cedar",
        2,
        1,
    )
    assert forbid.principal.render("principal") == "principal is User"
    assert forbid.action.render("action") == 'action == Action::"write"'
    assert forbid.resource.op == "any"

    template = engine.policy("policy2")
    assert template.kind == "template"
    assert template.principal.slot == "?principal"
    assert template.principal.render("principal") == "principal == ?principal"

    link = engine.policy("bob-docs")
    assert (link.kind, link.template_id, link.line, link.label) == ("link", "policy2", 3, "owner")
    assert link.principal == ScopeConstraint("==", (EntityRef("User", "bob"),))
    assert link.resource.render("resource") == 'resource in Folder::"docs"'

    with pytest.raises(KeyError):
        engine.policy("policy9")


def test_bad_link_schema_and_entities_are_config_errors() -> None:
    template = "permit(principal == ?principal, action, resource);"
    with pytest.raises(PolicyError, match="link"):
        CedarEngine(template, links=[{"template_id": "nope", "new_id": "x", "values": {}}])
    with pytest.raises(ConfigError, match="schema"):
        CedarEngine(template, schema="entity User in [;")
    with pytest.raises(ConfigError, match="entities"):
        CedarEngine(template, entities=[{"uid": {"type": "User"}, "attrs": {}, "parents": []}])


def test_entity_ids_that_need_escaping_render_as_cedar() -> None:
    ref = EntityRef("User", 'a"b\\c')
    engine = CedarEngine(f"permit(principal == {ref}, action, resource);")
    assert engine.policy("policy0").principal.entities == (ref,)
    assert engine.is_authorized({"type": "User", "id": 'a"b\\c'}, READ, REPORT).decision == "allow"


# ---- Cedar's answers -----------------------------------------------------------------------


def test_reasons_are_the_determining_policies_in_policy_order() -> None:
    text = (
        '@id("devs")\npermit(principal in Group::"devs", action, resource);\n'
        'permit(principal, action == Action::"read", resource);\n'
        'permit(principal == User::"bob", action, resource);\n'
        '@id("no-writes")\nforbid(principal, action == Action::"write", resource);\n'
    )
    engine = CedarEngine(text, entities=ENTITIES)
    allowed = engine.is_authorized(ALICE, READ, REPORT)
    assert isinstance(allowed, CedarResponse)
    assert (allowed.decision, allowed.allowed, allowed.reasons) == (
        "allow",
        True,
        ("policy0", "policy1"),
    )
    assert allowed.annotations == {"policy0": {"id": "devs"}, "policy1": {}}

    # A satisfied forbid wins; the reasons are the forbids, not the satisfied permits.
    denied = engine.is_authorized(ALICE, WRITE, REPORT)
    assert (denied.decision, denied.reasons) == ("deny", ("policy3",))
    assert denied.annotations == {"policy3": {"id": "no-writes"}}

    # Nothing permits: deny with no reasons (Cedar's default deny).
    nobody = engine.is_authorized(
        {"type": "User", "id": "carol"}, {"type": "Action", "id": "x"}, REPORT
    )
    assert (nobody.decision, nobody.reasons, nobody.errors) == ("deny", (), ())


def test_a_policy_that_errors_is_skipped_and_recorded() -> None:
    text = (
        '@id("big")\n@ask("large input")\npermit(principal, action, resource) when { context.x > 1 };\n'
        "permit(principal, action, resource) when { principal.level > 1 };\n"
        "forbid(principal, action, resource) when { principal.missing };\n"
    )
    engine = CedarEngine(text, entities=ENTITIES)
    response = engine.is_authorized(ALICE, READ, REPORT, context={})
    assert response.decision == "allow"
    assert response.reasons == ("policy1",)
    assert [e.policy_id for e in response.errors] == ["policy0", "policy2"]
    assert all(isinstance(e, CedarError) for e in response.errors)
    assert response.errors[0].message == "record does not have the attribute `x`"
    assert str(response.errors[0]).startswith("policy0: record does not have")
    assert "missing" in response.errors[1].message
    # Annotations cover erroring policies too: the evaluator reads @ask from them.
    assert response.annotations["policy0"] == {"id": "big", "ask": "large input"}

    # Exactly what Cedar says on the whole set.
    cedar = cedarpy.is_authorized(
        {"principal": ALICE, "action": READ, "resource": REPORT, "context": {}}, text, ENTITIES
    )
    assert set(response.reasons) == set(cedar.diagnostics.reasons)
    assert len(response.errors) == len(cedar.diagnostics.errors)


def test_per_request_entities_are_added_and_replace_engine_entities() -> None:
    text = 'permit(principal in Group::"ops", action, resource) when { principal.level > 2 };'
    engine = CedarEngine(text, entities=ENTITIES)
    ops = {"type": "Group", "id": "ops"}
    assert engine.is_authorized(BOB, READ, REPORT).decision == "deny"
    bob = entity(BOB, ops, level=3)
    response = engine.is_authorized(BOB, READ, REPORT, entities=[bob])
    assert (response.decision, response.reasons) == ("allow", ("policy0",))
    # Alice is an engine entity (in devs, level 2); sent with the request she is replaced.
    assert engine.is_authorized(ALICE, READ, REPORT).decision == "deny"
    moved = engine.is_authorized(ALICE, READ, REPORT, entities=[entity(ALICE, ops, level=5)])
    assert moved.decision == "allow"
    # The same request again, from the merged-entities cache, answers the same.
    assert engine.is_authorized(BOB, READ, REPORT, entities=[bob]) == response
    # And the engine's own entities are unchanged.
    assert engine.is_authorized(ALICE, READ, REPORT).decision == "deny"


def test_schema_action_groups_count_for_action_in_and_bad_requests_are_no_decision() -> None:
    schema = """
        entity Group in [Group];
        entity User in [Group] { level?: Long };
        entity Folder;
        entity File in [Folder];
        action readers;
        action read in [readers] appliesTo { principal: [User], resource: [File], context: {} };
        action write appliesTo { principal: [User], resource: [File], context: {} };
    """
    text = 'permit(principal, action in Action::"readers", resource);'
    entities = [e for e in ENTITIES if e["uid"]["type"] != "Action"]
    engine = CedarEngine(text, schema=schema, entities=entities)
    assert engine.slice(ALICE, READ, REPORT) == {"policy0"}
    assert engine.is_authorized(ALICE, READ, REPORT).reasons == ("policy0",)
    assert engine.is_authorized(ALICE, WRITE, REPORT).decision == "deny"
    unknown = engine.is_authorized(ALICE, {"type": "Action", "id": "delete"}, REPORT)
    assert unknown.decision == "deny"
    assert [e.policy_id for e in unknown.errors] == [None]
    assert "delete" in unknown.errors[0].message
    # Per-request entities that do not conform to the schema: no decision either.
    bad = engine.is_authorized(ALICE, READ, REPORT, entities=[entity(BOB, level="high")])
    assert bad.decision == "deny" and bad.errors[0].policy_id is None


def test_validate_locates_problems() -> None:
    schema = {
        "": {
            "entityTypes": {"User": {}, "File": {}},
            "actions": {
                "read": {"appliesTo": {"principalTypes": ["User"], "resourceTypes": ["File"]}}
            },
        }
    }
    text = (
        'permit(principal, action == Action::"read", resource);\n'
        '@id("typo")\n'
        'permit(principal is Usr, action == Action::"read", resource);\n'
    )
    engine = CedarEngine([("p.cedar", text)])
    problems = engine.validate(schema)
    assert problems
    assert {(p.policy_id, p.cedar_id, p.path, p.line) for p in problems} == {
        ("typo", "policy1", "p.cedar", 2)
    }
    assert problems[0].as_dict()["policy_id"] == "typo"
    assert CedarEngine(text.splitlines()[0], schema=schema).validate() == ()
    with pytest.raises(ValueError, match="schema"):
        engine.validate()


# ---- slicing -------------------------------------------------------------------------------

SCOPES = """
permit(principal, action, resource) when { context.x > 1 };
permit(principal == User::"alice", action == Action::"read", resource);
permit(principal in Group::"staff", action in [Action::"write", Action::"readers"], resource);
permit(principal is User in Group::"devs", action, resource is File in Folder::"docs");
permit(principal is Group, action, resource);
forbid(principal, action == Action::"write", resource == File::"report");
permit(principal in ?principal, action, resource == ?resource);
"""


def test_slice_holds_exactly_the_policies_whose_scope_matches() -> None:
    engine = CedarEngine(
        SCOPES,
        entities=ENTITIES,
        links=[
            {
                "template_id": "policy6",
                "new_id": "devs-report",
                "values": {"?principal": {"type": "Group", "id": "devs"}, "?resource": REPORT},
            },
            {
                "template_id": "policy6",
                "new_id": "bob-other",
                "values": {"?principal": BOB, "?resource": {"type": "File", "id": "other"}},
            },
        ],
    )
    # `when` is not indexed; `in` goes through alice → devs → staff and read → readers.
    assert engine.slice(ALICE, READ, REPORT) == {
        "policy0",
        "policy1",
        "policy2",
        "policy3",
        "devs-report",
    }
    assert engine.slice(ALICE, WRITE, REPORT) == {
        "policy0",
        "policy2",
        "policy3",
        "policy5",
        "devs-report",
    }
    assert engine.slice(BOB, READ, {"type": "File", "id": "other"}) == {"policy0", "bob-other"}
    assert engine.slice({"type": "Group", "id": "devs"}, READ, REPORT) == {
        "policy0",
        "policy2",
        "policy4",
        "devs-report",
    }
    # Per-request parents count: bob sent as a member of devs.
    bob = entity(BOB, {"type": "Group", "id": "devs"})
    assert engine.slice(BOB, READ, REPORT, entities=[bob]) == {
        "policy0",
        "policy2",
        "policy3",
        "devs-report",
    }
    stats = engine.statistics()
    assert (stats.policies, stats.templates, stats.links, stats.always) == (8, 1, 2, 1)


def test_sliced_answers_equal_whole_set_answers() -> None:
    links = [
        {
            "template_id": "policy6",
            "new_id": "devs-report",
            "values": {"?principal": {"type": "Group", "id": "devs"}, "?resource": REPORT},
        }
    ]
    sliced = CedarEngine(SCOPES, entities=ENTITIES, links=links, cache_size=1)
    whole = CedarEngine(SCOPES, entities=ENTITIES, links=links, slicing=False)
    principals = [ALICE, BOB, {"type": "Group", "id": "devs"}]
    actions = [READ, WRITE, {"type": "Action", "id": "readers"}]
    resources = [REPORT, {"type": "File", "id": "other"}, {"type": "Folder", "id": "docs"}]
    for principal in principals:
        for action in actions:
            for resource in resources:
                for context in ({}, {"x": 2}):
                    # cache_size=1: every other call rebuilds its slice; answers do not change.
                    got = sliced.is_authorized(principal, action, resource, context)
                    assert got == whole.is_authorized(principal, action, resource, context)
    assert whole.slice(ALICE, READ, REPORT) == {
        u.id for u in whole.policies if u.kind != "template"
    }
    assert sliced.statistics().slice_misses > 1


def test_slices_stay_small_in_a_large_store() -> None:
    text = "\n".join(
        f'permit(principal in Group::"devs", action == Action::"tool_{k % 500}", resource) '
        f"when {{ context.n < {k} }};"
        for k in range(2_000)
    )
    engine = CedarEngine(text, entities=ENTITIES)
    action = {"type": "Action", "id": "tool_7"}
    assert engine.slice(ALICE, action, REPORT) == {f"policy{k}" for k in (7, 507, 1007, 1507)}
    response = engine.is_authorized(ALICE, action, REPORT, {"n": 600})
    assert response.reasons == ("policy1007", "policy1507")
    stats = engine.statistics()
    assert stats.buckets == 500
    assert stats.slices_cached == 1


def test_engine_is_safe_to_share_between_threads() -> None:
    engine = CedarEngine(SCOPES, entities=ENTITIES, cache_size=2)
    requests = [
        (p, a, r)
        for p in (ALICE, BOB)
        for a in (READ, WRITE)
        for r in (REPORT, {"type": "File", "id": "other"})
    ] * 25
    expected = [engine.is_authorized(p, a, r, {"x": 2}) for p, a, r in requests]

    def decide(request: tuple[dict[str, str], dict[str, str], dict[str, str]]) -> CedarResponse:
        principal, action, resource = request
        return engine.is_authorized(principal, action, resource, {"x": 2})

    with ThreadPoolExecutor(max_workers=4) as pool:
        got = list(pool.map(decide, requests))
    assert got == expected


def test_requests_must_name_entities_as_type_and_id() -> None:
    engine = CedarEngine(SCOPES)
    with pytest.raises(ValueError, match="entity uid"):
        engine.is_authorized({"name": "alice"}, READ, REPORT)
    # The `__entity` escape is accepted too.
    escaped = {"__entity": ALICE}
    assert engine.slice(escaped, READ, REPORT) == engine.slice(ALICE, READ, REPORT)


def test_no_cedarpy_types_in_answers() -> None:
    engine = CedarEngine(SCOPES, entities=ENTITIES)
    response = engine.is_authorized(ALICE, READ, REPORT, {})
    values: list[Any] = [response, *response.errors, *response.annotations.values()]
    values += [*engine.policies, engine.statistics()]
    for value in values:
        assert not type(value).__module__.startswith("cedarpy")
    json.dumps(response.reasons)  # plain strings


def test_the_direct_cedar_call_agrees_and_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    from clearance.policy.cedar._call import cedar_call

    policies = 'permit(principal, action == Action::"a", resource) when { context.x == 1 };'
    request = ({"type": "User", "id": "u"}, {"type": "Action", "id": "a"}, {"type": "T", "id": "t"})
    engine = CedarEngine(policies)
    assert engine.is_authorized(*request, context={"x": 1}).decision == "allow"
    assert cedar_call.direct is True  # the first decision checked the direct path
    assert engine.is_authorized(*request, context={"x": 2}).decision == "deny"

    def broken(*args: object) -> object:
        raise TypeError("changed signature")

    monkeypatch.setattr(cedar_call, "internal", broken)
    monkeypatch.setattr(cedar_call, "direct", None)
    assert engine.is_authorized(*request, context={"x": 1}).decision == "allow"
    assert cedar_call.direct is False
    assert engine.is_authorized(*request, context={"x": 2}).decision == "deny"
