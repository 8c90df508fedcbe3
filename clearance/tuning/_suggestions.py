"""Suggestions: the rules :func:`~clearance.tuning.suggest` proposes, and their rendering.

:meth:`SuggestionSet.to_cedar` and :meth:`SuggestionSet.to_local` render them for review;
:meth:`SuggestionSet.evaluator` builds an evaluator from them so that the source calls can
be replayed to show that the suggestions allow what was allowed.

What the calls carried (argument values and names, tool names, principals, call ids) may
have been chosen by a model. Nothing of it reaches the text unescaped, and the text is
parsed back before it is returned (:mod:`clearance.tuning._policy_text`):
:meth:`SuggestionSet.to_cedar` through the Cedar engine, each policy compared with the
principal, action and resource it was made for; :meth:`SuggestionSet.to_local_toml` through
TOML and the local rule parser.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from clearance.harness.tools import Tool
from clearance.policy.base import AuthzRequest, Evaluator, Verdict
from clearance.policy.local import LocalEvaluator
from clearance.tuning._patterns import ArgumentConstraint
from clearance.tuning._policy_forms import cedar_kind, cedar_value, local_globs, local_quote
from clearance.tuning._policy_text import (
    IntendedPolicy,
    cedar_attribute,
    cedar_entity,
    cedar_like,
    cedar_string,
    check_cedar,
    check_local,
    comment,
    has_name,
    split_entity,
    toml_string,
)
from clearance.types import ToolCatalog

__all__ = ["ASK_REASON", "PrincipalRules", "Suggestion", "SuggestionSet"]

ASK_REASON = "asked and approved in the recorded calls"
"""The ``@ask`` text of a suggestion that keeps an ask."""


@dataclass(frozen=True, slots=True)
class Suggestion:
    """One suggested rule: ``principal`` may call ``tool`` when every constraint holds."""

    principal: str
    tool: str
    constraints: tuple[tuple[str, ArgumentConstraint], ...]
    """(argument, pattern) pairs; arguments not listed are free."""
    calls: tuple[str, ...]
    """The calls it was derived from (their ids, else ``line N``)."""
    notes: tuple[str, ...] = ()
    """Why some arguments are left free."""
    ask: bool = False
    """The calls it came from were asked before they were approved (or it also covers such a
    call): it grants only with approval (Cedar ``@ask``, a local ``ask`` rule)."""

    def allows(self, principal: str, tool: str, arguments: Mapping[str, Any]) -> bool:
        """Whether this rule covers the call (the scope the rendered policies enforce)."""
        if principal != self.principal or tool != self.tool:
            return False
        return all(p.matches(arguments.get(name)) for name, p in self.constraints)

    def scope(self) -> str:
        """What the rule allows, in words: ``path: src/* (no '..'); message: one of "x",
        "y"`` (``any arguments`` when nothing is constrained)."""
        parts = [f"{name}: {p.describe()}" for name, p in self.constraints]
        return "; ".join(parts) or "any arguments"

    def to_json(self) -> dict[str, Any]:
        return {
            "principal": self.principal,
            "tool": self.tool,
            "constraints": {name: p.to_json() for name, p in self.constraints},
            "scope": self.scope(),
            "ask": self.ask,
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
        """Cedar policies, one ``permit`` per suggestion, each with an ``@id`` (and an
        ``@ask`` when it keeps an ask), and comments listing the calls it covers and its
        scope.

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
            out.append(comment("//", f"scope: {s.scope()}"))
            out.extend(comment("//", f"note: {note}") for note in s.notes)
            out.append(f'@id("suggested-{index}")')
            if s.ask:
                out.append(f"@ask({cedar_string(ASK_REASON)})")
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
                IntendedPolicy(
                    f"suggested-{n}",
                    split_entity(s.principal),
                    s.tool,
                    when,
                    ASK_REASON if s.ask else None,
                )
                for n, (s, when) in enumerate(zip(self.suggestions, conditioned, strict=True), 1)
            ],
        )
        return text

    def _cedar_condition(self, tool: str, name: str, pattern: ArgumentConstraint) -> str | None:
        kind, required = cedar_kind(self.tools.get(tool), name)
        if kind in ("untyped", "other"):
            return None  # suggest(format="cedar") leaves such arguments free
        ref = f"context.input{cedar_attribute(name)}"
        guard = "" if required else f"context.input has {has_name(name)} && "
        if pattern.kind == "absent":
            return None if required else f"!(context.input has {has_name(name)})"
        if pattern.kind == "exact":
            return guard + f"{ref} == {cedar_value(pattern.value, kind)}"
        if pattern.kind == "oneof":
            either = " || ".join(f"{ref} == {cedar_value(v, kind)}" for v in pattern.value)
            return guard + f"({either})"
        if pattern.kind == "prefix":
            prefix = cedar_like(pattern.value + "/") + "*"
            return guard + f'({ref} like "{prefix}" && !({ref} like "*..*"))'
        if pattern.kind == "host":
            base = cedar_string(pattern.value)
            return guard + f'({ref} == {base} || {ref} like "{cedar_like(pattern.value + "/")}*")'
        if pattern.kind == "range":
            lo, hi = (cedar_value(v, kind) for v in pattern.value)
            if kind == "decimal":
                return guard + f"{ref}.greaterThanOrEqual({lo}) && {ref}.lessThanOrEqual({hi})"
            return guard + f"{ref} >= {lo} && {ref} <= {hi}"
        if pattern.kind == "subset":
            element = kind[4:] if kind.startswith("set:") else "string"
            items = ", ".join(cedar_value(v, element) for v in pattern.value)
            return guard + f"[{items}].containsAll({ref})"
        return None  # pragma: no cover

    # -- local rules -------------------------------------------------------------------------

    def to_local(self) -> dict[str, list[str]]:
        """Local allow rules per principal (the local evaluator has no principal, so each
        principal gets its own rules file). Build the set with ``format="local"`` so that
        every constraint can be written as a glob. Suggestions that keep an ask are not
        here: see :meth:`to_local_rules`."""
        return {p: kinds["allow"] for p, kinds in self.to_local_rules().items()}

    def to_local_rules(self) -> dict[str, dict[str, list[str]]]:
        """Local rules per principal: ``{"allow": [...], "ask": [...]}``, the suggestions
        that keep an ask in ``ask``."""
        rules: dict[str, dict[str, list[str]]] = {}
        for s in self.suggestions:
            alternatives: list[list[str]] = [[]]
            for name, p in s.constraints:
                globs = local_globs(p)
                if globs is None:
                    continue
                alternatives = [
                    [*a, f"{name}={local_quote(g)}"] for a in alternatives for g in globs
                ]
            kinds = rules.setdefault(s.principal, {"allow": [], "ask": []})
            target = kinds["ask" if s.ask else "allow"]
            for parts in alternatives:
                rule = f"{s.tool}({', '.join(parts)})" if parts else s.tool
                if rule not in target:
                    target.append(rule)
        return rules

    def to_local_toml(self) -> str:
        """:meth:`to_local_rules` as TOML: one ``allow`` list (and ``ask`` list, when some
        suggestions keep an ask) per principal, under a comment naming the principal (save
        each as its own rules file).

        Raises:
            PolicyError: a principal's block does not parse back to exactly its rules, or a
                rule does not parse to the exact tool it was made for (a bug: what the
                calls carried is always escaped).
        """
        out: list[str] = []
        for principal, kinds in self.to_local_rules().items():
            lines = [comment("#", principal)]
            written = {k: v for k, v in kinds.items() if v or k == "allow"}
            for kind, rules in written.items():
                lines += [f"{kind} = [", *(f"  {toml_string(r)}," for r in rules), "]"]
            block = "\n".join(lines)
            check_local(block, written, {s.tool for s in self.suggestions})
            out.extend([block, ""])
        return "\n".join(out)

    def evaluator(self, format: Literal["cedar", "local"]) -> Any:
        """An evaluator enforcing the suggestions as rendered in ``format`` (bind it to
        the registry before use; a harness does)."""
        if format == "cedar":
            # cedarpy loads only when Cedar is used (as in clearance.policy).
            from clearance.policy.cedar import CedarEvaluator

            return CedarEvaluator(self.to_cedar() or "")
        return PrincipalRules(
            {
                p: LocalEvaluator(allow=kinds["allow"], ask=kinds["ask"])
                for p, kinds in self.to_local_rules().items()
            }
        )


class PrincipalRules(Evaluator):
    """Local rules per principal (``'User::"alice"'`` → evaluator); other principals are
    denied."""

    name = "local-per-principal"

    def __init__(self, evaluators: Mapping[str, LocalEvaluator]) -> None:
        self.evaluators = dict(evaluators)

    def bind(self, catalog: ToolCatalog) -> None:
        for evaluator in self.evaluators.values():
            evaluator.bind(catalog)

    def policy_ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(i for e in self.evaluators.values() for i in e.policy_ids()))

    def evaluate(self, request: AuthzRequest) -> Verdict:
        evaluator = self.evaluators.get(str(request.principal))
        if evaluator is None:
            return Verdict("deny", message=f"no rules for {request.principal}", evaluator=self.name)
        verdict: Verdict = evaluator.evaluate(request)
        return verdict
