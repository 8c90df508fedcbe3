"""A capability set: allow / ask / deny rules over tool names and argument globs.

Rules read like ``files.read_file``, ``files.*``, ``shell.run(command=git *)`` or
``files.move_file(source=src/**, destination=src/**)``: a glob over qualified tool names,
then optional ``argument=glob`` constraints (values may be quoted: ``(command="git log, -p")``).

Globs are path-aware: ``*`` and ``?`` do not cross ``/``, ``**`` does, ``[abc]`` is a class.
A wildcard never matches a ``..`` path segment in an allow or ask rule, so
``files.write_file(path=src/**)`` does not allow ``src/../etc/passwd``.

Array arguments: an allow or ask constraint must match every element; a deny constraint
matches when any element matches. Numbers and booleans are compared as their JSON text.

Decision: deny beats ask beats allow; a call that no rule matches is denied (rule R4).
"""

from __future__ import annotations

import json
import posixpath
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from clearance.errors import RuleError
from clearance.policy.base import AuthzRequest, Verdict

if TYPE_CHECKING:
    from clearance.harness.tools import ToolRegistry

__all__ = ["LocalEvaluator", "Rule"]

RuleKind = Literal["allow", "ask", "deny"]
_TOOL_GLOB = re.compile(r"^[a-z0-9_\-*?\[\]!.]+$")
_ARG_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")
_SEPARATORS = re.compile(r"[/\\]")


def _glob_to_regex(glob: str) -> re.Pattern[str]:
    out: list[str] = []
    i = 0
    while i < len(glob):
        c = glob[i]
        if c == "*":
            if glob.startswith("**/", i):
                out.append("(?:.*/)?")  # '**/' also matches no directory at all: '**/.env'
                i += 3
                continue
            if glob.startswith("**", i):
                out.append(".*")
                i += 2
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = glob.find("]", i + 1)
            if end == -1:
                raise ValueError(f"unclosed '[' at position {i}")
            body = glob[i + 1 : end]
            if not body or body == "!":
                raise ValueError(f"empty character class at position {i}")
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end
        elif c == "]":
            raise ValueError(f"unmatched ']' at position {i}")
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out), re.DOTALL)


@dataclass(frozen=True, slots=True)
class ArgConstraint:
    name: str
    glob: str
    pattern: re.Pattern[str]
    allows_dotdot: bool


@dataclass(frozen=True, slots=True)
class Rule:
    """One parsed rule."""

    kind: RuleKind
    text: str
    tool_glob: str
    args: tuple[ArgConstraint, ...]
    line: int | None = None

    @property
    def id(self) -> str:
        return f"{self.kind}:{self.text}"

    @property
    def exact_tool(self) -> bool:
        return not any(ch in self.tool_glob for ch in "*?[")

    def matches_tool(self, qualified_name: str) -> bool:
        return fnmatchcase(qualified_name, self.tool_glob)

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
        text = value if type(value) is str else json.dumps(value, sort_keys=True)
        if c.pattern.fullmatch(text) is None:
            # A deny rule also matches the path the value names once normalized, so
            # './secrets/key' or 'a//.env' cannot slip past it (R3).
            if deny and ("/" in text or "\\" in text or text.startswith(".")):
                return c.pattern.fullmatch(_normalized(text)) is not None
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
                pattern = _glob_to_regex(glob)
                _glob_to_regex(tool_glob)
            except ValueError as exc:
                raise RuleError(source, f"bad glob {glob!r}: {exc}", path=path, line=line) from None
            # Only a real '..' segment in the glob lets a value step up ('v1..2' does not).
            args.append(ArgConstraint(name, glob, pattern, ".." in _SEPARATORS.split(glob)))
        if not args:
            raise RuleError(
                source, "empty argument list; drop the parentheses", path=path, line=line
            )
    try:
        _glob_to_regex(tool_glob)
    except ValueError as exc:
        raise RuleError(source, f"bad tool glob: {exc}", path=path, line=line) from None
    return Rule(kind, source, tool_glob, tuple(args), line)


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


class LocalEvaluator:
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
        from clearance.policy.base import AllOf

        return AllOf(self, LocalEvaluator(allow=allow))  # type: ignore[return-value]

    def bind(self, registry: ToolRegistry) -> None:
        """Check every rule against the registered tools: a rule that names no registered
        tool, or an argument that none of its tools has, can never match and is an error."""
        tools = list(registry)
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
