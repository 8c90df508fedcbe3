"""The installed ``clearance`` console script, run as a user runs it: in a subprocess, with
no ``CLEARANCE_*`` variable of the test run's environment and nothing on stdin."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path


def command() -> list[str]:
    """The console script beside this interpreter (``python -m clearance`` without one)."""
    script = shutil.which("clearance", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "clearance"]


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("CLEARANCE")}


def clearance(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``clearance ARGS`` in ``cwd``: exit code, stdout and stderr as text."""
    return subprocess.run(
        [*command(), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env(),
        stdin=subprocess.DEVNULL,
    )
