"""Long-running processes as tools: a dev server or a watcher the agent starts, reads,
writes to and stops.

- ``process.start(command)``: start ``command`` in the workspace and return its id at
  once. ``command`` is read exactly as ``shell.run`` reads it (the same declared
  ``command`` fact, :class:`~clearance.facts.command.CommandFact`, so a policy sees the
  same ``context.facts.command`` for both; no shell; git and pytest kept in the workspace
  the same way), and the program runs as ``shell.run``'s do: the same environment, under
  the same Landlock ruleset (rule R15, :mod:`clearance.toolsets.confinement`), and where
  the kernel offers none the toolset refuses to start unless told
  ``Confinement(kind="none")``.
- ``process.read(id)``: the output (stdout and stderr together, as a terminal shows them)
  written since the last read, at most ``max_bytes``, waiting up to ``wait`` seconds for
  some; whether the process still runs, and its exit code once it ended.
- ``process.write(id, input)``: write to its stdin (``close`` to end its input).
- ``process.stop(id)``: terminate its whole process group, kill it after a grace period,
  and return what it wrote last; the process is forgotten and its slot free.

The ``id`` of ``read``, ``write`` and ``stop`` is a declared fact
(:class:`ProcessFact`, kind ``process``): a policy reads which command the process runs
(``context.facts.id.command``, the canonical argv its ``process.start`` was decided on,
and ``context.facts.id.program``), a person asked sees that command beside the id, the
journal records it, and a grant covers only the exact call (never "any arguments", which
would cover every process the session starts later). An id that is not one of the
session's processes is refused before any policy runs, with the same message whether it
names nothing or another session's process. Ids are 128 random bits, never given twice,
and a process keeps its command for life: the handler, looking the id up again in the
same session, acts on the process the fact named, or on none (stopped since: ``unknown``).

The limits (:class:`~clearance.toolsets._process_table.ProcessLimits`): how many
processes a session may hold, how much output is kept per process (a ring buffer: the
oldest is dropped, and a read says how many bytes it missed), how long a process may run.
Processes belong to the session that started them: an id given in another session is
unknown there, and every process of a session is stopped when the session closes (the
tools' ``on_session_close``), so when the harness closes, and when the interpreter exits;
if the harness dies without closing, a watchdog process stops them
(:mod:`clearance.toolsets._process_table`).

Example::

    register_process(registry, "/srv/workspace", allowed_programs={"npm", "python"})
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Iterable, Mapping
from typing import Any

from clearance.facts.base import Canonical, FactError
from clearance.facts.command import CommandFact
from clearance.harness.tools import CallContext, CallToolResult, Tool, ToolRegistry
from clearance.toolsets._process_table import (
    Output,
    ProcessLimits,
    ProcessTable,
    RunningProcess,
)
from clearance.toolsets._results import error_result
from clearance.toolsets._runner import Runner, workspace
from clearance.toolsets._shell_process import start_failure
from clearance.toolsets.confinement import Confinement

__all__ = ["ProcessFact", "ProcessLimits", "process_tools", "register_process"]

_ID = {"type": "string", "pattern": "^p_[0-9a-f]{32}$"}
_ID_PATTERN = re.compile(r"p_[0-9a-f]{32}")


def _unknown(process_id: Any) -> str:
    """The one refusal for an id that names no process of the session: the same for an id
    that names nothing and for another session's (nothing tells which)."""
    return f"no process {process_id!r} in this session"


class ProcessFact:
    """The ``process`` fact of a process id: which command the process runs.

    The canonical value is the id itself; the record (``context.facts.id``)::

        command   "npm run dev"   the canonical command its process.start was decided on
        program   "npm"           its program (the command's first word)

    Read in the calling session only (:class:`~clearance.facts.base.SessionFact`): an id
    that is not one of its processes is refused.

    Args:
        table: the processes; ``None`` for a tool declared without them (a tools file,
            :mod:`clearance.tuning`), where no session holds any and every id is refused.
    """

    __slots__ = ("_table",)

    def __init__(self, table: ProcessTable | None = None) -> None:
        self._table = table

    @property
    def name(self) -> str:
        return "process"

    @property
    def attributes(self) -> Mapping[str, str]:
        return {"command": "String", "program": "String"}

    @property
    def json_types(self) -> frozenset[str]:
        return frozenset({"string"})

    def canonicalize(self, value: Any) -> Canonical:
        raise FactError("a process id is read in the session that started the process")

    def canonicalize_in(self, value: Any, session_id: str) -> Canonical:
        process = None
        if self._table is not None and isinstance(value, str) and _ID_PATTERN.fullmatch(value):
            process = self._table.get(session_id, value)
        if process is None:
            raise FactError(_unknown(value))
        command = process.command
        return Canonical(value, {"command": command, "program": shlex.split(command)[0]})

    def describe(self, fact: Mapping[str, Any]) -> str:
        return f"the process of: {fact.get('command', '')}"

    def __repr__(self) -> str:
        return "ProcessFact()"


def _result(content: dict[str, Any], *, is_error: bool = False) -> CallToolResult:
    return CallToolResult(
        json.dumps(content, ensure_ascii=False), structured_content=content, is_error=is_error
    )


def _output(process: RunningProcess, output: Output) -> dict[str, Any]:
    code = process.exit_code
    return {
        "id": process.id,
        "output": output.data.decode("utf-8", errors="replace"),
        "dropped": output.dropped,
        "more": output.more,
        "running": code is None,
        "exit_code": code,
        "ended": process.ended,
    }


def process_tools(
    root: str | os.PathLike[str],
    allowed_programs: Iterable[str] | None = None,
    *,
    limits: ProcessLimits | None = None,
    env: Mapping[str, str] | None = None,
    confinement: Confinement | None = None,
) -> list[Tool]:
    """``start``, ``read``, ``write`` and ``stop`` (see the module docstring).

    Args:
        root: the working directory of every process; it must exist.
        allowed_programs: if given, the program (the first word, exactly as written) must
            be one of these, as for ``shell.run``.
        limits: the count, output, lifetime, grace and read limits (default
            ``ProcessLimits()``).
        env: the processes' environment (default as ``shell.run``'s).
        confinement: the kernel confinement (default ``Confinement()``).

    Raises:
        ConfigError: ``root`` is not an existing directory.
        ConfinementError: Landlock was asked for and the kernel offers none.
    """
    cwd = workspace("process", root)
    limits = limits or ProcessLimits()
    allowed = None if allowed_programs is None else frozenset(allowed_programs)
    runner = Runner(
        "process",
        cwd,
        env=env,
        confinement=confinement,
        timeout=limits.lifetime,
        max_output=limits.max_output,
    )
    table = ProcessTable(limits)

    def unknown(verb: str, process_id: str) -> CallToolResult:
        # Stopped since its fact was read (a stop of another call, its lifetime's end):
        # the id is never given again, so no other process is reached.
        return error_result(f"{verb}: {_unknown(process_id)}", "unknown")

    def start(arguments: dict[str, Any], ctx: CallContext) -> CallToolResult:
        command: str = arguments["command"]
        prepared = runner.command("start", command, allowed)
        if isinstance(prepared, CallToolResult):
            return prepared
        argv, process_env = prepared
        launched = runner.launch("start", argv, process_env)
        if isinstance(launched, CallToolResult):
            return launched
        try:
            started = table.start(ctx.session_id, command, launched, cwd, process_env)
        except OSError as exc:
            return start_failure("start", argv[0], exc)
        if isinstance(started, str):
            return error_result(f"start: {started}", "limit")
        if ctx.cancelled:  # the session is closing: its close may have run already
            started.stop()
            table.forget(ctx.session_id, started.id)
            ctx.raise_if_cancelled()
        return _result({"id": started.id, "pid": started.pid, "command": started.command})

    def read(arguments: dict[str, Any], ctx: CallContext) -> CallToolResult:
        process = table.get(ctx.session_id, arguments["id"])
        if process is None:
            return unknown("read", arguments["id"])
        cap = arguments.get("max_bytes", limits.max_read)
        wait = float(arguments.get("wait", 0))
        output = process.read(cap, wait, lambda: ctx.cancelled)
        return _result(_output(process, output))

    def write(arguments: dict[str, Any], ctx: CallContext) -> CallToolResult:
        process = table.get(ctx.session_id, arguments["id"])
        if process is None:
            return unknown("write", arguments["id"])
        data = arguments["input"].encode("utf-8")
        close = bool(arguments.get("close", False))
        try:
            written = process.write(data, close, limits.max_wait, lambda: ctx.cancelled)
        except (BrokenPipeError, ValueError):
            return error_result(f"write: process {process.id} takes no more input", "closed")
        content = {"id": process.id, "written": written, "closed": close and written == len(data)}
        return _result(content, is_error=written < len(data))

    def stop(arguments: dict[str, Any], ctx: CallContext) -> CallToolResult:
        process = table.get(ctx.session_id, arguments["id"])
        if process is None:
            return unknown("stop", arguments["id"])
        process.stop()
        table.forget(ctx.session_id, process.id)
        return _result(_output(process, process.read(limits.max_read, 0, lambda: True)))

    def tool(
        name: str,
        handler: Any,
        description: str,
        properties: dict[str, Any],
        *,
        read_only: bool = False,
        timeout: float,
        facts: Mapping[str, Any] | None = None,
    ) -> Tool:
        return Tool(
            name,
            handler,
            description=description,
            input_schema={
                "type": "object",
                "properties": properties,
                "required": [k for k in properties if k in ("command", "id", "input")],
                "additionalProperties": False,
            },
            read_only=read_only,
            timeout=timeout,
            annotations={
                "readOnlyHint": read_only,
                "destructiveHint": name in ("start", "write"),
                "openWorldHint": name in ("start", "write"),
            },
            root=cwd,
            facts=dict(facts or {}),
            on_session_close=table.close_session,
        )

    programs = f" Allowed programs: {', '.join(sorted(allowed))}." if allowed else ""
    names_process = {"/id": ProcessFact(table)}
    return [
        tool(
            "start",
            start,
            "Start a long-running command in the workspace (a dev server, a watcher), "
            "without a shell, and return its id at once; read its output with "
            f"process.read, stop it with process.stop.{programs}",
            {"command": {"type": "string", "minLength": 1, "maxLength": 8192}},
            timeout=30,
            facts={"/command": CommandFact(cwd)},
        ),
        tool(
            "read",
            read,
            "The output of a started process since the last read (stdout and stderr "
            "together), at most `max_bytes`; `wait` seconds for some when there is none "
            "yet. Says whether it still runs and its exit code.",
            {
                "id": _ID,
                "max_bytes": {"type": "integer", "minimum": 1, "maximum": limits.max_read},
                "wait": {"type": "number", "minimum": 0, "maximum": limits.max_wait},
            },
            read_only=True,
            timeout=limits.max_wait + 10,
            facts=names_process,
        ),
        tool(
            "write",
            write,
            "Write `input` to a started process's stdin; `close` ends its input after it.",
            {
                "id": _ID,
                "input": {"type": "string", "maxLength": 65536},
                "close": {"type": "boolean"},
            },
            timeout=limits.max_wait + 10,
            facts=names_process,
        ),
        tool(
            "stop",
            stop,
            "Stop a started process (terminate, then kill after a grace period; what it "
            "started too) and return the output not read yet.",
            {"id": _ID},
            timeout=limits.grace + 20,
            facts=names_process,
        ),
    ]


def register_process(
    registry: ToolRegistry,
    root: str | os.PathLike[str],
    namespace: str = "process",
    **options: Any,
) -> list[Tool]:
    """Register the process tools as ``namespace.start`` ... ``namespace.stop``;
    ``options`` are those of :func:`process_tools`. Returns the registered tools."""
    return registry.register(namespace, process_tools(root, **options))
