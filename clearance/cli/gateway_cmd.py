"""``clearance gateway``: serve the configured MCP servers' tools through clearance."""

from __future__ import annotations

import dataclasses
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import click

from clearance._text import printable
from clearance.cli.main import EXIT_USAGE, cli, fail, fail_too_deep
from clearance.errors import ClearanceError

__all__ = ["gateway"]


@cli.command("gateway")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default="clearance.toml",
    show_default=True,
    help="Config file with a [gateway] table and [[mcp_servers]] entries.",
)
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default=None,
    help="Serve over stdio (default) or Streamable HTTP.",
)
@click.option("--host", default=None, help="HTTP address to bind (default 127.0.0.1).")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=None, help="HTTP port (0: any free)."
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where to write the generated bearer token (mode 0600).",
)
def gateway(
    config_path: Path,
    transport: str | None,
    host: str | None,
    port: int | None,
    token_file: Path | None,
) -> None:
    """Run an MCP gateway: every tool call passes clearance before it reaches a server.

    Over HTTP the gateway prints its URL on stderr once it listens; clients send
    `Authorization: Bearer <token>` with the token from --token-file.
    """
    from clearance.mcp.gateway import load_gateway_config, run_gateway

    try:
        config = load_gateway_config(config_path)
    except ClearanceError as exc:
        fail(str(exc), EXIT_USAGE)
    except RecursionError:
        fail_too_deep(config_path)
    changes: dict[str, Any] = {}
    if transport is not None:
        changes["transport"] = transport
    if host is not None:
        changes["host"] = host
    if port is not None:
        changes["port"] = port
    if token_file is not None:
        changes["token_file"] = token_file.expanduser().resolve()
    config = dataclasses.replace(config, **changes)

    def ready(where: str) -> None:
        if where != "stdio":
            print(
                f"clearance gateway: listening on {printable(where)}", file=sys.stderr, flush=True
            )

    async def main() -> None:
        async with anyio.create_task_group() as tg:

            async def on_signal() -> None:
                # Close upstream servers cleanly on SIGTERM/SIGINT instead of dying mid-call.
                with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                    async for _ in signals:
                        tg.cancel_scope.cancel()
                        return

            tg.start_soon(on_signal)
            await run_gateway(config, ready=ready)
            tg.cancel_scope.cancel()

    try:
        anyio.run(main)
    except ClearanceError as exc:
        fail(str(exc), EXIT_USAGE)
    except BaseExceptionGroup as group:
        # The task group wraps a configuration error raised while starting up.
        match, _ = group.split(ClearanceError)
        if match is None:
            raise
        fail(str(_first(match)), EXIT_USAGE)
    except KeyboardInterrupt:
        pass


def _first(group: BaseExceptionGroup[Any]) -> BaseException:
    leaf: BaseException = group
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    return leaf
