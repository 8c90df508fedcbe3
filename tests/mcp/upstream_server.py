"""A real MCP server (the SDK's low-level API over stdio) for the MCP tests.

Run as ``python upstream_server.py``. It records what happens to it in files named by
environment variables, so a test can prove from the server's side what reached it:

- ``UPSTREAM_LOG``: one JSON line per call it ran, and one per call it saw cancelled;
- ``UPSTREAM_PIDS``: its process id, one line per start (restarts add lines).
"""

from __future__ import annotations

import json
import os
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TEXT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
TOOLS = [
    types.Tool(
        name="echo",
        description="Echo the text.",
        input_schema=TEXT,
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(
        name="write_note",
        description="Append the text to the notes (mutating).",
        input_schema=TEXT,
        annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=True),
    ),
    types.Tool(
        name="slow",
        description="Report progress in steps, then answer.",
        input_schema={
            "type": "object",
            "properties": {"seconds": {"type": "number"}, "steps": {"type": "integer"}},
            "required": ["seconds"],
        },
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(name="fail", description="Report a domain error.", input_schema={"type": "object"}),
    types.Tool(name="Shout", description="Upper-case the text.", input_schema=TEXT),
    # Valid for MCP, but not JSON Schema 2020-12 ("type" names no JSON type): skipped.
    types.Tool(
        name="bad_schema",
        description="An invalid schema.",
        input_schema={"type": "object", "properties": {"x": {"type": "nothing"}}},
    ),
]


def record(entry: dict[str, Any]) -> None:
    path = os.environ.get("UPSTREAM_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


def text(value: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=value)], is_error=error
    )


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    args = params.arguments or {}
    if params.name == "slow":
        steps = int(args.get("steps", 1))
        try:
            for n in range(steps):
                await ctx.session.report_progress(n + 1, steps, f"step {n + 1}")
                await anyio.sleep(float(args["seconds"]) / steps)
        except anyio.get_cancelled_exc_class():
            record({"tool": "slow", "cancelled": True, "args": args})
            raise
    record({"tool": params.name, "args": args})
    if params.name in ("echo", "write_note"):
        return text(str(args.get("text")))
    if params.name == "Shout":
        return text(str(args.get("text")).upper())
    if params.name == "fail":
        return text("no such thing", error=True)
    return text(f"done: {params.name}")


async def main() -> None:
    server = Server("test-upstream", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    pids = os.environ.get("UPSTREAM_PIDS")
    if pids:
        with open(pids, "a", encoding="utf-8") as f:
            f.write(f"{os.getpid()}\n")
    anyio.run(main)
