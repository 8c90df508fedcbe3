"""Public names and ``__all__`` agree in clearance.mcp and clearance.config, by the rules of
``tests/test_all_attributes.py``."""

from __future__ import annotations

from pathlib import Path

import pytest
import test_all_attributes as all_attributes

import clearance

ROOT = Path(clearance.__file__).parent


def modules(*packages: str) -> list[str]:
    """Every module of ``packages`` (``clearance.<package>...``), packages included."""
    names = []
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT.parent).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


@pytest.mark.parametrize("name", modules("mcp", "config"))
def test_all_attributes(name: str) -> None:
    all_attributes.test_all_attributes(name)
