"""Trust lists: which sources, besides the user's own messages, count as the user's.

A trust list is data a policy pack ships, ``provenance.toml`` beside its ``.cedar`` files::

    # Values in these tools' results count as the user's own (globs over qualified names).
    trusted_tools = ["banking.get_scheduled_transactions", "banking.get_user_info"]
    # Whether system messages (the application's own instructions) count as the user's.
    trust_system = true

Both keys are optional; a file with neither is the default list (no trusted tools; system
messages trusted). Name only tools whose results no one but the user can write: a tool that
returns mail, web pages, shared documents or other people's messages is never trusted.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from clearance.errors import ConfigError

__all__ = ["TRUST_FILE", "TrustList"]

TRUST_FILE = "provenance.toml"
"""The name of a pack's trust list, beside its policies."""

_GLOB_CHARS = frozenset("*?[")


@dataclass(frozen=True, slots=True)
class TrustList:
    """Which sources count as the user's own (see the module docstring)."""

    trusted_tools: tuple[str, ...] = ()
    """Globs over qualified tool names whose results count as the user's own."""
    trust_system: bool = True
    """Whether system messages count as the user's own."""

    def __post_init__(self) -> None:
        if isinstance(self.trusted_tools, str) or not all(
            isinstance(t, str) and t for t in self.trusted_tools
        ):
            raise TypeError("trusted_tools must be a sequence of non-empty strings")
        object.__setattr__(self, "trusted_tools", tuple(self.trusted_tools))
        if not isinstance(self.trust_system, bool):
            raise TypeError("trust_system must be a bool")

    def trusts_tool(self, qualified_name: str) -> bool:
        """Whether results of ``qualified_name`` count as the user's own."""
        for pattern in self.trusted_tools:
            if _GLOB_CHARS.isdisjoint(pattern):
                if pattern == qualified_name:
                    return True
            elif fnmatchcase(qualified_name, pattern):
                return True
        return False

    def trusts(self, place: str) -> bool:
        """Whether values found in ``place`` (``"user"``, ``"system"``,
        ``"tool:<qualified name>"``) count as the user's own."""
        if place == "user":
            return True
        if place == "system":
            return self.trust_system
        if place.startswith("tool:"):
            return self.trusts_tool(place[5:])
        return False

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, path: str | None = None) -> TrustList:
        """A trust list from its TOML/JSON data.

        Raises:
            ConfigError: an unknown key, or a value of the wrong type.
        """
        unknown = sorted(set(data) - {"trusted_tools", "trust_system"})
        if unknown:
            raise ConfigError(
                f"unknown key(s) in the trust list: {', '.join(unknown)} "
                "(known: trusted_tools, trust_system)",
                path=path,
            )
        tools: Any = data.get("trusted_tools", ())
        if isinstance(tools, str) or not isinstance(tools, Iterable):
            raise ConfigError("trusted_tools must be a list of tool names or globs", path=path)
        tools = tuple(tools)
        if not all(isinstance(t, str) and t for t in tools):
            raise ConfigError("trusted_tools must be a list of tool names or globs", path=path)
        system = data.get("trust_system", True)
        if not isinstance(system, bool):
            raise ConfigError("trust_system must be true or false", path=path)
        return cls(tools, system)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> TrustList:
        """Read a ``provenance.toml``.

        Raises:
            ConfigError: the file cannot be read or parsed, or holds a wrong value.
        """
        where = os.fspath(path)
        try:
            data = tomllib.loads(Path(where).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read the trust list: {exc.strerror}", path=where) from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"the trust list is not valid TOML: {exc}", path=where) from None
        return cls.from_mapping(data, path=where)

    @classmethod
    def from_directory(cls, directory: str | os.PathLike[str]) -> TrustList:
        """The trust list a pack directory ships (``provenance.toml``), or the default
        list when it has none.

        Raises:
            ConfigError: the file is there but wrong.
        """
        path = Path(directory) / TRUST_FILE
        if not path.is_file():
            return cls()
        return cls.from_file(path)
