"""clearance in a LangGraph graph, offline: a scripted fake chat model stands in for the LLM.

    pip install 'clearance[langgraph]' && python examples/langgraph_example.py

The model reads a file through a symlink (allowed: the tool gets the resolved path), tries
a file no rule allows (denied: the model sees why), and writes a file (asked: the graph
pauses with an interrupt; a person answers allow_session with Command(resume=...), and the
graph, resumed from its checkpoint, runs the calls).
"""

import tempfile
from pathlib import Path
from typing import Any

import anyio
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import tools_condition
from langgraph.types import Command

from clearance import Harness, MemoryJournal, Principal, ToolRegistry
from clearance.integrations.langgraph import ClearanceToolNode, register_tools
from clearance.policy import LocalEvaluator

CALLS = [
    ("read_file", {"path": "./link/a.md"}, "read-1"),
    ("read_file", {"path": ".env"}, "read-2"),
    ("write_file", {"path": "docs/notes.md", "text": "hi"}, "write-1"),
]
MODEL = GenericFakeChatModel(
    messages=iter(
        [
            AIMessage("", tool_calls=[{"name": n, "args": a, "id": i} for n, a, i in CALLS]),
            AIMessage("Read the docs and wrote the notes."),
        ]
    )
)


async def agent(state: MessagesState) -> dict[str, Any]:
    return {"messages": [await MODEL.ainvoke(state["messages"])]}


async def main(ws: Path) -> None:
    (ws / "docs").mkdir()
    (ws / "docs" / "a.md").write_text("alpha")
    (ws / ".env").write_text("TOKEN=not-for-the-model")
    (ws / "link").symlink_to("docs")

    @tool
    def read_file(path: str) -> str:
        """Read a text file in the workspace."""
        return (ws / path).read_text()

    @tool
    def write_file(path: str, text: str) -> str:
        """Write a text file in the workspace."""
        (ws / path).write_text(text)
        return f"wrote {path}"

    registry = ToolRegistry()
    facts = {"read_file": {"/path": "path"}, "write_file": {"/path": "path"}}
    # Declared once: what the declaration returns is what the node runs.
    tools = register_tools(registry, "files", [read_file, write_file], root=ws, facts=facts)
    evaluator = LocalEvaluator(
        allow=["files.read_file(path=docs/**)"], ask=["files.write_file(path=docs/**)"]
    )
    journal = MemoryJournal()
    async with Harness(registry, evaluator=evaluator, journal=journal) as harness:
        session = await harness.create_session(principal=Principal("User", "alice"))
        builder = StateGraph(MessagesState)
        builder.add_node("agent", agent)
        node = ClearanceToolNode(tools, session=session)
        builder.add_node("tools", node)
        builder.add_edge(START, "agent")
        builder.add_conditional_edges("agent", tools_condition)
        builder.add_edge("tools", "agent")
        graph = builder.compile(checkpointer=InMemorySaver())
        config: Any = {"configurable": {"thread_id": "1"}}

        # The run starts through the node: its input is the user's (rule R14).
        start = {"messages": [HumanMessage("Summarize the docs")]}
        state = await node.run(graph, start, config)
        while "__interrupt__" in state:  # clearance asked: nothing has run yet
            answers = {}
            for ask in state["__interrupt__"][0].value["clearance"]:
                print(f"asked    {ask['call_id']}: {ask['tool']} {ask['arguments']}")
                answers[ask["ask_id"]] = {"decision": "allow_session", "by": "alice"}
            state = await graph.ainvoke(Command(resume=answers), config)
        for message in state["messages"]:
            if isinstance(message, ToolMessage):
                print(f"model    saw {message.tool_call_id}: {message.content} ({message.status})")
        print(f"model    {state['messages'][-1].content}")

    for event in journal.events():
        if event.type == "call_decided" and event.data["outcome"] != "pending":
            asked = event.data.get("ask") or {}
            by = f" by {asked['answered_by']} via {asked['via']}" if asked.get("via") else ""
            print(f"journal  {event.call_id}: {event.data['outcome']}{by}")
        elif event.type == "tool_started":
            print(f"journal  {event.call_id}: ran with {event.data['arguments']}")


with tempfile.TemporaryDirectory() as tmp:
    anyio.run(main, Path(tmp))
