"""``benchmarks/agentdojo/run.py`` (issue 15): a run that fails rewrites none of its tracked
outputs; one that succeeds replaces them all and leaves no temporary file; its plot keeps
points that would overlap apart.

The script runs as a real subprocess on a copy of the benchmark and of the packs it reads
(``<copy>/benchmarks/agentdojo/run.py`` finds them at ``<copy>/clearance/packs/agentdojo``)."""

from __future__ import annotations

import importlib.util
import json
import lzma
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
OLD = 1_000_000_000  # a modification time long past: a rewrite shows


def _copy(tmp_path: Path) -> Path:
    bench = tmp_path / "benchmarks" / "agentdojo"
    shutil.copytree(ROOT / "benchmarks" / "agentdojo", bench)
    shutil.copytree(
        ROOT / "clearance" / "packs" / "agentdojo", tmp_path / "clearance" / "packs" / "agentdojo"
    )
    for path in bench.rglob("*"):
        if path.is_file():
            os.utime(path, (OLD, OLD))
    return bench


def _state(bench: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of the benchmark but Python's bytecode caches (written when the run
    imports its helper modules, unless PYTHONDONTWRITEBYTECODE is set, as in CI)."""
    return {
        str(p.relative_to(bench)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(bench.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def _run(bench: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(bench / "run.py"), *args],
        cwd=bench,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _shrink(bench: Path, lines: int = 40) -> None:
    """Keep the first ``lines`` calls of each corpus (the whole corpora take minutes under
    coverage; what this test checks does not depend on their length)."""
    for path in sorted((bench / "data").glob("*.jsonl.xz")):
        with lzma.open(path, "rt", encoding="utf-8") as source:
            kept = [line for _, line in zip(range(lines), source, strict=False)]
        with lzma.open(path, "wt", encoding="utf-8") as target:
            target.writelines(kept)
        os.utime(path, (OLD, OLD))


def test_a_failing_run_leaves_the_tracked_files_alone(tmp_path: Path) -> None:
    bench = _copy(tmp_path)
    _shrink(bench)
    # The last suite's pack does not load: the three before it were replayed already.
    (tmp_path / "clearance" / "packs" / "agentdojo" / "slack" / "slack.cedar").write_text(
        "permit (principal, action, resource) when { nonsense };\n"
    )
    before = _state(bench)
    done = _run(bench, "--no-plot")
    assert done.returncode != 0
    assert "PolicyError" in done.stderr
    assert _state(bench) == before  # same bytes, same modification times, no new file


def test_a_run_replaces_its_outputs_at_the_end(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    bench = _copy(tmp_path)
    (bench / "RESULTS.md").write_text("stale\n")
    os.utime(bench / "RESULTS.md", (OLD, OLD))
    done = _run(bench)
    assert done.returncode == 0, done.stderr
    results = (bench / "RESULTS.md").read_text()
    assert results.startswith("# AgentDojo: utility and security of policy sets")
    for name in ("RESULTS.md", "utility_security.png", "data/banking.tools.json"):
        assert (bench / name).stat().st_mtime_ns > OLD * 10**9, name
    assert (bench / "utility_security.png").read_bytes().startswith(b"\x89PNG")
    assert not list(bench.rglob("*.tmp"))
    # The inputs are read, never written.
    for name in ("data/banking.json", "data/banking.corpus.jsonl.xz"):
        assert (bench / name).stat().st_mtime_ns == OLD * 10**9, name


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "agentdojo_run", ROOT / "benchmarks" / "agentdojo" / "run.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_plotted_points_do_not_hide_each_other() -> None:
    run = _module()
    # As in RESULTS.md: every suite's noop at (0, 100); travel's deny-mutating at (100, 70)
    # a point away from banking's pack at (100, 69); one point alone.
    points = [(0.0, 100.0)] * 4 + [(100.0, 70.0), (100.0, 68.75), (83.3, 90.0)]
    drawn = run.plot_positions(points)
    assert len(drawn) == len(points)
    for i, a in enumerate(drawn):
        for b in drawn[i + 1 :]:
            assert math.dist(a, b) >= 2 * run.SPREAD * math.sin(math.pi / 4) - 1e-9, (a, b)
    # Each group stays centred on its place, each point near it; a lone point stays put.
    cx = sum(x for x, _ in drawn[:4]) / 4
    cy = sum(y for _, y in drawn[:4]) / 4
    assert math.isclose(cx, 0.0, abs_tol=1e-9) and math.isclose(cy, 100.0)
    assert all(math.isclose(math.dist(p, (0.0, 100.0)), run.SPREAD) for p in drawn[:4])
    assert drawn[6] == (83.3, 90.0)


def test_the_classes_table_shows_each_class_before_and_after() -> None:
    """Issue 33: a class of attack is a row, each suite a column with the variant calls
    stopped before (an earlier revision's ``--save``) and after; a suite without the class
    shows ``-``; utility and AgentDojo pairs follow."""
    run = _module()
    figures: dict[str, dict[str, Any]] = {
        suite: {"utility": [9, 10], "pairs": [4, 4], "classes": {}} for suite in run.SUITES
    }
    figures["banking"]["classes"] = {"known-payee": [42, 48]}
    before = json.loads(json.dumps(figures))
    before["banking"]["classes"] = {"known-payee": [0, 48]}
    before["banking"]["utility"] = [10, 10]
    table = run._classes(figures, before)
    header, _, *rows = table
    assert header == "| class | workspace | travel | banking | slack |"
    assert len(rows) == len(run.CLASSES) + 2
    payee = next(r for r in rows if "`known-payee`" in r)
    assert payee.split(" | ")[1:] == ["-", "-", "0/48 → 42/48", "- |"]
    utility = next(r for r in rows if r.startswith("| utility"))
    assert "10/10 (100%) → 9/10 (90%)" in utility
    # Without a baseline, only the figures.
    assert "| 42/48 |" in "".join(run._classes(figures, {}))
