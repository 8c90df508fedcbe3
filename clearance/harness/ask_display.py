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

Which fields decide is the call's one view (:mod:`clearance.harness.view`): the tool's
declared facts, and for a tool without facts every argument. An ask carries them
(``PermissionAsk.deciding``, ``StoredAsk.deciding``); a surface renders them and never
guesses from names (a guess that misses ``to`` shows the recipient elided or last). A
deciding value that reads as something it is not (mixed scripts, compatibility letters)
carries a note (``PermissionAsk.notes``), shown on the line after it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from clearance._text import json_text, printable

__all__ = ["ask_lines", "deciding_fields", "elide"]

_MIN_WIDTH = 40
"""No value is elided to fewer characters than this, however narrow the width asked."""


def deciding_fields(ask_or_tool: Any) -> tuple[str, ...]:
    """The top-level argument names that decide what a call does, as the call's view gave
    them: never guessed.

    Args:
        ask_or_tool: a :class:`~clearance.harness.approvals.PermissionAsk` or
            :class:`~clearance.harness.ask_store.StoredAsk` (its ``deciding``), or a
            :class:`~clearance.harness.tools.Tool` (its declared facts, else every property
            of its input schema).

    Returns:
        The names. An ask that names none (recorded before asks carried them) is treated
        as a tool without facts: every argument decides, so every one is shown whole.
    """
    named = getattr(ask_or_tool, "deciding", None)
    if isinstance(named, tuple | list) and named:
        return tuple(n for n in named if isinstance(n, str))
    arguments = getattr(ask_or_tool, "arguments", None)
    if isinstance(arguments, Mapping):
        return tuple(n for n in arguments if isinstance(n, str))
    fields = getattr(named, "fields", None)  # a Tool's Deciding
    if isinstance(fields, tuple):
        return fields
    schema = getattr(ask_or_tool, "input_schema", None)
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    return tuple(properties) if isinstance(properties, Mapping) else ()


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
    notes: Mapping[str, str] | None = None,
) -> list[str]:
    """The arguments of an ask as ``name: value`` lines, deciding fields first and whole.

    Args:
        arguments: the arguments as the ask carries them (sensitive values already
            withheld).
        deciding: the names that decide what the call does (the ask's ``deciding``);
            names the call does not carry are skipped.
        width: the longest line wanted for a non-deciding argument; longer values are
            elided in the middle. Deciding fields are never shortened.
        elide_values: ``False`` shows every value whole (a "view all" choice).
        notes: the ask's ``notes``: each is shown on the line after its argument,
            indented, as ``! note``.

    Returns:
        One line per argument (and per note), with control and invisible characters
        escaped.
    """
    first = [name for name in dict.fromkeys(deciding) if name in arguments]
    rest = [name for name in arguments if name not in first]
    lines = []
    for name in first:
        lines.append(f"{printable(name)}: {_value(arguments[name])}")
        note = (notes or {}).get(name)
        if note:
            lines.append(f"  ! {printable(note)}")
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
