"""``clearance approvers`` (rule R13): register, list and remove the people who may
answer asks, in the user's config directory (here a private one)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def test_the_approvers_command(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLEARANCE")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "clearance", "approvers", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )

    assert run("list").stdout.strip() == "no approvers"
    added = run("add", "alice")
    assert added.returncode == 0 and "approver alice added" in added.stdout
    key = tmp_path / "xdg" / "clearance" / "approvers" / "alice.key"
    assert key.stat().st_mode & 0o777 == 0o600
    assert run("add", "alice").returncode == 2
    assert run("add", "../etc").returncode == 2
    assert json.loads(run("list", "--json").stdout) == ["alice"]
    assert run("remove", "alice").returncode == 0
    assert run("remove", "alice").returncode == 2
