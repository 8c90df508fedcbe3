"""CedarEvaluator: loading and validation at bind, the request mapping, verdicts, reloads."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

import cedarpy
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from clearance.errors import ConfigError, PolicyError
from clearance.facts.declared import apply_facts
from clearance.harness.tools import Tool, ToolRegistry
from clearance.policy.base import AuthzRequest, Principal, SessionInfo, Verdict
from clearance.policy.cedar import CedarEvaluator, generate_schema
from clearance.policy.cedar._values import CedarError, CedarResponse
from clearance.policy.cedar._verdicts import VerdictMap

ALICE = Principal("User", "alice")


def _handler(arguments: dict[str, Any], ctx: Any) -> str:
    return "ok"


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def registry() -> ToolRegistry:
    reg = ToolRegistry()
    reg.register(
        "files",
        [
            Tool(
                "read_file",
                _handler,
                input_schema=_object(
                    {
                        "path": {"type": "string"},
                        "offset": {"type": "integer"},
                        "limit": {"type": "integer"},
                    },
                    ["path"],
                ),
                read_only=True,
            ),
            Tool(
                "write_file",
                _handler,
                input_schema=_object(
                    {"path": {"type": "string"}, "content": {"type": "string"}},
                    ["path", "content"],
                ),
                annotations={"destructiveHint": True},
            ),
        ],
    )
    reg.register(
        "shop",
        [
            Tool(
                "refund",
                _handler,
                input_schema=_object(
                    {
                        "amount": {"type": "number"},
                        "count": {"type": "integer"},
                        "tags": {"type": "array", "items": {"type": "string"}},
                        "order": {
                            "type": "object",
                            "properties": {"id": {"type": "string"}, "rush": {"type": "boolean"}},
                            "required": ["id"],
                        },
                        "note": {"type": ["string", "null"]},
                    },
                    ["amount", "count"],
                ),
            )
        ],
    )
    return reg


REGISTRY = registry()


def request(
    tool: str,
    arguments: dict[str, Any] | None = None,
    principal: Principal = ALICE,
    session: SessionInfo | None = None,
) -> AuthzRequest:
    return AuthzRequest(
        principal,
        REGISTRY.get(tool).info,
        arguments if arguments is not None else {"path": "a.txt"},
        session or SessionInfo("s1", "t1"),
    )


def bound(policies: str, **options: Any) -> CedarEvaluator:
    evaluator = CedarEvaluator(policies, **options)
    evaluator.bind(REGISTRY)
    return evaluator


REFUND = {"amount": 12.5, "count": 1}


# --- verdicts -------------------------------------------------------------------------------


def test_a_permit_allows_and_names_its_policy() -> None:
    ev = bound('@id("read")\npermit(principal, action in Action::"read_only", resource);')
    verdict = ev.evaluate(request("files.read_file"))
    assert verdict.effect == "allow"
    assert verdict.reasons == ("read",)
    assert verdict.annotations == {"read": "policy0"}
    assert verdict.evaluator == "cedar"


def test_nothing_permitted_is_denied_with_a_message() -> None:
    ev = bound('permit(principal, action in Action::"read_only", resource);')
    verdict = ev.evaluate(request("files.write_file", {"path": "a", "content": ""}))
    assert verdict.effect == "deny"
    assert verdict.reasons == ()
    assert verdict.message == 'no policy permits User::"alice" to call files.write_file'


def test_a_policy_without_id_is_named_by_its_cedar_id() -> None:
    ev = bound("permit(principal, action, resource);")
    verdict = ev.evaluate(request("files.read_file"))
    assert verdict.reasons == ("policy0",)
    assert verdict.annotations == {}


def test_ask_when_every_satisfied_permit_asks() -> None:
    ev = bound(
        """
        @id("ask-write") @ask("writes need a human")
        permit(principal, action == Action::"files.write_file", resource);
        @id("ask-any") @ask("everything is reviewed")
        permit(principal, action in Action::"ns:files", resource);
        """
    )
    verdict = ev.evaluate(request("files.write_file", {"path": "a", "content": ""}))
    assert verdict.effect == "ask"
    assert set(verdict.reasons) == {"ask-write", "ask-any"}
    assert verdict.message == "writes need a human; everything is reviewed"


def test_any_satisfied_permit_without_ask_allows() -> None:
    ev = bound(
        """
        @id("ask-any") @ask("reviewed")
        permit(principal, action in Action::"ns:files", resource);
        @id("reads") permit(principal, action in Action::"read_only", resource);
        """
    )
    verdict = ev.evaluate(request("files.read_file"))
    assert verdict.effect == "allow"
    assert set(verdict.reasons) == {"ask-any", "reads"}
    assert ev.evaluate(request("files.write_file", {"path": "a", "content": ""})).effect == "ask"


def test_a_bare_ask_gets_a_default_message() -> None:
    ev = bound('@id("w") @ask\npermit(principal, action == Action::"files.write_file", resource);')
    verdict = ev.evaluate(request("files.write_file", {"path": "a", "content": ""}))
    assert verdict.effect == "ask"
    assert verdict.message == "approval required by w"


def test_a_forbid_beats_an_ask_and_an_allow() -> None:
    ev = bound(
        """
        @id("ok") permit(principal, action, resource);
        @id("ask") @ask("hm") permit(principal, action, resource);
        @id("no-dotdot") forbid(principal, action in Action::"ns:files", resource)
          when { context.input.path like "*..*" };
        """
    )
    verdict = ev.evaluate(request("files.read_file", {"path": "../x"}))
    assert verdict.effect == "deny"
    assert verdict.reasons == ("no-dotdot",)
    assert verdict.message == "forbidden by no-dotdot"
    assert ev.evaluate(request("files.read_file", {"path": "x"})).effect == "allow"


def test_an_erroring_policy_is_skipped_and_recorded() -> None:
    ev = bound(
        """
        @id("overflow") forbid(principal, action == Action::"shop.refund", resource)
          when { context.input.count * 4611686018427387904 > 0 };
        @id("ok") permit(principal, action == Action::"shop.refund", resource);
        """
    )
    verdict = ev.evaluate(request("shop.refund", {"amount": 1, "count": 3}))
    # Cedar skips the erroring forbid; a forbid that cannot be evaluated must not let the
    # call through, so the evaluator denies (R1; a red-team finding: it used to allow).
    assert verdict.effect == "deny" and verdict.reasons == ("overflow",)
    assert len(verdict.errors) == 1
    assert verdict.errors[0].startswith("overflow: ")
    assert "overflow" in verdict.errors[0].split(": ", 1)[1]
    assert verdict.message is not None and "could not be evaluated" in verdict.message


def test_an_erroring_permit_is_skipped_and_recorded() -> None:
    ev = bound(
        """
        @id("overflow") permit(principal, action == Action::"shop.refund", resource)
          when { context.input.count * 4611686018427387904 > 0 };
        @id("ok") permit(principal, action == Action::"shop.refund", resource);
        """
    )
    verdict = ev.evaluate(request("shop.refund", {"amount": 1, "count": 3}))
    assert verdict.effect == "allow" and verdict.reasons == ("ok",)  # as in Cedar
    assert len(verdict.errors) == 1 and verdict.errors[0].startswith("overflow: ")


# --- the request: input, session, tool, principal -----------------------------------------


def test_typed_input_is_readable_in_conditions() -> None:
    ev = bound(
        """
        @id("small") permit(principal, action == Action::"shop.refund", resource)
          when { context.input.amount.lessThanOrEqual(decimal("20.0")) && context.input.count < 5
                 && !(context.input has tags && context.input.tags.contains("fraud"))
                 && !(context.input has order && context.input.order has rush
                      && context.input.order.rush) };
        """
    )
    assert ev.evaluate(request("shop.refund", REFUND)).effect == "allow"
    assert ev.evaluate(request("shop.refund", {**REFUND, "tags": []})).effect == "allow"
    assert ev.evaluate(request("shop.refund", {**REFUND, "amount": 20})).effect == "allow"
    assert ev.evaluate(request("shop.refund", {**REFUND, "amount": 20.0001})).effect == "deny"
    assert ev.evaluate(request("shop.refund", {**REFUND, "tags": ["fraud"]})).effect == "deny"
    rush = {**REFUND, "tags": [], "order": {"id": "o1", "rush": True}}
    assert ev.evaluate(request("shop.refund", rush)).effect == "deny"
    calm = {**REFUND, "tags": [], "order": {"id": "o1"}}
    assert ev.evaluate(request("shop.refund", calm)).effect == "allow"


def test_null_for_a_nullable_argument_is_absent() -> None:
    ev = bound(
        '@id("noted") permit(principal, action == Action::"shop.refund", resource)'
        " when { context.input has note };"
    )
    assert ev.evaluate(request("shop.refund", {**REFUND, "note": "x"})).effect == "allow"
    assert ev.evaluate(request("shop.refund", {**REFUND, "note": None})).effect == "deny"


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ({"amount": 1, "count": 1.5}, "input.count: expected an integer, got 1.5"),
        ({"amount": 1, "count": 2**63}, "outside Cedar's Long range"),
        ({"amount": 1, "count": True}, "input.count: expected an integer, got a boolean"),
        ({"amount": 0.12345, "count": 1}, "more than 4 decimal places"),
        ({"amount": 1e15, "count": 1}, "outside Cedar's decimal range"),
        ({"amount": float("nan"), "count": 1}, "not a finite number"),
        ({"amount": "1.0", "count": 1}, "input.amount: expected a number, got a string"),
        ({"amount": 1, "count": 1, "tags": ["ok", 3]}, "input.tags[1]: expected a string"),
        ({"amount": 1, "count": 1, "order": {"id": "\ud800"}}, "lone surrogate"),
        ({"amount": 1, "count": 1, "order": {}}, "input.order.id: required value is missing"),
    ],
)
def test_values_that_do_not_fit_their_cedar_type_are_denied(
    arguments: dict[str, Any], fragment: str
) -> None:
    ev = bound(
        """
        permit(principal, action == Action::"shop.refund", resource)
          when { context.input.count > 0 && context.input.amount.greaterThan(decimal("0.0"))
                 && (context.input has tags ==> true) };
        permit(principal, action == Action::"shop.refund", resource)
          when { context.input has tags && context.input.tags.isEmpty() };
        permit(principal, action == Action::"shop.refund", resource)
          when { context.input has order && context.input.order.id == "" };
        """.replace("==> true", "|| true")
    )
    verdict = ev.evaluate(request("shop.refund", arguments))
    assert verdict.effect == "deny"
    assert verdict.message is not None
    assert fragment in verdict.message
    assert verdict.message.startswith("cannot put the call to Cedar")


def test_integral_floats_fit_a_long_exactly() -> None:
    ev = bound(
        'permit(principal, action == Action::"shop.refund", resource) when { context.input.count == 2 };'
    )
    assert ev.evaluate(request("shop.refund", {"amount": 1, "count": 2.0})).effect == "allow"


def test_session_and_tool_are_in_the_context() -> None:
    ev = bound(
        """
        @id("session") permit(principal, action == Action::"files.read_file", resource)
          when { context.session.id == "s1" && context.session has turn && context.session.turn == "t1" };
        @id("destructive") forbid(principal, action, resource)
          when { context.tool.annotations has destructiveHint && context.tool.annotations.destructiveHint };
        @id("mutating") permit(principal, action, resource) when { !context.tool.read_only };
        """
    )
    assert ev.evaluate(request("files.read_file")).reasons == ("session",)
    other = request("files.read_file", session=SessionInfo("s2"))
    assert ev.evaluate(other).effect == "deny"
    write = request("files.write_file", {"path": "a", "content": ""})
    assert ev.evaluate(write).reasons == ("destructive",)
    assert ev.evaluate(request("shop.refund", REFUND)).reasons == ("mutating",)


def test_a_policy_reading_the_whole_context_sees_all_of_it() -> None:
    ev = bound(
        'permit(principal, action == Action::"files.write_file", resource) when '
        '{ context.input == {"path": "a", "content": "x"} };'
    )
    write = request("files.write_file", {"path": "a", "content": "x"})
    assert ev.evaluate(write).effect == "allow"
    assert ev.evaluate(request("files.write_file", {"path": "a", "content": "y"})).effect == "deny"


def test_resource_attributes_and_namespace_parents() -> None:
    ev = bound(
        """
        @id("files") permit(principal, action, resource in Namespace::"files")
          when { resource.read_only && resource.namespace == "files" && resource.source == "callback"
                 && !(resource has server) };
        @id("refunds") permit(principal, action, resource == Tool::"shop.refund");
        """
    )
    assert ev.evaluate(request("files.read_file")).reasons == ("files",)
    assert ev.evaluate(request("files.write_file", {"path": "a", "content": ""})).effect == "deny"
    assert ev.evaluate(request("shop.refund", REFUND)).reasons == ("refunds",)


TEAM_SCHEMA = {
    "entityTypes": {
        "Team": {},
        "User": {
            "memberOfTypes": ["Team"],
            "shape": {
                "type": "Record",
                "attributes": {
                    "level": {"type": "Long"},
                    "email": {"type": "String", "required": False},
                },
            },
        },
        "Agent": {},
    },
}


def test_principal_attributes_and_parents() -> None:
    ev = bound(
        """
        @id("infra") permit(principal in Team::"infra", action, resource)
          when { principal.level >= 3 };
        """,
        schema=TEAM_SCHEMA,
    )
    senior = Principal("User", "alice", {"level": 4, "ignored": "x"}, [("Team", "infra")])
    junior = Principal("User", "bob", {"level": 1}, [("Team", "infra")])
    outsider = Principal("User", "carol", {"level": 9})
    assert ev.evaluate(request("files.read_file", principal=senior)).effect == "allow"
    assert ev.evaluate(request("files.read_file", principal=junior)).effect == "deny"
    assert ev.evaluate(request("files.read_file", principal=outsider)).effect == "deny"


def test_principals_that_do_not_fit_the_schema_are_denied() -> None:
    ev = bound("permit(principal, action, resource);", schema=TEAM_SCHEMA)
    robot = ev.evaluate(request("files.read_file", principal=Principal("Robot", "r2")))
    assert robot.effect == "deny"
    assert robot.message is not None and "principal type 'Robot' is not declared" in robot.message
    missing = ev.evaluate(request("files.read_file", principal=Principal("User", "x")))
    assert missing.effect == "deny"
    assert missing.message is not None and "principal.level" in missing.message
    wrong = ev.evaluate(
        request("files.read_file", principal=Principal("User", "x", {"level": "hi"}))
    )
    assert wrong.effect == "deny"
    assert (
        ev.evaluate(request("files.read_file", principal=Principal("Agent", "a"))).effect == "allow"
    )


def test_extra_entities_give_principals_their_groups(tmp_path: Path) -> None:
    entities = [
        {
            "uid": {"type": "User", "id": "alice"},
            "attrs": {"level": 5},
            "parents": [{"type": "Team", "id": "infra"}],
        },
        {"uid": {"type": "Team", "id": "infra"}, "attrs": {}, "parents": []},
    ]
    policies = 'permit(principal in Team::"infra", action, resource) when { principal.level > 2 };'
    for source in (entities, lambda: entities):
        ev = bound(policies, schema=TEAM_SCHEMA, entities=source)
        assert ev.evaluate(request("files.read_file")).effect == "allow"
        assert (
            ev.evaluate(
                request("files.read_file", principal=Principal("User", "bob", {"level": 9}))
            ).effect
            == "deny"
        )
    path = tmp_path / "entities.json"
    path.write_text(json.dumps(entities))
    ev = bound(policies, schema=TEAM_SCHEMA, entities=path)
    assert ev.evaluate(request("files.read_file")).effect == "allow"


def test_entities_that_do_not_fit_the_schema_fail_at_bind() -> None:
    ev = CedarEvaluator(
        "permit(principal, action, resource);",
        schema=TEAM_SCHEMA,
        entities=[{"uid": {"type": "User", "id": "a"}, "attrs": {"level": "high"}, "parents": []}],
    )
    with pytest.raises(ConfigError, match="entities do not fit"):
        ev.bind(REGISTRY)


def test_a_namespace_qualifies_types_and_actions() -> None:
    ev = bound(
        'permit(principal is Clearance::User, action in Clearance::Action::"read_only", '
        'resource is Clearance::Tool) when { context.input.path == "a.txt" };',
        namespace="Clearance",
    )
    assert ev.evaluate(request("files.read_file")).effect == "allow"
    assert ev.evaluate(request("files.read_file", {"path": "b"})).effect == "deny"


def test_unbound_evaluators_and_unknown_tools_deny() -> None:
    ev = CedarEvaluator("permit(principal, action, resource);")
    verdict = ev.evaluate(request("files.read_file"))
    assert verdict.effect == "deny" and "not bound" in (verdict.message or "")
    small = ToolRegistry()
    small.register(
        "files",
        [
            Tool(
                "read_file",
                _handler,
                input_schema=_object({"path": {"type": "string"}}, ["path"]),
                read_only=True,
            )
        ],
    )
    ev.bind(small)
    verdict = ev.evaluate(request("shop.refund", REFUND))
    assert verdict.effect == "deny" and "not in the Cedar schema" in (verdict.message or "")


# --- loading: parse and validation errors ---------------------------------------------------


def test_a_misspelled_argument_fails_at_load_pointing_at_it(tmp_path: Path) -> None:
    (tmp_path / "a.cedar").write_text(
        '@id("reads")\npermit(principal, action in Action::"read_only", resource);\n'
    )
    (tmp_path / "b.cedar").write_text(
        "// writes\n"
        '@id("no-dotdot")\n'
        'forbid(principal, action == Action::"files.write_file", resource)\n'
        "when {\n"
        '  context.input.pth like "*..*"\n'
        "};\n"
    )
    ev = CedarEvaluator.from_directory(tmp_path)
    with pytest.raises(PolicyError) as info:
        ev.bind(REGISTRY)
    error = info.value
    assert error.policy_id == "no-dotdot"
    assert error.path == str(tmp_path / "b.cedar")
    assert error.line == 5
    assert "input.pth" in str(error)
    assert "did you mean `input.path`?" in str(error)
    assert error.problems == [
        {
            "path": str(tmp_path / "b.cedar"),
            "line": 5,
            "column": 17,
            "policy_id": "no-dotdot",
            "message": error.problems[0]["message"],
            "frame": ' 4 | when {\n 5 |   context.input.pth like "*..*"\n   |                 ^^^',
        }
    ]
    assert error.column == 17
    assert not ev.bound


def test_every_problem_is_listed() -> None:
    ev = CedarEvaluator(
        [
            (
                "p.cedar",
                '@id("a")\npermit(principal, action == Action::"files.nope", resource);\n'
                '@id("b")\npermit(principal, action, resource == Tool::"files.reed_file");\n'
                '@id("c")\npermit(principal, action, resource in Namespace::"fils");\n'
                '@id("d")\npermit(principal, action, resource) when { principal.level > 1 };\n',
            )
        ]
    )
    with pytest.raises(PolicyError) as info:
        ev.bind(REGISTRY)
    problems = info.value.problems
    by_policy: dict[object, list[str]] = {}
    for p in problems:
        by_policy.setdefault(p["policy_id"], []).append(str(p["message"]))
    assert set(by_policy) == {"a", "b", "c", "d"}
    assert any("files.nope" in m for m in by_policy["a"])
    assert by_policy["b"] == [
        'Tool::"files.reed_file" is not a registered tool; did you mean Tool::"files.read_file"?'
    ]
    assert any('Namespace::"fils"' in m for m in by_policy["c"])
    assert [p["line"] for p in problems if p["policy_id"] == "b"] == [4]
    assert all(p["path"] == "p.cedar" for p in problems)


def test_unknown_names_in_conditions_are_errors_too() -> None:
    ev = CedarEvaluator(
        '@id("x") permit(principal, action, resource) when { resource == Tool::"shell.run" };'
    )
    with pytest.raises(PolicyError, match=re.escape('Tool::"shell.run" is not a registered tool')):
        ev.bind(REGISTRY)


def test_a_parse_error_raises_at_construction() -> None:
    with pytest.raises(PolicyError) as info:
        CedarEvaluator(
            [
                (
                    "x.cedar",
                    'permit(principal, action, resource);\n\n@id("b")\npermit(principal action);\n',
                )
            ]
        )
    assert info.value.path == "x.cedar"
    # The line and column of the error itself, not of the policy's first line (3).
    assert (info.value.line, info.value.column) == (4, 18)
    assert info.value.policy_id == "b"
    assert info.value.problems[0]["frame"] == (
        ' 3 | @id("b")\n 4 | permit(principal action);\n   |                  ^^^^^^'
    )


def test_a_directory_without_policies_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=re.escape("no *.cedar file")):
        CedarEvaluator.from_directory(tmp_path)
    with pytest.raises(ConfigError, match="does not exist"):
        CedarEvaluator.from_directory(tmp_path / "missing")


def test_schema_declarations_from_the_directory(tmp_path: Path) -> None:
    (tmp_path / "p.cedar").write_text('permit(principal in Team::"infra", action, resource);')
    (tmp_path / "schema.json").write_text(json.dumps({**TEAM_SCHEMA, "principalTypes": ["User"]}))
    (tmp_path / "entities.json").write_text(
        json.dumps(
            [
                {
                    "uid": {"type": "User", "id": "alice"},
                    "attrs": {"level": 1},
                    "parents": [{"type": "Team", "id": "infra"}],
                }
            ]
        )
    )
    ev = CedarEvaluator.from_directory(tmp_path)
    ev.bind(REGISTRY)
    assert ev.schema[""]["actions"]["files.read_file"]["appliesTo"]["principalTypes"] == ["User"]
    assert ev.evaluate(request("files.read_file")).effect == "allow"
    (tmp_path / "schema.json").write_text(json.dumps({"actions": {"x": {}}}))
    with pytest.raises(ConfigError, match="may not declare actions"):
        CedarEvaluator.from_directory(tmp_path)


def test_ungoverned_tools_are_listed_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="clearance.policy.cedar")
    ev = bound(
        """
        permit(principal, action in Action::"read_only", resource);
        permit(principal, action == Action::"files.write_file", resource == Tool::"shop.refund");
        forbid(principal, action == Action::"shop.refund", resource);
        """
    )
    assert ev.ungoverned == ("files.write_file", "shop.refund")
    assert "files.write_file, shop.refund" in caplog.text


def test_a_permit_scoped_to_a_namespace_governs_its_tools() -> None:
    ev = bound('permit(principal, action, resource in Namespace::"files");')
    assert ev.ungoverned == ("shop.refund",)


def test_the_generated_schema_is_exposed() -> None:
    ev = bound("permit(principal, action, resource);")
    assert ev.schema == generate_schema(REGISTRY)
    with pytest.raises(ConfigError):
        _ = CedarEvaluator("").schema


# --- reload and watch -----------------------------------------------------------------------


def test_reload_swaps_the_set_and_keeps_it_when_the_new_one_fails(tmp_path: Path) -> None:
    policy = tmp_path / "p.cedar"
    policy.write_text('@id("reads") permit(principal, action in Action::"read_only", resource);')
    ev = CedarEvaluator.from_directory(tmp_path)
    ev.bind(REGISTRY)
    write = request("files.write_file", {"path": "a", "content": ""})
    assert ev.evaluate(write).effect == "deny"
    policy.write_text('@id("all") permit(principal, action, resource);')
    ev.reload()
    assert ev.evaluate(write).reasons == ("all",)
    policy.write_text(
        '@id("broken") permit(principal, action, resource) when { context.input.nope };'
    )
    with pytest.raises(PolicyError, match="broken"):
        ev.reload()
    assert isinstance(ev.last_error, PolicyError)
    assert ev.evaluate(write).reasons == ("all",)  # the previous set is still in force
    policy.write_text("permit(principal, action syntax error")
    with pytest.raises(PolicyError):
        ev.reload()
    assert ev.evaluate(write).reasons == ("all",)


def test_reload_with_new_text() -> None:
    ev = bound("forbid(principal, action, resource);")
    ev.reload('@id("new") permit(principal, action, resource);')
    assert ev.evaluate(request("files.read_file")).reasons == ("new",)


def _touch_later(path: Path, text: str) -> None:
    path.write_text(text)
    stamp = time.time() + 5
    os.utime(path, (stamp, stamp))  # a different mtime even on coarse clocks


def test_watch_reloads_changed_files_and_keeps_the_last_good_set(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    policy = tmp_path / "p.cedar"
    policy.write_text('@id("v1") permit(principal, action, resource);')
    ev = CedarEvaluator.from_directory(tmp_path, watch=True, watch_interval=0)
    ev.bind(REGISTRY)
    assert ev.evaluate(request("files.read_file")).reasons == ("v1",)
    _touch_later(policy, '@id("v2") permit(principal, action, resource);')
    # A change takes effect once it reads the same at two checks (not halfway written).
    assert ev.evaluate(request("files.read_file")).reasons == ("v1",)
    assert ev.evaluate(request("files.read_file")).reasons == ("v2",)
    caplog.set_level(logging.ERROR, logger="clearance.policy.cedar")
    policy.write_text('@id("v3") permit(principal, action, resource) when { context.nope };')
    os.utime(policy, (time.time() + 10, time.time() + 10))
    assert ev.evaluate(request("files.read_file")).reasons == ("v2",)
    assert ev.evaluate(request("files.read_file")).reasons == ("v2",)
    assert isinstance(ev.last_error, PolicyError)
    assert "keeping the previous set" in caplog.text


# The complete new file: reads for everyone, except the secrets folder. Written in two
# steps, its first step (the permit alone) parses and validates: a watcher that loaded it
# would allow reading secrets for as long as the second step takes.
COMPLETE = (
    '@id("reads") permit(principal, action in Action::"read_only", resource);\n'
    '@id("no-secrets") forbid(principal, action, resource)\n'
    "  when { context has input && context.input has path"
    ' && context.input.path like "secrets/*" };\n'
)
HALF = COMPLETE.split('@id("no-secrets")')[0]


def _write(path: Path, text: str, stamp: float) -> None:
    with open(path, "w", encoding="utf-8") as file:  # one open file, written in steps
        file.write(text)
    os.utime(path, (stamp, stamp))  # a distinct mtime even on coarse clocks


def test_watch_never_enforces_a_file_caught_halfway_through_its_writing(tmp_path: Path) -> None:
    interval = 0.2
    policy = tmp_path / "p.cedar"
    policy.write_text('@id("v1") forbid(principal, action, resource);')
    ev = CedarEvaluator.from_directory(tmp_path, watch=True, watch_interval=interval)
    ev.bind(REGISTRY)
    secret = request("files.read_file", {"path": "secrets/key"})
    plain = request("files.read_file", {"path": "notes.txt"})
    assert ev.evaluate(secret).reasons == ("v1",)
    stamp = time.time() + 10

    # Step one is on disk and a check comes: nothing is decided on it.
    _write(policy, HALF, stamp)
    time.sleep(interval * 1.5)
    assert ev.evaluate(secret).reasons == ("v1",)
    assert ev.evaluate(plain).reasons == ("v1",)
    # Step two completes the file; the next check sees it change again: still the old set.
    with open(policy, "a", encoding="utf-8") as file:
        file.write(COMPLETE[len(HALF) :])
    os.utime(policy, (stamp + 1, stamp + 1))
    time.sleep(interval * 1.5)
    assert ev.evaluate(secret).reasons == ("v1",)
    # It reads the same at the next check: the complete file is in force.
    time.sleep(interval * 1.5)
    assert ev.evaluate(plain).reasons == ("reads",)
    verdict = ev.evaluate(secret)
    assert verdict.effect == "deny" and verdict.reasons == ("no-secrets",)
    assert ev.last_error is None


def test_watch_loads_a_change_once_it_reads_the_same_twice(tmp_path: Path) -> None:
    """A file touched without a change is not reloaded; a broken file is retried only
    when it changes again, and the last good set stays meanwhile."""
    policy = tmp_path / "p.cedar"
    policy.write_text('@id("v1") permit(principal, action, resource);')
    ev = CedarEvaluator.from_directory(tmp_path, watch=True, watch_interval=0)
    ev.bind(REGISTRY)
    first = ev._state
    os.utime(policy, (time.time() + 5, time.time() + 5))
    for _ in range(3):
        assert ev.evaluate(request("files.read_file")).reasons == ("v1",)
    assert ev._state is first  # the same content: nothing was reloaded
    _touch_later(policy, "permit(principal, action syntax error")
    for _ in range(3):
        assert ev.evaluate(request("files.read_file")).reasons == ("v1",)
    assert isinstance(ev.last_error, PolicyError)


@pytest.mark.parametrize("how", ["file", "directory"])
def test_deleting_the_policies_withdraws_their_permits(
    tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The last file (or the whole directory) deleted: the permits it held used to stay in
    # force forever, silently. Now nothing is permitted until policies are back.
    directory = tmp_path / "policies"
    directory.mkdir()
    policy = directory / "p.cedar"
    policy.write_text('@id("v1") permit(principal, action, resource);')
    ev = CedarEvaluator.from_directory(directory, watch=True, watch_interval=0)
    ev.bind(REGISTRY)
    assert ev.evaluate(request("files.read_file")).effect == "allow"
    caplog.set_level(logging.WARNING, logger="clearance.policy.cedar")
    if how == "file":
        policy.unlink()
    else:
        shutil.rmtree(directory)
    verdicts = [ev.evaluate(request("files.read_file")) for _ in range(3)]
    assert verdicts[-1].effect == "deny" and verdicts[-1].reasons == ()
    assert "nothing is permitted" in caplog.text
    # Policies back: in force again once they read the same twice.
    directory.mkdir(exist_ok=True)
    _touch_later(directory / "q.cedar", '@id("v2") permit(principal, action, resource);')
    verdicts = [ev.evaluate(request("files.read_file")) for _ in range(3)]
    assert verdicts[-1].reasons == ("v2",)


def test_a_broken_reload_keeps_no_permit_of_a_file_that_is_gone(tmp_path: Path) -> None:
    # b.cedar is deleted while a.cedar is broken: the last good set stays, but without
    # b's permit; b's forbid stays (deny wins until a set that loads says otherwise).
    (tmp_path / "a.cedar").write_text('@id("a") permit(principal, action, resource);')
    (tmp_path / "b.cedar").write_text(
        '@id("b") permit(principal, action == Action::"shop.refund", resource);\n'
        '@id("b-forbid") forbid(principal, action == Action::"files.write_file", resource);\n'
    )
    ev = CedarEvaluator.from_directory(tmp_path, watch=True, watch_interval=0)
    ev.bind(REGISTRY)
    assert set(ev.evaluate(request("shop.refund", _RUSH)).reasons) == {"a", "b"}
    (tmp_path / "b.cedar").unlink()
    _touch_later(tmp_path / "a.cedar", "permit(principal, action syntax error")
    for _ in range(3):
        refund = ev.evaluate(request("shop.refund", _RUSH))
    assert refund.reasons == ("a",)  # the last good a.cedar, without b's permit
    write = ev.evaluate(request("files.write_file", {"path": "x", "content": "y"}))
    assert (write.effect, write.reasons) == ("deny", ("b-forbid",))
    assert isinstance(ev.last_error, PolicyError)


def test_without_watch_changes_wait_for_reload(tmp_path: Path) -> None:
    policy = tmp_path / "p.cedar"
    policy.write_text('@id("v1") permit(principal, action, resource);')
    ev = CedarEvaluator.from_directory(tmp_path)
    ev.bind(REGISTRY)
    _touch_later(policy, '@id("v2") permit(principal, action, resource);')
    assert ev.evaluate(request("files.read_file")).reasons == ("v1",)


# --- the pruned context decides as Cedar does on the full request --------------------------

POLICIES = """
@id("p1") permit(principal, action == Action::"shop.refund", resource)
  when { context.input.count < 3 && (context.input has note ==> context.input.note != "x") };
@id("p2") @ask("big") permit(principal, action in Action::"mutating", resource)
  when { context.input has tags && context.input.tags.contains("ok") };
@id("f1") forbid(principal, action == Action::"shop.refund", resource)
  when { context.input has order && context.input.order has rush && context.input.order.rush };
@id("f2") forbid(principal, action, resource) when { context.session.id == "blocked" };
""".replace("==> context.input.note", "&& context.input.note")

refund_args = st.fixed_dictionaries(
    {"amount": st.integers(-100, 100), "count": st.integers(-5, 5)},
    optional={
        "tags": st.lists(st.sampled_from(["ok", "no"]), max_size=3),
        "order": st.fixed_dictionaries(
            {"id": st.text(max_size=3)}, optional={"rush": st.booleans()}
        ),
        "note": st.sampled_from(["x", "y"]),
    },
)


MADE_UP = {
    "sources": [],
    "user": False,
    "tool": False,
    "made_up": True,
    "untrusted_values": False,
    "made_up_values": False,
    "tool_values": [],
}


def _full_cedar(arguments: dict[str, Any], session: str) -> tuple[str, set[str]]:
    schema = generate_schema(REGISTRY)
    order = arguments.get("order")
    inp: dict[str, Any] = {
        "amount": {"__extn": {"fn": "decimal", "arg": f"{arguments['amount']}.0"}},
        "count": arguments["count"],
    }
    for key in ("tags", "note"):
        if key in arguments:
            inp[key] = arguments[key]
    if order is not None:
        inp["order"] = order
    tools = json.loads(
        json.dumps(
            [
                {
                    "uid": {"type": "Tool", "id": "shop.refund"},
                    "attrs": {"namespace": "shop", "read_only": False, "source": "callback"},
                    "parents": [{"type": "Namespace", "id": "shop"}],
                }
            ]
        )
    )
    result = cedarpy.is_authorized(
        {
            "principal": {"type": "User", "id": "alice"},
            "action": {"type": "Action", "id": "shop.refund"},
            "resource": {"type": "Tool", "id": "shop.refund"},
            "context": {
                "input": inp,
                "session": {"id": session},
                "tool": {"read_only": False, "annotations": {}},
                # Every argument seen nowhere (no session), as the evaluator says it.
                "provenance": dict.fromkeys(arguments, MADE_UP),
            },
        },
        POLICIES,
        tools,
        schema=json.dumps(schema),
    )
    assert not result.diagnostics.errors
    ids = {f"policy{i}": f"{name}" for i, name in enumerate(["p1", "p2", "f1", "f2"])}
    return ("allow" if result.allowed else "deny"), {ids[r] for r in result.diagnostics.reasons}


@given(arguments=refund_args, session=st.sampled_from(["s1", "blocked"]))
def test_decisions_match_cedar_on_the_full_schema_checked_request(
    arguments: dict[str, Any], session: str
) -> None:
    ev = _POLICY_EVALUATOR
    verdict: Verdict = ev.evaluate(request("shop.refund", arguments, session=SessionInfo(session)))
    decision, reasons = _full_cedar(arguments, session)
    assert set(verdict.reasons) == reasons
    assert (verdict.effect == "deny") == (decision == "deny")


_POLICY_EVALUATOR = bound(POLICIES)


def test_principal_attributes_of_every_declared_kind() -> None:
    schema = {
        "entityTypes": {
            "User": {
                "shape": {
                    "type": "Record",
                    "attributes": {
                        "manager": {"type": "Entity", "name": "User", "required": False},
                        "tags": {"type": "Set", "element": {"type": "String"}},
                        "limit": {"type": "Extension", "name": "decimal"},
                        "ip": {"type": "Extension", "name": "ipaddr"},
                        "profile": {"type": "Profile"},
                    },
                }
            }
        },
        "commonTypes": {
            "Profile": {"type": "Record", "attributes": {"senior": {"type": "Boolean"}}}
        },
    }
    ev = bound(
        """
        permit(principal, action, resource) when {
          principal.tags.contains("ops") && principal.limit.lessThan(decimal("5.0"))
          && principal.ip.isLoopback() && principal.profile.senior
          && principal has manager && principal.manager == User::"bob"
        };
        """,
        schema=schema,
    )
    attrs = {
        "tags": ["ops"],
        "limit": 1.5,
        "ip": "127.0.0.1",
        "profile": {"senior": True},
        "manager": 'User::"bob"',
    }
    alice = Principal("User", "alice", attrs)
    assert ev.evaluate(request("files.read_file", principal=alice)).effect == "allow"
    junior = Principal("User", "alice", {**attrs, "profile": {"senior": False}})
    assert ev.evaluate(request("files.read_file", principal=junior)).effect == "deny"
    wrong = Principal("User", "alice", {**attrs, "manager": 'Team::"x"'})
    verdict = ev.evaluate(request("files.read_file", principal=wrong))
    assert verdict.effect == "deny"
    assert "expected a User entity" in (verdict.message or "")


def test_reading_an_untyped_argument_says_why() -> None:
    reg = ToolRegistry()
    schema = {
        "type": "object",
        "properties": {"meta": {"type": "object", "additionalProperties": {"type": "string"}}},
    }
    reg.register("app", [Tool("act", _handler, input_schema=schema)])
    ev = CedarEvaluator(
        '@id("m") permit(principal, action, resource) when { context.input.meta == "" };'
    )
    with pytest.raises(PolicyError) as info:
        ev.bind(reg)
    assert "`input.meta` has no Cedar type" in str(info.value)


def test_mcp_tools_carry_their_server() -> None:
    reg = ToolRegistry()
    schema = {"type": "object", "properties": {"title": {"type": "string"}}}
    reg.register(
        "github", [Tool("create_issue", _handler, input_schema=schema, source="mcp", server="gh")]
    )
    ev = CedarEvaluator(
        '@id("gh") permit(principal, action in Action::"ns:github", resource)'
        ' when { resource.source == "mcp" && resource has server && resource.server == "gh" };'
    )
    ev.bind(reg)
    call = AuthzRequest(
        ALICE, reg.get("github.create_issue").info, {"title": "x"}, SessionInfo("s")
    )
    assert ev.evaluate(call).reasons == ("gh",)


def test_validation_by_scope_groups_finds_what_whole_set_validation_finds() -> None:
    from clearance.policy.cedar import CedarEngine

    policies = """
    @id("ok-any") permit(principal, action, resource) when { context.session.id != "" };
    @id("bad-any") forbid(principal, action, resource) when { context.input.path == "" };
    @id("ok-group") permit(principal, action in Action::"read_only", resource)
      when { context.input.path like "*" };
    @id("bad-group") permit(principal, action in Action::"mutating", resource)
      when { context.input.amount.lessThan(decimal("1.0")) };
    @id("ok-one") permit(principal, action == Action::"shop.refund", resource)
      when { context.input.count > 1 && action != Action::"files.read_file" };
    @id("bad-one") permit(principal, action == Action::"files.write_file", resource)
      when { context.input.size > 1 };
    @id("bad-mixed") permit(principal, action in [Action::"files.read_file", Action::"shop.refund"], resource)
      when { context.input.count > 0 };
    @id("group-as-action") permit(principal, action == Action::"read_only", resource);
    @id("unknown") permit(principal, action == Action::"files.gone", resource);
    @id("unknown-in-condition") permit(principal, action, resource) when { action == Action::"nope" };
    @id("bad-principal") permit(principal is Robot, action, resource);
    """
    ev = CedarEvaluator(policies)
    with pytest.raises(PolicyError) as info:
        ev.bind(REGISTRY)
    ours = {(str(p["policy_id"]), str(p["message"])) for p in info.value.problems}
    whole = CedarEngine(policies).validate(generate_schema(REGISTRY))
    assert whole
    expected = set()
    for problem in whole:
        message = (
            problem.message.split(", ", 1)[1]
            if problem.message.startswith("for policy")
            else problem.message
        )
        expected.add((str(problem.policy_id), message))
    for policy_id, message in expected:
        others = [m for p, m in ours if p == policy_id and "applicable action" not in m]
        if message.startswith("unrecognized action"):
            # Reported once, as ours: the unknown action named, with a hint.
            assert any("is not a tool action" in m for m in others)
            continue
        if message.startswith("unable to find an applicable action") and others:
            continue  # a consequence of the policy's other problem, not said twice
        assert any(p == policy_id and m.startswith(message) for p, m in ours), (policy_id, message)
    assert {p for p, _ in ours} == {p for p, _ in expected}
    assert "ok-any" not in {p for p, _ in ours}


# --- verdicts spelled out in full (reasons, errors, message, evaluator, names) --------------

WRITE = {"path": "a", "content": ""}
OVERFLOW = "context.input.count * 4611686018427387904 > 0"


def test_an_allow_and_an_ask_in_full() -> None:
    ev = bound(
        """
        @id("read") permit(principal, action in Action::"read_only", resource);
        @id("w1") @ask permit(principal, action == Action::"files.write_file", resource);
        @id("w2") @ask("") permit(principal, action in Action::"ns:files", resource)
          when { context.input.path == "a" };
        """
    )
    assert ev.evaluate(request("files.read_file", {"path": "b"})) == Verdict(
        "allow", ("read",), (), None, "cedar", {"read": "policy0"}
    )
    assert ev.evaluate(request("files.write_file", WRITE)) == Verdict(
        "ask",
        ("w1", "w2"),
        (),
        "approval required by w1, w2",
        "cedar",
        {"w1": "policy1", "w2": "policy2"},
    )


def test_a_deny_by_forbids_in_full() -> None:
    ev = bound(
        """
        permit(principal, action, resource);
        @id("f1") forbid(principal, action == Action::"files.write_file", resource);
        @id("f2") forbid(principal, action in Action::"mutating", resource);
        """
    )
    assert ev.evaluate(request("files.write_file", WRITE)) == Verdict(
        "deny",
        ("f1", "f2"),
        (),
        "forbidden by f1, f2",
        "cedar",
        {"f1": "policy1", "f2": "policy2"},
    )


def test_forbids_that_cannot_be_evaluated_deny_in_full() -> None:
    ev = bound(
        f"""
        @id("ok") permit(principal, action == Action::"shop.refund", resource);
        @id("o1") forbid(principal, action == Action::"shop.refund", resource)
          when {{ {OVERFLOW} }};
        forbid(principal, action == Action::"shop.refund", resource) when {{ {OVERFLOW} }};
        """
    )
    verdict = ev.evaluate(request("shop.refund", {"amount": 1, "count": 3}))
    assert (verdict.effect, verdict.reasons, verdict.evaluator) == (
        "deny",
        ("o1", "policy2"),
        "cedar",
    )
    assert verdict.message == (
        "forbid o1, policy2 could not be evaluated; a forbid that fails denies the call"
    )
    assert [e.split(": ", 1)[0] for e in verdict.errors] == ["o1", "policy2"]
    assert dict(verdict.annotations) == {}


def test_a_permit_that_cannot_be_evaluated_leaves_the_call_unpermitted() -> None:
    ev = bound(
        f"""
        @id("o1") permit(principal, action == Action::"shop.refund", resource)
          when {{ {OVERFLOW} }};
        """
    )
    verdict = ev.evaluate(request("shop.refund", {"amount": 1, "count": 3}))
    assert (verdict.effect, verdict.reasons, verdict.evaluator) == ("deny", (), "cedar")
    assert verdict.message == 'no policy permits User::"alice" to call shop.refund'
    assert len(verdict.errors) == 1 and verdict.errors[0].startswith("o1: ")
    bob = ev.evaluate(request("shop.refund", {"amount": 1, "count": 3}, Principal("User", "bob")))
    assert bob.message == 'no policy permits User::"bob" to call shop.refund'


def test_each_unpermitted_call_names_its_principal_and_tool() -> None:
    ev = bound('@id("r") permit(principal == User::"carol", action, resource);')
    first = ev.evaluate(request("files.read_file"))
    assert first.message == 'no policy permits User::"alice" to call files.read_file'
    other_tool = ev.evaluate(request("files.write_file", WRITE))
    assert other_tool.message == 'no policy permits User::"alice" to call files.write_file'
    other_principal = ev.evaluate(request("files.read_file", principal=Principal("User", "bob")))
    assert other_principal.message == 'no policy permits User::"bob" to call files.read_file'
    assert ev.evaluate(request("files.read_file")) == first


def test_a_call_that_cannot_be_put_to_cedar_is_denied_by_the_evaluator() -> None:
    ev = bound("permit(principal, action, resource);")
    verdict = ev.evaluate(request("files.read_file", principal=Principal("Robot", "r2")))
    assert (verdict.effect, verdict.reasons, verdict.evaluator) == ("deny", (), "cedar")
    assert verdict.message is not None and "'Robot' is not declared" in verdict.message


def test_errors_not_tied_to_a_policy_are_named_in_the_deny_message() -> None:
    verdicts = VerdictMap(())
    response = CedarResponse(
        "deny",
        (),
        (CedarError("policy9", "overflow"), CedarError(None, "bad entity"), CedarError(None, "x")),
    )
    verdict = verdicts.verdict(response, ALICE, "files.read_file")
    assert verdict == Verdict(
        "deny",
        (),
        ("policy9: overflow", "bad entity", "x"),
        "Cedar could not evaluate the request: bad entity; x",
        "cedar",
        {},
    )


# A policy reads the context in many ways (a value, a 'has' test, both in either order, the
# whole context, nothing); whatever it reads, the pruned request must give Cedar's answer
# on the full request: the same determining policies and the same erroring ones.
CONDITIONS = [
    "context.input.count < 3",
    "context.input has note",
    'context.input has note && context.input.note == "x"',
    'context.input has order && context.input.order.id == "o1" && context.input has order',
    "context.input has order && context.input.order has rush && context.input.order.rush",
    'context.input has tags && context.input.tags.contains("ok")',
    'context.input.amount.lessThan(decimal("10.0"))',
    'context.session.id == "blocked"',
    "context.tool.read_only",
    "context.tool.annotations has destructiveHint",
    "context has input && context.input.count > 0",
    "context.provenance has amount && context.provenance.amount.made_up",
    "context == context",  # the whole context
    'principal == User::"alice"',
    "context.input.count * 4611686018427387904 > 0",  # errs unless count is 0
    "true",
    "[0, 1, 2].contains(context.input.count)",  # read inside a list
    '{"n": context.input.count}.n < 3',  # inside a record, and an attribute of a record
    '{"c": context}.c.session.id == "blocked"',  # the whole context inside a record
]
# A policy that reads the refund's input must name only the refund (the schema checks it).
REFUND_SCOPES = ['action == Action::"shop.refund"', 'action in Action::"ns:shop"']
ANY_SCOPES = [*REFUND_SCOPES, "action", 'action in Action::"mutating"']


@st.composite
def policy_sets(draw: st.DrawFn) -> str:
    policies = []
    for i in range(draw(st.integers(1, 4))):
        effect = draw(st.sampled_from(["permit", "forbid", '@ask("check") permit']))
        conditions = draw(st.lists(st.sampled_from(CONDITIONS), min_size=1, max_size=2))
        reads_input = any("context.input" in c for c in conditions)
        scope = draw(st.sampled_from(REFUND_SCOPES if reads_input else ANY_SCOPES))
        when = " && ".join(f"({c})" for c in conditions)
        policies.append(f'@id("p{i}") {effect}(principal, {scope}, resource) when {{ {when} }};')
    return "\n".join(policies)


def _cedar_on_the_full_request(
    policies: str, arguments: dict[str, Any], session: str
) -> tuple[bool, set[str], set[str]]:
    """Whether Cedar allows, its determining policies and its erroring ones (by @id)."""
    inp: dict[str, Any] = {
        "amount": {"__extn": {"fn": "decimal", "arg": f"{arguments['amount']}.0"}},
        "count": arguments["count"],
    }
    inp.update({k: arguments[k] for k in ("tags", "note", "order") if k in arguments})
    tool = {
        "uid": {"type": "Tool", "id": "shop.refund"},
        "attrs": {"namespace": "shop", "read_only": False, "source": "callback"},
        "parents": [{"type": "Namespace", "id": "shop"}],
    }
    result = cedarpy.is_authorized(
        {
            "principal": {"type": "User", "id": "alice"},
            "action": {"type": "Action", "id": "shop.refund"},
            "resource": {"type": "Tool", "id": "shop.refund"},
            "context": {
                "input": inp,
                "session": {"id": session},
                "tool": {"read_only": False, "annotations": {}},
                "provenance": dict.fromkeys(arguments, MADE_UP),
            },
        },
        policies,
        [tool],
        schema=json.dumps(generate_schema(REGISTRY)),
    )
    label = {f"policy{i}": f"p{i}" for i in range(policies.count("@id("))}
    erring = {
        label[m.group(1)]
        for e in result.diagnostics.errors
        if (m := re.match(r"error while evaluating policy `(policy\d+)`", str(e)))
    }
    assert len(erring) == len(result.diagnostics.errors), result.diagnostics.errors
    return result.allowed, {label[r] for r in result.diagnostics.reasons}, erring


_RUSH = {"amount": 5, "count": 0, "order": {"id": "o1", "rush": True}, "tags": ["ok"], "note": "x"}


@given(policies=policy_sets(), arguments=refund_args, session=st.sampled_from(["s1", "blocked"]))
@example(  # a value read before the 'has' test of its parent
    policies=f'@id("p0") permit(principal, {REFUND_SCOPES[0]}, resource) when {{ {CONDITIONS[3]} }};',
    arguments=_RUSH,
    session="s1",
)
@example(  # the whole context, and a part of it each policy reads
    policies="\n".join(
        f'@id("p{i}") permit(principal, action, resource) when {{ context == context && {c} }};'
        for i, c in enumerate([CONDITIONS[n] for n in (7, 8, 9, 11)])
    ),
    arguments=_RUSH,
    session="blocked",
)
@example(
    policies="\n".join(
        f'@id("p{i}") forbid(principal, action, resource) when {{ {c} }};'
        for i, c in enumerate([CONDITIONS[n] for n in (7, 8, 9, 11)])
    ),
    arguments=_RUSH,
    session="blocked",
)
@example(  # the whole context, and the input read in it
    policies='@id("p0") permit(principal, action == Action::"shop.refund", resource)'
    " when { context == context && [0, 1, 2].contains(context.input.count) };",
    arguments=_RUSH,
    session="s1",
)
@example(
    policies='@id("p0") permit(principal, action == Action::"shop.refund", resource)'
    ' when { {"n": context.input.count}.n < 3 };',
    arguments=_RUSH,
    session="s1",
)
@example(  # the whole context, read through a record that holds it
    policies='@id("p0") forbid(principal, action, resource)'
    ' when { {"c": context}.c.session.id == "blocked" };\n'
    '@id("p1") permit(principal, action, resource);',
    arguments=_RUSH,
    session="blocked",
)
@example(
    policies=f'@id("p0") permit(principal, {REFUND_SCOPES[1]}, resource) when {{ {CONDITIONS[4]} && {CONDITIONS[5]} }};',
    arguments=_RUSH,
    session="s1",
)
def test_the_pruned_request_decides_as_cedar_on_the_full_one(
    policies: str, arguments: dict[str, Any], session: str
) -> None:
    ev = bound(policies)
    verdict = ev.evaluate(request("shop.refund", arguments, session=SessionInfo(session)))
    allowed, reasons, erring = _cedar_on_the_full_request(policies, arguments, session)
    assert {e.split(": ", 1)[0] for e in verdict.errors} == erring
    erring_forbids = {p for p in erring if f'@id("{p}") forbid' in policies}
    if allowed and erring_forbids:
        assert (verdict.effect, set(verdict.reasons)) == ("deny", erring_forbids)
    else:
        assert (verdict.effect != "deny") == allowed
        assert set(verdict.reasons) == reasons


@pytest.mark.parametrize(
    ("policy", "ungoverned"),
    [
        ("permit(principal, action, resource);", ()),
        ('permit(principal, action, resource == Tool::"files.read_file");', ("files.write_file", "shop.refund")),
        ('permit(principal, action, resource in Namespace::"shop");', ("files.read_file", "files.write_file")),
        ('permit(principal, action, resource in Tool::"shop.refund");', ("files.read_file", "files.write_file")),
        ("permit(principal, action, resource is Tool);", ()),
        ('permit(principal, action, resource is Tool in Namespace::"files");', ("shop.refund",)),
        ('forbid(principal, action, resource == Tool::"shop.refund");', ("files.read_file", "files.write_file", "shop.refund")),
        ('permit(principal, action == Action::"shop.refund", resource);', ("files.read_file", "files.write_file")),
        ('permit(principal, action in [Action::"files.read_file", Action::"shop.refund"], resource);', ("files.write_file",)),
        ('permit(principal, action in Action::"read_only", resource);', ("files.write_file", "shop.refund")),
        ('permit(principal, action in Action::"ns:files", resource in Namespace::"shop");', ("files.read_file", "files.write_file", "shop.refund")),
    ],
)  # fmt: skip
def test_ungoverned_tools_are_those_no_permit_can_match(
    policy: str, ungoverned: tuple[str, ...]
) -> None:
    assert bound(policy).ungoverned == ungoverned


@pytest.mark.parametrize(
    ("policies", "message"),
    [
        # A template is never linked: it would sit in the set matching nothing.
        ('@id("t") permit(principal, action, resource == ?resource);', "never linked"),
        # A capital: Cedar keeps any annotation, and this permit would allow without asking.
        ('@Ask("why") permit(principal, action, resource);', "did you mean @ask?"),
        (
            '@id("x") @reason("y") permit(principal, action, resource);',
            "unknown annotation @reason",
        ),
        ('@ask("why") forbid(principal, action, resource);', "@ask on a forbid"),
        (
            '@id("same") permit(principal, action, resource);\n'
            '@id("same") forbid(principal, action, resource) when { context.input.count > 3 };',
            "also the id of the policy at",
        ),
    ],
)
def test_a_set_that_would_not_mean_what_it_says_is_refused(policies: str, message: str) -> None:
    with pytest.raises(PolicyError) as caught:
        bound(policies)
    assert any(message in str(p["message"]) for p in caught.value.problems)


def test_a_permit_reading_a_fact_gets_the_fact() -> None:
    registry = ToolRegistry()
    registry.register(
        "web",
        [
            Tool(
                "fetch",
                _handler,
                input_schema=_object({"url": {"type": "string"}}, ["url"]),
                facts={"/url": "url"},
            )
        ],
    )
    ev = CedarEvaluator(
        '@id("docs") permit(principal, action == Action::"web.fetch", resource)'
        ' when { context.facts.url.host == "docs.example" };'
        '\n@id("any") @ask("check") permit(principal, action, resource)'
        " when { context == context && context.facts has url };"
    )
    ev.bind(registry)
    tool = registry.get("web.fetch")

    def decide(url: str) -> Verdict:
        arguments, facts = apply_facts(tool.declared_facts, {"url": url})  # as the pipeline does
        return ev.evaluate(
            AuthzRequest(ALICE, tool.info, arguments, SessionInfo("s1"), facts=facts)
        )

    allowed = decide("https://docs.example/")
    assert (allowed.effect, allowed.reasons, allowed.errors) == ("allow", ("docs", "any"), ())
    asked = decide("https://other.example/")
    assert (asked.effect, asked.reasons, asked.errors) == ("ask", ("any",), ())


def test_every_verdict_names_the_version_of_the_set_that_made_it(tmp_path: Path) -> None:
    # The journal says which policies decided: equal sets, equal versions; any change
    # (a policy, the entities) a new one; denies the set could not decide carry it too.
    policy = tmp_path / "p.cedar"
    policy.write_text('@id("v1") permit(principal, action, resource);')
    ev = CedarEvaluator.from_directory(tmp_path)
    ev.bind(REGISTRY)
    first = ev.evaluate(request("files.read_file")).policy_version
    assert first is not None and re.fullmatch(r"sha256:[0-9a-f]{16}", first)
    assert first == ev.policy_version
    twin = CedarEvaluator.from_directory(tmp_path)
    twin.bind(REGISTRY)
    assert twin.evaluate(request("files.read_file")).policy_version == first
    policy.write_text('@id("v1") permit(principal, action, resource) when { true };')
    ev.reload()
    second = ev.evaluate(request("files.read_file")).policy_version
    assert second not in (None, first)
    stranger = ev.evaluate(request("files.read_file", principal=Principal("Robot", "r2")))
    assert stranger.effect == "deny" and stranger.policy_version == second


@pytest.mark.anyio
async def test_the_journal_records_the_version_that_decided() -> None:
    from support import Recorder, coding_registry, harness

    from clearance.harness.journal import MemoryJournal

    journal = MemoryJournal()
    evaluator = CedarEvaluator('@id("reads") permit(principal, action, resource);')
    async with harness(coding_registry(Recorder()), evaluator=evaluator, journal=journal) as h:
        session = await h.create_session(principal=ALICE)
        await session.call_tool("files__read_file", {"path": "a.txt"}, call_id="c1")
    (decided,) = [e for e in journal.events() if e.type == "call_decided"]
    assert decided.data["verdict"]["policy_version"] == evaluator.policy_version
    assert evaluator.policy_version is not None
