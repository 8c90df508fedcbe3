"""Public names and ``__all__`` agree in clearance.cli, by the rules of
``tests/test_all_attributes.py``."""

from __future__ import annotations

from pathlib import Path

import pytest
import test_all_attributes as all_attributes

import clearance

ROOT = Path(clearance.__file__).parent
# The journal and replay verbs move with clearance.tuning (issue 13); their module
# surface is checked with it.
ELSEWHERE = {"clearance.cli.journal_cmd", "clearance.cli.replay_cmd"}


def modules() -> list[str]:
    names = []
    for path in sorted((ROOT / "cli").rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return [name for name in names if name not in ELSEWHERE]


@pytest.mark.parametrize("name", modules())
def test_all_attributes(name: str) -> None:
    all_attributes.test_all_attributes(name)
