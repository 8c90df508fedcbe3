"""Shared parts of the MCP tests: real upstream servers and a temporary git repository."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    """A repository with one commit and one modified, unstaged file."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "test@example.com")
    git(repo, "config", "user.name", "Test")
    (repo / "README.md").write_text("hello\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "-q", "-m", "first")
    (repo / "README.md").write_text("hello, world\n")
    return repo


@dataclass
class Upstream:
    """The test upstream server (tests/mcp/upstream_server.py) and what it recorded."""

    log: Path
    pids: Path

    @property
    def program(self) -> str:
        return sys.executable

    @property
    def args(self) -> list[str]:
        return [str(HERE / "upstream_server.py")]

    @property
    def env(self) -> dict[str, str]:
        return {"UPSTREAM_LOG": str(self.log), "UPSTREAM_PIDS": str(self.pids)}

    def calls(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def started(self) -> list[int]:
        if not self.pids.exists():
            return []
        return [int(line) for line in self.pids.read_text().split()]

    def kill(self) -> None:
        os.kill(self.started()[-1], signal.SIGKILL)


@pytest.fixture
def upstream(tmp_path: Path) -> Upstream:
    return Upstream(tmp_path / "upstream.log", tmp_path / "upstream.pids")
