"""``clearance pdp``: the configured evaluator served as an OpenID AuthZEN PDP.

::

    clearance pdp [--config FILE] [--tools FILE] [--host ADDR] [--port N]
                  [--token-env NAME] [--public-url URL] [--tls-cert FILE --tls-key FILE]
                  [--no-journal] [--plain-http]

Other gateways ask ``POST /access/v1/evaluation`` (and ``/evaluations``) with the bearer
token found in the environment variable ``--token-env`` (default ``CLEARANCE_PDP_TOKEN``,
at least 16 characters: the command refuses to start without it), and get the decisions of
the configuration's evaluator (``[evaluator]``: Cedar policies, a pack, local rules) on
its tools (the bundled toolsets, the ``[[mcp_servers]]``' tools, or ``--tools FILE``). The
policies are bound to the tools before anything is served: a policy that does not fit
stops the start (exit 2). Every evaluation is journaled in the configuration's journal
(``[journal] path``, or ``store``) as a ``call_decided`` record of outcome ``answered``
naming its caller, unless ``--no-journal``. See ``docs/authzen.md``.

Serving needs uvicorn, from the optional ``authzen`` extra. The command is always listed;
without the extra, ``clearance pdp`` (with or without ``--help``) prints how to install it
and exits 2.
"""

from __future__ import annotations

import os

import click

from clearance._text import printable
from clearance.cli._options import config_option
from clearance.cli._serve import serve_until_signal
from clearance.cli._tools import command_tools, tools_option
from clearance.cli.main import EXIT_USAGE, cli, fail
from clearance.config import build_evaluator, build_journal
from clearance.errors import ClearanceError, MissingExtraError
from clearance.harness.approvals import MemoryGrantStore
from clearance.harness.journal import MemoryJournal
from clearance.harness.session import Harness
from clearance.pdp import AuthZenPdp, PdpStarted, serve_pdp
from clearance.policy.authzen_wire import pdp_url

__all__ = ["DEFAULT_PDP_TOKEN_ENV", "pdp"]

DEFAULT_PDP_TOKEN_ENV = "CLEARANCE_PDP_TOKEN"
"""Where ``clearance pdp`` reads the bearer token its callers must present."""


class _NeedsUvicorn(click.Command):
    """A command that says how to install the extra it needs, before parsing anything
    (``--help`` included), when it is missing."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            import uvicorn  # noqa: F401
        except ImportError:
            fail(str(MissingExtraError("authzen", "clearance pdp")), EXIT_USAGE)
        return super().parse_args(ctx, args)


@cli.command("pdp", cls=_NeedsUvicorn)
@config_option
@tools_option
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8767,
    show_default=True,
    help="The port (0: any free port).",
)
@click.option(
    "--token-env",
    metavar="NAME",
    default=DEFAULT_PDP_TOKEN_ENV,
    show_default=True,
    help="The environment variable holding the bearer token callers must present.",
)
@click.option(
    "--public-url",
    metavar="URL",
    default=None,
    help="The PDP's URL as its callers reach it (behind a proxy), for the metadata "
    "document (default: the address it listens on).",
)
@click.option("--tls-cert", metavar="FILE", default=None, help="Serve HTTPS: the certificate.")
@click.option("--tls-key", metavar="FILE", default=None, help="Serve HTTPS: its private key.")
@click.option(
    "--no-journal",
    is_flag=True,
    help="Journal nothing (by default every evaluation is journaled in the configuration's "
    "journal, naming its caller).",
)
@click.option(
    "--plain-http",
    is_flag=True,
    help="Serve plain HTTP on an address that is not loopback (tokens and decisions then "
    "cross the network in clear).",
)
def pdp(
    config_path: str | None,
    tools_path: str | None,
    host: str,
    port: int,
    token_env: str,
    public_url: str | None,
    tls_cert: str | None,
    tls_key: str | None,
    no_journal: bool,
    plain_http: bool,
) -> None:
    """Serve the configured evaluator as an AuthZEN PDP (/access/v1/evaluation).

    Other gateways send AuthZEN evaluation requests with the bearer token from
    $CLEARANCE_PDP_TOKEN and get the decisions of this configuration's policies on its
    tools. Stop with Ctrl-C.
    """
    token = os.environ.get(token_env, "")
    if len(token) < 16:
        fail(
            f"set {token_env} to the bearer token callers must present (at least 16 "
            f"characters; for example: export {token_env}=$(openssl rand -hex 32))"
        )
    for given, what in ((tls_cert, "--tls-cert"), (tls_key, "--tls-key")):
        if given is not None and not os.path.isfile(given):
            fail(f"{what} {given}: no such file")
    if public_url is not None:
        try:
            public_url = pdp_url(public_url)
        except ValueError as exc:
            fail(f"--public-url: {exc}")
    try:
        tools = command_tools(config_path, tools_path)
        evaluator = build_evaluator(tools.config)
        journal = MemoryJournal() if no_journal else build_journal(tools.config)
        harness = Harness(
            tools.registry,
            evaluator=evaluator,
            journal=journal,
            grant_store=MemoryGrantStore(),
            max_argument_bytes=tools.config.limits.max_argument_bytes,
        )
        harness.freeze()  # binds the evaluator: a policy that does not fit stops here
        app = AuthZenPdp(
            harness,
            token=token,
            base_url=public_url,
            journal=not no_journal,
            token_name=token_env,
        )
    except (ClearanceError, ValueError) as exc:
        fail(str(exc))

    def ready(started: PdpStarted) -> None:
        click.echo(f"clearance pdp on {printable(started.url)} ({tools.summary()})")
        click.echo(f"Callers present the token in {token_env}. Stop with Ctrl-C.")

    async def serve() -> None:
        async with harness:
            await serve_pdp(
                app,
                host=host,
                port=port,
                tls_cert=tls_cert,
                tls_key=tls_key,
                plain_http=plain_http,
                ready=ready,
            )

    serve_until_signal(serve)
