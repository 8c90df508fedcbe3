"""What of a tool result the provenance ledger reads: the values the model is shown.

Text blocks give their text; images and audio carry no value a policy matches (and their
base64 would only fill the ledger's scan budget); any other block (an embedded resource)
gives itself without its binary fields; the structured content gives itself. The pipeline
records a result so (:mod:`clearance.harness`), and a journal export gives a replay the
same values from the result the journal kept (:mod:`clearance.tuning`), so that a replay
reads what the live decision read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["shown_values"]

_OPAQUE = frozenset({"image", "audio"})
_BINARY_KEYS = frozenset({"data", "blob"})


def shown_values(content: str | Iterable[Mapping[str, Any]], structured: Any = None) -> list[Any]:
    """The values of a result the model reads, as one JSON list for the ledger:
    ``content`` (a string, or content blocks) and ``structured`` (its structured content,
    ``None`` when it has none)."""
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
    if structured is not None:
        values.append(structured)
    return values


def _without_binary(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _without_binary(v) for k, v in value.items() if k not in _BINARY_KEYS}
    return value
