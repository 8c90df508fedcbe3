"""Where upstream progress goes besides ``ctx.progress``: the gateway's MCP client.

A context variable, set by the gateway around ``session.call_tool`` and read by the
upstream connection when the call is forwarded (async handlers run in the calling task,
so the handler sees it).
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable

__all__ = ["ProgressRelay", "current_relay", "progress_relay", "reset_progress_relay"]

ProgressRelay = Callable[[float, float | None, str | None], Awaitable[None]]
"""``(progress, total, message)``: where the gateway wants upstream progress relayed."""

_RELAY: contextvars.ContextVar[ProgressRelay | None] = contextvars.ContextVar(
    "clearance_mcp_progress_relay", default=None
)


def progress_relay(relay: ProgressRelay | None) -> contextvars.Token[ProgressRelay | None]:
    """Relay upstream progress of calls made from this context to ``relay`` as well.

    The gateway sets it around ``session.call_tool`` so that an MCP client of the gateway
    receives the upstream server's progress notifications with their numbers intact.
    Async handlers run in the calling task, so the handler sees this context variable.

    Returns:
        A token for :func:`reset_progress_relay`.
    """
    return _RELAY.set(relay)


def reset_progress_relay(token: contextvars.Token[ProgressRelay | None]) -> None:
    """Undo :func:`progress_relay`."""
    _RELAY.reset(token)


def current_relay() -> ProgressRelay | None:
    """The relay set for this context, if any."""
    return _RELAY.get()
