"""Adapters for agent frameworks that run tools themselves (optional extras, one module each).

Each adapter puts the framework's tool calls through ``session.authorize`` and
``session.record_result``, so that policies, grants, asks, result guardrails and the
journal work as they do for ``session.call_tool``. Importing an adapter without its
framework raises :class:`~clearance.errors.MissingExtraError`, whose message says what to
install; a framework installed but unusable (a version that lacks what the adapter imports,
a dependency missing) raises an ``ImportError`` naming the installed versions
(:mod:`clearance.integrations._extras`). Nothing here imports a framework: each module does, when it is imported.

- :mod:`clearance.integrations.claude_agent_sdk`: the Claude Agent SDK
  (``pip install 'clearance[claude-agent-sdk]'``): ``PreToolUse``/``PostToolUse`` hooks and a
  ``can_use_tool`` callback over Claude Code's built-in tools, declared as the ``claude``
  toolset with their facts (:mod:`~clearance.integrations.claude_code_tools`, no SDK
  needed); :mod:`~clearance.integrations.claude_agent_sdk_scripted` plays Claude Code
  offline for tests and examples.
- :mod:`clearance.integrations.pydantic_ai`: PydanticAI (``pip install 'clearance[pydantic-ai]'``):
  ``ClearanceToolset`` wraps a toolset; an ask becomes a deferred tool call that needs
  approval, and the host's ``DeferredToolResults`` answer it.
- :mod:`clearance.integrations.langgraph`: LangGraph with ``langchain-core`` tools
  (``pip install 'clearance[langgraph]'``): ``ClearanceToolNode`` in place of ``ToolNode``;
  an ask becomes an ``interrupt()``, resumed with ``Command(resume=...)``, after a restart too.
- :mod:`clearance.integrations.openai_agents`: the OpenAI Agents SDK
  (``pip install 'clearance[openai-agents]'``): ``AgentsGuard`` wraps the agent's function
  tools; clearance decides in ``needs_approval`` (an ask is an SDK interruption) and
  ``RunState.approve``/``reject`` answer it.

Each adapter's ``register_*`` function declares the framework's tools to clearance and
returns a :class:`DeclaredTools` (the tools, and each one's clearance name), which its
wrapper takes in place of the tools: each tool is written once.

From synchronous code (``Runner.run_sync``, ``agent.run_sync``, ``graph.invoke``), the
harness is opened with :class:`BlockingHarness`, on the loop those entry points run on.
"""

from clearance.integrations._blocking import BlockingHarness
from clearance.integrations._host import DeclaredTools

__all__ = ["BlockingHarness", "DeclaredTools"]
