"""A scripted Claude Code for the Claude Agent SDK: the real SDK, offline, no ``claude`` binary.

(Longer than ~500 lines on purpose: one concept, the other end of the SDK's control protocol,
which cannot be split without splitting that protocol.)

:class:`ScriptedClaudeCode` is a ``claude_agent_sdk.Transport``: the SDK talks to it as to
the Claude Code process (JSON lines of the stream-json control protocol), and it plays the
process's side from a script of tool uses. Pass it as ``transport=`` to ``query(...)`` or
``ClaudeSDKClient(options, transport=...)``::

    cli = ScriptedClaudeCode(
        [[ScriptedToolUse("Read", {"file_path": "./link/a.md"})],
         [ScriptedToolUse("Bash", {"command": "git status"})]],
        cwd=workspace,
    )
    async for message in query(prompt="...", options=adapter.options(), transport=cli):
        ...
    cli.ran          # [("Read", {...the input it ran with...}), ...]
    cli.model_saw    # {tool_use_id: the text the model was given}

What it plays, in Claude Code's order (a model of it, not Claude Code itself):

1. ``initialize``: it keeps the hook matchers the SDK registers and answers that it honors
   ``on_failure``;
2. for each scripted turn, an ``assistant`` message with the turn's ``tool_use`` blocks, then
   for each tool use: the ``PreToolUse`` hooks whose matcher fits (``hook_callback`` control
   requests; a hook that fails with ``onFailure: "block"`` denies; deny beats ask beats
   allow; the last ``updatedInput`` wins); without an allow, the tools in ``auto_allow``
   run and the others go to ``can_use_tool`` (when ``can_use_tool=True``; else denied), as
   do tools in ``ask_rules`` even after an allow; then the tool runs (``run_tool``, by
   default small built-in ``Read``, ``Write``, ``Edit``, ``Glob`` and ``Bash`` (``bash -c``
   in ``cwd``)); then the ``PostToolUse`` (or ``PostToolUseFailure``) hooks, whose
   ``updatedToolOutput`` replaces the output only when it has the original's keys and JSON
   types (Claude Code checks it against the tool's output schema; an MCP tool's is
   anything), and whose ``continue: false`` ends the run;
3. a ``user`` message with the ``tool_result`` blocks: what the model sees
   (:attr:`ScriptedClaudeCode.model_saw`);
4. a closing ``assistant`` text and a ``result``.
"""

from __future__ import annotations

import glob as _glob
import inspect
import json
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from clearance.errors import MissingExtraError as _MissingExtraError

try:
    from claude_agent_sdk import Transport
except ImportError as exc:
    raise _MissingExtraError("claude-agent-sdk", "the scripted Claude Code") from exc

__all__ = ["RunTool", "ScriptedClaudeCode", "ScriptedToolUse", "ToolFailed"]

RunTool = Callable[[str, dict[str, Any]], "Any | Awaitable[Any]"]
"""``(tool name, input) -> output`` (the tool's structured output), sync or async; raise
:class:`ToolFailed` for a tool error."""


class ToolFailed(Exception):
    """A scripted tool failed; the model sees the message as an error result."""


@dataclass(frozen=True, slots=True)
class ScriptedToolUse:
    """One tool use the scripted model makes."""

    name: str
    """Claude Code's tool name (``"Read"``, ``"Bash"``, ``"mcp__server__tool"``)."""
    input: Mapping[str, Any]
    id: str | None = None
    """The tool use id (default ``toolu_<n>``)."""


@dataclass(slots=True)
class _Decision:
    behavior: str | None = None
    reason: str = ""
    updated_input: dict[str, Any] | None = None


@dataclass(slots=True)
class _Step:
    """What became of one tool use."""

    name: str
    input: dict[str, Any]
    output: Any = None
    is_error: bool = False
    text: str = ""
    stop: str | None = None
    asked: bool = False


@dataclass(slots=True)
class _State:
    hooks: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    next_request: int = 0


_RANK = {"allow": 1, "ask": 2, "deny": 3}


class ScriptedClaudeCode(Transport):
    """Claude Code's side of the SDK's control protocol, played from a script (see the
    module docstring).

    Args:
        turns: the scripted model's turns; each a list of tool uses (run one after another).
        cwd: the working directory the tools run in and hooks are told about.
        final_text: the model's last message.
        run_tool: runs a tool; default: the small built-ins (``Read``, ``Write``, ``Edit``,
            ``Glob``, ``Bash``).
        auto_allow: tools that run without a prompt when no hook allowed or denied them
            (Claude Code's reads inside the working directory).
        ask_rules: tools that go to ``can_use_tool`` even after a hook allowed them.
        can_use_tool: whether the SDK answers permission prompts (``can_use_tool`` set);
            without it a prompt denies.
        session_id: the session id in the messages.
    """

    def __init__(
        self,
        turns: Sequence[Sequence[ScriptedToolUse]],
        *,
        cwd: str | os.PathLike[str],
        final_text: str = "Done.",
        run_tool: RunTool | None = None,
        auto_allow: Iterable[str] = ("Read", "Glob", "Grep"),
        ask_rules: Iterable[str] = (),
        can_use_tool: bool = True,
        session_id: str = "scripted-session",
    ) -> None:
        self.turns = [list(turn) for turn in turns]
        self.cwd = os.fspath(cwd)
        self.final_text = final_text
        self.run_tool: RunTool = run_tool if run_tool is not None else self.builtin_tool
        self.auto_allow = frozenset(auto_allow)
        self.ask_rules = frozenset(ask_rules)
        self.can_use_tool = can_use_tool
        self.session_id = session_id
        self.ran: list[tuple[str, dict[str, Any]]] = []
        """Every tool run, with the input it ran with."""
        self.model_saw: dict[str, str] = {}
        """Each tool use's result, as the model was given it."""
        self.outputs: dict[str, Any] = {}
        """Each tool use's output after the hooks (what Claude Code keeps)."""
        self.requests: list[dict[str, Any]] = []
        """The control requests sent to the SDK, each with the ``response`` it got."""
        self.stop_reason: str | None = None
        self._state = _State()
        self._inbox_send: MemoryObjectSendStream[dict[str, Any] | None] | None = None
        self._inbox: MemoryObjectReceiveStream[dict[str, Any] | None] | None = None
        self._deferred: list[dict[str, Any]] = []
        self._ids = 0
        self._ready = False
        self._playing = False

    # -- Transport ------------------------------------------------------------------------

    async def connect(self) -> None:
        self._inbox_send, self._inbox = anyio.create_memory_object_stream[dict[str, Any] | None](
            1000
        )
        self._ready = True

    async def write(self, data: str) -> None:
        if self._inbox_send is None:
            raise RuntimeError("the scripted Claude Code is not connected")
        for line in data.splitlines():
            if line.strip():
                await self._inbox_send.send(json.loads(line))

    def read_messages(self) -> AsyncIterator[dict[str, Any]]:
        return self._play()

    async def end_input(self) -> None:
        if self._inbox_send is not None:
            await self._inbox_send.send(None)

    async def close(self) -> None:
        self._ready = False
        if self._inbox_send is not None:
            self._inbox_send.close()
        if self._inbox is not None and not self._playing:
            self._inbox.close()

    def is_ready(self) -> bool:
        return self._ready

    # -- the process ----------------------------------------------------------------------

    async def _play(self) -> AsyncIterator[dict[str, Any]]:
        assert self._inbox is not None
        self._playing = True
        try:
            async for message in self._inbox:
                if message is None:  # stdin closed
                    return
                kind = message.get("type")
                if kind == "control_request":
                    yield self._answer(message)
                elif kind == "user":
                    async for out in self._prompt_submitted(message):
                        yield out
                    async for out in self._conversation():
                        yield out
        finally:
            self._playing = False
            self._inbox.close()

    def _answer(self, message: Mapping[str, Any]) -> dict[str, Any]:
        request = message.get("request", {})
        body: dict[str, Any] = {}
        if request.get("subtype") == "initialize":
            self._state.hooks = dict(request.get("hooks") or {})
            body = {
                "commands": [],
                "models": [],
                "hook_on_failure_supported": True,
                "hooks_applied": True,
            }
        return {
            "type": "control_response",
            "response": {
                "subtype": "success",
                "request_id": message.get("request_id"),
                "response": body,
            },
        }

    async def _conversation(self) -> AsyncIterator[dict[str, Any]]:
        turns, self.turns = self.turns, []
        for number, turn in enumerate(turns, 1):
            uses = [(use.id or self._tool_use_id(), use) for use in turn]
            yield self._assistant(
                [
                    {"type": "tool_use", "id": tid, "name": use.name, "input": dict(use.input)}
                    for tid, use in uses
                ],
                f"msg_{number}",
            )
            results = []
            stop: str | None = None
            for tid, use in uses:
                step = _Step(use.name, dict(use.input))
                async for out in self._tool_use(tid, step):
                    yield out
                self.model_saw[tid] = step.text
                results.append(
                    {
                        "type": "tool_result",
                        "tool_use_id": tid,
                        "content": step.text,
                        "is_error": step.is_error,
                    }
                )
                stop = stop or step.stop
            yield {
                "type": "user",
                "message": {"role": "user", "content": results},
                "parent_tool_use_id": None,
                "session_id": self.session_id,
            }
            if stop is not None:
                self.stop_reason = stop
                yield self._result(len(turns), stop_reason=stop)
                return
        yield self._assistant([{"type": "text", "text": self.final_text}], "msg_final")
        yield self._result(len(turns))

    async def _prompt_submitted(self, message: Mapping[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """Claude Code's ``UserPromptSubmit`` hooks, with the prompt the user sent."""
        content = message.get("message", {}).get("content")
        if not isinstance(content, str):
            return
        for callback_id, _ in self._callbacks("UserPromptSubmit", ""):
            reply: dict[str, Any] = {}
            hook_input = {
                "session_id": self.session_id,
                "transcript_path": "",
                "cwd": self.cwd,
                "permission_mode": "default",
                "hook_event_name": "UserPromptSubmit",
                "prompt": content,
            }
            async for out in self._request(
                {"subtype": "hook_callback", "callback_id": callback_id, "input": hook_input},
                reply,
            ):
                yield out

    async def _tool_use(self, tid: str, step: _Step) -> AsyncIterator[dict[str, Any]]:
        decision = _Decision()
        for callback_id, matcher in self._callbacks("PreToolUse", step.name):
            reply: dict[str, Any] = {}
            async for out in self._request(
                {
                    "subtype": "hook_callback",
                    "callback_id": callback_id,
                    "input": self._hook_input("PreToolUse", tid, step),
                    "tool_use_id": tid,
                },
                reply,
            ):
                yield out
            _merge_pre(decision, reply, matcher)
        if decision.updated_input is not None:
            step.input = decision.updated_input
        if decision.behavior == "deny":
            step.is_error, step.text = True, decision.reason or f"{step.name} was denied by a hook"
            return
        prompt = step.name in self.ask_rules or (
            decision.behavior != "allow" and step.name not in self.auto_allow
        )
        if prompt:
            step.asked = True
            if not self.can_use_tool:
                step.is_error, step.text = True, f"permission to use {step.name} was not granted"
                return
            reply = {}
            async for out in self._request(
                {
                    "subtype": "can_use_tool",
                    "tool_name": step.name,
                    "input": step.input,
                    "tool_use_id": tid,
                    "permission_suggestions": [],
                },
                reply,
            ):
                yield out
            answer = reply.get("response", {})
            if reply.get("subtype") != "success" or answer.get("behavior") != "allow":
                step.is_error = True
                step.text = str(answer.get("message") or reply.get("error") or "denied")
                return
            step.input = dict(answer.get("updatedInput", step.input))
        async for out in self._run(tid, step):
            yield out

    async def _run(self, tid: str, step: _Step) -> AsyncIterator[dict[str, Any]]:
        self.ran.append((step.name, dict(step.input)))
        try:
            output = self.run_tool(step.name, dict(step.input))
            if inspect.isawaitable(output):
                output = await output
        except ToolFailed as exc:
            step.is_error, step.text = True, str(exc)
            for callback_id, _ in self._callbacks("PostToolUseFailure", step.name):
                hook_input = self._hook_input("PostToolUseFailure", tid, step)
                hook_input["error"] = str(exc)
                async for out in self._request(
                    {"subtype": "hook_callback", "callback_id": callback_id, "input": hook_input},
                    {},
                ):
                    yield out
            return
        for callback_id, matcher in self._callbacks("PostToolUse", step.name):
            hook_input = self._hook_input("PostToolUse", tid, step)
            hook_input["tool_response"] = output
            reply: dict[str, Any] = {}
            async for out in self._request(
                {
                    "subtype": "hook_callback",
                    "callback_id": callback_id,
                    "input": hook_input,
                    "tool_use_id": tid,
                },
                reply,
            ):
                yield out
            if reply.get("subtype") != "success":
                if matcher.get("onFailure") == "block":
                    step.stop = f"a PostToolUse hook failed: {reply.get('error')}"
                continue
            body = reply.get("response", {})
            specific = body.get("hookSpecificOutput") or {}
            if "updatedToolOutput" in specific and _fits(
                step.name, output, specific["updatedToolOutput"]
            ):
                output = specific["updatedToolOutput"]
            if body.get("continue") is False:
                step.stop = str(body.get("stopReason") or "a hook stopped the run")
        self.outputs[tid] = output
        step.output, step.text = output, render(step.name, output)

    # -- control requests -----------------------------------------------------------------

    async def _request(
        self, request: dict[str, Any], reply: dict[str, Any]
    ) -> AsyncIterator[dict[str, Any]]:
        """Send one control request and wait for its response (put in ``reply``)."""
        assert self._inbox is not None
        self._state.next_request += 1
        request_id = f"cli_req_{self._state.next_request}"
        yield {"type": "control_request", "request_id": request_id, "request": request}
        async for message in self._inbox:
            if message is None:
                break
            if message.get("type") == "control_request":
                yield self._answer(message)
                continue
            response = message.get("response", {})
            if message.get("type") == "control_response" and response.get("request_id") == (
                request_id
            ):
                reply.update(response)
                break
        self.requests.append({**request, "response": dict(reply)})

    def _callbacks(self, event: str, tool: str) -> list[tuple[str, dict[str, Any]]]:
        found: list[tuple[str, dict[str, Any]]] = []
        for matcher in self._state.hooks.get(event) or []:
            pattern = matcher.get("matcher")
            if pattern in (None, "", "*") or re.fullmatch(str(pattern), tool):
                found.extend((cid, matcher) for cid in matcher.get("hookCallbackIds", []))
        return found

    def _hook_input(self, event: str, tid: str, step: _Step) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "transcript_path": "",
            "cwd": self.cwd,
            "permission_mode": "default",
            "prompt_id": "prompt-1",
            "hook_event_name": event,
            "tool_name": step.name,
            "tool_input": dict(step.input),
            "tool_use_id": tid,
        }

    # -- messages -------------------------------------------------------------------------

    def _tool_use_id(self) -> str:
        self._ids += 1
        return f"toolu_{self._ids:02d}"

    def _assistant(self, content: list[dict[str, Any]], message_id: str) -> dict[str, Any]:
        return {
            "type": "assistant",
            "message": {
                "id": message_id,
                "role": "assistant",
                "model": "scripted",
                "content": content,
            },
            "parent_tool_use_id": None,
            "session_id": self.session_id,
        }

    def _result(self, turns: int, *, stop_reason: str | None = None) -> dict[str, Any]:
        return {
            "type": "result",
            "subtype": "success",
            "duration_ms": 0,
            "duration_api_ms": 0,
            "is_error": False,
            "num_turns": turns,
            "session_id": self.session_id,
            "stop_reason": stop_reason,
            "result": stop_reason or self.final_text,
        }

    # -- the built-in tools ---------------------------------------------------------------

    async def builtin_tool(self, name: str, tool_input: dict[str, Any]) -> Any:
        """Small stand-ins for Claude Code's ``Read``, ``Write``, ``Edit``, ``Glob`` and
        ``Bash``, with their output shapes."""
        if name == "Bash":
            done = await anyio.run_process(
                ["bash", "-c", str(tool_input["command"])], cwd=self.cwd, check=False
            )
            return {
                "stdout": done.stdout.decode(errors="replace"),
                "stderr": done.stderr.decode(errors="replace"),
                "interrupted": False,
            }
        return await anyio.to_thread.run_sync(self._file_tool, name, tool_input)

    def _file_tool(self, name: str, tool_input: dict[str, Any]) -> Any:
        if name == "Glob":
            base = self._path(tool_input.get("path", "."))
            found = sorted(_glob.glob(str(tool_input["pattern"]), root_dir=base))
            return {"filenames": found, "numFiles": len(found), "durationMs": 0, "truncated": False}
        if name not in ("Read", "Write", "Edit"):
            raise ToolFailed(f"the scripted Claude Code does not run {name}; pass run_tool=")
        path = self._path(tool_input["file_path"])
        if name == "Write":
            with open(path, "w", encoding="utf-8") as f:
                f.write(str(tool_input["content"]))
            return {"type": "create", "filePath": path, "content": tool_input["content"]}
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            raise ToolFailed(f"cannot read {path}: {exc.strerror}") from None
        if name == "Read":
            lines = len(text.splitlines())
            return {
                "type": "text",
                "file": {
                    "filePath": path,
                    "content": text,
                    "numLines": lines,
                    "startLine": 1,
                    "totalLines": lines,
                },
            }
        old, new = str(tool_input["old_string"]), str(tool_input["new_string"])
        if old not in text:
            raise ToolFailed(f"old_string not found in {path}")
        count = -1 if tool_input.get("replace_all") else 1
        with open(path, "w", encoding="utf-8") as f:
            f.write(text.replace(old, new, count))
        return {"filePath": path, "oldString": old, "newString": new}

    def _path(self, value: Any) -> str:
        return os.path.join(self.cwd, str(value))


def _merge_pre(decision: _Decision, reply: Mapping[str, Any], matcher: Mapping[str, Any]) -> None:
    """Fold one ``PreToolUse`` hook's answer into the decision: deny beats ask beats allow;
    a failed hook with ``onFailure: "block"`` denies."""
    if reply.get("subtype") != "success":
        if matcher.get("onFailure") == "block":
            decision.behavior, decision.reason = "deny", f"a hook failed: {reply.get('error')}"
        return
    specific = reply.get("response", {}).get("hookSpecificOutput") or {}
    behavior = specific.get("permissionDecision")
    if behavior in _RANK and _RANK[behavior] >= _RANK.get(decision.behavior or "", 0):
        decision.behavior = behavior
        decision.reason = str(specific.get("permissionDecisionReason", ""))
    if isinstance(specific.get("updatedInput"), dict):
        decision.updated_input = dict(specific["updatedInput"])


def _fits(tool: str, original: Any, updated: Any) -> bool:
    """Whether Claude Code would take ``updated`` in place of ``original``: an MCP tool's
    output may be anything; a built-in's must fit its output schema, here: the original's
    keys and JSON types."""
    if tool.startswith("mcp__"):
        return True
    return bool(_shape(original) == _shape(updated))


def _shape(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return "list"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return type(value).__name__


def render(tool: str, output: Any) -> str:
    """The text a model is given for a tool's output."""
    if isinstance(output, str):
        return output
    if isinstance(output, dict):
        if tool == "Bash":
            return "\n".join(p for p in (output.get("stdout"), output.get("stderr")) if p)
        file = output.get("file")
        if tool == "Read" and isinstance(file, dict):
            return str(file.get("content", ""))
        if tool == "Glob":
            return "\n".join(map(str, output.get("filenames", [])))
    return json.dumps(output, ensure_ascii=False)
