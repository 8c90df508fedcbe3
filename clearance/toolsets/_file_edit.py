"""The handlers of ``files.edit`` and ``files.apply_patch``: change files wholly or not at all.

Both compute every new content first (nothing on disk changes while an old text is not
found, a hunk does not apply, or a path is refused), then commit through a
:class:`~clearance.toolsets._file_transaction.Transaction`: new contents are written to
temporary files beside their targets, then put in place by renames, each one undone if a
later one fails, and a crash in the middle is finished or undone wholly at the next start
(its log is read by :func:`~clearance.toolsets._file_transaction.recover`).

Paths are canonical (the ``path`` and ``patch`` facts, rule R11) and opened from their
directory's descriptor without following a link; the
:class:`~clearance.toolsets._file_guard.FileGuard` refuses protected paths first.
"""

from __future__ import annotations

import os
import stat
from typing import Any

from clearance.facts.base import FactError
from clearance.facts.patch import FilePatch, Hunk, parse_patch
from clearance.guardrails.paths import PathScope
from clearance.harness.tools import CallContext, CallToolResult
from clearance.toolsets._file_guard import FileGuard
from clearance.toolsets._file_handlers import BINARY_SNIFF, Handler
from clearance.toolsets._file_transaction import Change, Transaction
from clearance.toolsets._results import error_result, file_failure

__all__ = ["apply_patch_handler", "edit_handler"]


class _Refused(Exception):
    """A change that cannot be made (the message is for the model), before any write."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


def _read_text(scope: PathScope, path: str, tool: str, max_bytes: int) -> tuple[str, int]:
    """The UTF-8 text of the regular file ``path`` and its mode.

    Raises:
        _Refused: binary, not UTF-8, or too large.
        OSError: it cannot be opened (missing, a link, a directory...).
    """
    with scope.open(path, "rb", follow_symlinks=False) as f:
        mode = os.fstat(f.fileno()).st_mode
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise _Refused(f"{tool}: {path!r} is larger than {max_bytes:,} bytes", "too_large")
    if b"\x00" in data[:BINARY_SNIFF]:
        raise _Refused(f"{tool}: {path!r} looks like a binary file", "binary")
    try:
        return data.decode("utf-8"), stat.S_IMODE(mode)
    except UnicodeDecodeError:
        raise _Refused(f"{tool}: {path!r} is not UTF-8 text", "not_text") from None


def _ending(text: str) -> str:
    """The line ending a file uses (that of its first line; ``\\n`` when it has none)."""
    first = text.find("\n")
    return "\r\n" if first > 0 and text[first - 1] == "\r" else "\n"


def _apply_hunks(text: str, hunks: tuple[Hunk, ...], path: str) -> str:
    """``text`` with ``hunks`` applied: each at its line when its old lines are there,
    else where they occur exactly once after the previous hunk.

    Raises:
        _Refused: a hunk's old lines are not found exactly once.
    """
    ending = _ending(text)
    lines = text.splitlines(keepends=True)
    bare = [line.rstrip("\r\n") for line in lines]
    out: list[str] = []
    at = 0
    for number, hunk in enumerate(hunks, 1):
        old = [t for t, _ in hunk.old]
        expected = max(hunk.old_start - 1, 0) if old else hunk.old_start
        n = len(old)
        if at <= expected <= len(bare) and bare[expected : expected + n] == old:
            start = expected
        else:
            found = [k for k in range(at, len(bare) - n + 1) if bare[k : k + n] == old]
            if len(found) != 1 or not old:
                where = "not found" if not found else f"found {len(found)} times"
                raise _Refused(
                    f"apply_patch: hunk {number} of {path!r} does not apply (its old lines are "
                    f"{where}); read the file again and make a new patch",
                    "does_not_apply",
                )
            start = found[0]
        out += lines[at:start]
        # Context lines keep the file's own text; added lines take its line ending.
        k = start
        for op, line_text, newline in hunk.lines:
            if op == " ":
                out.append(lines[k])
                k += 1
            elif op == "-":
                k += 1
            else:
                out.append(line_text + (ending if newline else ""))
        at = start + n
    out += lines[at:]
    return "".join(out)


def edit_handler(guard: FileGuard, max_bytes: int) -> Handler:
    """``edit``: replace exact strings in one file, all of them or none."""

    def edit(arguments: dict[str, Any], ctx: CallContext) -> CallToolResult:
        path: str = arguments["path"]
        edits: list[dict[str, Any]] = arguments["edits"]
        if (refused := guard.refused("edit", path, mutating=True)) is not None:
            return refused
        try:
            text, mode = _read_text(guard.scope, path, "edit", max_bytes)
            replaced = 0
            for number, change in enumerate(edits, 1):
                old, new = change["old"], change["new"]
                count = text.count(old)
                if count == 0:
                    raise _Refused(
                        f"edit: edit {number}: the old text is not in {path!r} (it must match "
                        "exactly, spaces and line breaks included)",
                        "not_found",
                    )
                if count > 1 and not change.get("replace_all", False):
                    raise _Refused(
                        f"edit: edit {number}: the old text is in {path!r} {count} times; give "
                        "more context so that it is unique, or set replace_all",
                        "ambiguous",
                    )
                text = text.replace(old, new)
                replaced += count
            Transaction(guard.scope).commit(
                [Change(path, text.encode("utf-8", errors="replace"), mode, replace=True)]
            )
        except _Refused as exc:
            return error_result(str(exc), exc.kind)
        except OSError as exc:
            return file_failure("edit", path, exc)
        return CallToolResult(
            f"edited {path}: {replaced} replacement(s)",
            structured_content={"path": path, "replacements": replaced},
        )

    return edit


def apply_patch_handler(guard: FileGuard, max_bytes: int) -> Handler:
    """``apply_patch``: a unified diff over several files, applied wholly or not at all."""

    def apply_patch(arguments: dict[str, Any], ctx: CallContext) -> CallToolResult:
        try:
            # Canonical already (the patch fact): its paths are the ones checked.
            files = parse_patch(arguments["patch"])
        except FactError as exc:
            return error_result(f"apply_patch: {exc.reason}", "parse_error")
        for f in files:
            for path in f.paths:
                if (refused := guard.refused("apply_patch", path, mutating=True)) is not None:
                    return refused
        current = ""
        try:
            changes = []
            for f in files:
                current = f.target or f.source or ""
                changes.append(_plan(guard.scope, f, max_bytes))
            current = ""
            Transaction(guard.scope).commit(changes)
        except _Refused as exc:
            return error_result(str(exc), exc.kind)
        except OSError as exc:
            return file_failure("apply_patch", current or files[0].paths[0], exc)
        summary = [
            {"operation": f.operation, "source": f.source, "target": f.target} for f in files
        ]
        return CallToolResult(
            f"applied the patch to {len(files)} file(s)",
            structured_content={"files": summary},
        )

    return apply_patch


def _exists(scope: PathScope, path: str) -> bool:
    try:
        with scope.open_parent(path, follow_symlinks=False) as (dir_fd, name):
            os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _plan(scope: PathScope, f: FilePatch, max_bytes: int) -> Change:
    """What ``f`` changes, computed without writing.

    Raises:
        _Refused: it does not apply.
        OSError: a file cannot be read.
    """
    if f.operation == "add":
        assert f.target is not None
        if _exists(scope, f.target):
            raise _Refused(f"apply_patch: {f.target!r} already exists", "exists")
        text = "".join(t + ("\n" if nl else "") for h in f.hunks for _, t, nl in h.lines)
        return Change(f.target, text.encode("utf-8", errors="replace"), 0o666)
    assert f.source is not None
    text, mode = _read_text(scope, f.source, "apply_patch", max_bytes)
    if f.operation == "delete":
        if f.hunks:
            expected = "".join(t + ("\n" if nl else "") for h in f.hunks for _, t, nl in h.lines)
            if text.replace("\r\n", "\n") != expected:
                raise _Refused(
                    f"apply_patch: {f.source!r} is not what the patch deletes (it changed)",
                    "does_not_apply",
                )
        return Change(f.source, None)
    new = _apply_hunks(text, f.hunks, f.source) if f.hunks else text
    data = new.encode("utf-8", errors="replace")
    if f.operation == "modify":
        return Change(f.source, data, mode, replace=True)
    assert f.target is not None
    if _exists(scope, f.target):
        raise _Refused(f"apply_patch: {f.target!r} already exists", "exists")
    return Change(f.target, data, mode, remove_source=f.source)
