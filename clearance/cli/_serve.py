"""Running a server command until SIGTERM or SIGINT (``clearance gateway``, ``pdp``,
``inbox``): the signal cancels the server, which then shuts down cleanly (running calls
recorded, upstream servers and connections closed) instead of dying mid-call; a
configuration error raised while it starts, also from inside a task group, exits 2 with
its message."""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable

import anyio

from clearance.cli.main import fail
from clearance.errors import ClearanceError

__all__ = ["serve_until_signal"]


def serve_until_signal(serve: Callable[[], Awaitable[None]]) -> None:
    """Run ``serve()`` until it returns or a signal cancels it (see the module docstring)."""

    async def main() -> None:
        async with anyio.create_task_group() as tg:

            async def on_signal() -> None:
                with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                    async for _ in signals:
                        tg.cancel_scope.cancel()
                        return

            tg.start_soon(on_signal)
            await serve()
            tg.cancel_scope.cancel()

    try:
        anyio.run(main)
    except ClearanceError as exc:
        fail(str(exc))
    except BaseExceptionGroup as group:
        match, _ = group.split(ClearanceError)
        if match is None:
            raise
        leaf: BaseException = match
        while isinstance(leaf, BaseExceptionGroup):
            leaf = leaf.exceptions[0]
        fail(str(leaf))
    except KeyboardInterrupt:
        pass
