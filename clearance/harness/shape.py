"""The shape check of a call's arguments: plain JSON, bounded in size and depth (rule R6).

It runs before the schema is consulted, so what the schema validator, guardrails,
evaluators, the journal and the handler see is always plain JSON:

- exactly ``dict`` (with ``str`` keys), ``list``, ``str``, ``int``, ``float`` (finite),
  ``bool`` or ``None``. Subclasses are refused (bool aside): a ``dict`` subclass can show
  the validator one thing and the handler another, and would not be copied for the
  handler; tuples, sets, bytes, NaN and infinities are not JSON;
- nested at most ``max_depth`` levels, and at most ``max_bytes`` once serialized (UTF-8,
  ``json.dumps(..., ensure_ascii=False)``).

The walk checks every node, and stops early only to refuse. Why that stays cheap: beside
the walk it keeps ``low``, a lower bound of the serialized size (exact but for one byte per
character and the shortest number), and ``high``, an upper bound (six bytes per character,
the widest number). Each node adds at least one byte to ``low`` and a container
adds its members' share when it is reached, before they are walked, so a value is refused
as soon as ``low`` passes the limit: the walk takes at most about ``max_bytes`` steps,
whatever the value's size (a cycle too ends there). A value that passes the walk with
``high`` over the limit is measured exactly with ``json.dumps``, which the walk has made
safe (every node is JSON, the depth is bounded).
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

__all__ = ["check_shape"]

_FLOAT_HIGH = 24  # repr of a finite float: at most 24 characters ("-2.2250738585072014e-308")


def check_shape(value: Any, max_bytes: int, max_depth: int) -> str | None:
    """A problem with the arguments' shape, safe to show, or None when ``value`` is a plain
    JSON object within the limits (see the module docstring)."""
    if type(value) is not dict:
        return f"arguments must be a JSON object, not {type(value).__name__}"
    if max_depth >= 2 and _flat_within(value, max_bytes):
        return None
    stack: list[tuple[Any, int]] = [(value, 1)]
    low = high = 0
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            return f"arguments are nested deeper than {max_depth} levels"
        kind = type(node)
        if kind is str:
            low += len(node) + 2
            high += 6 * len(node) + 2
        elif kind is dict:
            members = len(node)
            low += 4 * members if members else 2  # braces, ", " between and ": " in members
            high += 2 + 4 * members
            if low > max_bytes:  # before walking the members: a huge object ends here
                break
            for key, child in node.items():
                if type(key) is not str:
                    return f"object keys must be strings, not {type(key).__name__}"
                low += len(key) + 2
                high += 6 * len(key) + 2
                stack.append((child, depth + 1))
        elif kind is list:
            low += 2 * len(node) if node else 2  # brackets, ", " between items
            high += 2 + 2 * len(node)
            if low > max_bytes:
                break
            stack.extend((child, depth + 1) for child in node)
        elif kind is int:
            bits = node.bit_length()
            if bits <= 64:
                low += 1
                high += 21
            else:  # digits = bits * log10(2), give or take one; and a sign
                if _too_many_digits(node, bits):
                    return "arguments contain an integer with too many digits to serialize"
                low += (bits - 1) * 3 // 10 + 1
                high += bits // 3 + 2
        elif kind is float:
            if not math.isfinite(node):
                return "arguments contain a non-finite number"
            low += 3  # "0.0"
            high += _FLOAT_HIGH
        elif kind is bool:
            low += 4
            high += 5
        elif node is None:
            low += 4
            high += 4
        else:
            return f"arguments contain a {kind.__name__}, which is not JSON"
        if low > max_bytes:
            break
    if low > max_bytes:
        return f"arguments are at least {low} bytes serialized; the limit is {max_bytes}"
    if high <= max_bytes:
        return None
    text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        return f"arguments are {size} bytes serialized; the limit is {max_bytes}"
    return None


_SMALL = 1 << 63


def _flat_within(value: dict[Any, Any], max_bytes: int) -> bool:
    """Whether ``value`` is an object of plain scalars (string keys; strings, integers of
    at most 63 bits, booleans, ``None``) whose serialized size the walk would bound within
    ``max_bytes``: then the walk would find nothing (every node is JSON, the depth is 2,
    and ``high`` is within the limit). The common case, in one loop over the members at a
    fraction of the walk's cost; anything else (a container, a float, a big integer, a
    value past the bound) takes the walk.

    The bound is the walk's own ``high`` for such an object: 2 for the braces, and for each
    member 4 (its share of ``", "`` and ``": "``), its key (six bytes per character and
    the quotes) and its value (a string six bytes per character and the quotes, an integer
    of at most 64 bits 21, a boolean 5, ``None`` 4; counted here as 5)."""
    if 16 * len(value) > max_bytes:
        # Past this the walk (which stops at the limit) decides: a huge object costs the
        # walk's bounded time, not a loop over all of it.
        return False
    high = 2
    for key, item in value.items():
        if type(key) is not str:
            return False
        kind = type(item)
        if kind is str:
            high += 6 * (len(key) + len(item)) + 8
        elif kind is int:
            if not -_SMALL <= item < _SMALL:
                return False
            high += 6 * len(key) + 27
        elif kind is bool or item is None:
            high += 6 * len(key) + 11
        else:
            return False
    return high <= max_bytes


def _too_many_digits(number: int, bits: int) -> bool:
    """Whether Python refuses to write ``number`` in decimal (``sys.int_info``'s limit on
    int-to-str conversion, 4300 digits by default): nothing could record such a value."""
    limit = sys.get_int_max_str_digits()
    if not limit:
        return False
    digits = bits * 0.30103  # within one of the real count
    if digits + 1 < limit:
        return False
    if digits - 1 > limit:
        return True
    try:
        str(number)  # near the limit: ask (cheap, the number is small)
    except ValueError:
        return True
    return False
