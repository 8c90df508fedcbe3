"""Reading a TOML file so that every error names its line.

:class:`TomlReader` parses the file once and keeps where each table and key starts; its
checks (``table``, ``string``, ``path`` ...) raise a :class:`~clearance.errors.ConfigError`
naming the key, the file and the line. Every section of ``clearance.toml`` is read
through it: the main configuration (:mod:`clearance.config._load`) and the gateway's
``[gateway]`` and ``[[mcp_servers]]`` (:mod:`clearance.config._gateway`).
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Self

from clearance.errors import ConfigError

__all__ = ["Where", "TomlReader", "dotted", "key_lines"]

Where = tuple[Any, ...]
"""A key's place in the file: ``("guardrails", 1, "options", "root")`` (array entries are
numbered from 0)."""

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_\-\"'. ]+?)\s*=")


class TomlReader:
    """One parsed file, and checks that point every error at its key's line.

    Create with :meth:`open`. ``where`` arguments name a key by its place
    (:data:`Where`); ``label`` arguments, when given, replace the dotted name of that
    place in messages.
    """

    def __init__(self, file: Path, text: str, data: dict[str, Any]) -> None:
        self.file = file
        """The file as named by the caller."""
        self.base = file.resolve().parent
        """The directory relative paths in the file are resolved against."""
        self.data = data
        """The parsed document."""
        self.lines = key_lines(text)
        """Where each table and key starts (see :func:`key_lines`)."""

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> Self:
        """Read and parse ``path``.

        Raises:
            ConfigError: the file cannot be read or is not TOML (naming the line).
            RecursionError: the file nests too deeply for the parser (the command line
                says so about the file).
        """
        file = Path(path)
        try:
            text = file.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"cannot read the config file: {exc.strerror}", path=str(file)
            ) from None
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(
                f"not valid TOML: {_toml_error_message(exc)}",
                path=str(file),
                line=_toml_error_line(exc),
            ) from None
        return cls(file, text, data)

    def error(self, where: Sequence[Any], message: str) -> ConfigError:
        """A :class:`ConfigError` at the line of ``where`` (or of its nearest parent)."""
        line = None
        for n in range(len(where), 0, -1):
            line = self.lines.get(tuple(where[:n]))
            if line is not None:
                break
        return ConfigError(message, path=str(self.file), line=line)

    def table(self, value: Any, where: Where, known: Iterable[str]) -> dict[str, Any]:
        """``value`` if it is a table whose keys are all ``known``."""
        name = dotted(where)
        if not isinstance(value, dict):
            raise self.error(where, f"{name} must be a table")
        allowed = set(known)
        for key in value:
            if key not in allowed:
                raise self.error(
                    (*where, key),
                    f"unknown key {dotted((*where, key))!r}"
                    + (f" (expected one of: {', '.join(sorted(allowed))})" if allowed else ""),
                )
        return value

    def tables(self, value: Any, where: Where, *, label: str | None = None) -> list[Any]:
        """``value`` if it is an array (of tables: each entry is checked by the caller)."""
        if not isinstance(value, list):
            raise self.error(where, f"{label or dotted(where)} must be an array of tables")
        return value

    def string(self, value: Any, where: Where, *, label: str | None = None) -> str:
        """``value`` if it is a non-empty string."""
        if not isinstance(value, str) or not value:
            raise self.error(where, f"{label or dotted(where)} must be a non-empty string")
        return value

    def strings(self, value: Any, where: Where) -> tuple[str, ...]:
        """A list of non-empty strings (one string is a list of one)."""
        if isinstance(value, str):
            return (value,)
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.error(where, f"{dotted(where)} must be a list of strings")
        return tuple(value)

    def path(self, value: Any, where: Where, *, label: str | None = None) -> Path:
        """A path, ``~`` expanded, relative to the file's directory."""
        text = self.string(value, where, label=label)
        p = Path(os.path.expanduser(text))
        return p if p.is_absolute() else (self.base / p)

    def existing_dir(self, value: Any, where: Where) -> Path:
        """A :meth:`path` that is a directory."""
        p = self.path(value, where)
        if not p.is_dir():
            raise self.error(where, f"{dotted(where)}: {str(p)!r} is not a directory")
        return p

    def existing_file(self, value: Any, where: Where) -> Path:
        """A :meth:`path` that is a file."""
        p = self.path(value, where)
        if not p.is_file():
            raise self.error(where, f"{dotted(where)}: {str(p)!r} does not exist")
        return p

    def integer(self, value: Any, where: Where, minimum: int = 1) -> int:
        """An integer ``>= minimum`` (not a boolean)."""
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.error(where, f"{dotted(where)} must be an integer >= {minimum}")
        return value

    def number(self, value: Any, where: Where) -> float:
        """A positive number (not a boolean)."""
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise self.error(where, f"{dotted(where)} must be a positive number")
        return float(value)

    def boolean(self, value: Any, where: Where, *, label: str | None = None) -> bool:
        """``true`` or ``false``."""
        if not isinstance(value, bool):
            raise self.error(where, f"{label or dotted(where)} must be true or false")
        return value


def dotted(where: Sequence[Any]) -> str:
    """``("guardrails", 0, "kind")`` as ``guardrails[0].kind``."""
    out = ""
    for part in where:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "the file"


def key_lines(text: str) -> dict[Where, int]:
    """Where each table and key starts: ``("guardrails", 1, "options", "root") -> 14``.

    A light scan, enough to point at a line in error messages: array-of-tables entries are
    numbered from 0, dotted keys are split, keys inside inline tables are not located (the
    key holding the inline table is).
    """
    lines: dict[Where, int] = {}
    current: Where = ()
    arrays: dict[tuple[str, ...], int] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        header = _HEADER.match(raw)
        if header:
            names = _split_key(header.group(2))
            path = _with_indexes(names, arrays, header.group(1) == "[[")
            current = path
            lines.setdefault(path, number)
            continue
        key = _KEY.match(raw)
        if key:
            lines.setdefault(current + _split_key(key.group(1)), number)
    return lines


def _split_key(text: str) -> tuple[str, ...]:
    return tuple(part.strip().strip("\"'") for part in text.split("."))


def _with_indexes(
    names: tuple[str, ...], arrays: dict[tuple[str, ...], int], is_array: bool
) -> Where:
    path: list[Any] = []
    for n in range(1, len(names) + 1):
        path.append(names[n - 1])
        prefix = names[:n]
        if n == len(names) and is_array:
            arrays[prefix] = arrays.get(prefix, -1) + 1
            path.append(arrays[prefix])
        elif prefix in arrays:
            path.append(arrays[prefix])
    return tuple(path)


def _toml_error_line(exc: tomllib.TOMLDecodeError) -> int | None:
    m = re.search(r"\(at line (\d+)", str(exc))
    return int(m.group(1)) if m else None


def _toml_error_message(exc: tomllib.TOMLDecodeError) -> str:
    return re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc)) or "syntax error"
