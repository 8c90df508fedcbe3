"""The long-running processes of ``process.start``, per session: each in its own process
group, its output kept in a ring buffer, stopped at the end of its lifetime, with its
session, or when the harness goes.

A :class:`ProcessTable` holds the processes of every session of one toolset. A process is
found by its session and its id together: an id is 128 random bits, and an id of another
session is not found (it reads as unknown, so that nothing tells a session that another
one's process exists).

A harness that dies without closing (``SIGKILL``, a crash) cannot stop its processes: a
**watchdog**, a small process of the table's own started with the first process, in a
session of its own, holds the reading end of a pipe and is told each process group as it
starts and stops. When the pipe closes (the harness is gone, however it went), it
terminates the groups still running, and kills them after the grace period.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from secrets import token_hex
from typing import IO

from clearance.toolsets._shell_process import spawn

__all__ = [
    "Output",
    "ProcessLimits",
    "ProcessTable",
    "Ring",
    "RunningProcess",
    "Watchdog",
    "stop_all",
]

log = logging.getLogger("clearance")

_SLICE = 0.05  # seconds between checks for cancellation while waiting
_DRAIN_GRACE = 2.0  # seconds to wait for the output reader once the process group is gone


@dataclass(frozen=True, slots=True)
class ProcessLimits:
    """What one toolset's processes may hold (each validated when built)."""

    max_processes: int = 4
    """Processes one session may hold at once (running, or ended and not yet stopped)."""
    max_output: int = 1_000_000
    """Bytes of output kept per process: a ring buffer, the oldest bytes dropped first."""
    lifetime: float = 3600.0
    """Seconds a process may run; then it is stopped as by ``process.stop``."""
    grace: float = 5.0
    """Seconds between the terminate and the kill signal when a process is stopped."""
    max_read: int = 64_000
    """The most bytes one ``process.read`` returns."""
    max_wait: float = 30.0
    """The most seconds one ``process.read`` waits for output."""

    def __post_init__(self) -> None:
        for name in ("max_processes", "max_output", "max_read"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, not {value!r}")
        for name in ("lifetime", "grace", "max_wait"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ValueError(f"{name} must be a positive number of seconds, not {value!r}")


@dataclass(frozen=True, slots=True)
class Output:
    """What one read returns."""

    data: bytes
    dropped: int
    """Bytes that left the ring buffer before they were read."""
    more: bool
    """More output is waiting (the read was cut at its byte cap)."""


class Ring:
    """The last ``limit`` bytes of a stream, and how many were written in all."""

    __slots__ = ("_data", "limit", "total")

    def __init__(self, limit: int) -> None:
        self._data = bytearray()
        self.limit = limit
        self.total = 0

    def append(self, chunk: bytes) -> None:
        self._data += chunk
        self.total += len(chunk)
        excess = len(self._data) - self.limit
        if excess > 0:
            del self._data[:excess]

    def take(self, offset: int, cap: int, final: bool) -> tuple[Output, int]:
        """What a reader at ``offset`` reads (at most ``cap`` bytes) and its next offset.
        Unless the stream is ``final`` (ended) and all of it read, a UTF-8 character cut
        at the end is left for the next read (but for one longer than ``cap``, so that
        reads move on)."""
        start = self.total - len(self._data)
        dropped = max(start - offset, 0)
        begin = max(offset, start) - start
        data = bytes(self._data[begin : begin + cap])
        end = start + begin + len(data)
        more = end < self.total
        if more or not final:
            keep = _complete_utf8(data)
            if keep == 0 and len(data) == cap:
                keep = cap
            end -= len(data) - keep
            data = data[:keep]
            more = end < self.total
        return Output(data, dropped, more), end


def _complete_utf8(data: bytes) -> int:
    """The length of ``data`` without a UTF-8 sequence cut at its end (the next read
    starts with the rest of it)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte < 0x80:
            return len(data)
        if byte >= 0xC0:  # a lead byte: is its sequence whole?
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return len(data) if back >= need else len(data) - back
    return len(data)


class RunningProcess:
    """One started process: its group, its output ring, its stdin, its lifetime timer."""

    def __init__(
        self,
        process_id: str,
        command: str,
        proc: subprocess.Popen[bytes],
        limits: ProcessLimits,
        watchdog: Watchdog | None = None,
    ) -> None:
        self.id = process_id
        self.command = command
        """The canonical command it was started with (what the policy decided on)."""
        self.pid = proc.pid
        self._proc = proc
        self._limits = limits
        self._watchdog = watchdog
        self._ring = Ring(limits.max_output)
        self._cursor = 0
        self._changed = threading.Condition()
        self._eof = False
        self._stopping = threading.Lock()
        self.ended: str | None = None
        """Why it ended when clearance ended it: ``"stopped"``, ``"lifetime"``."""
        self.started = time.monotonic()
        assert proc.stdout is not None and proc.stdin is not None
        os.set_blocking(proc.stdin.fileno(), False)
        self._reader = threading.Thread(
            target=self._drain, args=(proc.stdout,), daemon=True, name=f"process {process_id}"
        )
        self._reader.start()
        self._timer = threading.Timer(limits.lifetime, self.stop, kwargs={"reason": "lifetime"})
        self._timer.daemon = True
        self._timer.start()

    def _drain(self, stream: IO[bytes]) -> None:
        fd = stream.fileno()
        try:
            while chunk := os.read(fd, 65536):
                with self._changed:
                    self._ring.append(chunk)
                    self._changed.notify_all()
        except OSError:
            pass
        finally:
            stream.close()
            with self._changed:
                self._eof = True
                self._changed.notify_all()
        # The pipe is at its end: the process has closed its output, most often by
        # exiting; wait for its end (without reaping it), so that a read stops waiting.
        with contextlib.suppress(ChildProcessError):
            os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
        with self._changed:
            self._changed.notify_all()

    @property
    def exit_code(self) -> int | None:
        """The exit code (negative: the signal that ended it); None while it runs.

        A process that ended is not reaped before it is stopped: until then its number,
        and so its process group's, stays taken, so the group signals of :meth:`stop`
        and of the watchdog never reach another group that was given the number since
        (numbers wrap at 32,768 on many systems; a process may end an hour before it is
        stopped)."""
        if self._proc.returncode is not None:
            return self._proc.returncode
        try:
            ended = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:  # reaped meanwhile by stop()
            return self._proc.returncode
        if ended is None:
            return None
        return ended.si_status if ended.si_code == os.CLD_EXITED else -ended.si_status

    def read(self, cap: int, wait: float, cancelled: Callable[[], bool]) -> Output:
        """The output written since the last read (at most ``cap`` bytes), waiting up to
        ``wait`` seconds for some when there is none and the process runs (or until
        ``cancelled()``)."""
        deadline = time.monotonic() + wait
        with self._changed:
            while (
                self._ring.total == self._cursor
                and not self._eof
                and self.exit_code is None
                and not cancelled()
            ):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(min(left, _SLICE))
            output, self._cursor = self._ring.take(self._cursor, cap, self._eof)
            return output

    def write(self, data: bytes, close: bool, timeout: float, cancelled: Callable[[], bool]) -> int:
        """Write ``data`` to the process's stdin (then close it when ``close``); returns
        the bytes written, all of them unless the process stopped reading for
        ``timeout`` seconds or the call was cancelled.

        Raises:
            BrokenPipeError: the process closed its input (or ended).
            ValueError: its input was closed before.
        """
        stdin = self._proc.stdin
        assert stdin is not None
        if stdin.closed:
            raise ValueError("its input is closed")
        fd = stdin.fileno()
        written = 0
        deadline = time.monotonic() + timeout
        while written < len(data) and not cancelled():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            _, ready, _ = select.select([], [fd], [], min(left, _SLICE))
            if ready:
                with contextlib.suppress(BlockingIOError):
                    written += os.write(fd, data[written : written + 65536])
        if close and written == len(data):
            stdin.close()
        return written

    def stop(self, reason: str = "stopped") -> int | None:
        """Terminate the process group, kill it after the grace period, and reap it;
        returns the exit code. Safe to call more than once, from any thread."""
        with self._stopping:
            self._timer.cancel()
            proc = self._proc
            # Once reaped (a stop before this one), its number may be another's: no signal.
            if proc.returncode is None:
                if self.exit_code is None:
                    self.ended = self.ended or reason
                    _signal_group(proc.pid, signal.SIGTERM)
                    deadline = time.monotonic() + self._limits.grace
                    while self.exit_code is None and time.monotonic() < deadline:
                        time.sleep(_SLICE)
                # What the process left behind in its group (a server's workers) goes too;
                # its number is still taken (not reaped yet), so the group is its own.
                _signal_group(proc.pid, signal.SIGKILL)
                if self._watchdog is not None:
                    self._watchdog.release(proc.pid)
                proc.wait()
            self._reader.join(_DRAIN_GRACE)
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
            return proc.returncode


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def stop_all(processes: Iterable[RunningProcess]) -> None:
    """Stop ``processes`` together: every group gets its terminate signal at once, so that
    closing a session waits one grace period, not one per process."""
    threads = [threading.Thread(target=p.stop, daemon=True) for p in processes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


_WATCHDOG = """
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
groups = set()
for line in sys.stdin.buffer:
    (groups.add if line[:1] == b"+" else groups.discard)(int(line[1:]))
for sig in (signal.SIGTERM, signal.SIGKILL):
    for group in groups:
        try:
            os.killpg(group, sig)
        except OSError:
            pass
    if groups and sig == signal.SIGTERM:
        time.sleep(float(sys.argv[1]))
"""
"""The watchdog: reads ``+PGID`` and ``-PGID`` lines until its input ends, then stops the
groups it holds (the harness is gone)."""


class Watchdog:
    """The process that stops a dead harness's process groups (see the module docstring)."""

    def __init__(self, grace: float) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _WATCHDOG, str(grace)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            # its own session: a Ctrl-C to the harness's terminal does not end it first
            start_new_session=True,
        )
        self._lock = threading.Lock()
        self._broken = False

    def _tell(self, line: str) -> None:
        stdin = self._proc.stdin
        with self._lock:
            if self._broken or stdin is None or stdin.closed:
                return
            try:
                stdin.write(line.encode("ascii"))
                stdin.flush()
            except OSError:
                self._broken = True
                log.warning(
                    "process: the watchdog is gone; processes are stopped with their "
                    "session, but no longer if the harness dies without closing"
                )

    def watch(self, pgid: int) -> None:
        """A process group started."""
        self._tell(f"+{pgid}\n")

    def release(self, pgid: int) -> None:
        """A process group was stopped."""
        self._tell(f"-{pgid}\n")

    def close(self) -> None:
        """End the watchdog (its input ends; it stops what it still holds)."""
        with self._lock:
            if self._proc.stdin is not None:
                with contextlib.suppress(OSError):
                    self._proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=10)


class ProcessTable:
    """The processes of every session of one toolset (see the module docstring)."""

    def __init__(self, limits: ProcessLimits) -> None:
        self.limits = limits
        self._sessions: dict[str, dict[str, RunningProcess]] = {}
        self._lock = threading.Lock()
        self._watchdog: list[Watchdog] = []
        """The watchdog, once the first process started (a list: the finalizer holds it)."""
        # When the table goes, or at interpreter exit (a harness never closed), no process
        # is left running.
        weakref.finalize(self, _shut, self._sessions, self._watchdog)

    def start(
        self,
        session_id: str,
        command: str,
        argv: list[str],
        cwd: Path,
        env: dict[str, str],
    ) -> RunningProcess | str:
        """Start ``argv`` for ``session_id``; the process, or why it did not start.

        Raises:
            OSError: the program could not be started.
        """
        with self._lock:
            held = self._sessions.setdefault(session_id, {})
            if len(held) >= self.limits.max_processes:
                return (
                    f"this session holds {len(held)} processes, the most it may "
                    f"({', '.join(held)}); stop one (process.stop) to start another"
                )
            if not self._watchdog:
                self._watchdog.append(Watchdog(self.limits.grace))
            watchdog = self._watchdog[0]
            proc = spawn(argv, cwd, env, interactive=True)
            watchdog.watch(proc.pid)
            process_id = "p_" + token_hex(16)
            running = RunningProcess(process_id, command, proc, self.limits, watchdog)
            held[process_id] = running
            return running

    def get(self, session_id: str, process_id: str) -> RunningProcess | None:
        """The process ``process_id`` of ``session_id`` (None: not one of its processes)."""
        with self._lock:
            return self._sessions.get(session_id, {}).get(process_id)

    def forget(self, session_id: str, process_id: str) -> None:
        """Drop a stopped process from its session (its slot is free again)."""
        with self._lock:
            held = self._sessions.get(session_id)
            if held is not None:
                held.pop(process_id, None)
                if not held:
                    del self._sessions[session_id]

    def close_session(self, session_id: str) -> None:
        """Stop and forget every process of ``session_id`` (the session closed)."""
        with self._lock:
            held = self._sessions.pop(session_id, {})
        stop_all(held.values())

    def close(self) -> None:
        """Stop and forget every process of every session, and end the watchdog."""
        _shut(self._sessions, self._watchdog, self._lock)


def _shut(
    sessions: dict[str, dict[str, RunningProcess]],
    watchdog: list[Watchdog],
    lock: threading.Lock | None = None,
) -> None:
    with lock or contextlib.nullcontext():
        held = [p for processes in sessions.values() for p in processes.values()]
        sessions.clear()
    stop_all(held)
    while watchdog:
        watchdog.pop().close()
