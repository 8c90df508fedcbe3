"""Run the real ``clearance`` command in a subprocess, in a fresh temporary directory."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


Cli = Callable[..., Result]


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """``cli("policy", "test", DIR, input="o\\n")``: exit code, stdout and stderr.

    stdin is empty unless ``input`` is given, so nothing ever waits for a terminal.
    """

    def run(*args: str, input: str | None = None, cwd: Path | None = None) -> Result:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CLEARANCE")}
        proc = subprocess.run(
            [sys.executable, "-m", "clearance", *args],
            cwd=cwd or tmp_path,
            input=input,
            stdin=subprocess.DEVNULL if input is None else None,
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)

    return run
