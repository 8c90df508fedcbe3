"""What a handler returns, and how it becomes the one result shape the model sees.

A handler may return a string, a JSON value, a :class:`CallToolResult` (MCP's shape) or
a :class:`ToolImageResult`; :func:`normalize_result` checks it and turns it into a
:class:`CallToolResult`.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MAX_IMAGE_BASE64",
    "MAX_IMAGE_METADATA",
    "CallToolResult",
    "ResultError",
    "ToolImageResult",
    "normalize_result",
]

MAX_IMAGE_BASE64 = 768_000
"""The most base64 characters an image result may have."""
MAX_IMAGE_METADATA = 128_000
"""The most characters an image result's metadata may have, as JSON."""


@dataclass(frozen=True, slots=True)
class CallToolResult:
    """A tool result in the shape MCP uses.

    ``is_error=True`` is a domain error the model may act on (file not found), not a
    failure of the tool.
    """

    content: Sequence[Mapping[str, Any]] | str = ()
    """Content blocks (``{"type": "text", "text": ...}``) or plain text."""
    structured_content: Any = None
    is_error: bool = False

    def to_json(self) -> dict[str, Any]:
        content = (
            [{"type": "text", "text": self.content}]
            if isinstance(self.content, str)
            else [dict(block) for block in self.content]
        )
        return {
            "content": content,
            "structured_content": self.structured_content,
            "is_error": self.is_error,
        }

    @property
    def text(self) -> str:
        """The text blocks joined, as a text-only model would see them."""
        if isinstance(self.content, str):
            return self.content
        parts = [str(b.get("text", "")) for b in self.content if b.get("type") == "text"]
        if not parts and self.structured_content is not None:
            return json.dumps(self.structured_content, ensure_ascii=False)
        return "\n".join(parts)


@dataclass(frozen=True, slots=True)
class ToolImageResult:
    """One JPEG or PNG image (base64, at most 768,000 characters) with JSON metadata."""

    metadata: Mapping[str, Any]
    image: str | bytes
    """The image as base64 text, or raw bytes (encoded for you)."""


_PNG = b"\x89PNG\r\n\x1a\n"
_JPEG = b"\xff\xd8\xff"


class ResultError(ValueError):
    """A handler returned something that is not a valid tool result."""


def normalize_result(value: Any) -> CallToolResult:
    """Turn what a handler returned into a :class:`CallToolResult`.

    Raises:
        ResultError: the value is not a string, JSON value, ``CallToolResult`` or a valid
            ``ToolImageResult``.
    """
    if type(value) is str:  # the common case first
        return CallToolResult(value)
    if isinstance(value, CallToolResult):
        if not isinstance(value.is_error, bool):
            raise ResultError("CallToolResult.is_error must be a bool")
        content = value.content
        if not isinstance(content, str):
            if not all(isinstance(b, Mapping) and isinstance(b.get("type"), str) for b in content):
                raise ResultError("CallToolResult.content must be text or blocks with a 'type'")
        _check_json(value.to_json())
        return value
    if isinstance(value, ToolImageResult):
        return _image_result(value)
    if isinstance(value, str):
        return CallToolResult(value)
    _check_json(value)
    text = json.dumps(value, ensure_ascii=False)
    return CallToolResult([{"type": "text", "text": text}], structured_content=value)


def _check_json(value: Any) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ResultError(f"the result is not JSON-serializable: {exc}") from None


def _image_result(value: ToolImageResult) -> CallToolResult:
    image = value.image
    if isinstance(image, bytes | bytearray):
        raw = bytes(image)
        encoded = base64.b64encode(raw).decode("ascii")
    elif isinstance(image, str):
        encoded = image
        try:
            raw = base64.b64decode(image, validate=True)
        except ValueError:
            raise ResultError("ToolImageResult.image is not valid base64") from None
    else:
        raise ResultError("ToolImageResult.image must be base64 text or bytes")
    if len(encoded) > MAX_IMAGE_BASE64:
        raise ResultError(
            f"the image is {len(encoded)} base64 characters; the limit is {MAX_IMAGE_BASE64}"
        )
    if raw.startswith(_PNG):
        mime = "image/png"
    elif raw.startswith(_JPEG):
        mime = "image/jpeg"
    else:
        raise ResultError("the image is neither PNG nor JPEG (checked by its signature)")
    if not isinstance(value.metadata, Mapping):
        raise ResultError("ToolImageResult.metadata must be a JSON object")
    _check_json(dict(value.metadata))
    meta_text = json.dumps(dict(value.metadata), ensure_ascii=False)
    if len(meta_text) > MAX_IMAGE_METADATA:
        raise ResultError(
            f"image metadata is {len(meta_text)} characters; the limit is {MAX_IMAGE_METADATA}"
        )
    return CallToolResult(
        [{"type": "text", "text": meta_text}, {"type": "image", "data": encoded, "mimeType": mime}],
        structured_content=dict(value.metadata),
    )
