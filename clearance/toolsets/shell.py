"""A shell tool: run one command (no shell) in the workspace, with bounded output and time.

This is not a sandbox. The command runs as the harness's user with ``cwd`` set to the
workspace; it can read or write anything that user can. Confine it with policies written
on the command's canonical fact (``context.facts.command``, see
:mod:`clearance.facts.command`), ``allowed_programs``, and an operating-system sandbox
where the stakes call for one.

What the tool does on its own, so that what a policy allowed is what runs (R11):

- The ``command`` argument is a declared ``command`` fact: the pipeline replaces it with
  its canonical form (``shlex.join`` of its argv) and the handler runs exactly the argv
  that splits into. The handler refuses control and invisible characters inside a word
  and git's global options itself too, for calls that reach it without a fact stage.
- **git** gets options before the agent's that keep repository config from naming a
  program to run (fsmonitor, hooks, pager, ssh, credential helpers, GPG, editors, aliases,
  autocorrect, external diff drivers and textconv for ``diff``/``log``/``show``), and
  refuses abbreviated long options (``GIT_TEST_DISALLOW_ABBREVIATED_OPTIONS``), so that
  the option names a policy saw are the ones git acts on. ``--ext-diff``, ``--textconv``,
  ``--help`` and ``git help`` (they run programs the repository config names) are refused.
- **Tools stay in their workspace.** git's repository discovery stops at the workspace
  (``GIT_CEILING_DIRECTORIES`` is its parent): a workspace inside a larger repository (a
  package of a monorepo) is not a repository of its own unless it has its own ``.git``
  directory, and ``git status``, ``git log -p`` or ``git show HEAD:../secrets`` never read
  the outer one. When the workspace has a ``.git`` directory, ``GIT_WORK_TREE`` pins the
  work tree to it (a ``core.worktree`` in the repository config cannot move it). A ``.git``
  that is a file or a symlink (a linked worktree, a submodule, or a link planted to another
  repository) is refused. ``safe.directory`` is not set: git's own refusal of a repository
  owned by another user stands.
- **pytest** runs with ``--rootdir`` and ``--confcutdir`` set to the workspace and ``-c``
  naming the workspace's own configuration file (chosen as pytest chooses, an empty one
  when it has none): a ``conftest.py`` or ``pytest.ini`` in a parent directory is never
  loaded. The agent's own ``-c``/``--config-file``/``--rootdir``/``--confcutdir`` are
  refused.
- ``cat``, ``echo``, ``grep``, ``head``, ``ls``, ``pwd``, ``tail`` and ``wc`` look for no
  configuration above their working directory: they read what their words name, which the
  fact's ``outside_root`` reports.

Example::

    registry.register("shell", shell_tools("/srv/workspace", allowed_programs={"git", "pytest"}))
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import stat
import subprocess
import tempfile
import threading
import time
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from clearance.errors import ConfigError
from clearance.facts.base import FactError
from clearance.facts.command import (
    CommandFact,
    check_words,
    parse_argv,
    refuse_argument_files,
)
from clearance.harness.tools import CallContext, CallToolResult, Tool, ToolRegistry

__all__ = ["register_shell", "shell_tools"]

_POLL = 0.05  # seconds between checks for cancellation while the command runs
_DRAIN_GRACE = 2.0  # seconds to wait for output readers once the process group is gone


_GIT_SAFE = (
    "-c",
    "core.fsmonitor=false",
    "-c",
    f"core.hooksPath={os.devnull}",
    "-c",
    "core.pager=cat",
    # A tripwire: a command that would still run an external diff runs "" and fails.
    # diff/log/show get --no-ext-diff, so that they work (see _GIT_DIFF_OPTIONS).
    "-c",
    "diff.external=",
    "-c",
    "core.sshCommand=false",
    "-c",
    "protocol.ext.allow=never",
    "-c",
    "credential.helper=",
    "-c",
    "core.askPass=false",
    "-c",
    "core.editor=false",
    "-c",
    "sequence.editor=false",
    "-c",
    "gpg.program=false",
    "-c",
    "gpg.ssh.program=false",
    "-c",
    "gpg.x509.program=false",
    "-c",
    "log.showSignature=false",
    "-c",
    "help.autocorrect=0",
)
"""Options put before every git command: no repository config may run a program."""

_GIT_DIFF_OPTIONS: Mapping[str, tuple[str, ...]] = {
    "diff": ("--no-ext-diff", "--no-textconv"),
    "log": ("--no-ext-diff", "--no-textconv"),
    "show": ("--no-ext-diff", "--no-textconv"),
    "whatchanged": ("--no-ext-diff", "--no-textconv"),
    "blame": ("--no-textconv",),
}
"""Put right after these subcommands: no external diff driver or textconv program (a
``.gitattributes`` line and a repository config entry could name one)."""

_GIT_REFUSED_OPTIONS = frozenset({"--ext-diff", "--textconv", "--help"})
"""git options that would run a program named by the repository config."""

_GIT_REPOSITORY_ENV = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_COMMON_DIR",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
)
"""Environment variables that would point git at another repository; never passed."""

_PYTEST_CONFIGS: tuple[tuple[str, re.Pattern[str] | None], ...] = (
    ("pytest.toml", None),
    (".pytest.toml", None),
    ("pytest.ini", None),
    (".pytest.ini", None),
    ("pyproject.toml", re.compile(r"^\s*\[\s*tool\.pytest(\.ini_options)?\s*\]", re.M)),
    ("tox.ini", re.compile(r"^\s*\[pytest\]", re.M)),
    ("setup.cfg", re.compile(r"^\s*\[tool:pytest\]", re.M)),
)
"""pytest's configuration files in its order of precedence, with the section that makes
one count (None: the file counts whatever it holds)."""
_PYTEST_FLAGS = frozenset("xsqvlhV")
"""pytest short options that take no value (a cluster like ``-qc FILE`` is ``-q -c FILE``)."""
_PYTEST_REFUSED = frozenset({"--rootdir", "--confcutdir", "--config-file", "-c"})
_MAX_CONFIG_BYTES = 1 << 20


def shell_tools(
    root: str | os.PathLike[str],
    allowed_programs: Iterable[str] | None = None,
    timeout: float = 30,
    *,
    max_output: int = 64_000,
    env: Mapping[str, str] | None = None,
) -> list[Tool]:
    """One mutating tool, ``run(command)``: split ``command`` with :func:`shlex.split` and
    run it without a shell, with ``cwd=root``. ``command`` is a declared ``command`` fact
    (:class:`~clearance.facts.command.CommandFact` under ``root``).

    The result is JSON: ``exit_code``, ``stdout``, ``stderr`` (each cut to ``max_output``
    bytes), ``timed_out`` and ``truncated``; it is an error result (``is_error``) when the
    exit code is not 0 or the command timed out. Pipes, redirections, ``&&`` and globs are
    not interpreted (there is no shell): they reach the program as plain arguments.

    Args:
        root: the working directory; it must exist.
        allowed_programs: if given, the program (the first word, exactly as written:
            ``git`` allows ``git`` but not ``/usr/bin/git``) must be one of these.
        timeout: seconds a command may run; then its whole process group is killed.
        max_output: bytes of stdout and of stderr kept each; the rest is drained and dropped.
        env: the environment of the command. Default: only ``PATH``, ``LANG=C.UTF-8``,
            ``HOME`` (an empty private directory), git settings that ignore the global and
            system git config, and ``GIT_CEILING_DIRECTORIES`` (the root's parent), so the
            harness's own secrets (API keys in its environment) are not handed to the
            agent's commands. git always runs confined to the root (see the module
            docstring), whatever ``env`` says.

    Raises:
        ConfigError: ``root`` is not an existing directory.
    """
    cwd = Path(root)
    if not cwd.is_dir():
        raise ConfigError(f"shell root {os.fspath(root)!r} is not an existing directory")
    cwd = cwd.resolve()
    if timeout <= 0:
        raise ValueError("timeout must be positive")
    allowed = None if allowed_programs is None else frozenset(allowed_programs)
    # HOME is an empty private directory, not the workspace, and git reads no global or
    # system config: otherwise a config file the agent wrote (core.fsmonitor, hooks,
    # diff drivers) turns an allow-listed "git status" into any program.
    environment = (
        dict(env)
        if env is not None
        else {
            "PATH": os.environ.get("PATH", os.defpath),
            "LANG": "C.UTF-8",
            "HOME": tempfile.mkdtemp(prefix="clearance-home-"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            # Also for git run by other programs (a test suite): no repository above.
            "GIT_CEILING_DIRECTORIES": str(cwd.parent),
        }
    )

    def run(arguments: dict[str, Any], ctx: CallContext) -> CallToolResult:
        command: str = arguments["command"]
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            return _error(f"run: cannot parse the command: {exc}", "parse_error")
        if not argv:
            return _error("run: the command is empty", "empty")
        program = argv[0]
        if allowed is not None and program not in allowed:
            listed = ", ".join(sorted(allowed)) or "(none)"
            return _error(
                f"run: program {program!r} is not allowed; allowed programs: {listed}",
                "not_allowed",
            )
        try:
            # Defense in depth: the command fact refuses these before any policy runs.
            check_words(argv)
            argv, command_env = _confine(argv, cwd, environment)
        except FactError as exc:
            return _error(f"run: {exc.reason}", "refused")
        return _run(argv, cwd, command_env, timeout, max_output, ctx)

    return [
        Tool(
            "run",
            run,
            description=(
                "Run one command in the workspace directory, without a shell (no pipes, "
                "redirections or globs). Returns exit_code, stdout and stderr as JSON."
                + (f" Allowed programs: {', '.join(sorted(allowed))}." if allowed else "")
            ),
            input_schema={
                "type": "object",
                "properties": {"command": {"type": "string", "minLength": 1, "maxLength": 8192}},
                "required": ["command"],
                "additionalProperties": False,
            },
            # The harness timeout is a backstop; our own kills the process group first.
            timeout=timeout + 10,
            annotations={"readOnlyHint": False, "destructiveHint": True, "openWorldHint": True},
            root=cwd,
            facts={"/command": CommandFact(cwd)},
        )
    ]


def _confine(
    argv: list[str], root: Path, env: Mapping[str, str]
) -> tuple[list[str], dict[str, str]]:
    """The argv and environment that keep a bundled program in the workspace.

    Raises:
        FactError: the command uses something that would leave it (see the module
            docstring).
    """
    name = os.path.basename(argv[0])
    if name == "git":
        return _git(argv, root, env)
    if name in ("pytest", "py.test"):
        return _pytest(argv, root), dict(env)
    return argv, dict(env)


def _git(
    argv: Sequence[str], root: Path, env: Mapping[str, str]
) -> tuple[list[str], dict[str, str]]:
    parsed = parse_argv(argv)  # refuses -c, -C, --git-dir, --exec-path... (FactError)
    refused = sorted(set(parsed.options) & _GIT_REFUSED_OPTIONS)
    if refused:
        raise FactError(
            f"git: {refused[0]} is not allowed (it runs a program the repository config names)"
        )
    sub = parsed.subcommand
    if sub == "help":
        raise FactError("git: 'help' is not allowed (it runs the man page viewer the config names)")
    git_env = {k: v for k, v in env.items() if k not in _GIT_REPOSITORY_ENV}
    git_env["GIT_CEILING_DIRECTORIES"] = str(root.parent)
    # The option names a policy allowed are the ones git acts on: no "--outp" for "--output".
    git_env["GIT_TEST_DISALLOW_ABBREVIATED_OPTIONS"] = "1"
    if not _git_directory(root):
        if ":" in str(root.parent):
            # GIT_CEILING_DIRECTORIES is a ":"-separated list: this one cannot be written.
            raise FactError("git: the workspace's parent directory has ':' in its path")
    elif sub not in ("init", "clone"):
        # A core.worktree in the repository config could move the work tree anywhere.
        git_env["GIT_WORK_TREE"] = str(root)
        _refuse_repository_programs(argv[0], root, git_env)
    head = [argv[0], *_GIT_SAFE]
    if parsed.subcommand_index is None:
        return [*head, *argv[1:]], git_env
    at = parsed.subcommand_index + 1
    if sub and "=" not in sub:
        # An alias of that name in the repository config (alias.x = !program) is emptied:
        # builtins never look aliases up, anything else fails with "empty alias".
        head += ["-c", f"alias.{sub}="]
    return [*head, *argv[1:at], *_GIT_DIFF_OPTIONS.get(sub, ()), *argv[at:]], git_env


_REPOSITORY_PROGRAMS = re.compile(
    r"^(?:filter\..+\.(?:clean|smudge|process)|diff\..+\.(?:textconv|command)"
    r"|merge\..+\.driver|pager\.[^.]+|core\.alternaterefscommand"
    r"|uploadpack\.packobjectshook)$"
)
"""Repository config keys that name a program git runs and that ``-c`` cannot switch off
for every command: filter drivers run on ``git status``/``diff`` for files that
``.gitattributes`` assigns to them, textconv on ``status -v``, merge drivers on merges."""


def _refuse_repository_programs(git: str, root: Path, env: Mapping[str, str]) -> None:
    """Refuse to run git in a repository whose config names programs it would run.

    Reading the config runs nothing (``git config --list --includes``).

    Raises:
        FactError: naming the first such key.
    """
    try:
        listed = subprocess.run(
            [git, "config", "--list", "--includes", "-z"],
            cwd=root,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise FactError(f"git: the repository config cannot be read ({exc})") from None
    if listed.returncode != 0:
        return  # not a repository git can read: the command itself will say so
    for entry in listed.stdout.split(b"\0"):
        key = entry.split(b"\n", 1)[0].decode("utf-8", "replace").lower()
        if _REPOSITORY_PROGRAMS.match(key):
            raise FactError(
                f"git: the repository config names a program git would run ({key}); "
                "git is not run in this repository"
            )


def _git_directory(root: Path) -> bool:
    """Whether the workspace has its own ``.git`` directory (False when there is none).

    Raises:
        FactError: ``.git`` is a file or a symlink: it can point at any repository.
    """
    try:
        mode = os.lstat(root / ".git").st_mode
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise FactError(f"git: the workspace's .git cannot be read ({exc.strerror})") from None
    if not stat.S_ISDIR(mode):
        raise FactError(
            "git: the workspace's .git is not a directory (a gitfile or a symlink can point "
            "at a repository outside the workspace)"
        )
    return True


def _pytest(argv: Sequence[str], root: Path) -> list[str]:
    refuse_argument_files(argv)  # pytest @file reads arguments no policy saw
    for word in argv[1:]:
        if word == "--":
            break
        if word.partition("=")[0] in _PYTEST_REFUSED or _short_c(word):
            raise FactError(
                f"pytest: {word.partition('=')[0]!r} is not allowed (the shell tool chooses "
                "the root directory and configuration file, inside the workspace)"
            )
    config = _pytest_config(root)
    return [
        argv[0],
        f"--rootdir={root}",
        f"--confcutdir={root}",
        "-c",
        os.fspath(config) if config is not None else os.devnull,
        # no cache directory: a .pytest_cache symlink would have it write outside
        "-p",
        "no:cacheprovider",
        *argv[1:],
    ]


def _short_c(word: str) -> bool:
    """Whether a short option cluster (``-c``, ``-qc``, ``-vvcFILE``) holds pytest's ``-c``."""
    if not word.startswith("-") or word.startswith("--"):
        return False
    for letter in word[1:]:
        if letter == "c":
            return True
        if letter not in _PYTEST_FLAGS:
            return False
    return False


def _pytest_config(root: Path) -> Path | None:
    """The workspace's pytest configuration file, chosen as pytest chooses it but never
    above the workspace (None: none, run with an empty configuration).

    Raises:
        FactError: a candidate file is a symlink (it could name a file outside).
    """
    fallback = None
    for name, section in _PYTEST_CONFIGS:
        path = root / name
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            continue
        if stat.S_ISLNK(mode):
            raise FactError(f"pytest: {name} in the workspace is a symlink; it is not read")
        if not stat.S_ISREG(mode):
            continue
        if section is None:
            return path
        if name == "pyproject.toml" and fallback is None:
            fallback = path  # pytest's rootdir anchor when nothing else counts
        try:
            with path.open("rb") as file:
                text = file.read(_MAX_CONFIG_BYTES).decode("utf-8", errors="replace")
        except OSError:
            continue
        if section.search(text) or (name == "pyproject.toml" and _toml_has_pytest(text)):
            return path
    return fallback


def _toml_has_pytest(text: str) -> bool:
    """``tool.pytest`` written as a dotted key or inline table (the regex sees tables)."""
    try:
        tool = tomllib.loads(text).get("tool")
    except tomllib.TOMLDecodeError:
        return False
    return isinstance(tool, dict) and "pytest" in tool


def register_shell(
    registry: ToolRegistry,
    root: str | os.PathLike[str],
    namespace: str = "shell",
    **options: Any,
) -> list[Tool]:
    """Register the shell tool as ``namespace.run``; ``options`` are those of
    :func:`shell_tools`. Returns the registered tools."""
    return registry.register(namespace, shell_tools(root, **options))


def _run(
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    timeout: float,
    max_output: int,
    ctx: CallContext,
) -> CallToolResult:
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            close_fds=True,
            # its own process group, so a timeout kills what it started too
            start_new_session=True,
        )
    except FileNotFoundError:
        return _error(f"run: program {argv[0]!r} not found", "not_found")
    except PermissionError:
        return _error(f"run: program {argv[0]!r} is not executable", "not_executable")
    except OSError as exc:
        return _error(f"run: cannot start {argv[0]!r}: {exc.strerror}", "os_error")
    assert proc.stdout is not None and proc.stderr is not None
    out, err = _Drain(proc.stdout, max_output), _Drain(proc.stderr, max_output)
    deadline = time.monotonic() + timeout
    timed_out = False
    try:
        while True:
            try:
                proc.wait(timeout=_POLL)
                break
            except subprocess.TimeoutExpired:
                if not ctx.cancelled:
                    if time.monotonic() < deadline:
                        continue
                    timed_out = True
                _kill_group(proc.pid)
                proc.wait()
                break
    finally:
        # Background children left behind would keep the pipes open and run unowned.
        _kill_group(proc.pid)
        out.join(_DRAIN_GRACE)
        err.join(_DRAIN_GRACE)
    ctx.raise_if_cancelled()
    result = {
        "exit_code": proc.returncode,
        "stdout": out.text(),
        "stderr": err.text(),
        "timed_out": timed_out,
        "truncated": out.truncated or err.truncated,
    }
    return CallToolResult(
        json.dumps(result, ensure_ascii=False),
        structured_content=result,
        is_error=timed_out or proc.returncode != 0,
    )


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


class _Drain:
    """Read a pipe to its end in a thread, keeping only the first ``limit`` bytes (the
    rest is read and dropped so that the child never blocks on a full pipe)."""

    def __init__(self, stream: IO[bytes], limit: int) -> None:
        self._stream = stream
        self._limit = limit
        self._data = bytearray()
        self.truncated = False
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        fd = self._stream.fileno()
        while chunk := os.read(fd, 65536):
            room = self._limit - len(self._data)
            if room > 0:
                self._data += chunk[:room]
            if len(chunk) > room:
                self.truncated = True

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self._stream.close()

    def text(self) -> str:
        return bytes(self._data).decode("utf-8", errors="replace")


def _error(message: str, kind: str) -> CallToolResult:
    return CallToolResult(message, structured_content={"error": kind}, is_error=True)
