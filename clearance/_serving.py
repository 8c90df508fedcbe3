"""uvicorn serving an ASGI application on a socket its caller made, as the gateway, the PDP
and the inbox do.

Each makes its own listening socket (``TCP_NODELAY``, the address it checks and reports)
and its own ``uvicorn.Config``; what they share is here: a server that leaves signals to
its caller (the CLI cancels it on SIGTERM or SIGINT), entered once it listens (uvicorn
offers no startup event, only a flag), and shut down gracefully when the caller's block
ends, a cancelled block included (the serving task is shielded, so that cancelling does
not abandon its connections; ``should_exit`` asks it to stop).
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio

from clearance.errors import ConfigError

__all__ = ["quiet_server", "uvicorn_serving"]


def quiet_server(config: Any) -> Any:
    """A ``uvicorn.Server`` for ``config`` that installs no signal handler."""
    import uvicorn

    class QuietServer(uvicorn.Server):
        """A uvicorn server that leaves signals to its caller."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return QuietServer(config)


@contextlib.asynccontextmanager
async def uvicorn_serving(
    config: Any, sock: socket.socket, *, failed: str, grace: float
) -> AsyncIterator[Any]:
    """Serve ``config``'s application on ``sock`` while the block runs; yields the server.

    Entered once uvicorn listens; left by asking it to stop and waiting ``grace`` seconds
    at most for its connections to end. ``sock`` is closed at the end.

    Raises:
        ConfigError: ``failed``, when uvicorn stopped before it listened.
    """
    server = quiet_server(config)
    done = anyio.Event()

    async def run() -> None:
        with anyio.CancelScope(shield=True):
            try:
                await server.serve([sock])
            finally:
                done.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            while not server.started and not done.is_set():  # noqa: ASYNC110
                await anyio.sleep(0.01)
            if done.is_set():
                raise ConfigError(failed)
            try:
                yield server
            finally:
                server.should_exit = True
                with anyio.CancelScope(shield=True), anyio.move_on_after(grace):
                    await done.wait()
    finally:
        sock.close()
