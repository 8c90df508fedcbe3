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
    # Records the user points to: a record of the tool's result list whose field named
    # here holds a value the user named (a channel, an inbox), read before any untrusted
    # result, is the place "pointed:<tool>". Its values stay untrusted; a policy may
    # accept them for one action by testing `sources`.
    [pointed_records]
    "slack.read_channel_messages" = ["recipient"]
    # Calls the user points to: a result of the tool whose call's arguments named here
    # are the user's own, or found in a record she pointed to, read before any untrusted
    # result, is the place "pointed:<tool>" (the page she named). Its values stay
    # untrusted.
    [pointed_calls]
    "slack.get_webpage" = ["url"]
    # Fields of a record the user points to that count as her own: she named the record
    # ("the 'Introductory meeting' event"), and its participants are the people she means.
    # The place "pointed:<tool>#<field>"; the rest of the record stays untrusted.
    [pointed_fields]
    "workspace.search_calendar_events" = ["participants"]

Every key is optional; a file with none is the default list (no trusted tools; system
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
_TABLES = ("trusted_fields", "pointed_records", "pointed_calls", "pointed_fields")
"""The tables of a trust list, each mapping tool globs to field or argument names."""


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
    pointed_records: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """``(tool glob, field names)``: a record of the tool's result list whose value under
    one of these fields the user named (in a message or a trusted source, before the result
    came), read while no untrusted result had come yet, is recorded as the place
    ``pointed:<qualified name>`` besides its tool's. Its values stay untrusted (never
    ``user``): a policy accepts them for one action by testing ``sources`` (a mapping is
    accepted too)."""
    pointed_calls: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """``(tool glob, argument names)``: a result of the tool whose call had each of these
    arguments (at least one of them), every unit of it the user's own or found in a record
    she pointed to (``pointed_records``), read while no untrusted result had come yet, is
    recorded as the place ``pointed:<qualified name>`` besides its tool's, and does not
    taint the ledger. Its values stay untrusted (never ``user``). A result recorded
    without its call's arguments is never pointed to (a mapping is accepted too)."""
    pointed_fields: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """``(tool glob, field names)``: these fields of a record the user pointed to
    (``pointed_records``) count as the user's own, under the place
    ``pointed:<qualified name>#<field>``: she named the record, and what it holds under
    the field is what she means by it (the participants of the meeting she named). Not
    ``name``, the place of the names a pointed text gives (a mapping is accepted too)."""

    def __post_init__(self) -> None:
        for name in _TABLES:
            object.__setattr__(self, name, _glob_fields(name, getattr(self, name)))
        if any("name" in names for _, names in self.pointed_fields):
            raise TypeError("pointed_fields cannot name the field 'name' (the names' place)")
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
        return _fields_for(self.trusted_fields, qualified_name)

    def pointers_of(self, qualified_name: str) -> frozenset[str]:
        """The fields whose value, named by the user, makes a record of
        ``qualified_name``'s results one she pointed to (``pointed_records``)."""
        return _fields_for(self.pointed_records, qualified_name)

    def pointing_arguments_of(self, qualified_name: str) -> frozenset[str]:
        """The arguments whose values, the user's own, make a call of ``qualified_name``
        one she pointed to (``pointed_calls``)."""
        return _fields_for(self.pointed_calls, qualified_name)

    def pointed_fields_of(self, qualified_name: str) -> frozenset[str]:
        """The fields of a record of ``qualified_name``'s results the user pointed to that
        count as her own (``pointed_fields``)."""
        return _fields_for(self.pointed_fields, qualified_name)

    def trusts(self, place: str) -> bool:
        """Whether values found in ``place`` (``"user"``, ``"system"``,
        ``"tool:<qualified name>"``, ``"tool:<qualified name>#<field>"``,
        ``"pointed:<qualified name>#<field>"``) count as the user's own."""
        if place == "user":
            return True
        if place == "system":
            return self.trust_system
        if place.startswith("tool:"):
            name, hash_, field = place[5:].partition("#")
            if hash_:
                return field in self.fields_of(name)
            return self.trusts_tool(name)
        if place.startswith("pointed:"):
            name, hash_, field = place[8:].partition("#")
            return bool(hash_) and field != "name" and field in self.pointed_fields_of(name)
        return False

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, path: str | None = None) -> TrustList:
        """A trust list from its TOML/JSON data.

        Raises:
            ConfigError: an unknown key, or a value of the wrong type.
        """
        known = {"trusted_tools", "trust_system", *_TABLES}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(
                f"unknown key(s) in the trust list: {', '.join(unknown)} "
                "(known: trusted_tools, trusted_fields, pointed_records, pointed_calls, "
                "pointed_fields, trust_system)",
                path=path,
            )
        tables = {}
        for key in _TABLES:
            table = data.get(key, {})
            if not isinstance(table, Mapping) or not all(
                isinstance(names, list) and all(isinstance(n, str) and n for n in names)
                for names in table.values()
            ):
                raise ConfigError(
                    f'{key} must be a table like {{"bank.get_standing_orders" = ["recipient"]}}',
                    path=path,
                )
            tables[key] = tuple((k, tuple(v)) for k, v in table.items())
        tools: Any = data.get("trusted_tools", ())
        if isinstance(tools, str) or not isinstance(tools, Iterable):
            raise ConfigError("trusted_tools must be a list of tool names or globs", path=path)
        tools = tuple(tools)
        if not all(isinstance(t, str) and t for t in tools):
            raise ConfigError("trusted_tools must be a list of tool names or globs", path=path)
        system = data.get("trust_system", True)
        if not isinstance(system, bool):
            raise ConfigError("trust_system must be true or false", path=path)
        try:
            return cls(tools, system, **tables)
        except TypeError as exc:
            raise ConfigError(str(exc), path=path) from None

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


def _glob_fields(name: str, value: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``(tool glob, field names)`` pairs from pairs or a mapping.

    Raises:
        TypeError: not tool globs mapped to lists of field names.
    """
    pairs = tuple(value.items()) if isinstance(value, Mapping) else tuple(value)
    if not all(
        isinstance(glob, str)
        and glob
        and not isinstance(names, str)
        and all(isinstance(n, str) and n for n in names)
        for glob, names in pairs
    ):
        raise TypeError(f"{name} maps tool globs to lists of field names")
    return tuple((glob, tuple(names)) for glob, names in pairs)


def _fields_for(
    table: tuple[tuple[str, tuple[str, ...]], ...], qualified_name: str
) -> frozenset[str]:
    found: set[str] = set()
    for pattern, names in table:
        if pattern == qualified_name or (
            not _GLOB_CHARS.isdisjoint(pattern) and fnmatchcase(qualified_name, pattern)
        ):
            found.update(names)
    return frozenset(found)
