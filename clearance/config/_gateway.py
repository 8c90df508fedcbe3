"""Reading ``[gateway]`` and ``[[mcp_servers]]`` into a
:class:`~clearance.mcp.GatewayConfig`.

The same :class:`~clearance.config._toml.TomlReader` as the main configuration reads them,
so an error names the key, the file and the line. The values are the gateway's own types,
from :mod:`clearance.mcp`, which needs the optional ``mcp`` extra: without it,
:func:`load_gateway_config` raises :class:`~clearance.errors.MissingExtraError` before it
reads anything.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from clearance.config._toml import TomlReader, Where
from clearance.types import Principal

if TYPE_CHECKING:
    from clearance.mcp import GatewayConfig, McpServerConfig
    from clearance.mcp.gateway import HttpLimits

__all__ = ["load_gateway_config", "load_mcp_servers"]

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

_LIMIT_KEYS = (
    "max_connections",
    "header_timeout",
    "idle_timeout",
    "write_timeout",
    "max_request_bytes",
    "max_requests",
    "max_sessions_per_principal",
)
"""The ``[gateway]`` keys of :class:`~clearance.mcp.gateway.HttpLimits`."""
_GATEWAY_KEYS = (
    "transport",
    "host",
    "port",
    "endpoint",
    "token_file",
    "principal",
    "tokens",
    "ask_fallback",
    "elicitation",
    "session_idle_timeout",
    "max_sessions",
    *_LIMIT_KEYS,
)
_SERVER_KEYS = (
    "name",
    "program",
    "args",
    "env",
    "cwd",
    "url",
    "transport",
    "headers",
    "tools",
    "read_only",
    "trust_annotations",
    "restart",
    "call_timeout",
)


def load_gateway_config(path: str | os.PathLike[str]) -> GatewayConfig:
    """Read the ``[gateway]`` table and ``[[mcp_servers]]`` entries of a TOML file.

    Other tables (evaluator, policies, guardrails, journal, limits) belong to the main
    configuration (:func:`~clearance.config.load_config`) and are ignored here.

    Raises:
        MissingExtraError: the ``mcp`` package is not installed.
        ConfigError: the file cannot be read, is not TOML, or an entry is wrong (the
            message names the key, the file and the line).
    """
    # Only the gateway needs the MCP SDK: the rest of the configuration loads without it.
    from clearance.mcp import GatewayConfig, McpServerConfig, PrincipalToken

    reader = _GatewayReader.open(path)
    gateway = reader.gateway()
    tokens = tuple(PrincipalToken(principal, token) for principal, token in reader.tokens())
    elicitation = reader.elicitation()
    servers = tuple(McpServerConfig(**fields) for fields in reader.servers())
    return GatewayConfig(
        path=Path(path),
        **gateway,
        tokens=tokens,
        elicitation=elicitation,
        limits=reader.limits(),
        servers=servers,
    )


def load_mcp_servers(path: str | os.PathLike[str]) -> tuple[McpServerConfig, ...]:
    """Only the ``[[mcp_servers]]`` entries of a TOML file: what the policy commands start
    to learn the servers' tools. ``[gateway]`` is not read (its tokens are not needed to
    list tools).

    Returns:
        The servers; ``()`` when the file has none (the ``mcp`` extra is then not needed).

    Raises:
        MissingExtraError: the file has servers and the ``mcp`` package is not installed.
        ConfigError: an entry is wrong (the message names the key, the file and the line).
    """
    reader = _GatewayReader.open(path)
    if "mcp_servers" not in reader.data:
        return ()
    from clearance.mcp import McpServerConfig

    return tuple(McpServerConfig(**fields) for fields in reader.servers())


def _ask_fallbacks() -> tuple[str, ...]:
    """The values of ``[gateway] ask_fallback`` (the gateway's :data:`AskFallback`)."""
    from clearance.mcp.gateway import AskFallback  # the optional extra, imported already

    return get_args(AskFallback)


class _GatewayReader(TomlReader):
    """The gateway's tables; messages name them as the file spells them
    (``[gateway] port``, ``[[mcp_servers]] 'git' restart``)."""

    def raw_gateway(self) -> dict[str, Any]:
        return self.table(self.data.get("gateway", {}), ("gateway",), _GATEWAY_KEYS)

    def gateway(self) -> dict[str, Any]:
        """The plain settings of ``[gateway]`` (everything but tokens and elicitation)."""
        raw = self.raw_gateway()
        w: Where = ("gateway",)
        idle = raw.get("session_idle_timeout", 1800.0)
        if (
            not isinstance(idle, int | float)
            or isinstance(idle, bool)
            or not math.isfinite(idle)
            or idle <= 0
        ):
            raise self.error(
                (*w, "session_idle_timeout"),
                "[gateway] session_idle_timeout must be a positive number of seconds",
            )
        max_sessions = raw.get("max_sessions", 10_000)
        if not isinstance(max_sessions, int) or isinstance(max_sessions, bool) or max_sessions < 1:
            raise self.error(
                (*w, "max_sessions"), "[gateway] max_sessions must be a positive integer"
            )
        transport = raw.get("transport", "stdio")
        if transport not in ("stdio", "http"):
            raise self.error(
                (*w, "transport"),
                f"[gateway] transport must be 'stdio' or 'http', not {transport!r}",
            )
        port = raw.get("port", 8765)
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
            raise self.error((*w, "port"), "[gateway] port must be an integer from 0 to 65535")
        fallback = raw.get("ask_fallback", "pending")
        choices = _ask_fallbacks()
        if fallback not in choices:
            raise self.error(
                (*w, "ask_fallback"),
                f"[gateway] ask_fallback must be one of {', '.join(choices)}, not {fallback!r}",
            )
        endpoint = self.string(
            raw.get("endpoint", "/mcp"), (*w, "endpoint"), label="[gateway] endpoint"
        )
        if not endpoint.startswith("/"):
            raise self.error((*w, "endpoint"), "[gateway] endpoint must start with '/'")
        return {
            "transport": transport,
            "host": self.string(raw.get("host", "127.0.0.1"), (*w, "host"), label="[gateway] host"),
            "port": port,
            "endpoint": endpoint,
            "token_file": self.path(
                raw["token_file"], (*w, "token_file"), label="[gateway] token_file"
            )
            if "token_file" in raw
            else None,
            "principal": self.principal(
                raw.get("principal", 'User::"gateway"'),
                (*w, "principal"),
                "[gateway] principal",
            ),
            "ask_fallback": fallback,
            "session_idle_timeout": float(idle),
            "max_sessions": max_sessions,
        }

    def limits(self) -> HttpLimits:
        """The HTTP gateway's bounds: each key of ``[gateway]`` that names one, the
        default for the others."""
        from clearance.mcp.gateway import HttpLimits

        raw = self.raw_gateway()
        given = {key: raw[key] for key in _LIMIT_KEYS if key in raw}
        for key, value in given.items():
            try:
                HttpLimits(**{key: value})
            except ValueError as exc:
                raise self.error(("gateway", key), f"[gateway] {exc}") from None
        return HttpLimits(**given)

    def tokens(self) -> list[tuple[Principal, str]]:
        """``[[gateway.tokens]]``: each principal and the token read for it."""
        w: Where = ("gateway", "tokens")
        entries = self.raw_gateway().get("tokens", [])
        if not isinstance(entries, list):
            raise self.error(w, "[[gateway.tokens]] must be an array of tables")
        return [
            self.token(entry, (*w, n), f"[[gateway.tokens]] #{n + 1}")
            for n, entry in enumerate(entries)
        ]

    def token(self, entry: Any, w: Where, label: str) -> tuple[Principal, str]:
        if not isinstance(entry, dict):
            raise self.error(w, f"{label} must be a table")
        self.table(entry, w, ("principal", "token_file", "token_env"))
        principal = self.principal(entry.get("principal"), (*w, "principal"), f"{label} principal")
        if ("token_file" in entry) == ("token_env" in entry):
            # Tokens are never written in the config itself: it is the file people share.
            raise self.error(w, f"{label} needs exactly one of 'token_file' or 'token_env'")
        if "token_file" in entry:
            token_path = self.path(
                entry["token_file"], (*w, "token_file"), label=f"{label} token_file"
            )
            try:
                token = token_path.read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise self.error(
                    (*w, "token_file"), f"{label}: cannot read {token_path}: {exc.strerror}"
                ) from None
        else:
            var = self.string(entry["token_env"], (*w, "token_env"), label=f"{label} token_env")
            token = os.environ.get(var, "").strip()
            if not token:
                raise self.error(
                    (*w, "token_env"), f"{label}: the environment variable {var} is not set"
                )
        if len(token) < 16:
            raise self.error(w, f"{label}: the token is shorter than 16 characters")
        return principal, token

    def elicitation(self) -> bool:
        return self.boolean(
            self.raw_gateway().get("elicitation", True),
            ("gateway", "elicitation"),
            label="[gateway] elicitation",
        )

    def servers(self) -> list[dict[str, Any]]:
        """``[[mcp_servers]]``: each entry's fields for ``McpServerConfig``."""
        entries = self.data.get("mcp_servers", [])
        if not isinstance(entries, list):
            raise self.error(("mcp_servers",), "[[mcp_servers]] must be an array of tables")
        servers = [self.server(entry, n) for n, entry in enumerate(entries)]
        names = [s["name"] for s in servers]
        for n, name in enumerate(names):
            if names.count(name) > 1:
                raise self.error(("mcp_servers", n), f"two [[mcp_servers]] are named {name!r}")
        return servers

    def server(self, entry: Any, n: int) -> dict[str, Any]:
        w: Where = ("mcp_servers", n)
        label = f"[[mcp_servers]] #{n + 1}"
        if not isinstance(entry, dict):
            raise self.error(w, f"{label} must be a table")
        self.table(entry, w, _SERVER_KEYS)
        name = self.string(entry.get("name"), (*w, "name"), label=f"{label} name")
        label = f"[[mcp_servers]] {name!r}"
        program, url = entry.get("program"), entry.get("url")
        if (program is None) == (url is None):
            raise self.error(w, f"{label} needs exactly one of 'program' (stdio) or 'url'")
        transport = entry.get("transport", "stdio" if program is not None else "streamable-http")
        if program is not None and transport != "stdio":
            raise self.error(
                (*w, "transport"), f"{label}: a 'program' server uses transport 'stdio'"
            )
        if url is not None and transport not in ("streamable-http", "http"):
            raise self.error(
                (*w, "transport"), f"{label}: a 'url' server uses transport 'streamable-http'"
            )
        restart = entry.get("restart", "on_next_call")
        if restart not in ("on_next_call", "never"):
            raise self.error((*w, "restart"), f"{label} restart must be 'on_next_call' or 'never'")
        timeout = entry.get("call_timeout")
        if timeout is not None and (
            not isinstance(timeout, int | float)
            or isinstance(timeout, bool)
            or not math.isfinite(timeout)
            or timeout <= 0
        ):
            raise self.error(
                (*w, "call_timeout"), f"{label} call_timeout must be a positive number of seconds"
            )
        trust = self.boolean(
            entry.get("trust_annotations", False),
            (*w, "trust_annotations"),
            label=f"{label} trust_annotations",
        )
        cwd = entry.get("cwd")
        return {
            "name": name,
            "program": self.string(program, (*w, "program"), label=f"{label} program")
            if program is not None
            else None,
            "args": self.string_list(entry.get("args", []), (*w, "args"), f"{label} args"),
            "env": self.expanded(entry.get("env"), (*w, "env"), f"{label} env"),
            "cwd": str(self.path(cwd, (*w, "cwd"), label=f"{label} cwd"))
            if cwd is not None
            else None,
            "url": self.string(url, (*w, "url"), label=f"{label} url") if url is not None else None,
            "headers": self.expanded(entry.get("headers"), (*w, "headers"), f"{label} headers"),
            "tools": self.string_list(entry["tools"], (*w, "tools"), f"{label} tools")
            if "tools" in entry
            else None,
            "read_only": self.string_list(
                entry.get("read_only", []), (*w, "read_only"), f"{label} read_only"
            ),
            "trust_annotations": trust,
            "restart": restart,
            # Not given: McpServerConfig's default (DEFAULT_CALL_TIMEOUT).
            **({"call_timeout": float(timeout)} if timeout is not None else {}),
        }

    # -- values ---------------------------------------------------------------------------

    def string_list(self, value: Any, where: Where, label: str) -> tuple[str, ...]:
        """A list of strings (unlike :meth:`strings`, one string is not a list)."""
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(where, f"{label} must be a list of strings")
        return tuple(value)

    def principal(self, value: Any, where: Where, label: str) -> Principal:
        text = self.string(value, where, label=label)
        try:
            return Principal.parse(text)
        except (ValueError, TypeError) as exc:
            raise self.error(where, f"{label}: {exc}") from None

    def expanded(self, value: Any, where: Where, label: str) -> dict[str, str] | None:
        """A string table whose ``${VAR}`` references are read from the environment."""
        if value is None:
            return None
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise self.error(where, f"{label} must be a table of strings")

        def expand(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in os.environ:
                raise self.error(where, f"{label}: the environment variable {name} is not set")
            return os.environ[name]

        return {k: _ENV_REF.sub(expand, v) for k, v in value.items()}
