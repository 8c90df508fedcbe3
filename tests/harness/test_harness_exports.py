"""Public names and ``__all__`` agree in the harness modules outside the pipeline and the
session (the journal package, tools, dispatch, grants, providers, scrub, shape), by the
rules of ``tests/test_all_attributes.py``."""

from __future__ import annotations

from pathlib import Path

import pytest
import test_all_attributes as all_attributes

import clearance

HARNESS = Path(clearance.__file__).parent / "harness"
MODULES = [
    "clearance.harness",
    "clearance.harness._context",
    "clearance.harness._registry",
    "clearance.harness._results",
    "clearance.harness._signature",
    "clearance.harness._tool_schema",
    "clearance.harness.dispatch",
    "clearance.harness.grants",
    "clearance.harness.grants_sqlite",
    "clearance.harness.journal_sqlite",
    "clearance.harness.providers",
    "clearance.harness.scrub",
    "clearance.harness.shape",
    "clearance.harness.tools",
    *(
        f"clearance.harness.journal.{path.stem}".removesuffix(".__init__")
        for path in sorted((HARNESS / "journal").glob("*.py"))
    ),
]


@pytest.mark.parametrize("name", MODULES)
def test_all_attributes(name: str) -> None:
    all_attributes.test_all_attributes(name)
