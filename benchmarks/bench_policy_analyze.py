"""How long ``clearance policy analyze`` takes on the bundled packs (issue 32).

For each pack, with the tools ``clearance policy analyze`` would use (the built-in default
for ``coding``; ``--tools benchmarks/agentdojo/data/<suite>.tools.json`` for the AgentDojo
suites), in process (the command's own start-up, about a second, is left out):

- ``analyze``: every policy, can it apply; every permit, is it shadowed;
- ``against itself``: ``--against`` the same directory, the dearest comparison (every tool
  must be proved unchanged; a changed tool then asks six queries);
- ``against a loosened copy`` (``coding`` only): the copy lets ``cat`` run (a loosening on
  ``shell.run``), found and confirmed by Cedar.

Prints the median of ``--runs`` runs (default 3) in seconds.

    python benchmarks/bench_policy_analyze.py [--runs 5]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clearance.cli._tools import command_tools
from clearance.policy.cedar.analysis import analyze_directory, compare_directories

ROOT = Path(__file__).resolve().parents[1]
PACKS = ROOT / "clearance" / "packs"
SUITES = ("banking", "slack", "travel", "workspace")


def _median(runs: int, work: Callable[..., Any], *args: Any) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        work(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _loosened(directory: Path) -> Path:
    copy = Path(tempfile.mkdtemp()) / "coding"
    shutil.copytree(directory, copy)
    text = (copy / "coding.cedar").read_text()
    old = '(context.facts.command.program == "ls" &&'
    new = '(context.facts.command.program == "cat" || context.facts.command.program == "ls" &&'
    (copy / "coding.cedar").write_text(text.replace(old, new))
    return copy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args().runs
    packs: list[tuple[str, Path, str | None]] = [("coding", PACKS / "coding", None)]
    for suite in SUITES:
        tools = ROOT / "benchmarks" / "agentdojo" / "data" / f"{suite}.tools.json"
        packs.append((f"agentdojo/{suite}", PACKS / "agentdojo" / suite, str(tools)))
    print(f"{'pack':<22}{'policies':>9}{'tools':>7}{'analyze':>10}{'itself':>9}{'loosened':>10}")
    for name, directory, tools_path in packs:
        tools = list(command_tools(None, tools_path).registry)
        found = analyze_directory(directory, tools)
        analyze = _median(runs, analyze_directory, directory, tools)
        itself = _median(runs, compare_directories, directory, directory, tools)
        loosened = ""
        if name == "coding":
            copy = _loosened(directory)
            changes = compare_directories(directory, copy, tools)
            assert [f.change for f in changes.of("loosens")] == ["deny->allow"], changes
            seconds = _median(runs, compare_directories, directory, copy, tools)
            loosened = f"{seconds:.2f}"
        print(
            f"{name:<22}{found.policies:>9}{found.tools:>7}{analyze:>10.2f}{itself:>9.2f}"
            f"{loosened:>10}"
        )


if __name__ == "__main__":
    main()
