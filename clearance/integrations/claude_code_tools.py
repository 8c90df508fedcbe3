"""Claude Code's built-in tools as a clearance toolset, with their input schemas and facts.

The Claude Agent SDK runs Claude Code, whose tools (``Bash``, ``Read``, ``Write``, ``Edit``,
``Glob``, ``Grep``, ``WebFetch``...) run inside it, not in clearance. To write Cedar
policies and local rules for them, and to check each call's arguments the way they will be
acted on, they are declared here as clearance tools in the ``claude`` namespace::

    registry.register("claude", claude_code_tools("/srv/workspace"))

=================  ======================  ===============================================
Claude Code        clearance               facts (canonical value)
=================  ======================  ===============================================
``Bash``           ``claude.bash``         ``/command``: command (argv, under the root)
``Read``           ``claude.read``         ``/file_path``: path under the root
``Write``          ``claude.write``        ``/file_path``: path
``Edit``           ``claude.edit``         ``/file_path``: path
``MultiEdit``      ``claude.multi_edit``   ``/file_path``: path
``NotebookEdit``   ``claude.notebook_edit`` ``/notebook_path``: path
``Glob``           ``claude.glob``         ``/path``: path (``.`` when not given)
``Grep``           ``claude.grep``         ``/path``: path (``.`` when not given)
``WebFetch``       ``claude.web_fetch``    ``/url``: url
``WebSearch``      ``claude.web_search``
``TodoWrite``      ``claude.todo_write``
``Task``/``Agent`` ``claude.agent``
``TaskOutput``     ``claude.task_output``  (``BashOutput`` before it: ``claude.bash_output``)
``TaskStop``       ``claude.task_stop``    (``KillShell`` before it: ``claude.kill_shell``)
``ExitPlanMode``   ``claude.exit_plan_mode``
=================  ======================  ===============================================

Clearance names are ``[a-z0-9_-]``, so Claude Code's names reach them through
:data:`CLAUDE_CODE_NAMES`; a tool that is not in the map (an MCP tool, a newer built-in)
has no clearance tool and is denied, unless the adapter is given a name for it.

The schemas are closed (``additionalProperties: false``): an input field this module does
not know (a newer Claude Code may add one) makes the call invalid, never unchecked.

Two functions translate between the shapes: :func:`from_claude_input` is what the policies
see (``Glob``/``Grep`` without a ``path`` search the root: ``"."``), :func:`to_claude_input`
is what Claude Code then runs, built from the canonical arguments clearance authorized:

- a path becomes the absolute path under the root's real path (Claude Code wants absolute
  paths), so ``./link/a.md`` with ``link -> docs`` runs as ``/srv/workspace/docs/a.md``;
- a command becomes :func:`bash_line`: ``cd`` to the root, then the checked argv, every
  word quoted for the shell, so that Claude Code's shell runs exactly that one program with
  those arguments. Pipes, ``;``, ``&&``, redirections, ``$VAR`` and globs are words of the
  argv (as the command fact reads them), passed to the program literally: a command that
  needs a shell feature fails instead of running something the policy did not see.

The handlers only refuse: these tools run in Claude Code (through
:mod:`clearance.integrations.claude_agent_sdk`), never through ``session.call_tool``.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from clearance.harness.tools import CallContext, Tool, ToolRegistry

__all__ = [
    "CLAUDE_CODE_NAMES",
    "CLAUDE_CODE_TOOLS",
    "NAMESPACE",
    "ClaudeCodeTool",
    "bash_line",
    "claude_code_tools",
    "from_claude_input",
    "register_claude_code",
    "to_claude_input",
]

NAMESPACE = "claude"
"""The namespace the built-in tools are registered under."""


@dataclass(frozen=True, slots=True)
class ClaudeCodeTool:
    """One of Claude Code's built-in tools, as clearance declares it."""

    sdk_names: tuple[str, ...]
    """The names Claude Code gives it (an older name too, when it was renamed)."""
    name: str
    """Its clearance name in :data:`NAMESPACE`."""
    description: str
    properties: Mapping[str, Any]
    required: tuple[str, ...] = ()
    facts: Mapping[str, str] = field(default_factory=dict)
    """Declared facts by JSON pointer: ``path`` or ``command`` or ``url``."""
    read_only: bool = False
    defaults: Mapping[str, Any] = field(default_factory=dict)
    """Arguments filled in when absent, so that a policy sees what Claude Code will use."""

    def schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": dict(self.properties),
            "required": list(self.required),
            "additionalProperties": False,
        }


_STR: Mapping[str, Any] = {"type": "string"}
_NUM: Mapping[str, Any] = {"type": "number"}
_BOOL: Mapping[str, Any] = {"type": "boolean"}
_EDIT = {
    "type": "object",
    "properties": {"old_string": _STR, "new_string": _STR, "replace_all": _BOOL},
    "required": ["old_string", "new_string"],
    "additionalProperties": False,
}

CLAUDE_CODE_TOOLS: tuple[ClaudeCodeTool, ...] = (
    ClaudeCodeTool(
        ("Bash",),
        "bash",
        "Run a command in Claude Code's shell (one program and its arguments).",
        {
            "command": _STR,
            "timeout": _NUM,
            "description": _STR,
            "run_in_background": _BOOL,
            "dangerouslyDisableSandbox": _BOOL,
        },
        ("command",),
        {"/command": "command"},
    ),
    ClaudeCodeTool(
        ("Read",),
        "read",
        "Read a file.",
        {"file_path": _STR, "offset": _NUM, "limit": _NUM, "pages": _STR},
        ("file_path",),
        {"/file_path": "path"},
        read_only=True,
    ),
    ClaudeCodeTool(
        ("Write",),
        "write",
        "Write a file.",
        {"file_path": _STR, "content": _STR},
        ("file_path", "content"),
        {"/file_path": "path"},
    ),
    ClaudeCodeTool(
        ("Edit",),
        "edit",
        "Replace text in a file.",
        {"file_path": _STR, "old_string": _STR, "new_string": _STR, "replace_all": _BOOL},
        ("file_path", "old_string", "new_string"),
        {"/file_path": "path"},
    ),
    ClaudeCodeTool(
        ("MultiEdit",),
        "multi_edit",
        "Make several replacements in one file.",
        {"file_path": _STR, "edits": {"type": "array", "items": _EDIT}},
        ("file_path", "edits"),
        {"/file_path": "path"},
    ),
    ClaudeCodeTool(
        ("NotebookEdit",),
        "notebook_edit",
        "Edit a cell of a Jupyter notebook.",
        {
            "notebook_path": _STR,
            "cell_id": _STR,
            "new_source": _STR,
            "cell_type": {"enum": ["code", "markdown"]},
            "edit_mode": {"enum": ["replace", "insert", "delete"]},
        },
        ("notebook_path", "new_source"),
        {"/notebook_path": "path"},
    ),
    ClaudeCodeTool(
        ("Glob",),
        "glob",
        "Find files by name pattern.",
        {"pattern": _STR, "path": _STR},
        ("pattern",),
        {"/path": "path"},
        read_only=True,
        defaults={"path": "."},
    ),
    ClaudeCodeTool(
        ("Grep",),
        "grep",
        "Search file contents (ripgrep).",
        {
            "pattern": _STR,
            "path": _STR,
            "glob": _STR,
            "output_mode": {"enum": ["content", "files_with_matches", "count"]},
            "-B": _NUM,
            "-A": _NUM,
            "-C": _NUM,
            "context": _NUM,
            "-n": _BOOL,
            "-i": _BOOL,
            "-o": _BOOL,
            "type": _STR,
            "head_limit": _NUM,
            "offset": _NUM,
            "multiline": _BOOL,
        },
        ("pattern",),
        {"/path": "path"},
        read_only=True,
        defaults={"path": "."},
    ),
    ClaudeCodeTool(
        ("WebFetch",),
        "web_fetch",
        "Fetch a URL and run a prompt on its content.",
        {"url": _STR, "prompt": _STR},
        ("url", "prompt"),
        {"/url": "url"},
        read_only=True,
    ),
    ClaudeCodeTool(
        ("WebSearch",),
        "web_search",
        "Search the web.",
        {
            "query": _STR,
            "allowed_domains": {"type": "array", "items": _STR},
            "blocked_domains": {"type": "array", "items": _STR},
        },
        ("query",),
        read_only=True,
    ),
    ClaudeCodeTool(
        ("TodoWrite",),
        "todo_write",
        "Update the session's todo list.",
        {"todos": {"type": "array", "items": {"type": "object"}}},
        ("todos",),
    ),
    ClaudeCodeTool(
        ("Agent", "Task"),
        "agent",
        "Start a subagent (its own tool calls come through the same hooks).",
        {
            "description": _STR,
            "prompt": _STR,
            "subagent_type": _STR,
            "model": _STR,
            "run_in_background": _BOOL,
            "name": _STR,
            "team_name": _STR,
            "mode": _STR,
            "isolation": {"enum": ["worktree", "remote"]},
        },
        ("description", "prompt"),
    ),
    ClaudeCodeTool(
        ("TaskOutput",),
        "task_output",
        "Read a background task's output.",
        {"task_id": _STR, "block": _BOOL, "timeout": _NUM},
        ("task_id",),
        read_only=True,
    ),
    ClaudeCodeTool(
        ("BashOutput",),
        "bash_output",
        "Read a background command's output.",
        {"bash_id": _STR, "filter": _STR},
        ("bash_id",),
        read_only=True,
    ),
    ClaudeCodeTool(
        ("TaskStop",),
        "task_stop",
        "Stop a background task.",
        {"task_id": _STR, "shell_id": _STR},
    ),
    ClaudeCodeTool(("KillShell",), "kill_shell", "Stop a background command.", {"shell_id": _STR}),
    ClaudeCodeTool(
        ("ExitPlanMode",),
        "exit_plan_mode",
        "Leave plan mode.",
        {"plan": _STR, "allowedPrompts": {"type": "array"}},
    ),
)
"""Every built-in tool declared here."""

_BY_SDK_NAME: Mapping[str, ClaudeCodeTool] = {
    sdk: tool for tool in CLAUDE_CODE_TOOLS for sdk in tool.sdk_names
}

CLAUDE_CODE_NAMES: Mapping[str, str] = {
    sdk: f"{NAMESPACE}.{tool.name}" for sdk, tool in _BY_SDK_NAME.items()
}
"""Claude Code's tool names to clearance's qualified names (``"Bash"`` → ``"claude.bash"``)."""


def claude_code_tools(
    root: str | os.PathLike[str], *, only: Iterable[str] | None = None
) -> list[Tool]:
    """The built-in tools as clearance tools, their paths and commands under ``root``.

    Args:
        root: the workspace Claude Code works in (its ``cwd``): paths are resolved and
            commands checked under it.
        only: Claude Code names (``"Read"``, ``"Bash"``) to declare; default all. A tool
            left out has no clearance tool, so every call of it is denied.

    Raises:
        ValueError: ``only`` names a tool this module does not declare.
    """
    chosen = list(CLAUDE_CODE_TOOLS)
    if only is not None:
        wanted = list(only)
        unknown = [name for name in wanted if name not in _BY_SDK_NAME]
        if unknown:
            raise ValueError(
                f"not a Claude Code tool declared here: {', '.join(unknown)} "
                f"(known: {', '.join(sorted(_BY_SDK_NAME))})"
            )
        chosen = [t for t in chosen if any(n in wanted for n in t.sdk_names)]
    return [
        Tool(
            t.name,
            _runs_in_claude_code,
            description=t.description,
            input_schema=t.schema(),
            read_only=t.read_only,
            root=root,
            facts=dict(t.facts),
            source="claude-code",
        )
        for t in chosen
    ]


def register_claude_code(
    registry: ToolRegistry, root: str | os.PathLike[str], *, only: Iterable[str] | None = None
) -> list[Tool]:
    """Register :func:`claude_code_tools` in :data:`NAMESPACE`; returns the registered tools."""
    return registry.register(NAMESPACE, claude_code_tools(root, only=only))


def _runs_in_claude_code(arguments: Mapping[str, Any], ctx: CallContext) -> Any:
    raise RuntimeError(
        f"{ctx.qualified_name} runs inside Claude Code; authorize it with "
        "clearance.integrations.claude_agent_sdk, not session.call_tool"
    )


def from_claude_input(sdk_name: str, tool_input: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments the policies see for a call Claude Code wants to make: its input, with
    the defaults Claude Code would use written out (``Glob``/``Grep`` search ``"."``)."""
    arguments = dict(tool_input)
    declared = _BY_SDK_NAME.get(sdk_name)
    if declared is not None:
        for key, value in declared.defaults.items():
            arguments.setdefault(key, value)
    return arguments


def to_claude_input(
    sdk_name: str, arguments: Mapping[str, Any], *, root: str | os.PathLike[str] | None
) -> dict[str, Any]:
    """What Claude Code must run, from the canonical arguments clearance authorized: paths
    absolute under the root's real path, a command as :func:`bash_line`. A tool that is not
    a built-in declared here gets the canonical arguments unchanged.

    Raises:
        ValueError: a built-in with path or command facts, and no root.
    """
    declared = _BY_SDK_NAME.get(sdk_name)
    result = dict(arguments)
    if declared is None or not declared.facts:
        return result
    if root is None:
        raise ValueError(f"{sdk_name} has path or command facts but its tool has no root")
    real = os.path.realpath(os.fspath(root))
    for pointer, kind in declared.facts.items():
        key = pointer[1:]
        value = result.get(key)
        if not isinstance(value, str):
            continue
        if kind == "path":
            result[key] = real if value == "." else os.path.join(real, value)
        elif kind == "command" and sdk_name == "Bash":
            result[key] = bash_line(value, real)
    return result


def bash_line(command: str, root: str) -> str:
    """A shell line that runs exactly the argv of ``command`` (a canonical command fact:
    ``shlex.join`` of an argv) in ``root``.

    Every word is quoted where the shell would read it as more than a word (``shlex.quote``),
    and the program's name always: a quoted first word is never an assignment
    (``PATH=/x git``), a reserved word (``time``, ``!``), an alias or a job (``%1``). The
    ``cd`` first means a directory the shell was left in by an earlier command does not
    change what relative paths name.
    """
    argv = shlex.split(command)
    if not argv:
        raise ValueError("an empty command")
    program = "'" + argv[0].replace("'", "'\"'\"'") + "'"
    words = " ".join([program, *(shlex.quote(w) for w in argv[1:])])
    return f"cd -- {shlex.quote(root)} && {words}"
