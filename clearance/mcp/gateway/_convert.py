"""Between clearance's values and the MCP SDK's: the tools the gateway lists, the results
it returns, the progress it relays.

This is where the SDK's types meet clearance's; nothing of them goes further in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import mcp_types
from pydantic import TypeAdapter, ValidationError

from clearance.harness.approvals import arguments_hash
from clearance.harness.pipeline import CallOutcome
from clearance.harness.tools import Tool

if TYPE_CHECKING:
    from mcp.server.session import ServerSession

__all__ = ["arguments_key", "listed_tools", "mcp_result", "relay_to"]

_CONTENT = TypeAdapter(list[mcp_types.ContentBlock])
_HINTS = ("title", "destructiveHint", "idempotentHint", "openWorldHint")


def listed_tools(tools: Iterable[Tool]) -> list[mcp_types.Tool]:
    """``tools`` as ``tools/list`` shows them: by model alias, in alias order."""
    return [_mcp_tool(t) for t in sorted(tools, key=lambda t: t.model_alias)]


def _mcp_tool(tool: Tool) -> mcp_types.Tool:
    hints: dict[str, Any] = {k: tool.annotations[k] for k in _HINTS if k in tool.annotations}
    # The gateway reports its own classification: read-only only when clearance treats
    # the tool as read-only, whatever the upstream server claimed.
    hints["readOnlyHint"] = tool.read_only
    schema = dict(tool.input_schema)
    return mcp_types.Tool(
        name=tool.model_alias,
        description=tool.description or None,
        input_schema=schema,
        annotations=mcp_types.ToolAnnotations.model_validate(hints),
    )


def mcp_result(outcome: CallOutcome) -> mcp_types.CallToolResult:
    """A call's outcome as the ``tools/call`` result, with clearance's decision in
    ``_meta["clearance/outcome"]``."""
    body = outcome.to_model()
    try:
        content = _CONTENT.validate_python(body["content"])
    except ValidationError:
        content = [mcp_types.TextContent(type="text", text=outcome.text)]
    structured = body.get("structured_content")
    return mcp_types.CallToolResult(
        content=content,
        structured_content=structured if isinstance(structured, dict) else None,
        is_error=bool(body["is_error"]),
        _meta={
            "clearance/outcome": {
                "status": outcome.status,
                "call_id": outcome.call_id,
                "decision": outcome.decision,
                "reasons": list(outcome.reasons),
                "correlation_id": outcome.correlation_id,
            }
        },
    )


def arguments_key(arguments: Any) -> str:
    """What identifies a call's arguments when the client retries it with an answer."""
    return arguments_hash(arguments) if isinstance(arguments, dict) else repr(arguments)


def relay_to(session: ServerSession) -> Callable[[float, float | None, str | None], Any]:
    """A progress relay that notifies the gateway's client on ``session``."""

    async def relay(progress: float, total: float | None, message: str | None) -> None:
        await session.report_progress(progress, total, message)

    return relay
