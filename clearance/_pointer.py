"""JSON pointers (RFC 6901) over plain JSON values, with ``*`` matching any key or index.

Guardrails name the fields they inspect as pointers (``/path``, ``/files/*/path``); the
pipeline uses the same functions to withhold redacted values from records.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

__all__ = [
    "REDACTED",
    "escape",
    "find",
    "find_parsed",
    "iter_strings",
    "parse",
    "redact",
    "set_value",
]

REDACTED = "[REDACTED]"


def parse(pointer: str) -> tuple[str, ...]:
    """Split a pointer into unescaped tokens; ``""`` is the whole document."""
    if pointer == "":
        return ()
    if not pointer.startswith("/"):
        raise ValueError(f"JSON pointer must start with '/': {pointer!r}")
    return tuple(t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/"))


def escape(token: str) -> str:
    """``token`` as one pointer token: ``~`` becomes ``~0`` and ``/`` becomes ``~1``."""
    return token.replace("~", "~0").replace("/", "~1")


def find(document: Any, pointer: str) -> Iterator[tuple[str, Any]]:
    """Yield ``(concrete pointer, value)`` for every place ``pointer`` matches."""
    yield from _find(document, parse(pointer), "")


def find_parsed(document: Any, tokens: tuple[str, ...]) -> Iterator[tuple[str, Any]]:
    """:func:`find` with the pointer already parsed (``parse(pointer)``)."""
    yield from _find(document, tokens, "")


def _find(node: Any, tokens: tuple[str, ...], here: str) -> Iterator[tuple[str, Any]]:
    if not tokens:
        yield here, node
        return
    head, rest = tokens[0], tokens[1:]
    if isinstance(node, dict):
        keys = list(node) if head == "*" else [head] if head in node else []
        for key in keys:
            yield from _find(node[key], rest, f"{here}/{escape(str(key))}")
    elif isinstance(node, list):
        if head == "*":
            indexes = range(len(node))
        elif head.isdigit() and int(head) < len(node):
            indexes = range(int(head), int(head) + 1)
        else:
            indexes = range(0)
        for i in indexes:
            yield from _find(node[i], rest, f"{here}/{i}")


def set_value(document: Any, pointer: str, value: Any) -> Any:
    """Return a deep copy of ``document`` with every match of ``pointer`` set to ``value``."""
    tokens = parse(pointer)
    if not tokens:
        return value
    result = copy.deepcopy(document)
    for concrete, _ in list(_find(result, tokens, "")):
        parent: Any = result
        path = parse(concrete)
        for token in path[:-1]:
            parent = parent[int(token)] if isinstance(parent, list) else parent[token]
        last = path[-1]
        if isinstance(parent, list):
            parent[int(last)] = value
        else:
            parent[last] = value
    return result


def redact(document: Any, pointers: tuple[str, ...] | list[str]) -> Any:
    """Replace the value at every pointer with ``"[REDACTED]"`` (a copy; idempotent)."""
    for pointer in pointers:
        document = set_value(document, pointer, REDACTED)
    return document


def iter_strings(document: Any, here: str = "") -> Iterator[tuple[str, str]]:
    """Yield ``(pointer, text)`` for every string leaf (and dict key is skipped)."""
    if isinstance(document, str):
        yield here, document
    elif isinstance(document, dict):
        for key, value in document.items():
            yield from iter_strings(value, f"{here}/{escape(str(key))}")
    elif isinstance(document, list):
        for i, value in enumerate(document):
            yield from iter_strings(value, f"{here}/{i}")
