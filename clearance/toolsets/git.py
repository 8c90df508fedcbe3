"""A git toolset whose arguments are facts, not a command line.

``git.status``, ``git.diff``, ``git.log`` and ``git.show`` (read-only), ``git.add``,
``git.commit``, ``git.branch``, ``git.checkout`` and ``git.restore`` (mutating). A policy
says ``git.commit`` instead of parsing ``shell.run``'s command: every path is a canonical
``path_entry`` fact (``/paths/*``), every revision a ``git_ref`` fact
(:class:`~clearance.facts.git.GitRefFact`), and the options are booleans and numbers of the
input schema, so nothing else can reach git's command line.

What runs, whatever the arguments:

- the argv is built here: options first, revisions after them, paths after ``--``, with
  ``GIT_LITERAL_PATHSPECS=1`` (a path is a path, never pathspec magic like ``:(top)``);
- git runs as ``shell.run`` runs it (:mod:`clearance.toolsets._shell_confine`): confined
  to the workspace's repository (no discovery above it, the work tree pinned), with no
  hooks, fsmonitor, pager, editor, external diff, textconv, credential helper or alias
  from a configuration the agent can write, and not at all in a repository whose config
  names a program git would run; no global or system config;
- under the kernel's confinement (rule R15, :mod:`clearance.toolsets.confinement`);
- commits carry the toolset's identity (``author``), never one from a config;
- no ``--amend``, no ``-a``, no force, no remote: history is added to, never rewritten.

Example::

    register_git(registry, "/srv/workspace")        # git.status, git.diff, ... git.restore
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from clearance.facts.base import FactError
from clearance.facts.git import GitRefFact
from clearance.facts.paths import PathFact
from clearance.harness.tools import CallContext, CallToolResult, Tool, ToolRegistry
from clearance.toolsets._results import error_result
from clearance.toolsets._runner import Runner, workspace
from clearance.toolsets._shell_confine import confine
from clearance.toolsets.confinement import Confinement

__all__ = ["git_tools", "register_git"]

_PATHS = {
    "type": "array",
    "items": {"type": "string", "minLength": 1, "maxLength": 4096},
    "maxItems": 200,
}
_REF = {"type": "string", "minLength": 1, "maxLength": 200}


def _schema(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required or [],
        "additionalProperties": False,
    }


Build = Callable[[dict[str, Any]], list[str]]
"""Builds git's arguments (after ``git``) from a call's canonical arguments."""


def _paths(arguments: Mapping[str, Any]) -> list[str]:
    paths = arguments.get("paths") or []
    return ["--", *paths] if paths else []


def _status(a: dict[str, Any]) -> list[str]:
    return ["status", *(["--short", "--branch"] if a.get("short") else [])]


def _diff(a: dict[str, Any]) -> list[str]:
    options = ["--cached"] if a.get("staged") else []
    options += ["--stat"] if a.get("stat") else []
    return ["diff", *options, *([a["ref"]] if "ref" in a else []), "--", *(a.get("paths") or [])]


def _log(a: dict[str, Any]) -> list[str]:
    options = [f"--max-count={a.get('max_count', 20)}"]
    options += ["--oneline"] if a.get("oneline") else []
    return ["log", *options, *([a["ref"]] if "ref" in a else []), "--", *(a.get("paths") or [])]


def _show(a: dict[str, Any]) -> list[str]:
    return ["show", *(["--stat"] if a.get("stat") else []), a["ref"], "--"]


def _add(a: dict[str, Any]) -> list[str]:
    return ["add", *_paths(a)]


def _commit(a: dict[str, Any]) -> list[str]:
    return ["commit", "--no-verify", "--no-edit", "-m", a["message"], *_paths(a)]


def _branch(a: dict[str, Any]) -> list[str]:
    return ["branch", "--no-track", a["name"], *([a["start"]] if "start" in a else [])]


def _checkout(a: dict[str, Any]) -> list[str]:
    return ["checkout", "--no-guess", a["ref"], "--"]


def _restore(a: dict[str, Any]) -> list[str]:
    options = ["--staged"] if a.get("staged") else []
    options += [f"--source={a['source']}"] if "source" in a else []
    return ["restore", *options, *_paths(a)]


def git_tools(
    root: str | os.PathLike[str],
    timeout: float = 30,
    *,
    max_output: int = 64_000,
    env: Mapping[str, str] | None = None,
    confinement: Confinement | None = None,
    author: tuple[str, str] = ("clearance agent", "agent@clearance.invalid"),
) -> list[Tool]:
    """The git tools, working in the repository of ``root`` (see the module docstring).

    Each returns ``exit_code``, ``stdout``, ``stderr``, ``timed_out`` and ``truncated`` as
    JSON, an error result when git fails.

    Args:
        root: the workspace; it must exist (its repository is its own ``.git``).
        timeout: seconds a git command may run.
        max_output: bytes of stdout and of stderr kept each.
        env: the environment of git (default as ``shell.run``'s).
        confinement: the kernel confinement (default ``Confinement()``).
        author: ``(name, e-mail)`` of every commit.

    Raises:
        ConfigError: ``root`` is not an existing directory.
        ConfinementError: Landlock was asked for and the kernel offers none.
    """
    cwd = workspace("git", root)
    runner = Runner(
        "git", cwd, env=env, confinement=confinement, timeout=timeout, max_output=max_output
    )
    name, email = author
    environment = {
        **runner.environment,
        "GIT_LITERAL_PATHSPECS": "1",
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }
    paths = {"/paths/*": PathFact(cwd, follow_final=False)}
    ref = GitRefFact()

    def handler(sub: str, build: Build) -> Callable[[dict[str, Any], CallContext], CallToolResult]:
        def run(arguments: dict[str, Any], ctx: CallContext) -> CallToolResult:
            try:
                argv, git_env = confine(["git", *build(arguments)], cwd, environment)
            except FactError as exc:
                return error_result(f"git.{sub}: {exc.reason}", "refused")
            return runner.run(argv, ctx, git_env)

        return run

    def tool(
        sub: str,
        build: Build,
        description: str,
        properties: dict[str, Any],
        required: list[str] | None = None,
        *,
        read_only: bool,
        facts: Mapping[str, Any],
    ) -> Tool:
        return Tool(
            sub,
            handler(sub, build),
            description=description,
            input_schema=_schema(properties, required),
            read_only=read_only,
            timeout=timeout + 10,
            annotations={"readOnlyHint": read_only, "destructiveHint": sub == "restore"},
            root=cwd,
            facts=dict(facts),
        )

    return [
        tool(
            "status",
            _status,
            "The working tree's status (git status); `short` for the short form.",
            {"short": {"type": "boolean"}},
            read_only=True,
            facts={},
        ),
        tool(
            "diff",
            _diff,
            "Changes (git diff): of the working tree, or `staged` ones, against `ref` when "
            "given; `stat` for a summary; limited to `paths` when given.",
            {
                "paths": _PATHS,
                "staged": {"type": "boolean"},
                "stat": {"type": "boolean"},
                "ref": _REF,
            },
            read_only=True,
            facts={**paths, "/ref": ref},
        ),
        tool(
            "log",
            _log,
            "Commits (git log) from `ref` (default HEAD), at most `max_count` (default 20), "
            "touching `paths` when given; `oneline` for one line each.",
            {
                "ref": _REF,
                "paths": _PATHS,
                "max_count": {"type": "integer", "minimum": 1, "maximum": 500},
                "oneline": {"type": "boolean"},
            },
            read_only=True,
            facts={**paths, "/ref": ref},
        ),
        tool(
            "show",
            _show,
            "One commit and its changes (git show `ref`); `stat` for a summary.",
            {"ref": _REF, "stat": {"type": "boolean"}},
            ["ref"],
            read_only=True,
            facts={"/ref": ref},
        ),
        tool(
            "add",
            _add,
            "Stage `paths` for the next commit (git add).",
            {"paths": {**_PATHS, "minItems": 1}},
            ["paths"],
            read_only=False,
            facts=paths,
        ),
        tool(
            "commit",
            _commit,
            "Commit what is staged (git commit -m `message`), or only `paths` when given. "
            "Never amends.",
            {"message": {"type": "string", "minLength": 1, "maxLength": 10_000}, "paths": _PATHS},
            ["message"],
            read_only=False,
            facts=paths,
        ),
        tool(
            "branch",
            _branch,
            "Create the branch `name` at `start` (default HEAD); it does not switch to it.",
            {"name": _REF, "start": _REF},
            ["name"],
            read_only=False,
            facts={"/name": ref, "/start": ref},
        ),
        tool(
            "checkout",
            _checkout,
            "Switch the working tree to `ref` (a branch, or a commit: detached) with git "
            "checkout; it fails rather than overwrite local changes.",
            {"ref": _REF},
            ["ref"],
            read_only=False,
            facts={"/ref": ref},
        ),
        tool(
            "restore",
            _restore,
            "Restore `paths` (git restore): in the working tree from the index, or from "
            "`source` when given; `staged` to unstage them instead. Discards their changes.",
            {"paths": {**_PATHS, "minItems": 1}, "staged": {"type": "boolean"}, "source": _REF},
            ["paths"],
            read_only=False,
            facts={**paths, "/source": ref},
        ),
    ]


def register_git(
    registry: ToolRegistry,
    root: str | os.PathLike[str],
    namespace: str = "git",
    **options: Any,
) -> list[Tool]:
    """Register the git tools as ``namespace.status`` ... ``namespace.restore``; ``options``
    are those of :func:`git_tools`. Returns the registered tools."""
    return registry.register(namespace, git_tools(root, **options))
