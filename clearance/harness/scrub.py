"""Scrubbing withheld values out of what clearance records (rule R8).

A value is *withheld* when its tool marks the argument ``sensitive`` or an argument
guardrail redacts it. Records (every journal record of the call, its progress), log lines
and error messages never carry it: wherever it occurs in a string, as itself or in one of
the encodings below, it is replaced by ``[REDACTED]``; a number equal to a withheld number
is replaced too. The model's own result is left as it is (the model supplied the value).

Encodings recognized (what a tool that echoes the value is likely to produce):

- the value itself;
- JSON string escaping as Python (``ensure_ascii`` on and off), JavaScript and Rust write
  it, Go's (``<``, ``>``, ``&`` as ``\\u003c``...), PHP's (``\\/``) and upper-case
  ``\\uXXXX`` (Java, .NET), once or twice (a JSON text inside a JSON string);
- Python ``repr`` (an exception message, a printed dict or list);
- URL percent-encoding (``quote``, ``quote_plus``) and HTML escaping.

Not recognized: any other transformation (base64, hex, a hash, a change of case or of
Unicode normalization, a value split across strings or content blocks, a part of the
value). A tool that transforms a withheld value before returning it needs a result
guardrail that withholds its result. Short values are scrubbed wherever they occur, so a
record may be over-redacted, never under.
"""

from __future__ import annotations

import functools
import html
import json
import re
import urllib.parse
from collections.abc import Collection, Iterable
from typing import Any

from clearance._pointer import REDACTED

__all__ = ["encoded_forms", "scrub_json", "scrub_text"]

_HEX_ESCAPE = re.compile(r"\\u([0-9a-f]{4})")
_GO_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028"}
_GO_ESCAPES["\u2029"] = "\\u2029"


def encoded_forms(value: str) -> tuple[str, ...]:
    """``value`` and each encoding of it listed in the module docstring, longest first
    (so that a longer form is replaced before a shorter one inside it)."""
    if len(value) <= 256:  # the usual secret: a token, a password, a number
        return _cached_forms(value)
    return _forms(value)


def _forms(value: str) -> tuple[str, ...]:
    forms = {value}
    for ensure_ascii in (True, False):
        escaped = json.dumps(value, ensure_ascii=ensure_ascii)[1:-1]
        forms.add(escaped)
        forms.add(escaped.replace("/", "\\/"))
        forms.add(_HEX_ESCAPE.sub(lambda m: "\\u" + m.group(1).upper(), escaped))
        forms.add(json.dumps(escaped, ensure_ascii=ensure_ascii)[1:-1])
    go = json.dumps(value, ensure_ascii=False)[1:-1]
    for char, escape in _GO_ESCAPES.items():
        go = go.replace(char, escape)
    forms.add(go)
    forms.add(repr(value)[1:-1])
    forms.add(urllib.parse.quote(value, safe=""))
    forms.add(urllib.parse.quote_plus(value, safe=""))
    forms.add(html.escape(value))
    forms.discard("")
    return tuple(sorted(forms, key=len, reverse=True))


_cached_forms = functools.lru_cache(maxsize=1024)(_forms)


def _all_forms(secrets: Iterable[str]) -> list[str]:
    forms: set[str] = set()
    for secret in secrets:
        if secret:
            forms.update(encoded_forms(secret))
    return sorted(forms, key=len, reverse=True)


def _replace(text: str, forms: list[str]) -> str:
    for form in forms:
        if form in text:
            text = text.replace(form, REDACTED)
    return text


def scrub_text(text: str, secrets: Collection[str]) -> str:
    """``text`` with every withheld value (in every recognized encoding) replaced."""
    if not secrets or not text:
        return text
    return _replace(text, _all_forms(secrets))


def scrub_json(value: Any, secrets: Collection[str], *, keep: Collection[str] = ()) -> Any:
    """A copy of the JSON value ``value`` with every withheld value replaced in its
    strings (object keys included), and numbers equal to a withheld number replaced.

    Args:
        value: a JSON value (dicts, lists, tuples, scalars).
        secrets: the withheld values, as text (a number as ``str(number)``).
        keep: keys of the top-level object copied as they are (ids, statuses).

    Walks iteratively: a deeply nested result must not exhaust the Python stack.
    """
    if not secrets:
        return value
    forms = _all_forms(secrets)

    def leaf(node: Any) -> Any:
        if isinstance(node, str):
            return _replace(node, forms)
        if isinstance(node, int | float) and not isinstance(node, bool):
            if str(node) in secrets:
                return REDACTED
        return node

    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(root, 0, value)]
    while stack:
        parent, key, node = stack.pop()
        if isinstance(node, dict):
            copy: dict[Any, Any] = {}
            parent[key] = copy
            for child_key, child in node.items():
                if parent is root and child_key in keep:
                    copy[child_key] = child
                    continue
                new_key = leaf(child_key) if isinstance(child_key, str) else child_key
                while new_key in copy:  # two keys scrubbed to one: keep both
                    new_key = f"{new_key}'"
                copy[new_key] = None
                stack.append((copy, new_key, child))
        elif isinstance(node, list | tuple):
            items = list(node)
            parent[key] = items
            stack.extend((items, index, child) for index, child in enumerate(node))
        else:
            parent[key] = leaf(node)
    return root[0]
