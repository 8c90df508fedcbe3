"""Who may answer an ask (rule R13): approvers, their keys, and the seal every answer carries.

An **approver** is a person registered on this machine with ``clearance approvers add
NAME``: 32 random bytes in ``approvers/NAME.key`` under the approver directory
(:func:`approvers_directory`: ``$CLEARANCE_APPROVERS_DIR``, else
``$XDG_CONFIG_HOME/clearance``, else ``~/.config/clearance``). The directory is made mode
0700 and each key 0600; a key that is a link, is not the user's, or that others may read
or write (or whose directory others may write) is not a key. It lives there, outside every
workspace and tool root, because an agent whose tools work in a workspace must not be able
to read it (the bundled tools are confined to their workspace: rule R15).

Every answer a store keeps is **sealed**: an HMAC-SHA256 under the answerer's key over
the ask it answers and the whole answer (:func:`clearance.harness.ask_store.answer_message`).
A store records an answer only with a credential its keyring knows, and reports an answer
it reads only when the seal verifies under a registered key: an answer written into the
store by anything without a key (an agent's shell editing the store's file, a CLI run
with a keyring of its own) is no answer. The journal records the name of the key that
sealed it, never a name the answerer typed.

The **host** (an ``on_permission_ask`` callback, ``session.permission_asks()``,
``harness.answer_ask``, a framework adapter's approval API) answers in its own process and
is trusted: it speaks for a person it authenticated itself. Its answers are sealed with the
host key (``host.key`` in the same directory, made on first use), so that whoever reads
them back (the same call tried again, after a restart, or another process sharing the
store) tells them from forgeries; they are recorded with the name the host gives. Several
hosts that answer each other's asks share one approver directory (or copy ``host.key``).

An :class:`Approvers` made with ``directory=None`` lives in memory: no approvers, and a host
key that dies with the process (the default of a :class:`MemoryAskStore
<clearance.harness.ask_store.MemoryAskStore>`, which no other process reads).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path

from clearance.errors import ConfigError

__all__ = [
    "HOST",
    "Approvers",
    "Credential",
    "Seal",
    "approvers_directory",
]

HOST = "@host"
"""The name the host's seal carries (never an approver's name: those start with a letter
or a digit)."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_KEY_BYTES = 32


def approvers_directory() -> Path:
    """Where approver keys live: ``$CLEARANCE_APPROVERS_DIR``, else
    ``$XDG_CONFIG_HOME/clearance``, else ``~/.config/clearance``."""
    explicit = os.environ.get("CLEARANCE_APPROVERS_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CONFIG_HOME")
    return (Path(xdg) if xdg else Path.home() / ".config") / "clearance"


@dataclass(frozen=True, slots=True)
class Seal:
    """What an answer carries: who sealed it and the HMAC (hex)."""

    approver: str
    """An approver's name, or :data:`HOST`."""
    mac: str = field(repr=False)

    def to_json(self) -> dict[str, str]:
        return {"approver": self.approver, "mac": self.mac}


@dataclass(frozen=True, slots=True)
class Credential:
    """A key that may seal answers: an approver's, or the host's (name :data:`HOST`)."""

    name: str
    key: bytes = field(repr=False)

    @property
    def is_host(self) -> bool:
        return self.name == HOST

    def seal(self, message: bytes) -> Seal:
        """The seal of ``message`` under this key."""
        return Seal(self.name, hmac.new(self.key, message, hashlib.sha256).hexdigest())


class Approvers:
    """The approver keys of one directory (see the module docstring).

    Args:
        directory: the approver directory; None keeps everything in memory (no approvers,
            a host key for this process only).
    """

    def __init__(self, directory: str | os.PathLike[str] | None) -> None:
        self.path = Path(directory) if directory is not None else None
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[tuple[int, int, int], bytes]] = {}
        self._memory_host = (
            Credential(HOST, secrets.token_bytes(_KEY_BYTES)) if directory is None else None
        )

    @classmethod
    def default(cls) -> Approvers:
        """The keyring of :func:`approvers_directory`."""
        return cls(approvers_directory())

    def __repr__(self) -> str:
        return f"Approvers({str(self.path) if self.path else None!r})"

    # -- approvers --------------------------------------------------------------------------

    def add(self, name: str) -> Credential:
        """Register the approver ``name`` with a new key.

        Raises:
            ConfigError: a name that is not ``[A-Za-z0-9][A-Za-z0-9._-]*`` (at most 64), an
                approver of that name exists, the keyring is in memory, or the key cannot
                be written.
        """
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ConfigError(
                f"an approver's name is letters, digits, '.', '_' or '-' (at most 64, "
                f"starting with a letter or digit), not {name!r}"
            )
        if self.path is None:
            raise ConfigError("an in-memory keyring has no approvers")
        key = secrets.token_bytes(_KEY_BYTES)
        target = self._key_path(name)
        try:
            self._make_directory(target.parent)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
        except FileExistsError:
            raise ConfigError(f"an approver named {name!r} exists", path=str(target)) from None
        except OSError as exc:
            raise ConfigError(
                f"cannot write the key of {name!r}: {exc.strerror or exc}", path=str(target)
            ) from None
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(key.hex() + "\n")
        return Credential(name, key)

    def remove(self, name: str) -> bool:
        """Remove the approver ``name`` (their answers not yet applied stop counting);
        whether there was one."""
        if self.path is None or not _NAME.fullmatch(name):
            return False
        try:
            self._key_path(name).unlink()
        except FileNotFoundError:
            return False
        with self._lock:
            self._cache.pop(name, None)
        return True

    def names(self) -> list[str]:
        """The registered approvers whose keys are usable, sorted."""
        if self.path is None:
            return []
        folder = self.path / "approvers"
        try:
            found = sorted(p.stem for p in folder.glob("*.key") if _NAME.fullmatch(p.stem))
        except OSError:
            return []
        return [name for name in found if self.credential(name) is not None]

    def credential(self, name: str) -> Credential | None:
        """The approver ``name``'s credential, or None when there is no usable key."""
        if self.path is None or not isinstance(name, str) or not _NAME.fullmatch(name):
            return None
        key = self._read(name, self._key_path(name))
        return Credential(name, key) if key is not None else None

    # -- the host ---------------------------------------------------------------------------

    def host(self) -> Credential:
        """The host's credential, its key made on first use.

        Raises:
            ConfigError: the host key cannot be read or written (or is not safe: a link,
                another user's, readable by others).
        """
        if self._memory_host is not None:
            return self._memory_host
        assert self.path is not None
        target = self.path / "host.key"
        key = self._read(HOST, target)
        if key is not None:
            return Credential(HOST, key)
        try:
            self._make_directory(self.path)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
        except FileExistsError:  # made by another process meanwhile (or unsafe: refused)
            pass
        except OSError as exc:
            raise ConfigError(
                f"cannot write the host key: {exc.strerror or exc}", path=str(target)
            ) from None
        else:
            with os.fdopen(fd, "w", encoding="ascii") as out:
                out.write(secrets.token_bytes(_KEY_BYTES).hex() + "\n")
        key = self._read(HOST, target)
        if key is None:
            raise ConfigError(
                "the host key is not safe to use (a link, another user's, or readable by others)",
                path=str(target),
            )
        return Credential(HOST, key)

    # -- checking ---------------------------------------------------------------------------

    def knows(self, credential: Credential) -> bool:
        """Whether ``credential`` is a registered approver's, or this host's (its key
        too, compared in constant time)."""
        if credential.is_host:
            try:
                mine = self.host()
            except ConfigError:
                return False
        else:
            found = self.credential(credential.name)
            if found is None:
                return False
            mine = found
        return hmac.compare_digest(mine.key, credential.key)

    def verify(self, seal: Seal, message: bytes) -> bool:
        """Whether ``seal`` is the seal of ``message`` under a registered key (or the
        host's)."""
        if seal.approver == HOST:
            try:
                credential: Credential | None = self.host()
            except ConfigError:
                return False
        else:
            credential = self.credential(seal.approver)
        if credential is None:
            return False
        expected = credential.seal(message).mac
        return hmac.compare_digest(expected.encode(), str(seal.mac).encode())

    # -- files ------------------------------------------------------------------------------

    def _key_path(self, name: str) -> Path:
        assert self.path is not None
        return self.path / "approvers" / f"{name}.key"

    def _make_directory(self, folder: Path) -> None:
        assert self.path is not None
        for part in (self.path, folder):
            if not part.exists():
                part.mkdir(mode=0o700, parents=True, exist_ok=True)
                part.chmod(0o700)

    def _read(self, name: str, path: Path) -> bytes | None:
        """The key in ``path`` if it is safe to use (cached while the file is unchanged)."""
        try:
            fd = os.open(path, os.O_RDONLY | _NOFOLLOW)
        except OSError:
            with self._lock:
                self._cache.pop(name, None)
            return None
        try:
            info = os.fstat(fd)
            if not _private(info) or not _private_directory(path.parent):
                return None
            signature = (info.st_ino, info.st_mtime_ns, info.st_size)
            with self._lock:
                cached = self._cache.get(name)
            if cached is not None and cached[0] == signature:
                return cached[1]
            raw = os.read(fd, 256).decode("ascii", "replace").strip()
        finally:
            os.close(fd)
        try:
            key = bytes.fromhex(raw)
        except ValueError:
            return None
        if len(key) != _KEY_BYTES:
            return None
        with self._lock:
            self._cache[name] = (signature, key)
        return key


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _private(info: os.stat_result) -> bool:
    """A regular file of this user that nobody else may read or write."""
    if not stat.S_ISREG(info.st_mode):
        return False
    if not hasattr(os, "getuid"):  # no POSIX owners (Windows): the profile protects it
        return True
    return info.st_uid == os.getuid() and info.st_mode & 0o077 == 0


def _private_directory(folder: Path) -> bool:
    """A directory of this user that nobody else may write (so no key is swapped in)."""
    if not hasattr(os, "getuid"):
        return True
    try:
        info = folder.stat()
    except OSError:
        return False
    return info.st_uid == os.getuid() and info.st_mode & 0o022 == 0
