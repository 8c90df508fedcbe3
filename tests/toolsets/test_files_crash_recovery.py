"""A real process applying a patch is killed (SIGKILL) at every step of its transaction in
turn, from its staging through its renames to its last unlink; the next start of the
files tools finds every file as the patch left it or as it was, never some of each, and
no temporary file, set-aside original or log left behind."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from clearance import CallContext, Principal
from clearance.toolsets.files import files_tools

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")

PATCH = """\
--- a/src/a.py
+++ b/src/a.py
@@ -1,2 +1,2 @@
 first = 1
-a = 1
+a = 2
--- a/src/b.py
+++ b/src/b.py
@@ -1 +1 @@
-b = 1
+b = 2
--- a/old.txt
+++ /dev/null
@@ -1 +0,0 @@
-old
--- a/notes/mv.txt
+++ b/moved/deeper/mv.txt
@@ -1 +1 @@
-move me
+moved
--- /dev/null
+++ b/new/c.py
@@ -0,0 +1 @@
+c = 3
"""

HELPER = r"""
import json, os, signal, sys
from clearance import CallContext, Principal
from clearance.toolsets.files import files_tools

CTX = CallContext(session_id="s", turn_id=None, call_id="c", qualified_name="files.apply_patch",
                  model_alias="files__apply_patch", principal=Principal("User", "t"))
REAL = {name: getattr(os, name) for name in ("rename", "link", "unlink", "fsync")}

def apply(work, patch, kill_at):
    tools = {t.name: t for t in files_tools(work)}
    count = [0]
    def step(name):
        real = REAL[name]
        def run(*args, **kwargs):
            count[0] += 1
            if count[0] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*args, **kwargs)
        return run
    for name in REAL:
        setattr(os, name, step(name))
    result = tools["apply_patch"].handler({"patch": patch}, CTX)
    print(json.dumps({"steps": count[0], "error": result.is_error, "text": result.text}), flush=True)

for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        os.dup2(os.open(request["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 1)
        apply(request["work"], request["patch"], request["kill_at"])
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    print(json.dumps({"signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0}), flush=True)
"""


def context(tool: str) -> CallContext:
    return CallContext(
        session_id="s",
        turn_id=None,
        call_id="c",
        qualified_name=f"files.{tool}",
        model_alias=f"files__{tool}",
        principal=Principal("User", "t"),
    )


def workspace(base: Path) -> Path:
    work = base / "pristine"
    (work / "src").mkdir(parents=True)
    (work / "src" / "a.py").write_text("first = 1\na = 1\n")
    (work / "src" / "b.py").write_text("b = 1\n")
    (work / "old.txt").write_text("old\n")
    (work / "notes").mkdir()
    (work / "notes" / "mv.txt").write_text("move me\n")
    return work


def snapshot(work: Path) -> dict[str, Any]:
    """Every file's bytes and every directory, by path from the workspace."""
    found: dict[str, Any] = {}
    for directory, _, filenames in os.walk(work):
        rel = os.path.relpath(directory, work)
        if rel != ".":
            found[rel + "/"] = None
        for name in filenames:
            path = os.path.join(directory, name)
            found[os.path.relpath(path, work)] = Path(path).read_bytes()
    return found


def test_a_patch_killed_at_any_step_is_finished_or_undone_wholly(tmp_path: Path) -> None:
    pristine = workspace(tmp_path)
    before = snapshot(pristine)
    done = tmp_path / "done"
    shutil.copytree(pristine, done)
    tools = {t.name: t for t in files_tools(done)}
    applied = tools["apply_patch"].handler({"patch": PATCH}, context("apply_patch"))
    assert not applied.is_error, applied.text
    after = snapshot(done)
    assert after != before and after["src/a.py"] == b"first = 1\na = 2\n"
    assert "old.txt" not in after and "moved/deeper/mv.txt" in after

    helper = subprocess.Popen(
        [sys.executable, "-c", HELPER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert helper.stdin is not None and helper.stdout is not None
    outcomes: list[str] = []
    try:
        kill_at = 0
        while True:
            kill_at += 1
            work = tmp_path / f"run{kill_at}"
            shutil.copytree(pristine, work)
            out = tmp_path / f"out{kill_at}.json"
            request = {"work": str(work), "patch": PATCH, "kill_at": kill_at, "out": str(out)}
            helper.stdin.write(json.dumps(request) + "\n")
            helper.stdin.flush()
            status = json.loads(helper.stdout.readline())
            if status["signal"] == 0:
                # the patch ran to its end before step kill_at: every step was tried
                report = json.loads(out.read_text())
                assert not report["error"], report
                assert snapshot(work) == after
                break
            assert status["signal"] == 9
            files_tools(work)  # the next start recovers
            state = snapshot(work)
            assert state in (before, after), (kill_at, sorted(state))
            outcomes.append("after" if state == after else "before")
    finally:
        helper.stdin.close()
        helper.wait(timeout=30)
        helper.stdout.close()
    # killed during staging: undone; killed once staging was complete: finished
    assert outcomes[0] == "before" and outcomes[-1] == "after"
    assert outcomes == sorted(outcomes, key=lambda o: o == "after")  # undone, then finished
    assert len(outcomes) >= 15, outcomes


def test_a_live_transaction_of_another_process_is_left_alone(tmp_path: Path) -> None:
    """A log locked by a live transaction is not touched by another start."""
    work = workspace(tmp_path)
    log = work / ".clearance-patch-0123456789ab.json"
    (work / "src" / ".a.py.clearance-0123456789ab.tmp").write_text("first = 1\na = 9\n")
    log.write_text(
        json.dumps(
            {
                "changes": [
                    {"path": "src/a.py", "content": True, "replace": True, "remove_source": None}
                ],
                "created_dirs": [],
            }
        )
    )
    (work / ".clearance-patch-0123456789ab.commit").write_text("")
    with log.open("rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        files_tools(work)
        assert log.exists() and (work / "src" / "a.py").read_text() == "first = 1\na = 1\n"
    # once the lock is gone (its process died), the next start finishes it
    files_tools(work)
    assert not log.exists() and (work / "src" / "a.py").read_text() == "first = 1\na = 9\n"
    assert sorted(p.name for p in (work / "src").iterdir()) == ["a.py", "b.py"]


def test_a_log_naming_a_protected_path_is_left_alone(tmp_path: Path) -> None:
    work = workspace(tmp_path)
    (work / ".git").mkdir()
    (work / ".git" / "config").write_text("[core]\n")
    (work / ".git" / "..config.clearance-0123456789ab.tmp").write_text("[core]\nhooksPath=x\n")
    log = work / ".clearance-patch-0123456789ab.json"
    change = {"path": ".git/config", "content": True, "replace": True, "remove_source": None}
    log.write_text(json.dumps({"changes": [change], "created_dirs": []}))
    (work / ".clearance-patch-0123456789ab.commit").write_text("")
    files_tools(work)
    assert (work / ".git" / "config").read_text() == "[core]\n" and log.exists()


def test_the_files_tools_refuse_to_write_a_log(tmp_path: Path) -> None:
    work = workspace(tmp_path)
    tools = {t.name: t for t in files_tools(work)}
    result = tools["write_file"].handler(
        {"path": ".clearance-patch-0123456789ab.json", "content": "{}"}, context("write_file")
    )
    assert result.is_error and "log of a change in progress" in result.text
    assert not (work / ".clearance-patch-0123456789ab.json").exists()
