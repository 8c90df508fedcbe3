"""Colour follows ``NO_COLOR`` and ``--color auto|always|never``; shell completion works
(issue 15). Through the real console script, on a pseudo-terminal where colour is at stake."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pty_support import on_a_terminal

from clearance.config import pack_path

CODING = str(pack_path("coding"))
SGR = re.compile(r"\x1b\[[0-9;]*m")
CONSOLE_SCRIPT = Path(sys.executable).parent / "clearance"


def _terminal(tmp_path: Path, *args: str, code: int = 0) -> str:
    return on_a_terminal(tmp_path, list(args), [], code=code)


@pytest.mark.parametrize(
    ("no_color", "option", "coloured"),
    [
        (None, [], True),
        ("1", [], False),
        ("", [], True),  # an empty NO_COLOR does not count (no-color.org)
        (None, ["--color", "never"], False),
        ("1", ["--color", "always"], True),
        ("1", ["--color", "auto"], False),
    ],
)
def test_colour_on_a_terminal(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    no_color: str | None,
    option: list[str],
    coloured: bool,
) -> None:
    if no_color is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", no_color)
    shown = _terminal(tmp_path, *option, "policy", "test", CODING, "-v")
    assert "pass" in shown
    assert bool(SGR.search(shown)) is coloured, shown[:300]
    # The final error line is printed after the command's click context is gone: it follows
    # the same choice.
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "x.tests.json").write_text('{"tests": [{"name": "x"}]}')
    failed = _terminal(tmp_path, *option, "policy", "test", "bad", code=2)
    assert "error: " in failed
    assert bool(SGR.search(failed)) is coloured, failed


def test_colour_always_in_a_pipe(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    run = subprocess.run(
        [str(CONSOLE_SCRIPT), "--color", "always", "policy", "test", CODING, "-v"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert SGR.search(run.stdout)
    auto = subprocess.run(
        [str(CONSOLE_SCRIPT), "policy", "test", CODING, "-v"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert auto.returncode == 0 and "pass" in auto.stdout and not SGR.search(auto.stdout)
    bad = subprocess.run(
        [str(CONSOLE_SCRIPT), "--color", "sometimes", "policy", "test", CODING],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2 and "'sometimes' is not one of" in bad.stderr


def _complete(tmp_path: Path, variable: str, words: str = "", cword: int = 0) -> str:
    env = dict(os.environ, _CLEARANCE_COMPLETE=variable, COMP_WORDS=words, COMP_CWORD=str(cword))
    run = subprocess.run(
        [str(CONSOLE_SCRIPT)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_shell_completion_as_documented(tmp_path: Path) -> None:
    script = _complete(tmp_path, "bash_source")
    assert "_clearance_completion()" in script
    assert "complete -o nosort -F _clearance_completion clearance" in script
    # What bash asks for while a person types `clearance pol<TAB>`, `clearance policy te<TAB>`.
    assert _complete(tmp_path, "bash_complete", "clearance pol", 1).split() == ["plain,policy"]
    assert _complete(tmp_path, "bash_complete", "clearance policy te", 2).split() == ["plain,test"]
    options = _complete(tmp_path, "bash_complete", "clearance policy test --cov", 3).split()
    assert options == ["plain,--coverage", "plain,--coverage-threshold"]
    choices = _complete(tmp_path, "bash_complete", "clearance --color ", 2).split()
    assert choices == ["plain,auto", "plain,always", "plain,never"]


def test_the_completion_variable_is_documented() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "config.md").read_text()
    commands = docs.split("## The commands", 1)[1]
    assert 'eval "$(_CLEARANCE_COMPLETE=bash_source clearance)"' in commands
    assert "_CLEARANCE_COMPLETE=zsh_source" in commands
    assert "_CLEARANCE_COMPLETE=fish_source" in commands
