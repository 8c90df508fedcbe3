"""Reading Cedar text into what the engine holds: policies located in their sources, scopes
and ``PolicyInfo`` s from Cedar's policy tree (PST), schemas, formatting, error messages.

Cedar numbers policies by position over the joined sources (``policy0``, ``policy1``, ...);
:func:`split_policies` finds where each one starts so that a parse error, a validation
problem and ``PolicyInfo`` can name a file and a line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

import cedarpy
from cedarpy import pst

from clearance.errors import ConfigError
from clearance.policy.cedar._locate import Position, SourceLines, position_in, syntax_span
from clearance.policy.cedar._values import (
    CedarError,
    EntityRef,
    PolicyInfo,
    PolicyProblem,
    PolicySources,
    ScopeConstraint,
)

__all__ = [
    "EMPTY_ANNOTATIONS",
    "SCHEMA_DOES_NOT_PARSE",
    "Chunk",
    "format_policies",
    "normalize_sources",
    "parse_error",
    "parse_problems",
    "parse_schema",
    "policy_infos",
    "scope_of",
    "split_policies",
]

EMPTY_ANNOTATIONS: Mapping[str, str] = MappingProxyType({})

SCHEMA_DOES_NOT_PARSE = "the Cedar schema does not parse"
"""How :func:`parse_schema`'s refusal starts."""

# Cedar has string literals (with backslash escapes) and `//` line comments, nothing else that
# can hide a `;`. A policy ends at the first `;` outside those.
_TOKEN_RE = re.compile(r'"(?:[^"\\]|\\.)*"?|//[^\n]*|;', re.DOTALL)
_TRIVIA_RE = re.compile(r"(?:\s+|//[^\n]*)*")
_ID_ANNOTATION_RE = re.compile(r'@id\s*\(\s*"((?:[^"\\]|\\.)*)"\s*\)')


@dataclass(frozen=True, slots=True)
class Chunk:
    """One policy's source text and where it starts."""

    path: str | None
    line: int
    text: str
    column: int = 1
    """The 1-based column the policy starts at (another policy may end before it)."""


def split_policies(path: str | None, text: str) -> list[Chunk]:
    """Split one source into its policies' texts, each with the line it starts on."""
    chunks: list[Chunk] = []
    start = _TRIVIA_RE.match(text, 0)
    pos = start.end() if start else 0
    line, last = 1, 0
    for m in _TOKEN_RE.finditer(text, pos):
        if m.group() != ";" or m.start() < pos:
            continue
        line += text.count("\n", last, pos)
        last = pos
        chunks.append(Chunk(path, line, text[pos : m.end()], _column(text, pos)))
        nxt = _TRIVIA_RE.match(text, m.end())
        pos = nxt.end() if nxt else m.end()
    if pos < len(text):
        # Text after the last `;` (a policy missing its `;`): Cedar will reject it; keep it so
        # the parse error can be pinned to its line.
        line += text.count("\n", last, pos)
        chunks.append(Chunk(path, line, text[pos:], _column(text, pos)))
    return chunks


def _column(text: str, offset: int) -> int:
    return offset - text.rfind("\n", 0, offset)


def normalize_sources(policies: PolicySources) -> list[tuple[str | None, str]]:
    if isinstance(policies, str):
        return [(None, policies)]
    out: list[tuple[str | None, str]] = []
    for item in policies:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], str)):
            raise TypeError("policies must be Cedar text or a sequence of (path, text) pairs")
        out.append((str(item[0]), item[1]))
    return out


def parse_problems(
    chunks: list[Chunk], sources: Mapping[str | None, str] | None = None
) -> list[PolicyProblem]:
    """Parse each policy alone to find which ones Cedar rejects (only on the error path).

    Each problem is placed at the error itself (line and column, see
    :mod:`clearance.policy.cedar._locate`), with a code frame when ``sources`` (the texts by
    path) are given; a hint is added where the mistake is a common one."""
    lines = SourceLines(sources or {})
    problems: list[PolicyProblem] = []
    for index, chunk in enumerate(chunks):
        message = _parse_error(chunk.text)
        if message is None:
            continue
        m = _ID_ANNOTATION_RE.search(chunk.text)
        cedar_id = f"policy{index}"
        span = syntax_span(chunk.text, message, _parse_error)
        position = (
            position_in(chunk.text, span[0], line=chunk.line, column=chunk.column, width=span[1])
            if span is not None
            else Position(chunk.line, chunk.column)
        )
        problems.append(
            PolicyProblem(
                message=message + _syntax_hint(chunk.text, span),
                policy_id=m.group(1) if m else cedar_id,
                path=chunk.path,
                line=position.line,
                cedar_id=cedar_id,
                column=position.column,
                frame=lines.frame(chunk.path, position),
            )
        )
    return problems


def _parse_error(text: str) -> str | None:
    try:
        cedarpy.PolicySet.from_str(text)
    except ValueError as exc:
        return str(exc)
    return None


_EFFECT_AT_END = re.compile(r"(?:permit|forbid)$")


def _syntax_hint(text: str, span: tuple[int, int] | None) -> str:
    """A hint for the syntax mistake at ``span``, when it is a common one: a policy that
    goes on where the one before it should have ended (its ``;`` is missing)."""
    if span is None:
        return ""
    before = text[: span[0]].rstrip()
    effect = _EFFECT_AT_END.search(before)
    if text.startswith("@", span[0]):
        previous = before
    elif effect is not None:
        previous = before[: effect.start()].rstrip()
    else:
        return ""
    if previous.endswith((")", "}")):
        return "; is the `;` ending the policy before it missing?"
    return ""


def _entity_ref(e: pst.EntityUid) -> EntityRef:
    return EntityRef(str(e.type), e.id)


def _resolve(
    entity: pst.EntityUid | pst.Slot, values: Mapping[str, pst.EntityUid]
) -> pst.EntityUid | pst.Slot:
    if isinstance(entity, pst.Slot) and entity.name in values:
        return values[entity.name]
    return entity


def scope_of(constraint: Any, values: Mapping[str, pst.EntityUid]) -> ScopeConstraint:
    """Translate a PST scope constraint, filling template slots from ``values``."""
    if isinstance(constraint, pst.ScopeAny):
        return ScopeConstraint("any")
    if isinstance(constraint, pst.ActionEq):
        return ScopeConstraint("==", (_entity_ref(constraint.entity),))
    if isinstance(constraint, pst.ActionIn):
        return ScopeConstraint("in", tuple(_entity_ref(e) for e in constraint.entities))
    if isinstance(constraint, pst.ScopeIs):
        return ScopeConstraint("is", entity_type=str(constraint.entity_type))
    if isinstance(constraint, pst.ScopeEq | pst.ScopeIn | pst.ScopeIsIn):
        op: Literal["==", "in", "is in"] = (
            "=="
            if isinstance(constraint, pst.ScopeEq)
            else "in"
            if isinstance(constraint, pst.ScopeIn)
            else "is in"
        )
        entity_type = str(constraint.entity_type) if isinstance(constraint, pst.ScopeIsIn) else None
        target = _resolve(constraint.entity, values)
        if isinstance(target, pst.Slot):
            return ScopeConstraint(op, entity_type=entity_type, slot=f"?{target.name}")
        return ScopeConstraint(op, (_entity_ref(target),), entity_type=entity_type)
    # A constraint kind newer than this code: describe it as unconstrained, which only makes
    # the index include the policy more often (never wrongly exclude it).
    return ScopeConstraint("any")


def policy_infos(tree: pst.PolicySet, chunks: Sequence[Chunk]) -> dict[str, PolicyInfo]:
    """Every policy, template and link of ``tree`` by Cedar id, in source order (``policy0``,
    ``policy1``, ..., links last), each located in ``chunks`` when they line up with it."""
    located = len(chunks) == len(tree.static_policies) + len(tree.templates)

    def where(policy_id: str) -> tuple[str | None, int | None, str | None, int | None]:
        if located and policy_id.startswith("policy") and policy_id[6:].isdigit():
            index = int(policy_id[6:])
            if index < len(chunks):
                chunk = chunks[index]
                return chunk.path, chunk.line, chunk.text, chunk.column
        return None, None, None, None

    def info(
        policy_id: str,
        node: pst.Template,
        kind: Literal["static", "template", "link"],
        values: Mapping[str, pst.EntityUid],
        template_id: str | None = None,
    ) -> PolicyInfo:
        path, line, text, column = where(template_id or policy_id)
        return PolicyInfo(
            id=policy_id,
            effect=node.effect,
            kind=kind,
            annotations=MappingProxyType(dict(node.annotations)) or EMPTY_ANNOTATIONS,
            principal=scope_of(node.principal, values),
            action=scope_of(node.action, values),
            resource=scope_of(node.resource, values),
            conditions=len(node.clauses),
            path=path,
            line=line,
            template_id=template_id,
            text=text,
            column=column,
        )

    plain: dict[str, PolicyInfo] = {}
    for policy_id, node in (*tree.static_policies.items(), *tree.templates.items()):
        kind: Literal["static", "template"] = (
            "template" if policy_id in tree.templates else "static"
        )
        plain[policy_id] = info(policy_id, node, kind, {})
    # Source order (policy0, policy1, ...), whatever order the PST maps come in.
    infos = {policy_id: plain[policy_id] for policy_id in sorted(plain, key=_positional_key)}
    for link in tree.template_links:
        template = tree.templates[link.template_id]
        values = {str(slot): uid for slot, uid in link.values.items()}
        infos[link.new_id] = info(link.new_id, template, "link", values, link.template_id)
    return infos


def _positional_key(policy_id: str) -> tuple[int, int, str]:
    if policy_id.startswith("policy") and policy_id[6:].isdigit():
        return (0, int(policy_id[6:]), "")
    return (1, 0, policy_id)


def parse_schema(schema: str | Mapping[str, Any]) -> Any:
    """A Cedar schema handle from Cedar schema text, JSON text or a dict.

    Raises:
        ConfigError: the schema does not parse.
    """
    try:
        if isinstance(schema, Mapping):
            return cedarpy.Schema.from_json_str(json.dumps(schema))
        if schema.lstrip().startswith("{"):
            return cedarpy.Schema.from_json_str(schema)
        return cedarpy.Schema.from_str(schema)
    except ValueError as exc:
        raise ConfigError(f"{SCHEMA_DOES_NOT_PARSE}: {exc}") from exc


def format_policies(text: str) -> str:
    """Cedar's own formatting of policy text (comments kept).

    Raises:
        ValueError: the text does not parse, or formatting would change the policies it
            parses to (the result is checked against the original).
    """
    formatted: str = cedarpy.format_policies(text)
    if cedarpy.policies_to_json_str(formatted) != cedarpy.policies_to_json_str(text):
        raise ValueError("formatting would change the policies; left as is")
    return formatted


_ERROR_PREFIX = "error while evaluating policy `"
_ERROR_RE = re.compile(r"error while evaluating policy `(.*?)`: (.*)", re.DOTALL)


def parse_error(text: str, policy_ids: Collection[str]) -> CedarError:
    """One of Cedar's evaluation error messages as a :class:`CedarError`, tied to the
    policy it names when that is one of ``policy_ids``."""
    m = _ERROR_RE.match(text)
    if m and m.group(1) in policy_ids:
        return CedarError(m.group(1), m.group(2))
    if text.startswith(_ERROR_PREFIX):
        # A link id may itself contain "`: "; find the known id the message names.
        rest = text[len(_ERROR_PREFIX) :]
        for policy_id in policy_ids:
            if rest.startswith(f"{policy_id}`: "):
                return CedarError(policy_id, rest[len(policy_id) + 3 :])
    return CedarError(None, text)
