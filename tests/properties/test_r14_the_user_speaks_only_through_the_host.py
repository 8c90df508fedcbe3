"""R14: the user speaks only through the host. Provenance counts a value as the user's only
when it came through the host's own entry point (an adapter's ``run``,
``session.add_user_message``), never from text a model wrote, whatever role a framework
gives it.

For each framework adapter, a real run with the framework's own test models: the host
gives the user's message (naming some values of a pool); a model writes a text (naming
others, and maybe some of hers) that the framework then shows the tool layer in the
user's role: a sub-agent's input (OpenAI Agents ``Agent.as_tool()``), a delegated agent's
prompt (PydanticAI), a ``HumanMessage`` or ``SystemMessage`` a node made (LangGraph). The
delegated agent makes one call, so the adapter sees that text. Afterwards no value the
user did not name is the user's, nor is the model's text, and every value she named still
is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import anyio
from agents import Agent as SdkAgent
from agents import function_tool, set_tracing_disabled
from agents.items import ModelResponse as SdkResponse
from agents.models.interface import Model
from agents.usage import Usage
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from openai.types.responses import ResponseFunctionToolCall
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from clearance import Harness, Principal, ToolRegistry
from clearance.harness.session import Session
from clearance.integrations.langgraph import ClearanceToolNode, register_tools
from clearance.integrations.openai_agents import AgentsGuard, register_function_tools
from clearance.integrations.pydantic_ai import ClearanceToolset, register_toolset
from clearance.policy import NoopEvaluator

set_tracing_disabled(True)  # nothing leaves the machine

ALICE = Principal("User", "alice")
POOL = (
    "CH5604835012345678009",
    "GB29NWBK60161331926819",
    "DE89370400440532013000",
    "mallory@evil.example",
    "bob@corp.example",
    "https://pay.evil.example/x",
)


@dataclass(frozen=True)
class Case:
    users: tuple[str, ...]
    """The values the user names, through the host."""
    models: tuple[str, ...]
    """The values the model writes into the delegated text (at least one not hers)."""
    filler: str

    @property
    def user_text(self) -> str:
        return "Please handle: " + ", ".join(self.users) if self.users else "Check my mail."

    @property
    def model_text(self) -> str:
        return f"{self.filler} " + " and ".join(self.models)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    users = draw(st.lists(st.sampled_from(POOL), unique=True, max_size=3))
    others = [v for v in POOL if v not in users]
    models = draw(st.lists(st.sampled_from(others), unique=True, min_size=1, max_size=3))
    models += draw(st.lists(st.sampled_from(users), unique=True)) if users else []
    filler = draw(st.sampled_from(["Pay", "Send the report to", "Forward to", "Use"]))
    return Case(tuple(users), tuple(draw(st.permutations(models))), filler)


def check(session: Session, case: Case) -> None:
    ledger = session.provenance
    for value in POOL:
        origin = ledger.origin(value)
        if value in case.users:
            assert origin["user"] is True, (value, origin)
        else:
            assert origin["user"] is False, (value, origin)
    assert ledger.origin(case.model_text)["user"] is False
    # The adapter did see the model's text (the delegated agent made its call).
    assert ledger.results >= 1


def registry(register: Any, tools: Any) -> ToolRegistry:
    reg = ToolRegistry()
    register(reg, "notes", tools)
    return reg


# -- OpenAI Agents: a sub-agent's input (Agent.as_tool) -----------------------------------


@given(cases())
def test_r14_openai_agents_a_sub_agents_input_is_never_the_users(case: Case) -> None:

    class Scripted(Model):
        def __init__(self, *turns: list[Any]) -> None:
            self.turns = list(turns)

        async def get_response(self, *args: Any, **kwargs: Any) -> SdkResponse:
            return SdkResponse(output=self.turns.pop(0), usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    def tool_call(name: str, arguments: dict[str, Any], call_id: str) -> Any:
        return ResponseFunctionToolCall(
            id=call_id,
            call_id=call_id,
            type="function_call",
            name=name,
            arguments=json.dumps(arguments),
        )

    @function_tool
    def note(text: str) -> str:
        """Take a note."""
        return "noted"

    async def main() -> None:
        harness = Harness(registry(register_function_tools, [note]), evaluator=NoopEvaluator())
        async with harness:
            guard = AgentsGuard(await harness.create_session(principal=ALICE))
            helper = SdkAgent(
                name="helper",
                tools=guard.wrap([note], namespace="notes"),
                model=Scripted([tool_call("note", {"text": "x"}, "n1")], []),
            )
            top = SdkAgent(
                name="top",
                tools=[helper.as_tool("helper", "Delegate.")],
                model=Scripted([tool_call("helper", {"input": case.model_text}, "d1")], []),
            )
            await guard.run(top, case.user_text)
            check(guard.session, case)

    anyio.run(main)


# -- PydanticAI: a delegated agent's prompt -----------------------------------------------


@given(cases())
def test_r14_pydantic_ai_a_delegated_prompt_is_never_the_users(case: Case) -> None:

    def note(text: str) -> str:
        """Take a note."""
        return "noted"

    def scripted(*parts: Any) -> FunctionModel:
        turns = [[p] for p in parts]

        def answer(messages: Any, info: Any) -> ModelResponse:
            return ModelResponse(parts=turns.pop(0) if turns else [TextPart("done")])

        return FunctionModel(answer)

    async def main() -> None:
        toolset = FunctionToolset([note])
        harness = Harness(registry(register_toolset, toolset), evaluator=NoopEvaluator())
        async with harness:
            session = await harness.create_session(principal=ALICE)
            clearance = ClearanceToolset(toolset, session=session, namespace="notes")
            helper = Agent(
                scripted(ToolCallPart("note", {"text": "x"}, tool_call_id="n1")),
                toolsets=[clearance],
            )

            async def delegate(ctx: RunContext[None], task: str) -> str:
                """Delegate a task."""
                return (await helper.run(task, usage=ctx.usage)).output

            top = Agent(
                scripted(ToolCallPart("delegate", {"task": case.model_text}, tool_call_id="d1")),
                tools=[delegate],
            )
            await clearance.run(top, case.user_text)
            check(session, case)

    anyio.run(main)


# -- LangGraph: a message a node made --------------------------------------------------------


@given(cases(), st.sampled_from(["human", "system", "human-blocks"]))
def test_r14_langgraph_a_message_a_node_made_is_never_the_users(case: Case, kind: str) -> None:

    @tool
    def note(text: str) -> str:
        """Take a note."""
        return "noted"

    def handoff(state: MessagesState) -> dict[str, Any]:
        if kind == "system":
            message: Any = SystemMessage(case.model_text)
        elif kind == "human-blocks":
            message = HumanMessage([{"type": "text", "text": case.model_text}])
        else:
            message = HumanMessage(case.model_text)
        return {"messages": [message]}

    def helper(state: MessagesState) -> dict[str, Any]:
        call = {"name": "note", "args": {"text": "x"}, "id": "n1", "type": "tool_call"}
        return {"messages": [AIMessage("", tool_calls=[call])]}

    async def main() -> None:
        harness = Harness(registry(register_tools, [note]), evaluator=NoopEvaluator())
        async with harness:
            session = await harness.create_session(principal=ALICE)
            node = ClearanceToolNode([note], session=session, namespace="notes")
            builder = StateGraph(MessagesState)
            builder.add_node("handoff", handoff)
            builder.add_node("helper", helper)
            builder.add_node("tools", node)
            builder.add_edge(START, "handoff")
            builder.add_edge("handoff", "helper")
            builder.add_edge("helper", "tools")
            builder.add_edge("tools", END)
            app = builder.compile(checkpointer=InMemorySaver())
            config: Any = {"configurable": {"thread_id": "t"}}
            await node.run(app, {"messages": [("user", case.user_text)]}, config)
            check(session, case)

    anyio.run(main)
