"""The Cedar schema generated from the tool registry: type mapping, actions, entities, text."""

from __future__ import annotations

import json
from typing import Any

import cedarpy
import pytest

from clearance.harness.tools import Tool, ToolRegistry
from clearance.policy.cedar import generate_schema, schema_to_text, untyped_arguments


def _handler(arguments: dict[str, Any], ctx: Any) -> str:
    return "ok"


def _registry(
    properties: dict[str, Any], required: list[str] | None = None, **extra: Any
) -> ToolRegistry:
    registry = ToolRegistry()
    schema = {"type": "object", "properties": properties, "required": required or [], **extra}
    registry.register("app", [Tool("act", _handler, input_schema=schema)])
    return registry


def _input(schema: dict[str, Any], alias: str = "app__act") -> dict[str, Any]:
    common = schema[""]["commonTypes"]
    result: dict[str, Any] = common[f"{alias}Input"]
    return result


def _attrs(
    properties: dict[str, Any], required: list[str] | None = None, **extra: Any
) -> dict[str, Any]:
    attrs: dict[str, Any] = _input(generate_schema(_registry(properties, required, **extra)))[
        "attributes"
    ]
    return attrs


def _validates(schema: dict[str, Any], policy: str) -> list[str]:
    result = cedarpy.validate_policies(policy, json.dumps(schema))
    return [e.error for e in result.errors]


def test_primitive_types_map_to_cedar_types() -> None:
    attrs = _attrs(
        {
            "s": {"type": "string"},
            "i": {"type": "integer"},
            "n": {"type": "number"},
            "b": {"type": "boolean"},
        },
        ["s", "i", "n", "b"],
    )
    assert attrs == {
        "s": {"type": "String"},
        "i": {"type": "Long"},
        "n": {"type": "Extension", "name": "decimal"},
        "b": {"type": "Boolean"},
    }


def test_required_properties_are_required_and_others_optional() -> None:
    attrs = _attrs({"a": {"type": "string"}, "b": {"type": "string"}}, ["a"])
    assert attrs["a"] == {"type": "String"}
    assert attrs["b"] == {"type": "String", "required": False}


def test_arrays_become_sets_of_their_item_type() -> None:
    attrs = _attrs(
        {
            "tags": {"type": "array", "items": {"type": "string"}},
            "matrix": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
        },
        ["tags", "matrix"],
    )
    assert attrs["tags"] == {"type": "Set", "element": {"type": "String"}}
    assert attrs["matrix"] == {
        "type": "Set",
        "element": {"type": "Set", "element": {"type": "Long"}},
    }


def test_nested_objects_become_records() -> None:
    attrs = _attrs(
        {
            "opts": {
                "type": "object",
                "properties": {"mode": {"type": "string"}, "depth": {"type": "integer"}},
                "required": ["mode"],
            }
        },
        ["opts"],
    )
    assert attrs["opts"] == {
        "type": "Record",
        "attributes": {"mode": {"type": "String"}, "depth": {"type": "Long", "required": False}},
    }


def test_nullable_types_become_optional_attributes() -> None:
    attrs = _attrs(
        {
            "a": {"type": ["string", "null"]},
            "b": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "c": {"oneOf": [{"type": "null"}, {"type": "boolean"}]},
        },
        ["a", "b", "c"],
    )
    assert attrs == {
        "a": {"type": "String", "required": False},
        "b": {"type": "Long", "required": False},
        "c": {"type": "Boolean", "required": False},
    }


def test_enums_and_consts_take_the_type_of_their_values() -> None:
    attrs = _attrs(
        {
            "mode": {"enum": ["fast", "slow"]},
            "typed_mode": {"type": "string", "enum": ["a", "b"]},
            "level": {"const": 3},
        },
        ["mode", "typed_mode", "level"],
    )
    assert attrs == {
        "mode": {"type": "String"},
        "typed_mode": {"type": "String"},
        "level": {"type": "Long"},
    }


def test_refs_resolve_inside_the_tool_schema() -> None:
    attrs = _attrs(
        {"target": {"$ref": "#/$defs/Target"}, "legacy": {"$ref": "#/definitions/Name"}},
        ["target"],
        **{
            "$defs": {
                "Target": {
                    "type": "object",
                    "properties": {"host": {"type": "string"}},
                    "required": ["host"],
                }
            },
            "definitions": {"Name": {"type": "string"}},
        },
    )
    assert attrs["target"] == {"type": "Record", "attributes": {"host": {"type": "String"}}}
    assert attrs["legacy"] == {"type": "String", "required": False}


def test_untypeable_constructs_are_left_out_and_listed() -> None:
    registry = _registry(
        {
            "ok": {"type": "string"},
            "mixed": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "mixed_list": {"type": ["string", "integer"]},
            "tuple": {"type": "array", "prefixItems": [{"type": "string"}]},
            "untyped_items": {"type": "array"},
            "map": {"type": "object", "additionalProperties": {"type": "string"}},
            "patterned": {"type": "object", "patternProperties": {"^x": {"type": "string"}}},
            "anything": {},
            "tree": {"$ref": "#/$defs/Node"},
            "__entity": {"type": "string"},
        },
        ["ok"],
        **{
            "$defs": {
                "Node": {
                    "type": "object",
                    "properties": {"child": {"$ref": "#/$defs/Node"}},
                }
            }
        },
    )
    attrs = _input(generate_schema(registry))["attributes"]
    # The recursive record keeps its non-recursive part: `child` is left out.
    assert set(attrs) == {"ok", "tree"}
    assert attrs["tree"]["attributes"] == {}
    skipped = dict(untyped_arguments(registry)["app.act"])
    assert set(skipped) == {
        "/mixed",
        "/mixed_list",
        "/tuple",
        "/untyped_items",
        "/map",
        "/patterned",
        "/anything",
        "/tree/child",
        "/__entity",
    }
    assert "recursive" in skipped["/tree/child"]
    assert "reserved" in skipped["/__entity"]


def test_a_policy_reading_an_untyped_argument_fails_validation() -> None:
    registry = _registry(
        {"meta": {"type": "object", "additionalProperties": {"type": "string"}}}, []
    )
    schema = generate_schema(registry)
    errors = _validates(
        schema,
        'permit(principal, action == Action::"app.act", resource) when { context.input has meta };',
    )
    assert errors == []  # `has` on an undeclared attribute is simply false...
    errors = _validates(
        schema,
        'permit(principal, action == Action::"app.act", resource) '
        'when { context.input.meta == "x" };',
    )
    assert errors and "meta" in errors[0]  # ...but reading it is an error


def test_pydantic_optional_parameters_are_optional() -> None:
    registry = ToolRegistry()

    @registry.tool("app.greet")
    def greet(name: str, times: int | None = None, loud: bool = False) -> str:
        return name

    attrs = _input(generate_schema(registry), "app__greet")["attributes"]
    assert attrs == {
        "name": {"type": "String"},
        "times": {"type": "Long", "required": False},
        "loud": {"type": "Boolean", "required": False},
    }


def _coding_registry() -> ToolRegistry:
    registry = ToolRegistry()
    registry.register(
        "files",
        [
            Tool(
                "read_file",
                _handler,
                input_schema={
                    "type": "object",
                    "properties": {"path": {"type": "string"}},
                    "required": ["path"],
                },
                read_only=True,
                annotations={"readOnlyHint": True, "title": "Read"},
            ),
            Tool(
                "write_file",
                _handler,
                input_schema={
                    "type": "object",
                    "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                    "required": ["path", "content"],
                },
                annotations={"readOnlyHint": False, "title": 7},
            ),
        ],
    )
    registry.register(
        "shell",
        [
            Tool(
                "run",
                _handler,
                input_schema={
                    "type": "object",
                    "properties": {"command": {"type": "string"}},
                    "required": ["command"],
                },
            )
        ],
    )
    return registry


def test_one_action_per_tool_in_its_groups() -> None:
    schema = generate_schema(_coding_registry())
    actions = schema[""]["actions"]
    assert set(actions) == {
        "call_tool",
        "read_only",
        "mutating",
        "ns:files",
        "ns:shell",
        "files.read_file",
        "files.write_file",
        "shell.run",
    }
    read = actions["files.read_file"]
    assert read["memberOf"] == [{"id": "call_tool"}, {"id": "read_only"}, {"id": "ns:files"}]
    assert actions["shell.run"]["memberOf"] == [
        {"id": "call_tool"},
        {"id": "mutating"},
        {"id": "ns:shell"},
    ]
    applies = read["appliesTo"]
    assert applies["principalTypes"] == ["User", "Agent"]
    assert applies["resourceTypes"] == ["Tool"]
    assert applies["context"]["attributes"] == {
        "input": {"type": "files__read_fileInput"},
        "session": {"type": "Session"},
        "tool": {"type": "ToolContext"},
        "provenance": {"type": "files__read_fileProvenance"},
    }
    for group in ("call_tool", "read_only", "mutating", "ns:files"):
        assert "appliesTo" not in actions[group]


def test_tool_and_namespace_entity_types() -> None:
    entity_types = generate_schema(_coding_registry())[""]["entityTypes"]
    assert entity_types["Tool"]["memberOfTypes"] == ["Namespace"]
    assert entity_types["Tool"]["shape"]["attributes"] == {
        "namespace": {"type": "String"},
        "read_only": {"type": "Boolean"},
        "source": {"type": "String"},
        "server": {"type": "String", "required": False},
    }
    assert entity_types["Namespace"] == {}
    assert entity_types["User"] == {} and entity_types["Agent"] == {}


def test_annotations_are_typed_from_their_values_and_conflicts_dropped() -> None:
    common = generate_schema(_coding_registry())[""]["commonTypes"]
    # readOnlyHint is a bool on both tools; title is a string on one and a number on the other.
    assert common["ToolAnnotations"]["attributes"] == {
        "readOnlyHint": {"type": "Boolean", "required": False}
    }
    assert common["Session"]["attributes"] == {
        "id": {"type": "String"},
        "turn": {"type": "String", "required": False},
    }


def test_the_generated_schema_validates_policies_in_cedar() -> None:
    schema = generate_schema(_coding_registry())
    good = """
        permit(principal is User, action in Action::"read_only", resource in Namespace::"files");
        forbid(principal, action == Action::"files.write_file", resource)
          when { context.input.path like "*..*" && context.session.id != "" };
        permit(principal, action == Action::"shell.run", resource)
          when { resource.source == "callback" && !context.tool.read_only
                 && (context.tool.annotations has readOnlyHint) };
    """
    assert _validates(schema, good) == []
    bad = 'permit(principal, action == Action::"files.write_file", resource) when { context.input.pth == "x" };'
    assert any("input.pth" in e for e in _validates(schema, bad))


def test_principal_types_and_entity_types_are_configurable() -> None:
    schema = generate_schema(
        _coding_registry(),
        entity_types={
            "Team": {},
            "User": {
                "memberOfTypes": ["Team"],
                "shape": {"type": "Record", "attributes": {"level": {"type": "Long"}}},
            },
        },
        principal_types=["User"],
    )
    assert schema[""]["actions"]["shell.run"]["appliesTo"]["principalTypes"] == ["User"]
    policy = 'permit(principal in Team::"infra", action, resource) when { principal.level > 2 };'
    assert _validates(schema, policy) == []
    assert _validates(schema, "permit(principal is Agent, action, resource);")


@pytest.mark.parametrize(
    ("entity_types", "principal_types", "match"),
    [
        ({"Tool": {}}, None, "used by the generated schema"),
        ({"Session": {}}, None, "used by the generated schema"),
        ({"bad name": {}}, None, "not a Cedar identifier"),
        ({"User": {}}, ["Robot"], "not a declared entity type"),
        ({"User": {}}, [], "at least one principal type"),
    ],
)
def test_bad_entity_declarations_are_rejected(
    entity_types: dict[str, Any], principal_types: list[str] | None, match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        generate_schema(
            _coding_registry(), entity_types=entity_types, principal_types=principal_types
        )


def test_a_namespace_prefixes_everything() -> None:
    schema = generate_schema(_coding_registry(), namespace="Clearance")
    assert set(schema) == {"Clearance"}
    policy = (
        'permit(principal is Clearance::User, action in Clearance::Action::"read_only", '
        "resource is Clearance::Tool) when { context.input has path };"
    )
    assert _validates(schema, policy) == []


def test_schema_text_parses_and_means_the_same() -> None:
    schema = generate_schema(
        _coding_registry(),
        entity_types={
            "Team": {},
            "User": {
                "memberOfTypes": ["Team"],
                "shape": {"type": "Record", "attributes": {"in": {"type": "String"}}},
            },
        },
    )
    text = schema_to_text(schema)
    assert 'action "files.read_file" in [Action::"call_tool", Action::"read_only"' in text
    assert "type files__write_fileInput = {" in text
    assert '"in": String' in text  # a keyword as an attribute name is quoted
    handle = cedarpy.Schema.from_str(text)
    policies = [
        'permit(principal, action in Action::"read_only", resource);',
        'permit(principal, action == Action::"shell.run", resource) when { context.input.cmd == "" };',
        'permit(principal in Team::"a", action, resource) when { principal["in"] == "x" };',
        'forbid(principal, action, resource) when { context.session.turn == "t" };',
    ]
    for policy in policies:
        from_text = [e.error for e in cedarpy.validate_policies(policy, handle).errors]
        assert sorted(from_text) == sorted(_validates(schema, policy))


def test_schema_text_renders_a_namespace_block() -> None:
    text = schema_to_text(generate_schema(_coding_registry(), namespace="Clearance"))
    assert text.startswith("namespace Clearance {")
    cedarpy.Schema.from_str(text)


def test_tool_names_that_are_not_identifiers_still_get_type_names() -> None:
    registry = ToolRegistry()
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    registry.register("my-app", [Tool("do-it", _handler, input_schema=schema)])
    generated = generate_schema(registry)
    assert "my_app__do_itInput" in generated[""]["commonTypes"]
    assert generated[""]["actions"]["my-app.do-it"]["appliesTo"]["context"]["attributes"][
        "input"
    ] == {"type": "my_app__do_itInput"}
    cedarpy.Schema.from_str(schema_to_text(generated))
