"""Suggest policies from calls that were allowed: the narrowest useful patterns.

From the calls a deployment allowed (a journal export, or corpus lines expected to be
allowed), :func:`suggest` groups the calls by principal and tool and generalizes each
argument's values:

* paths (values holding ``/``) sharing a first segment → their common directory prefix
  (``src/*`` in Cedar, ``src/**`` as a local rule), never letting a ``..`` segment through;
* URLs → their scheme and host (``https://api.example.com/*``);
* anything else with at most ``enum_limit`` distinct values → those exact values;
* numbers with more distinct values → their range (Cedar only);
* arrays → the set of elements seen (Cedar ``containsAll``);
* long or multi-line text, objects, and values with too many distinct forms → left free
  (the suggestion says so in its ``notes``).

Each distinct combination of patterns becomes one rule; every rule lists the calls it was
derived from. :meth:`SuggestionSet.to_cedar` and :meth:`SuggestionSet.to_local` render them
for review; :meth:`SuggestionSet.evaluator` builds an evaluator from them so that the
source calls can be replayed to show that the suggestions allow what was allowed.

The calls come from a journal or a corpus: call ids, argument names and values, tool names
and principals are chosen by a model or whoever wrote the file. Nothing of them reaches the
generated text unescaped (comments cannot end early, string literals cannot close, no
control or bidi character is written raw), and the text is parsed back before it is
returned: :meth:`SuggestionSet.to_cedar` through the Cedar engine, each policy compared
with the principal, action and resource it was made for; :meth:`SuggestionSet.to_local_toml`
through TOML and the local rule parser. A call whose principal type is not a Cedar name,
or whose tool is not a tool name (a glob, an unregistered tool), is left out and listed in
:attr:`SuggestionSet.skipped`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from clearance.policy.base import AuthzRequest, Verdict
from clearance.policy.policy_text import (
    IntendedPolicy,
    cedar_attribute,
    cedar_entity,
    cedar_like,
    cedar_string,
    check_cedar,
    check_local,
    comment,
    has_name,
    is_entity_type,
    split_entity,
    toml_string,
)
from clearance.policy.replay import CorpusCall, CorpusError, parse_corpus_line

if TYPE_CHECKING:
    from clearance.harness.tools import Tool, ToolRegistry

__all__ = [
    "Pattern",
    "PrincipalRules",
    "Suggestion",
    "SuggestionSet",
    "allowed_calls",
    "is_allowed_record",
    "suggest",
]

PatternKind = Literal["exact", "prefix", "host", "range", "subset", "absent"]

_URL = re.compile(
    r"^(?P<base>(?:[a-zA-Z][a-zA-Z0-9+.\-]*://)?[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*"
    r"\.[A-Za-z]{2,}(?::\d{1,5})?)(?P<rest>/.*)?$",
    re.DOTALL,
)
_FREE_TEXT = 200
"""Strings longer than this (or with a line break) are free text: never constrained."""
_TOOL_NAME = re.compile(r"^[a-z0-9_-]{1,64}(?:\.[a-z0-9_-]{1,64})+$")
"""A qualified tool name: no glob character, nothing a policy language reads specially."""
_MISSING: Any = object()


@dataclass(frozen=True, slots=True)
class Pattern:
    """How a rule constrains one argument.

    ``exact``: ``value`` is the one value allowed. ``prefix``: a string starting with
    ``value + "/"`` and holding no ``..`` segment. ``host``: a URL equal to ``value``
    (scheme and host) or continuing with ``/``. ``range``: a number in
    ``[value[0], value[1]]``. ``subset``: an array whose every element is in ``value``.
    ``absent``: the argument is not given (or null).
    """

    kind: PatternKind
    value: Any = None

    def matches(self, value: Any) -> bool:
        """Whether ``value`` (``_MISSING``-free: pass ``None`` for an absent argument)
        is inside this pattern."""
        if self.kind == "absent":
            return value is None
        if value is None:
            return False
        if self.kind == "exact":
            return _same(value, self.value)
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


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


@dataclass(frozen=True, slots=True)
class Suggestion:
    """One suggested rule: ``principal`` may call ``tool`` when every constraint holds."""

    principal: str
    tool: str
    constraints: tuple[tuple[str, Pattern], ...]
    """(argument, pattern) pairs; arguments not listed are free."""
    calls: tuple[str, ...]
    """The calls it was derived from (their ids, else ``line N``)."""
    notes: tuple[str, ...] = ()
    """Why some arguments are left free."""

    def allows(self, principal: str, tool: str, arguments: Mapping[str, Any]) -> bool:
        """Whether this rule covers the call (the scope the rendered policies enforce)."""
        if principal != self.principal or tool != self.tool:
            return False
        return all(p.matches(arguments.get(name)) for name, p in self.constraints)

    def to_json(self) -> dict[str, Any]:
        return {
            "principal": self.principal,
            "tool": self.tool,
            "constraints": {name: p.to_json() for name, p in self.constraints},
            "calls": list(self.calls),
            "notes": list(self.notes),
        }


@dataclass(frozen=True, slots=True)
class SuggestionSet:
    """The suggestions for a set of allowed calls."""

    suggestions: tuple[Suggestion, ...]
    source_calls: int
    """Allowed calls the suggestions were derived from."""
    tools: Mapping[str, Tool] = field(default_factory=dict, repr=False)
    skipped: tuple[tuple[int, str, str], ...] = ()
    """Calls left out, as ``(line, name, why)``: a principal type that is not a Cedar
    name, a tool name that is not one (a glob), or a tool the registry does not have."""

    def allows(self, principal: str, tool: str, arguments: Mapping[str, Any]) -> bool:
        """Whether any suggestion covers the call."""
        return any(s.allows(principal, tool, arguments) for s in self.suggestions)

    def to_json(self) -> dict[str, Any]:
        return {
            "source_calls": self.source_calls,
            "suggestions": [s.to_json() for s in self.suggestions],
            "skipped": [{"line": n, "call": name, "why": why} for n, name, why in self.skipped],
        }

    # -- Cedar -------------------------------------------------------------------------------

    def to_cedar(self) -> str:
        """Cedar policies, one ``permit`` per suggestion, each with an ``@id`` and a
        comment listing the calls it covers.

        Raises:
            PolicyError: the text does not parse back to one policy per suggestion, each
                scoped to the principal and action it was made for (a bug: what the
                calls carried is always escaped).
        """
        out: list[str] = []
        conditioned: list[bool] = []
        for index, s in enumerate(self.suggestions, 1):
            principal = cedar_entity(s.principal)
            conditions = [
                c for name, p in s.constraints if (c := self._cedar_condition(s.tool, name, p))
            ]
            conditioned.append(bool(conditions))
            covers = ", ".join(s.calls[:5]) + (
                f" and {len(s.calls) - 5} more" if len(s.calls) > 5 else ""
            )
            out.append(comment("//", f"{len(s.calls)} call(s): {covers}"))
            out.extend(comment("//", f"note: {note}") for note in s.notes)
            out.append(f'@id("suggested-{index}")')
            head = f"permit (principal == {principal}, action == Action::{cedar_string(s.tool)}, resource)"
            if conditions:
                out.append(head)
                out.append("when {\n  " + " &&\n  ".join(conditions) + "\n};")
            else:
                out.append(head + ";")
            out.append("")
        text = "\n".join(out)
        check_cedar(
            text,
            [
                IntendedPolicy(f"suggested-{n}", split_entity(s.principal), s.tool, when)
                for n, (s, when) in enumerate(zip(self.suggestions, conditioned, strict=True), 1)
            ],
        )
        return text

    def _cedar_condition(self, tool: str, name: str, pattern: Pattern) -> str | None:
        kind, required = _cedar_kind(self.tools.get(tool), name)
        if kind in ("untyped", "other"):
            return None  # suggest(format="cedar") leaves such arguments free
        ref = f"context.input{cedar_attribute(name)}"
        guard = "" if required else f"context.input has {has_name(name)} && "
        if pattern.kind == "absent":
            return None if required else f"!(context.input has {has_name(name)})"
        if pattern.kind == "exact":
            return guard + f"{ref} == {_cedar_value(pattern.value, kind)}"
        if pattern.kind == "prefix":
            prefix = cedar_like(pattern.value + "/") + "*"
            return guard + f'({ref} like "{prefix}" && !({ref} like "*..*"))'
        if pattern.kind == "host":
            base = cedar_string(pattern.value)
            return guard + f'({ref} == {base} || {ref} like "{cedar_like(pattern.value + "/")}*")'
        if pattern.kind == "range":
            lo, hi = (_cedar_value(v, kind) for v in pattern.value)
            if kind == "decimal":
                return guard + f"{ref}.greaterThanOrEqual({lo}) && {ref}.lessThanOrEqual({hi})"
            return guard + f"{ref} >= {lo} && {ref} <= {hi}"
        if pattern.kind == "subset":
            element = kind[4:] if kind.startswith("set:") else "string"
            items = ", ".join(_cedar_value(v, element) for v in pattern.value)
            return guard + f"[{items}].containsAll({ref})"
        return None  # pragma: no cover

    # -- local rules -------------------------------------------------------------------------

    def to_local(self) -> dict[str, list[str]]:
        """Local allow rules per principal (the local evaluator has no principal, so each
        principal gets its own rules file). Build the set with ``format="local"`` so that
        every constraint can be written as a glob."""
        rules: dict[str, list[str]] = {}
        for s in self.suggestions:
            alternatives: list[list[str]] = [[]]
            for name, p in s.constraints:
                globs = _local_globs(p)
                if globs is None:
                    continue
                alternatives = [
                    [*a, f"{name}={_local_quote(g)}"] for a in alternatives for g in globs
                ]
            target = rules.setdefault(s.principal, [])
            for parts in alternatives:
                rule = f"{s.tool}({', '.join(parts)})" if parts else s.tool
                if rule not in target:
                    target.append(rule)
        return rules

    def to_local_toml(self) -> str:
        """:meth:`to_local` as TOML: one ``allow`` list per principal, under a comment
        naming the principal (save each as its own rules file).

        Raises:
            PolicyError: a principal's block does not parse back to exactly its rules, or a
                rule does not parse to the exact tool it was made for (a bug: what the
                calls carried is always escaped).
        """
        out: list[str] = []
        for principal, rules in self.to_local().items():
            block = "\n".join(
                [
                    comment("#", principal),
                    "allow = [",
                    *(f"  {toml_string(r)}," for r in rules),
                    "]",
                ]
            )
            check_local(block, rules, {s.tool for s in self.suggestions})
            out.extend([block, ""])
        return "\n".join(out)

    def evaluator(self, format: Literal["cedar", "local"]) -> Any:
        """An evaluator enforcing the suggestions as rendered in ``format`` (bind it to
        the registry before use; a harness does)."""
        if format == "cedar":
            from clearance.policy.cedar import CedarEvaluator

            return CedarEvaluator(self.to_cedar() or "")
        from clearance.policy.local import LocalEvaluator

        return PrincipalRules(
            {p: LocalEvaluator(allow=rules) for p, rules in self.to_local().items()}
        )


class PrincipalRules:
    """Local rules per principal (``'User::"alice"'`` → evaluator); other principals are
    denied."""

    name = "local-per-principal"

    def __init__(self, evaluators: Mapping[str, Any]) -> None:
        self.evaluators = dict(evaluators)

    def bind(self, registry: ToolRegistry) -> None:
        for evaluator in self.evaluators.values():
            evaluator.bind(registry)

    def policy_ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.id for e in self.evaluators.values() for r in e.rules))

    def evaluate(self, request: AuthzRequest) -> Verdict:
        evaluator = self.evaluators.get(str(request.principal))
        if evaluator is None:
            return Verdict("deny", message=f"no rules for {request.principal}", evaluator=self.name)
        verdict: Verdict = evaluator.evaluate(request)
        return verdict


# --- rendering helpers (quoting and checking the text: clearance.policy.policy_text) -------


def _cedar_value(value: Any, kind: str) -> str:
    if kind == "decimal":
        from clearance.policy.cedar.entities import decimal_text

        return f'decimal("{decimal_text(value, "value")}")'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(int(value))
    return cedar_string(str(value))


_RECORDS: dict[int, tuple[Any, Any]] = {}
"""The Cedar input record of each tool seen (schema generation is not free)."""


def _cedar_kind(tool: Tool | None, name: str) -> tuple[str, bool]:
    """The Cedar type of ``context.input.<name>`` ("string", "long", "decimal", "bool",
    "set:<element>", "other" or "untyped") and whether it is required."""
    if tool is None:
        return "untyped", False
    from clearance.policy.cedar.schema import (
        BOOL,
        DECIMAL,
        LONG,
        STRING,
        SetType,
        build_schema,
    )

    cached = _RECORDS.get(id(tool))
    if cached is None or cached[0] is not tool:
        try:
            record: Any = build_schema([tool]).tools[tool.qualified_name].input
        except (ValueError, KeyError):
            record = None
        if len(_RECORDS) >= 1024:
            _RECORDS.clear()
        # The tool is kept in the entry so that its id cannot be reused while cached.
        _RECORDS[id(tool)] = cached = (tool, record)
    record = cached[1]
    if record is None:
        return "untyped", False
    attr = record.attributes.get(name)
    if attr is None:
        return "untyped", False
    names = {STRING: "string", LONG: "long", DECIMAL: "decimal", BOOL: "bool"}

    def kind_of(typ: Any) -> str:
        if isinstance(typ, SetType):
            return "set:" + kind_of(typ.element)
        return names.get(typ, "other")

    return kind_of(attr.type), attr.required


def _fix_brackets(text: str) -> str:
    """``text`` as a local glob matching it literally (the glob language has no escape
    character, so a one-character class stands for each special character)."""
    special = {"[": "[[]", "*": "[*]", "?": "[?]", "]": "?"}
    return "".join(special.get(ch, ch) for ch in text)


def _local_globs(pattern: Pattern) -> list[str] | None:
    """Glob alternatives for a local rule (``None``: the argument stays free)."""
    if pattern.kind == "exact":
        value = pattern.value
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
        return [_fix_brackets(text)]
    if pattern.kind == "prefix":
        return [_fix_brackets(pattern.value) + "/**"]
    if pattern.kind == "host":
        base = _fix_brackets(pattern.value)
        return [base, base + "/**"]
    if pattern.kind == "subset" and len(pattern.value) == 1:
        only = pattern.value[0]
        return [_fix_brackets(only if isinstance(only, str) else json.dumps(only))]
    return None


def _local_quote(glob: str) -> str:
    if glob and not any(c in glob for c in ",()\"' \t") and glob == glob.strip():
        return glob
    if '"' not in glob:
        return f'"{glob}"'
    return f"'{glob}'"


def _expressible(format: str, tool: Tool | None, name: str, pattern: Pattern) -> str | None:
    """Why ``pattern`` cannot be written in ``format`` (``None``: it can)."""
    if not all(_writable(v) for v in _strings(pattern.value)):
        return "a lone surrogate cannot be written in a policy"
    if format == "local":
        if pattern.kind == "range":
            return "local rules cannot express a range"
        if pattern.kind == "subset" and len(pattern.value) != 1:
            return "local rules cannot express a set of values"
        if pattern.kind == "absent":
            return "local rules cannot require an argument to be absent"
        globs = _local_globs(pattern)
        if (
            globs is None
            or "]" in str(pattern.value)
            or any(not g or ("'" in g and '"' in g) for g in globs)
        ):
            return "the value cannot be written as a local glob"
        return None
    kind, required = _cedar_kind(tool, name)
    if kind in ("untyped", "other"):
        return "not typed in the Cedar schema"
    value = pattern.value
    if pattern.kind == "absent":
        return "required by the schema" if required else None
    if pattern.kind in ("prefix", "host"):
        return None if kind == "string" else f"not a string in the Cedar schema ({kind})"
    if pattern.kind == "subset":
        element = kind[4:] if kind.startswith("set:") else None
        if element is None:
            return f"not a set in the Cedar schema ({kind})"
        return None if all(_fits(v, element) for v in value) else "elements do not fit"
    if pattern.kind == "range":
        return (
            None
            if kind in ("long", "decimal") and all(_fits(v, kind) for v in value)
            else (f"a range of {kind} values")
        )
    return None if _fits(value, kind) else f"the value does not fit {kind}"


def _writable(text: str) -> bool:
    """Whether a policy can hold ``text`` (a lone surrogate is no Unicode scalar value)."""
    return not any(0xD800 <= ord(ch) <= 0xDFFF for ch in text)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple):
        return [v for v in value if isinstance(v, str)]
    return []


def _fits(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str) and _writable(value)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "long":
        return isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63
    if kind == "decimal":
        from clearance.policy.cedar.entities import ValueMismatch, decimal_text

        try:
            decimal_text(value, "value")
        except ValueMismatch:
            return False
        return True
    return False


# --- generalizing -----------------------------------------------------------------------------


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


def _generalize(values: Sequence[Any], enum_limit: int) -> tuple[list[Pattern | None], list[str]]:
    """One pattern per value (``None``: left free) and notes on what was left free."""
    patterns: list[Pattern | None] = [None] * len(values)
    notes: list[str] = []
    plain: dict[str, list[int]] = {}
    paths: dict[str, list[int]] = {}
    numbers: list[int] = []
    for i, v in enumerate(values):
        if v is _MISSING or v is None:
            patterns[i] = Pattern("absent")
        elif isinstance(v, bool):
            patterns[i] = Pattern("exact", v)
        elif isinstance(v, str):
            if len(v) > _FREE_TEXT or "\n" in v or "\r" in v:
                continue
            url = _URL.match(v)
            if url and (url.group("rest") or "/" in url.group("base") or v.startswith("www.")):
                patterns[i] = Pattern("host", url.group("base"))
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
            patterns[i] = Pattern("prefix", prefix) if prefix else Pattern("exact", values[i])
    if len(plain) <= enum_limit:
        for text, indexes in plain.items():
            for i in indexes:
                patterns[i] = Pattern("exact", text)
    elif plain:
        notes.append(f"{len(plain)} distinct values: left free")
    if numbers:
        distinct_numbers = {values[i] for i in numbers}
        if len(distinct_numbers) <= enum_limit:
            for i in numbers:
                patterns[i] = Pattern("exact", values[i])
        else:
            span = (min(distinct_numbers), max(distinct_numbers))
            for i in numbers:
                patterns[i] = Pattern("range", span)
    if any(isinstance(v, str) and (len(v) > _FREE_TEXT or "\n" in v or "\r" in v) for v in values):
        notes.append("long or multi-line text: left free")
    if any(isinstance(v, dict) for v in values):
        notes.append("objects: left free")
    return patterns, notes


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
        principals and tools first appear.
    """
    tool_map: dict[str, Tool] = {}
    aliases: dict[str, str] = {}
    if tools is not None:
        items = tools.values() if isinstance(tools, Mapping) else tools
        tool_map = {t.qualified_name: t for t in items}
        aliases = {getattr(t, "model_alias", name): name for name, t in tool_map.items()}
    by_key: dict[tuple[str, str], list[CorpusCall]] = {}
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
        by_key.setdefault((str(call.principal), tool), []).append(call)
    out: list[Suggestion] = []
    for (principal, tool), group in by_key.items():
        names = list(dict.fromkeys(n for c in group for n in (c.arguments or {})))
        per_arg: dict[str, list[Pattern | None]] = {}
        notes: list[str] = []
        for name in names:
            values = [(c.arguments or {}).get(name, _MISSING) for c in group]
            lists = [v for v in values if isinstance(v, list)]
            if lists:
                elements = list(dict.fromkeys(_key(x) for v in lists for x in v))
                scalar = all(
                    isinstance(x, str | int | float) and not isinstance(x, bool)
                    for v in lists
                    for x in v
                )
                if (
                    scalar
                    and len(elements) <= 2 * enum_limit
                    and len(lists)
                    == len([v for v in values if v is not _MISSING and v is not None])
                ):
                    subset = Pattern("subset", tuple(json.loads(e) for e in elements))
                    per_arg[name] = [
                        Pattern("absent") if v is _MISSING or v is None else subset for v in values
                    ]
                else:
                    per_arg[name] = [None] * len(values)
                    notes.append(f"{name}: arrays with too many distinct elements: left free")
                continue
            patterns, arg_notes = _generalize(values, enum_limit)
            per_arg[name] = patterns
            notes.extend(f"{name}: {n}" for n in arg_notes)
        rules: dict[tuple[Any, ...], list[CorpusCall]] = {}
        shapes: dict[tuple[Any, ...], tuple[tuple[str, Pattern], ...]] = {}
        tool_def = tool_map.get(tool)
        for index, call in enumerate(group):
            kept: list[tuple[str, Pattern]] = []
            for name in names:
                p = per_arg[name][index]
                if p is None:
                    continue
                why = _expressible(format, tool_def, name, p)
                if why is None:
                    kept.append((name, p))
                else:
                    notes.append(f"{name}: {why}: left free")
            constraints = tuple(kept)
            key = tuple((n, p.kind, _key(p.to_json())) for n, p in constraints)
            rules.setdefault(key, []).append(call)
            shapes[key] = constraints
        for key, covered in rules.items():
            constraints = shapes[key]
            out.append(
                Suggestion(
                    principal,
                    tool,
                    constraints,
                    tuple(c.name for c in covered),
                    tuple(dict.fromkeys(notes)),
                )
            )
    return SuggestionSet(tuple(out), total, tool_map, tuple(skipped))


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
