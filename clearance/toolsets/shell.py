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
from collections.abc import Iterable, Mapping
from typing import Any

from clearance.facts.command import CommandFact
from clearance.harness.tools import CallContext, CallToolResult, Tool, ToolRegistry
from clearance.toolsets._runner import Runner, workspace
from clearance.toolsets.confinement import Confinement

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
    cwd = workspace("shell", root)
    if timeout <= 0:
        raise ValueError("timeout must be positive")
    allowed = None if allowed_programs is None else frozenset(allowed_programs)
    runner = Runner(
        "shell", cwd, env=env, confinement=confinement, timeout=timeout, max_output=max_output
    )

    def run(arguments: dict[str, Any], ctx: CallContext) -> CallToolResult:
        prepared = runner.command("run", arguments["command"], allowed)
        if isinstance(prepared, CallToolResult):
            return prepared
        argv, command_env = prepared
        return runner.run(argv, ctx, command_env)

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


def register_shell(
    registry: ToolRegistry,
    root: str | os.PathLike[str],
    namespace: str = "shell",
    **options: Any,
) -> list[Tool]:
    """Register the shell tool as ``namespace.run``; ``options`` are those of
    :func:`shell_tools`. Returns the registered tools."""
    return registry.register(namespace, shell_tools(root, **options))
