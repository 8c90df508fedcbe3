"""Serving stdio without threads: the process's stdin and stdout as non-blocking pipes.

The SDK's stdio transport hands every line to a worker thread (three thread hops per
call); where fd 0 and fd 1 are pipes or sockets, the gateway reads and writes them
directly instead. Elsewhere (Windows, a terminal, a regular file) it uses the SDK's.
``fcntl`` is imported only where it is used, after the platform check.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import anyio.lowlevel

__all__ = ["PipeLines", "PipeText", "process_pipes"]


@asynccontextmanager
async def process_pipes() -> AsyncIterator[tuple[PipeLines, PipeText] | None]:
    """Non-blocking readers of fd 0 and writers of fd 1, when both are pipes or sockets.

    The descriptors are duplicated for the protocol; fd 0 then reads from the null device
    and fd 1 writes to stderr until the context ends, when both are put back. Yields
    ``None`` where this cannot work (not POSIX, or a terminal or regular file).
    """
    if sys.platform == "win32" or not all(_is_pipe(fd) for fd in (0, 1)):
        yield None
        return
    import fcntl

    read_fd = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    write_fd = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
        os.dup2(2, 1)
    finally:
        os.close(null)
    os.set_blocking(read_fd, False)
    os.set_blocking(write_fd, False)
    try:
        yield PipeLines(read_fd), PipeText(write_fd)
    finally:
        for fd, std in ((read_fd, 0), (write_fd, 1)):
            with contextlib.suppress(OSError):
                os.set_blocking(fd, True)
                os.dup2(fd, std)
            os.close(fd)


def _is_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class PipeLines:
    """``async for line in ...`` over a non-blocking descriptor (UTF-8, one line each)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = b""
        self._eof = False

    def __aiter__(self) -> PipeLines:
        return self

    async def __anext__(self) -> str:
        while True:
            line, newline, rest = self._buffer.partition(b"\n")
            if newline:
                self._buffer = rest
                if line.strip():
                    return line.decode("utf-8", errors="replace")
                continue
            if self._eof:
                if self._buffer.strip():
                    line, self._buffer = self._buffer, b""
                    return line.decode("utf-8", errors="replace")
                raise StopAsyncIteration
            try:
                chunk = os.read(self._fd, 1 << 16)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
                continue
            if not chunk:
                self._eof = True
            self._buffer += chunk


class PipeText:
    """``await write(text)`` to a non-blocking descriptor; ``flush`` has nothing to do."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def write(self, text: str) -> int:
        data = memoryview(text.encode("utf-8"))
        while data:
            try:
                written = os.write(self._fd, data)
            except BlockingIOError:
                await anyio.wait_writable(self._fd)
                continue
            data = data[written:]
        return len(text)

    async def flush(self) -> None:
        await anyio.lowlevel.checkpoint()
