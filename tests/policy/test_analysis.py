"""The analysis API on sets that need its finer points: principal types and groups,
overflow as an error, ``like``, the bound on sets, and what it refuses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clearance.errors import ConfigError, PolicyError
from clearance.harness.tools import Tool, ToolRegistry
from clearance.policy.cedar.analysis import analyze_directory, compare_directories

SCHEMA = {
    "entityTypes": {
        "Team": {"memberOfTypes": ["Team"]},
        "User": {"memberOfTypes": ["Team"]},
        "Agent": {},
    },
    "principalTypes": ["User", "Agent"],
}
ENTITIES = [
    {"uid": {"type": "User", "id": "alice"}, "attrs": {}, "parents": [{"type": "Team", "id": "infra"}]},
    {"uid": {"type": "Team", "id": "infra"}, "attrs": {}, "parents": [{"type": "Team", "id": "eng"}]},
    {"uid": {"type": "Team", "id": "eng"}, "attrs": {}, "parents": []},
]  # fmt: skip


def _handler(arguments: dict[str, Any], ctx: Any) -> str:
    return "ok"


def _tools() -> list[Any]:
    registry = ToolRegistry()
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "count": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["name", "count", "tags"],
    }
    registry.register("shop", [Tool("order", _handler, input_schema=schema)])
    return list(registry)


def _set(root: Path, name: str, text: str) -> Path:
    directory = root / name
    directory.mkdir()
    (directory / "p.cedar").write_text(text)
    (directory / "schema.json").write_text(json.dumps(SCHEMA))
    (directory / "entities.json").write_text(json.dumps(ENTITIES))
    return directory


def _impossible(directory: Path) -> list[str]:
    return [f.policy or "" for f in analyze_directory(directory, _tools()).of("impossible")]


ORDER = 'permit (principal, action == Action::"shop.order", resource)'


def test_principal_types_groups_overflow_and_patterns(tmp_path: Path) -> None:
    directory = _set(
        tmp_path,
        "set",
        f"""
@id("user-and-agent") {ORDER} when {{ principal is User && principal is Agent }};
@id("alice-out-of-infra") permit (principal == User::"alice", action, resource)
when {{ !(principal in Team::"infra") }};
@id("alice-in-eng") permit (principal == User::"alice", action, resource)
when {{ principal in Team::"eng" }};
@id("overflow-is-an-error") {ORDER}
when {{ context.input.count + 1 < context.input.count }};
@id("two-suffixes") {ORDER}
when {{ context.input.name like "*.py" && context.input.name like "*.md" }};
@id("one-suffix") {ORDER} when {{ context.input.name like "*.py" }};
@id("three-tags") {ORDER}
when {{ context.input.tags.containsAll(["a", "b", "c"]) && !context.input.tags.contains("d") }};
""",
    )
    # alice is in infra (entities.json: the host adds parents, never removes them), and in
    # eng through it; count + 1 never wraps (it errs, and a policy that errs is not
    # satisfied); three tags in, one out, fits the bound on sets.
    assert _impossible(directory) == [
        "user-and-agent",
        "alice-out-of-infra",
        "overflow-is-an-error",
        "two-suffixes",
    ]


def test_a_shadow_through_a_group_shows_the_principal(tmp_path: Path) -> None:
    directory = _set(
        tmp_path,
        "set",
        f"""
@id("infra-orders") permit (principal in Team::"infra", action == Action::"shop.order", resource);
@id("eng-never-orders") forbid (principal in Team::"eng", action, resource);
@id("others") {ORDER} when {{ context.input.count < 10 }};
""",
    )
    analysis = analyze_directory(directory, _tools())
    (finding,) = analysis.of("shadowed")
    assert finding.policy == "infra-orders" and finding.by == ("eng-never-orders",)
    assert finding.request is not None
    principal = finding.request.principal
    in_infra = {"type": "Team", "id": "infra"} in principal["parents"]
    assert in_infra or principal["uid"] == {"type": "User", "id": "alice"}


def test_a_group_given_by_the_host_loosens(tmp_path: Path) -> None:
    old = _set(tmp_path, "old", f'@id("alice") {ORDER} when {{ principal == User::"alice" }};')
    new = _set(tmp_path, "new", '@id("eng") permit (principal in Team::"eng", action, resource);')
    changes = compare_directories(old, new, _tools())
    (finding,) = changes.of("loosens")
    assert finding.change == "deny->allow" and finding.request is not None
    assert finding.request.principal["uid"] != {"type": "User", "id": "alice"}
    assert changes.of("tightens") == []  # alice is in eng: still allowed


def test_the_principal_is_in_itself(tmp_path: Path) -> None:
    """`principal in User::"bob"` holds for bob himself, whom entities.json does not list."""
    old = _set(tmp_path, "old", f'@id("bob") {ORDER} when {{ principal == User::"bob" }};')
    new = _set(tmp_path, "new", '@id("bob") permit (principal in User::"bob", action, resource);')
    assert _impossible(new) == []
    changes = compare_directories(old, new, _tools())
    assert changes.findings == ()


def test_outside_the_subset_is_refused_with_the_place(tmp_path: Path) -> None:
    directory = _set(
        tmp_path,
        "set",
        f'@id("ok") {ORDER};\n@id("ext") {ORDER}\nwhen {{ decimal("1.5") == decimal("1.5") }};\n',
    )
    with pytest.raises(PolicyError) as caught:
        analyze_directory(directory, _tools())
    assert caught.value.policy_id == "ext" and caught.value.line == 2
    assert "outside what the analysis encodes" in caught.value.message


def test_too_many_set_operations_are_refused_naming_the_tool(tmp_path: Path) -> None:
    many = " || ".join(f'context.input.tags.contains("t{i}")' for i in range(60))
    directory = _set(tmp_path, "set", f'@id("many") {ORDER} when {{ {many} }};')
    with pytest.raises(PolicyError, match=r"tool shop\.order: 61 set operations"):
        analyze_directory(directory, _tools())


def test_sets_with_different_principal_types_are_not_compared(tmp_path: Path) -> None:
    old = _set(tmp_path, "old", f'@id("all") {ORDER};')
    new = _set(tmp_path, "new", f'@id("all") {ORDER};')
    (new / "schema.json").write_text(json.dumps({**SCHEMA, "principalTypes": ["User"]}))
    with pytest.raises(ConfigError, match="different principal types"):
        compare_directories(old, new, _tools())
