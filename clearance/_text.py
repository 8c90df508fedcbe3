"""Text from outside, made safe to show to a person or to write into a generated file.

Tool names, arguments, results, call ids and messages are chosen by a model or a server.
Written raw to a terminal, their control characters act: an escape sequence can write the
clipboard (OSC 52), erase or redraw lines, clear the screen or draw a fake status line, and
Unicode bidi overrides, zero-width and other invisible characters change what a person reads
(a path shown as ``txt.exe`` that is ``exe.txt``). Every place that shows such text goes
through :func:`printable` (or :func:`json_text` for JSON), which spells those characters as
visible escapes (``\\x1b``, ``\\u202e``) and leaves everything else as it is.

Escaped: C0 and C1 controls, DEL, every Unicode "Other" or separator character except the
ASCII space (format characters such as the bidi overrides and isolates U+202A to U+202E and
U+2066 to U+2069, zero-width characters, tag characters; line and paragraph separators;
non-ASCII spaces; surrogates, private-use and unassigned code points), and the few invisible
letters and marks used to hide text (variation selectors, Hangul fillers, the combining
grapheme joiner).
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["is_printable", "json_text", "printable"]

_INVISIBLE = re.compile(
    "[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u3164\ufe00-\ufe0f\uffa0\U000e0100-\U000e01ef]"
)
"""Letters and marks (so ``str.isprintable`` keeps them) that show as nothing."""

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _unsafe(ch: str) -> bool:
    return not ch.isprintable() or _INVISIBLE.match(ch) is not None


def _escape(ch: str) -> str:
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def is_printable(text: str) -> bool:
    """Whether :func:`printable` would return ``text`` unchanged (ignoring newlines)."""
    return text.replace("\n", "").isprintable() and _INVISIBLE.search(text) is None


def printable(text: Any, *, newlines: bool = False) -> str:
    """``text`` (anything, through ``str``) with every character that could act on a
    terminal or hide text spelled as a visible escape (``\\x1b``, ``\\u202e``).

    Args:
        text: the untrusted text.
        newlines: keep ``\\n`` as a line break (for text that is meant to span lines);
            by default it is escaped too, so the text stays on one line.
    """
    string = text if isinstance(text, str) else str(text)
    if string.isprintable() and _INVISIBLE.search(string) is None:
        return string
    return "".join(
        _escape(ch) if _unsafe(ch) and not (newlines and ch == "\n") else ch for ch in string
    )


def _json_escape(ch: str) -> str:
    code = ord(ch)
    if code > 0xFFFF:  # JSON spells an astral character as a surrogate pair
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def json_text(value: Any, **options: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, **options)``, with the characters
    :func:`printable` escapes written as ``\\uXXXX`` escapes: the same JSON value, safe to
    print. (Outside strings JSON text is ASCII, and inside them ``json.dumps`` has already
    escaped the C0 controls, so a line break left in the text is layout.)"""
    text = json.dumps(value, ensure_ascii=False, **options)
    if is_printable(text):
        return text
    return "".join(_json_escape(ch) if ch != "\n" and _unsafe(ch) else ch for ch in text)
