"""The examples in examples/ run as documented."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_library_example_runs() -> None:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "library.py")],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    assert [line.split()[:2] for line in proc.stdout.splitlines()] == [
        ["files__write_file", "ok"],
        ["files__read_file", "ok"],
        ["files__read_file", "blocked"],
        ["shell__run", "denied"],
    ]
    assert len((EXAMPLES / "library.py").read_text().splitlines()) <= 40


def test_example_script_under_the_example_config(cli: Any, tmp_path: Path) -> None:
    shutil.copytree(EXAMPLES, tmp_path / "examples", ignore=shutil.ignore_patterns("*.db*"))
    r = cli("run", "examples/script.json", "--config", "examples/clearance.toml")
    assert r.code == 0, r.err
    assert re.search(r"read-1  ok +# example workspace", r.out)
    assert re.search(r"write-1  answer +deny \(auto-answered", r.out)
    # refused before any guardrail or policy: the path leaves the workspace (rule R11)
    assert re.search(r"escape-1  blocked +refused: argument /path \(path\).*outside", r.out)
    assert (tmp_path / "examples" / "clearance.db").is_file()  # [journal] path, beside the file
