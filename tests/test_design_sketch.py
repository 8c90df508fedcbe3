"""The public API sketch of DESIGN.md, run as written (paths made temporary)."""

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.anyio


async def test_design_api_sketch_runs_as_written(tmp_path: Path) -> None:
    from clearance import (
        AgentDefinition,
        CallContext,
        CallToolResult,
        Harness,
        PermissionAsk,
        Principal,
        ScriptedProvider,
        SqliteJournal,
        Tool,
        ToolImageResult,
        ToolRegistry,
    )
    from clearance.guardrails import GuardrailOutcome, PathScope, SecretScanner
    from clearance.policy import AllOf, CedarEvaluator, LocalEvaluator, NoopEvaluator, Verdict

    # Every name of the sketch's imports is public.
    assert all([AllOf, LocalEvaluator, NoopEvaluator, Verdict, GuardrailOutcome, CallToolResult])
    assert all([ToolImageResult, PermissionAsk])
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("issue 821: the greeting lacks a comma\n")

    def read_file(arguments: dict[str, Any], ctx: CallContext) -> str:
        path: str = arguments["path"]
        return (workspace / path).read_text()

    registry = ToolRegistry()
    registry.register(
        "files",
        [
            Tool(
                "read_file",
                description="Read a text file in the workspace.",
                input_schema={
                    "type": "object",
                    "properties": {"path": {"type": "string"}},
                    "required": ["path"],
                    "additionalProperties": False,
                },
                handler=read_file,
                read_only=True,
            ),
        ],
    )

    @registry.tool("app.show_status")  # schema derived from the signature (pydantic)
    async def show_status(text: str, ctx: CallContext) -> dict[str, Any]:
        await ctx.progress("Updating app")
        return {"displayed": True}

    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "policies.cedar").write_text(
        '@id("read") permit (principal, action == Action::"files.read_file", resource);\n'
        '@id("status") @ask("show it?") permit (principal, action == Action::"app.show_status", resource);\n'
    )
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "turns": [
                    {
                        "tool_calls": [
                            {
                                "id": "lookup-1",
                                "name": "files__read_file",
                                "args": {"path": "notes.txt"},
                            }
                        ]
                    },
                    {
                        "tool_calls": [
                            {
                                "id": "status-1",
                                "name": "app__show_status",
                                "args": {"text": "found it"},
                            }
                        ]
                    },
                    {"text": "Issue 821 is about the greeting."},
                ]
            }
        )
    )

    async with Harness(
        registry,
        evaluator=CedarEvaluator.from_directory(str(policies)),
        argument_guardrails=[PathScope(root=str(workspace), tools="files.*", fields=["/path"])],
        result_guardrails=[SecretScanner()],
        journal=SqliteJournal(str(tmp_path / "clearance.db")),
    ) as harness:
        session = await harness.create_session(
            principal=Principal("User", "alice"),
            agent=AgentDefinition("coder", tools=["files.read_file", "app.show_status"]),
            on_permission_ask=lambda ask: (
                "allow_once" if ask.qualified_name == "app.show_status" else "deny"
            ),
        )
        result = await session.call_tool(
            "files__read_file", {"path": "notes.txt"}, call_id="c1", turn_id="t1"
        )
        assert result.ok and "issue 821" in result.text
        escape = await session.call_tool(
            "files__read_file", {"path": "../x"}, call_id="c2", turn_id="t1"
        )
        assert escape.status == "blocked"
        run = session.run("Look up issue 821", provider=ScriptedProvider.from_file(str(script)))
        seen = [item.type async for item in run.events()]
        final = await run.result()
    assert final.text == "Issue 821 is about the greeting."
    assert [c.status for c in final.calls] == ["ok", "ok"]
    assert final.calls[1].decision == "ask"
    assert "tool_progress" in seen and "permission_asked" in seen
