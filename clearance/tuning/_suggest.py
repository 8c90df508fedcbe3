"""Suggest policies from calls that were allowed: the narrowest useful patterns.

From the calls a deployment allowed (a journal export, or corpus lines expected to be
allowed; :func:`allowed_calls`), :func:`suggest` groups the calls by principal and tool and
generalizes each argument's values (:mod:`clearance.tuning._patterns`). Each distinct
combination of patterns becomes one rule; every rule lists the calls it was derived from.
Calls that were asked and then approved get rules that keep the ask, no allow rule covers
them, and rules that differ only in one exact value are merged
(:mod:`clearance.tuning._suggest_scope`).

The calls come from a journal or a corpus: call ids, argument names and values, tool names
and principals are chosen by a model or whoever wrote the file. A call whose principal type
is not a Cedar name, or whose tool is not a tool name (a glob, an unregistered tool), is
left out and listed in :attr:`SuggestionSet.skipped`; the rest is escaped and checked when
rendered (:mod:`clearance.tuning._suggestions`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, Literal

from clearance.harness.tools import Tool, ToolRegistry
from clearance.tuning._corpus import CorpusCall, CorpusError, parse_corpus_line
from clearance.tuning._patterns import MISSING, ArgumentConstraint, generalize, value_key
from clearance.tuning._policy_forms import expressible
from clearance.tuning._policy_text import is_entity_type
from clearance.tuning._suggest_scope import Derived, keep_asks, merge_exact, was_asked
from clearance.tuning._suggestions import Suggestion, SuggestionSet

__all__ = ["allowed_calls", "is_allowed_record", "suggest"]

_TOOL_NAME = re.compile(r"^[a-z0-9_-]{1,64}(?:\.[a-z0-9_-]{1,64})+$")
"""A qualified tool name: no glob character, nothing a policy language reads specially."""


def suggest(
    calls: Iterable[CorpusCall],
    tools: Mapping[str, Tool] | ToolRegistry | None = None,
    *,
    format: Literal["cedar", "local"] = "cedar",
    enum_limit: int = 5,
) -> SuggestionSet:
    """Suggest allow rules covering ``calls`` (calls that were allowed).

    Args:
        calls: the allowed calls (see :func:`allowed_calls`).
        tools: the tools by qualified name (or a registry). For Cedar, arguments are typed
            from the tools' schemas; an argument Cedar cannot type is left free.
        format: the policy language the suggestions will be written in: a pattern it
            cannot express is left free (and noted), so :meth:`Suggestion.allows` is
            exactly what the rendered rules allow.
        enum_limit: at most this many distinct values are listed exactly.

    Returns:
        One suggestion per principal, tool and combination of patterns, in the order the
        principals and tools first appear; calls that were asked (a journal's
        ``expected: ask``) get suggestions that keep the ask (``Suggestion.ask``).
    """
    tool_map: dict[str, Tool] = {}
    aliases: dict[str, str] = {}
    if tools is not None:
        items = tools.values() if isinstance(tools, Mapping) else tools
        tool_map = {t.qualified_name: t for t in items}
        aliases = {t.model_alias: name for name, t in tool_map.items()}
    by_key: dict[tuple[str, str, bool], list[CorpusCall]] = {}
    skipped: list[tuple[int, str, str]] = []
    total = 0
    for call in calls:
        if call.arguments is None:
            continue
        why = _unsuggestable(call, tool_map, aliases)
        if why is not None:
            skipped.append((call.line, call.name, why))
            continue
        total += 1
        tool = aliases.get(call.tool, call.tool)
        by_key.setdefault((str(call.principal), tool, was_asked(call)), []).append(call)
    derived: list[Derived] = []
    for (principal, tool, asked), group in by_key.items():
        for rule, covered in _suggest_for(
            principal, tool, group, tool_map.get(tool), format, enum_limit
        ):
            derived.append((replace(rule, ask=asked), covered))
    asked_calls = [c for group in by_key.values() for c in group if was_asked(c)]
    derived = merge_exact(keep_asks(derived, asked_calls, tool_map, aliases, format))
    return SuggestionSet(tuple(rule for rule, _ in derived), total, tool_map, tuple(skipped))


def _suggest_for(
    principal: str,
    tool: str,
    group: list[CorpusCall],
    tool_def: Tool | None,
    format: Literal["cedar", "local"],
    enum_limit: int,
) -> list[Derived]:
    """The suggestions for one principal's calls of one tool (with the calls each came
    from): one per distinct combination of the patterns ``format`` can express."""
    names = list(dict.fromkeys(n for c in group for n in (c.arguments or {})))
    per_arg, notes = _argument_patterns(group, names, enum_limit)
    rules: dict[tuple[Any, ...], list[CorpusCall]] = {}
    shapes: dict[tuple[Any, ...], tuple[tuple[str, ArgumentConstraint], ...]] = {}
    for index, call in enumerate(group):
        kept: list[tuple[str, ArgumentConstraint]] = []
        for name in names:
            p = per_arg[name][index]
            if p is None:
                continue
            why = expressible(format, tool_def, name, p)
            if why is None:
                kept.append((name, p))
            else:
                notes.append(f"{name}: {why}: left free")
        constraints = tuple(kept)
        key = tuple((n, p.kind, value_key(p.to_json())) for n, p in constraints)
        rules.setdefault(key, []).append(call)
        shapes[key] = constraints
    # Every suggestion of the group carries all its notes: they are known only now.
    return [
        (
            Suggestion(
                principal,
                tool,
                shapes[key],
                tuple(c.name for c in covered),
                tuple(dict.fromkeys(notes)),
            ),
            covered,
        )
        for key, covered in rules.items()
    ]


def _argument_patterns(
    group: list[CorpusCall], names: list[str], enum_limit: int
) -> tuple[dict[str, list[ArgumentConstraint | None]], list[str]]:
    """Per argument, one pattern per call (``None``: left free); and notes on what was
    left free."""
    per_arg: dict[str, list[ArgumentConstraint | None]] = {}
    notes: list[str] = []
    for name in names:
        values = [(c.arguments or {}).get(name, MISSING) for c in group]
        if any(isinstance(v, list) for v in values):
            subsets = _array_patterns(values, enum_limit)
            if subsets is None:
                per_arg[name] = [None] * len(values)
                notes.append(f"{name}: arrays with too many distinct elements: left free")
            else:
                per_arg[name] = subsets
            continue
        patterns, arg_notes = generalize(values, enum_limit)
        per_arg[name] = patterns
        notes.extend(f"{name}: {n}" for n in arg_notes)
    return per_arg, notes


def _array_patterns(values: list[Any], enum_limit: int) -> list[ArgumentConstraint | None] | None:
    """One subset pattern for every call giving an array (absent for those giving none),
    when each given value is an array and they hold at most ``2 * enum_limit`` distinct
    scalars; else ``None`` (the argument stays free)."""
    lists = [v for v in values if isinstance(v, list)]
    elements = list(dict.fromkeys(value_key(x) for v in lists for x in v))
    scalar = all(
        isinstance(x, str | int | float) and not isinstance(x, bool) for v in lists for x in v
    )
    given = [v for v in values if v is not MISSING and v is not None]
    if not (scalar and len(elements) <= 2 * enum_limit and len(lists) == len(given)):
        return None
    subset = ArgumentConstraint("subset", tuple(json.loads(e) for e in elements))
    return [ArgumentConstraint("absent") if v is MISSING or v is None else subset for v in values]


def _unsuggestable(
    call: CorpusCall, tool_map: Mapping[str, Any], aliases: Mapping[str, str]
) -> str | None:
    """Why no rule can be suggested for ``call`` (``None``: one can)."""
    if not is_entity_type(call.principal.type):
        return "the principal type is not a Cedar name"
    tool = aliases.get(call.tool, call.tool)
    if not _TOOL_NAME.match(tool):
        return "the tool is not a tool name"
    if tool_map and tool not in tool_map:
        return "the tool is not registered"
    return None


# --- which calls were allowed -----------------------------------------------------------------


def is_allowed_record(raw: Mapping[str, Any]) -> bool:
    """Whether a corpus or journal-export line was an allowed call.

    A journal export (it has ``decision``): decided ``allow``, or ``ask`` and approved (its
    outcome is not ``denied``). A plain corpus line: ``expected`` is ``allow``.
    """
    if "decision" in raw:
        decision = raw.get("decision")
        if decision == "allow":
            return True
        return decision == "ask" and raw.get("outcome") not in ("denied", None)
    return raw.get("expected") == "allow"


def allowed_calls(
    lines: Iterable[str], *, path: str | None = None, skip_bad: bool = False
) -> tuple[list[CorpusCall], int]:
    """The allowed calls among corpus or journal-export lines (see
    :func:`is_allowed_record`), and how many lines were left out (not allowed, withheld
    arguments, or bad and skipped).

    Raises:
        CorpusError: a line does not parse and ``skip_bad`` is false.
    """
    kept: list[CorpusCall] = []
    left_out = 0
    for number, text in enumerate(lines, 1):
        try:
            call = parse_corpus_line(text, number, path=path)
        except CorpusError:
            if not skip_bad:
                raise
            left_out += 1
            continue
        if call is None:
            continue
        raw = json.loads(text)
        if call.arguments is None or not is_allowed_record(raw):
            left_out += 1
            continue
        kept.append(call)
    return kept, left_out
