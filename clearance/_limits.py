"""Values from outside, checked before they reach a record, a store, a log or another
process.

A client or a model chooses request ids, tool names and arguments. Some values Python holds
cannot go everywhere: a lone surrogate (``"\\ud800"``, which ``json.loads`` accepts) has no
UTF-8 encoding, so SQLite, PostgreSQL and every MCP peer refuse it (the SDK's serializer
raises, and a transport that raises mid-write is torn down); PostgreSQL refuses a NUL in
``text``; JSON has no ``NaN``; a value nested thousands deep exhausts a recursive encoder.
Checked once where the value enters (:func:`json_fault`, :func:`text_fault`), a bad value
refuses its own request with a sentence naming what and where, and nothing behind the edge
ever meets it. :func:`bounded_label` turns an id of any length into one of bounded length.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any, Final

from clearance._text import printable

__all__ = [
    "MAX_DEPTH",
    "MAX_LABEL",
    "bounded_label",
    "json_fault",
    "storable",
    "text_fault",
]

MAX_DEPTH: Final = 64
"""How deep arrays and objects may nest in a value from outside."""

MAX_LABEL: Final = 64
"""The longest id :func:`bounded_label` keeps as it is."""

_POINTER_SHOWN = 200
"""The longest JSON pointer a fault names (a key may be long: the sentence stays short)."""


def storable(text: str) -> bool:
    """Whether every store can hold ``text``: valid UTF-8 (no lone surrogate), no NUL."""
    if text.isascii():
        return "\x00" not in text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in text


def text_fault(text: object, *, nul: bool = False) -> str | None:
    """Why ``text`` cannot be stored or sent, or None: not a string, a lone surrogate,
    or (unless ``nul``) a NUL character."""
    if not isinstance(text, str):
        return f"is not a string but {_kind(text)}"
    if text.isascii():
        return None if nul or "\x00" not in text else "holds a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "holds a lone surrogate (it is not valid UTF-8)"
    return None if nul or "\x00" not in text else "holds a NUL character"


def json_fault(value: Any, *, max_depth: int = MAX_DEPTH) -> str | None:
    """Why ``value`` (parsed JSON) cannot go on to a record, a store or an MCP server, or
    None: a string or key with a lone surrogate, a number that is not finite, an array or
    object nested deeper than ``max_depth``, or a value that is not JSON at all. The
    sentence names where (a JSON pointer, shown printable and bounded). NUL characters are
    fine: every JSON encoder here escapes them.

    Iterative: a value of any depth is checked without recursion.
    """
    stack: list[tuple[Any, tuple[str, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        kind = type(item)
        if kind is str:
            if not item.isascii() and text_fault(item, nul=True) is not None:
                return f"{_where(path)}: a string holds a lone surrogate (not valid UTF-8)"
        elif kind is dict:
            if len(path) >= max_depth:
                return f"{_where(path)}: nested deeper than {max_depth} levels"
            for key, member in item.items():
                if type(key) is not str:
                    return f"{_where(path)}: a key is not a string"
                if not key.isascii() and text_fault(key, nul=True) is not None:
                    return f"{_where(path)}: a key holds a lone surrogate (not valid UTF-8)"
                stack.append((member, (*path, key)))
        elif kind is list:
            if len(path) >= max_depth:
                return f"{_where(path)}: nested deeper than {max_depth} levels"
            stack.extend((member, (*path, str(n))) for n, member in enumerate(item))
        elif kind is float:
            if not math.isfinite(item):
                return f"{_where(path)}: {item!r} is not a JSON number"
        elif not (item is None or kind is bool or kind is int):
            return f"{_where(path)}: {_kind(item)} is not a JSON value"
    return None


def bounded_label(value: object) -> str:
    """``value`` (an id) as text of at most :data:`MAX_LABEL` characters: itself when it
    is that short and printable ASCII, else ``#`` and the first 16 hex digits of the
    SHA-256 of its text (a lone surrogate hashes too)."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) <= MAX_LABEL and text.isascii() and text.isprintable():
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return f"#{digest[:16]}"


def _where(path: tuple[str, ...]) -> str:
    if not path:
        return "the value"
    pointer = "".join("/" + part.replace("~", "~0").replace("/", "~1") for part in path)
    shown = printable(pointer)
    if len(shown) > _POINTER_SHOWN:
        shown = shown[: _POINTER_SHOWN - 3] + "..."
    return f"at {shown}"


def _kind(value: object) -> str:
    return type(value).__name__
