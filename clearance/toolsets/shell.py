"""A shell tool: run one command (no shell) in the workspace, with bounded output and time.

Policies decide which command runs, on the command's canonical fact
(``context.facts.command``, see :mod:`clearance.facts.command`) and ``allowed_programs``;
the kernel decides what it can touch (rule R15): by default every command runs under a
Landlock ruleset that keeps its writes in the workspace, hides the workspace's secrets and
clearance's own files, and refuses TCP (see :mod:`clearance.toolsets.confinement`). Where
the kernel offers no Landlock the tool refuses to start unless it is given
``confinement=Confinement(kind="none")``; then the command runs as the harness's user and
can read or write anything that user can.

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

The tool is declared here; the confinement of git and pytest is in ``_shell_confine``, and
the process runner (process group, output drains, timeout, cancellation) in
``_shell_process``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from clearance.errors import ConfigError
from clearance.facts.base import FactError
from clearance.facts.command import CommandFact, check_words
from clearance.harness.tools import CallContext, CallToolResult, Tool, ToolRegistry
from clearance.toolsets._landlock import REFUSED
from clearance.toolsets._results import error_result
from clearance.toolsets._shell_confine import confine
from clearance.toolsets._shell_process import run_process
from clearance.toolsets.confinement import Confinement, Confiner

__all__ = ["register_shell", "shell_tools"]


def shell_tools(
    root: str | os.PathLike[str],
    allowed_programs: Iterable[str] | None = None,
    timeout: float = 30,
    *,
    max_output: int = 64_000,
    env: Mapping[str, str] | None = None,
    confinement: Confinement | None = None,
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
            docstring), whatever ``env`` says. ``TMPDIR`` (when ``env`` names none) is
            a private directory too: with the default confinement, it and that ``HOME``
            are the only places outside the workspace a command may write.
        confinement: how the kernel confines each command (default:
            ``Confinement()``, a Landlock ruleset; see
            :mod:`clearance.toolsets.confinement`).

    Raises:
        ConfigError: ``root`` is not an existing directory.
        ConfinementError: Landlock was asked for (the default) and the kernel offers
            none; pass ``Confinement(kind="none")`` to run commands unconfined.
    """
    cwd = Path(root)
    if not cwd.is_dir():
        raise ConfigError(f"shell root {os.fspath(root)!r} is not an existing directory")
    cwd = cwd.resolve()
    if timeout <= 0:
        raise ValueError("timeout must be positive")
    allowed = None if allowed_programs is None else frozenset(allowed_programs)
    confiner = (confinement or Confinement()).start("shell", cwd)
    # HOME is an empty private directory, not the workspace, and git reads no global or
    # system config: otherwise a config file the agent wrote (core.fsmonitor, hooks,
    # diff drivers) turns an allow-listed "git status" into any program. TMPDIR is
    # private too: the only other place a confined command may write.
    home = tempfile.mkdtemp(prefix="clearance-home-")
    temporary = os.path.join(home, "tmp")
    os.mkdir(temporary, 0o700)
    private = [home]
    environment = (
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
            "GIT_CEILING_DIRECTORIES": str(cwd.parent),
        }
    )

    def run(arguments: dict[str, Any], ctx: CallContext) -> CallToolResult:
        command: str = arguments["command"]
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            return error_result(f"run: cannot parse the command: {exc}", "parse_error")
        if not argv:
            return error_result("run: the command is empty", "empty")
        program = argv[0]
        if allowed is not None and program not in allowed:
            listed = ", ".join(sorted(allowed)) or "(none)"
            return error_result(
                f"run: program {program!r} is not allowed; allowed programs: {listed}",
                "not_allowed",
            )
        try:
            # Defense in depth: the command fact refuses these before any policy runs.
            check_words(argv)
            argv, command_env = confine(argv, cwd, environment)
        except FactError as exc:
            return error_result(f"run: {exc.reason}", "refused")
        if confiner is None:
            return run_process(argv, cwd, command_env, timeout, max_output, ctx)
        return _run_confined(argv, cwd, command_env, timeout, max_output, ctx, confiner, private)

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


def _run_confined(
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    timeout: float,
    max_output: int,
    ctx: CallContext,
    confiner: Confiner,
    writable: list[str],
) -> CallToolResult:
    """Run ``argv`` through the Landlock exec wrapper (the program is found here, as
    ``execvp`` would find it, so that the wrapper runs exactly that file)."""
    program = _find_program(argv[0], cwd, env)
    if isinstance(program, CallToolResult):
        return program
    wrapped = confiner.wrap(program, argv, writable)
    result = run_process(wrapped, cwd, env, timeout, max_output, ctx)
    out = result.structured_content
    if (
        isinstance(out, dict)
        and out.get("exit_code") == REFUSED
        and str(out.get("stderr", "")).startswith("clearance confinement:")
    ):
        return error_result(f"run: {str(out['stderr']).strip()}", "confinement")
    return result


def _find_program(name: str, cwd: Path, env: Mapping[str, str]) -> str | CallToolResult:
    """The file ``name`` runs, as ``execvp`` finds it: a path with a slash is taken from
    ``cwd`` (the wrapper's working directory too), a bare name is looked up on the
    command's ``PATH``."""
    if "/" in name:
        path = os.path.join(cwd, name)
        if not os.path.exists(path):
            return error_result(f"run: program {name!r} not found", "not_found")
        if os.path.isdir(path) or not os.access(path, os.X_OK):
            return error_result(f"run: program {name!r} is not executable", "not_executable")
        return name  # as written: the wrapper runs in cwd, and a script sees this name
    # Relative entries of PATH (and empty ones: the current directory) are taken from
    # cwd, where the program runs, not from the harness's working directory.
    search = env.get("PATH", os.defpath).split(os.pathsep)
    found = shutil.which(name, path=os.pathsep.join(os.path.join(cwd, d) for d in search))
    if found is None:
        return error_result(f"run: program {name!r} not found", "not_found")
    return found


def register_shell(
    registry: ToolRegistry,
    root: str | os.PathLike[str],
    namespace: str = "shell",
    **options: Any,
) -> list[Tool]:
    """Register the shell tool as ``namespace.run``; ``options`` are those of
    :func:`shell_tools`. Returns the registered tools."""
    return registry.register(namespace, shell_tools(root, **options))
