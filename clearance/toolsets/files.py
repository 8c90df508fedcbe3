"""Workspace file tools: read, write, move, list and search files under one root.

Every path argument is a declared ``path`` fact (rule R11): the pipeline resolves it once,
under the root, before any guardrail or policy sees it (``docs/notes.md -> ../.env`` is
decided, asked and journaled as ``.env``), and the handler receives that canonical path.
The handlers open it through :class:`~clearance.guardrails.PathScope` without resolving it
again (``follow_symlinks=False``): a symlink swapped in after the check is refused, not
followed, so the file opened is the file that was allowed. Protected segments (``.git``)
and protected files (the journal and grant store, when they sit in the workspace) are
refused on the canonical path, whatever spelling or link led to them. Run the
``PathScope`` guardrail as well (:func:`files_guardrail`) for a second, independent check.

Expected failures (a missing file, a refused path, a bad regex) come back as
``CallToolResult(..., is_error=True)`` with a message the model can act on.

Example::

    registry = ToolRegistry()
    register_files(registry, "/srv/workspace")          # files.read_file, files.write_file, ...
    harness = Harness(registry, argument_guardrails=[files_guardrail("/srv/workspace")], ...)
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import re2  # type: ignore[import-untyped]

from clearance.facts.paths import PathFact
from clearance.guardrails.paths import PathScope, PathScopeError
from clearance.harness.tools import CallContext, CallToolResult, Tool, ToolRegistry

__all__ = ["files_guardrail", "files_tools", "register_files"]

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
_BINARY_SNIFF = 8192

_PATH = {"type": "string", "minLength": 1, "maxLength": 4096}


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


PROTECTED: tuple[str, ...] = (".git", ".gitconfig")
"""Path segments the bundled mutating file tools refuse by default."""

SQLITE_SIDE_FILES: tuple[str, ...] = ("", "-wal", "-shm", "-journal", "-starts", ".lock")
"""Suffixes of the files SQLite (and clearance's journal) keep beside a database."""


class _Guard:
    """What the handlers refuse beyond the root: protected segments for writes and moves;
    protected files (with their SQLite side files) for every tool; read-only paths (files
    or directories) for writes and moves. A write or move of a directory above a protected
    or read-only path is refused too: it would carry them away."""

    __slots__ = ("files", "read_only", "scope", "segments")

    def __init__(
        self,
        scope: PathScope,
        segments: Sequence[str],
        files: Sequence[str | os.PathLike[str]],
        read_only: Sequence[str | os.PathLike[str]] = (),
    ) -> None:
        self.scope = scope
        self.segments = frozenset(s.lower() for s in segments)
        self.files = frozenset(
            os.path.realpath(os.fspath(f)) + suffix for f in files for suffix in SQLITE_SIDE_FILES
        )
        self.read_only = frozenset(os.path.realpath(os.fspath(p)) for p in read_only)

    def refused(self, tool: str, path: str, *, mutating: bool) -> CallToolResult | None:
        """An error result when ``path`` (canonical: no symlink, no '..' on it) is
        protected; None when the tool may go on."""
        if mutating and (segment := _protected(path, self.segments)) is not None:
            return _error(f"{tool}: {segment!r} is protected and cannot be changed", "protected")
        if not self.files and not self.read_only:
            return None
        target = self.absolute(path)
        if target in self.files:
            return _error(
                f"{tool}: {path!r} is clearance's own journal or grant store", "protected"
            )
        if mutating:
            if any(_within(target, p) for p in self.read_only):
                return _error(
                    f"{tool}: {path!r} is clearance's configuration or policies; "
                    "it cannot be changed from here",
                    "protected",
                )
            if any(_within(p, target) for p in (*self.files, *self.read_only)):
                return _error(
                    f"{tool}: {path!r} holds clearance's own journal, grants or "
                    "configuration; it cannot be changed from here",
                    "protected",
                )
        return None

    def absolute(self, path: str) -> str:
        root = str(self.scope.root)
        return root if path in ("", ".") else os.path.normpath(os.path.join(root, path))


def _within(path: str, directory: str) -> bool:
    """Whether ``path`` is ``directory`` or below it (both absolute and normalized)."""
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def files_tools(
    root: str | os.PathLike[str],
    *,
    max_read_bytes: int = 1_000_000,
    max_entries: int = 1000,
    max_results: int = 200,
    max_search_file_bytes: int = 2_000_000,
    protected: Sequence[str] = PROTECTED,
    protected_files: Sequence[str | os.PathLike[str]] = (),
    read_only_paths: Sequence[str | os.PathLike[str]] = (),
) -> list[Tool]:
    """The workspace file tools, confined to ``root``.

    ``read_file`` (read-only), ``write_file`` (mutating), ``move_file`` (mutating),
    ``list_dir`` (read-only) and ``search`` (read-only). Register them with
    ``registry.register("files", files_tools(root))`` or :func:`register_files`.

    Args:
        root: the workspace directory; it must exist.
        max_read_bytes: ``read_file`` returns at most this many bytes of a file.
        max_entries: ``list_dir`` lists at most this many entries.
        max_results: ``search`` returns at most this many matching lines.
        max_search_file_bytes: ``search`` skips files larger than this.
        protected: path segments the mutating tools never write, move or move away
            (default ``.git`` and ``.gitconfig``: a planted git config or hook makes an
            allow-listed ``git status`` run any program).
        protected_files: files no tool reads, writes, moves or searches, with their
            SQLite side files (``-wal``, ``-shm``, ``-journal``, ``-starts``, ``.lock``):
            the journal and grant store, when they live inside the workspace.
        read_only_paths: files and directories the tools may read but never write or
            move: clearance's configuration file and policy directories, when they
            live inside the workspace (an agent that rewrites them decides its next run).
            A directory above any of these (or above a protected file) is not moved.

    Raises:
        ConfigError: ``root`` is not an existing directory.
    """
    scope = PathScope(root)
    guard = _Guard(scope, protected, protected_files, read_only_paths)
    path_fact = PathFact(scope.root)
    entry_fact = PathFact(scope.root, follow_final=False)
    return [
        Tool(
            "read_file",
            _read_file(guard, max_read_bytes),
            description=(
                "Read a UTF-8 text file in the workspace. `path` is relative to the workspace "
                "root. Optional `offset` (lines to skip) and `limit` (lines to return) read "
                "part of a long file."
            ),
            input_schema=_schema(
                {
                    "path": _PATH,
                    "offset": {"type": "integer", "minimum": 0},
                    "limit": {"type": "integer", "minimum": 1},
                },
                ["path"],
            ),
            read_only=True,
            annotations={"readOnlyHint": True},
            root=scope.root,
            facts={"/path": path_fact},
        ),
        Tool(
            "write_file",
            _write_file(guard),
            description=(
                "Write a UTF-8 text file in the workspace, replacing it if it exists. Missing "
                "parent directories are created."
            ),
            input_schema=_schema(
                {"path": _PATH, "content": {"type": "string"}}, ["path", "content"]
            ),
            annotations={"readOnlyHint": False, "destructiveHint": True},
            root=scope.root,
            facts={"/path": path_fact},
        ),
        Tool(
            "move_file",
            _move_file(guard),
            description=(
                "Move or rename a file or directory inside the workspace. The destination must "
                "not exist; missing parent directories are created."
            ),
            input_schema=_schema(
                {"source": _PATH, "destination": _PATH}, ["source", "destination"]
            ),
            annotations={"readOnlyHint": False, "destructiveHint": False},
            root=scope.root,
            # The entries themselves move (a symlink stays a symlink): their parents are
            # resolved, their own names are kept.
            facts={"/source": entry_fact, "/destination": entry_fact},
        ),
        Tool(
            "list_dir",
            _list_dir(guard, max_entries),
            description=(
                "List a directory in the workspace (default: the root). Directories end with "
                "'/'; files show their size in bytes."
            ),
            input_schema=_schema({"path": _PATH}, []),
            read_only=True,
            annotations={"readOnlyHint": True},
            root=scope.root,
            facts={"/path": path_fact},
        ),
        Tool(
            "search",
            _search(guard, max_results, max_search_file_bytes),
            description=(
                "Search text files under a directory of the workspace (default: the root) for "
                "`query`, a plain substring unless `regex` is true (RE2 syntax: no "
                "backreferences or lookaround; \\w, \\d and \\b are ASCII). Returns "
                "'path:line: text' for each matching line. Binary files, symlinks and .git "
                "are skipped."
            ),
            input_schema=_schema(
                {
                    "query": {"type": "string", "minLength": 1, "maxLength": 1000},
                    "path": _PATH,
                    "regex": {"type": "boolean"},
                    "ignore_case": {"type": "boolean"},
                },
                ["query"],
            ),
            read_only=True,
            annotations={"readOnlyHint": True},
            root=scope.root,
            facts={"/path": path_fact},
        ),
    ]


def register_files(
    registry: ToolRegistry,
    root: str | os.PathLike[str],
    namespace: str = "files",
    **options: Any,
) -> list[Tool]:
    """Register the workspace file tools under ``namespace`` (``files.read_file`` ...).

    ``options`` are those of :func:`files_tools`. Returns the registered tools.
    """
    return registry.register(namespace, files_tools(root, **options))


def files_guardrail(root: str | os.PathLike[str], namespace: str = "files") -> PathScope:
    """The :class:`PathScope` guardrail matching these tools: every path argument
    (``/path``, ``/source``, ``/destination``) of ``namespace.*`` stays inside ``root``."""
    return PathScope(root, tools=f"{namespace}.*", fields=["/path", "/source", "/destination"])


# --- handlers ----------------------------------------------------------------------------

Handler = Callable[[dict[str, Any], CallContext], CallToolResult]


def _read_file(guard: _Guard, max_bytes: int) -> Handler:
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
            return _failure("read_file", path, exc)
        truncated = len(data) > max_bytes
        data = data[:max_bytes]
        if b"\x00" in data[:_BINARY_SNIFF]:
            return _error(f"read_file: {path!r} looks like a binary file; it reads text", "binary")
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


def _protected(path: str, protected: frozenset[str]) -> str | None:
    """The protected segment ``path`` touches, if any (compared case-insensitively: some
    file systems fold case)."""
    for segment in path.replace("\\", "/").split("/"):
        if segment.lower() in protected:
            return segment
    return None


def _write_file(guard: _Guard) -> Handler:
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
            return _failure("write_file", path, exc)
        return CallToolResult(
            f"wrote {len(data):,} bytes to {path}",
            structured_content={"path": path, "bytes": len(data)},
        )

    return write_file


def _move_file(guard: _Guard) -> Handler:
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
                    if _exists(dst_name, dst_fd):
                        raise FileExistsError(errno.EEXIST, "exists", destination)
                    os.rename(src_name, dst_name, src_dir_fd=src_fd, dst_dir_fd=dst_fd)
        except OSError as exc:
            return _failure("move_file", current, exc)
        return CallToolResult(
            f"moved {source} to {destination}",
            structured_content={"source": source, "destination": destination},
        )

    return move_file


def _list_dir(guard: _Guard, max_entries: int) -> Handler:
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
            return _failure("list_dir", path, exc)
        lines = [_entry_line(e) for e in entries]
        if truncated:
            lines.append(f"[truncated: only the first {max_entries:,} entries are listed]")
        text = "\n".join(lines) if lines else "(empty directory)"
        return CallToolResult(
            text, structured_content={"path": path, "entries": entries, "truncated": truncated}
        )

    return list_dir


def _search(guard: _Guard, max_results: int, max_file_bytes: int) -> Handler:
    def skipped(rel: str) -> bool:
        return bool(guard.files) and guard.absolute(rel) in guard.files

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
            return _failure("search", path, exc)
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
            return _error(
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
        return _error(
            f"search: `query` uses {name} ({detail}), which this search does not support: "
            "it matches with RE2, in linear time, without backreferences, lookaround, "
            "atomic groups or possessive quantifiers",
            "unsupported_regex",
        )
    return _error(f"search: `query` is not a valid regular expression: {detail}", "bad_regex")


def _unsupported(query: str, detail: str) -> str | None:
    """The Perl construct RE2 refused ``query`` for, if that is why (else ``None``)."""
    if "(?P=" in query and "(?P" in detail:  # RE2 names only '(?P' for '(?P=name)'
        return "a backreference"
    for problem, name in _UNSUPPORTED:
        if problem.search(detail):
            return name
    return None


# --- helpers -----------------------------------------------------------------------------


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
    if len(data) > max_bytes or b"\x00" in data[:_BINARY_SNIFF]:
        return None
    return data.decode("utf-8", errors="replace")


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


def _exists(name: str, dir_fd: int) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _error(message: str, kind: str) -> CallToolResult:
    return CallToolResult(message, structured_content={"error": kind}, is_error=True)


def _failure(tool: str, path: str, exc: OSError) -> CallToolResult:
    """A domain error the model can act on, for the failures a file tool expects."""
    if isinstance(exc, PathScopeError):
        return _error(f"{tool}: path {exc.path!r} is refused: {exc.reason}", "refused")
    if isinstance(exc, FileNotFoundError):
        return _error(f"{tool}: no such file or directory: {path!r}", "not_found")
    if isinstance(exc, IsADirectoryError):
        return _error(f"{tool}: {path!r} is a directory", "is_a_directory")
    if isinstance(exc, NotADirectoryError):
        return _error(
            f"{tool}: {path!r} (or one of its parents) is not a directory", "not_a_directory"
        )
    if isinstance(exc, FileExistsError):
        return _error(f"{tool}: {path!r} already exists", "exists")
    if isinstance(exc, PermissionError):
        return _error(f"{tool}: permission denied: {path!r}", "permission_denied")
    reason = exc.strerror or type(exc).__name__
    return _error(f"{tool}: {path!r}: {reason}", "os_error")
