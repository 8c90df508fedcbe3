"""Declared facts: rules over them must be written in the canonical spelling."""

from __future__ import annotations

from pathlib import Path

import pytest

from clearance.facts import EmailFact, NumberFact, PathFact, UrlFact
from clearance.facts.declared import pattern_problem


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
