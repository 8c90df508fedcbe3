"""Options several verbs share: ``--config`` and ``--principal``, and what they default to."""

from __future__ import annotations

import getpass
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import click

from clearance.errors import ConfigError
from clearance.types import Principal

if TYPE_CHECKING:
    from clearance.config import Config

__all__ = [
    "Approve",
    "config_option",
    "default_principal",
    "load_cli_config",
    "principal_option",
]

Approve = Literal["ask", "allow", "deny"]
"""``--approve``: prompt, answer ``allow_once``, or deny every ask."""


def config_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--config FILE``: the configuration (default: ./clearance.toml, else built-in)."""
    return click.option(
        "--config",
        "config_path",
        metavar="FILE",
        default=None,
        help="The clearance.toml to use (default: ./clearance.toml if present, else the "
        "built-in default: the coding Cedar pack over files and shell tools in the "
        "current directory).",
    )(fn)


def load_cli_config(path: str | None) -> Config:
    """The configuration for a command: ``--config``, else ./clearance.toml, else built-in.

    Raises:
        ConfigError: the file is missing or wrong, or nested too deeply to read (the CLI
            prints it and exits 2).
    """
    # Imported here: the configuration's models import the toolsets, the guardrails and
    # pydantic, which a verb given ``--db`` never needs (issue 34).
    from clearance.config import find_config, resolve_config

    try:
        return resolve_config(path)
    except RecursionError:
        where = path if path is not None else find_config()
        raise ConfigError("nested too deeply to read", path=str(where)) from None


def default_principal() -> Principal:
    """``User::"<login name>"``: who a command-line session acts for by default."""
    try:
        name = getpass.getuser()
    except (KeyError, OSError):  # no login name (some containers)
        name = "user"
    return Principal("User", name or "user")


def _parse_principal(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    if value is None:
        return None
    try:
        return Principal.parse(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def principal_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--principal 'User::"alice"'``."""
    return click.option(
        "--principal",
        metavar="ENTITY",
        default=None,
        callback=_parse_principal,
        help="Who the session acts for, as a Cedar entity: 'User::\"alice\"' "
        '(default: User::"<your login name>").',
    )(fn)
