"""Attacks on ``LocalEvaluator`` rules over the bundled ``shell.run`` (a library user's setup).

Local rules match the canonical arguments (rule R11). For a ``path`` fact that is the
resolved path, so ``files.*(path=**/.env)`` sees ``.env`` "whatever link led to it", and
``files.read_file(path=*)`` cannot read outside the workspace. For a ``command`` fact the
canonical value is the argv joined back, with every word as written: the facts that know
where a word leads (``outside_root``) exist for Cedar only, and no local rule can name
them. So the path-aware glob that keeps ``cat *`` off ``/etc/passwd`` and ``../x`` (``*``
does not cross ``/``, no wildcard matches ``..``) lets it read through an in-workspace
symlink that leads out, and a deny rule on the file's name misses it behind a link: the
bypasses issue 12 closed for paths (items 5-7), open again for commands.

``cat`` and ``head`` are in ``DEFAULT_SHELL_PROGRAMS``. Real files, symlinks and programs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clearance import Harness, MemoryJournal, Principal, ToolRegistry
from clearance.config import DEFAULT_SHELL_PROGRAMS
from clearance.policy import LocalEvaluator
from clearance.toolsets import register_shell

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(shutil.which("cat") is None, reason="needs cat"),
]

ALICE = Principal("User", "alice")


async def run(workspace: Path, evaluator: LocalEvaluator, command: str) -> tuple[str, str]:
    registry = ToolRegistry()
    register_shell(registry, workspace, allowed_programs=DEFAULT_SHELL_PROGRAMS)
    async with Harness(registry, evaluator=evaluator, journal=MemoryJournal()) as harness:
        session = await harness.create_session(principal=ALICE)
        outcome = await session.call_tool("shell__run", {"command": command})
    stdout = json.loads(outcome.text)["stdout"] if outcome.status in ("ok", "error") else ""
    return outcome.status, stdout


async def test_a_local_cat_rule_does_not_read_outside_the_workspace_through_a_link(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (tmp_path / "secret").write_text("OUTSIDE-SECRET\n")
    (workspace / "notes").symlink_to(tmp_path / "secret")
    (workspace / "readme").write_text("hello\n")
    evaluator = LocalEvaluator(allow=["shell.run(command=cat *)"])

    assert await run(workspace, evaluator, "cat readme") == ("ok", "hello\n")
    assert (await run(workspace, evaluator, f"cat {tmp_path / 'secret'}"))[0] == "denied"
    assert (await run(workspace, evaluator, "cat ../secret"))[0] == "denied"
    status, stdout = await run(workspace, evaluator, "cat notes")
    assert "OUTSIDE-SECRET" not in stdout, f"read outside the workspace ({status})"


async def test_a_local_deny_rule_on_a_command_sees_the_file_behind_a_link(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / ".env").write_text("API_KEY=sk-live-123\n")
    (workspace / "settings.txt").symlink_to(".env")
    evaluator = LocalEvaluator(
        allow=["shell.run(command=head *)"], deny=["shell.run(command=*.env*)"]
    )

    assert (await run(workspace, evaluator, "head .env"))[0] == "denied"
    status, stdout = await run(workspace, evaluator, "head settings.txt")
    assert "sk-live-123" not in stdout, f"the denied file was read through a link ({status})"
