"""A shell tool: run one command (no shell) in the workspace, with bounded output and time.

This is not a sandbox. The command runs as the harness's user with ``cwd`` set to the
workspace; it can read or write anything that user can. Confine it with policies (the
starter Cedar policies forbid programs outside an allowlist), ``allowed_programs``, and
an operating-system sandbox where the stakes call for one.

Example::

    registry.register("shell", shell_tools("/srv/workspace", allowed_programs={"git", "pytest"}))
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Any

from clearance.errors import ConfigError
from clearance.harness.tools import CallContext, CallToolResult, Tool, ToolRegistry

__all__ = ["register_shell", "shell_tools"]

_POLL = 0.05  # seconds between checks for cancellation while the command runs
_DRAIN_GRACE = 2.0  # seconds to wait for output readers once the process group is gone


_GIT_SAFE = (
    "-c",
    "core.fsmonitor=false",
    "-c",
    f"core.hooksPath={os.devnull}",
    "-c",
    "core.pager=cat",
    "-c",
    "diff.external=",
    "-c",
    "core.sshCommand=false",
    "-c",
    "protocol.ext.allow=never",
)
"""Options put before every git command: no repository config may run a program."""


def shell_tools(
    root: str | os.PathLike[str],
    allowed_programs: Iterable[str] | None = None,
    timeout: float = 30,
    *,
    max_output: int = 64_000,
    env: Mapping[str, str] | None = None,
) -> list[Tool]:
    """One mutating tool, ``run(command)``: split ``command`` with :func:`shlex.split` and
    run it without a shell, with ``cwd=root``.

    The result is JSON: ``exit_code``, ``stdout``, ``stderr`` (each cut to ``max_output``
    bytes), ``timed_out`` and ``truncated``; it is an error result (``is_error``) when the
    exit code is not 0 or the command timed out. Pipes, redirections, ``&&`` and globs are
    not interpreted (there is no shell): they reach the program as plain arguments.

    Args:
        root: the working directory; it must exist.
        allowed_programs: if given, the program (the first word, exactly as written:
            ``git`` allows ``git`` but not ``/usr/bin/git``) must be one of these.
        timeout: seconds a command may run; then its whole process group is killed.
        max_output: bytes of stdout and of stderr kept each; the rest is drained and dropped.
        env: the environment of the command. Default: only ``PATH``, ``LANG=C.UTF-8`` and
            ``HOME=root``, so the harness's own secrets (API keys in its environment)
            are not handed to the agent's commands.

    Raises:
        ConfigError: ``root`` is not an existing directory.
    """
    cwd = Path(root)
    if not cwd.is_dir():
        raise ConfigError(f"shell root {os.fspath(root)!r} is not an existing directory")
    cwd = cwd.resolve()
    if timeout <= 0:
        raise ValueError("timeout must be positive")
    allowed = None if allowed_programs is None else frozenset(allowed_programs)
    # HOME is an empty private directory, not the workspace, and git reads no global or
    # system config: otherwise a config file the agent wrote (core.fsmonitor, hooks,
    # diff drivers) turns an allow-listed "git status" into any program.
    environment = (
        dict(env)
        if env is not None
        else {
            "PATH": os.environ.get("PATH", os.defpath),
            "LANG": "C.UTF-8",
            "HOME": tempfile.mkdtemp(prefix="clearance-home-"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
        }
    )

    def run(arguments: dict[str, Any], ctx: CallContext) -> CallToolResult:
        command: str = arguments["command"]
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            return _error(f"run: cannot parse the command: {exc}", "parse_error")
        if not argv:
            return _error("run: the command is empty", "empty")
        program = argv[0]
        if allowed is not None and program not in allowed:
            listed = ", ".join(sorted(allowed)) or "(none)"
            return _error(
                f"run: program {program!r} is not allowed; allowed programs: {listed}",
                "not_allowed",
            )
        if os.path.basename(program) == "git":
            # The repository's own .git/config could still name programs to run.
            argv = [program, *_GIT_SAFE, *argv[1:]]
        return _run(argv, cwd, environment, timeout, max_output, ctx)

    return [
        Tool(
            "run",
            run,
            description=(
                "Run one command in the workspace directory, without a shell (no pipes, "
                "redirections or globs). Returns exit_code, stdout and stderr as JSON."
                + (f" Allowed programs: {', '.join(sorted(allowed))}." if allowed else "")
            ),
            input_schema={
                "type": "object",
                "properties": {"command": {"type": "string", "minLength": 1, "maxLength": 8192}},
                "required": ["command"],
                "additionalProperties": False,
            },
            # The harness timeout is a backstop; our own kills the process group first.
            timeout=timeout + 10,
            annotations={"readOnlyHint": False, "destructiveHint": True, "openWorldHint": True},
        )
    ]


def register_shell(
    registry: ToolRegistry,
    root: str | os.PathLike[str],
    namespace: str = "shell",
    **options: Any,
) -> list[Tool]:
    """Register the shell tool as ``namespace.run``; ``options`` are those of
    :func:`shell_tools`. Returns the registered tools."""
    return registry.register(namespace, shell_tools(root, **options))


def _run(
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    timeout: float,
    max_output: int,
    ctx: CallContext,
) -> CallToolResult:
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            close_fds=True,
            # its own process group, so a timeout kills what it started too
            start_new_session=True,
        )
    except FileNotFoundError:
        return _error(f"run: program {argv[0]!r} not found", "not_found")
    except PermissionError:
        return _error(f"run: program {argv[0]!r} is not executable", "not_executable")
    except OSError as exc:
        return _error(f"run: cannot start {argv[0]!r}: {exc.strerror}", "os_error")
    assert proc.stdout is not None and proc.stderr is not None
    out, err = _Drain(proc.stdout, max_output), _Drain(proc.stderr, max_output)
    deadline = time.monotonic() + timeout
    timed_out = False
    try:
        while True:
            try:
                proc.wait(timeout=_POLL)
                break
            except subprocess.TimeoutExpired:
                if not ctx.cancelled:
                    if time.monotonic() < deadline:
                        continue
                    timed_out = True
                _kill_group(proc.pid)
                proc.wait()
                break
    finally:
        # Background children left behind would keep the pipes open and run unowned.
        _kill_group(proc.pid)
        out.join(_DRAIN_GRACE)
        err.join(_DRAIN_GRACE)
    ctx.raise_if_cancelled()
    result = {
        "exit_code": proc.returncode,
        "stdout": out.text(),
        "stderr": err.text(),
        "timed_out": timed_out,
        "truncated": out.truncated or err.truncated,
    }
    return CallToolResult(
        json.dumps(result, ensure_ascii=False),
        structured_content=result,
        is_error=timed_out or proc.returncode != 0,
    )


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


class _Drain:
    """Read a pipe to its end in a thread, keeping only the first ``limit`` bytes (the
    rest is read and dropped so that the child never blocks on a full pipe)."""

    def __init__(self, stream: IO[bytes], limit: int) -> None:
        self._stream = stream
        self._limit = limit
        self._data = bytearray()
        self.truncated = False
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        fd = self._stream.fileno()
        while chunk := os.read(fd, 65536):
            room = self._limit - len(self._data)
            if room > 0:
                self._data += chunk[:room]
            if len(chunk) > room:
                self.truncated = True

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self._stream.close()

    def text(self) -> str:
        return bytes(self._data).decode("utf-8", errors="replace")


def _error(message: str, kind: str) -> CallToolResult:
    return CallToolResult(message, structured_content={"error": kind}, is_error=True)
