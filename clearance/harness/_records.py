"""The parts of a call's journal records that are built from values: the verdict, the
result (images by reference), and a result rebuilt from what result guardrails return."""

from __future__ import annotations

import hashlib
from typing import Any

from clearance.harness._redaction import scrub
from clearance.harness.tools import CallToolResult, normalize_result
from clearance.policy.base import Verdict

__all__ = ["result_from_json", "result_reference", "verdict_record"]


def verdict_record(verdict: Verdict, failed: bool, secret_values: set[str]) -> dict[str, Any]:
    """The ``verdict`` of a ``call_decided`` record (``error`` when the evaluator failed)."""
    if not secret_values:  # nothing to scrub
        return {
            "effect": "error" if failed else verdict.effect,
            "reasons": list(verdict.reasons),
            "annotations": dict(verdict.annotations),
            "errors": list(verdict.errors),
            "message": verdict.message,
            "evaluator": verdict.evaluator,
            **({"policy_version": verdict.policy_version} if verdict.policy_version else {}),
        }
    return {
        "effect": "error" if failed else verdict.effect,
        "reasons": list(verdict.reasons),
        "annotations": dict(verdict.annotations),
        "errors": [scrub(e, secret_values) for e in verdict.errors],
        "message": scrub(verdict.message, secret_values),
        "evaluator": verdict.evaluator,
        **({"policy_version": verdict.policy_version} if verdict.policy_version else {}),
    }


def result_reference(result: CallToolResult) -> dict[str, Any]:
    """What the journal keeps of a result: text and structure, images by reference."""
    content = result.content
    if type(content) is str:  # the common case: no image, one text block
        return {
            "content": [{"type": "text", "text": content}],
            "structured_content": result.structured_content,
            "is_error": result.is_error,
        }
    body = result.to_json()
    content = body["content"]
    if not any(block.get("type") == "image" for block in content):
        return body  # a fresh copy already; text and structure are kept as they are
    blocks: list[dict[str, Any]] = []
    for block in content:
        if block.get("type") == "image":
            data = str(block.get("data", ""))
            blocks.append(
                {
                    "type": "image",
                    "mimeType": block.get("mimeType"),
                    "sha256": hashlib.sha256(data.encode()).hexdigest(),
                    "base64_chars": len(data),
                }
            )
        else:
            blocks.append(block)
    return {
        "content": blocks,
        "structured_content": result.structured_content,
        "is_error": result.is_error,
    }


def result_from_json(value: Any) -> CallToolResult:
    """A result from what a result guardrail returned (the JSON form, or a result).

    Raises:
        ResultError: it is not a valid result.
    """
    if isinstance(value, CallToolResult):
        return value
    if not isinstance(value, dict):
        return normalize_result(value)
    return normalize_result(
        CallToolResult(
            content=value.get("content") or (),
            structured_content=value.get("structured_content"),
            is_error=bool(value.get("is_error", False)),
        )
    )
