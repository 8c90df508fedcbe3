"""Patterns: how a suggested rule constrains one argument, generalized from the values seen.

* paths (values holding ``/``) sharing a first segment → their common directory prefix,
  never letting a ``..`` segment through;
* URLs → their scheme and host;
* anything else with at most ``enum_limit`` distinct values → those exact values;
* numbers with more distinct values → their range;
* arrays → the set of elements seen (built by :func:`~clearance.tuning.suggest`);
* rules that differ only in one argument's exact value → one rule with the values seen for
  it (``oneof``; :mod:`clearance.tuning._suggest_scope` merges them);
* long or multi-line text, objects, and values with too many distinct forms → left free.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["MISSING", "ArgumentConstraint", "ConstraintKind", "generalize", "value_key"]

ConstraintKind = Literal["exact", "oneof", "prefix", "host", "range", "subset", "absent"]

_URL = re.compile(
    r"^(?P<base>(?:[a-zA-Z][a-zA-Z0-9+.\-]*://)?[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*"
    r"\.[A-Za-z]{2,}(?::\d{1,5})?)(?P<rest>/.*)?$",
    re.DOTALL,
)
_FREE_TEXT = 200
"""Strings longer than this (or with a line break) are free text: never constrained."""

MISSING: Any = object()
"""Stands for an argument a call did not give (``None`` is a given null)."""


@dataclass(frozen=True, slots=True)
class ArgumentConstraint:
    """How a rule constrains one argument.

    ``exact``: ``value`` is the one value allowed. ``oneof``: one of the values in the tuple
    ``value``. ``prefix``: a string starting with
    ``value + "/"`` and holding no ``..`` segment. ``host``: a URL equal to ``value``
    (scheme and host) or continuing with ``/``. ``range``: a number in
    ``[value[0], value[1]]``. ``subset``: an array whose every element is in ``value``.
    ``absent``: the argument is not given (or null).
    """

    kind: ConstraintKind
    value: Any = None

    def matches(self, value: Any) -> bool:
        """Whether ``value`` (``MISSING``-free: pass ``None`` for an absent argument)
        is inside this pattern."""
        if self.kind == "absent":
            return value is None
        if value is None:
            return False
        if self.kind == "exact":
            return _same(value, self.value)
        if self.kind == "oneof":
            return any(_same(value, allowed) for allowed in self.value)
        if self.kind == "prefix":
            return (
                isinstance(value, str)
                and value.startswith(self.value + "/")
                and ".." not in value.split("/")
                and ".." not in value
            )
        if self.kind == "host":
            return isinstance(value, str) and (
                value == self.value or value.startswith(self.value + "/")
            )
        if self.kind == "range":
            return (
                isinstance(value, int | float)
                and not isinstance(value, bool)
                and self.value[0] <= value <= self.value[1]
            )
        if self.kind == "subset":
            return isinstance(value, list) and all(
                any(_same(v, allowed) for allowed in self.value) for v in value
            )
        return False  # pragma: no cover

    def describe(self) -> str:
        if self.kind == "exact":
            return json.dumps(self.value, ensure_ascii=False)
        if self.kind == "oneof":
            return "one of " + ", ".join(json.dumps(v, ensure_ascii=False) for v in self.value)
        if self.kind == "prefix":
            return f"{self.value}/* (no '..')"
        if self.kind == "host":
            return f"{self.value} or {self.value}/*"
        if self.kind == "range":
            return f"{self.value[0]}..{self.value[1]}"
        if self.kind == "subset":
            return "each of " + json.dumps(list(self.value), ensure_ascii=False)
        return "absent"

    def to_json(self) -> dict[str, Any]:
        value = list(self.value) if isinstance(self.value, tuple) else self.value
        return {"kind": self.kind, "value": value}


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


def value_key(value: Any) -> str:
    """A JSON value as text that is equal for equal values (object keys sorted)."""
    return json.dumps(value, sort_keys=True)


def _common_dir(values: Sequence[str]) -> str | None:
    parents = [v.split("/")[:-1] for v in values]
    common: list[str] = []
    for parts in zip(*parents, strict=False):
        # A segment holding ".." anywhere ('v1..2') stops the prefix: the policy languages
        # treat such text warily ('like "*..*"'), and a prefix must never come near a step up.
        if all(p == parts[0] for p in parts) and parts[0] not in ("", ".") and ".." not in parts[0]:
            common.append(parts[0])
        else:
            break
    return "/".join(common) if common else None


def generalize(
    values: Sequence[Any], enum_limit: int
) -> tuple[list[ArgumentConstraint | None], list[str]]:
    """One pattern per value (``None``: left free) and notes on what was left free.

    Arrays are left to the caller (``None`` here): they become one subset pattern for all
    the calls.
    """
    patterns: list[ArgumentConstraint | None] = [None] * len(values)
    notes: list[str] = []
    plain: dict[str, list[int]] = {}
    paths: dict[str, list[int]] = {}
    numbers: list[int] = []
    for i, v in enumerate(values):
        if v is MISSING or v is None:
            patterns[i] = ArgumentConstraint("absent")
        elif isinstance(v, bool):
            patterns[i] = ArgumentConstraint("exact", v)
        elif isinstance(v, str):
            if len(v) > _FREE_TEXT or "\n" in v or "\r" in v:
                continue
            url = _URL.match(v)
            if url and (url.group("rest") or "/" in url.group("base") or v.startswith("www.")):
                patterns[i] = ArgumentConstraint("host", url.group("base"))
            elif "/" in v and ".." not in v and not v.startswith("/"):
                paths.setdefault(v.split("/", 1)[0], []).append(i)
            else:
                plain.setdefault(v, []).append(i)
        elif isinstance(v, int | float):
            numbers.append(i)
        elif isinstance(v, list) and all(
            isinstance(x, str | int | float) and not isinstance(x, bool) for x in v
        ):
            continue  # arrays: handled by the caller (one subset for all)
        # objects and other values stay free
    for indexes in paths.values():
        distinct = sorted({values[i] for i in indexes})
        prefix = _common_dir(distinct) if len(distinct) > 1 else None
        for i in indexes:
            patterns[i] = (
                ArgumentConstraint("prefix", prefix)
                if prefix
                else ArgumentConstraint("exact", values[i])
            )
    if len(plain) <= enum_limit:
        for text, indexes in plain.items():
            for i in indexes:
                patterns[i] = ArgumentConstraint("exact", text)
    elif plain:
        notes.append(f"{len(plain)} distinct values: left free")
    if numbers:
        distinct_numbers = {values[i] for i in numbers}
        if len(distinct_numbers) <= enum_limit:
            for i in numbers:
                patterns[i] = ArgumentConstraint("exact", values[i])
        else:
            span = (min(distinct_numbers), max(distinct_numbers))
            for i in numbers:
                patterns[i] = ArgumentConstraint("range", span)
    if any(isinstance(v, str) and (len(v) > _FREE_TEXT or "\n" in v or "\r" in v) for v in values):
        notes.append("long or multi-line text: left free")
    if any(isinstance(v, dict) for v in values):
        notes.append("objects: left free")
    return patterns, notes
