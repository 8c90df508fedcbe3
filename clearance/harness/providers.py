"""Model providers and agent runs.

A provider is the model: given the conversation so far, it returns text and/or tool calls.
:class:`ScriptedProvider` replays a JSON script offline, for demos, tests and policy
checks::

    {"turns": [{"tool_calls": [{"id": "lookup-1", "name": "files__read_file",
                                "args": {"path": "notes.txt"}}]},
               {"text": "Done."}]}

A :class:`Run` drives a session: each turn's tool calls go through the pipeline (those of
one turn concurrently; the dispatcher orders them), their results, errors included, go
back to the provider in the next turn, and the run ends with the provider's text.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import anyio

from clearance.errors import ScriptError

if TYPE_CHECKING:
    from clearance.harness.journal import EventItem
    from clearance.harness.outcomes import CallOutcome
    from clearance.harness.session import Session

__all__ = ["Provider", "ProviderTurn", "Run", "RunResult", "ScriptedProvider", "ToolCallRequest"]


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    """A tool call the model asked for."""

    id: str
    name: str
    arguments: Any


@dataclass(frozen=True, slots=True)
class ProviderTurn:
    """What the model said in one turn."""

    text: str | None = None
    tool_calls: tuple[ToolCallRequest, ...] = ()


@runtime_checkable
class Provider(Protocol):
    """The model. ``next_turn`` may be sync or async; ``conversation`` is a list of
    messages: ``{"role": "user", "content": ...}``, ``{"role": "assistant", "text": ...,
    "tool_calls": [...]}``, ``{"role": "tool", "call_id": ..., "name": ..., "content":
    ..., "is_error": ...}``."""

    def next_turn(self, conversation: list[dict[str, Any]]) -> Any: ...


class ScriptedProvider:
    """Replays a script of turns, ignoring what the tools return.

    Args:
        turns: the parsed ``turns`` list.
        alias_prefix: a prefix stripped from tool names, for scripts written for other
            harnesses (``"mcp__sdk__"`` turns ``mcp__sdk__files__read_file`` into
            ``files__read_file``).

    Raises:
        ScriptError: the script is malformed or reuses a call id (naming turn and call).
    """

    def __init__(self, turns: Iterable[Mapping[str, Any]], *, alias_prefix: str | None = None):
        self.alias_prefix = alias_prefix
        self.turns: list[ProviderTurn] = []
        seen: set[str] = set()
        if isinstance(turns, str | bytes) or not isinstance(turns, Iterable):
            raise ScriptError("'turns' must be a list")
        for index, raw in enumerate(turns):
            self.turns.append(self._parse_turn(index, raw, seen))
        self._next = 0

    @classmethod
    def from_dict(cls, script: Any, *, alias_prefix: str | None = None) -> ScriptedProvider:
        if not isinstance(script, Mapping) or not isinstance(script.get("turns"), list):
            raise ScriptError('a script must be a JSON object with a "turns" list')
        unknown = set(script) - {"turns", "alias_prefix", "description", "prompt"}
        if unknown:
            raise ScriptError(f"unknown top-level key(s): {', '.join(sorted(unknown))}")
        prefix = alias_prefix if alias_prefix is not None else script.get("alias_prefix")
        return cls(script["turns"], alias_prefix=prefix)

    @classmethod
    def from_file(cls, path: str | Path, *, alias_prefix: str | None = None) -> ScriptedProvider:
        """The script in the JSON file ``path``.

        Raises:
            ScriptError: the file cannot be read, is not UTF-8 JSON, is nested too deeply
                for the JSON parser, or is not a script.
        """
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ScriptError(f"cannot read script {str(path)!r}: {exc.strerror}") from None
        except UnicodeDecodeError as exc:
            raise ScriptError(f"{path}: not UTF-8 text (byte {exc.start})") from None
        try:
            script = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ScriptError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
        except RecursionError:
            raise ScriptError(f"{path}: nested too deeply to read") from None
        return cls.from_dict(script, alias_prefix=alias_prefix)

    def _parse_turn(self, index: int, raw: Any, seen: set[str]) -> ProviderTurn:
        if not isinstance(raw, Mapping):
            raise ScriptError("a turn must be a JSON object", turn=index)
        unknown = set(raw) - {"text", "tool_calls"}
        if unknown:
            raise ScriptError(f"unknown key(s) {', '.join(sorted(unknown))}", turn=index)
        text = raw.get("text")
        if text is not None and not isinstance(text, str):
            raise ScriptError("'text' must be a string", turn=index)
        calls_raw = raw.get("tool_calls", [])
        if not isinstance(calls_raw, list):
            raise ScriptError("'tool_calls' must be a list", turn=index)
        if text is None and not calls_raw:
            raise ScriptError("a turn needs 'text' or 'tool_calls'", turn=index)
        calls: list[ToolCallRequest] = []
        for c in calls_raw:
            if not isinstance(c, Mapping):
                raise ScriptError("a tool call must be a JSON object", turn=index)
            call_id = c.get("id")
            if not isinstance(call_id, str) or not call_id:
                raise ScriptError("a tool call needs a non-empty string 'id'", turn=index)
            extra = set(c) - {"id", "name", "args", "arguments"}
            if extra:
                raise ScriptError(
                    f"unknown key(s) {', '.join(sorted(extra))}", turn=index, call_id=call_id
                )
            if call_id in seen:
                raise ScriptError(
                    "this call id is used twice in the script", turn=index, call_id=call_id
                )
            seen.add(call_id)
            name = c.get("name")
            if not isinstance(name, str) or not name:
                raise ScriptError("a tool call needs a string 'name'", turn=index, call_id=call_id)
            if self.alias_prefix and name.startswith(self.alias_prefix):
                name = name[len(self.alias_prefix) :]
            args = c.get("args", c.get("arguments", {}))
            calls.append(ToolCallRequest(call_id, name, args))
        return ProviderTurn(text, tuple(calls))

    def check(self, tool_names: Iterable[str]) -> None:
        """Raise ``ScriptError`` for the first call naming a tool not in ``tool_names``."""
        names = set(tool_names)
        for index, turn in enumerate(self.turns):
            for c in turn.tool_calls:
                if c.name not in names:
                    raise ScriptError(f"unknown tool {c.name!r}", turn=index, call_id=c.id)

    def next_turn(self, conversation: list[dict[str, Any]]) -> ProviderTurn:
        if self._next >= len(self.turns):
            return ProviderTurn(text="")
        turn = self.turns[self._next]
        self._next += 1
        return turn


@dataclass(slots=True)
class RunResult:
    """How a run ended: the final text and every call with its outcome."""

    text: str
    calls: list[CallOutcome] = field(default_factory=list)
    turns: int = 0
    conversation: list[dict[str, Any]] = field(default_factory=list)


class Run:
    """An agent run. Iterate :meth:`events` to watch it, or just ``await run.result()``."""

    def __init__(self, session: Session, prompt: str, provider: Provider, *, max_turns: int = 50):
        self.session = session
        self.provider = provider
        self.max_turns = max_turns
        self.conversation: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
        self._result: RunResult | None = None
        self._stream = session.events()
        self._started = False

    async def events(self) -> AsyncIterator[EventItem]:
        """The session's events as the run produces them, turn by turn; ends with the run."""
        async for batch in self._drive():
            for item in batch:
                yield item

    async def result(self) -> RunResult:
        async for _ in self._drive():
            pass
        assert self._result is not None
        return self._result

    async def _drive(self) -> AsyncIterator[list[EventItem]]:
        if self._started:
            if self._result is None:
                raise RuntimeError("this run is already being driven elsewhere")
            return
        self._started = True
        check = getattr(self.provider, "check", None)
        if check is not None:
            check(self.session.tools)
        calls: list[CallOutcome] = []
        text = ""
        turns = 0
        try:
            for turn_index in range(self.max_turns):
                turns += 1
                turn_id = f"t{turn_index + 1}"
                reply: Any = self.provider.next_turn(list(self.conversation))
                if inspect.isawaitable(reply):
                    reply = await reply
                if not isinstance(reply, ProviderTurn):
                    raise TypeError(f"provider returned {reply!r}, not a ProviderTurn")
                self.conversation.append(
                    {
                        "role": "assistant",
                        "text": reply.text,
                        "tool_calls": [
                            {"id": c.id, "name": c.name, "arguments": c.arguments}
                            for c in reply.tool_calls
                        ],
                    }
                )
                if not reply.tool_calls:
                    text = reply.text or ""
                    break
                outcomes: dict[str, CallOutcome] = {}

                async def one(
                    c: ToolCallRequest,
                    turn_id: str = turn_id,
                    outcomes: dict[str, CallOutcome] = outcomes,
                ) -> None:
                    outcomes[c.id] = await self.session.call_tool(
                        c.name, c.arguments, call_id=c.id, turn_id=turn_id
                    )

                async with anyio.create_task_group() as tg:
                    for c in reply.tool_calls:
                        tg.start_soon(one, c)
                for c in reply.tool_calls:
                    outcome = outcomes[c.id]
                    calls.append(outcome)
                    self.conversation.append(
                        {
                            "role": "tool",
                            "call_id": c.id,
                            "name": c.name,
                            "content": outcome.text,
                            "is_error": outcome.is_error,
                            "status": outcome.status,
                        }
                    )
                yield self._stream.receive_ready()
            else:
                text = "(stopped: the run reached max_turns)"
            self._result = RunResult(text, calls, turns, self.conversation)
            yield self._stream.receive_ready()
        finally:
            await self._stream.aclose()
