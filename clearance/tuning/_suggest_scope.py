"""Keeping suggestions as strict as what happened: asked calls keep their ask, and rules that
differ in one exact value become one rule that says so.

Never loosen. A journal's call that was *asked* and then approved was not allowed by the
policies in force: a plain allow suggestion for it would let the same call through without
anyone being asked. So such calls get rules of their own that keep an ``@ask`` (Cedar) or
go in the ``ask`` list (local rules). An allow rule generalized from allowed calls may still
cover an asked call (``src/a``, ``src/b`` allowed, ``src/c`` asked: ``src/*``); in Cedar a
plain permit beats an ``@ask`` one, so such a rule is narrowed to one exact rule per call it
came from, and an exact rule that still covers an asked call (the same arguments were
allowed once and asked once) keeps an ``@ask`` itself, with a note saying why.

Merge the near-identical. Exact patterns (a few distinct values: commit messages ``x``,
``y``, ``m``) give one rule per combination of values. Rules of one principal and tool that
differ only in one argument, each holding an exact value (or a set of them) there, are
merged into one rule allowing exactly those values (``message is one of "x", "y", "m"``):
the merged rule allows exactly what the rules it replaces allowed, no more.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

from clearance.harness.tools import Tool
from clearance.tuning._corpus import CorpusCall
from clearance.tuning._patterns import MISSING, ArgumentConstraint, value_key
from clearance.tuning._policy_forms import expressible
from clearance.tuning._suggestions import Suggestion

__all__ = ["Derived", "keep_asks", "merge_exact", "was_asked"]

Derived = tuple[Suggestion, list[CorpusCall]]
"""A suggestion and the calls it was derived from."""

_FREE_TEXT = 200


def was_asked(call: CorpusCall) -> bool:
    """Whether an allowed call was asked first (a journal export's ``expected`` is the
    decision taken: ``ask`` for a call that was asked and approved)."""
    return call.expected == "ask"


def _exact(value: Any) -> ArgumentConstraint | None:
    """The narrowest pattern holding exactly ``value`` (``None``: it cannot be one)."""
    if value is MISSING or value is None:
        return ArgumentConstraint("absent")
    if isinstance(value, bool | int | float):
        return ArgumentConstraint("exact", value)
    if isinstance(value, str):
        if len(value) > _FREE_TEXT or "\n" in value or "\r" in value:
            return None
        return ArgumentConstraint("exact", value)
    if isinstance(value, list) and all(
        isinstance(x, str | int | float) and not isinstance(x, bool) for x in value
    ):
        elements = {value_key(x): x for x in value}
        return ArgumentConstraint("subset", tuple(elements.values()))
    return None


def _exact_rule(
    base: Suggestion,
    call: CorpusCall,
    names: Sequence[str],
    tool: Tool | None,
    format: Literal["cedar", "local"],
) -> Suggestion:
    """``call`` alone, as exactly as ``format`` can say it."""
    arguments = call.arguments or {}
    kept: list[tuple[str, ArgumentConstraint]] = []
    notes = list(base.notes)
    for name in names:
        pattern = _exact(arguments.get(name, MISSING))
        if pattern is None:
            notes.append(f"{name}: long text or an object: left free")
            continue
        why = expressible(format, tool, name, pattern)
        if why is None:
            kept.append((name, pattern))
        elif pattern.kind != "absent":
            notes.append(f"{name}: {why}: left free")
    return Suggestion(
        base.principal, base.tool, tuple(kept), (call.name,), tuple(dict.fromkeys(notes))
    )


def keep_asks(
    derived: Sequence[Derived],
    asked: Sequence[CorpusCall],
    tools: Mapping[str, Tool],
    aliases: Mapping[str, str],
    format: Literal["cedar", "local"],
) -> list[Derived]:
    """No allow suggestion covers a call that was asked: one that does is narrowed to exact
    rules per call, and an exact rule that still does keeps an ask (see the module doc).

    Args:
        derived: the suggestions with their calls; those marked ``ask`` are kept as is.
        asked: the calls that were asked and approved.
        tools: the tools by qualified name.
        aliases: model alias → qualified name.
        format: the policy language the suggestions will be written in.
    """
    if not asked:
        return list(derived)

    def covers(rule: Suggestion) -> list[CorpusCall]:
        return [
            c
            for c in asked
            if rule.allows(str(c.principal), aliases.get(c.tool, c.tool), c.arguments or {})
        ]

    out: list[Derived] = []
    for rule, calls in derived:
        if rule.ask or not covers(rule):
            out.append((rule, calls))
            continue
        names = list(dict.fromkeys(n for c in calls for n in (c.arguments or {})))
        for call in calls:
            exact = _exact_rule(rule, call, names, tools.get(rule.tool), format)
            exact = replace(
                exact,
                notes=(
                    *exact.notes,
                    "narrowed to the exact call: a wider rule would allow calls that were asked",
                ),
            )
            still = covers(exact)
            if still:
                exact = replace(
                    exact,
                    ask=True,
                    notes=(
                        *exact.notes,
                        f"also allows {still[0].name}, which was asked: kept as @ask",
                    ),
                )
            out.append((exact, [call]))
    return out


def _bucket_key(rule: Suggestion, name: str) -> str | None:
    """What must be equal for two rules to merge on ``name`` (``None``: this rule cannot:
    it has no exact value there)."""
    pattern = dict(rule.constraints).get(name)
    if pattern is None or pattern.kind not in ("exact", "oneof"):
        return None
    others = [(n, p.kind, value_key(p.to_json())) for n, p in rule.constraints if n != name]
    shape = [n for n, _ in rule.constraints]
    return json.dumps([rule.principal, rule.tool, rule.ask, shape, others])


def _values(pattern: ArgumentConstraint) -> list[Any]:
    return list(pattern.value) if pattern.kind == "oneof" else [pattern.value]


def _merged(rules: list[Derived], name: str) -> Derived:
    """One rule allowing exactly what ``rules`` (equal but for ``name``) allow."""
    first = rules[0][0]
    values: dict[str, Any] = {}
    for rule, _ in rules:
        for value in _values(dict(rule.constraints)[name]):
            values.setdefault(value_key(value), value)
    pattern = (
        ArgumentConstraint("exact", next(iter(values.values())))
        if len(values) == 1
        else ArgumentConstraint("oneof", tuple(values.values()))
    )
    constraints = tuple((n, pattern if n == name else p) for n, p in first.constraints)
    notes = [n for rule, _ in rules for n in rule.notes]
    if len(values) > 1:
        notes.append(f"{name}: {len(rules)} rules that differed only here merged into one")
    merged = replace(
        first,
        constraints=constraints,
        calls=tuple(c for rule, _ in rules for c in rule.calls),
        notes=tuple(dict.fromkeys(notes)),
    )
    return merged, [c for _, calls in rules for c in calls]


def _buckets(current: Sequence[Derived], name: str) -> list[list[int]]:
    """The groups of rules (by index, each of two or more) that can merge on ``name``."""
    buckets: dict[str, list[int]] = {}
    for index, (rule, _) in enumerate(current):
        key = _bucket_key(rule, name)
        if key is not None:
            buckets.setdefault(key, []).append(index)
    return [indexes for indexes in buckets.values() if len(indexes) > 1]


def merge_exact(derived: Sequence[Derived]) -> list[Derived]:
    """Rules that differ only in one argument's exact values, merged (see the module doc),
    until no two can be; in the order of each merged rule's first member.

    Each round merges on the argument that removes the most rules (the one whose values
    vary most, like a commit message, rather than the repository it went to), so the
    result reads as a few rules with one list of values each."""
    current = list(derived)
    while True:
        names = list(dict.fromkeys(n for rule, _ in current for n, _ in rule.constraints))
        best: tuple[int, str, list[list[int]]] | None = None
        for name in names:
            groups = _buckets(current, name)
            gain = sum(len(g) - 1 for g in groups)
            if gain and (best is None or gain > best[0]):
                best = (gain, name, groups)
        if best is None:
            return current
        _, name, groups = best
        replaced = {g[0]: _merged([current[i] for i in g], name) for g in groups}
        dropped = {i for g in groups for i in g[1:]}
        current = [replaced.get(i, item) for i, item in enumerate(current) if i not in dropped]
