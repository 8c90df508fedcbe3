"""How the bundled tools that run programs run them: in the workspace, with a private
``HOME`` and ``TMPDIR`` and a minimal environment, under the kernel's confinement (R15).

:class:`Runner` is shared by ``shell.run``, the ``git`` toolset and ``process.start``, so
that every program a bundled tool starts gets the same environment and the same Landlock
ruleset, and ``shell.run`` and ``process.start`` read a command the same way (R11).
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
import weakref
from collections.abc import Mapping
from pathlib import Path

from clearance.errors import ConfigError
from clearance.facts.base import FactError
from clearance.facts.command import check_words
from clearance.harness.tools import CallContext, CallToolResult
from clearance.toolsets._landlock import REFUSED
from clearance.toolsets._results import error_result
from clearance.toolsets._shell_confine import confine
from clearance.toolsets._shell_process import run_process
from clearance.toolsets.confinement import Confinement

__all__ = ["Runner", "workspace"]


def workspace(toolset: str, root: str | os.PathLike[str]) -> Path:
    """``root`` resolved, the working directory of a toolset's programs.

    Raises:
        ConfigError: ``root`` is not an existing directory.
    """
    cwd = Path(root)
    if not cwd.is_dir():
        raise ConfigError(f"{toolset} root {os.fspath(root)!r} is not an existing directory")
    return cwd.resolve()


class Runner:
    """Runs one toolset's programs (see the module docstring).

    Args:
        toolset: the toolset's name, for refusals (``"shell"``, ``"git"``).
        root: the workspace (resolved); programs run with it as working directory.
        env: the programs' environment (default: ``PATH``, ``LANG=C.UTF-8``, the private
            ``HOME`` and ``TMPDIR``, git settings that ignore the global and system config,
            ``GIT_CEILING_DIRECTORIES`` the root's parent). ``TMPDIR`` is added when
            ``env`` names none.
        confinement: the kernel confinement (default ``Confinement()``).
        timeout: seconds a program may run.
        max_output: bytes of stdout and of stderr kept each.

    Raises:
        ConfinementError: Landlock was asked for and the kernel offers none.
    """

    __slots__ = (
        "__weakref__",
        "_confiner",
        "_private",
        "environment",
        "max_output",
        "root",
        "timeout",
    )

    def __init__(
        self,
        toolset: str,
        root: Path,
        *,
        env: Mapping[str, str] | None,
        confinement: Confinement | None,
        timeout: float,
        max_output: int,
    ) -> None:
        self.root = root
        self.timeout = timeout
        self.max_output = max_output
        self._confiner = (confinement or Confinement()).start(toolset, root)
        # HOME is an empty private directory, not the workspace, and git reads no global
        # or system config: otherwise a config file the agent wrote (core.fsmonitor,
        # hooks, diff drivers) turns an allow-listed "git status" into any program.
        # TMPDIR is private too: the only other place a confined program may write.
        home = tempfile.mkdtemp(prefix="clearance-home-")
        temporary = os.path.join(home, "tmp")
        os.mkdir(temporary, 0o700)
        self._private = [home]
        # Removed with the tools (or at exit), not left in the system's temporary directory.
        weakref.finalize(self, shutil.rmtree, home, True)
        self.environment: dict[str, str] = (
            {"TMPDIR": temporary, **env}
            if env is not None
            else {
                "PATH": os.environ.get("PATH", os.defpath),
                "LANG": "C.UTF-8",
                "HOME": home,
                "TMPDIR": temporary,
                "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_CONFIG_GLOBAL": os.devnull,
                "GIT_TERMINAL_PROMPT": "0",
                # Also for git run by other programs (a test suite): no repository above.
                "GIT_CEILING_DIRECTORIES": str(root.parent),
            }
        )

    def command(
        self, verb: str, command: str, allowed: frozenset[str] | None
    ) -> tuple[list[str], dict[str, str]] | CallToolResult:
        """The argv and environment a command line runs as (``shell.run``'s ``command``,
        canonical: split with :func:`shlex.split`, no shell), or the error result that
        refuses it. ``verb`` names the tool in refusals; ``allowed``, when given, holds
        the program names (the first word as written) that may run."""
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            return error_result(f"{verb}: cannot parse the command: {exc}", "parse_error")
        if not argv:
            return error_result(f"{verb}: the command is empty", "empty")
        program = argv[0]
        if allowed is not None and program not in allowed:
            listed = ", ".join(sorted(allowed)) or "(none)"
            return error_result(
                f"{verb}: program {program!r} is not allowed; allowed programs: {listed}",
                "not_allowed",
            )
        try:
            # Defense in depth: the command fact refuses these before any policy runs.
            check_words(argv)
            return confine(argv, self.root, self.environment)
        except FactError as exc:
            return error_result(f"{verb}: {exc.reason}", "refused")

    def launch(
        self, verb: str, argv: list[str], env: Mapping[str, str]
    ) -> list[str] | CallToolResult:
        """The argv that starts ``argv`` under this toolset's confinement (the Landlock
        exec wrapper around it; ``argv`` itself for ``"none"``), or the error result of a
        program that cannot be found."""
        if self._confiner is None:
            return argv
        program = _find_program(verb, argv[0], self.root, env)
        if isinstance(program, CallToolResult):
            return program
        return self._confiner.wrap(program, argv, self._private)

    def run(self, argv: list[str], ctx: CallContext, env: Mapping[str, str]) -> CallToolResult:
        """Run ``argv`` with ``env`` (confined unless the confinement is ``"none"``); the
        result is :func:`~clearance.toolsets._shell_process.run_process`'s."""
        environment = dict(env)
        wrapped = self.launch("run", argv, environment)
        if isinstance(wrapped, CallToolResult):
            return wrapped
        result = run_process(wrapped, self.root, environment, self.timeout, self.max_output, ctx)
        out = result.structured_content
        if (
            self._confiner is not None
            and isinstance(out, dict)
            and out.get("exit_code") == REFUSED
            and str(out.get("stderr", "")).startswith("clearance confinement:")
        ):
            return error_result(f"run: {str(out['stderr']).strip()}", "confinement")
        return result


def _find_program(verb: str, name: str, cwd: Path, env: Mapping[str, str]) -> str | CallToolResult:
    """The file ``name`` runs, as ``execvp`` finds it: a path with a slash is taken from
    ``cwd`` (the wrapper's working directory too), a bare name is looked up on the
    command's ``PATH``."""
    if "/" in name:
        path = os.path.join(cwd, name)
        if not os.path.exists(path):
            return error_result(f"{verb}: program {name!r} not found", "not_found")
        if os.path.isdir(path) or not os.access(path, os.X_OK):
            return error_result(f"{verb}: program {name!r} is not executable", "not_executable")
        return name  # as written: the wrapper runs in cwd, and a script sees this name
    # Relative entries of PATH (and empty ones: the current directory) are taken from
    # cwd, where the program runs, not from the harness's working directory.
    search = env.get("PATH", os.defpath).split(os.pathsep)
    found = shutil.which(name, path=os.pathsep.join(os.path.join(cwd, d) for d in search))
    if found is None:
        return error_result(f"{verb}: program {name!r} not found", "not_found")
    return found
