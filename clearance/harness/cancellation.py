"""Cancelling a call that is in the pipeline, as ``Session.aclose`` does (rule R7: every call
ends exactly once, and none starts its handler after the close returns)."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio

__all__ = ["CallHandle", "current_task", "this_task"]

current_task = asyncio.current_task
"""How the running asyncio task is found (replaced in tests to force the cancel-scope
path that other backends take)."""
_CLOSED = "clearance: the session closed"


def this_task() -> asyncio.Task[Any] | None:
    """The running asyncio task; None on another backend (calls there hold cancel scopes)."""
    try:
        return current_task()
    except RuntimeError:  # no asyncio loop running
        return None


class CallHandle:
    """A call between entering the pipeline and the end of its handler, as
    ``Session.aclose`` cancels it.

    On asyncio the call's own task is cancelled natively (``Task.cancel``) and the
    cancellation is taken back (``Task.uncancel``) where the call catches it: an anyio
    cancel scope per call costs about 4 us, a fifth of the pipeline's whole budget. anyio
    lets native cancellations pass through its scopes untouched, shielded ones included,
    so a journal write must not be cancelled natively: a cancellation requested while the
    call ``holds`` (writes its records) waits, and is delivered when the last hold is
    released (see ``Pipeline._record``), before the call can take another step. A
    ``quiet`` call is not cancelled at all: the close itself ends it (an ask the close
    answers, a call that is already ending); it still cannot start its handler, because
    admission and dispatch check ``requested``. Elsewhere (trio) the handler runs in an
    anyio cancel scope, and a call closed before it got that far stops at those checks.
    """

    __slots__ = ("delivered", "holds", "quiet", "requested", "scope", "task")

    def __init__(self) -> None:
        self.task = this_task()
        self.scope: anyio.CancelScope | None = None
        self.requested = False
        self.delivered = False
        self.holds = 0
        self.quiet = False

    def cancel(self) -> None:
        if self.requested:
            return
        self.requested = True
        if self.scope is not None:
            self.scope.cancel()
        elif self._pending():
            self._deliver()

    def _pending(self) -> bool:
        return (
            self.requested
            and not self.delivered
            and not self.holds
            and not self.quiet
            and self.task is not None
            and self.scope is None
        )

    def _deliver(self) -> None:
        assert self.task is not None
        self.delivered = True
        self.task.cancel(_CLOSED)

    def hold(self) -> None:
        """Defer cancellation until the matching :meth:`release` (or :meth:`unhold`)."""
        self.holds += 1

    def unhold(self) -> None:
        """End a :meth:`hold` without delivering anything (the call ends anyway)."""
        self.holds -= 1

    async def release(self) -> None:
        """End a :meth:`hold`; a cancellation requested meanwhile is delivered here, when
        the last hold ends."""
        self.holds -= 1
        if self._pending():
            self._deliver()
            await asyncio.sleep(0)  # raises CancelledError here, not at some later await

    def caught(self) -> bool:
        """Whether a CancelledError the call caught is this handle's own (then it is taken
        back); False means it came from elsewhere and must go on."""
        if not self.delivered or self.task is None or self.scope is not None:
            return False
        # Another cancellation landed too (the caller's): take ours back, let that one go on.
        return self.task.uncancel() == 0
