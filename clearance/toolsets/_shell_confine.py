"""How the shell tool keeps git and pytest in the workspace.

:func:`confine` rewrites the argv and environment of a ``git`` or ``pytest`` command so
that the repository config, a parent directory's ``conftest.py`` or ``pytest.ini``, and
the agent's own options cannot run a program no policy saw or reach outside the root; the
rules are stated in :mod:`clearance.toolsets.shell`'s docstring. Every refusal is a
:class:`~clearance.facts.base.FactError`.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path

from clearance.facts.base import FactError
from clearance.facts.command import parse_argv, refuse_argument_files

__all__ = ["confine"]

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


def confine(
    argv: list[str], root: Path, env: Mapping[str, str]
) -> tuple[list[str], dict[str, str]]:
    """The argv and environment that keep a bundled program in the workspace.

    Raises:
        FactError: the command uses something that would leave it (see
            :mod:`clearance.toolsets.shell`).
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
