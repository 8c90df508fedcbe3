"""The git toolset against real repositories: what it runs, what it refuses, and that its
arguments are facts (paths canonical, revisions never options)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support import ALICE, harness

from clearance import CallContext, CallToolResult, ConfinementError, Principal, ToolRegistry
from clearance.errors import FactError
from clearance.facts.git import GitRefFact
from clearance.policy import NoopEvaluator
from clearance.toolsets import _landlock, git_tools, register_git
from clearance.toolsets.confinement import Confinement, landlock_abi

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

CONFINED = landlock_abi() >= 1


def context() -> CallContext:
    return CallContext(
        session_id="s",
        turn_id=None,
        call_id="c",
        qualified_name="git.x",
        model_alias="git__x",
        principal=Principal("User", "u"),
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    work = tmp_path / "ws"
    work.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
    (work / "a.txt").write_text("a\n")
    return work


def run(root: Path, name: str, arguments: dict[str, Any], **options: Any) -> dict[str, Any]:
    if not CONFINED:
        options.setdefault("confinement", Confinement(kind="none"))
    tools = {t.name: t for t in git_tools(root, **options)}
    result = tools[name].handler(arguments, context())
    assert isinstance(result, CallToolResult)
    content = result.structured_content
    assert isinstance(content, dict)
    return {**content, "is_error": result.is_error}


def test_the_everyday_commands_work(repo: Path) -> None:
    assert "?? a.txt" in run(repo, "status", {"short": True})["stdout"]
    assert not run(repo, "add", {"paths": ["a.txt"]})["is_error"]
    committed = run(repo, "commit", {"message": "first"})
    assert not committed["is_error"], committed
    log = run(repo, "log", {"oneline": True, "max_count": 5})
    assert log["stdout"].endswith(" first\n")
    shown = run(repo, "show", {"ref": "HEAD", "stat": True})
    assert "Author: clearance agent <agent@clearance.invalid>" in shown["stdout"]
    assert not run(repo, "branch", {"name": "feature/x"})["is_error"]
    assert "feature/x" in run(repo, "checkout", {"ref": "feature/x"})["stderr"]
    (repo / "a.txt").write_text("a\nb\n")
    assert "+b" in run(repo, "diff", {"paths": ["a.txt"]})["stdout"]
    assert not run(repo, "restore", {"paths": ["a.txt"]})["is_error"]
    assert (repo / "a.txt").read_text() == "a\n"
    assert run(repo, "diff", {})["stdout"] == ""


def test_paths_are_literal_and_hooks_never_run(repo: Path) -> None:
    (repo / "b.txt").write_text("b\n")
    (repo / ":(glob)*.txt").write_text("odd name\n")
    assert not run(repo, "add", {"paths": [":(glob)*.txt"]})["is_error"]
    staged = run(repo, "status", {"short": True})["stdout"]
    assert "A  :(glob)*.txt" in staged or 'A  ":(glob)*.txt"' in staged, staged
    assert "?? a.txt" in staged and "?? b.txt" in staged  # the pattern matched nothing else
    marker = repo / "hook-ran"
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    assert not run(repo, "commit", {"message": "odd"})["is_error"]
    assert not marker.exists()


def test_a_repository_config_that_names_a_program_is_refused(repo: Path) -> None:
    subprocess.run(["git", "-C", str(repo), "config", "filter.x.clean", "touch pwned"], check=True)
    refused = run(repo, "status", {})
    assert refused["is_error"] and refused.get("error") == "refused"
    assert not (repo / "pwned").exists()


def test_revisions_are_never_options_nor_paths() -> None:
    fact = GitRefFact()
    for good in ("main", "HEAD~2", "feature/x-1", "v1.2.3", "HEAD^{tree}", "a1b2c3d", "@{u}"):
        assert fact.canonicalize(good).value == good
    for bad in (
        "--output=/tmp/x",
        "-p",
        "HEAD:../secret",
        "main..evil",
        "a b",
        "x/",
        "x.lock",
        "/abs",
        "",
    ):
        with pytest.raises(FactError):
            fact.canonicalize(bad)


@pytest.mark.anyio
async def test_through_the_pipeline_the_arguments_are_facts(repo: Path) -> None:
    registry = ToolRegistry()
    options: dict[str, Any] = {} if CONFINED else {"confinement": Confinement(kind="none")}
    register_git(registry, repo, **options)
    async with harness(registry, evaluator=NoopEvaluator()) as h:
        session = await h.create_session(principal=ALICE)
        option = await session.call_tool("git__show", {"ref": "--output=x"}, call_id="o")
        outside = await session.call_tool("git__add", {"paths": ["../x"]}, call_id="p")
        amend = await session.call_tool("git__commit", {"message": "m", "amend": True}, call_id="a")
        added = await session.call_tool("git__add", {"paths": ["./sub/../a.txt"]}, call_id="ok")
    assert option.status == "blocked" and outside.status == "blocked"
    assert amend.status == "invalid"
    assert added.status == "ok", added.text
    assert not (repo / "x").exists()


def test_without_landlock_the_git_tools_refuse_to_start(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_landlock, "abi", lambda: 0)
    with pytest.raises(ConfinementError) as raised:
        git_tools(repo)
    assert raised.value.toolset == "git"
    assert git_tools(repo, confinement=Confinement(kind="none"))
