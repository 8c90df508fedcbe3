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

The tools are declared here; each concept lives in its own module: the guard of protected
paths in ``_file_guard``, the handlers that read, write, move and list in
``_file_handlers``, the search (an RE2 query and a walk that follows no symlink) in
``_file_search``, and the error results in ``_results``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from clearance.facts.patch import PatchFact
from clearance.facts.paths import PathFact
from clearance.guardrails.paths import PathScope
from clearance.harness.tools import Tool, ToolRegistry
from clearance.toolsets._file_edit import apply_patch_handler, edit_handler
from clearance.toolsets._file_guard import PROTECTED, SECRETS, SQLITE_SIDE_FILES, FileGuard
from clearance.toolsets._file_handlers import (
    Handler,
    list_dir_handler,
    move_file_handler,
    read_file_handler,
    write_file_handler,
)
from clearance.toolsets._file_search import search_handler
from clearance.toolsets._file_transaction import recover

__all__ = [
    "PROTECTED",
    "SECRETS",
    "SQLITE_SIDE_FILES",
    "Handler",
    "files_guardrail",
    "files_tools",
    "register_files",
]

_PATH = {"type": "string", "minLength": 1, "maxLength": 4096}


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


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
    secrets: Sequence[str] = SECRETS,
) -> list[Tool]:
    """The workspace file tools, confined to ``root``.

    ``read_file`` (read-only), ``write_file``, ``edit``, ``apply_patch`` and
    ``move_file`` (mutating), ``list_dir`` and ``search`` (read-only). ``edit`` and
    ``apply_patch`` change their files wholly or not at all, a crash included: building
    the tools finishes or undoes, wholly, a change a crash interrupted in ``root`` (see
    :mod:`clearance.toolsets._file_transaction`). Every path of a patch is a canonical
    fact (:class:`~clearance.facts.patch.PatchFact`). Register them with
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
        secrets: glob patterns of the workspace's secrets, which no tool reads, writes,
            moves or searches (default ``.env`` and ``.env.*`` in any directory; the
            same patterns the kernel hides from ``shell.run``'s programs, R15).

    Raises:
        ConfigError: ``root`` is not an existing directory.
    """
    scope = PathScope(root)
    guard = FileGuard(scope, protected, protected_files, read_only_paths, secrets)
    recover(scope, lambda path: guard.refused("recover", path, mutating=True) is not None)
    path_fact = PathFact(scope.root)
    entry_fact = PathFact(scope.root, follow_final=False)
    return [
        Tool(
            "read_file",
            read_file_handler(guard, max_read_bytes),
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
            write_file_handler(guard),
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
            "edit",
            edit_handler(guard, max_read_bytes),
            description=(
                "Edit a UTF-8 text file in the workspace: each of `edits` replaces its exact "
                "`old` text with `new`, in order. The old text must occur exactly once "
                "(include enough surrounding lines) unless `replace_all` is true. Nothing is "
                "written unless every edit applies."
            ),
            input_schema=_schema(
                {
                    "path": _PATH,
                    "edits": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": 100,
                        "items": _schema(
                            {
                                "old": {"type": "string", "minLength": 1},
                                "new": {"type": "string"},
                                "replace_all": {"type": "boolean"},
                            },
                            ["old", "new"],
                        ),
                    },
                },
                ["path", "edits"],
            ),
            annotations={"readOnlyHint": False, "destructiveHint": True},
            root=scope.root,
            facts={"/path": path_fact},
        ),
        Tool(
            "apply_patch",
            apply_patch_handler(guard, max_read_bytes),
            description=(
                "Apply a unified diff (as `git diff` prints it: a '--- a/PATH' and '+++ "
                "b/PATH' pair and '@@' hunks per file; /dev/null to add or delete a file; "
                "'rename from'/'rename to' to rename) to files of the workspace. Every file "
                "changes or none does; a hunk whose lines are not found fails the whole patch."
            ),
            input_schema=_schema(
                {"patch": {"type": "string", "minLength": 1, "maxLength": 4_000_000}},
                ["patch"],
            ),
            annotations={"readOnlyHint": False, "destructiveHint": True},
            root=scope.root,
            facts={"/patch": PatchFact(scope.root)},
        ),
        Tool(
            "move_file",
            move_file_handler(guard),
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
            list_dir_handler(guard, max_entries),
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
            search_handler(guard, max_results, max_search_file_bytes),
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
