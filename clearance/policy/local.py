"""A capability set: allow / ask / deny rules over tool names and argument globs.

Rules read like ``files.read_file``, ``files.*``, ``shell.run(command=git *)`` or
``files.move_file(source=src/**, destination=src/**)``: a glob over qualified tool names,
then optional ``argument=glob`` constraints (values may be quoted: ``(command="git log, -p")``).

Globs are path-aware: ``*`` and ``?`` do not cross ``/``, ``**`` does (``**/`` also matches
no directory at all, so ``**/.env`` matches ``.env``), ``[abc]``, ``[a-z]`` and ``[!abc]``
are classes (a class may match ``/``). Everything else is literal. In a tool glob, ``*`` and
``?`` match any character (tool names have no ``/``). A wildcard never matches a ``..`` path
segment in an allow or ask rule, so ``files.write_file(path=src/**)`` does not allow
``src/../etc/passwd``; a deny rule also matches the path the value names once normalized
(``./a//.env`` as ``a/.env``).

Globs match in time linear in the value's length, whatever the glob (a glob of many
wildcards against a long argument cannot stall the harness): see :mod:`clearance.policy.globs`.

Values: a string is matched as it is. Numbers compare as numbers: a glob that is a plain
number (``666``, ``666.0``, ``6.66e2``, ``-1``, ``.5``; read as JSON reads it) matches a
numeric argument equal to it, so ``666``, ``666.0``, ``6.66e2`` and ``6660e-1`` are one
value for every rule kind. A deny rule's number also matches an argument that is the same
number once both are read as IEEE doubles, as a JavaScript tool server reads them: past
2**53, ``12345678901234567890`` and ``12345678901234567890.0`` name one account there. A
glob with wildcards (``66*``) matches a number's canonical text: an integral number is
written as an integer (``666.0`` and ``6.66e2`` as ``666``; ``1e308`` with all its 309
digits), an integer of more than 2,000 bits in hexadecimal (``0x...``), any other float as
Python's shortest round-trip form (``0.5``, ``1e-05``, ``inf``). Booleans are not numbers:
``True`` is ``true`` and never matches a rule on ``1``, nor ``1`` a rule on ``true``.
``null`` and objects are matched as their JSON text, keys sorted, numbers inside written as
above. A string is never a number: ``"666.0"`` matches only a glob that matches that text.

Array arguments: an allow or ask constraint must match every element; a deny constraint
matches when any element matches.

Provenance: ``<argument>.from=<label>`` matches where the argument's value came from
(:mod:`clearance.provenance`): ``user`` (the user named it, or a trusted source),
``tool`` (not the user's; found in a tool result), ``made_up`` (found nowhere) or ``none``
(no value: an empty array, a boolean); ``<argument>.values_from=<label>`` matches the
values found inside its text (hosts, addresses, IBAN-like ids): ``tool`` if one came from
a tool result, else ``made_up`` if one was found nowhere, else ``user``. So
``banking.send_money(recipient.from=tool)`` in ``deny`` refuses a payment to an account
only a tool result named, and ``mail.send(body.values_from=user)`` in ``allow`` allows a
mail whose links and addresses are all the user's.

Decision: deny beats ask beats allow; a call that no rule matches is denied (rule R4).
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clearance.errors import RuleError
from clearance.facts.declared import pattern_problem
from clearance.policy._rules import ArgConstraint, Rule, RuleKind, parse_rule
from clearance.policy.base import AllOf, AuthzRequest, Evaluator, Verdict, provenance_of
from clearance.types import ToolCatalog

__all__ = ["ArgConstraint", "LocalEvaluator", "Rule", "RuleKind", "parse_rule"]


class LocalEvaluator(Evaluator):
    """Allow / ask / deny rules over tool names and argument globs (see the module doc).

    Args:
        allow: rules that allow a call.
        ask: rules that make a call need approval.
        deny: rules that deny a call; they beat ``ask`` and ``allow``.

    Raises:
        RuleError: a rule is malformed; or, at ``bind``, it names a tool that is not
            registered or an argument the tool's schema does not have.
    """

    name = "local"

    def __init__(
        self,
        allow: Iterable[str] = (),
        ask: Iterable[str] = (),
        deny: Iterable[str] = (),
    ) -> None:
        rules: list[Rule] = []
        for kind, texts in (("allow", allow), ("ask", ask), ("deny", deny)):
            if isinstance(texts, str):
                raise RuleError(texts, f"{kind} must be a list of rules, not a string")
            rules.extend(parse_rule(kind, t) for t in texts)  # type: ignore[arg-type]
        self._setup(rules, None)

    @classmethod
    def from_rules(cls, rules: Iterable[Rule], *, path: str | None = None) -> LocalEvaluator:
        """An evaluator of already parsed rules (``path``: the file they came from, named
        in errors)."""
        evaluator = cls.__new__(cls)
        evaluator._setup(list(rules), path)
        return evaluator

    def _setup(self, rules: list[Rule], path: str | None) -> None:
        self.rules: tuple[Rule, ...] = tuple(rules)
        self.path = path
        self._exact: dict[str, list[Rule]] = {}
        self._globbed: list[Rule] = []
        for rule in self.rules:
            if rule.exact_tool:
                self._exact.setdefault(rule.tool_glob, []).append(rule)
            else:
                self._globbed.append(rule)
        self._by_tool: dict[str, tuple[_Step, ...]] = {}

    @classmethod
    def from_file(cls, path: str | Path) -> LocalEvaluator:
        """Load rules from a TOML file with ``allow``, ``ask`` and ``deny`` lists."""
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise RuleError(
                str(path), f"cannot read the rules file: {exc.strerror}", path=str(path)
            ) from None
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise RuleError(str(path), f"not valid TOML: {exc}", path=str(path)) from None
        return cls.from_mapping(data, path=str(path), source=text)

    @classmethod
    def from_mapping(
        cls, data: Mapping[str, Any], *, path: str | None = None, source: str | None = None
    ) -> LocalEvaluator:
        """Load rules from a mapping like ``{"allow": [...], "ask": [...], "deny": [...]}``."""
        unknown = set(data) - {"allow", "ask", "deny"}
        if unknown:
            raise RuleError(
                ", ".join(sorted(unknown)), "unknown key(s); expected allow, ask, deny", path=path
            )
        rules: list[Rule] = []
        for kind in ("allow", "ask", "deny"):
            texts = data.get(kind, [])
            if not isinstance(texts, list):
                raise RuleError(kind, f"{kind} must be a list of rule strings", path=path)
            for text in texts:
                line = _line_of(source, text) if source and isinstance(text, str) else None
                rules.append(parse_rule(kind, text, path=path, line=line))
        return cls.from_rules(rules, path=path)

    def narrowed(self, allow: Iterable[str]) -> LocalEvaluator:
        """A copy that also requires one of ``allow`` (session capabilities only narrow)."""
        return AllOf(self, LocalEvaluator(allow=allow))  # type: ignore[return-value]

    def policy_ids(self) -> tuple[str, ...]:
        """Every rule's id (``allow:files.*``), once each, in rule order."""
        return tuple(dict.fromkeys(rule.id for rule in self.rules))

    def bind(self, catalog: ToolCatalog) -> None:
        """Check every rule against the registered tools: a rule that names no registered
        tool, or an argument that none of its tools has, can never match and is an error."""
        tools = list(catalog)
        for rule in self.rules:
            hits = [t for t in tools if rule.matches_tool(t.qualified_name)]
            if not hits:
                raise RuleError(
                    rule.text, "no registered tool matches it", path=self.path, line=rule.line
                )
            for c in rule.args:
                if not any(_has_argument(t.input_schema, c.argument) for t in hits):
                    raise RuleError(
                        rule.text,
                        f"argument {c.argument!r} is not in the input schema of "
                        + ", ".join(t.qualified_name for t in hits[:3]),
                        path=self.path,
                        line=rule.line,
                    )
                if c.origin is not None:
                    continue
                problem = _canonical_spelling_problem(hits, c.name, c.glob)
                if problem is not None:
                    raise RuleError(rule.text, problem, path=self.path, line=rule.line)

    def _plan(self, qualified_name: str) -> tuple[_Step, ...]:
        """The rules that apply to one tool, by effect, deny first (cached per tool)."""
        plan = self._by_tool.get(qualified_name)
        if plan is None:
            rules = self._exact.get(qualified_name, []) + [
                r for r in self._globbed if r.matches_tool(qualified_name)
            ]
            steps = []
            for kind in ("deny", "ask", "allow"):
                of_kind = [r for r in rules if r.kind == kind]
                if of_kind:
                    plain = tuple(r.id for r in of_kind if not r.args)
                    steps.append(
                        _Step(
                            kind,
                            tuple(r for r in of_kind if r.args),
                            plain,
                            Verdict(kind, plain, evaluator="local") if plain else None,
                        )
                    )
            plan = tuple(steps)
            if len(self._by_tool) < 100_000:
                self._by_tool[qualified_name] = plan
        return plan

    def evaluate(self, request: AuthzRequest) -> Verdict:
        args = request.arguments
        facts = request.facts
        plan = self._by_tool.get(request.tool.qualified_name)
        if plan is None:
            plan = self._plan(request.tool.qualified_name)
        provenance = None
        for step in plan:
            if not step.conditional:
                if step.verdict is not None:
                    return step.verdict
                continue
            hits = step.plain
            for rule in step.conditional:
                if rule.reads_provenance and provenance is None:
                    provenance = provenance_of(request)
                if rule.matches_args(args, facts, provenance):
                    hits += (rule.id,)
            if hits:
                verdict = step.verdicts.get(hits)
                if verdict is None:
                    verdict = Verdict(step.kind, hits, evaluator="local")
                    if len(step.verdicts) < 1024:
                        step.verdicts[hits] = verdict
                return verdict
            if step.verdict is not None:
                return step.verdict
        return Verdict(
            "deny",
            (),
            evaluator="local",
            message=f"no rule allows {request.tool.qualified_name} with these arguments",
        )


@dataclass(frozen=True, slots=True)
class _Step:
    kind: RuleKind
    conditional: tuple[Rule, ...]
    plain: tuple[str, ...]
    verdict: Verdict | None
    """The verdict when only the unconditional rules hit (shared, immutable)."""
    verdicts: dict[tuple[str, ...], Verdict] = field(default_factory=dict)
    """Verdicts already built, by the ids that hit (verdicts are immutable, so shared)."""


def _canonical_spelling_problem(tools: list[Any], name: str, glob: str) -> str | None:
    """Why ``glob`` can never match ``name``'s canonical value on one of ``tools`` (R11):
    such a rule would be silently dead, so it is an error at bind, as a Cedar policy
    naming an unknown attribute is."""
    for tool in tools:
        for fact in tool.declared_facts:
            if fact.field == name:
                problem = pattern_problem(fact.kind, glob)
                if problem is not None:
                    return f"argument {name!r} of {tool.qualified_name} is canonical: {problem}"
    return None


def _has_argument(schema: Mapping[str, Any], name: str) -> bool:
    props = schema.get("properties")
    if isinstance(props, Mapping) and name in props:
        return True
    return (
        bool(schema.get("additionalProperties", True) not in (False, None))
        and "properties" not in schema
    )


def _line_of(source: str, text: str) -> int | None:
    for number, line in enumerate(source.splitlines(), 1):
        if text in line:
            return number
    return None
