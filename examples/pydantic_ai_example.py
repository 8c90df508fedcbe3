"""clearance behind a PydanticAI agent, offline: a FunctionModel stands in for the LLM.

    pip install 'clearance[pydantic-ai]' && python examples/pydantic_ai_example.py

The agent reads a file through a symlink (allowed: the tool gets the resolved path), tries
a file no rule allows (denied: the model sees why), and writes a file (asked: the run ends
with DeferredToolRequests, a person answers allow_session, the run resumes).
"""

import tempfile
from pathlib import Path
from typing import Any

import anyio
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests

from clearance import Harness, MemoryJournal, Principal, ToolRegistry
from clearance.integrations.pydantic_ai import (
    ClearanceToolset,
    deferred_results,
    register_toolset,
)
from clearance.policy import LocalEvaluator

TURNS = [
    [
        ToolCallPart("read_file", {"path": "./link/a.md"}, tool_call_id="read-1"),
        ToolCallPart("read_file", {"path": ".env"}, tool_call_id="read-2"),
        ToolCallPart("write_file", {"path": "docs/notes.md", "text": "hi"}, tool_call_id="write-1"),
    ],
]


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The model: the scripted tool calls, then a summary; prints what it is shown."""
    for part in messages[-1].parts:
        if isinstance(part, ToolReturnPart):
            print(f"model    saw {part.tool_call_id}: {part.content} ({part.outcome})")
    if TURNS:
        return ModelResponse(parts=TURNS.pop(0))
    return ModelResponse(parts=[TextPart("Read the docs and wrote the notes.")])


async def main(ws: Path) -> None:
    (ws / "docs").mkdir()
    (ws / "docs" / "a.md").write_text("alpha")
    (ws / ".env").write_text("TOKEN=not-for-the-model")
    (ws / "link").symlink_to("docs")

    def read_file(path: str) -> str:
        """Read a text file in the workspace."""
        return (ws / path).read_text()

    def write_file(path: str, text: str) -> str:
        """Write a text file in the workspace."""
        (ws / path).write_text(text)
        return f"wrote {path}"

    registry = ToolRegistry()
    facts = {"read_file": {"/path": "path"}, "write_file": {"/path": "path"}}
    # Declared once: what the declaration returns is what the toolset wraps.
    tools = register_toolset(registry, "files", [read_file, write_file], root=ws, facts=facts)
    evaluator = LocalEvaluator(
        allow=["files.read_file(path=docs/**)"], ask=["files.write_file(path=docs/**)"]
    )
    journal = MemoryJournal()
    async with Harness(registry, evaluator=evaluator, journal=journal) as harness:
        session = await harness.create_session(principal=Principal("User", "alice"))
        guarded = ClearanceToolset(tools, session=session)
        agent = Agent(
            FunctionModel(scripted), toolsets=[guarded], output_type=[str, DeferredToolRequests]
        )

        # The run starts through the toolset: its prompt is the user's (rule R14).
        result = await guarded.run(agent, "Summarize the docs into docs/notes.md")
        while isinstance(result.output, DeferredToolRequests):  # clearance asked
            answers: dict[str, Any] = {}
            for call in result.output.approvals:
                ask = result.output.metadata[call.tool_call_id]["clearance"]
                print(f"asked    {call.tool_call_id}: {ask['tool']} {ask['arguments']}")
                answers[call.tool_call_id] = "allow_session"
            result = await agent.run(
                message_history=result.all_messages(),
                deferred_tool_results=deferred_results(result.output, answers, by="alice"),
            )
        print(f"model    {result.output}")

    for event in journal.events():
        if event.type == "call_decided" and event.data["outcome"] != "pending":
            asked = event.data.get("ask") or {}
            by = f" by {asked['answered_by']} via {asked['via']}" if asked.get("via") else ""
            print(f"journal  {event.call_id}: {event.data['outcome']}{by}")
        elif event.type == "tool_started":
            print(f"journal  {event.call_id}: ran with {event.data['arguments']}")


with tempfile.TemporaryDirectory() as tmp:
    anyio.run(main, Path(tmp))
