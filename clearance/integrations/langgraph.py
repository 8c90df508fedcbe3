"""LangGraph (with ``langchain-core`` tools): a tool node whose every call goes through a
clearance session, and whose asks are LangGraph interrupts.

::

    from langgraph.types import Command
    from clearance.integrations.langgraph import ClearanceToolNode, answer_all, register_tools

    tools = register_tools(registry, "files", [read_file, send_mail], root=workspace,
                           facts={"read_file": {"/path": "path"}})
    async with Harness(registry, evaluator=evaluator, ask_store=SqliteAskStore("asks.db")) as harness:
        session = await harness.create_session(principal=Principal("User", "alice"))
        node = ClearanceToolNode(tools, session=session)
        builder.add_node("tools", node)
        graph = builder.compile(checkpointer=checkpointer)
        state = await node.run(graph, {"messages": [...]}, config)   # the user's input (R14)
        while "__interrupt__" in state:                       # asks nobody here answered
            state = await graph.ainvoke(Command(resume=answer_all(state, "allow_session")), config)

Only the host's input is the user's (rule R14): :meth:`ClearanceToolNode.run` records the
input's human messages with ``session.add_user_message``, then invokes the graph. The node
reads no user from the state: a node may add a ``HumanMessage`` a model wrote (a
supervisor's handoff), so a human message the host did not give is recorded as a tool's
(``tool:agent-input``), never as hers; system messages are not read.

:class:`ClearanceToolNode` stands where ``langgraph.prebuilt.ToolNode`` would (it runs one,
inside). For the tool calls of the latest AI message (or one call sent with ``Send``), it
first decides every call (``session.authorize``: schema, canonical facts, guardrails,
evaluator, grants, asks), then runs the allowed ones:

- allowed: the tool runs once, with the *canonical* arguments (a path fact's resolved path,
  not what the model wrote), inside ``session.execution``: the journal records its start
  and end, and result guardrails decide what the model sees (the ``ToolMessage`` content);
- denied: the tool does not run; the model sees the denial (an error ``ToolMessage``);
- asked, and the session has an ``on_permission_ask`` callback or a ``permission_asks()``
  listener: they answer, in-process;
- asked, and nobody here can answer: the node calls ``interrupt()`` with the open asks
  (``{"clearance": [{"ask_id", "call_id", "tool", "arguments", "reason", "facts",
  "suggestions", ...}]}``) *before anything runs*. Resume with ``Command(resume=answer)``:
  ``"allow_once"``, ``"allow_session"``, ``"allow_always"``, ``"deny"``, ``True``/``False``, or
  ``{"decision": ..., "scope": i, "by": ..., "message": ...}`` (``scope`` indexes the ask's
  ``suggestions``); when the model made several tool calls, a dict from ask id (or tool call
  id) to answer. The value also holds the asks as LangChain's human-in-the-loop request
  (``action_requests``, ``review_configs``), and ``{"decisions": [{"type": "approve"},
  {"type": "reject", "message": ...}]}`` (one per open ask, in order) answers them as its
  approval UIs do. An answer that is not valid is not raised (LangGraph would give it to
  every later run of the node): the asks are put again, with an ``"error"`` saying why.
  Each answer goes to the ask (journaled with ``via="langgraph"`` and who answered), the
  calls are decided again with the same call ids, and asks still open interrupt again.

A call allowed before the graph paused for another ask is held, not decided again, when
the node runs again, as long as its authorization still holds (``session.holds``): one
whose grant was revoked while the graph waited, or that expired (the harness's
``authorization_ttl``), is decided again (rule R12), so the revocation counts and a new
ask may interrupt. Each call is checked once more as it runs (``session.execution``).

The asks live in the harness's ask store and the paused graph in its checkpointer, so a
graph resumed in a new process (a new harness over the same ask store, a new session, a new
node, the same checkpointer and thread) goes on where it stopped; an ask may also be answered
meanwhile with ``clearance asks approve``. Because LangGraph runs an interrupted node again
from its start, nothing runs until no ask is open: each tool runs once.

The node is async (``ainvoke``/``astream``). A tool that returns a ``Command`` (a state
update) is refused: its update would reach the state, unguarded. A ``ToolMessage``'s
``artifact`` is dropped, and only text content reaches the model: what it sees is what the
result guardrails let through.
"""

from __future__ import annotations

from clearance.integrations._extras import framework_import_error

try:
    import langchain_core  # noqa: F401  (the optional extra: checked before anything uses it)
    import langgraph  # noqa: F401
except ImportError as exc:
    raise framework_import_error(exc, "langgraph") from exc

import inspect
import json
import os
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, cast

import anyio

try:
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        HumanMessage,
        SystemMessage,
        ToolCall,
        ToolMessage,
        convert_to_messages,
    )
    from langchain_core.runnables import Runnable, RunnableConfig
    from langchain_core.tools import BaseTool
    from langchain_core.tools import tool as as_tool
    from langchain_core.utils.function_calling import convert_to_openai_tool
    from langgraph.errors import GraphBubbleUp
    from langgraph.prebuilt import ToolNode
    from langgraph.types import Command, interrupt
except ImportError as exc:
    raise framework_import_error(exc, "langgraph") from exc

from clearance.errors import AskError, StaleAuthorizationError
from clearance.harness.outcomes import Authorization
from clearance.harness.session import Session
from clearance.harness.tools import CallToolResult, ToolRegistry
from clearance.integrations._blocking import run_on_loop
from clearance.integrations._host import (
    DeclaredTools,
    HostAnswer,
    ToolSpec,
    answer_ask,
    answer_scope,
    ask_payload,
    declare_tools,
    framework_names,
    parse_answer,
    qualified_name,
    record_replayed,
)

if TYPE_CHECKING:
    # A type only: the adapter reads a request's public attributes (tool_call, state,
    # runtime, override), never imports the class at run time.
    from langgraph.prebuilt.tool_node import ToolCallRequest

__all__ = ["VIA", "ClearanceToolNode", "SessionSource", "answer_all", "register_tools"]

VIA = "langgraph"
"""How the journal names answers given by resuming a LangGraph interrupt."""

SessionSource = Session | Callable[[RunnableConfig], "Session | Awaitable[Session]"]
"""A session, or a function of the run's config that finds one (e.g. by ``thread_id``)."""

_KEY = "clearance"
_HELD_LIMIT = 10_000

# The decisions of the node run in progress (by call fingerprint), for the wrapper around
# each tool's execution.
_DECIDED: ContextVar[tuple[Session, Mapping[str, Authorization]] | None] = ContextVar(
    "clearance_langgraph_decided", default=None
)


def _as_tools(tools: Sequence[BaseTool | Callable[..., Any]]) -> list[BaseTool]:
    if isinstance(tools, str) or not isinstance(tools, Sequence):
        raise TypeError("tools must be a sequence of langchain-core tools or functions")
    return [t if isinstance(t, BaseTool) else as_tool(t) for t in tools]


def register_tools(
    registry: ToolRegistry,
    namespace: str,
    tools: Sequence[BaseTool | Callable[..., Any]],
    *,
    names: Mapping[str, str] | None = None,
    root: str | os.PathLike[str] | None = None,
    facts: Mapping[str, Mapping[str, Any]] | None = None,
    read_only: Collection[str] = (),
    sensitive: Mapping[str, Sequence[str]] | None = None,
    annotations: Mapping[str, Mapping[str, Any]] | None = None,
) -> DeclaredTools[list[BaseTool]]:
    """Declare langchain-core tools in a clearance registry, under ``namespace``.

    Each tool is declared with its name, description and the JSON Schema of what the model
    sends (``tool_call_schema``: injected arguments left out). The options are keyed by the
    tool's name: ``facts`` (``{"read_file": {"/path": "path"}}``, resolved against
    ``root``), ``read_only``, ``sensitive`` (JSON pointers withheld from the journal and
    asks), ``annotations``, and ``names`` for a tool whose name is not ``[a-z0-9_-]``.

    Returns:
        The tools (functions made tools) with each one's name -> clearance qualified name:
        give it to :class:`ClearanceToolNode` in place of the tools
        (``ClearanceToolNode(declared, session=session)``), so that each tool is listed
        once.

    Raises:
        ToolRegistrationError: a bad option, or the registry refused a declaration.
        TypeError: ``tools`` is not a sequence of tools or functions.
    """
    given = _as_tools(tools)
    specs = []
    for tool in given:
        # The parameters the model is shown (injected arguments left out).
        parameters = convert_to_openai_tool(tool)["function"]["parameters"]
        specs.append(ToolSpec(tool.name, tool.description or "", dict(parameters)))
    mapping = declare_tools(
        registry,
        namespace,
        specs,
        framework="langgraph",
        names=names,
        root=root,
        facts=facts,
        read_only=read_only,
        sensitive=sensitive,
        annotations=annotations,
    )
    return DeclaredTools(given, mapping)


class ClearanceToolNode(Runnable[Any, Any]):
    """A LangGraph node that runs langchain-core tools through a clearance session (see the
    module docstring).

    It is a ``Runnable`` with both ways in: ``graph.ainvoke`` runs it asynchronously;
    ``graph.invoke`` (synchronous code) runs its decisions on the event loop of the
    harness, which is then opened with :class:`~clearance.integrations.BlockingHarness`.

    Args:
        tools: what :func:`register_tools` returned (the tools it declared, with their
            names), or the tools, as for ``ToolNode``.
        session: the clearance session the calls belong to, or a function of the run's
            config that returns it (sync or async).
        namespace: for tools given as a list: the clearance namespace they were declared
            under: the tool ``read_file`` is ``namespace.read_file``.
        names: for tools given as a list: tool name -> clearance qualified name, for tools
            declared under other names.
        by: who answers asks by resuming this graph, when an answer does not say.
        messages_key: the state key of the messages, as for ``ToolNode``.
        handle_tool_errors: as for ``ToolNode``.
    """

    def __init__(
        self,
        tools: DeclaredTools[list[BaseTool]] | Sequence[BaseTool | Callable[..., Any]],
        *,
        session: SessionSource,
        namespace: str | None = None,
        names: Mapping[str, str] | None = None,
        by: str | None = None,
        messages_key: str = "messages",
        handle_tool_errors: Any = None,
    ) -> None:
        given, self.namespace, self.names = framework_names(
            tools, namespace, names, wrapper="ClearanceToolNode"
        )
        self.session = session
        self.by = by
        self.messages_key = messages_key
        options: dict[str, Any] = {}
        if handle_tool_errors is not None:
            options["handle_tool_errors"] = handle_tool_errors
        self.tool_node = ToolNode(
            _as_tools(given),
            messages_key=messages_key,
            awrap_tool_call=self._run,
            # Run synchronously (graph.invoke of create_react_agent(tools=node.tool_node)),
            # a ToolNode without a sync wrapper would run its tools undecided: never.
            wrap_tool_call=self._run_blocking,
            **options,
        )
        """The ``ToolNode`` that runs the allowed calls."""
        # Decisions made in an attempt of the node that was interrupted, by (session, call
        # id): LangGraph runs the node again from its start when it is resumed, and a call
        # authorized (or denied) before the interrupt must not be decided twice.
        # Each is kept with what it decided (the call's tool and arguments): a call id the
        # state now gives another tool or other arguments (an edited tool call) is decided
        # again, never run on the strength of the old decision.
        self._held: dict[tuple[str, str], tuple[str, Authorization]] = {}
        self._seen: dict[str, set[str]] = {}
        """By session id: the keys of the state's human messages already recorded in its
        provenance as a tool's (:mod:`clearance.provenance`, rule R14)."""
        self._paused: dict[tuple[str, str], int] = {}
        """By (session id, tool call id): how many runs of the call a tool's own
        ``interrupt()`` paused. LangGraph runs the tool again from its start on resume:
        that run is a call of its own, decided under ``<tool call id>#<n>``."""

    # -- the run: the host's entry point ---------------------------------------------------

    async def run(
        self, graph: Any, input: Any, config: RunnableConfig | None = None, **options: Any
    ) -> Any:
        """``graph.ainvoke(input, config, **options)``, with the human messages of
        ``input`` recorded as the user's own words first (:meth:`user_input`). Resuming
        (``input`` a ``Command`` or ``None``) records nothing."""
        await self.user_input(input, config)
        return await graph.ainvoke(input, config, **options)

    async def user_input(self, input: Any, config: RunnableConfig | None = None) -> None:
        """Record the human messages of a graph's input (``{"messages": [...]}`` under
        ``messages_key``, or a list of messages: ``HumanMessage``, ``("user", text)``,
        ``{"role": "user", ...}``, a string) as the user's
        (``session.add_user_message``), and its system messages as the application's
        instructions, in the session ``config`` finds. Only the host's input is the
        user's (rule R14): a ``HumanMessage`` a node adds to the state later (a
        supervisor's handoff, written by a model) is not (see the module docstring).

        Raises:
            ValueError: a message of the input is not one langchain-core reads.
        """
        if input is None or isinstance(input, Command):
            return
        if isinstance(input, Mapping):
            found = input.get(self.messages_key, [])
        else:
            found = input
        if isinstance(found, str | BaseMessage | tuple | Mapping):
            found = [found]
        messages = convert_to_messages(list(found))
        session = await self._session(config or {})
        for message in messages:
            text = _text(message)
            if text and isinstance(message, HumanMessage):
                session.add_user_message(text)
            elif text and isinstance(message, SystemMessage):
                session.add_message("system", text)

    def run_sync(
        self, graph: Any, input: Any, config: RunnableConfig | None = None, **options: Any
    ) -> Any:
        """:meth:`run` from synchronous code: ``graph.invoke(input, config, **options)``,
        with the human messages of ``input`` recorded as the user's own words first. The
        harness is opened with :class:`~clearance.integrations.BlockingHarness`."""
        config = config or {}
        run_on_loop(self._sync_session(config).harness, self.user_input(input, config))
        return graph.invoke(input, config, **options)

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """The node, run synchronously (``graph.invoke``): its decisions and the tools
        run on the harness's loop (:class:`~clearance.integrations.BlockingHarness`),
        one node run at a time. LangGraph's interrupt leaves it as from :meth:`ainvoke`."""
        config = config or {}
        return run_on_loop(self._sync_session(config).harness, self(input, config))

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """The node, run asynchronously (``graph.ainvoke``)."""
        return await self(input, config or {})

    def _sync_session(self, config: RunnableConfig) -> Session:
        """The session, found without awaiting (a synchronous run needs its harness first,
        to know the loop to run on)."""
        if isinstance(self.session, Session):
            return self.session
        found = self.session(config)
        if inspect.isawaitable(found):
            if inspect.iscoroutine(found):
                found.close()
            raise TypeError(
                "graph.invoke needs session= a Session or a synchronous function of the "
                "config (an async one can only be awaited: use graph.ainvoke)"
            )
        if not isinstance(found, Session):
            raise TypeError("the session function must return a clearance Session")
        return found

    async def __call__(self, state: Any, config: RunnableConfig) -> Any:
        session = await self._session(config)
        try:
            calls, turn_id = self._tool_calls(state)
        except ValueError:
            # Not a turn this node reads (one call sent with ``Send``, in the ToolNode's own
            # envelope): the ToolNode finds the call, and the wrapper decides it in its task.
            return await self.tool_node.ainvoke(state, config)
        decided = await self._decide_in(session, state, calls, turn_id)
        token = _DECIDED.set((session, {_fingerprint(c): decided[c["id"] or ""] for c in calls}))
        try:
            return await self.tool_node.ainvoke(state, config)
        finally:
            _DECIDED.reset(token)
            for call in calls:
                self._held.pop((session.id, call["id"] or ""), None)

    async def _decide_in(
        self, session: Session, state: Any, calls: list[ToolCall], turn_id: str | None
    ) -> dict[str, Authorization]:
        """Decide ``calls`` of a node run over ``state`` (see :meth:`_decide`)."""
        seen = self._seen.setdefault(session.id, set())
        # The state's human messages count as a tool's (rule R14): a node may have made
        # one from what a model wrote. The user's own enter through ``run``.
        record_replayed(session, seen, _replayed(self._messages(state)))
        return await self._decide(session, calls, turn_id)

    # -- deciding --------------------------------------------------------------------------

    async def _session(self, config: RunnableConfig) -> Session:
        if isinstance(self.session, Session):
            return self.session
        found = self.session(config)
        if inspect.isawaitable(found):
            found = await found
        if not isinstance(found, Session):
            raise TypeError("the session function must return a clearance Session")
        return found

    def _messages(self, state: Any) -> list[Any]:
        """The state's messages (none when the node is given tool calls alone)."""
        if isinstance(state, list):
            return state
        if isinstance(state, dict):
            found = state.get(self.messages_key, [])
        else:
            found = getattr(state, self.messages_key, [])
        return list(found) if isinstance(found, list | tuple) else []

    def _tool_calls(self, state: Any) -> tuple[list[ToolCall], str | None]:
        """The calls this node runs (as ``ToolNode`` finds them) and the AI message's id."""
        if isinstance(state, list) and state and isinstance(state[-1], dict):
            if state[-1].get("type") == "tool_call":
                return list(state), None
        if isinstance(state, list):
            messages = state
        elif isinstance(state, dict):
            messages = state.get(self.messages_key, [])
        else:
            messages = getattr(state, self.messages_key, [])
        for message in reversed(messages):
            if isinstance(message, AIMessage):
                return list(message.tool_calls), message.id
        raise ValueError("no AIMessage found in the input")

    async def _decide(
        self, session: Session, calls: list[ToolCall], turn_id: str | None
    ) -> dict[str, Authorization]:
        """Decide every call; interrupt while asks are open. Nothing runs before this
        returns, so a node run again after a resume runs each tool once."""
        decided: dict[str, Authorization] = {}
        for call in calls:
            decided[call["id"] or ""] = await self._authorize(session, call, turn_id)
        problem: str | None = None
        while True:
            pending = [decided[c["id"] or ""] for c in calls if decided[c["id"] or ""].pending]
            if not pending:
                return decided
            harness = session.harness
            shown = [
                (c, ask_payload(harness, a.ask_id or "", call_id=c["id"] or "", tool=self._name(a)))
                for c in calls
                if (a := decided[c["id"] or ""]).pending
            ]
            payload: dict[str, Any] = {_KEY: [ask for _, ask in shown], **_hitl_request(shown)}
            if problem is not None:
                payload["error"] = problem
            try:
                answers = _answers(interrupt(payload), decided, session, by=self.by)
            except AskError as exc:
                # A resume value stays in the thread for good (LangGraph gives it to every
                # later run of this node), so a bad one is not raised, which would make the
                # thread fail for good: the asks are put again, with what was wrong.
                problem = str(exc)
                continue
            problem = None
            for call_id, answer in answers.items():
                auth = decided[call_id]
                stored = harness.ask_store.get(auth.ask_id or "")
                # Answered meanwhile elsewhere (``clearance asks approve``): the first
                # answer stands, and deciding the call again applies it.
                if stored is not None and stored.status == "pending":
                    await answer_ask(harness, auth.ask_id or "", answer, via=VIA)
            for call in calls:
                # Every open call again, not only the answered ones: a grant an answer just
                # made may cover another.
                if decided[call["id"] or ""].pending:
                    decided[call["id"] or ""] = await self._authorize(session, call, turn_id)

    async def _authorize(
        self, session: Session, call: ToolCall, turn_id: str | None
    ) -> Authorization:
        call_id = call["id"]
        if not call_id:
            raise ValueError(f"the tool call of {call['name']!r} has no id")
        key = (session.id, call_id)
        held = self._held.pop(key, None)
        if held is not None and held[0] == _fingerprint(call):
            kept = held[1].call_id
            if not held[1].allowed or session.holds(kept):
                self._held[key] = held
                return held[1]
            if kept in session.authorized:
                # Allowed before the graph paused, and no longer so now (rule R12): its
                # grant was revoked while the graph waited, or it expired. Decided again.
                await session.withdraw(kept)
        name = qualified_name(call["name"], namespace=self.namespace, names=self.names)
        runs = self._paused.get(key, 0)
        # A run of the tool that its own interrupt() paused ended (cancelled); the run
        # LangGraph makes on resume is decided as a call of its own.
        run_id = call_id if runs == 0 else f"{call_id}#{runs + 1}"
        auth = await session.authorize(name, call["args"], call_id=run_id, turn_id=turn_id)
        if not auth.pending:
            if len(self._held) >= _HELD_LIMIT:
                self._held.pop(next(iter(self._held)))
            self._held[key] = (_fingerprint(call), auth)
        return auth

    def _name(self, auth: Authorization) -> str:
        return auth.qualified_name or auth.tool

    # -- running ---------------------------------------------------------------------------

    async def _run(
        self,
        request: ToolCallRequest,
        execute: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Run one decided call: an allowed one with its canonical arguments, inside
        ``session.execution``; any other is answered without running."""
        call = request.tool_call
        current = _DECIDED.get()
        own = current is None
        if current is None:
            # The ToolNode runs without this node around it (``create_react_agent(model,
            # tools=node.tool_node)``, which sends each tool call to a task of its own):
            # the call is decided here, and an ask interrupts this task.
            current = await self._decide_alone(request)
        try:
            return await self._run_decided(request, execute, current)
        finally:
            if own:
                self._held.pop((current[0].id, call["id"] or ""), None)

    def _run_blocking(
        self,
        request: ToolCallRequest,
        execute: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """:meth:`_run` for the ToolNode run synchronously: on the harness's loop
        (:class:`~clearance.integrations.BlockingHarness`; without one, a ``RuntimeError``
        and nothing runs), the tool itself in a worker thread."""
        config = cast(RunnableConfig, getattr(request.runtime, "config", None) or {})

        async def in_a_thread(req: ToolCallRequest) -> ToolMessage | Command[Any]:
            return await anyio.to_thread.run_sync(execute, req)

        return run_on_loop(self._sync_session(config).harness, self._run(request, in_a_thread))

    async def _decide_alone(
        self, request: ToolCallRequest
    ) -> tuple[Session, Mapping[str, Authorization]]:
        """Decide the one call of ``request`` (a task of its own)."""
        runtime = request.runtime
        config = cast(RunnableConfig, getattr(runtime, "config", None) or {})
        session = await self._session(config)
        call = request.tool_call
        try:
            turn_id = self._tool_calls(request.state)[1]
        except ValueError:
            turn_id = None
        decided = await self._decide_in(session, request.state, [call], turn_id)
        return session, {_fingerprint(call): decided[call["id"] or ""]}

    async def _run_decided(
        self,
        request: ToolCallRequest,
        execute: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
        current: tuple[Session, Mapping[str, Authorization]],
    ) -> ToolMessage | Command[Any]:
        call = request.tool_call
        # Found by call id, tool and arguments: only the very call that was decided runs.
        auth = current[1].get(_fingerprint(call))
        if auth is None or not auth.allowed:
            # Fail closed: a call this node did not authorize never runs.
            message = auth.message if auth is not None else None
            return ToolMessage(
                content=message or "the call was not authorized",
                name=call["name"],
                tool_call_id=call["id"] or "",
                status="error",
            )
        session = current[0]
        assert auth.arguments is not None
        authorized = request.override(tool_call={**call, "args": auth.arguments})
        paused: GraphBubbleUp | None = None
        try:
            async with session.execution(auth.call_id) as run:
                try:
                    output = await execute(authorized)
                except GraphBubbleUp as exc:
                    # The tool called interrupt() (LangGraph's own approval in a tool): this
                    # run ends here, cancelled, and LangGraph runs the tool again from its
                    # start on resume, a run decided anew (see _authorize).
                    paused = exc
                    run.result(None, status="cancelled")
                else:
                    if isinstance(output, ToolMessage):
                        status = "error" if output.status == "error" else None
                        run.result(_result(output.content), status=status)
                    else:
                        run.fail(
                            "the tool returned a state update (Command), which clearance refuses"
                        )
        except StaleAuthorizationError as exc:
            # Checked again as it comes to run (rule R12): expired, or its grant revoked.
            return ToolMessage(
                content=exc.message,
                name=call["name"],
                tool_call_id=call["id"] or "",
                status="error",
            )
        if paused is not None:
            key = (session.id, call["id"] or "")
            if len(self._paused) >= _HELD_LIMIT and key not in self._paused:
                self._paused.pop(next(iter(self._paused)))
            self._paused[key] = self._paused.get(key, 0) + 1
            raise paused
        outcome = run.outcome
        assert outcome is not None
        return ToolMessage(
            content=outcome.text,
            name=call["name"],
            tool_call_id=call["id"] or "",
            status="success" if outcome.ok else "error",
        )


def answer_all(state: Mapping[str, Any], answer: Any) -> dict[str, Any]:
    """The ``Command(resume=...)`` value that gives ``answer`` to every clearance ask a
    paused graph shows (``state["__interrupt__"]``), each named by its ask id, under the id
    of the interrupt that shows it: the person answers what they were shown, whatever the
    number of tool calls or tasks. Interrupts that are not clearance's (a tool's own
    ``interrupt()``) are left out: answer them by their interrupt id.

    ``answer`` is any answer an ask takes (``"allow_once"``, ``{"decision": ..., "by":
    ...}``...); to answer asks differently, build the dict from the interrupts' values."""
    resume: dict[str, Any] = {}
    for pause in state.get("__interrupt__", ()):
        value = getattr(pause, "value", None)
        asks = value.get(_KEY) if isinstance(value, Mapping) else None
        if isinstance(asks, list):
            resume[pause.id] = {ask["ask_id"]: answer for ask in asks}
    return resume


def _fingerprint(call: ToolCall) -> str:
    """A tool call as decided: its id, tool and arguments."""
    return json.dumps([call["id"], call["name"], call["args"]], sort_keys=True, default=repr)


def _result(content: Any) -> Any:
    """A ToolMessage's content as a clearance result (text, or content blocks)."""
    if isinstance(content, str):
        return content
    blocks = [b if isinstance(b, dict) else {"type": "text", "text": str(b)} for b in content]
    return CallToolResult(blocks)


def _answers(
    value: Any, decided: Mapping[str, Authorization], session: Session, *, by: str | None
) -> dict[str, HostAnswer]:
    """The answers a resume value gives to the open asks, by tool call id.

    LangGraph hands a node that runs again every resume value it was given before, in
    order, so a value may name calls decided since: those are left alone, and a value must
    say which calls it answers unless the node has one.

    Raises:
        AskError: the value is not an answer, or (with several asks open) not a dict from
            ask or tool call ids to answers, it names an ask of no call of this node, or a
            scope that its ask does not offer.
    """
    if isinstance(value, Mapping) and set(value) == {"decisions"}:
        return _decisions(value["decisions"], decided, session, by=by)
    keyed = isinstance(value, Mapping) and "decision" not in value
    if not keyed:
        # An answer that does not say which call it answers is taken only where it cannot
        # mean another: when the node has one call. (With several, the calls open when it
        # is given again may not be those open when it was given: it would answer an ask
        # nobody was shown.)
        if len(decided) != 1:
            raise AskError(
                f"the model made {len(decided)} tool calls: resume with a dict from the ask "
                "id (or tool call id) of each open ask to its answer"
            )
        ((only, auth),) = decided.items()
        answer = parse_answer(value, by=by)
        if not auth.pending:
            return {}
        answer_scope(session.harness, auth.ask_id or "", answer)
        return {only: answer}
    asks = {auth.ask_id: call_id for call_id, auth in decided.items() if auth.ask_id}
    answers: dict[str, HostAnswer] = {}
    for key, raw in value.items():
        found = _call_of(key, decided, asks, session)
        if found is None:
            raise AskError(f"{key!r} is not an ask of this node's tool calls, nor one of them")
        call_id = found
        if call_id in answers:
            raise AskError(f"tool call {call_id!r} is answered twice")
        answer = parse_answer(raw, by=by)
        auth = decided[call_id]
        if auth.pending:
            answer_scope(session.harness, auth.ask_id or "", answer)  # checked before any is given
            answers[call_id] = answer
    return answers


def _hitl_request(shown: Sequence[tuple[ToolCall, Mapping[str, Any]]]) -> dict[str, Any]:
    """The open asks as LangGraph's human-in-the-loop request (what LangChain's
    ``HumanInTheLoopMiddleware`` interrupts with and approval UIs read): an action request
    (the model's tool name, the canonical arguments as the ask shows them, the ask's reason)
    and its review config (approve or reject) per ask, in the order of ``clearance``."""
    return {
        "action_requests": [
            {
                "name": call["name"],
                "args": ask.get("arguments", {}),
                "description": ask.get("reason"),
            }
            for call, ask in shown
        ],
        "review_configs": [
            {"action_name": call["name"], "allowed_decisions": list(_HITL_DECISIONS)}
            for call, _ in shown
        ],
    }


_HITL_DECISIONS = ("approve", "reject")


def _decisions(
    raw: Any, decided: Mapping[str, Authorization], session: Session, *, by: str | None
) -> dict[str, HostAnswer]:
    """The answers of a human-in-the-loop resume value (``{"decisions": [...]}``), one per
    open ask, in the order the interrupt showed them: ``{"type": "approve"}`` is
    ``allow_once``, ``{"type": "reject", "message": ...}`` is ``deny``.

    A list that does not have one decision per open ask is refused: the asks open when a
    value is given again (LangGraph replays it) may be fewer than those it answered.

    Raises:
        AskError: not a list of one approve or reject per open ask.
    """
    open_calls = [call_id for call_id, auth in decided.items() if auth.pending]
    if not isinstance(raw, list) or len(raw) != len(open_calls):
        raise AskError(
            f"'decisions' is a list of one decision per open ask ({len(open_calls)} open)"
        )
    answers: dict[str, HostAnswer] = {}
    for call_id, decision in zip(open_calls, raw, strict=True):
        kind = decision.get("type") if isinstance(decision, Mapping) else None
        if kind not in _HITL_DECISIONS:
            raise AskError(
                f"a decision is {{'type': 'approve'}} or {{'type': 'reject'}}, not {decision!r} "
                "(clearance approves a call as it was asked: no edit)"
            )
        message = decision.get("message")
        if message is not None and not isinstance(message, str):
            raise AskError(f"a decision's message is text, not {type(message).__name__}")
        answers[call_id] = HostAnswer(
            "allow_once" if kind == "approve" else "deny", by=by, message=message
        )
    return answers


def _call_of(
    key: Any, decided: Mapping[str, Authorization], asks: Mapping[str, str], session: Session
) -> str | None:
    """The tool call of this node that ``key`` names: its id, or the id of its ask (an
    earlier one too, as after a restart: the store knows which call it asked about)."""
    if not isinstance(key, str):
        return None
    if key in decided:
        return key
    if key in asks:
        return asks[key]
    stored = session.harness.ask_store.get(key)
    if stored is None:
        return None
    for call_id, auth in decided.items():
        # The ask's call: the tool call id, or the id its run was decided under (#n)
        if stored.call_id in (call_id, auth.call_id):
            if stored.tool == auth.qualified_name and stored.principal == str(session.principal):
                return call_id
    return None


def _text(message: BaseMessage) -> str:
    """A message's text (its text blocks, one a line)."""
    content = message.content
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("text", "")) if isinstance(b, dict) else str(b) for b in content)


def _replayed(messages: list[Any]) -> list[tuple[str, str]]:
    """The human messages among ``messages``, as ``record_replayed`` takes them."""
    found = []
    for index, message in enumerate(messages):
        if isinstance(message, HumanMessage):
            text = _text(message)
            found.append((text, f"{message.id or index}:{hash(text)}"))
    return found
