"""Tools, the registry that names them, the context a handler gets, and handler results.

The names users import, by the module path DESIGN.md lists. Each concept lives in its own
module: :class:`Tool` and :class:`ToolRegistry` in ``_registry`` (with ``_tool_schema``
compiling input schemas and ``_signature`` deriving them from a function), the
:class:`CallContext` in ``_context``, and results (:class:`CallToolResult`,
:class:`ToolImageResult`, :func:`normalize_result`) in ``_results``.
"""

from __future__ import annotations

from clearance.harness._context import CallContext, Handler, ProgressSink
from clearance.harness._registry import RESERVED_NAMESPACES, Tool, ToolRegistry
from clearance.harness._results import (
    MAX_IMAGE_BASE64,
    MAX_IMAGE_METADATA,
    CallToolResult,
    ResultError,
    ToolImageResult,
    normalize_result,
)

__all__ = [
    "MAX_IMAGE_BASE64",
    "MAX_IMAGE_METADATA",
    "RESERVED_NAMESPACES",
    "CallContext",
    "CallToolResult",
    "Handler",
    "ProgressSink",
    "ResultError",
    "Tool",
    "ToolImageResult",
    "ToolRegistry",
    "normalize_result",
]
