"""The shell tool's process runner: one program, in its own process group, with bounded
output and time, stopped when the call is cancelled."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import IO

from clearance.harness.tools import CallContext, CallToolResult
from clearance.toolsets._results import error_result

__all__ = ["run_process", "spawn", "start_failure"]

_POLL = 0.05  # seconds between checks for cancellation while the command runs
_DRAIN_GRACE = 2.0  # seconds to wait for output readers once the process group is gone


def run_process(
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    timeout: float,
    max_output: int,
    ctx: CallContext,
) -> CallToolResult:
    """Run ``argv`` in ``cwd`` in its own process group; kill the group after ``timeout``
    seconds or when the call is cancelled (which raises once it is gone).

    The result's JSON and ``structured_content`` hold ``exit_code``, ``stdout``,
    ``stderr`` (each cut to ``max_output`` bytes), ``timed_out`` and ``truncated``; it is
    an error result when the command failed, timed out or could not start.
    """
    try:
        proc = spawn(argv, cwd, env, interactive=False)
    except OSError as exc:
        return start_failure("run", argv[0], exc)
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


def spawn(
    argv: list[str], cwd: Path, env: dict[str, str], *, interactive: bool
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own process group (so that stopping it stops what it started)
    with no descriptor but its pipes: stdin from ``/dev/null`` and stdout and stderr apart
    for a command; for an ``interactive`` process (``process.start``) stdin a pipe and
    stderr merged into stdout, as a terminal shows them.

    Raises:
        OSError: the program could not be started.
    """
    return subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE if interactive else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if interactive else subprocess.PIPE,
        close_fds=True,
        start_new_session=True,
    )


def start_failure(verb: str, program: str, exc: OSError) -> CallToolResult:
    """The error result of a program :func:`spawn` could not start."""
    if isinstance(exc, FileNotFoundError):
        return error_result(f"{verb}: program {program!r} not found", "not_found")
    if isinstance(exc, PermissionError):
        return error_result(f"{verb}: program {program!r} is not executable", "not_executable")
    return error_result(f"{verb}: cannot start {program!r}: {exc.strerror}", "os_error")


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
