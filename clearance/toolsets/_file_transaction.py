"""Put a set of file changes in place wholly or not at all, a crash of the process
included (``files.edit`` and ``files.apply_patch``).

A :class:`Transaction` runs in two phases:

1. **Staging.** A log (``.clearance-patch-TOKEN.json`` at the workspace's top, locked with
   ``flock`` while the transaction lives) names every change; then each new content is
   written and ``fsync``'d to ``.NAME.clearance-TOKEN.tmp`` beside its target. Nothing the
   workspace had has changed yet.
2. **Renames.** A marker (``.clearance-patch-TOKEN.commit``) says staging is complete; then
   each replaced or deleted file is renamed aside (``.NAME.clearance-TOKEN.orig``), each
   new content linked into place (a link fails where a name exists; a rename would
   overwrite), each moved file's source renamed aside. Once all are done the set-aside
   originals are removed, then the log, then the marker.

An error in the process undoes the steps done, in reverse. A crash of the process (killed,
out of memory) leaves the log: :func:`recover`, run when the files toolset is built
(the next start), finds each log no live transaction holds and finishes its transaction
from where it stopped when the marker is there (every new content is on disk), or removes
its temporary files when it is not (no file had changed). Either way every file of the
patch ends as the patch left it or as it was, never some of each. Recovery repeats only
steps of the log's own names: it works through the files tools' guard (a log naming a
protected path is left alone) and derives every temporary and set-aside name from the
path and the log's token, never from the log's text.

The new contents are ``fsync``'d (a file put in place after a power loss is never
empty), the log, marker and directories are not: what survives a crash of the process is
in the kernel's cache, and syncing them would make each edit about eight times slower
(5 ms to 44 ms on the development machine's disk). After a power loss, what the file
system kept of the renames decides.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from clearance.guardrails.paths import PathScope
from clearance.toolsets._file_guard import LOG_NAME
from clearance.toolsets._file_handlers import exists_at

__all__ = ["Change", "Transaction", "recover"]

log = logging.getLogger("clearance")


@dataclass(slots=True)
class Change:
    """One file's part of a transaction."""

    path: str
    """The canonical path whose entry changes (the target, or the deleted source)."""
    content: bytes | None
    """The new content (None: the entry is removed)."""
    mode: int = 0o644
    replace: bool = False
    """The entry exists and is replaced (else it must not exist)."""
    remove_source: str | None = None
    """A rename's source, removed once the target is in place."""

    def record(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "content": self.content is not None,
            "replace": self.replace,
            "remove_source": self.remove_source,
        }


def _temporary(name: str, token: str) -> str:
    return f".{name}.clearance-{token}.tmp"


def _aside(name: str, token: str) -> str:
    return f".{name}.clearance-{token}.orig"


class _Log:
    """A transaction's log and marker at the workspace's top (see the module docstring)."""

    def __init__(self, root_fd: int, token: str) -> None:
        self.root_fd = root_fd
        self.name = f".clearance-patch-{token}.json"
        self.marker = f".clearance-patch-{token}.commit"
        self.fd: int | None = None

    def write(self, changes: list[Change], created: list[str]) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        self.fd = os.open(self.name, flags, 0o600, dir_fd=self.root_fd)
        _lock(self.fd, blocking=True)
        body = {"changes": [c.record() for c in changes], "created_dirs": created}
        os.write(self.fd, json.dumps(body).encode("utf-8"))

    def mark_staged(self) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        os.close(os.open(self.marker, flags, 0o600, dir_fd=self.root_fd))

    def remove(self) -> None:
        """The log first, then the marker: a marker alone means nothing."""
        for name in (self.name, self.marker):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=self.root_fd)
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class Transaction:
    """Put a set of :class:`Change` in place, all of them or none (see the module
    docstring)."""

    def __init__(self, scope: PathScope) -> None:
        self.scope = scope
        self.token = secrets.token_hex(6)
        self.undo: list[tuple[str, Any]] = []
        self.cleanup: list[tuple[int, str]] = []

    def commit(self, changes: list[Change]) -> None:
        with contextlib.ExitStack() as stack:
            root_fd = os.open(self.scope.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            stack.callback(os.close, root_fd)
            journal = _Log(root_fd, self.token)
            try:
                journal.write(changes, self._created_dirs(changes))
                self._commit(changes, stack, journal)
            except BaseException:
                self._roll_back()
                journal.remove()
                raise
            for dir_fd, name in self.cleanup:
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=dir_fd)
            journal.remove()

    def _parent(self, stack: contextlib.ExitStack, path: str, *, create: bool) -> tuple[int, str]:
        return stack.enter_context(
            self.scope.open_parent(path, create=create, follow_symlinks=False)
        )

    def _created_dirs(self, changes: list[Change]) -> list[str]:
        """The parents of new contents that do not exist yet, top first (removed on roll
        back)."""
        root = str(self.scope.root)
        created: list[str] = []
        for change in changes:
            if change.content is None:
                continue
            parts = change.path.split("/")[:-1]
            for k in range(1, len(parts) + 1):
                directory = "/".join(parts[:k])
                if directory not in created and not os.path.lexists(os.path.join(root, directory)):
                    created.append(directory)
                    self.undo.append(("rmdir", os.path.join(root, directory)))
        return created

    def _commit(self, changes: list[Change], stack: contextlib.ExitStack, journal: _Log) -> None:
        staged: list[tuple[Change, int, str, str | None]] = []
        for change in changes:
            dir_fd, name = self._parent(stack, change.path, create=change.content is not None)
            temporary = None
            if change.content is not None:
                temporary = _temporary(name, self.token)
                fd = os.open(
                    temporary,
                    os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                    change.mode,
                    dir_fd=dir_fd,
                )
                self.undo.append(("unlink", (dir_fd, temporary)))
                with os.fdopen(fd, "wb") as f:
                    f.write(change.content)
                    f.flush()
                    os.fsync(f.fileno())
            staged.append((change, dir_fd, name, temporary))
        journal.mark_staged()
        for change, dir_fd, name, temporary in staged:
            if change.replace or change.content is None:
                aside = _aside(name, self.token)
                os.rename(name, aside, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                self.undo.append(("rename", (dir_fd, aside, name)))
                self.cleanup.append((dir_fd, aside))
            if temporary is not None:
                # link, not rename: it fails if the name exists (rename would overwrite)
                os.link(
                    temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False
                )
                self.undo.append(("unlink", (dir_fd, name)))
                os.unlink(temporary, dir_fd=dir_fd)
            if change.remove_source is not None:
                src_fd, src_name = self._parent(stack, change.remove_source, create=False)
                aside = _aside(src_name, self.token)
                os.rename(src_name, aside, src_dir_fd=src_fd, dst_dir_fd=src_fd)
                self.undo.append(("rename", (src_fd, aside, src_name)))
                self.cleanup.append((src_fd, aside))

    def _roll_back(self) -> None:
        for action, argument in reversed(self.undo):
            with contextlib.suppress(OSError):
                if action == "unlink":
                    os.unlink(argument[1], dir_fd=argument[0])
                elif action == "rename":
                    dir_fd, aside, name = argument
                    os.rename(aside, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                elif action == "rmdir":
                    os.rmdir(argument)
        self.cleanup.clear()


def recover(scope: PathScope, refused: Callable[[str], bool]) -> list[str]:
    """Finish or undo the transactions a crash interrupted in ``scope`` (see the module
    docstring); returns what was done to each, for the log.

    Args:
        scope: the workspace.
        refused: ``(path) -> bool``: whether the files tools refuse to change ``path``;
            a log naming such a path is left as it is (and said so).
    """
    done: list[str] = []
    root_fd = os.open(scope.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for entry in sorted(os.listdir(root_fd)):
            match = LOG_NAME.match(entry)
            if match is None:
                continue
            token, kind = match.groups()
            if kind == "commit":
                if not exists_at(f".clearance-patch-{token}.json", root_fd):
                    with contextlib.suppress(OSError):
                        os.unlink(entry, dir_fd=root_fd)  # the log went first: it is over
                continue
            outcome = _recover_one(scope, root_fd, token, refused)
            if outcome is not None:
                done.append(outcome)
                log.warning("files: %s", outcome)
    finally:
        os.close(root_fd)
    return done


def _lock(fd: int, *, blocking: bool) -> None:
    """Lock a transaction's log (``flock``): a live transaction's log is never recovered.
    ``fcntl`` is imported here, POSIX only: the package imports without it (the files tools
    refuse to work where ``O_NOFOLLOW`` is missing, which is where ``fcntl`` is)."""
    import fcntl

    fcntl.flock(fd, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)


def _recover_one(
    scope: PathScope, root_fd: int, token: str, refused: Callable[[str], bool]
) -> str | None:
    journal = _Log(root_fd, token)
    try:
        fd = os.open(journal.name, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=root_fd)
    except OSError:
        return None
    try:
        try:
            _lock(fd, blocking=False)
        except BlockingIOError:
            return None  # a live transaction of another process holds it
        try:
            body = json.loads(os.read(fd, 1 << 24).decode("utf-8"))
            changes = [
                Change(
                    str(c["path"]),
                    b"" if c["content"] else None,
                    replace=bool(c["replace"]),
                    remove_source=c["remove_source"],
                )
                for c in body["changes"]
            ]
            created = [str(d) for d in body["created_dirs"]]
        except (ValueError, KeyError, TypeError):
            return f"transaction {token}: its log is unreadable; left as it is"
        paths = [p for c in changes for p in (c.path, c.remove_source) if p is not None]
        blocked = [p for p in paths if refused(p)]
        if blocked:
            return f"transaction {token} names a protected path ({blocked[0]!r}); left as it is"
        staged = exists_at(journal.marker, root_fd)
        with contextlib.ExitStack() as stack:
            if staged:
                _roll_forward(scope, stack, changes, token)
            else:
                _discard(scope, stack, changes, created, token)
        journal.remove()
        what = "completed" if staged else "rolled back (no file had changed)"
        return f"an apply_patch or edit interrupted by a crash was {what}: transaction {token}"
    finally:
        os.close(fd)


def _open_parent(scope: PathScope, stack: contextlib.ExitStack, path: str) -> tuple[int, str]:
    return stack.enter_context(scope.open_parent(path, create=False, follow_symlinks=False))


def _roll_forward(
    scope: PathScope, stack: contextlib.ExitStack, changes: list[Change], token: str
) -> None:
    """Every new content is on disk: repeat the steps of the renames phase not done yet,
    then remove the set-aside originals. Each step is judged by the names it leaves."""
    cleanup: list[tuple[int, str]] = []
    for change in changes:
        dir_fd, name = _open_parent(scope, stack, change.path)
        temporary, aside = _temporary(name, token), _aside(name, token)
        pending = change.content is None or exists_at(temporary, dir_fd)
        if change.replace or change.content is None:
            if pending and not exists_at(aside, dir_fd) and exists_at(name, dir_fd):
                os.rename(name, aside, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            cleanup.append((dir_fd, aside))
        if change.content is not None and exists_at(temporary, dir_fd):
            if not exists_at(name, dir_fd):
                os.link(
                    temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False
                )
            os.unlink(temporary, dir_fd=dir_fd)
        if change.remove_source is not None:
            src_fd, src_name = _open_parent(scope, stack, change.remove_source)
            src_aside = _aside(src_name, token)
            if exists_at(src_name, src_fd) and not exists_at(src_aside, src_fd):
                os.rename(src_name, src_aside, src_dir_fd=src_fd, dst_dir_fd=src_fd)
            cleanup.append((src_fd, src_aside))
    for dir_fd, name in cleanup:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=dir_fd)


def _discard(
    scope: PathScope,
    stack: contextlib.ExitStack,
    changes: list[Change],
    created: list[str],
    token: str,
) -> None:
    """Staging did not finish, so no file changed: remove the temporary files and the
    directories made for them (when empty)."""
    for change in changes:
        if change.content is None:
            continue
        try:
            dir_fd, name = _open_parent(scope, stack, change.path)
        except FileNotFoundError:
            continue
        with contextlib.suppress(FileNotFoundError):
            os.unlink(_temporary(name, token), dir_fd=dir_fd)
    for directory in reversed(created):
        with contextlib.suppress(OSError):
            os.rmdir(os.path.join(scope.root, directory))
