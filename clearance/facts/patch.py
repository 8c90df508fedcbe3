"""The ``patch`` fact: a unified diff over several files, every path canonical (rule R11).

``PatchFact(root)`` parses a unified diff (``git diff`` style, or plain ``diff -u``: a
``---``/``+++`` pair and ``@@`` hunks per file; ``diff --git``, ``new file mode``,
``deleted file mode``, ``rename from``/``rename to`` headers understood) and renders it
again in one canonical form, which is what ``files.apply_patch`` applies:

- every path is resolved under the root as :class:`~clearance.facts.paths.PathFact`
  resolves it (the file changed or added is followed through a link; the entry deleted or
  renamed is the entry itself), so ``docs/../.env`` and a link to ``.git/config`` are seen
  as what they are; a path outside the root is refused;
- the canonical text starts with a summary of every file and what happens to it (deciding
  paths first: a person approving the patch reads them before any hunk), then one
  ``diff --git`` section per file with its hunks, each hunk header counted again;
- text before the first file (a commit message, an explanation) is dropped; so is any
  earlier summary (rendered again from the files).

Refused: a patch with no file, binary patches, copies, a path touched twice (added and
deleted, or renamed onto another's source), a hunk whose counts do not match its lines,
lines that are not part of a hunk, paths that cannot be a file (the root, a control
character: :func:`~clearance.facts.paths.lexical_problem`).

The fact record (``context.facts.<argument>`` in Cedar)::

    paths       {"src/app.py", "docs/new.md", "old.txt"}   every path, sources and targets
    modified    {"src/app.py"}
    added       {"docs/new.md"}
    deleted     {"old.txt"}
    renamed     {"a.txt"}           sources of renames (targets are in added_by_rename)
    added_by_rename {"b.txt"}
    segments    {"src", "app.py", "docs", ...}   every segment of every path
    extensions  {".py", ".md", ".txt"}
    files       3
    additions   12                 lines added
    deletions   4                  lines removed

Canonicalizing the canonical text gives it back unchanged.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from clearance.facts.base import Canonical, FactError
from clearance.facts.paths import inside, lexical_problem, relative_to, resolve_real

__all__ = ["FilePatch", "Hunk", "PatchFact", "parse_patch", "render_patch"]

Operation = Literal["modify", "add", "delete", "rename"]

_ATTRIBUTES: Mapping[str, str] = {
    "paths": "Set<String>",
    "modified": "Set<String>",
    "added": "Set<String>",
    "deleted": "Set<String>",
    "renamed": "Set<String>",
    "added_by_rename": "Set<String>",
    "segments": "Set<String>",
    "extensions": "Set<String>",
    "files": "Long",
    "additions": "Long",
    "deletions": "Long",
}

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")
_SUMMARY = "# clearance patch:"
_MAX_BYTES = 4 << 20


@dataclass(frozen=True, slots=True)
class Hunk:
    """One ``@@`` hunk: where it starts in the old file, and its lines."""

    old_start: int
    new_start: int
    lines: tuple[tuple[str, str, bool], ...]
    """``(op, text, newline)``: op ``" "`` (context), ``"-"`` or ``"+"``; the text without
    its line ending; whether the line ends with a newline (``\\ No newline at end of
    file`` says it does not)."""

    @property
    def old(self) -> list[tuple[str, bool]]:
        return [(t, nl) for op, t, nl in self.lines if op != "+"]

    @property
    def new(self) -> list[tuple[str, bool]]:
        return [(t, nl) for op, t, nl in self.lines if op != "-"]


@dataclass(frozen=True, slots=True)
class FilePatch:
    """What a patch does to one file (paths canonical once the fact made them so)."""

    operation: Operation
    source: str | None
    """The path before (None for an added file)."""
    target: str | None
    """The path after (None for a deleted file)."""
    hunks: tuple[Hunk, ...] = field(default=())

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p for p in (self.source, self.target) if p is not None))

    @property
    def additions(self) -> int:
        return sum(1 for h in self.hunks for op, _, _ in h.lines if op == "+")

    @property
    def deletions(self) -> int:
        return sum(1 for h in self.hunks for op, _, _ in h.lines if op == "-")


def _strip_path(text: str, prefix: str) -> str | None:
    """The path of a ``---``/``+++`` line (None for ``/dev/null``)."""
    path = text.split("\t", 1)[0].rstrip("\r")
    if path == "/dev/null":
        return None
    if path.startswith('"'):
        raise FactError("quoted paths in a patch are not supported")
    return path[len(prefix) :] if path.startswith(prefix) else path


def parse_patch(text: str) -> list[FilePatch]:
    """The files of a unified diff, paths as written (``a/``/``b/`` prefixes removed).

    Raises:
        FactError: the text is not a patch clearance applies (see the module docstring).
    """
    if not isinstance(text, str):
        raise FactError(f"a patch must be a string, not {type(text).__name__}")
    if len(text) > _MAX_BYTES:
        raise FactError(f"the patch is longer than {_MAX_BYTES:,} characters")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    files: list[FilePatch] = []
    i = 0
    started = False
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git ") or line.startswith("--- "):
            started = True
            i, patch = _parse_file(lines, i)
            files.append(patch)
            continue
        if started and line.strip() and not line.startswith(_SUMMARY):
            raise FactError(f"line {i + 1} of the patch is not part of a file or a hunk")
        i += 1
    if not files:
        raise FactError("the patch changes no file (no '---'/'+++' or 'diff --git' header)")
    return files


def _parse_file(lines: list[str], i: int) -> tuple[int, FilePatch]:
    git_header = None
    rename_from = rename_to = None
    new_file = deleted_file = False
    old_path: str | None = None
    new_path: str | None = None
    have_paths = False
    if lines[i].startswith("diff --git "):
        git_header = lines[i][len("diff --git ") :]
        i += 1
        while i < len(lines) and not lines[i].startswith(("--- ", "diff --git ", "@@")):
            header = lines[i]
            if header.startswith("rename from "):
                rename_from = header[len("rename from ") :]
            elif header.startswith("rename to "):
                rename_to = header[len("rename to ") :]
            elif header.startswith("new file mode "):
                new_file = True
            elif header.startswith("deleted file mode "):
                deleted_file = True
            elif header.startswith(("copy from ", "copy to ")):
                raise FactError("copies in a patch are not supported")
            elif header.startswith(("GIT binary patch", "Binary files ")):
                raise FactError("binary patches are not supported")
            elif header.startswith(
                ("index ", "similarity index ", "dissimilarity index ", "old mode ", "new mode ")
            ):
                pass
            elif header.strip():
                break
            i += 1
    if i < len(lines) and lines[i].startswith("--- "):
        if i + 1 >= len(lines) or not lines[i + 1].startswith("+++ "):
            raise FactError(f"line {i + 2} of the patch should be the '+++' line")
        old_path = _strip_path(lines[i][4:], "a/")
        new_path = _strip_path(lines[i + 1][4:], "b/")
        have_paths = True
        i += 2
    hunks: list[Hunk] = []
    while i < len(lines) and lines[i].startswith("@@"):
        i, hunk = _parse_hunk(lines, i)
        hunks.append(hunk)
    if not have_paths:
        if rename_from is not None and rename_to is not None:
            old_path, new_path = rename_from, rename_to
        elif (
            git_header is not None and git_header.count(" b/") == 1 and git_header.startswith("a/")
        ):
            a, b = git_header.split(" b/")
            old_path, new_path = a[2:], b
            if new_file:
                old_path = None
            if deleted_file:
                new_path = None
        else:
            raise FactError("a file of the patch has no '---'/'+++' lines")
    elif rename_from is not None and rename_to is not None:
        old_path, new_path = rename_from, rename_to
    if old_path is None and new_path is None:
        raise FactError("a file of the patch is /dev/null on both sides")
    operation: Operation
    if old_path is None:
        operation = "add"
        if any(op != "+" for h in hunks for op, _, _ in h.lines):
            raise FactError(f"the patch adds {new_path!r} with lines that are not '+'")
    elif new_path is None:
        operation = "delete"
        if any(op != "-" for h in hunks for op, _, _ in h.lines):
            raise FactError(f"the patch deletes {old_path!r} with lines that are not '-'")
    elif old_path != new_path:
        operation = "rename"
    else:
        operation = "modify"
        if not hunks:
            raise FactError(f"the patch changes {old_path!r} with no hunk")
    return i, FilePatch(operation, old_path, new_path, tuple(hunks))


def _parse_hunk(lines: list[str], i: int) -> tuple[int, Hunk]:
    match = _HUNK.match(lines[i].rstrip("\r"))
    if match is None:
        raise FactError(f"line {i + 1} of the patch is not a hunk header ('@@ -a,b +c,d @@')")
    old_start, old_count = int(match[1]), int(match[2] if match[2] is not None else 1)
    new_start, new_count = int(match[3]), int(match[4] if match[4] is not None else 1)
    i += 1
    body: list[tuple[str, str, bool]] = []
    old_seen = new_seen = 0
    while i < len(lines) and (old_seen < old_count or new_seen < new_count):
        line = lines[i].removesuffix("\r")
        op, text = (line[:1], line[1:]) if line else (" ", "")
        if op == "\\":
            if not body:
                raise FactError(f"line {i + 1} of the patch marks no line")
            previous = body[-1]
            body[-1] = (previous[0], previous[1], False)
            i += 1
            continue
        if op not in (" ", "-", "+"):
            break
        body.append((op, text, True))
        old_seen += op != "+"
        new_seen += op != "-"
        i += 1
    if i < len(lines) and lines[i].startswith("\\") and body:
        previous = body[-1]
        body[-1] = (previous[0], previous[1], False)
        i += 1
    if old_seen != old_count or new_seen != new_count:
        raise FactError(
            f"a hunk at line {old_start} says -{old_count} +{new_count} lines but has "
            f"-{old_seen} +{new_seen}"
        )
    return i, Hunk(old_start, new_start, tuple(body))


def render_patch(files: Sequence[FilePatch]) -> str:
    """The canonical text of ``files``: the summary, then each file's section."""
    added = sum(f.additions for f in files)
    removed = sum(f.deletions for f in files)
    out = [f"{_SUMMARY} {len(files)} file(s), +{added} -{removed} lines"]
    for f in files:
        if f.operation == "rename":
            out.append(f"#   rename {f.source} -> {f.target} (+{f.additions} -{f.deletions})")
        else:
            path = f.target if f.operation != "delete" else f.source
            out.append(f"#   {f.operation} {path} (+{f.additions} -{f.deletions})")
    for f in files:
        source = f.source if f.source is not None else f.target
        target = f.target if f.target is not None else f.source
        out.append(f"diff --git a/{source} b/{target}")
        if f.operation == "add":
            out.append("new file mode 100644")
        elif f.operation == "delete":
            out.append("deleted file mode 100644")
        elif f.operation == "rename":
            out += [f"rename from {f.source}", f"rename to {f.target}"]
        out.append(f"--- a/{f.source}" if f.source is not None else "--- /dev/null")
        out.append(f"+++ b/{f.target}" if f.target is not None else "+++ /dev/null")
        for hunk in f.hunks:
            old = len(hunk.old)
            new = len(hunk.new)
            out.append(f"@@ -{hunk.old_start},{old} +{hunk.new_start},{new} @@")
            for op, text, newline in hunk.lines:
                out.append(op + text)
                if not newline:
                    out.append("\\ No newline at end of file")
    return "\n".join(out) + "\n"


class PatchFact:
    """A patch argument, its paths resolved under ``root`` (see the module docstring).

    Raises:
        FactError: ``root`` is not an existing directory.
    """

    __slots__ = ("_root",)

    def __init__(self, root: str | os.PathLike[str]) -> None:
        real = os.path.realpath(os.fspath(root))
        if not os.path.isdir(real):
            raise FactError(f"the root {os.fspath(root)!r} is not an existing directory")
        self._root = real

    @property
    def name(self) -> str:
        return "patch"

    @property
    def attributes(self) -> Mapping[str, str]:
        return _ATTRIBUTES

    @property
    def json_types(self) -> frozenset[str]:
        return frozenset({"string"})

    @property
    def root(self) -> str:
        return self._root

    def _path(self, path: str, *, follow_final: bool) -> str:
        problem = lexical_problem(path)
        if problem is not None:
            raise FactError(f"patch path {path!r}: {problem}")
        real = resolve_real(self._root, path, follow_final=follow_final)
        if not inside(self._root, real):
            raise FactError(f"patch path {path!r} resolves outside the workspace root")
        rel = relative_to(self._root, real)
        if rel == "." or rel.startswith("~"):
            raise FactError(f"patch path {path!r} does not name a file in the workspace")
        return rel

    def canonicalize(self, value: Any) -> Canonical:
        files = []
        seen: set[str] = set()
        for f in parse_patch(value):
            source = (
                None
                if f.source is None
                else self._path(f.source, follow_final=f.operation == "modify")
            )
            target = (
                None
                if f.target is None
                else self._path(f.target, follow_final=f.operation in ("modify", "add"))
            )
            canonical = FilePatch(f.operation, source, target, f.hunks)
            for path in canonical.paths:
                if path in seen:
                    raise FactError(f"the patch touches {path!r} twice")
                seen.add(path)
            files.append(canonical)
        return Canonical(render_patch(files), describe(files))

    def __repr__(self) -> str:
        return f"PatchFact({self._root!r})"


def describe(files: Sequence[FilePatch]) -> dict[str, Any]:
    """The fact record of canonical ``files``."""
    paths = [p for f in files for p in f.paths]
    segments = list(dict.fromkeys(s for p in paths for s in p.split("/")))
    extensions = []
    for p in paths:
        name = p.rsplit("/", 1)[-1]
        dot = name.rfind(".")
        if dot > 0:
            extensions.append(name[dot:].lower())

    def of(operation: str, attribute: str) -> list[str]:
        return [
            p
            for f in files
            if f.operation == operation
            for p in [getattr(f, attribute)]
            if p is not None
        ]

    return {
        "paths": list(dict.fromkeys(paths)),
        "modified": of("modify", "target"),
        "added": of("add", "target"),
        "deleted": of("delete", "source"),
        "renamed": of("rename", "source"),
        "added_by_rename": of("rename", "target"),
        "segments": segments,
        "extensions": list(dict.fromkeys(extensions)),
        "files": len(files),
        "additions": sum(f.additions for f in files),
        "deletions": sum(f.deletions for f in files),
    }
