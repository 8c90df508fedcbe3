"""clearance.tuning sits above config and below cli: it imports no cli, nothing below it
imports it, and its only imports inside functions are Cedar's (loaded when Cedar is used)."""

from __future__ import annotations

import ast
from pathlib import Path

import clearance

PACKAGE = Path(clearance.__file__).parent
SHIM = PACKAGE / "policy" / "replay.py"  # the deprecated forwarder docs/replay.md once showed


def _imports(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def _under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_tuning_imports_no_cli() -> None:
    paths = sorted((PACKAGE / "tuning").rglob("*.py"))
    assert len(paths) > 10
    for path in paths:
        imported = _imports(ast.parse(path.read_text(encoding="utf-8")))
        assert not [m for m in imported if _under(m, "clearance.cli")], path.name


def test_nothing_below_tuning_imports_it() -> None:
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] in ("tuning", "cli") or path == SHIM:
            continue
        imported = _imports(ast.parse(path.read_text(encoding="utf-8")))
        assert not [m for m in imported if _under(m, "clearance.tuning")], str(relative)


def test_imports_inside_functions_are_only_cedar() -> None:
    lazy: list[str] = []
    for path in sorted((PACKAGE / "tuning").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            lazy.extend(
                f"{path.name}:{function.name} imports {module}"
                for module in _imports(function)
                if not _under(module, "clearance.policy.cedar")
            )
    assert lazy == []
