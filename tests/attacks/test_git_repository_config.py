"""Attacks through git's repository configuration on the coding pack's unasked git commands.

``shell.run`` puts options before every git command so that "no repository config may run
a program" (fsmonitor, hooks, pager, ssh, credential helpers, GPG, editors, aliases, the
external diff driver; ``--no-textconv`` for diff/log/show), and the coding pack permits
``git status`` and ``git diff`` (with ``-v``/``--verbose`` for status) without an ask.

Two kinds of repository config still name programs that those commands run:

- ``filter.<driver>.clean`` (and ``.process``), selected by a ``.gitattributes`` line:
  ``git status`` and ``git diff`` run the clean filter on a work-tree file whose stat data
  changed (here only its mtime), to compare its content with the index;
- ``diff.<driver>.textconv``: ``git status -v`` shows the staged diff through it (the tool
  adds ``--no-textconv`` to diff/log/show/whatchanged/blame, not to status).

A repository's config is not the agent's to write (``no-git-internals``), but a workspace
can arrive with one (an unpacked project archive, a shared directory, a previous tool):
that is what the tool's hardening is for. Real repositories, a real harness from
``Config.default``, real git.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from clearance import MemoryJournal, Principal
from clearance.config import Config, build_harness
from clearance.harness.approvals import MemoryGrantStore

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(shutil.which("git") is None, reason="needs git"),
]

ALICE = Principal("User", "alice")
_GIT_ENV = {
    **os.environ,
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "a",
    "GIT_AUTHOR_EMAIL": "a@example.com",
    "GIT_COMMITTER_NAME": "a",
    "GIT_COMMITTER_EMAIL": "a@example.com",
}


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=_GIT_ENV, check=True, capture_output=True)


def repository(root: Path) -> Path:
    """A committed repository whose ``*.txt`` files use the ``tool`` filter and diff drivers."""
    root.mkdir()
    git(root, "init", "-q", ".")
    (root / "notes.txt").write_text("one\n")
    (root / ".gitattributes").write_text("*.txt filter=tool diff=tool\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "init")
    return root


async def run_git(workspace: Path, command: str) -> Any:
    config = Config.default(workspace)
    async with build_harness(
        config, journal=MemoryJournal(), grant_store=MemoryGrantStore()
    ) as harness:
        session = await harness.create_session(
            principal=ALICE, on_permission_ask=lambda ask: "deny"
        )
        return await session.call_tool("shell__run", {"command": command})


@pytest.mark.parametrize("command", ["git status", "git diff --stat"])
async def test_repository_filter_drivers_do_not_run_on_unasked_git(
    tmp_path: Path, command: str
) -> None:
    workspace = repository(tmp_path / "workspace")
    marker = tmp_path / "filter-ran"
    git(workspace, "config", "filter.tool.clean", f"sh -c 'touch {marker}; cat'")
    # Same content, other mtime: git must hash the file (through the filter) to compare.
    os.utime(workspace / "notes.txt", (1_000_000_000, 1_000_000_000))

    outcome = await run_git(workspace, command)

    assert not marker.exists(), f"a program named by the repository config ran ({outcome.status})"


async def test_repository_textconv_does_not_run_on_unasked_git_status_verbose(
    tmp_path: Path,
) -> None:
    workspace = repository(tmp_path / "workspace")
    (workspace / "notes.txt").write_text("two\n")
    git(workspace, "add", "notes.txt")  # a staged change, which status -v shows as a diff
    marker = tmp_path / "textconv-ran"
    git(workspace, "config", "diff.tool.textconv", f"sh -c 'touch {marker}; cat \"$0\"'")

    outcome = await run_git(workspace, "git status -v")

    assert not marker.exists(), f"a program named by the repository config ran ({outcome.status})"
