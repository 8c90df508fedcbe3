#!/usr/bin/env python3
"""The adapters' version matrix: each framework at its floor and at its newest release.

An extra's floor in pyproject.toml (``pydantic-ai = ["pydantic-ai-slim>=2.28,<3"]``) is a
claim: that version, and everything up to the bound, works with the adapter. This script
proves both ends. For each framework it makes two fresh virtual environments: one with
clearance and every requirement of the extra pinned to its lower bound (``==2.28``), one
with the newest release the extra admits (``pip install --upgrade``). In each it runs
that adapter's own tests, nothing else, and prints one row per environment::

    framework         versions                                 result  passed  failed  skipped  install  tests
    pydantic-ai       pydantic-ai-slim 2.28.0                  passed      24       0        0     21 s    6 s

It exits 1 when any row failed. CI (.ci/run) runs it as a stage of its own; pip's cache
(``~/.cache/pip``, or ``PIP_CACHE_DIR``) is shared by every environment, so that only the
first run downloads. Finding a floor is the same script with explicit pins, one row::

    python .ci/adapter_matrix.py --extra pydantic-ai --pin pydantic-ai-slim==2.27.0

The environments are made under a temporary directory and removed afterwards (``--keep``
leaves them, and prints where).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

TESTS: dict[str, tuple[str, ...]] = {
    "claude-agent-sdk": (
        "tests/integrations/test_claude_agent_sdk.py",
        "tests/integrations/test_claude_agent_sdk_durable.py",
    ),
    "pydantic-ai": ("tests/integrations/test_pydantic_ai.py",),
    "langgraph": ("tests/integrations/test_langgraph.py",),
    "openai-agents": ("tests/integrations/test_openai_agents.py",),
}
"""By extra: the adapter's tests (the tests that import the framework)."""

# What the tests themselves need (tests/conftest.py imports hypothesis; pyproject.toml's
# pytest configuration sets pytest-timeout's timeout), at the test extra's versions.
_TEST_TOOLS = ("pytest", "pytest-timeout", "hypothesis")


@dataclass(frozen=True)
class Row:
    extra: str
    label: str  # "floor", "newest" or "pinned"
    pins: tuple[str, ...]  # requirements pinned with ==, empty for the newest


@dataclass
class Outcome:
    row: Row
    versions: str = ""
    result: str = "failed"
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    install_s: float = 0.0
    tests_s: float = 0.0
    detail: str = ""
    newer: str = ""  # a release the extra's upper bound leaves out (newest rows)


def _project() -> dict[str, object]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        project: dict[str, object] = tomllib.load(f)["project"]
    return project


def _requirements(extra: str) -> list[str]:
    extras = _project()["optional-dependencies"]
    assert isinstance(extras, dict)
    return list(extras[extra])


def _name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert match is not None, requirement
    return match.group(0)


def floor_pins(extra: str) -> tuple[str, ...]:
    """Every requirement of ``extra`` pinned to its lower bound (``>=X`` -> ``==X``)."""
    pins = []
    for requirement in _requirements(extra):
        match = re.search(r">=\s*([^,;\s]+)", requirement)
        if match is None:
            raise SystemExit(f"the {extra} extra's {requirement!r} has no floor (>=)")
        pins.append(f"{_name(requirement)}=={match.group(1)}")
    return tuple(pins)


def _test_tools() -> list[str]:
    """The test tools, at the bounds pyproject.toml's test extra gives them."""
    extras = _project()["optional-dependencies"]
    assert isinstance(extras, dict)
    by_name = {_name(r).lower(): r for r in extras["test"]}
    return [by_name.get(tool, tool) for tool in _TEST_TOOLS]


def _run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload, no-any-return]


def _installed(python: Path, extra: str) -> str:
    """The versions of the extra's distributions in the environment, as one string."""
    names = [_name(r) for r in _requirements(extra)]
    code = (
        "import sys\nfrom importlib import metadata\n"
        "print(', '.join(f'{n} {metadata.version(n)}' for n in sys.argv[1:]))"
    )
    done = _run([str(python), "-c", code, *names])
    return done.stdout.strip() or done.stderr.strip().splitlines()[-1]


def _newer_outside(python: Path, extra: str, installed: str) -> str:
    """The framework's newest release on the registry when it is not the one installed
    (the extra's upper bound leaves it out: time to try it and move the bound)."""
    name = _name(_requirements(extra)[0])
    done = _run(
        [str(python), "-m", "pip", "index", "versions", "--disable-pip-version-check", name]
    )
    match = re.search(rf"^{re.escape(name)} \(([^)]+)\)", done.stdout, re.MULTILINE)
    if match is None or f"{name} {match.group(1)}" in installed:
        return ""
    return f"{name} {match.group(1)}"


def run_row(row: Row, base: Path) -> Outcome:
    outcome = Outcome(row)
    env_dir = base / f"{row.extra}-{row.label}"
    python = env_dir / "bin" / "python"
    started = time.monotonic()
    made = _run([sys.executable, "-m", "venv", str(env_dir)])
    if made.returncode != 0:
        outcome.detail = made.stderr.strip()
        return outcome
    install = [
        str(python),
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "-e",
        f"{ROOT}[{row.extra}]",
        *_test_tools(),
        *row.pins,
    ]
    if not row.pins:
        install.insert(4, "--upgrade")
    installed = _run(install)
    outcome.install_s = time.monotonic() - started
    if installed.returncode != 0:
        outcome.result = "no install"
        outcome.detail = installed.stderr.strip()
        return outcome
    outcome.versions = _installed(python, row.extra)
    if row.label == "newest":
        outcome.newer = _newer_outside(python, row.extra, outcome.versions)
    report = env_dir / "junit.xml"
    started = time.monotonic()
    tested = _run(
        [
            str(python),
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--junitxml={report}",
            *TESTS[row.extra],
        ],
        cwd=ROOT,
        # The checkout's code, whatever the parent's PYTHONPATH (a worktree's) says.
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    outcome.tests_s = time.monotonic() - started
    if report.exists():
        suite = ET.parse(report).getroot()
        suite = suite if suite.tag == "testsuite" else suite[0]
        total = int(suite.get("tests", 0))
        outcome.failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        outcome.skipped = int(suite.get("skipped", 0))
        outcome.passed = total - outcome.failed - outcome.skipped
    if tested.returncode == 0:
        outcome.result = "passed"
    else:
        outcome.detail = tested.stdout.strip()[-3000:]
    return outcome


def table(outcomes: list[Outcome]) -> str:
    head = ("framework", "versions", "result", "passed", "failed", "skipped", "install", "tests")
    rows = [
        (
            f"{o.row.extra} ({o.row.label})",
            o.versions or " ".join(o.row.pins) or "-",
            o.result,
            str(o.passed),
            str(o.failed),
            str(o.skipped),
            f"{o.install_s:.0f} s",
            f"{o.tests_s:.0f} s",
        )
        for o in outcomes
    ]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = []
    for r in [head, *rows]:
        cells = [
            c.ljust(w) if i < 3 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--extra", action="append", choices=sorted(TESTS), help="only these (default: all)"
    )
    parser.add_argument(
        "--pin",
        action="append",
        default=[],
        help="one row per --extra with these requirements (pkg==version) instead of the "
        "floor and the newest",
    )
    parser.add_argument("--jobs", type=int, default=2, help="environments at a time")
    parser.add_argument("--keep", action="store_true", help="leave the environments")
    args = parser.parse_args(argv)
    extras = args.extra or sorted(TESTS)
    if args.pin:
        rows = [Row(extra, "pinned", tuple(args.pin)) for extra in extras]
    else:
        rows = [
            row
            for extra in extras
            for row in (Row(extra, "floor", floor_pins(extra)), Row(extra, "newest", ()))
        ]
    # Stopped (CI's timeout, Ctrl-C), it still removes its environments.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    base = Path(tempfile.mkdtemp(prefix="clearance-adapter-matrix-"))
    started = time.monotonic()
    try:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            outcomes = list(pool.map(lambda row: run_row(row, base), rows))
    finally:
        if args.keep:
            print(f"environments kept in {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    for o in outcomes:
        if o.result != "passed":
            print(f"--- {o.row.extra} ({o.row.label}, {' '.join(o.row.pins) or 'newest'})")
            print(o.detail)
    print(table(outcomes))
    for o in outcomes:
        if o.newer:
            print(f"note: {o.newer} is out, outside the {o.row.extra} extra's upper bound")
    print(f"python {sys.version.split()[0]}; {time.monotonic() - started:.0f} s in all")
    return 0 if all(o.result == "passed" for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
