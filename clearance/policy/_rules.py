"""One rule of a :class:`~clearance.policy.local.LocalEvaluator`: parsing
``tool_glob(argument=glob, ...)`` text, and matching a call's tool and arguments.

The rule language (globs, numbers, arrays) is described in :mod:`clearance.policy.local`.
"""

from __future__ import annotations

import json
import math
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from clearance.errors import RuleError
from clearance.policy.globs import Glob
from clearance.provenance import origin_label, values_label

__all__ = ["ArgConstraint", "Rule", "RuleKind", "parse_rule"]

RuleKind = Literal["allow", "ask", "deny"]
_TOOL_GLOB = re.compile(r"^[a-z0-9_\-*?\[\]!.]+$")
_ARG_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*(?:\.(?:from|values_from))?$")
# What ``<argument>.from`` and ``<argument>.values_from`` can be (clearance.provenance).
_ORIGIN_LABELS = {
    "from": ("user", "tool", "made_up", "none"),
    "values_from": ("user", "tool", "made_up"),
}
_SEPARATORS = re.compile(r"[/\\]")
# A rule value that reads as a decimal number (ASCII digits only, no inf/nan/underscores).
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
# Integers past this many bits are written in hexadecimal: decimal conversion is quadratic,
# and Python refuses it past sys.get_int_max_str_digits() (640 digits at the lowest).
_MAX_DECIMAL_BITS = 2000
_MAX_RULE_DIGITS = 600  # below 2,000 bits, and below any int-to-str limit Python allows


def _number_text(value: int | float) -> str:
    """A number's canonical text (see :mod:`clearance.policy.local`): ``666.0`` -> ``666``."""
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


_MISSING: Any = object()
_NO_FACTS: Mapping[str, Any] = {}
_MADE_UP: Mapping[str, Any] = {"made_up": True}
"""The provenance of an argument no record describes: seen nowhere."""


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
    origin: str | None = None
    """``"from"`` or ``"values_from"`` for a provenance constraint (``recipient.from=tool``):
    the glob matches the argument's provenance label, not its value."""

    @property
    def argument(self) -> str:
        """The argument the constraint reads (``recipient`` for ``recipient.from``)."""
        return self.name if self.origin is None else self.name.rpartition(".")[0]


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
    id: str = field(init=False, repr=False, compare=False)
    """``kind:text``, what verdicts name the rule by (built once: every call that hits
    the rule names it)."""
    reads_provenance: bool = field(init=False, repr=False, compare=False)
    """Whether a constraint reads where an argument came from (``<arg>.from``)."""

    def __post_init__(self) -> None:
        if self.tool_pattern is None:
            object.__setattr__(self, "tool_pattern", Glob(self.tool_glob, path_aware=False))
        object.__setattr__(self, "id", f"{self.kind}:{self.text}")
        object.__setattr__(self, "reads_provenance", any(c.origin is not None for c in self.args))

    @property
    def exact_tool(self) -> bool:
        return not any(ch in self.tool_glob for ch in "*?[")

    def matches_tool(self, qualified_name: str) -> bool:
        assert self.tool_pattern is not None  # set in __post_init__
        return bool(self.tool_pattern.fullmatch(qualified_name))

    def matches_args(
        self,
        arguments: Mapping[str, Any],
        facts: Mapping[str, Any] = _NO_FACTS,
        provenance: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> bool:
        """Whether every constraint matches. With the call's canonical ``facts`` (R11): an
        allow or ask constraint never matches an argument whose fact says it reaches
        outside the root (``outside_root``; for an array, any element's), and a deny
        constraint also matches the argument's ``resolved`` form (a command whose words
        are resolved through links; for an array, any element's).
        A provenance constraint (``recipient.from=tool``) matches the label of the
        argument's record in ``provenance`` (a missing record: made up, found nowhere)."""
        deny = self.kind == "deny"
        for c in self.args:
            if c.origin is not None:
                if not self._match_origin(c, arguments, provenance):
                    return False
                continue
            value = arguments.get(c.name, _MISSING)
            if value is _MISSING:
                return False
            if facts:
                fact = facts.get(c.name)
                if fact is not None and isinstance(fact, Mapping):
                    # An array's fact holds a list per attribute (one per element): it
                    # reaches outside when any element does, and a deny matches when
                    # any element's resolved form does (the same meaning as alone).
                    outside = fact.get("outside_root")
                    if not deny and (
                        outside is True
                        or (type(outside) is list and any(o is True for o in outside))
                    ):
                        return False
                    if deny and self._matches_resolved(c, fact.get("resolved")):
                        continue
            if type(value) is str:  # the common case, inline: no list, no call
                if c.pattern.fullmatch(value):
                    if deny or c.allows_dotdot or ".." not in value:
                        continue
                    if ".." not in _SEPARATORS.split(value):
                        continue
                    return False
                # A deny rule also matches the path the value names once normalized
                # (_may_normalize, inline: false when normalizing cannot change it).
                if (
                    deny
                    and (
                        "\\" in value
                        or "//" in value
                        or "/." in value
                        or value[:1] == "."
                        or value[-1:] == "/"
                    )
                    and c.pattern.fullmatch(_normalized(value))
                ):
                    continue
                return False
            items = value if isinstance(value, list) else [value]
            if deny:
                if not any(self._match(c, item, deny) for item in items):
                    return False
            elif not items or not all(self._match(c, item, deny) for item in items):
                return False
        return True

    @classmethod
    def _matches_resolved(cls, c: ArgConstraint, resolved: Any) -> bool:
        """Whether a deny constraint matches an argument's ``resolved`` form (an array's
        fact: any element's)."""
        if isinstance(resolved, str):
            return cls._match(c, resolved, True)
        if type(resolved) is list:
            return any(isinstance(r, str) and cls._match(c, r, True) for r in resolved)
        return False

    @staticmethod
    def _match_origin(
        c: ArgConstraint,
        arguments: Mapping[str, Any],
        provenance: Mapping[str, Mapping[str, Any]] | None,
    ) -> bool:
        name = c.argument
        if name not in arguments:
            return False
        record = provenance.get(name) if provenance is not None else None
        if record is None:
            record = _MADE_UP
        label = origin_label(record) if c.origin == "from" else values_label(record)
        return bool(c.pattern.fullmatch(label))

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
            if deny and _may_normalize(text):
                return bool(c.pattern.fullmatch(_normalized(text)))
            return False
        if not deny and ".." in text and not c.allows_dotdot:
            # A wildcard must not smuggle a parent-directory step past an allow rule.
            return ".." not in _SEPARATORS.split(text)
        return True


def _may_normalize(text: str) -> bool:
    """False only when :func:`_normalized` returns a path-like ``text`` (one with a
    separator or a leading dot) unchanged, so that a second match could not differ: no
    backslash, no empty, ``.`` or ``..`` segment, no trailing slash. A string test,
    several times cheaper than the normalization it saves."""
    return "\\" in text or "//" in text or "/." in text or text[:1] == "." or text[-1:] == "/"


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
            origin = name.rpartition(".")[2] if "." in name else None
            if origin is not None:
                labels = _ORIGIN_LABELS[origin]
                if not any(pattern.fullmatch(label) for label in labels):
                    raise RuleError(
                        source,
                        f"{name} is one of {', '.join(labels)}; {glob!r} matches none",
                        path=path,
                        line=line,
                    )
                args.append(ArgConstraint(name, glob, pattern, False, origin=origin))
                continue
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
