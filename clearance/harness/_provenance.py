"""What of a tool result enters the session's provenance ledger (:mod:`clearance.provenance`).

The ledger records what the model is shown: a result after the result guardrails (their
redactions applied), never one they blocked; which of its values, in
:func:`clearance.provenance.results.shown_values`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from clearance.harness._results import CallToolResult
from clearance.provenance import Provenance
from clearance.provenance.results import shown_values

__all__ = ["remember_result", "result_values"]


def result_values(result: CallToolResult) -> list[Any]:
    """The values of ``result`` the model reads, as one JSON list for the ledger."""
    return shown_values(result.content, result.structured_content)


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
