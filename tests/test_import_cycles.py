"""No module of clearance imports itself back through others (issue 35), type-only and
function-level imports included: a circle of imports makes the modules one piece that
cannot be read, tested or moved apart.

One circle is known and may only shrink: the runtime's stages, the session and the harness
name each other's types (breaking it needs the runtime, approvals and stores split of
issue 35, with protocols where the stages need the session's and the harness's shape)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "clearance"

KNOWN = frozenset(
    {
        "clearance.harness._approval",
        "clearance.harness._call_state",
        "clearance.harness._host_runs",
        "clearance.harness._recorder",
        "clearance.harness._running",
        "clearance.harness._session",
        "clearance.harness._stages",
        "clearance.harness.pipeline",
        "clearance.harness.providers",
        "clearance.harness.session",
        "clearance.harness.telemetry",
    }
)
"""The one circle left, which may shrink but not grow."""


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imported(name: str, path: Path, modules: dict[str, Path]) -> Iterator[str]:
    """The clearance modules ``name`` imports, wherever the import stands."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            # `from package import module` imports the module; else the package.
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                yield target
                break


def _circles() -> list[frozenset[str]]:
    """The strongly connected parts of the import graph (Tarjan, iterative)."""
    modules = _modules()
    edges = {name: set(_imported(name, path, modules)) for name, path in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[frozenset[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                part = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    part.add(member)
                    if member == node:
                        break
                if len(part) > 1:
                    circles.append(frozenset(part))
    return circles


def test_no_new_circle_of_imports() -> None:
    circles = _circles()
    grown = [sorted(c) for c in circles if not c <= KNOWN]
    assert grown == [], f"modules that import each other in a circle: {grown}"


def test_the_finder_sees_a_circle() -> None:
    """The finder is not blind: the known circle is found as one part."""
    [known] = [c for c in _circles() if c & KNOWN]
    assert known <= KNOWN and len(known) > 2
