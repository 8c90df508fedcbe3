"""R9 scoped paths: a path checked by PathScope never resolves outside its root.

Trees of directories, files and symlinks (relative, absolute, dangling, looping, leading
in and out of the root) are built on disk for every example; generated path strings mix
``..``, ``//``, absolute paths, unicode, NUL and ``~``. Whatever PathScope accepts must
land inside the root by three independent measures: the kernel (``os.stat`` of the
deepest existing ancestor), the standard library (``os.path.realpath``), and what
``PathScope.open`` actually opens or creates.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat

from hypothesis import given
from hypothesis import strategies as st
from trees import Op, paths, trees, workspace

from clearance.guardrails import PathScope, PathScopeError


def inside_inodes(root: str) -> set[tuple[int, int]]:
    """Every directory and file in the tree under root, found without following links."""
    st_root = os.stat(root)
    found = {(st_root.st_dev, st_root.st_ino)}
    for directory, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            info = os.lstat(os.path.join(directory, name))
            if not stat.S_ISLNK(info.st_mode):
                found.add((info.st_dev, info.st_ino))
    return found


def deepest_existing(root: str, path: str) -> os.stat_result:
    """What the kernel reaches for the longest prefix of ``path`` that exists."""
    parts = [p for p in path.split("/") if p]
    for k in range(len(parts), -1, -1):
        with contextlib.suppress(OSError):
            return os.stat(os.path.join(root, *parts[:k]))
    raise AssertionError("the root itself must exist")


def runs_into_loop(root: str, path: str) -> bool:
    """Whether the kernel meets a symlink loop on some prefix of ``path``."""
    parts = [p for p in path.split("/") if p]
    for k in range(1, len(parts) + 1):
        try:
            os.stat(os.path.join(root, *parts[:k]))
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return True
    return False


def under(root: str, real: str) -> bool:
    return real == root or real.startswith(root + os.sep)


@given(ops=trees, path=paths)
def test_r9_an_accepted_path_resolves_inside_the_root(ops: list[Op], path: str) -> None:
    with workspace(ops) as (root, _):
        scope = PathScope(root)
        inodes = inside_inodes(root)
        accepted = scope.allows(path)
        lexical_ok = (
            bool(path)
            and not any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in path)
            and not path.startswith(("/", "~"))
            and ".." not in path.split("/")
        )
        if accepted:
            assert lexical_ok
            info = deepest_existing(root, path)
            assert (info.st_dev, info.st_ino) in inodes, "the kernel reaches outside"
            assert under(root, os.path.realpath(os.path.join(root, path)))
            assert under(root, str(scope.resolve(path)))
        else:
            try:
                scope.resolve(path)
            except PathScopeError:
                pass
            else:
                raise AssertionError("resolve() accepted what the check refused")
        # The check refuses no more than it must: for a path without lexical problems it
        # agrees with the standard library's resolution.
        # A path that runs into a symlink loop is refused too (issue 12, item 7).
        if lexical_ok and os.fsencode(path) == path.encode("utf-8", "surrogateescape"):
            expected = under(root, os.path.realpath(os.path.join(root, path)))
            assert accepted == (expected and not runs_into_loop(root, path))


@given(ops=trees, path=paths, write=st.booleans())
def test_r9_open_never_touches_anything_outside(ops: list[Op], path: str, write: bool) -> None:
    with workspace(ops) as (root, outside):
        scope = PathScope(root)
        before = sorted(os.listdir(outside))
        try:
            f = scope.open(path, "a" if write else "r", make_parents=write)
        except (OSError, ValueError):
            pass  # refused, missing, a directory...: nothing opened
        else:
            with f:
                info = os.fstat(f.fileno())
                assert (info.st_dev, info.st_ino) in inside_inodes(root)
        assert sorted(os.listdir(outside)) == before
        with open(os.path.join(outside, "f.txt")) as g:
            assert g.read() == "outside\n"
