"""Checking a policy set against the schema generated from the tools, before it is used.

Cedar's strict validation (cut per group of tool actions, so that a thousand tools do not
make each policy cost milliseconds), plus what Cedar cannot know: a policy naming a tool,
namespace or action that is not registered. Every problem is located (file, line of the
offending name) and, for a misspelling, carries a hint; all come back in one
:class:`~clearance.errors.PolicyError`, so that no policy is ever silently dead.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import cedarpy
from cedarpy import pst

from clearance.errors import PolicyError
from clearance.policy.cedar._locate import Position, SourceLines, name_span, position_in
from clearance.policy.cedar._values import PolicyInfo, PolicyProblem
from clearance.policy.cedar.engine import CedarEngine
from clearance.policy.cedar.schema import (
    DECIMAL,
    NAMESPACE_TYPE,
    TOOL_TYPE,
    RecordType,
    SchemaModel,
    SetType,
)
from clearance.types import ToolLike

__all__ = ["ANNOTATIONS", "check_policies", "policy_tree"]


def check_policies(
    engine: CedarEngine,
    policies: Sequence[tuple[str, str]],
    model: SchemaModel,
    tools: Sequence[ToolLike],
) -> dict[str, pst.Template]:
    """Validate every policy against the generated schema, and check the tools, namespaces
    and actions it names; return each policy's PST by Cedar id.

    Raises:
        PolicyError: naming the first problem (by file and line); ``problems`` lists all,
            each once, placed at the offending name (line, column, code frame) and, for a
            misspelled name or a type mistake, with a hint.
    """
    tree = policy_tree(engine, policies)
    uids = {policy_id: pst.entity_uids(node) for policy_id, node in tree.items()}
    lines = SourceLines(dict(policies))
    naming = _naming_problems(engine, uids, model, tools, lines)
    # An unknown action is ours to report, with its hint: Cedar says it twice over
    # ("unrecognized action" and "unable to find an applicable action").
    renamed = {(p["policy_id"], str(p["name"])) for p in naming}
    problems: list[dict[str, object]] = []
    for problem in _validate(engine, uids, model):
        located = _locate(problem, engine, model, lines)
        message = str(located["message"])
        if any(pid == located["policy_id"] and name in message for pid, name in renamed):
            continue
        problems.append(located)
    for named in naming:
        del named["name"]
        problems.append(named)
    problems.extend(_annotation_problems(engine, lines))
    # "No applicable action" follows from another problem in the scope (an unknown action
    # or entity type): said once, by that problem.
    explained = {p["policy_id"] for p in problems if not str(p["message"]).startswith(_NO_ACTION)}
    problems = [
        p
        for p in problems
        if not (str(p["message"]).startswith(_NO_ACTION) and p["policy_id"] in explained)
    ]
    problems = _once(problems)
    if problems:
        problems.sort(key=_where)
        first = problems[0]
        raise PolicyError(
            f"policy {first['policy_id']}: {first['message']}",
            path=_opt_str(first["path"]),
            line=_opt_int(first["line"]),
            column=_opt_int(first["column"]),
            policy_id=_opt_str(first["policy_id"]),
            problems=problems,
        )
    return tree


_NO_ACTION = "unable to find an applicable action"


def _once(problems: list[dict[str, object]]) -> list[dict[str, object]]:
    """Each problem once (Cedar reports some type errors twice for one expression)."""
    seen: set[tuple[object, ...]] = set()
    out = []
    for problem in problems:
        key = (problem["path"], problem["line"], problem["policy_id"], problem["message"])
        if key not in seen:
            seen.add(key)
            out.append(problem)
    return out


def _where(problem: Mapping[str, object]) -> tuple[str, int, int]:
    line, column = problem.get("line"), problem.get("column")
    return (
        str(problem.get("path") or ""),
        line if isinstance(line, int) else 0,
        column if isinstance(column, int) else 0,
    )


def _validate(
    engine: CedarEngine, uids: Mapping[str, frozenset[pst.EntityUid]], model: SchemaModel
) -> list[PolicyProblem]:
    """Cedar's strict validation of every policy against the generated schema.

    Validating against a schema with a thousand tool actions costs Cedar milliseconds per
    policy, so the policies are grouped by the tool actions their scope can apply to and each
    group is validated against a schema cut down to those actions (plus the action groups and
    the actions the group's policies name). A policy's validation depends only on those:
    the request types its scope admits and the names it uses, so the problems are the same.
    """
    infos = [i for i in engine.policies if i.kind != "link"]
    if not infos:
        return []
    if any(i.text is None for i in infos):
        return list(engine.validate(model.json))
    body = model.json[model.namespace]
    actions: Mapping[str, Any] = body["actions"]
    action_type = model.action_type
    groups = {name for name, decl in actions.items() if "appliesTo" not in decl}
    members: dict[str, set[str]] = {}
    for name, decl in actions.items():
        for ref in decl.get("memberOf", ()):
            members.setdefault(ref["id"], set()).add(name)
    by_key: dict[frozenset[str] | None, list[PolicyInfo]] = {}
    for info in infos:
        key: frozenset[str] | None = None
        if info.action.op != "any":
            applicable: set[str] = set()
            for entity in info.action.entities:
                if entity.type != action_type:
                    continue
                if entity.id in groups and info.action.op == "in":
                    applicable |= members.get(entity.id, set())
                elif entity.id in actions:
                    applicable.add(entity.id)
            key = frozenset(applicable)
        by_key.setdefault(key, []).append(info)
    if len(by_key) == 1 and None in by_key:
        return list(engine.validate(model.json))

    # Each tool's own common types (its input, facts and provenance records), by the tool
    # action whose context names them: a group's schema keeps only its own tools' (keeping
    # every tool's made validating N groups cost N x N).
    owners: dict[str, set[str]] = {}
    for name, decl in actions.items():
        context = (decl.get("appliesTo") or {}).get("context") or {}
        for attribute in (context.get("attributes") or {}).values():
            type_name = attribute.get("type") if isinstance(attribute, Mapping) else None
            if isinstance(type_name, str) and type_name in body["commonTypes"]:
                owners.setdefault(type_name, set()).add(name)
    # A type that one tool alone names is that tool's; one named by several (Session,
    # ToolContext) or by none is kept in every group's schema.
    types_of: dict[str, list[str]] = {}
    for type_name, names in owners.items():
        if len(names) == 1:
            types_of.setdefault(next(iter(names)), []).append(type_name)
    owned = {t for types in types_of.values() for t in types}
    shared = [n for n in body["commonTypes"] if n not in owned]
    problems: list[PolicyProblem] = []
    for key, group in by_key.items():
        if key is None:
            schema: Mapping[str, Any] = model.json
        else:
            named = {
                uid.id
                for info in group
                for uid in uids.get(info.id, ())
                if str(uid.type) == action_type
            }
            cut: dict[str, Any] = {name: actions[name] for name in groups}
            for name in named - key:
                if name in actions and name not in cut:
                    cut[name] = {k: v for k, v in actions[name].items() if k != "appliesTo"}
            cut.update((name, actions[name]) for name in key)
            common = {name: body["commonTypes"][name] for name in shared}
            common.update(
                (name, body["commonTypes"][name]) for tool in key for name in types_of.get(tool, ())
            )
            schema = {
                model.namespace: {
                    "entityTypes": body["entityTypes"],
                    "commonTypes": common,
                    "actions": cut,
                }
            }
        schema_text = json.dumps(schema)
        # Cedar's validation of one call grows faster than its policies: a large group is
        # validated in chunks (a policy's validation does not depend on the others).
        for start in range(0, len(group), _CHUNK):
            chunk = group[start : start + _CHUNK]
            result = cedarpy.validate_policies("\n".join(str(i.text) for i in chunk), schema_text)
            problems.extend(_problems_of(result.errors, chunk))
    return problems


_CHUNK = 200
"""How many policies one Cedar validation call takes."""


def _problems_of(errors: Any, chunk: Sequence[PolicyInfo]) -> list[PolicyProblem]:
    problems = []
    for error in errors:
        local = error.policy_id
        index = int(local[6:]) if local.startswith("policy") and local[6:].isdigit() else -1
        owner = chunk[index] if 0 <= index < len(chunk) else None
        if owner is None:
            problems.append(PolicyProblem(error.error, None, None, None))
            continue
        message = error.error.replace(f"for policy `{local}`", f"for policy `{owner.id}`", 1)
        problems.append(PolicyProblem(message, owner.label, owner.path, owner.line, owner.id))
    return problems


def policy_tree(
    engine: CedarEngine, policies: Sequence[tuple[str, str]]
) -> dict[str, pst.Template]:
    """Each policy's PST by the engine's Cedar id (the engine parses the joined text)."""
    if not policies:
        return {}
    tree = cedarpy.policies_to_pst("\n".join(text for _, text in policies))
    nodes: dict[str, pst.Template] = {**tree.static_policies, **tree.templates}
    infos = {i.id: i for i in engine.policies if i.kind != "link"}
    if set(nodes) != set(infos) or any(nodes[k].effect != infos[k].effect for k in infos):
        # Should not happen (same text, same positional ids); fail closed if it does.
        raise PolicyError("internal error: policy ids disagree between parses")
    return nodes


def _naming_problems(
    engine: CedarEngine,
    uids: Mapping[str, frozenset[pst.EntityUid]],
    model: SchemaModel,
    tools: Sequence[ToolLike],
    lines: SourceLines,
) -> list[dict[str, object]]:
    """Policies naming a tool, namespace or action that is not registered; each problem
    also carries the ``name`` it is about (removed before it is reported)."""
    tool_type, namespace_type = model.qualify(TOOL_TYPE), model.qualify(NAMESPACE_TYPE)
    known = {
        tool_type: {t.qualified_name for t in tools},
        namespace_type: {t.namespace for t in tools},
        model.action_type: set(model.json[model.namespace]["actions"]),
    }
    what = {
        tool_type: "registered tool",
        namespace_type: "tool namespace",
        model.action_type: "tool action or action group",
    }
    aliases = {t.model_alias: t.qualified_name for t in tools}
    problems: list[dict[str, object]] = []
    for info in engine.policies:
        for uid in sorted(uids.get(info.id, ()), key=str):
            kind = str(uid.type)
            if kind not in known or uid.id in known[kind]:
                continue
            message = f"{uid} is not a {what[kind]}"
            if kind in (tool_type, model.action_type) and uid.id in aliases:
                message += (
                    f": policies use the qualified name `{aliases[uid.id]}` "
                    f"({kind}::{json.dumps(aliases[uid.id])}), not the model alias"
                )
            else:
                hint = difflib.get_close_matches(uid.id, sorted(known[kind]), n=1)
                if hint:
                    message += f"; did you mean {kind}::{json.dumps(hint[0])}?"
            where = _place(info, json.dumps(uid.id), lines)
            problems.append({**_problem(info, message, where, lines), "name": str(uid)})
    return problems


ANNOTATIONS = ("id", "ask")
"""The annotations a policy may carry: ``@id("name")`` and, on a permit, ``@ask("why")``.
Any other is refused: ``@Ask("...")`` would otherwise be a permit that silently allows."""


def _annotation_problems(engine: CedarEngine, lines: SourceLines) -> list[dict[str, object]]:
    """Unknown or misplaced annotations, an ``@id`` given twice, and templates (which
    clearance never links: a template would sit in the set, matching nothing, counted by
    nothing). Each problem is placed at the annotation, or at the policy."""
    problems: list[dict[str, object]] = []
    first_of: dict[str, PolicyInfo] = {}

    def problem(info: PolicyInfo, message: str, where: Position | None) -> None:
        problems.append(_problem(info, message, where, lines))

    for info in engine.policies:
        if info.kind == "link":
            continue
        for key in info.annotations:
            if key in ANNOTATIONS and not (key == "ask" and info.effect == "forbid"):
                continue
            where = _annotation_place(info, key)
            if key == "ask":
                message = (
                    "@ask on a forbid: a forbid always denies, so nothing would ever ask; "
                    "put @ask on the permit that should ask"
                )
            else:
                message = f"unknown annotation @{key}: a policy takes only @id and @ask"
                hint = [a for a in ANNOTATIONS if a == key.lower()] or difflib.get_close_matches(
                    key.lower(), ANNOTATIONS, n=1
                )
                if hint:
                    message += f"; did you mean @{hint[0]}?"
            problem(info, message, where)
        name = info.annotations.get("id")
        if name is not None:
            earlier = first_of.setdefault(name, info)
            if earlier is not info:
                at = f"{earlier.path or 'the policy text'}:{earlier.line}"
                problem(
                    info,
                    f"@id({json.dumps(name)}) is also the id of the policy at {at}: each "
                    "policy needs its own, or decisions, coverage and the journal cannot "
                    "tell them apart",
                    _annotation_place(info, "id"),
                )
        if info.kind == "template":
            problem(
                info,
                "a template (a policy with ?principal or ?resource) is never linked here, so "
                "it would match nothing: write the policy for the principal or resource it "
                "means",
                _slot_place(info),
            )
    return problems


def _problem(
    info: PolicyInfo, message: str, where: Position | None, lines: SourceLines
) -> dict[str, object]:
    """A problem of ``info`` in ``problems`` form, placed at ``where`` (else the policy)."""
    return {
        "path": info.path,
        "line": where.line if where else info.line,
        "column": where.column if where else info.column,
        "policy_id": info.label,
        "message": message,
        "frame": lines.frame(info.path, where) if where else None,
    }


def _slot_place(info: PolicyInfo) -> Position | None:
    m = re.search(r"\?(?:principal|resource)\b", info.text or "")
    return _place_offset(info, m.start(), m.end() - m.start()) if m else None


def _annotation_place(info: PolicyInfo, key: str) -> Position | None:
    text = info.text
    if not text:
        return None
    m = re.search(rf"@\s*{re.escape(key)}\b", text[: _body_start(text)] or text)
    return _place_offset(info, m.start(), m.end() - m.start()) if m else None


_TICKED = re.compile(r"`([^`]+)`")
_INPUT_READ = re.compile(r"context\s*\.\s*input\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)")


def _locate(
    problem: PolicyProblem, engine: CedarEngine, model: SchemaModel, lines: SourceLines
) -> dict[str, object]:
    """A validation problem placed at the offending name (line, column, code frame), with a
    hint for a misspelled argument, an optional one read unguarded, or a decimal."""
    out = problem.as_dict()
    info = None
    if problem.cedar_id:
        try:
            info = engine.policy(problem.cedar_id)
        except KeyError:
            info = None
    message = problem.message
    prefix = f"for policy `{problem.cedar_id}`, "
    if message.startswith(prefix):
        message = message[len(prefix) :]
    where: Position | None = None
    hint = ""
    if info is not None and "decimal" in message:
        where, hint = _decimal_hint(info, model, lines)
    if info is not None and where is None:
        where = _typed_read(info, model, message)
    ticked = _TICKED.findall(message)
    if info is not None and ticked and where is None:
        name = ticked[0].split(".")[-1].strip('"')
        if "::" in name:
            name = name.split("::", 1)[1].strip('"')
        where = _place(info, name, lines)
    missing = re.match(r"attribute `([^`]+)` in context for (\S+) not found", message)
    if missing:
        hint = _hint(missing.group(1), missing.group(2), model)
    optional = re.match(
        r"unable to guarantee safety of access to optional attribute `([^`]+)`", message
    )
    if optional:
        record, _, attr = optional.group(1).rpartition(".")
        owner = f"context.{record}" if record else "context"
        hint = (
            f"; it is optional (not required by the schema): write "
            f"`{owner} has {attr} && ...` before reading it"
        )
    if info is not None and message.startswith(_NO_ACTION):
        where, hint = _group_hint(info, model, lines)
    unknown_type = _UNKNOWN_TYPE.match(message)
    if unknown_type:
        hint = _type_hint(unknown_type.group(1), model)
    if _ANY_SET in message:
        # Cedar's name for "a set of anything" is internal; its help (which cedarpy drops)
        # says what to use on a string.
        message = message.replace(f"expected {_ANY_SET}", "expected a set")
        if message.endswith("but saw String"):
            found = _STRING_CONTAINS.search(info.text or "") if info is not None else None
            example = (
                f'`{found.group(1)} like "*{found.group(2)}*"`'
                if found is not None
                else '`context.input.name like "*text*"`'
            )
            hint = (
                "; `.contains`, `.containsAll` and `.containsAny` are a set's: to look "
                f"inside a string use `like`, e.g. {example}"
            )
    message = message.replace(_ANY_SET, "Set")
    if where is not None:
        out["line"], out["column"] = where.line, where.column
        out["frame"] = lines.frame(info.path if info else None, where)
    out["message"] = message + hint
    return out


_UNKNOWN_TYPE = re.compile(r"unrecognized entity type `([^`]+)`")


def _type_hint(name: str, model: SchemaModel) -> str:
    """``; did you mean `User`?`` for a misspelt entity type, else the types there are."""
    body = model.json[model.namespace]
    declared = sorted(model.qualify(t) for t in body["entityTypes"])
    found = difflib.get_close_matches(name, declared, n=1) or difflib.get_close_matches(
        name.lower(), [t.lower() for t in declared], n=1
    )
    if found:
        match = next(t for t in declared if t.lower() == found[0].lower())
        return f"; did you mean `{match}`?"
    return "; the schema's entity types: " + ", ".join(f"`{t}`" for t in declared)


def _group_hint(
    info: PolicyInfo, model: SchemaModel, lines: SourceLines
) -> tuple[Position | None, str]:
    """``action == Action::"read_only"``: a group compared with ``==`` matches no action."""
    actions = model.json[model.namespace]["actions"]
    if info.action.op != "==" or not info.action.entities:
        return None, ""
    group = info.action.entities[0].id
    if group not in actions or "appliesTo" in actions[group]:
        return None, ""
    ref = f"{model.action_type}::{json.dumps(group)}"
    return _place(info, json.dumps(group), lines), (
        f"; {ref} is an action group, which `==` never matches: write `action in {ref}`"
    )


def _decimal_hint(
    info: PolicyInfo, model: SchemaModel, lines: SourceLines
) -> tuple[Position | None, str]:
    """Where the policy reads an argument typed ``decimal`` (a JSON Schema ``number``), and
    how to compare one: Cedar's ``<`` and ``<=`` take ``Long`` only."""
    decimals = {
        name
        for tool in model.tools.values()
        for name, attr in tool.input.attributes.items()
        if attr.type == DECIMAL
    }
    for m in _INPUT_READ.finditer(info.text or ""):
        if m.group(1) in decimals:
            read = f"context.input.{m.group(1)}"
            hint = (
                f"; `{read}` is a Cedar decimal (a JSON Schema number): compare it with "
                f'decimal values and methods, e.g. `{read}.lessThanOrEqual(decimal("100.0"))` '
                f'or `{read} == decimal("1.0")` (`<`, `<=`, `>`, `>=` take Long only)'
            )
            return _place_offset(info, m.start(1), len(m.group(1))), hint
    return None, (
        "; decimals compare with decimal values and methods: "
        '`x.lessThan(decimal("1.5"))`, `.lessThanOrEqual`, `.greaterThan`, '
        "`.greaterThanOrEqual` (`<`, `<=`, `>`, `>=` take Long only)"
    )


_ANY_SET = "Set<__cedar::internal::Any>"
"""How Cedar names "a set of anything" in a type error."""
_STRING_CONTAINS = re.compile(r'(context(?:\.\w+)+)\.contains\("([^"*\\]*)"\)')

_TYPES_CLASH = re.compile(r"the types (\S+) and (\S+) are not compatible")
_SAW_TYPE = re.compile(r"but saw (\S+)$")
_EQUALITY_AFTER = re.compile(r"\s*(?:==|!=)")
_EQUALITY_BEFORE = re.compile(r"(?:==|!=|\.contains\()\s*$")


def _typed_read(info: PolicyInfo, model: SchemaModel, message: str) -> Position | None:
    """Where a type error is: the first ``context.input.x`` read whose type the message
    names (for an incompatible comparison, one compared with ``==`` / ``!=`` first)."""
    clash, saw = _TYPES_CLASH.search(message), _SAW_TYPE.search(message)
    if clash is not None:
        types = {clash.group(1), clash.group(2)}
    elif saw is not None:
        types = {saw.group(1)}
    else:
        return None
    typed = {
        name
        for tool in model.tools.values()
        for name, attr in tool.input.attributes.items()
        if _type_name(attr.type) in types
    }
    text = info.text or ""
    reads = [m for m in _INPUT_READ.finditer(text) if m.group(1) in typed]
    if clash is not None:
        compared = [
            m
            for m in reads
            if _EQUALITY_AFTER.match(text, m.end()) or _EQUALITY_BEFORE.search(text, 0, m.start())
        ]
        reads = compared or reads
    if not reads:
        return None
    return _place_offset(info, reads[0].start(1), len(reads[0].group(1)))


def _type_name(typ: Any) -> str:
    """A Cedar type as Cedar's messages name it (``Bool``, ``Set<String>``)."""
    if isinstance(typ, SetType):
        return f"Set<{_type_name(typ.element)}>"
    name = str(getattr(typ, "name", ""))
    return "Bool" if name == "Boolean" else name


def _hint(attr_path: str, action: str, model: SchemaModel) -> str:
    """``; did you mean `input.path`?`` for a misspelled argument."""
    parts = attr_path.split(".")
    m = re.search(r'"(.*)"$', action)
    tool = model.tools.get(m.group(1)) if m else None
    if tool is None or len(parts) < 2 or parts[0] != "input":
        return ""
    record: Any = tool.input
    for part in parts[1:-1]:
        attr = record.attributes.get(part) if isinstance(record, RecordType) else None
        if attr is None:
            return ""
        record = attr.type
    if not isinstance(record, RecordType):
        return ""
    hint = difflib.get_close_matches(parts[-1], list(record.attributes), n=1)
    if hint:
        return f"; did you mean `{'.'.join([*parts[:-1], hint[0]])}`?"
    skipped = [p for p, _ in tool.skipped if p.rsplit("/", 1)[-1] == parts[-1]]
    if skipped:
        return f"; `{attr_path}` has no Cedar type (see docs/cedar.md), so policies cannot read it"
    return ""


def _place(info: PolicyInfo, name: str, lines: SourceLines) -> Position | None:
    """Where ``name`` first appears in the policy's text (after its annotations)."""
    text = info.text
    if not text or not info.line:
        return None
    span = name_span(text, name, start=_body_start(text))
    if span is None:
        span = name_span(text, name)
    if span is None:
        return None
    return _place_offset(info, *span)


def _place_offset(info: PolicyInfo, offset: int, width: int) -> Position | None:
    if not info.text or not info.line:
        return None
    return position_in(info.text, offset, line=info.line, column=info.column or 1, width=width)


_EFFECT = re.compile(r"\b(?:permit|forbid)\s*\(")


def _body_start(text: str) -> int:
    """Where the policy's effect starts (annotations may quote any name)."""
    m = _EFFECT.search(text)
    return m.start() if m else 0


def _opt_str(value: object) -> str | None:
    return None if value is None else str(value)


def _opt_int(value: object) -> int | None:
    return value if isinstance(value, int) else None
