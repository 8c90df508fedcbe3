"""The built-in guardrails a ``[[guardrails]]`` entry names, and building them."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from fnmatch import fnmatchcase
from typing import Any

import clearance.guardrails as g
from clearance.config._model import Config, GuardrailStage
from clearance.errors import ConfigError
from clearance.guardrails.base import ArgumentGuardrail, ResultGuardrail

__all__ = ["build_guardrails", "guardrail_class", "option_names"]


def guardrail_class(kind: str, stage: GuardrailStage) -> Callable[..., Any]:
    """The built-in class of ``kind`` at ``stage`` (both already checked by the loader)."""
    table: dict[tuple[str, str], Callable[..., Any]] = {
        ("path_scope", "arguments"): g.PathScope,
        ("secret_scanner", "arguments"): g.ArgumentSecretScanner,
        ("secret_scanner", "result"): g.ResultSecretScanner,
        ("pii_redactor", "arguments"): g.ArgumentPiiRedactor,
        ("pii_redactor", "result"): g.ResultPiiRedactor,
        ("url_allowlist", "arguments"): g.UrlAllowlist,
        ("size_limit", "arguments"): g.ArgumentSizeLimit,
        ("size_limit", "result"): g.ResultSizeLimit,
        ("pattern", "arguments"): g.ArgumentPattern,
        ("pattern", "result"): g.ResultPattern,
    }
    return table[(kind, stage)]


_COMMON_OPTIONS = frozenset({"tools", "fields", "advisory", "name", "self"})


def option_names(kind: str, stage: GuardrailStage) -> tuple[str, ...]:
    """The ``options`` a built-in takes: its constructor's parameters minus the common ones."""
    params = inspect.signature(guardrail_class(kind, stage)).parameters
    return tuple(
        name
        for name, p in params.items()
        if name not in _COMMON_OPTIONS and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    )


def build_guardrails(
    config: Config, *, tools: Iterable[str] | None = None
) -> tuple[list[ArgumentGuardrail], list[ResultGuardrail]]:
    """The configured guardrails, built: ``(argument guardrails, result guardrails)``.

    A ``path_scope`` without a ``root`` option uses the ``[tools.files]`` root (else the
    config file's directory).

    Args:
        config: the configuration.
        tools: the qualified names of the tools the guardrails will guard, when known. The
            built-in default's guardrails (there is no configuration file) that apply to
            none of them are left out: nobody asked for them, so the harness would only
            warn that they guard nothing (as with declared tools instead of ``files``).

    Raises:
        ConfigError: a guardrail rejects its options (naming the entry's line).
    """
    arguments: list[ArgumentGuardrail] = []
    results: list[ResultGuardrail] = []
    names = list(tools) if tools is not None and config.path is None else None
    for index, entry in enumerate(config.guardrails):
        if names is not None and not any(
            fnmatchcase(name, pattern) for name in names for pattern in entry.tools
        ):
            continue
        cls = guardrail_class(entry.kind, entry.stage)
        options: dict[str, Any] = dict(entry.options)
        if entry.kind == "path_scope" and "root" not in options:
            options["root"] = config.tools.files.root if config.tools.files else config.base_dir
        kwargs: dict[str, Any] = {"tools": entry.tools, "advisory": entry.advisory}
        kwargs["name"] = entry.name or entry.kind
        if entry.fields is not None:
            kwargs["fields"] = entry.fields
        try:
            guard = cls(**options, **kwargs)
        except (TypeError, ValueError, ConfigError) as exc:
            message = exc.message if isinstance(exc, ConfigError) else str(exc)
            raise ConfigError(
                f"guardrails[{index}] ({entry.kind}): {message}",
                path=str(config.path) if config.path else None,
                line=entry.line,
            ) from None
        if entry.stage == "arguments":
            arguments.append(guard)
        else:
            results.append(guard)
    return arguments, results
