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

Decision: deny beats ask beats allow; a call that no rule matches is denied (rule R4).
"""

from __future__ import annotations

import json
import math
import posixpath
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from clearance.errors import RuleError
from clearance.policy.base import AllOf, AuthzRequest, Evaluator, Verdict
from clearance.policy.globs import Glob
from clearance.types import ToolCatalog

__all__ = ["LocalEvaluator", "Rule"]

RuleKind = Literal["allow", "ask", "deny"]
_TOOL_GLOB = re.compile(r"^[a-z0-9_\-*?\[\]!.]+$")
_ARG_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")
_SEPARATORS = re.compile(r"[/\\]")
# A rule value that reads as a decimal number (ASCII digits only, no inf/nan/underscores).
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
# Integers past this many bits are written in hexadecimal: decimal conversion is quadratic,
# and Python refuses it past sys.get_int_max_str_digits() (640 digits at the lowest).
_MAX_DECIMAL_BITS = 2000
_MAX_RULE_DIGITS = 600  # below 2,000 bits, and below any int-to-str limit Python allows


def _number_text(value: int | float) -> str:
    """A number's canonical text (see the module doc): ``666.0`` -> ``666``."""
    if isinstance(value, float):
        if not value.is_integer():  # also inf and nan
            return repr(value)
        value = int(value)  # at most 1024 bits: 1e308 has 309 digits
    if value.bit_length() > _MAX_DECIMAL_BITS:
        return hex(value)
    return str(value)


def _json_text(value: Any) -> str:
    """A non-string, non-number value as JSON text, its numbers canonical."""
    return json.dumps(_canonical_numbers(value), sort_keys=True)


def _canonical_numbers(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if type(value) is int and value.bit_length() > _MAX_DECIMAL_BITS:
        return hex(value)
    if isinstance(value, Mapping):
        return {k: _canonical_numbers(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical_numbers(v) for v in value]
    return value


def _rule_number(glob: str) -> int | float | None:
    """The number a rule value stands for, or ``None`` when it is not a plain number.

    Raises:
        ValueError: a whole number of more than ``_MAX_RULE_DIGITS`` digits.
    """
    if _NUMBER.fullmatch(glob) is None:
        return None
    if any(ch in glob for ch in ".eE"):
        return float(glob)  # as json.loads reads it: '6.66e2' is the float 666.0
    if len(glob.lstrip("+-")) > _MAX_RULE_DIGITS:
        raise ValueError(f"a whole number in a rule has at most {_MAX_RULE_DIGITS} digits")
    return int(glob)


def _as_double(number: int | float) -> float:
    """``number`` as the nearest IEEE double (an integer past its range as an infinity)."""
    try:
        return float(number)
    except OverflowError:
        return math.inf if number > 0 else -math.inf


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class ArgConstraint:
    name: str
    glob: str
    pattern: Glob
    allows_dotdot: bool
    number: int | float | None = None
    """The glob read as a number, when it is one: numeric arguments compare to it."""
    double: float | None = None
    """``number`` as an IEEE double (what a deny rule also compares)."""


@dataclass(frozen=True, slots=True)
class Rule:
    """One parsed rule."""

    kind: RuleKind
    text: str
    tool_glob: str
    args: tuple[ArgConstraint, ...]
    line: int | None = None
    tool_pattern: Glob | None = field(default=None, repr=False, compare=False)
    """The compiled tool glob (built from ``tool_glob`` when not given)."""

    def __post_init__(self) -> None:
        if self.tool_pattern is None:
            object.__setattr__(self, "tool_pattern", Glob(self.tool_glob, path_aware=False))

    @property
    def id(self) -> str:
        return f"{self.kind}:{self.text}"

    @property
    def exact_tool(self) -> bool:
        return not any(ch in self.tool_glob for ch in "*?[")

    def matches_tool(self, qualified_name: str) -> bool:
        assert self.tool_pattern is not None  # set in __post_init__
        return bool(self.tool_pattern.fullmatch(qualified_name))

    def matches_args(self, arguments: Mapping[str, Any]) -> bool:
        deny = self.kind == "deny"
        for c in self.args:
            value = arguments.get(c.name, _MISSING)
            if value is _MISSING:
                return False
            if type(value) is str:  # the common case, without building a list
                if not self._match(c, value, deny):
                    return False
                continue
            items = value if isinstance(value, list) else [value]
            if deny:
                if not any(self._match(c, item, deny) for item in items):
                    return False
            elif not items or not all(self._match(c, item, deny) for item in items):
                return False
        return True

    @staticmethod
    def _match(c: ArgConstraint, value: Any, deny: bool) -> bool:
        if type(value) is str:
            text = value
        elif _is_number(value):
            if c.number is not None:
                # 666 == 666.0 (exact): one value, however spelled. A deny rule also
                # catches what a tool reading doubles would take for its number (R3).
                return bool(value == c.number) or (deny and _as_double(value) == c.double)
            text = _number_text(value)
        else:
            text = _json_text(value)
        if not c.pattern.fullmatch(text):
            # A deny rule also matches the path the value names once normalized, so
            # './secrets/key' or 'a//.env' cannot slip past it (R3).
            if deny and ("/" in text or "\\" in text or text.startswith(".")):
                return bool(c.pattern.fullmatch(_normalized(text)))
            return False
        if not deny and ".." in text and not c.allows_dotdot:
            # A wildcard must not smuggle a parent-directory step past an allow rule.
            return ".." not in _SEPARATORS.split(text)
        return True


_MISSING: Any = object()


def _normalized(text: str) -> str:
    """A path value as the file system would read it: backslashes as slashes, no empty or
    '.' segments, parent steps folded (a leading '../' stays)."""
    folded = posixpath.normpath(text.replace("\\", "/"))
    return folded[2:] if folded.startswith("./") else folded


def parse_rule(
    kind: RuleKind, text: str, *, path: str | None = None, line: int | None = None
) -> Rule:
    """Parse one rule; raise ``RuleError`` naming what is wrong."""
    if not isinstance(text, str) or not text.strip():
        raise RuleError(str(text), "a rule must be a non-empty string", path=path, line=line)
    source = text.strip()
    tool_glob, paren, rest = source.partition("(")
    tool_glob = tool_glob.strip()
    if not _TOOL_GLOB.match(tool_glob):
        raise RuleError(source, f"{tool_glob!r} is not a tool name or glob", path=path, line=line)
    if "." not in tool_glob and tool_glob not in ("*", "**"):
        raise RuleError(
            source,
            "name the tool as 'namespace.name' (or a glob like 'files.*')",
            path=path,
            line=line,
        )
    try:
        tool_pattern = Glob(tool_glob, path_aware=False)
    except ValueError as exc:
        raise RuleError(source, f"bad tool glob: {exc}", path=path, line=line) from None
    args: list[ArgConstraint] = []
    if paren:
        if not rest.endswith(")"):
            raise RuleError(source, "missing ')' at the end", path=path, line=line)
        for name, glob in _split_args(source, rest[:-1], path, line):
            if any(a.name == name for a in args):
                raise RuleError(
                    source, f"argument {name!r} is constrained twice", path=path, line=line
                )
            try:
                pattern = Glob(glob)
                number = _rule_number(glob)
            except ValueError as exc:
                raise RuleError(source, f"bad glob {glob!r}: {exc}", path=path, line=line) from None
            # Only a real '..' segment in the glob lets a value step up ('v1..2' does not).
            dotdot = ".." in _SEPARATORS.split(glob)
            double = None if number is None else _as_double(number)
            args.append(ArgConstraint(name, glob, pattern, dotdot, number, double))
        if not args:
            raise RuleError(
                source, "empty argument list; drop the parentheses", path=path, line=line
            )
    return Rule(kind, source, tool_glob, tuple(args), line, tool_pattern)


def _split_args(
    source: str, body: str, path: str | None, line: int | None
) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    i, n = 0, len(body)
    while i < n:
        while i < n and body[i] in " \t":
            i += 1
        eq = body.find("=", i)
        if eq == -1:
            raise RuleError(source, f"expected name=glob in {body[i:]!r}", path=path, line=line)
        name = body[i:eq].strip()
        if not _ARG_NAME.match(name):
            raise RuleError(source, f"{name!r} is not an argument name", path=path, line=line)
        i = eq + 1
        while i < n and body[i] == " ":
            i += 1
        if i < n and body[i] in "\"'":
            quote = body[i]
            end = body.find(quote, i + 1)
            if end == -1:
                raise RuleError(
                    source, f"unclosed quote in the value of {name!r}", path=path, line=line
                )
            value = body[i + 1 : end]
            i = end + 1
            while i < n and body[i] == " ":
                i += 1
            if i < n and body[i] != ",":
                raise RuleError(
                    source,
                    f"unexpected text after the quoted value of {name!r}",
                    path=path,
                    line=line,
                )
        else:
            comma = body.find(",", i)
            end = n if comma == -1 else comma
            value = body[i:end].strip()
            i = end
        if value == "":
            raise RuleError(source, f"empty glob for {name!r}", path=path, line=line)
        pairs.append((name, value))
        if i < n and body[i] == ",":
            i += 1
    return pairs


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
        *,
        _rules: list[Rule] | None = None,
        _path: str | None = None,
    ) -> None:
        if _rules is None:
            _rules = []
            for kind, texts in (("allow", allow), ("ask", ask), ("deny", deny)):
                if isinstance(texts, str):
                    raise RuleError(texts, f"{kind} must be a list of rules, not a string")
                _rules.extend(parse_rule(kind, t) for t in texts)  # type: ignore[arg-type]
        self.rules: tuple[Rule, ...] = tuple(_rules)
        self.path = _path
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
        return cls(_rules=rules, _path=path)

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
                if not any(_has_argument(t.input_schema, c.name) for t in hits):
                    raise RuleError(
                        rule.text,
                        f"argument {c.name!r} is not in the input schema of "
                        + ", ".join(t.qualified_name for t in hits[:3]),
                        path=self.path,
                        line=rule.line,
                    )

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
        for step in self._plan(request.tool.qualified_name):
            if not step.conditional:
                if step.verdict is not None:
                    return step.verdict
                continue
            hits = step.plain
            for rule in step.conditional:
                if rule.matches_args(args):
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


def _has_argument(schema: Mapping[str, Any], name: str) -> bool:
    props = schema.get("properties")
    if isinstance(props, Mapping) and name in props:
        return True
    return (
        bool(schema.get("additionalProperties", False) not in (False, None))
        and "properties" not in schema
    )


def _line_of(source: str, text: str) -> int | None:
    for number, line in enumerate(source.splitlines(), 1):
        if text in line:
            return number
    return None
