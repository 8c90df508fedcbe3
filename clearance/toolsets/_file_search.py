"""The file tools' search: an RE2 query, and a walk of the text files under a directory.

The walk opens each directory with ``O_NOFOLLOW`` from its parent, so it never follows a
symlink, and leaves out the protected files of the
:class:`~clearance.toolsets._file_guard.FileGuard`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from typing import Any

import re2  # type: ignore[import-untyped]

from clearance.harness.tools import CallContext, CallToolResult
from clearance.toolsets._file_guard import FileGuard
from clearance.toolsets._file_handlers import BINARY_SNIFF, Handler
from clearance.toolsets._results import error_result, file_failure

__all__ = ["search_handler"]

# getattr: the package imports where these are missing (Windows); every open below passes
# dir_fd, which such a platform refuses, and PathScope refuses to walk there first.
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW
_FILE_FLAGS = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0)
# Directories a text search has no business in: version-control internals and caches.
_SKIP_DIRS = frozenset(
    {".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", ".mypy_cache",
     ".pytest_cache", ".ruff_cache"}
)  # fmt: skip
_MAX_DEPTH = 64
_RE2_MAX_MEM = 1 << 20
_MAX_LINE_SHOWN = 240


def search_handler(guard: FileGuard, max_results: int, max_file_bytes: int) -> Handler:
    """``search``: the lines of the text files under a directory that match a query."""

    def skipped(rel: str) -> bool:
        return guard.secret(rel) or (bool(guard.files) and guard.absolute(rel) in guard.files)

    def search(arguments: dict[str, Any], ctx: CallContext) -> CallToolResult:
        query: str = arguments["query"]
        path: str = arguments.get("path", ".")
        if (refused := guard.refused("search", path, mutating=False)) is not None:
            return refused
        pattern = _Query.compile(
            query,
            regex=bool(arguments.get("regex")),
            ignore_case=bool(arguments.get("ignore_case")),
        )
        if isinstance(pattern, CallToolResult):
            return pattern
        lines: list[str] = []
        files = 0
        truncated = False
        try:
            with guard.scope.open_dir(path, follow_symlinks=False) as fd:
                base = "/".join(p for p in path.split("/") if p not in ("", ".")) or "."
                for rel, text in _text_files(fd, base, max_file_bytes, ctx, 0, skipped):
                    files += 1
                    for number, line in pattern.matching_lines(text):
                        if len(lines) >= max_results:
                            truncated = True
                            break
                        shown = (
                            line if len(line) <= _MAX_LINE_SHOWN else line[:_MAX_LINE_SHOWN] + "..."
                        )
                        lines.append(f"{rel}:{number}: {shown}")
                    if truncated:
                        break
        except OSError as exc:
            return file_failure("search", path, exc)
        matches = len(lines)
        if truncated:
            lines.append(f"[truncated: only the first {max_results:,} matches are shown]")
        text = "\n".join(lines) if lines else f"no matches in {files:,} files"
        return CallToolResult(
            text,
            structured_content={
                "matches": matches,
                "files_searched": files,
                "truncated": truncated,
            },
        )

    return search


class _Query:
    """A search query compiled by RE2, and the lines of a text it matches.

    RE2 matches in time linear in the text, whatever the pattern, and releases the GIL
    while it runs: a model's regex such as ``(a*)*b`` cannot freeze the process, as it
    did with Python's backtracking ``re`` (which held the GIL, and with it every session,
    for seconds). The price is RE2's syntax: no backreferences, lookaround, atomic groups
    or possessive quantifiers; ``\\w``, ``\\d`` and ``\\b`` are ASCII. A plain
    substring is compiled in RE2's literal mode, so ``ignore_case`` means the same in both.

    A line matches when ``line.search`` finds the query in it. Calling RE2 once per line
    costs microseconds of Python each, so a file is first searched whole, its lines
    joined by ``\\n``, with a pattern that matches there whenever some line matches:
    the substring itself, or the regex in multi-line mode (``^`` and ``$`` then match at
    each line, and a match inside a line is the same match in the whole). A regex that
    names the ends of the whole text (``\\A``, ``\\z``) or turns a flag off (which could
    turn multi-line off) gets no whole-file pass. Only files that pass are read line by
    line, so the result is exactly the lines that match.
    """

    __slots__ = ("_file", "_line")

    def __init__(self, line: Any, file: Any) -> None:
        self._line = line
        self._file = file

    @classmethod
    def compile(cls, query: str, *, regex: bool, ignore_case: bool) -> _Query | CallToolResult:
        """``query`` compiled, or the error result that says why it cannot be."""
        try:
            query.encode("utf-8")
        except UnicodeEncodeError:  # valid in JSON text, but no line of a file can hold one
            return error_result(
                "search: `query` contains a lone surrogate, which is not text", "bad_query"
            )
        options = re2.Options()
        options.literal = not regex
        options.case_sensitive = not ignore_case
        options.log_errors = False  # the model gets the error; nothing goes to stderr
        # RE2 keeps recent patterns compiled; a small budget per pattern bounds what many
        # distinct model-chosen patterns can hold (a pattern that needs more is refused).
        options.max_mem = _RE2_MAX_MEM
        try:
            line = re2.compile(query, options)
        except re2.error as exc:
            return _regex_error(query, exc)
        if not regex:
            return cls(line, line)
        if _NOT_LINE_BY_LINE.search(query):
            return cls(line, None)
        try:
            return cls(line, re2.compile(f"(?m:{query})", options))
        except re2.error:
            return cls(line, None)

    def matching_lines(self, text: str) -> Iterator[tuple[int, str]]:
        """``(line number, line)`` of each line of ``text`` the query matches."""
        lines = text.splitlines()
        if self._file is not None and self._file.search("\n".join(lines)) is None:
            return
        for number, line in enumerate(lines, 1):
            if self._line.search(line) is not None:
                yield number, line


# A regex that may match a line without matching the whole text in multi-line mode.
_NOT_LINE_BY_LINE = re2.compile(r"\\[AzQ]|\(\?[imsU]*-")
# What RE2 says about a Perl construct it lacks, and the name the model should read.
_UNSUPPORTED = (
    (re2.compile(r"invalid escape sequence: \\[1-9gk]"), "a backreference"),
    (re2.compile(r"invalid perl operator: \(\?[=!]"), "a lookahead"),
    (re2.compile(r"invalid perl operator: \(\?<[=!]"), "a lookbehind"),
    (re2.compile(r"invalid perl operator: \(\?>"), "an atomic group"),
    (re2.compile(r"bad repetition operator: [*+?}]\+"), "a possessive quantifier"),
    (re2.compile(r"invalid escape sequence: \\Z"), "\\Z (write $ for the end of the line)"),
)


def _regex_error(query: str, exc: Exception) -> CallToolResult:
    """The error result for a query RE2 refused, naming the construct when RE2 lacks it."""
    message = exc.args[0] if exc.args else "invalid"
    detail = message.decode("utf-8", "replace") if isinstance(message, bytes) else str(message)
    name = _unsupported(query, detail)
    if name is not None:
        return error_result(
            f"search: `query` uses {name} ({detail}), which this search does not support: "
            "it matches with RE2, in linear time, without backreferences, lookaround, "
            "atomic groups or possessive quantifiers",
            "unsupported_regex",
        )
    return error_result(f"search: `query` is not a valid regular expression: {detail}", "bad_regex")


def _unsupported(query: str, detail: str) -> str | None:
    """The Perl construct RE2 refused ``query`` for, if that is why (else ``None``)."""
    if "(?P=" in query and "(?P" in detail:  # RE2 names only '(?P' for '(?P=name)'
        return "a backreference"
    for problem, name in _UNSUPPORTED:
        if problem.search(detail):
            return name
    return None


def _text_files(
    dir_fd: int,
    rel: str,
    max_bytes: int,
    ctx: CallContext,
    depth: int,
    skipped: Callable[[str], bool],
) -> Iterator[tuple[str, str]]:
    """``(relative path, text)`` of the text files under ``dir_fd``, sorted, never
    following a symlink (each directory is opened with ``O_NOFOLLOW`` from its parent),
    leaving out the protected files (``skipped``)."""
    with os.scandir(dir_fd) as it:
        entries = sorted(it, key=lambda e: e.name)
    for entry in entries:
        ctx.raise_if_cancelled()
        child = entry.name if rel == "." else f"{rel}/{entry.name}"
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue  # it vanished while we looked
        if stat.S_ISDIR(st.st_mode):
            if entry.name in _SKIP_DIRS or depth >= _MAX_DEPTH:
                continue
            try:
                fd = os.open(entry.name, _DIR_FLAGS, dir_fd=dir_fd)
            except OSError:
                continue  # replaced by a symlink, or removed, since scandir
            try:
                yield from _text_files(fd, child, max_bytes, ctx, depth + 1, skipped)
            finally:
                os.close(fd)
        elif stat.S_ISREG(st.st_mode) and st.st_size <= max_bytes and not skipped(child):
            text = _read_text(entry.name, dir_fd, max_bytes)
            if text is not None:
                yield child, text


def _read_text(name: str, dir_fd: int, max_bytes: int) -> str | None:
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with open(fd, "rb", closefd=False) as f:
            data = f.read(max_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > max_bytes or b"\x00" in data[:BINARY_SNIFF]:
        return None
    return data.decode("utf-8", errors="replace")
