"""``PathScope``: keep every file path a tool touches inside one directory (rule R9).

Two halves work together:

- As an argument guardrail, :class:`PathScope` refuses a call whose path arguments are
  absolute, contain ``..`` or a NUL byte, or resolve (through symlinks, on the real file
  system, at check time) outside the root. It blocks with a message naming the argument
  and the reason, never silently rewriting the path.
- As a helper, :meth:`PathScope.resolve` and :meth:`PathScope.open` let a tool open the
  path at use time without following any symlink that was swapped in after the check:
  each directory is opened with ``O_NOFOLLOW | O_DIRECTORY`` relative to its parent's
  descriptor, and the file itself with ``O_NOFOLLOW``. A tool built on them stays inside
  its root even when no guardrail runs.

Linux (and other systems with ``O_NOFOLLOW``, ``O_DIRECTORY`` and ``dir_fd``) only.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from clearance.errors import ClearanceError, ConfigError
from clearance.facts.base import FactError
from clearance.facts.paths import MAX_PATH_BYTES, resolve_real
from clearance.guardrails.base import ArgumentGuardrail, GuardrailContext, GuardrailOutcome

__all__ = ["PathScope", "PathScopeError"]

# Looked up with getattr so that the package imports where they are missing (Windows);
# there, _walk refuses every path (_NO_WALK) instead of opening it following symlinks.
_DIR_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_DIRECTORY", 0)
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
)
_NO_WALK = (
    None
    if hasattr(os, "O_NOFOLLOW") and hasattr(os, "O_DIRECTORY") and os.open in os.supports_dir_fd
    else "this platform cannot open a path without following symlinks "
    "(it lacks O_NOFOLLOW, O_DIRECTORY or dir_fd)"
)


class PathScopeError(ClearanceError, PermissionError):
    """A path was refused by a :class:`PathScope` (it is, or became, outside the root).

    It is also a ``PermissionError``, so code that handles ``OSError`` from ``open()``
    handles it too.

    Attributes:
        path: the path as given.
        reason: why it was refused, in one phrase.
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"path {path!r} is refused: {reason}")
        self.path = path
        self.reason = reason

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.path, self.reason)


class PathScope(ArgumentGuardrail):
    """Refuse path arguments that are, or resolve, outside ``root`` (rule R9).

    Every selected field must hold a path relative to the root. Refused: absolute paths,
    any ``..`` component, NUL bytes, a leading ``~`` (a tool might expand it to a home
    directory), and any path that resolves outside the root through symlinks. Symlinks are
    resolved against the real file system when the guardrail runs; a path that does not
    exist yet (a file about to be created) is checked through its deepest existing
    ancestor. A symlink that stays inside the root is fine.

    Example::

        scope = PathScope("/srv/workspace", tools="files.*",
                          fields=["/path", "/source", "/destination"])
        harness = Harness(registry, argument_guardrails=[scope], ...)

        # and in a tool, at use time:
        with scope.open(arguments["path"]) as f:
            text = f.read()

    The check happens before the call is authorized; the file is opened later. Use
    :meth:`open` (or :meth:`open_dir`, :meth:`open_parent`) in the tool so that a symlink
    swapped in between is refused rather than followed.

    Limits: a hard link inside the root to a file outside it is an ordinary file here
    (nothing on the path tells it apart); keep untrusted writers from creating hard links
    into the workspace. The check costs one ``lstat`` per path component, run inline.

    Args:
        root: the directory paths must stay in. It must exist; it is resolved once, here.
        tools: glob(s) over qualified tool names this guardrail applies to.
        fields: JSON pointers of the path arguments (``*`` matches any key or index).
            Defaults to ``["/path"]``. A pointer that matches nothing is not checked (an
            optional argument left out); a match that is not a string is refused.
        advisory: record the outcome but never enforce it.
        name: the name used in records.
        timeout: seconds the check may take.

    Raises:
        ConfigError: ``root`` is not an existing directory.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        tools: str | Iterable[str] = "*",
        fields: Iterable[str] | None = ("/path",),
        advisory: bool = False,
        name: str | None = None,
        timeout: float | None = 5.0,
    ) -> None:
        super().__init__(tools=tools, fields=fields, advisory=advisory, name=name, timeout=timeout)
        real = os.path.realpath(os.fspath(root))
        if not os.path.isdir(real):
            raise ConfigError(f"PathScope root {os.fspath(root)!r} is not an existing directory")
        self._root = real
        # "/" as a root contains everything; any other root needs the separator appended
        # so that "/srv/work" does not contain "/srv/workshop".
        self._prefix = real if real.endswith(os.sep) else real + os.sep

    @property
    def root(self) -> Path:
        """The root directory, fully resolved."""
        return Path(self._root)

    # --- the guardrail ----------------------------------------------------------------

    def check(self, value: Any, ctx: GuardrailContext) -> GuardrailOutcome:
        """Block the call if any selected path argument is outside the root."""
        for pointer, path in self.selected(value):
            where = pointer or "(the arguments)"
            if not isinstance(path, str):
                return GuardrailOutcome.block(
                    f"argument {where} must be a path string, got {type(path).__name__}"
                )
            problem = self._problem(path)
            if problem is not None:
                return GuardrailOutcome.block(f"argument {where} refused: {problem}")
        return GuardrailOutcome.allow()

    def allows(self, path: str) -> bool:
        """True if ``path`` would pass the check right now."""
        return self._problem(path) is None

    # --- helpers for tools ------------------------------------------------------------

    def resolve(self, path: str) -> Path:
        """Resolve ``path`` (relative to the root) on the real file system.

        Returns the absolute, symlink-free path, which is inside the root.

        Raises:
            PathScopeError: the path is refused (absolute, ``..``, NUL, or outside the root).
        """
        return Path(self._resolved(path))

    def relative(self, path: str) -> str:
        """The resolved path relative to the root (``"."`` for the root itself).

        Raises:
            PathScopeError: the path is refused.
        """
        return self._relative(self._resolved(path))

    def open(
        self,
        path: str,
        mode: str = "r",
        buffering: int = -1,
        encoding: str | None = None,
        errors: str | None = None,
        newline: str | None = None,
        *,
        make_parents: bool = False,
        follow_symlinks: bool = True,
    ) -> IO[Any]:
        """Open a regular file inside the root without following any symlink.

        The path is resolved first (so symlinks that stay inside the root work), then every
        directory of the resolved path is opened with ``O_NOFOLLOW | O_DIRECTORY`` relative
        to its parent and the file with ``O_NOFOLLOW``: a symlink swapped in after the
        check is refused, not followed. Arguments are those of :func:`open`.

        Args:
            path: the path, relative to the root.
            mode: ``r``, ``w``, ``a`` or ``x``, optionally with ``b``, ``t`` and ``+``.
            buffering: as for :func:`open`.
            encoding: as for :func:`open`.
            errors: as for :func:`open`.
            newline: as for :func:`open`.
            make_parents: create missing parent directories (write modes only).
            follow_symlinks: resolve symlinks that stay inside the root first (default).
                ``False`` opens ``path`` exactly as given, refusing any symlink on it: for
                a path that is already canonical (a ``path`` fact, rule R11), so that
                nothing is resolved a second time.

        Raises:
            PathScopeError: the path is refused, or a symlink appeared on it, or it is not
                a regular file.
            FileNotFoundError: it (or a parent) does not exist.
            IsADirectoryError: it is a directory.
        """
        flags = _open_flags(mode)
        parts = self._parts(path, follow_symlinks=follow_symlinks)
        if not parts:
            raise IsADirectoryError(errno.EISDIR, "the workspace root is a directory", path)
        create = make_parents and bool(flags & os.O_CREAT)
        with (
            self._explained(path, follow_symlinks),
            self._walk(path, parts[:-1], create=create) as dir_fd,
        ):
            fd = self._open_final(path, parts[-1], flags, dir_fd)
        # open() owns the descriptor once it calls the opener (and closes it itself if it
        # fails after that: closing it again could close another thread's new file); an
        # argument open() refuses first leaves it to close here.
        taken = False

        def opener(_name: str, _flags: int) -> int:
            nonlocal taken
            taken = True
            return fd

        try:
            return open(path, mode, buffering, encoding, errors, newline, opener=opener)
        except BaseException:
            if not taken:
                os.close(fd)
            raise

    @contextlib.contextmanager
    def open_dir(
        self, path: str = ".", *, create: bool = False, follow_symlinks: bool = True
    ) -> Iterator[int]:
        """A descriptor of the directory ``path`` inside the root, opened without
        following symlinks; closed when the block ends.

        Use it with ``os.scandir(fd)`` or the ``dir_fd=`` arguments of :mod:`os`.

        Args:
            path: the directory, relative to the root.
            create: create it (and its parents) if missing.
            follow_symlinks: as for :meth:`open`.

        Raises:
            PathScopeError: the path is refused or a symlink appeared on it.
            FileNotFoundError: it does not exist.
            NotADirectoryError: it is not a directory.
        """
        parts = self._parts(path, follow_symlinks=follow_symlinks)
        with self._explained(path, follow_symlinks), self._walk(path, parts, create=create) as fd:
            yield fd

    @contextlib.contextmanager
    def open_parent(
        self, path: str, *, create: bool = False, follow_symlinks: bool = True
    ) -> Iterator[tuple[int, str]]:
        """``(dir_fd, name)`` for the entry ``path`` itself, without resolving its last
        component: for renaming or removing a link rather than what it points to.

        Args:
            path: the entry, relative to the root.
            create: create the parent directories if missing.
            follow_symlinks: as for :meth:`open` (for the parent directories).

        Raises:
            PathScopeError: the path is refused (or names the root itself), or a symlink
                appeared on the way to its parent.
        """
        problem = _lexical_problem(path)
        if problem is not None:
            raise PathScopeError(path, problem)
        names = [p for p in path.split("/") if p not in ("", ".")]
        if not names:
            raise PathScopeError(path, "it names the workspace root itself")
        parent = "/".join(names[:-1]) or "."
        parts = self._parts(parent, original=path, follow_symlinks=follow_symlinks)
        with self._explained(path, follow_symlinks), self._walk(path, parts, create=create) as fd:
            yield fd, names[-1]

    # --- internals --------------------------------------------------------------------

    @contextlib.contextmanager
    def _explained(self, path: str, follow_symlinks: bool) -> Iterator[None]:
        """Without following symlinks, a link on the path is refused; say why in the
        words a resolving check would use (it leads outside, it loops) when they apply."""
        try:
            yield
        except _SymlinkOnPath as exc:
            if follow_symlinks:
                raise
            problem = self._problem(path)
            raise PathScopeError(
                path,
                problem
                or f"{exc.reason.split(' is a symlink')[0]} is a symlink; the path must be "
                "canonical (resolved) here, and it is not followed",
            ) from None

    def _problem(self, path: str) -> str | None:
        try:
            self._resolved(path)
        except PathScopeError as exc:
            return exc.reason
        return None

    def _resolved(self, path: str) -> str:
        problem = _lexical_problem(path)
        if problem is not None:
            raise PathScopeError(path, problem)
        try:
            # A symlink loop is refused, never taken literally: a path the OS cannot
            # resolve now may resolve elsewhere once another process flips a link (R9).
            real = resolve_real(self._root, path)
        except FactError as exc:
            raise PathScopeError(path, exc.reason) from None
        if not self._inside(real):
            raise PathScopeError(path, "it resolves outside the workspace root (through a symlink)")
        return real

    def _inside(self, real: str) -> bool:
        return real == self._root or real.startswith(self._prefix)

    def _relative(self, real: str) -> str:
        return "." if real == self._root else real[len(self._prefix) :]

    def _parts(
        self, path: str, *, original: str | None = None, follow_symlinks: bool = True
    ) -> list[str]:
        """The components to walk from the root: of the resolved path, or (with
        ``follow_symlinks=False``) of ``path`` itself, which must then be canonical."""
        if not follow_symlinks:
            problem = _lexical_problem(path)
            if problem is not None:
                raise PathScopeError(original or path, problem)
            return [p for p in path.split("/") if p not in ("", ".")]
        try:
            rel = self._relative(self._resolved(path))
        except PathScopeError as exc:
            if original is None:
                raise
            raise PathScopeError(original, exc.reason) from None
        return [] if rel == "." else rel.split(os.sep)

    @contextlib.contextmanager
    def _walk(self, path: str, names: list[str], *, create: bool) -> Iterator[int]:
        """Open root/names[0]/names[1]/... one directory at a time, never following links."""
        if _NO_WALK is not None:
            raise PathScopeError(path, _NO_WALK)
        fd = _open_nofollow(path, self._root, _DIR_FLAGS, None)
        try:
            for name in names:
                try:
                    child = _open_nofollow(path, name, _DIR_FLAGS, fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(name, 0o777, dir_fd=fd)
                    child = _open_nofollow(path, name, _DIR_FLAGS, fd)
                os.close(fd)
                fd = child
            yield fd
        finally:
            os.close(fd)

    def _open_final(self, path: str, name: str, flags: int, dir_fd: int) -> int:
        # O_NONBLOCK so that opening a FIFO does not hang the worker thread; it is cleared
        # once we know we have a regular file.
        fd = _open_nofollow(
            path, name, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd
        )
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISDIR(mode):
                raise IsADirectoryError(errno.EISDIR, "is a directory", path)
            if not stat.S_ISREG(mode):
                raise PathScopeError(path, "it is not a regular file")
            os.set_blocking(fd, True)  # clears O_NONBLOCK (fcntl F_SETFL)
        except BaseException:
            os.close(fd)
            raise
        return fd


def _open_nofollow(path: str, name: str, flags: int, dir_fd: int | None) -> int:
    """``os.open`` that turns "this is a symlink" (ELOOP, or ENOTDIR on a link to a file)
    into a :class:`PathScopeError` naming the path."""
    try:
        return os.open(name, flags, 0o666, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_symlink(name, dir_fd):
            raise _SymlinkOnPath(
                path, f"{name!r} is a symlink (it appeared after the check); not following it"
            ) from None
        if exc.errno == errno.ENXIO:  # a FIFO without a reader, a socket: not a file
            raise PathScopeError(path, "it is not a regular file") from None
        raise


class _SymlinkOnPath(PathScopeError):
    """A symlink was met while walking a path without following links."""


def _is_symlink(name: str, dir_fd: int | None) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _lexical_problem(path: str) -> str | None:
    """What is wrong with ``path`` before looking at the file system, or None."""
    if not path:
        return "the path is empty"
    if "\x00" in path:
        return "it contains a NUL byte"
    if path.startswith("/"):
        return "absolute paths are not allowed; give a path relative to the workspace root"
    if path.startswith("~"):
        return "a leading '~' is not allowed (it may be expanded to a home directory)"
    if ".." in path.split("/"):
        return "'..' components are not allowed"
    if path.isascii() and len(path) <= MAX_PATH_BYTES:
        return None  # encodes one byte a character
    try:
        encoded = os.fsencode(path)
    except UnicodeEncodeError:
        return "it cannot be encoded as a file name"
    if len(encoded) > MAX_PATH_BYTES:
        return f"it is longer than {MAX_PATH_BYTES} bytes"
    return None


def _open_flags(mode: str) -> int:
    """``os.open`` flags for an :func:`open` mode string."""
    kinds = [c for c in mode if c in "rwax"]
    if len(kinds) != 1 or not set(mode) <= set("rwaxbt+") or len(set(mode)) != len(mode):
        raise ValueError(f"invalid mode: {mode!r}")
    if "b" in mode and "t" in mode:
        raise ValueError(f"invalid mode: {mode!r}")
    plus = "+" in mode
    kind = kinds[0]
    if kind == "r":
        return os.O_RDWR if plus else os.O_RDONLY
    access = os.O_RDWR if plus else os.O_WRONLY
    extra = {
        "w": os.O_CREAT | os.O_TRUNC,
        "a": os.O_CREAT | os.O_APPEND,
        "x": os.O_CREAT | os.O_EXCL,
    }
    return access | extra[kind]
