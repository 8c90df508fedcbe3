"""clearance in front of Claude Code's tools, through the Claude Agent SDK, offline.

    pip install 'clearance[claude-agent-sdk]' && python examples/claude_agent_sdk_example.py

The real SDK (``query``, its hooks and ``can_use_tool``) talks to ``ScriptedClaudeCode``,
a transport that plays Claude Code from a script: no ``claude`` binary, no network, no key.
The scripted model reads a file through a symlink (allowed: Claude Code reads the resolved
path), reads the secrets (denied: the model sees why), lists a directory with ``Bash``
(allowed: one quoted argv, run in the workspace), writes a note twice (asked once, answered
``allow_session``; the second write is covered by the grant), and prints a file holding a key
(the result guardrail redacts it before the model sees it).
"""

import tempfile
from pathlib import Path

import anyio
from claude_agent_sdk import query

from clearance import Harness, MemoryJournal, PermissionDecision, Principal, ToolRegistry
from clearance.guardrails import SecretScanner
from clearance.integrations.claude_agent_sdk import ClaudeAgentAdapter, ClaudeAsk
from clearance.integrations.claude_agent_sdk_scripted import ScriptedClaudeCode, ScriptedToolUse
from clearance.integrations.claude_code_tools import claude_code_tools
from clearance.policy import LocalEvaluator

NOTE = {"file_path": "notes/todo.md", "content": "ship it"}
SCRIPT = [
    [ScriptedToolUse("Read", {"file_path": "./link/a.md"}, "read-1")],
    [ScriptedToolUse("Read", {"file_path": "docs/../.env"}, "read-2")],
    [ScriptedToolUse("Bash", {"command": "ls docs"}, "bash-1")],
    [ScriptedToolUse("Write", NOTE, "write-1")],
    [ScriptedToolUse("Write", NOTE, "write-2")],
    [ScriptedToolUse("Bash", {"command": "cat docs/keys.md"}, "bash-2")],
]


def answer(ask: ClaudeAsk) -> PermissionDecision:
    """Where an app would show a prompt: here, alice allows it for the session."""
    print(f"asked    {ask.tool_use_id}: {ask.ask.qualified_name} {dict(ask.ask.arguments)}")
    return PermissionDecision("allow_session", decided_by="alice")


async def main(ws: Path) -> None:
    (ws / "docs").mkdir()
    (ws / "docs" / "a.md").write_text("alpha\n")
    (ws / "docs" / "keys.md").write_text("aws_access_key_id = AKIAIOSFODNN7EXAMPLE\n")
    (ws / ".env").write_text("TOKEN=hunter2\n")
    (ws / "link").symlink_to("docs")
    (ws / "notes").mkdir()

    # 1. Declare Claude Code's tools, with their facts, and write policies for them.
    registry = ToolRegistry()
    registry.register("claude", claude_code_tools(ws))
    evaluator = LocalEvaluator(
        allow=[
            "claude.read(file_path=docs/**)",
            "claude.bash(command=ls *)",
            "claude.bash(command=cat docs/*)",
        ],
        ask=["claude.write(file_path=notes/**)"],
    )
    journal = MemoryJournal()
    async with Harness(
        registry,
        evaluator=evaluator,
        journal=journal,
        result_guardrails=[SecretScanner(action="redact")],
    ) as harness:
        session = await harness.create_session(principal=Principal("User", "alice"))
        # 2. Put the adapter's hooks and can_use_tool in the SDK's options.
        adapter = ClaudeAgentAdapter(session, on_ask=answer)
        claude = ScriptedClaudeCode(SCRIPT, cwd=ws)  # leave transport= out for Claude Code
        async for _ in query(
            prompt="tidy up", options=adapter.options(cwd=str(ws)), transport=claude
        ):
            pass

    for name, ran_with in claude.ran:
        print(f"ran      {name} {ran_with}".replace(str(ws), "<ws>"))
    for tool_use_id, text in claude.model_saw.items():
        print(f"model    saw {tool_use_id}: {' '.join(text.split())}".replace(str(ws), "<ws>"))
    for event in journal.events():
        if event.type == "call_decided":
            grant = " (a grant)" if event.data.get("grant") else ""
            print(f"journal  {event.call_id}: {event.data['outcome']}{grant}")
        elif event.type == "permission_decided":
            data = event.data
            print(f"journal  {event.call_id}: {data['answer']} by {data['by']} via {data['via']}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        anyio.run(main, Path(tmp).resolve())
