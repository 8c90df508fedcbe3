"""Kernel confinement of the bundled tools that run programs (rule R15).

A policy decides which command runs; the kernel decides what that command can touch. Under
``confinement="landlock"`` (the default) every program ``shell.run`` starts runs under a
Landlock ruleset built for that call:

- **writes** only under the workspace (and the command's private ``HOME``/``TMPDIR``),
  minus its protected paths;
- **no access** to the protected paths: secrets in the workspace (``.env``, ``.env.*`` by
  default; :attr:`Confinement.protected`) and clearance's own stores (the journal, grant
  and ask store, the start log: :attr:`Confinement.hidden_paths`), wherever they are;
- **read, never write**, the files that decide the agent's next run
  (:attr:`Confinement.read_only_paths`: ``clearance.toml``, present or not, the policies,
  entities and rules);
- **reads outside the workspace** only of the system directories a program needs
  (:data:`SYSTEM_READ_PATHS`), the Python installation and clearance's own package, and
  what :attr:`Confinement.read_paths` adds;
- **TCP** bind and connect refused but for :attr:`Confinement.connect_ports` and
  :attr:`Confinement.bind_ports` (ABI 4 and later); abstract UNIX sockets and signals to
  processes outside the ruleset refused (ABI 6 and later).

Where the kernel offers no Landlock, a toolset asked for ``"landlock"`` refuses to start
(:class:`~clearance.errors.ConfinementError`); ``confinement="none"`` (``[tools]
confinement = "none"`` in ``clearance.toml``) runs programs unconfined, said in words. How
the ruleset is built, and what it costs a command that lives in a directory holding a
protected path, is in :mod:`clearance.toolsets._landlock` and ``docs/confinement.md``.

The file tools (``files.*``) are not run under this ruleset: they run no program, and open
every path from the workspace's descriptor one component at a time without following a
link (R9), after the protected-path checks of ``_file_guard``.

Example::

    confinement = Confinement(read_paths=("/opt/node",), connect_ports=(443,))
    register_shell(registry, "/srv/workspace", confinement=confinement)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from clearance.errors import ConfinementError
from clearance.harness.approvers import approvers_directory
from clearance.toolsets import _landlock
from clearance.toolsets._file_guard import SECRETS, SQLITE_SIDE_FILES, secret_pattern

__all__ = [
    "DEVICE_FILES",
    "SYSTEM_READ_PATHS",
    "Confinement",
    "ConfinementKind",
    "Confiner",
    "landlock_abi",
]

ConfinementKind = Literal["landlock", "none"]
"""``"landlock"``: programs run under a kernel ruleset (refuse to start without one);
``"none"``: programs run unconfined."""

SYSTEM_READ_PATHS: tuple[str, ...] = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/proc",
    "/sys",
)
"""Directories outside the workspace a confined program may read and execute from by
default (a missing one is skipped). ``/proc`` does not expose other processes' memory or
environment: Landlock refuses ``ptrace`` access (which ``/proc/PID/environ`` and ``mem``
need) to processes outside the ruleset."""

DEVICE_FILES: tuple[str, ...] = (
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
)
"""Device files a confined program may read and write."""

_PACKAGE = Path(__file__).resolve().parent.parent
"""clearance's own package directory (``clearance demo`` and ``python -m clearance`` read it)."""

_WRAPPER = Path(_landlock.__file__).resolve()


def landlock_abi() -> int:
    """The Landlock ABI the running kernel offers (0: none)."""
    return _landlock.abi()


@dataclass(frozen=True, slots=True)
class Confinement:
    """How the programs a bundled tool runs are confined (rule R15).

    Paths are absolute (relative ones are taken from the current directory) except
    :attr:`protected`, which is relative to the workspace.
    """

    kind: ConfinementKind = "landlock"
    """``"landlock"`` (default; the toolset refuses to start where the kernel has none)
    or ``"none"`` (unconfined: only policies and path checks stand)."""
    read_paths: tuple[str | os.PathLike[str], ...] = ()
    """More directories or files outside the workspace a program may read and execute
    (a toolchain in ``/opt``), besides :attr:`system_paths`."""
    system_paths: tuple[str | os.PathLike[str], ...] = SYSTEM_READ_PATHS
    """The system directories a program may read and execute."""
    write_paths: tuple[str | os.PathLike[str], ...] = ()
    """More directories a program may write, besides the workspace (a cache)."""
    protected: tuple[str, ...] = SECRETS
    """Glob patterns of secrets in the workspace a program may neither read nor write: a
    pattern without ``/`` matches a name in any directory (``.env`` is every ``.env``),
    one with ``/`` the path from the workspace (``config/*.key``). Matched when each
    command starts, by a walk of the workspace that follows no link and skips ``.git``."""
    hidden_paths: tuple[str | os.PathLike[str], ...] = ()
    """Files a program may neither read nor write (clearance's journal and stores), with
    their SQLite side files; they need not exist."""
    read_only_paths: tuple[str | os.PathLike[str], ...] = ()
    """Files and directories a program may read but never create, change or remove
    (clearance's configuration and policies); they need not exist."""
    connect_ports: tuple[int, ...] = ()
    """TCP ports a program may connect to (every other TCP connect is refused)."""
    bind_ports: tuple[int, ...] = ()
    """TCP ports a program may listen on (every other bind is refused)."""

    def __post_init__(self) -> None:
        if self.kind not in ("landlock", "none"):
            raise ValueError('confinement must be "landlock" or "none"')
        for port in (*self.connect_ports, *self.bind_ports):
            if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
                raise ValueError(f"a port must be an integer from 0 to 65535, not {port!r}")

    def start(self, toolset: str, workspace: Path) -> Confiner | None:
        """The confiner of ``toolset`` working in ``workspace`` (None for ``"none"``).

        Raises:
            ConfinementError: ``"landlock"`` was asked for and the kernel offers none.
        """
        if self.kind == "none":
            return None
        abi = landlock_abi()
        if abi < 1:
            raise ConfinementError(
                toolset,
                abi,
                f"{toolset}: this system cannot confine the programs the tool runs (Landlock "
                "is not available: Linux 5.13 or later with Landlock enabled is needed); "
                'write confinement = "none" under [tools] in clearance.toml (or pass '
                'Confinement(kind="none")) to run them unconfined',
            )
        return Confiner(self, workspace.resolve(), abi)


class Confiner:
    """Wraps one toolset's commands in the Landlock exec wrapper (see :class:`Confinement`)."""

    __slots__ = ("abi", "settings", "workspace")

    def __init__(self, settings: Confinement, workspace: Path, abi: int) -> None:
        self.settings = settings
        self.workspace = workspace
        self.abi = abi
        """The ABI the rulesets use (what the kernel offered when the toolset started)."""

    def spec(self, extra_writable: Iterable[str | os.PathLike[str]] = ()) -> dict[str, object]:
        """The ruleset of one command, as the wrapper reads it (computed now: the
        protected globs are matched against the workspace as it is)."""
        s = self.settings
        reads = (*s.system_paths, *_python_paths(), *s.read_paths)
        grants = [(_canonical(path), _landlock.READ) for path in reads]
        grants.append((_canonical(_PACKAGE), _landlock.READ))
        # Python lists the directory it imports clearance from; it reads nothing else there.
        grants.append((_canonical(_PACKAGE.parent), _landlock.LIST))
        grants += [(_canonical(p), _landlock.DEVICE) for p in DEVICE_FILES]
        grants.append((str(self.workspace), _landlock.WRITE))
        for path in (*s.write_paths, *extra_writable):
            grants.append((_canonical(path), _landlock.WRITE))
        restrictions = [(path, _landlock.NONE) for path in self._secrets()]
        # The approvers' keys (rule R13), wherever the workspace is: one that is the home
        # directory holds them.
        restrictions.append((_canonical(approvers_directory()), _landlock.NONE))
        for path in s.hidden_paths:
            base = _canonical(path)
            restrictions += [(base + suffix, _landlock.NONE) for suffix in SQLITE_SIDE_FILES]
        restrictions += [(_canonical(p), _landlock.READ) for p in s.read_only_paths]
        return {
            "abi": self.abi,
            "grants": _unique(grants),
            "restrictions": _unique(restrictions),
            "connect_ports": list(s.connect_ports),
            "bind_ports": list(s.bind_ports),
        }

    def wrap(
        self,
        program: str,
        argv: Sequence[str],
        extra_writable: Iterable[str | os.PathLike[str]] = (),
    ) -> list[str]:
        """The argv that runs ``program`` (an absolute path) as ``argv`` under this
        command's ruleset."""
        words = _landlock.encode_spec(self.spec(extra_writable))
        # -I: no PYTHON* variables, no user site, no current directory on sys.path;
        # -S: no site-packages (the wrapper needs the standard library only).
        return [sys.executable, "-I", "-S", str(_WRAPPER), *words, "--", program, *argv]

    def _secrets(self) -> list[str]:
        """The workspace's secrets as they are now: each entry :attr:`Confinement.protected`
        matches (and where a link among them leads), found by a walk that follows no
        link and skips ``.git``."""
        names, relative = secret_pattern(self.settings.protected)
        found: list[str] = []
        root = str(self.workspace)
        for directory, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if d != ".git"]
            for name in (*dirnames, *filenames):
                if names is None or names.match(name) is None:
                    if relative is None:
                        continue
                    rel = os.path.join(directory, name)[len(root) + 1 :]
                    if relative.match(rel) is None:
                        continue
                path = os.path.join(directory, name)
                found += [path, os.path.realpath(path)]
        return found


def _python_paths() -> list[str]:
    """Where the running Python lives: a program the tool runs is often this Python or a
    script of its environment (pytest)."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    return sorted(p for p in paths if p)


def _canonical(path: str | os.PathLike[str]) -> str:
    return os.path.realpath(os.path.abspath(os.fspath(path)))


def _unique(pairs: list[tuple[str, str]]) -> list[list[str]]:
    seen: set[tuple[str, str]] = set()
    out: list[list[str]] = []
    for pair in pairs:
        if pair not in seen:
            seen.add(pair)
            out.append(list(pair))
    return out
