"""Where the words of a command lead: ``outside_root`` and the root's entries they name.

:func:`outside_root` says whether any word (or part of one) may name a path outside the
root, lexically or through symlinks, and for the bundled programs whether they reach past
their words (``grep -R``, ``ls -L``, ``wc --files0-from``, pytest's collection);
:func:`resolve_words` gives the canonical paths of the entries the words name. The rules
are stated in :mod:`clearance.facts.command`'s docstring.
"""

from __future__ import annotations

import os
import posixpath
import re
import unicodedata
from collections.abc import Iterator, Mapping, Sequence

from clearance.facts._command_words import ARGUMENT_FILE_PROGRAMS
from clearance.facts.base import FactError
from clearance.facts.paths import resolve_relative

__all__ = ["outside_root", "resolve_words"]

_MAX_PATH_CHECKS = 1024
"""Distinct words or parts of words resolved through the file system for one command."""
_MAX_COMPONENTS = 16_384
"""Path components resolved for one command, over all its words (each costs an lstat)."""
_NAME_MAX = 255
_PATH_MAX = 4096

# Separators within a word after which (or before which) a path may start: option values
# (--output=/x), revisions (HEAD:path), URLs and lists (file:///x, a,b), @file arguments.
_SPLIT_SEPARATORS = re.compile(r"[=:,@]")
_SPLIT_SEGMENTS = re.compile(r"[/=:,@]")


def resolve_words(argv: Sequence[str], root: str | None) -> tuple[list[str], list[str]]:
    """The entries of the root that the words name, resolved: ``(paths, resolved argv)``.

    A word (or the value of a ``--option=value`` word) that names an existing entry of the
    root, through any symlinks inside it, is that entry's canonical path in ``paths``, and
    is replaced by it in the resolved argv: ``head settings.txt`` with
    ``settings.txt -> .env`` resolves to ``head .env``, so that a rule about ``.env`` sees
    it. Words that leave the root are ``outside_root``'s business and stay as written.
    """
    if root is None:
        return [], list(argv)
    paths: list[str] = []
    resolved = [argv[0]] if argv else []
    for word in argv[1:]:
        prefix, value = "", word
        if word.startswith("-"):
            name, eq, rest = word.partition("=")
            if not eq:
                resolved.append(word)
                continue
            prefix, value = name + eq, rest
        canonical = _existing_entry(root, value)
        if canonical is None:
            resolved.append(word)
            continue
        paths.append(canonical)
        resolved.append(prefix + canonical)
    return paths, resolved


def _existing_entry(root: str, value: str) -> str | None:
    """The canonical path of ``value`` when it names an existing entry of the root."""
    if not value or _lexically_outside(value) or "\x00" in value:
        return None
    if not os.path.lexists(os.path.join(root, value)):
        return None
    try:
        return resolve_relative(root, value)
    except FactError:
        return None


def outside_root(argv: Sequence[str], root: str | None) -> bool:
    """Whether any word of ``argv`` may name a path outside ``root`` (see
    :mod:`clearance.facts.command`). ``root`` must be absolute and symlink-free, or None for
    lexical checks only.

    Time is bounded: only parts of words whose first component is an entry of the root are
    resolved, at most 1,024 of them with 16,384 path components in all.

    Raises:
        FactError: more than that would have to be resolved.
    """
    if any(_lexically_outside(word) for word in argv):
        return True
    if root is None:
        return False
    try:
        entries = {_fold(name) for name in os.listdir(root)}
    except OSError:
        return True  # the root cannot be read: nothing can be said
    checked: set[str] = set()
    components = 0
    for word in argv:
        for start, end in _candidates(word):
            slash = word.find("/", start, min(end, start + _NAME_MAX + 1))
            head = word[start : slash if slash != -1 else end]
            if len(head) > _NAME_MAX:
                continue  # no entry has so long a name
            if head != "." and _fold(head) not in entries:
                continue  # nothing of that name in the root: it cannot be a symlink there
            candidate = word[start:end]
            if candidate in checked:
                continue
            checked.add(candidate)
            components += candidate.count("/") + 1
            if len(checked) > _MAX_PATH_CHECKS or components > _MAX_COMPONENTS:
                raise FactError(
                    f"the command names more paths than can be checked (at most "
                    f"{_MAX_PATH_CHECKS} paths of {_MAX_COMPONENTS} components in all)"
                )
            if _escapes(root, candidate):
                return True
    return _beyond_the_words(argv, root)


_FOLLOW_LINKS_BELOW: Mapping[str, tuple[str, str]] = {
    "grep": ("R", "--dereference-recursive"),
    "ls": ("L", "--dereference"),
}
"""Options with which a bundled program follows symlinks it finds *below* the directories
its words name (short letter, long name): ``grep -R``, ``ls -L`` (and ``ls -RL``)."""
_NAMES_FROM_A_FILE: Mapping[str, str] = {"wc": "--files0-from"}
"""Options with which a bundled program reads the names of the files to open from a file."""
_MAX_WALK = 20_000
"""Entries looked at below the named directories for ``grep -R`` and ``ls -L``."""


def _beyond_the_words(argv: Sequence[str], root: str) -> bool:
    """Whether a bundled program would reach past what its words name: it reads file names
    from a file (the fact cannot know them), or follows a symlink below a named directory
    that leads out of the root (or whether that could not be checked in time)."""
    name = posixpath.basename(argv[0])
    if name in ARGUMENT_FILE_PROGRAMS:
        return _pytest_reaches_out(argv, root)
    follow = _FOLLOW_LINKS_BELOW.get(name)
    from_file = _NAMES_FROM_A_FILE.get(name)
    if follow is None and from_file is None:
        return False
    operands: list[str] = []
    follows = False
    options_end = False
    for word in argv[1:]:
        if options_end or word == "-" or not word.startswith("-"):
            operands.append(word)
        elif word == "--":
            options_end = True
        elif word.startswith("--"):
            option = word.partition("=")[0]
            # getopt_long takes any unambiguous prefix: --files0 is --files0-from
            if from_file is not None and len(option) > 2 and from_file.startswith(option):
                return True
            follows = follows or (follow is not None and follow[1].startswith(option))
        elif follow is not None and follow[0] in word:
            follows = True  # a cluster (-rnR, -lL); an attached value may hold it too
    if not follows:
        return False
    if not operands or (name == "grep" and len(operands) < 2):
        operands.append(".")  # grep -R PATTERN searches the working directory
    return _links_lead_out(root, operands)


_PYTEST_SKIPPED = frozenset({".git", "node_modules", ".venv", "venv", ".tox", "__pycache__"})
"""Directories the walk for pytest leaves out (pytest's own ``norecursedirs`` defaults)."""


def _pytest_reaches_out(argv: Sequence[str], root: str) -> bool:
    """pytest follows every symlink it meets while collecting (test files, directories,
    ``conftest.py``), below its path operands or the whole workspace: whether one leads
    out of the root. Node ids (``tests/test_a.py::test_b``) name their file; the values of
    ``-k``/``-m`` that happen to name no directory are skipped by the walk."""
    operands: list[str] = []
    options_end = False
    for word in argv[1:]:
        if options_end or not word.startswith("-"):
            operands.append(word.split("::", 1)[0])
        elif word == "--":
            options_end = True
    # conftest.py files are collected from the root down to each operand: walk the root.
    return _links_lead_out(root, [".", *operands], skip=_PYTEST_SKIPPED)


def _links_lead_out(
    root: str, operands: Sequence[str], *, skip: frozenset[str] = frozenset()
) -> bool:
    """Whether a symlink below one of the ``operands`` that are directories in the root
    resolves outside it (or into a loop), following links to directories inside it as the
    program would; True when there are too many entries to look at."""
    pending: list[str] = []
    for operand in operands:
        try:
            start = resolve_relative(root, operand)
        except FactError:
            return True
        pending.append(start)
    seen: set[str] = set()
    entries = 0
    while pending:
        relative = pending.pop()
        if relative in seen:
            continue
        seen.add(relative)
        top = root if relative == "." else f"{root}/{relative}"
        try:
            with os.scandir(top) as listing:
                children = list(listing)
        except OSError:
            continue  # not a directory (or unreadable: the program cannot read it either)
        entries += len(children)
        if entries > _MAX_WALK:
            return True
        for child in children:
            if child.name in skip:
                continue
            inner = child.name if relative == "." else f"{relative}/{child.name}"
            if child.is_symlink():
                try:
                    target = resolve_relative(root, inner)
                except FactError:
                    return True
                if os.path.isdir(root if target == "." else f"{root}/{target}"):
                    pending.append(target)
            elif child.is_dir(follow_symlinks=False):
                pending.append(inner)
    return False


def _is_short_option(word: str) -> bool:
    return len(word) > 2 and word[0] == "-" and word[1] != "-"


def _lexically_outside(word: str) -> bool:
    """Absolute, ``~`` or ``..`` anywhere a path may start or be a segment."""
    if word.startswith(("/", "~")):
        return True
    for match in _SPLIT_SEPARATORS.finditer(word):
        if word.startswith(("/", "~"), match.end()):
            return True
    if ".." in word and ".." in _SPLIT_SEGMENTS.split(word):
        return True
    if _is_short_option(word):
        # -f/etc/passwd, -vf~/x, -f..: the value attached to a short option may start at
        # any letter of the cluster.
        if "/" in word[2:] or "~" in word[2:]:
            return True
        if _SPLIT_SEGMENTS.split(word, maxsplit=1)[0].endswith(".."):
            return True
    return False


def _candidates(word: str) -> Iterator[tuple[int, int]]:
    """Where in ``word`` a relative path may be, as ``(start, end)``: the word, every
    part before or after a separator and between two, and for a short option cluster
    every value that may be attached to it."""
    yield 0, len(word)
    cuts = [m.start() for m in _SPLIT_SEPARATORS.finditer(word)]
    if cuts:
        bounds = [-1, *cuts, len(word)]
        for i in range(1, len(bounds)):
            yield 0, bounds[i]  # a prefix before a separator
            yield bounds[i - 1] + 1, len(word)  # a suffix after one
            yield bounds[i - 1] + 1, bounds[i]  # a field between two
    if _is_short_option(word):
        # the value starts at a letter of the cluster (index 2 or later): a '/' there makes
        # the word lexically outside, one right after the '-' is an option letter
        slash = word.find("/", 2)
        end = slash if slash != -1 else len(word)
        # only a name of at most NAME_MAX characters can be an entry of the root
        for start in range(max(2, end - _NAME_MAX), end):
            yield start, len(word)


def _fold(name: str) -> str:
    # Case and normalization folded, so that a case-insensitive or normalizing file system
    # cannot make a differently spelled word reach an entry.
    return unicodedata.normalize("NFC", name).casefold()


def _escapes(root: str, candidate: str) -> bool:
    if not candidate or len(os.fsencode(candidate)) > _PATH_MAX:
        return bool(candidate)
    try:
        resolve_relative(root, candidate)
    except (FactError, OSError):
        return True  # leaves the root, loops, or cannot be read
    return False
