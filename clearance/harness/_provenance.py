"""What of a tool result enters the session's provenance ledger (:mod:`clearance.provenance`).

The ledger records what the model is shown: a result after the result guardrails (their
redactions applied), never one they blocked; its text blocks, the text of embedded resources
and its structured content. Images and audio carry no values a policy matches, and their
base64 would only fill the ledger's scan budget.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from clearance.harness._results import CallToolResult
from clearance.provenance import Provenance

__all__ = ["remember_result", "result_values"]

_OPAQUE = frozenset({"image", "audio"})
_BINARY_KEYS = frozenset({"data", "blob"})


def result_values(result: CallToolResult) -> list[Any]:
    """The values of ``result`` the model reads, as one JSON list for the ledger."""
    content = result.content
    values: list[Any] = []
    if isinstance(content, str):
        values.append(content)
    else:
        for block in content:
            kind = block.get("type")
            if kind == "text":
                values.append(block.get("text"))
            elif kind not in _OPAQUE:
                values.append(_without_binary(block))
    if result.structured_content is not None:
        values.append(result.structured_content)
    return values


def remember_result(
    ledger: Provenance,
    tool: str,
    call_id: str,
    result: CallToolResult,
    diagnose: Callable[[Exception], None],
    arguments: Mapping[str, Any] | None = None,
) -> None:
    """Record ``result`` in ``ledger``. A failure to read it must not end the call
    otherwise (its ``tool_finished`` follows, R7) and must not leave a tool's values
    unknown: the ledger counts as overflowed from then on (values found nowhere count as
    from a tool), and the exception goes to the diagnostics. ``arguments`` are the call's
    final arguments (the ledger reads them only for a tool its trust list's
    ``pointed_calls`` names)."""
    try:
        ledger.add_result(tool, call_id, result_values(result), arguments)
    except Exception as exc:
        ledger.overflowed = True
        diagnose(exc)


def _without_binary(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_binary(v) for k, v in value.items() if k not in _BINARY_KEYS}
    return value
