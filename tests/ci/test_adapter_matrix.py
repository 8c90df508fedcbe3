"""``.ci/adapter_matrix.py`` (issue 31): what it installs at each framework's floor, and the
table it prints. (CI runs the script itself, which installs the frameworks: minutes, not a
test.)"""

from __future__ import annotations

import importlib.util
import re
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "adapter_matrix", ROOT / ".ci" / "adapter_matrix.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


matrix = _script()


def test_every_adapter_extra_has_its_tests_and_a_floor_and_a_bound() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for extra, files in matrix.TESTS.items():
        assert files and all((ROOT / f).is_file() for f in files), extra
        for requirement in extras[extra]:
            assert re.search(r">=[0-9.]+,<[0-9.]+$", requirement), requirement


def test_the_floor_pins_every_requirement_of_the_extra_to_its_lower_bound() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    pins = matrix.floor_pins("langgraph")
    assert len(pins) == len(extras["langgraph"])
    for pin, requirement in zip(pins, extras["langgraph"], strict=True):
        name, _, version = pin.partition("==")
        assert requirement.startswith(f"{name}>={version},")


def test_an_extra_without_a_floor_is_refused() -> None:
    with pytest.raises(SystemExit, match="has no floor"):
        matrix.floor_pins("test")  # clearance[mcp], ...: no >=


def test_the_table_has_one_row_per_environment() -> None:
    row = matrix.Row("pydantic-ai", "floor", ("pydantic-ai-slim==2.32.1",))
    ok = matrix.Outcome(row, "pydantic-ai-slim 2.32.1", "passed", 25, 0, 0, 21.4, 6.2)
    bad = matrix.Outcome(matrix.Row("langgraph", "newest", ()), result="no install")
    lines = matrix.table([ok, bad]).splitlines()
    assert lines[0].split() == [
        "framework",
        "versions",
        "result",
        "passed",
        "failed",
        "skipped",
        "install",
        "tests",
    ]
    assert lines[1].split() == [
        "pydantic-ai",
        "(floor)",
        "pydantic-ai-slim",
        "2.32.1",
        "passed",
        "25",
        "0",
        "0",
        "21",
        "s",
        "6",
        "s",
    ]
    assert lines[2].split()[:4] == ["langgraph", "(newest)", "-", "no"]
