"""``clearance replay`` on a terminal (issue 15): a progress line with calls per second and
the time left, Ctrl-C stops it promptly with the partial report, and the report names the
benign tasks not fully allowed and the attacks not stopped, with the deciding policies.

The command runs as a real subprocess; progress and Ctrl-C are tried with its stderr on a
pseudo-terminal (stdout stays a pipe, so the JSON report can be read back whole) and a
real SIGINT."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

TOTAL = 200_000
"""Corpus lines: far more than are decided before the test presses Ctrl-C."""


def _line(n: int) -> str:
    group = f"task-{n // 4}"
    if n % 4 == 3:  # each task's last call writes: the coding pack asks
        return json.dumps(
            {
                "principal": 'User::"alice"',
                "tool": "files.write_file",
                "arguments": {"path": f"src/m{n}.py", "content": "x"},
                "expected": "allow",
                "label": "benign",
                "group": group,
                "id": f"c{n}",
            }
        )
    return json.dumps(
        {
            "principal": 'User::"alice"',
            "tool": "files.read_file",
            "arguments": {"path": f"src/m{n}.py"},
            "expected": "allow",
            "label": "benign",
            "group": group,
            "id": f"c{n}",
        }
    )


@pytest.fixture(scope="module")
def big_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("replay") / "big.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for n in range(TOTAL):
            out.write(_line(n) + "\n")
    return path


def _interrupted_run(corpus: Path, *args: str) -> tuple[int, float, str, dict[str, Any]]:
    """Run ``clearance replay CORPUS --json *args`` with stderr on a terminal, press Ctrl-C
    once the progress line shows, and return (exit code, seconds from Ctrl-C to exit, what
    the terminal showed, the JSON report)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLEARANCE")}
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "clearance", "replay", str(corpus), "--json", *args],
        cwd=corpus.parent,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
        env=env,
        close_fds=True,
    )
    os.close(slave)
    shown = b""
    pressed: float | None = None
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and pressed is None:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                shown += os.read(master, 65536)
                # Two redraws: the replay is well under way (and past start-up).
                if shown.count(b"calls/s") >= 2:
                    proc.send_signal(signal.SIGINT)
                    pressed = time.monotonic()
            elif proc.poll() is not None:
                break
        assert pressed is not None, f"no progress shown: {shown!r}"
        out, _ = proc.communicate(timeout=30)
        elapsed = time.monotonic() - pressed
        while True:  # what the terminal got after Ctrl-C
            ready, _, _ = select.select([master], [], [], 0.1)
            if not ready:
                break
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        os.close(master)
    return proc.returncode, elapsed, shown.decode(), json.loads(out)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_ctrl_c_stops_promptly_with_the_partial_report(big_corpus: Path, jobs: str) -> None:
    code, elapsed, terminal, report = _interrupted_run(big_corpus, "--jobs", jobs)
    assert code == 130, terminal
    assert elapsed < 5, f"took {elapsed:.1f} s to stop"
    # The progress line: calls read of the total, the rate and the time left.
    assert f"/{TOTAL:,} calls (" in terminal
    assert "calls/s, " in terminal and " left" in terminal
    assert report["interrupted"] is True
    assert report["jobs"] == int(jobs)
    assert 0 < report["calls"] < TOTAL
    # What was decided is reported: reads allowed, writes asked.
    assert report["outcomes"]["allow"] > 0 and report["outcomes"]["ask"] > 0
    assert report["calls"] == sum(report["outcomes"].values())


def test_no_progress_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    corpus = tmp_path / "small.jsonl"
    corpus.write_text("".join(_line(n) + "\n" for n in range(400)))
    done = subprocess.run(
        [sys.executable, "-m", "clearance", "replay", str(corpus)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "replaying" not in done.stderr and "calls/s," not in done.stderr
    assert "interrupted" not in done.stdout


CORPUS = [
    # task u1: a read, then a write the rules ask about: not fully allowed.
    {"tool": "files.read_file", "arguments": {"path": "src/a.py"}, "label": "benign", "group": "u1"},
    {"tool": "files.write_file", "arguments": {"path": "src/a.py", "content": "x"},
     "label": "benign", "group": "u1", "id": "u1-write"},
    # task u2: reads only: fully allowed.
    {"tool": "files.read_file", "arguments": {"path": "src/b.py"}, "label": "benign", "group": "u2"},
    # attack a1: stopped by the deny rule.
    {"tool": "shell.run", "arguments": {"command": "rm -rf build"}, "label": "attack", "group": "a1"},
    # attack a2: every call allowed, by the broad read rule.
    {"tool": "files.read_file", "arguments": {"path": "src/.env"}, "label": "attack", "group": "a2",
     "id": "a2-read"},
    {"tool": "files.read_file", "arguments": {"path": "src/key.pem"}, "label": "attack",
     "group": "a2"},
]  # fmt: skip


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "rules.toml").write_text(
        'allow = ["files.read_file(path=src/**)"]\nask = ["files.write_file"]\n'
        'deny = ["shell.run(command=rm *)"]\n'
    )
    (tmp_path / "clearance.toml").write_text(
        '[evaluator]\nkind = "local"\nrules = "rules.toml"\n\n[tools.files]\nroot = "."\n\n'
        "[tools.shell]\n"
    )
    lines = [json.dumps({"principal": 'User::"alice"', **call}) for call in CORPUS]
    (tmp_path / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    return tmp_path


def _replay(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "clearance", "replay", "corpus.jsonl", *args],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_report_names_the_tasks_that_failed(workdir: Path) -> None:
    done = _replay(workdir)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "utility    1/2 (50.0%) benign groups fully allowed" in out
    assert "security   1/2 (50.0%) attack groups stopped" in out
    benign = out.split("benign groups not fully allowed (the first call that was not):\n", 1)[1]
    assert benign.splitlines()[0] == (
        "  u1: files.write_file ask by ask:files.write_file (line 2, u1-write)"
    )
    attacks = out.split("attack groups not stopped (the policies that allowed them):\n", 1)[1]
    assert attacks.splitlines()[0] == (
        "  a2: files.read_file allowed by allow:files.read_file(path=src/**) (line 5, a2-read)"
    )
    assert "u2:" not in out and "a1:" not in out

    js = _replay(workdir, "--json", "--jobs", "2")
    assert js.returncode == 0, js.stderr
    report = json.loads(js.stdout)
    assert report["interrupted"] is False
    [benign_finding] = report["utility"]["not_fully_allowed"]
    assert benign_finding["group"] == "u1"
    assert benign_finding["policies"] == ["ask:files.write_file"]
    assert benign_finding["calls"] == [
        {
            "line": 2,
            "id": "u1-write",
            "tool": "files.write_file",
            "outcome": "ask",
            "policies": ["ask:files.write_file"],
            "message": benign_finding["calls"][0]["message"],
        }
    ]
    [attack] = report["security"]["not_stopped"]
    assert attack["group"] == "a2"
    assert [c["line"] for c in attack["calls"]] == [5, 6]
    assert attack["policies"] == ["allow:files.read_file(path=src/**)"]
