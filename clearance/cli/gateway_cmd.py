"""``clearance gateway``: serve the configured MCP servers' tools through clearance.

Start-up from a ``clearance.toml`` lives here: :func:`open_gateway` builds the harness from
the file's main configuration, starts the ``[[mcp_servers]]``, binds the evaluator to their
tools (a policy that does not fit them stops the start, before anything is served) and
wraps the harness in a :class:`~clearance.mcp.Gateway`; :func:`run_gateway` serves it over
stdio or HTTP (generating the HTTP token when none is configured). ``--check`` runs
:func:`check_gateway`: the same checks, serving nothing and opening no store.

The gateway needs the optional ``mcp`` extra. The command is always listed; without the
extra, ``clearance gateway`` (with or without ``--help``) prints how to install it and
exits 2. :mod:`clearance.mcp` is imported only when the command runs, so that every other
command works without it.
"""

from __future__ import annotations

import dataclasses
import secrets
import signal
import sys
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import click

from clearance._text import printable
from clearance.cli._serve import serve_until_signal
from clearance.cli._tools import learn_server_tools, start_servers
from clearance.cli.main import EXIT_USAGE, cli, fail, fail_too_deep
from clearance.cli.policy_cmd import quiet_cedar_log
from clearance.config import (
    build_evaluator,
    build_guardrails,
    build_harness,
    build_registry,
    load_config,
    load_gateway_config,
    resolve_config,
)
from clearance.errors import ClearanceError, ConfigError, MissingExtraError, PolicyError
from clearance.harness.session import Harness
from clearance.harness.tools import ToolRegistry
from clearance.policy.base import bind
from clearance.tuning import register_tool_declarations

if TYPE_CHECKING:
    from clearance.mcp import Gateway, GatewayConfig

__all__ = ["check_gateway", "gateway", "open_gateway", "run_gateway"]


class _NeedsMcp(click.Command):
    """A command that says how to install the ``mcp`` extra, before parsing anything
    (``--help`` included), when it is missing."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            import clearance.mcp  # noqa: F401
        except MissingExtraError as exc:
            fail(str(exc), EXIT_USAGE)
        return super().parse_args(ctx, args)


@cli.command("gateway", cls=_NeedsMcp)
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
@click.option(
    "--check",
    is_flag=True,
    help="Check the configuration and exit (0: it would start, 2: it would not): start "
    "the servers to list their tools, validate every policy against them, build the "
    "guardrails; serve nothing, open no journal.",
)
def gateway(
    config_path: Path,
    transport: str | None,
    host: str | None,
    port: int | None,
    token_file: Path | None,
    check: bool,
) -> None:
    """Run an MCP gateway: every tool call passes clearance before it reaches a server.

    A configuration that cannot work (a policy that does not validate against the
    servers' tools, a server that does not start) stops the gateway before it serves
    anything, with every problem and its file:line, and exit code 2.

    Over HTTP the gateway prints its URL on stderr once it listens; clients send
    `Authorization: Bearer <token>` with the token from --token-file.
    """
    try:
        config = load_gateway_config(config_path)
    except ClearanceError as exc:
        fail(str(exc), EXIT_USAGE)
    except RecursionError:
        fail_too_deep(config_path)
    if check:
        _check(config)
        return
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

    # Upstream servers are closed cleanly on SIGTERM/SIGINT instead of dying mid-call.
    serve_until_signal(lambda: run_gateway(config, ready=ready))


def _check(config: GatewayConfig) -> None:
    """``--check``: what start-up checks, without serving or opening any store; exit 0 with
    a summary, or 2 with every problem (``fail``)."""
    assert config.path is not None
    try:
        summary = check_gateway(config)
    except ClearanceError as exc:
        fail(str(exc), EXIT_USAGE)
    except RecursionError:
        fail_too_deep(config.path)
    click.echo(printable(f"ok: {config.path}: {summary}"))


def check_gateway(config: GatewayConfig) -> str:
    """Check the configuration ``clearance gateway`` would start from: start the servers
    to list their tools (then stop them), validate the evaluator's policies or rules
    against those tools (every problem of every policy file), build the guardrails,
    check the PostgreSQL store's URL and schema name. Nothing is served; no journal,
    grant or ask store is opened.

    Returns:
        A one-line summary (tools, servers, evaluator).

    Raises:
        PolicyError: policies that do not parse or validate (``problems`` lists all).
        ConfigError: anything else that would stop the gateway from starting.
        MissingExtraError: the ``mcp`` extra is not installed.
    """
    from clearance.policy.cedar import check_directory

    assert config.path is not None
    main = load_config(config.path)
    if main.store is not None:
        # Parsed, not connected: a URL or schema name the stores would refuse stops the
        # gateway at start-up, so it fails the check too.
        from clearance.harness.postgres import check_url

        check_url(main.store)
    registry = build_registry(main)
    register_tool_declarations(registry, learn_server_tools(config.servers))
    names = [tool.qualified_name for tool in registry]
    build_guardrails(main, tools=names)
    evaluator = main.evaluator
    if evaluator.kind == "cedar" and evaluator.policies is not None:
        with quiet_cedar_log():
            check = check_directory(evaluator.policies, registry, entities=evaluator.entities)
        if check.problems:
            first = check.problems[0]
            line = first.get("line")
            raise PolicyError(
                str(first.get("message")),
                path=str(first.get("path")),
                line=line if isinstance(line, int) else None,
                problems=[dict(p) for p in check.problems],
            )
        decided = f"{check.policies} Cedar policies validate"
    else:
        with quiet_cedar_log():
            bind(build_evaluator(main), registry)
        decided = f"the {evaluator.kind} evaluator binds"
    servers = len(config.servers)
    return f"{len(registry)} tools ({servers} MCP server{'' if servers == 1 else 's'}), {decided}"


# --- start-up from a config file ---------------------------------------------------------------


def _harness_from_file(path: Path) -> Harness:
    """The harness the main configuration in ``path`` describes (``clearance.config``)."""
    config = load_config(path)
    return build_harness(config, registry=build_registry(config))


@asynccontextmanager
async def open_gateway(
    config: GatewayConfig, *, harness_factory: Callable[[ToolRegistry], Harness] | None = None
) -> AsyncIterator[Gateway]:
    """A started harness with the configured servers registered, and its gateway.

    The harness is built from the same file's main configuration (``[evaluator]``,
    ``[[guardrails]]``, ``[journal]``, ``[approvals]``, ``[limits]``, ``[tools]``; see
    :mod:`clearance.config`), or by ``harness_factory(registry)`` when given.

    Raises:
        MissingExtraError: the ``mcp`` extra is not installed.
        ConfigError: the configuration is unusable.
    """
    from clearance.mcp import Gateway  # the optional extra (see the module docstring)

    if harness_factory is not None:
        harness = harness_factory(ToolRegistry())
    elif config.path is not None:
        harness = _harness_from_file(config.path)
    else:
        raise ConfigError("a GatewayConfig without a file needs a harness_factory")
    async with harness:
        await start_servers(harness, config.servers)
        # Bind the evaluator to the tools now: a policy that does not fit them stops the
        # gateway before it serves (not at the first session, as "Internal server error").
        harness.freeze()
        yield Gateway(
            harness,
            principal=config.principal,
            ask_fallback=config.ask_fallback,
            elicitation=config.elicitation,
            show_ask_store=harness_factory is not None or not _asks_finds_store(harness),
            session_idle_timeout=config.session_idle_timeout,
            max_sessions=config.max_sessions,
            limits=config.limits,
        )


def _asks_finds_store(harness: Harness) -> bool:
    """Whether ``clearance asks`` run here without ``--db`` opens ``harness``'s ask store:
    the grant store file of the configuration it finds (``./clearance.toml``, else the
    built-in one). Pending results then need not name the file."""
    store = harness.ask_store
    database = getattr(store, "database", None)
    try:
        config = resolve_config(None)
        if database is not None:  # PostgreSQL: the configuration's store, same schema
            if config.store is None:
                return False
            from clearance.harness.postgres import check_url, shown_url

            found = shown_url(config.store, schema=check_url(config.store))
            return bool(found == getattr(store, "location", None))
        path = getattr(store, "path", None)
        if not isinstance(path, str):
            return False
        return Path(path).resolve() == config.grants_path.resolve()
    except (ClearanceError, OSError, RecursionError):
        return False


async def run_gateway(
    config: GatewayConfig,
    *,
    harness_factory: Callable[[ToolRegistry], Harness] | None = None,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Run the gateway described by ``config`` until stdin closes (stdio) or cancelled.

    Over HTTP without configured tokens, a random token is generated and written to
    ``config.token_file`` (default ``~/.clearance/gateway.token``, mode 0600) before the
    socket listens.

    Raises:
        MissingExtraError: the ``mcp`` extra is not installed.
        ConfigError: the configuration is unusable (no evaluator, a server that does not
            start, a token file that cannot be written).
    """
    async with (
        open_gateway(config, harness_factory=harness_factory) as gateway,
        anyio.create_task_group() as tg,
    ):
        if _can_take_signals():
            tg.start_soon(_reload_on_sighup, gateway.harness.evaluator)
        try:
            await _serve(gateway, config, ready)
        finally:
            tg.cancel_scope.cancel()


def _can_take_signals() -> bool:
    return hasattr(signal, "SIGHUP") and threading.current_thread() is threading.main_thread()


async def _reload_on_sighup(evaluator: Any) -> None:
    """SIGHUP reloads the policies (a SIGHUP used to kill the gateway): a set that does not
    load leaves the last good one in force, said on stderr."""
    with anyio.open_signal_receiver(signal.SIGHUP) as signals:
        async for _ in signals:
            _reload_policies(evaluator)


def _reload_policies(evaluator: Any) -> bool:
    """Reload ``evaluator``'s policies now, saying on stderr what happened; False (and the
    last good set kept) when the new set does not load or the evaluator has none to reload."""
    reload = getattr(evaluator, "reload", None)
    if not callable(reload):
        print(
            "clearance gateway: SIGHUP: this evaluator has no policies to reload",
            file=sys.stderr,
            flush=True,
        )
        return False
    try:
        reload()
    except ClearanceError as exc:
        print(
            printable(
                f"clearance gateway: SIGHUP: the policies did not load; the last good set "
                f"stays in force: {exc}",
                newlines=True,
            ),
            file=sys.stderr,
            flush=True,
        )
        return False
    version = getattr(evaluator, "policy_version", None)
    print(
        "clearance gateway: SIGHUP: policies reloaded" + (f" ({version})" if version else ""),
        file=sys.stderr,
        flush=True,
    )
    return True


async def _serve(gateway: Any, config: GatewayConfig, ready: Callable[[str], None] | None) -> None:
    from clearance.mcp.gateway import DEFAULT_TOKEN_FILE, PrincipalToken, write_token_file

    if config.transport == "stdio":
        if ready is not None:
            ready("stdio")
        await gateway.serve_stdio()
        return
        # The token is made only once everything else is known to work.
    tokens = list(config.tokens)
    if not tokens:
        token_file = config.token_file or DEFAULT_TOKEN_FILE
        token = secrets.token_urlsafe(32)
        try:
            write_token_file(token_file, token)
        except OSError as exc:
            raise ConfigError(f"cannot write the token file {token_file}: {exc}") from None
        tokens = [PrincipalToken(config.principal, token)]
        print(f"clearance gateway: token written to {token_file}", file=sys.stderr)
    await gateway.serve_http(
        tokens, host=config.host, port=config.port, endpoint=config.endpoint, ready=ready
    )
