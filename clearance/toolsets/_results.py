"""The error results the bundled tools return for the failures they expect.

A missing file, a refused path, a bad regex or a program that is not allowed is not an
exception: the model reads ``CallToolResult(message, is_error=True)`` with
``structured_content={"error": kind}`` and can act on it.
"""

from __future__ import annotations

from clearance.guardrails.paths import PathScopeError
from clearance.harness.tools import CallToolResult

__all__ = ["error_result", "file_failure"]


def error_result(message: str, kind: str) -> CallToolResult:
    """An error result the model reads: ``message``, and ``kind`` as ``{"error": kind}``."""
    return CallToolResult(message, structured_content={"error": kind}, is_error=True)


def file_failure(tool: str, path: str, exc: OSError) -> CallToolResult:
    """A domain error the model can act on, for the failures a file tool expects."""
    if isinstance(exc, PathScopeError):
        return error_result(f"{tool}: path {exc.path!r} is refused: {exc.reason}", "refused")
    if isinstance(exc, FileNotFoundError):
        return error_result(f"{tool}: no such file or directory: {path!r}", "not_found")
    if isinstance(exc, IsADirectoryError):
        return error_result(f"{tool}: {path!r} is a directory", "is_a_directory")
    if isinstance(exc, NotADirectoryError):
        return error_result(
            f"{tool}: {path!r} (or one of its parents) is not a directory", "not_a_directory"
        )
    if isinstance(exc, FileExistsError):
        return error_result(f"{tool}: {path!r} already exists", "exists")
    if isinstance(exc, PermissionError):
        return error_result(f"{tool}: permission denied: {path!r}", "permission_denied")
    reason = exc.strerror or type(exc).__name__
    return error_result(f"{tool}: {path!r}: {reason}", "os_error")
