"""What the file tools refuse beyond their root: protected segments, protected files and
read-only paths, checked on the canonical path (see :mod:`clearance.toolsets.files`)."""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Sequence

from clearance._secrets import SECRETS
from clearance.guardrails.paths import PathScope
from clearance.harness.approvers import approvers_directory
from clearance.harness.tools import CallToolResult
from clearance.toolsets._results import error_result

__all__ = [
    "LOG_NAME",
    "PROTECTED",
    "SECRETS",
    "SQLITE_SIDE_FILES",
    "FileGuard",
    "secret_pattern",
]

PROTECTED: tuple[str, ...] = (".git", ".gitconfig")
"""Path segments the bundled mutating file tools refuse by default."""

SQLITE_SIDE_FILES: tuple[str, ...] = ("", "-wal", "-shm", "-journal", "-starts", ".lock")
"""Suffixes of the files SQLite (and clearance's journal) keep beside a database."""

LOG_NAME = re.compile(r"^\.clearance-patch-([0-9a-f]{12})\.(json|commit)$")
"""The log and marker of an ``edit`` or ``apply_patch`` in progress, at the workspace's
top (:mod:`clearance.toolsets._file_transaction`): the mutating tools refuse them (a
planted log would have the next start rename files)."""


def secret_pattern(globs: Sequence[str]) -> tuple[re.Pattern[str] | None, re.Pattern[str] | None]:
    """``(names, paths)``: one expression for the patterns without ``/`` (matched against
    a name) and one for those with ``/`` (matched against the path from the workspace);
    None where there are none."""

    def one(patterns: list[str]) -> re.Pattern[str] | None:
        if not patterns:
            return None
        return re.compile("|".join(f"(?:{fnmatch.translate(g)})" for g in patterns))

    return one([g for g in globs if "/" not in g]), one([g for g in globs if "/" in g])


class FileGuard:
    """What the handlers refuse beyond the root: protected segments for writes and moves;
    protected files (with their SQLite side files) and secrets (:data:`SECRETS`) for every
    tool; read-only paths (files or directories) for writes and moves. A write or move of a
    directory above a protected or read-only path is refused too: it would carry them away."""

    __slots__ = (
        "_secret_names",
        "_secret_paths",
        "files",
        "keys",
        "read_only",
        "scope",
        "segments",
    )

    def __init__(
        self,
        scope: PathScope,
        segments: Sequence[str],
        files: Sequence[str | os.PathLike[str]],
        read_only: Sequence[str | os.PathLike[str]] = (),
        secrets: Sequence[str] = (),
    ) -> None:
        self._secret_names, self._secret_paths = secret_pattern(secrets)
        self.scope = scope
        self.segments = frozenset(s.lower() for s in segments)
        self.files = frozenset(
            os.path.realpath(os.fspath(f)) + suffix for f in files for suffix in SQLITE_SIDE_FILES
        )
        self.read_only = frozenset(os.path.realpath(os.fspath(p)) for p in read_only)
        self.keys = os.path.realpath(approvers_directory())
        """The approvers' keys (rule R13): never read, written or moved, wherever the
        workspace is (a workspace that is the home directory holds them)."""

    def refused(self, tool: str, path: str, *, mutating: bool) -> CallToolResult | None:
        """An error result when ``path`` (canonical: no symlink, no '..' on it) is
        protected; None when the tool may go on."""
        if mutating and (segment := _protected(path, self.segments)) is not None:
            return error_result(
                f"{tool}: {segment!r} is protected and cannot be changed", "protected"
            )
        if mutating and LOG_NAME.match(path) is not None:
            return error_result(
                f"{tool}: {path!r} is the log of a change in progress; it cannot be changed",
                "protected",
            )
        if self.secret(path):
            return error_result(
                f"{tool}: {path!r} is a secret of the workspace; no tool reads or writes it",
                "protected",
            )
        target = self.absolute(path)
        if _within(target, self.keys) or (mutating and _within(self.keys, target)):
            return error_result(
                f"{tool}: {path!r} holds the approvers' keys; no tool reads or changes them",
                "protected",
            )
        if not self.files and not self.read_only:
            return None
        if target in self.files:
            return error_result(
                f"{tool}: {path!r} is clearance's own journal or grant store", "protected"
            )
        if mutating:
            if any(_within(target, p) for p in self.read_only):
                return error_result(
                    f"{tool}: {path!r} is clearance's configuration or policies; "
                    "it cannot be changed from here",
                    "protected",
                )
            if any(_within(p, target) for p in (*self.files, *self.read_only)):
                return error_result(
                    f"{tool}: {path!r} holds clearance's own journal, grants or "
                    "configuration; it cannot be changed from here",
                    "protected",
                )
        return None

    def secret(self, path: str) -> bool:
        """Whether the canonical ``path`` is one of the workspace's secrets."""
        if path in ("", "."):
            return False
        names, paths = self._secret_names, self._secret_paths
        name = path.rsplit("/", 1)[-1]
        return bool(
            (names is not None and names.match(name) is not None)
            or (paths is not None and paths.match(path) is not None)
        )

    def absolute(self, path: str) -> str:
        root = str(self.scope.root)
        return root if path in ("", ".") else os.path.normpath(os.path.join(root, path))


def _within(path: str, directory: str) -> bool:
    """Whether ``path`` is ``directory`` or below it (both absolute and normalized)."""
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _protected(path: str, protected: frozenset[str]) -> str | None:
    """The protected segment ``path`` touches, if any (compared case-insensitively: some
    file systems fold case)."""
    for segment in path.replace("\\", "/").split("/"):
        if segment.lower() in protected:
            return segment
    return None
