"""clearance behind an OpenAI Agents SDK agent, offline: a scripted model stands in for the LLM.

    pip install 'clearance[openai-agents]' && python examples/openai_agents_example.py

The agent reads a file through a symlink (allowed: the tool gets the resolved path), tries
a file no rule allows (denied: the model sees why), and writes a file (asked: the SDK run
pauses with an interruption, a person answers allow_session, the run resumes).
"""

import json
import tempfile
from pathlib import Path
from typing import Any

import anyio
from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from clearance import Harness, MemoryJournal, Principal, ToolRegistry
from clearance.integrations.openai_agents import AgentsGuard, register_function_tools
from clearance.policy import LocalEvaluator


class ScriptedModel(Model):
    """The SDK's Model interface, answering from a script instead of an API (no key)."""

    def __init__(self, *turns: list[Any]) -> None:
        self.turns = list(turns)
        self.seen: list[Any] = []

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        self.seen = kwargs["input"]  # what the model was sent: the tool outputs among it
        return ModelResponse(output=self.turns.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def call(name: str, arguments: dict[str, Any], call_id: str) -> ResponseFunctionToolCall:
    args = json.dumps(arguments)
    return ResponseFunctionToolCall(
        id=call_id, call_id=call_id, type="function_call", name=name, arguments=args
    )


def say(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id="m",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(text=text, type="output_text", annotations=[], logprobs=[])],
    )


async def main(ws: Path) -> None:
    (ws / "docs").mkdir()
    (ws / "docs" / "a.md").write_text("alpha")
    (ws / ".env").write_text("TOKEN=not-for-the-model")
    (ws / "link").symlink_to("docs")

    @function_tool
    def read_file(path: str) -> str:
        """Read a text file in the workspace."""
        return (ws / path).read_text()

    @function_tool
    def write_file(path: str, text: str) -> str:
        """Write a text file in the workspace."""
        (ws / path).write_text(text)
        return f"wrote {path}"

    registry = ToolRegistry()
    facts = {"read_file": {"/path": "path"}, "write_file": {"/path": "path"}}
    # Declared once: what the declaration returns is what the guard wraps.
    tools = register_function_tools(
        registry, "files", [read_file, write_file], root=ws, facts=facts
    )
    evaluator = LocalEvaluator(
        allow=["files.read_file(path=docs/**)"], ask=["files.write_file(path=docs/**)"]
    )
    journal = MemoryJournal()
    async with Harness(registry, evaluator=evaluator, journal=journal) as harness:
        session = await harness.create_session(principal=Principal("User", "alice"))
        guard = AgentsGuard(session, approver="alice")
        model = ScriptedModel(
            [
                call("read_file", {"path": "./link/a.md"}, "read-1"),
                call("read_file", {"path": ".env"}, "read-2"),
                call("write_file", {"path": "docs/notes.md", "text": "hello"}, "write-1"),
            ],
            [say("Read the docs and wrote the notes.")],
        )
        agent = Agent(name="coder", model=model, tools=guard.wrap(tools))

        # The run starts through the guard: its input is the user's (rule R14).
        result = await guard.run(agent, "Summarize the docs into docs/notes.md")
        while result.interruptions:  # clearance asked: a person answers through the SDK
            state = result.to_state()
            for item in result.interruptions:
                ask = guard.pending_ask(item)
                assert ask is not None
                print(f"asked    {item.call_id}: {ask.tool} {ask.arguments} ({ask.reason})")
                await guard.answer(state, item, "allow_session")
            result = await Runner.run(agent, state)
        for item in model.seen:
            if isinstance(item, dict) and item.get("type") == "function_call_output":
                print(f"model    saw {item['call_id']}: {item['output']}")
        print(f"model    {result.final_output}")

    for event in journal.events():
        if event.type == "call_decided" and event.data["outcome"] != "pending":
            asked = event.data.get("ask") or {}
            by = f" by {asked['answered_by']} via {asked['via']}" if asked.get("via") else ""
            print(f"journal  {event.call_id}: {event.data['outcome']}{by}")
        elif event.type == "tool_started":
            print(f"journal  {event.call_id}: ran with {event.data['arguments']}")


set_tracing_disabled(True)  # offline: no trace export
with tempfile.TemporaryDirectory() as tmp:
    anyio.run(main, Path(tmp))
