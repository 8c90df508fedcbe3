import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from clearance import CallContext, CallToolResult, ConfigError, Principal, ToolRegistry
from clearance.harness.tools import CancelledError
from clearance.toolsets import register_shell, shell_tools


def ctx() -> CallContext:
    return CallContext(
        session_id="s",
        turn_id=None,
        call_id="c",
        qualified_name="shell.run",
        model_alias="shell__run",
        principal=Principal("User", "u"),
    )


def run(
    root: Path, command: str, context: CallContext | None = None, **options: Any
) -> CallToolResult:
    (tool,) = shell_tools(root, **options)
    result = tool.handler({"command": command}, context or ctx())
    assert isinstance(result, CallToolResult)
    return result


def test_runs_without_a_shell_in_the_root(tmp_path: Path) -> None:
    (tmp_path / "hello.txt").write_text("hi\n")
    result = run(tmp_path, "ls -1")
    assert not result.is_error
    assert result.structured_content["stdout"] == "hello.txt\n"
    assert result.structured_content["exit_code"] == 0
    assert json.loads(result.text) == result.structured_content
    # no shell: operators reach the program as words
    echoed = run(tmp_path, "echo a; rm -rf / && $HOME | `x`")
    assert echoed.structured_content["stdout"] == "a; rm -rf / && $HOME | `x`\n"
    assert run(tmp_path, "pwd").structured_content["stdout"].strip() == str(tmp_path.resolve())


def test_nonzero_exit_and_stderr_are_an_error_result(tmp_path: Path) -> None:
    result = run(tmp_path, "ls does-not-exist")
    assert result.is_error
    assert result.structured_content["exit_code"] != 0
    assert "does-not-exist" in result.structured_content["stderr"]
    assert result.structured_content["timed_out"] is False


def test_environment_is_minimal_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUPER_SECRET_API_KEY", "do-not-leak")
    out = run(tmp_path, "env").structured_content["stdout"]
    assert "do-not-leak" not in out
    assert sorted(line.split("=")[0] for line in out.splitlines()) == [
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_NOSYSTEM",
        "GIT_TERMINAL_PROMPT",
        "HOME",
        "LANG",
        "PATH",
    ]
    home = next(line for line in out.splitlines() if line.startswith("HOME="))
    assert home != f"HOME={tmp_path.resolve()}"  # never the workspace the agent writes
    custom = run(tmp_path, "env", env={"PATH": "/usr/bin:/bin", "X": "1"})
    assert "X=1" in custom.structured_content["stdout"]


def test_allowed_programs(tmp_path: Path) -> None:
    assert not run(tmp_path, "echo ok", allowed_programs={"echo"}).is_error
    refused = run(tmp_path, "rm -rf x", allowed_programs={"echo", "git"})
    assert refused.is_error and refused.structured_content == {"error": "not_allowed"}
    assert "'rm' is not allowed" in refused.text and "echo, git" in refused.text
    # the program must be written exactly as allowed: no path tricks
    assert run(tmp_path, "/bin/echo x", allowed_programs={"echo"}).is_error
    (tool,) = shell_tools(tmp_path, allowed_programs={"git", "pytest"})
    assert "Allowed programs: git, pytest." in tool.description


@pytest.mark.parametrize(
    ("command", "error"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("echo 'unclosed", "parse_error"),
        ("no-such-program-xyz --help", "not_found"),
    ],
)
def test_domain_errors(tmp_path: Path, command: str, error: str) -> None:
    result = run(tmp_path, command)
    assert result.is_error and result.structured_content == {"error": error}


def test_a_non_executable_file_is_a_domain_error(tmp_path: Path) -> None:
    (tmp_path / "script.sh").write_text("echo hi\n")
    result = run(tmp_path, str(tmp_path / "script.sh"))
    assert result.is_error and result.structured_content == {"error": "not_executable"}


def test_output_is_bounded_and_the_pipe_drained(tmp_path: Path) -> None:
    # far more than a pipe buffer: the child must not block on a full pipe
    command = f"{sys.executable} -c \"import sys; sys.stdout.write('x' * 1_000_000); sys.stderr.write('e' * 10)\""
    result = run(tmp_path, command, max_output=100)
    assert result.structured_content["stdout"] == "x" * 100
    assert result.structured_content["stderr"] == "e" * 10
    assert result.structured_content["truncated"] is True
    assert result.structured_content["exit_code"] == 0


def test_timeout_kills_the_process_group(tmp_path: Path) -> None:
    start = time.monotonic()
    result = run(tmp_path, "sleep 30", timeout=0.3)
    assert time.monotonic() - start < 10
    assert result.is_error and result.structured_content["timed_out"] is True
    assert result.structured_content["exit_code"] == -9


def test_background_children_do_not_hold_the_call(tmp_path: Path) -> None:
    start = time.monotonic()
    result = run(tmp_path, "sh -c 'sleep 30 & echo started'")
    assert time.monotonic() - start < 10
    assert result.structured_content["stdout"] == "started\n"


def test_cancellation_kills_the_command(tmp_path: Path) -> None:
    context = ctx()
    threading.Timer(0.2, context.cancel).start()
    start = time.monotonic()
    with pytest.raises(CancelledError):
        run(tmp_path, "sleep 30", context)
    assert time.monotonic() - start < 10


def test_registration_and_options(tmp_path: Path) -> None:
    registry = ToolRegistry()
    (tool,) = register_shell(registry, tmp_path, timeout=5)
    assert tool.qualified_name == "shell.run" and not tool.read_only
    assert tool.timeout is not None and tool.timeout > 5  # a backstop behind our own
    assert tool.input_schema["additionalProperties"] is False
    with pytest.raises(ConfigError):
        shell_tools(tmp_path / "missing")
    with pytest.raises(ValueError):
        shell_tools(tmp_path, timeout=0)


def test_planted_git_config_runs_nothing(tmp_path: Path) -> None:
    """A repository config naming programs (fsmonitor, hooks) must not make an
    allow-listed git command run them."""
    import shutil
    import subprocess

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    marker = tmp_path.parent / f"{tmp_path.name}-pwned"
    hook = tmp_path / "evil.sh"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    with (tmp_path / ".git" / "config").open("a") as config:
        config.write(f"[core]\n\tfsmonitor = {hook}\n\thooksPath = {tmp_path}\n")
    out = run(tmp_path, "git status", allowed_programs={"git"})
    assert not out.is_error, out.text
    assert not marker.exists()
