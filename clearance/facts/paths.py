"""The ``path`` fact: a file path resolved once, under a root, on the real file system.

``PathFact(root)`` canonicalizes a path argument to the path the operating system would
open, written relative to the root: symlinks are followed, ``.``, ``..`` and ``//`` are
folded as the kernel folds them (a ``..`` after a symlink steps out of the link's target,
not out of the link), an absolute path inside the root becomes relative. Refused: a path
that leaves the root (through ``..``, an absolute path or a symlink), a symlink loop, a
NUL or other control character, a leading ``~`` (a tool might expand it), a path longer
than ``PATH_MAX``.

So ``docs/notes.md -> ../.env`` is the fact ``.env``, and a deny rule on ``**/.env`` sees
it; ``link/config`` with ``link -> .git`` is ``.git/config``. The handler receives the
canonical path and opens it without following any symlink (``PathScope.open(...,
follow_symlinks=False)``): a symlink swapped in after the check is refused, not followed,
so what was checked is what is opened.

``PathFact(root, follow_final=False)`` resolves only the parents and keeps the last name as
written, for tools that act on a directory entry itself (moving or deleting a symlink
moves the link, not its target). A trailing ``/`` or a final ``.``/``..`` resolves fully.

The fact record (``context.facts.<argument>`` in Cedar)::

    path        "src/app.py"    canonical, relative to the root ("." is the root)
    name        "app.py"        last segment ("" for the root)
    parent      "src"           "." for a top-level entry, "" for the root
    extension   ".py"           lower-case, "" when none
    segments    {"src", "app.py"}
    exists      true
    type        "file"          file | directory | symlink | other | missing
    absolute    "/srv/ws/src/app.py"

Limits: a hard link inside the root to a file outside it is an ordinary file here (nothing
on the path tells it apart); on a case-insensitive file system two spellings that differ in
case name one file but are two facts (write policies in lower case there, or deny both).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from typing import Any

from clearance.facts.base import Canonical, FactError

__all__ = ["PathFact", "resolve_relative", "resolve_real"]

MAX_PATH_BYTES = 4096
"""PATH_MAX on Linux; longer paths fail in the kernel anyway."""
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
"""A control character (C0, DEL, C1)."""
_MAX_LINKS = 40
"""Symlinks followed while resolving one path (the kernel's own limit, MAXSYMLINKS)."""

_ATTRIBUTES: Mapping[str, str] = {
    "path": "String",
    "name": "String",
    "parent": "String",
    "extension": "String",
    "segments": "Set<String>",
    "exists": "Bool",
    "type": "String",
    "absolute": "String",
}


def lexical_problem(path: str) -> str | None:
    """What is wrong with ``path`` before the file system is consulted, or None."""
    if not isinstance(path, str):
        return f"a path must be a string, not {type(path).__name__}"
    if not path:
        return "the path is empty"
    if "\x00" in path:
        return "it contains a NUL byte"
    if _CONTROL.search(path) is not None:
        return "it contains a control character"
    if path.startswith("~"):
        return "a leading '~' is not allowed (it may be expanded to a home directory)"
    if path.isascii() and len(path) <= MAX_PATH_BYTES:
        return None  # encodes one byte a character
    try:
        encoded = os.fsencode(path)
    except UnicodeEncodeError:
        return "it cannot be encoded as a file name"
    if len(encoded) > MAX_PATH_BYTES:
        return f"it is longer than {MAX_PATH_BYTES} bytes"
    return None


def resolve_real(root: str, path: str, *, follow_final: bool = True) -> str:
    """The absolute path the OS would reach for ``path`` relative to ``root``, with every
    symlink followed (but the last one when ``follow_final`` is False).

    ``root`` must already be absolute and symlink-free (``os.path.realpath``). Components
    that do not exist are taken literally. The result may lie outside ``root``: the caller
    decides (see :func:`resolve_relative`).

    Raises:
        FactError: the path is malformed, or resolution runs into a symlink loop (or more
            than 40 links) or a link that cannot be read.
    """
    problem = lexical_problem(path)
    if problem is not None:
        raise FactError(problem)
    if not follow_final:
        stripped = path.rstrip("/")
        head, _, last = stripped.rpartition("/")
        if stripped and last not in ("", ".", "..") and not path.endswith("/"):
            if not head and stripped.startswith("/"):
                head = "/"
            base = _resolve(root, head, [0]) if head else root
            return base + last if base.endswith("/") else f"{base}/{last}"
    return _resolve(root, path, [0])


def _resolve(start: str, rest: str, links: list[int]) -> str:
    """``os.path.realpath``'s algorithm from an already resolved ``start`` (so that the
    root's own components are not looked at on every call), refusing loops."""
    path = start
    if rest.startswith("/"):
        path, rest = "/", rest.lstrip("/")
    while rest:
        name, _, rest = rest.partition("/")
        if not name or name == ".":
            continue
        if name == "..":
            path = os.path.dirname(path)
            continue
        candidate = f"{path}/{name}" if path != "/" else f"/{name}"
        try:
            is_link = stat.S_ISLNK(os.lstat(candidate).st_mode)
        except OSError:  # missing (or not a directory on the way): taken literally
            is_link = False
        if not is_link:
            path = candidate
            continue
        links[0] += 1
        if links[0] > _MAX_LINKS:
            raise FactError("it runs into a symlink loop (or more than 40 symlinks)")
        try:
            target = os.readlink(candidate)
        except OSError as exc:
            raise FactError(f"a symlink on it cannot be read ({exc.strerror})") from None
        problem = lexical_problem(target) if target else "a symlink on it is empty"
        if problem is not None and not target.startswith("~"):
            raise FactError(f"a symlink on it is malformed: {problem}")
        path = _resolve(path, target, links)
    return path


def inside(root: str, real: str) -> bool:
    """Whether the absolute ``real`` path is ``root`` or below it."""
    if real == root:
        return True
    prefix = root if root.endswith("/") else root + "/"
    return real.startswith(prefix)


def relative_to(root: str, real: str) -> str:
    """``real`` relative to ``root`` ("." for the root itself); ``real`` must be inside."""
    if real == root:
        return "."
    prefix = root if root.endswith("/") else root + "/"
    return real[len(prefix) :]


def resolve_relative(root: str, path: str, *, follow_final: bool = True) -> str:
    """The canonical path of ``path`` under ``root``, relative to it ("." for the root).

    Raises:
        FactError: the path is malformed, runs into a symlink loop, or leaves the root.
    """
    real = resolve_real(root, path, follow_final=follow_final)
    if not inside(root, real):
        raise FactError("it resolves outside the workspace root")
    return relative_to(root, real)


class PathFact:
    """A path argument, resolved under ``root`` (see the module docstring).

    Args:
        root: the directory paths must stay in; it must exist and is resolved once, here.
        follow_final: resolve the last component too (default). ``False`` for tools that
            act on the entry itself (move, delete, lstat).

    Raises:
        FactError: ``root`` is not an existing directory.
    """

    __slots__ = ("_follow_final", "_root")

    def __init__(self, root: str | os.PathLike[str], *, follow_final: bool = True) -> None:
        real = os.path.realpath(os.fspath(root))
        if not os.path.isdir(real):
            raise FactError(f"the root {os.fspath(root)!r} is not an existing directory")
        self._root = real
        self._follow_final = follow_final

    @property
    def name(self) -> str:
        return "path"

    @property
    def attributes(self) -> Mapping[str, str]:
        return _ATTRIBUTES

    @property
    def json_types(self) -> frozenset[str]:
        return frozenset({"string"})

    @property
    def root(self) -> str:
        """The root, fully resolved."""
        return self._root

    @property
    def follow_final(self) -> bool:
        return self._follow_final

    def canonicalize(self, value: Any) -> Canonical:
        if not isinstance(value, str):
            raise FactError(f"a path must be a string, not {type(value).__name__}")
        real = resolve_real(self._root, value, follow_final=self._follow_final)
        if not inside(self._root, real):
            raise FactError("it resolves outside the workspace root")
        rel = relative_to(self._root, real)
        if rel.startswith("~"):
            # The canonical value must be a path that is read the same way again; one that
            # starts with '~' may be expanded to a home directory by a tool.
            raise FactError("it names an entry whose name starts with '~' at the root")
        return Canonical(rel, describe(self._root, rel))

    def __repr__(self) -> str:
        extra = "" if self._follow_final else ", follow_final=False"
        return f"PathFact({self._root!r}{extra})"


def describe(root: str, rel: str) -> dict[str, Any]:
    """The fact record of the canonical ``rel`` path under ``root``."""
    absolute = root if rel == "." else (f"{root}/{rel}" if root != "/" else f"/{rel}")
    segments = [] if rel == "." else rel.split("/")
    name = segments[-1] if segments else ""
    parent = "" if not segments else ("." if len(segments) == 1 else "/".join(segments[:-1]))
    dot = name.rfind(".")
    extension = name[dot:].lower() if dot > 0 else ""
    try:
        mode = os.lstat(absolute).st_mode
    except OSError:
        kind = "missing"
    else:
        if stat.S_ISREG(mode):
            kind = "file"
        elif stat.S_ISDIR(mode):
            kind = "directory"
        elif stat.S_ISLNK(mode):
            kind = "symlink"
        else:
            kind = "other"
    return {
        "path": rel,
        "name": name,
        "parent": parent,
        "extension": extension,
        "segments": segments,
        "exists": kind != "missing",
        "type": kind,
        "absolute": absolute,
    }
