"""What a person sees when asked to approve a call: what will run, first and in full.

A person asked to approve a call must see the fields that decide what it does (the path
written, the command run, the recipient, the URL, the amount) whole, whatever else the call
carries: a long ``content`` must never push the ``path`` out of view, and a deep path must
never be cut before its file name. :func:`ask_lines` is the one layout every approval
surface uses (the terminal prompt of ``clearance run``, the MCP gateway's elicitation):

- the deciding fields first, in the order given, each value in full;
- then every other argument, a long value elided in the middle: both ends stay, with the
  number of characters left out between them (``ask_lines(..., elide=False)`` shows them
  whole, for a "view all" choice).

Values are shown as JSON (so quotes, spaces at the ends and line breaks are visible) with
control and invisible characters escaped (see :mod:`clearance._text`).

Which fields decide: a tool's declared facts (``Tool.facts``, JSON pointers such as
``/path``) when it has them, plus the arguments whose names read like paths, commands,
URLs, recipients or amounts (:func:`deciding_fields`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from clearance import _pointer
from clearance._text import json_text, printable

__all__ = ["DECIDING_WORDS", "ask_lines", "deciding_fields", "elide"]

DECIDING_WORDS = frozenset(
    {
        # where a call reads or writes
        "path", "paths", "file", "files", "filename", "filepath", "dir", "dirs",
        "directory", "folder", "cwd", "workdir", "root", "source", "sources", "src",
        "destination", "dest", "dst", "target", "output", "repo", "repository", "branch",
        # what it runs
        "command", "commands", "cmd", "argv", "args", "program", "script", "exec",
        "executable", "code", "sql", "query", "expression", "shell",
        # where it sends or fetches
        "url", "urls", "uri", "href", "link", "endpoint", "host", "hostname", "domain",
        "server", "method",
        # who it reaches
        "to", "cc", "bcc", "from", "recipient", "recipients", "email", "emails", "address",
        "phone", "user", "username", "channel",
        # what it spends
        "amount", "price", "total", "sum", "quantity", "qty", "currency", "account",
        "iban", "card",
    }
)  # fmt: skip
"""Words that make an argument name a deciding field (``file_path``, ``toAccount``...)."""

_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")

_MIN_WIDTH = 40
"""No value is elided to fewer characters than this, however narrow the width asked."""


def _looks_deciding(name: str) -> bool:
    return any(w.lower() in DECIDING_WORDS for w in _WORD.findall(name))


def _top_level(pointers: Iterable[Any]) -> list[str]:
    names = []
    for pointer in pointers:
        try:
            tokens = _pointer.parse(pointer) if isinstance(pointer, str) else ()
        except ValueError:
            continue
        if tokens and tokens[0] != "*":
            names.append(tokens[0])
    return names


def deciding_fields(ask_or_tool: Any) -> tuple[str, ...]:
    """The top-level argument names that decide what a call does.

    Args:
        ask_or_tool: a :class:`~clearance.harness.approvals.PermissionAsk` (its
            ``arguments`` are looked at) or a :class:`~clearance.harness.tools.Tool` (its
            ``input_schema`` properties are).

    Returns:
        The names of the declared facts (``facts``, when the object has them) first, then
        every other argument whose name reads like a path, command, URL, recipient or
        amount (``file_path``, ``toAccount``), in argument order.
    """
    explicit = getattr(ask_or_tool, "deciding", None)
    facts = getattr(ask_or_tool, "facts", None)
    if isinstance(explicit, tuple | list) and explicit:
        declared = [n for n in explicit if isinstance(n, str)]  # an ask names them
    else:
        declared = _top_level(facts) if isinstance(facts, Mapping) else []
    arguments = getattr(ask_or_tool, "arguments", None)
    if isinstance(arguments, Mapping):
        names: Iterable[Any] = arguments.keys()
    else:
        schema = getattr(ask_or_tool, "input_schema", None)
        properties = schema.get("properties") if isinstance(schema, Mapping) else None
        names = properties.keys() if isinstance(properties, Mapping) else ()
    guessed = [n for n in names if isinstance(n, str) and _looks_deciding(n)]
    return tuple(dict.fromkeys([*declared, *guessed]))


def elide(text: str, width: int) -> str:
    """``text`` cut to about ``width`` characters in the middle, both ends kept and the
    number of characters left out said between them; unchanged when it fits."""
    width = max(width, _MIN_WIDTH)
    if len(text) <= width:
        return text
    # The marker's own length depends on the count; size it for the worst case.
    room = width - len(f" … [{len(text):,} characters elided] … ")
    room = max(room, _MIN_WIDTH // 2)
    head = (room + 1) // 2
    tail = room - head
    left_out = len(text) - head - tail
    return f"{text[:head]} … [{left_out:,} characters elided] … {text[len(text) - tail :]}"


def ask_lines(
    arguments: Mapping[str, Any],
    deciding: Sequence[str],
    *,
    width: int,
    elide_values: bool = True,
) -> list[str]:
    """The arguments of an ask as ``name: value`` lines, deciding fields first and whole.

    Args:
        arguments: the arguments as the ask carries them (sensitive values already
            withheld).
        deciding: the names that decide what the call does (see :func:`deciding_fields`);
            names the call does not carry are skipped.
        width: the longest line wanted for a non-deciding argument; longer values are
            elided in the middle. Deciding fields are never shortened.
        elide_values: ``False`` shows every value whole (a "view all" choice).

    Returns:
        One line per argument, with control and invisible characters escaped.
    """
    first = [name for name in dict.fromkeys(deciding) if name in arguments]
    rest = [name for name in arguments if name not in first]
    lines = [f"{printable(name)}: {_value(arguments[name])}" for name in first]
    for name in rest:
        label = printable(name)
        value = _value(arguments[name])
        if elide_values:
            value = elide(value, width - len(label) - 2)
        lines.append(f"{label}: {value}")
    return lines


def _value(value: Any) -> str:
    try:
        return json_text(value, default=str)
    except RecursionError:  # the pipeline's shape check refuses such arguments first
        return "(nested too deeply to show)"
