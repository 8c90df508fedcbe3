"""The handlers of the file tools that read, write, move and list one path.

Each handler gets the canonical path the pipeline resolved (rule R11), asks the
:class:`~clearance.toolsets._file_guard.FileGuard` whether it is protected, and opens it
through the guard's :class:`~clearance.guardrails.PathScope` without following a symlink.
The search handler is in ``_file_search``.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from typing import Any

from clearance.harness.tools import CallContext, CallToolResult
from clearance.toolsets._file_guard import FileGuard
from clearance.toolsets._results import error_result, file_failure

__all__ = [
    "BINARY_SNIFF",
    "Handler",
    "exists_at",
    "list_dir_handler",
    "move_file_handler",
    "read_file_handler",
    "write_file_handler",
]

BINARY_SNIFF = 8192
"""Bytes at the start of a file looked at for a NUL: a file with one is binary, not text."""

Handler = Callable[[dict[str, Any], CallContext], CallToolResult]
"""A file tool's handler: ``(arguments, ctx) -> CallToolResult``, run in a worker thread."""


def read_file_handler(guard: FileGuard, max_bytes: int) -> Handler:
    """``read_file``: the text of a file, or the lines ``offset`` and ``limit`` choose."""

    def read_file(arguments: dict[str, Any], ctx: CallContext) -> CallToolResult:
        path: str = arguments["path"]
        offset: int = arguments.get("offset", 0)
        limit: int | None = arguments.get("limit")
        if (refused := guard.refused("read_file", path, mutating=False)) is not None:
            return refused
        try:
            with guard.scope.open(path, "rb", follow_symlinks=False) as f:
                data = f.read(max_bytes + 1)
        except OSError as exc:
            return file_failure("read_file", path, exc)
        truncated = len(data) > max_bytes
        data = data[:max_bytes]
        if b"\x00" in data[:BINARY_SNIFF]:
            return error_result(
                f"read_file: {path!r} looks like a binary file; it reads text", "binary"
            )
        text = data.decode("utf-8", errors="replace")
        lines = text.splitlines(keepends=True)
        if offset or limit is not None:
            end = None if limit is None else offset + limit
            text = "".join(lines[offset:end])
            shown = len(lines[offset:end])
        else:
            shown = len(lines)
        if truncated:
            text += f"\n[truncated: only the first {max_bytes:,} bytes were read]"
        return CallToolResult(
            text,
            structured_content={
                "path": path,
                "offset": offset,
                "lines": shown,
                "truncated": truncated,
            },
        )

    return read_file


def write_file_handler(guard: FileGuard) -> Handler:
    """``write_file``: replace a file's content, creating missing parents."""

    def write_file(arguments: dict[str, Any], ctx: CallContext) -> CallToolResult:
        path: str = arguments["path"]
        if (refused := guard.refused("write_file", path, mutating=True)) is not None:
            return refused
        # a lone surrogate (valid in JSON text, not in UTF-8) becomes "?"
        data = arguments["content"].encode("utf-8", errors="replace")
        try:
            with guard.scope.open(path, "wb", make_parents=True, follow_symlinks=False) as f:
                f.write(data)
        except OSError as exc:
            return file_failure("write_file", path, exc)
        return CallToolResult(
            f"wrote {len(data):,} bytes to {path}",
            structured_content={"path": path, "bytes": len(data)},
        )

    return write_file


def move_file_handler(guard: FileGuard) -> Handler:
    """``move_file``: move an entry (a symlink stays one) to a name that does not exist."""

    def move_file(arguments: dict[str, Any], ctx: CallContext) -> CallToolResult:
        source: str = arguments["source"]
        destination: str = arguments["destination"]
        for path in (source, destination):
            if (refused := guard.refused("move_file", path, mutating=True)) is not None:
                return refused
        current = source
        scope = guard.scope
        try:
            # The entries themselves are moved (a symlink stays a symlink), so only their
            # parents are walked; nothing is resolved again (they are canonical).
            with scope.open_parent(source, follow_symlinks=False) as (src_fd, src_name):
                os.stat(src_name, dir_fd=src_fd, follow_symlinks=False)
                current = destination
                with scope.open_parent(destination, create=True, follow_symlinks=False) as (
                    dst_fd,
                    dst_name,
                ):
                    if exists_at(dst_name, dst_fd):
                        raise FileExistsError(errno.EEXIST, "exists", destination)
                    os.rename(src_name, dst_name, src_dir_fd=src_fd, dst_dir_fd=dst_fd)
        except OSError as exc:
            return file_failure("move_file", current, exc)
        return CallToolResult(
            f"moved {source} to {destination}",
            structured_content={"source": source, "destination": destination},
        )

    return move_file


def list_dir_handler(guard: FileGuard, max_entries: int) -> Handler:
    """``list_dir``: a directory's entries, sorted, at most ``max_entries``."""

    def list_dir(arguments: dict[str, Any], ctx: CallContext) -> CallToolResult:
        path: str = arguments.get("path", ".")
        entries: list[dict[str, Any]] = []
        truncated = False
        try:
            with guard.scope.open_dir(path, follow_symlinks=False) as fd, os.scandir(fd) as it:
                names = sorted(it, key=lambda e: e.name)
                for entry in names:
                    if len(entries) >= max_entries:
                        truncated = True
                        break
                    entries.append(_describe(entry))
        except OSError as exc:
            return file_failure("list_dir", path, exc)
        lines = [_entry_line(e) for e in entries]
        if truncated:
            lines.append(f"[truncated: only the first {max_entries:,} entries are listed]")
        text = "\n".join(lines) if lines else "(empty directory)"
        return CallToolResult(
            text, structured_content={"path": path, "entries": entries, "truncated": truncated}
        )

    return list_dir


def _describe(entry: os.DirEntry[str]) -> dict[str, Any]:
    try:
        st = entry.stat(follow_symlinks=False)
    except OSError:
        return {"name": entry.name, "type": "unknown"}
    if stat.S_ISLNK(st.st_mode):
        return {"name": entry.name, "type": "symlink"}
    if stat.S_ISDIR(st.st_mode):
        return {"name": entry.name, "type": "directory"}
    if stat.S_ISREG(st.st_mode):
        return {"name": entry.name, "type": "file", "size": st.st_size}
    return {"name": entry.name, "type": "other"}


def _entry_line(entry: dict[str, Any]) -> str:
    kind = entry["type"]
    if kind == "directory":
        return f"{entry['name']}/"
    if kind == "file":
        return f"{entry['name']}  ({entry['size']:,} bytes)"
    return f"{entry['name']}  ({kind})"


def exists_at(name: str, dir_fd: int) -> bool:
    """Whether the entry ``name`` of the directory ``dir_fd`` exists (a link counts as
    itself, not what it points to)."""
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True
