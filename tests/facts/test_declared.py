"""Declared facts: rules over them must be written in the canonical spelling."""

from __future__ import annotations

from pathlib import Path

import pytest

from clearance.facts import EmailFact, NumberFact, PathFact, UrlFact
from clearance.facts.declared import FactsError, apply_facts, declare_facts, pattern_problem


@pytest.mark.parametrize(
    ("kind", "pattern"),
    [
        (EmailFact(), "*@Competitor.com"),
        (UrlFact(), "HTTPS://evil.example/**"),
        (UrlFact(), "https://Evil.example/**"),
        (UrlFact(), "https://evil.example:443/**"),
        (UrlFact(), "http://evil.example:80"),
    ],
)
def test_patterns_that_can_never_match_a_canonical_value(kind: object, pattern: str) -> None:
    assert pattern_problem(kind, pattern) is not None  # type: ignore[arg-type]


@pytest.mark.parametrize("pattern", ["/etc/**", "~/x", "src/../x", "./src/*", "a//b", "src/./x"])
def test_path_patterns_that_are_not_canonical(tmp_path: Path, pattern: str) -> None:
    assert pattern_problem(PathFact(tmp_path), pattern) is not None


@pytest.mark.parametrize(
    ("kind", "pattern"),
    [
        (EmailFact(), "*@competitor.com"),
        (UrlFact(), "https://evil.example:8443/**"),
        (UrlFact(), "https://*.example/Path/**"),
        (UrlFact(), "*"),
        (NumberFact(), "666"),
    ],
)
def test_canonical_patterns_are_fine(kind: object, pattern: str) -> None:
    assert pattern_problem(kind, pattern) is None  # type: ignore[arg-type]


def test_canonical_path_patterns_are_fine(tmp_path: Path) -> None:
    for pattern in ("src/**", "**/.env", "*.py", "docs/"):
        assert pattern_problem(PathFact(tmp_path), pattern) is None, pattern


NULLABLE_LIST = {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]}


def test_a_nullable_array_takes_element_facts() -> None:
    """pydantic writes ``list[str] | None`` as a union with null: its elements are facts,
    null has none."""
    schema = {"type": "object", "properties": {"cc": NULLABLE_LIST}}
    declared = declare_facts({"/cc/*": "email"}, root=None, schema=schema)
    canonical, facts = apply_facts(declared, {"cc": ["Bob@Example.COM"]})
    assert canonical == {"cc": ["bob@example.com"]}
    assert facts["cc"]["address"] == ["bob@example.com"]
    assert apply_facts(declared, {"cc": None}) == ({"cc": None}, {})


@pytest.mark.parametrize(
    "prop",
    [
        {"type": "string"},
        {"anyOf": [{"type": "string"}, {"type": "null"}]},
        {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}]},
    ],
)
def test_element_facts_need_an_array(prop: dict[str, object]) -> None:
    schema = {"type": "object", "properties": {"cc": prop}}
    with pytest.raises(FactsError, match="not declared as an array"):
        declare_facts({"/cc/*": "email"}, root=None, schema=schema)


def test_a_nullable_value_is_checked_as_its_type() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
    }
    with pytest.raises(FactsError, match="reads integer/number values, but the argument is string"):
        declare_facts({"/n": "number"}, root=None, schema=schema)
