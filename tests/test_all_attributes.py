"""Public names and ``__all__`` agree (as anyio's ``test_all_attributes``), for the bottom
layer and the policy packages.

* every name in ``__all__`` is there once and resolves (lazy names included);
* every public name a module defines (a top-level ``def``, ``class`` or assignment whose
  name has no ``_``) is in its ``__all__``;
* a package's ``__init__`` lists every public name it imports from clearance.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from types import ModuleType

import pytest

import clearance

ROOT = Path(clearance.__file__).parent
# Moved to clearance.tuning by issue 13 (another package's tests cover them there).
SKIP: set[str] = set()


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> list[str]:
    names = ["clearance.types", "clearance.errors"]
    for path in sorted((ROOT / "policy").rglob("*.py")):
        name = _module_name(path)
        if name not in SKIP:
            names.append(name)
    return names


def _defined(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if not n.startswith("_")}


def _imported_from_clearance(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:  # top level only: TYPE_CHECKING imports are listed by hand
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("clearance"):
            names |= {a.asname or a.name for a in node.names}
    return {n for n in names if not n.startswith("_")}


@pytest.mark.parametrize("name", _modules())
def test_all_attributes(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    assert len(set(exported)) == len(exported), f"{name}.__all__ repeats a name"
    for attr in exported:
        assert getattr(module, attr, None) is not None, f"{name}.__all__ names missing {attr!r}"
    path = Path(module.__file__ or "")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    public = _defined(tree)
    if path.name == "__init__.py":
        public |= {
            n
            for n in _imported_from_clearance(tree)
            if not isinstance(getattr(module, n, None), ModuleType)
        }
    missing = sorted(public - set(exported))
    assert not missing, f"{name} defines public names missing from __all__: {missing}"


def test_the_deprecated_test_report_name_still_imports() -> None:
    from clearance.policy import testing

    with pytest.warns(DeprecationWarning, match="DecisionReport"):
        old = testing.TestReport
    assert old is testing.DecisionReport
    assert "TestReport" not in testing.__all__
