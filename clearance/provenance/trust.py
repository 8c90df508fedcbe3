"""Trust lists: which sources, besides the user's own messages, count as the user's.

A trust list is data a policy pack ships, ``provenance.toml`` beside its ``.cedar`` files::

    # Values in these tools' results count as the user's own (globs over qualified names).
    trusted_tools = ["banking.get_scheduled_transactions", "banking.get_user_info"]
    # Whether system messages (the application's own instructions) count as the user's.
    trust_system = true
    # Only these fields of a tool's structured results count as the user's own (a key of
    # the result object, or of each object of a result list); the rest does not.
    [trusted_fields]
    "banking.get_scheduled_transactions" = ["recipient"]

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
    trusted_fields: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """``(tool glob, field names)``: only these fields of the tool's structured results
    count as the user's own (a key of the result object, or of each object of a result
    list); the rest of the result does not (a mapping is accepted too)."""

    def __post_init__(self) -> None:
        fields: Any = self.trusted_fields
        pairs = tuple(fields.items()) if isinstance(fields, Mapping) else tuple(fields)
        if not all(
            isinstance(glob, str)
            and glob
            and not isinstance(names, str)
            and all(isinstance(n, str) and n for n in names)
            for glob, names in pairs
        ):
            raise TypeError("trusted_fields maps tool globs to lists of field names")
        object.__setattr__(
            self, "trusted_fields", tuple((glob, tuple(names)) for glob, names in pairs)
        )
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

    def fields_of(self, qualified_name: str) -> frozenset[str]:
        """The fields of ``qualified_name``'s results that count as the user's own."""
        found: set[str] = set()
        for pattern, names in self.trusted_fields:
            if pattern == qualified_name or (
                not _GLOB_CHARS.isdisjoint(pattern) and fnmatchcase(qualified_name, pattern)
            ):
                found.update(names)
        return frozenset(found)

    def trusts(self, place: str) -> bool:
        """Whether values found in ``place`` (``"user"``, ``"system"``,
        ``"tool:<qualified name>"``, ``"tool:<qualified name>#<field>"``) count as the
        user's own."""
        if place == "user":
            return True
        if place == "system":
            return self.trust_system
        if place.startswith("tool:"):
            name, hash_, field = place[5:].partition("#")
            if hash_:
                return field in self.fields_of(name)
            return self.trusts_tool(name)
        return False

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, path: str | None = None) -> TrustList:
        """A trust list from its TOML/JSON data.

        Raises:
            ConfigError: an unknown key, or a value of the wrong type.
        """
        unknown = sorted(set(data) - {"trusted_tools", "trust_system", "trusted_fields"})
        if unknown:
            raise ConfigError(
                f"unknown key(s) in the trust list: {', '.join(unknown)} "
                "(known: trusted_tools, trusted_fields, trust_system)",
                path=path,
            )
        fields = data.get("trusted_fields", {})
        if not isinstance(fields, Mapping) or not all(
            isinstance(names, list) and all(isinstance(n, str) and n for n in names)
            for names in fields.values()
        ):
            raise ConfigError(
                'trusted_fields must be a table like {"bank.get_standing_orders" = ["recipient"]}',
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
        return cls(tools, system, tuple((k, tuple(v)) for k, v in fields.items()))

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
