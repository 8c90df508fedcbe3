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
from clearance.policy.cedar._values import PolicyInfo, PolicyProblem
from clearance.policy.cedar.engine import CedarEngine
from clearance.policy.cedar.schema import NAMESPACE_TYPE, TOOL_TYPE, RecordType, SchemaModel
from clearance.types import ToolLike

__all__ = ["check_policies", "policy_tree"]


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
            each with its line and, for a misspelled name, a hint.
    """
    tree = policy_tree(engine, policies)
    uids = {policy_id: pst.entity_uids(node) for policy_id, node in tree.items()}
    problems = [_locate(p, engine, model) for p in _validate(engine, uids, model)]
    reported = {(p["policy_id"], str(p["message"])) for p in problems}
    for problem in _naming_problems(engine, uids, model, tools):
        name = str(problem["message"]).split(" is not ", 1)[0]
        if not any(pid == problem["policy_id"] and name in msg for pid, msg in reported):
            problems.append(problem)
    if problems:
        problems.sort(key=lambda p: (str(p["path"] or ""), int(str(p["line"] or 0))))
        first = problems[0]
        count = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise PolicyError(
            f"policy {first['policy_id']}: {first['message']}{count}",
            path=_opt_str(first["path"]),
            line=_opt_int(first["line"]),
            policy_id=_opt_str(first["policy_id"]),
            problems=problems,
        )
    return tree


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

    inputs = {ts.input_type_name: name for name, ts in model.tools.items()}
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
            common = {
                name: typ
                for name, typ in body["commonTypes"].items()
                if name not in inputs or inputs[name] in key
            }
            schema = {
                model.namespace: {
                    "entityTypes": body["entityTypes"],
                    "commonTypes": common,
                    "actions": cut,
                }
            }
        result = cedarpy.validate_policies(
            "\n".join(str(i.text) for i in group), json.dumps(schema)
        )
        for error in result.errors:
            local = error.policy_id
            index = int(local[6:]) if local.startswith("policy") and local[6:].isdigit() else -1
            owner = group[index] if 0 <= index < len(group) else None
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
) -> list[dict[str, object]]:
    """Policies naming a tool, namespace or action that is not registered."""
    known = {
        model.qualify(TOOL_TYPE): {t.qualified_name for t in tools},
        model.qualify(NAMESPACE_TYPE): {t.namespace for t in tools},
        model.action_type: set(model.json[model.namespace]["actions"]),
    }
    what = {
        model.qualify(TOOL_TYPE): "registered tool",
        model.qualify(NAMESPACE_TYPE): "tool namespace",
        model.action_type: "tool action or action group",
    }
    problems: list[dict[str, object]] = []
    for info in engine.policies:
        for uid in sorted(uids.get(info.id, ()), key=str):
            kind = str(uid.type)
            if kind in known and uid.id not in known[kind]:
                hint = difflib.get_close_matches(uid.id, sorted(known[kind]), n=1)
                message = f"{uid} is not a {what[kind]}" + (
                    f"; did you mean {kind}::{json.dumps(hint[0])}?" if hint else ""
                )
                problems.append(
                    {
                        "path": info.path,
                        "line": _line_of(info, uid.id) or info.line,
                        "policy_id": info.label,
                        "message": message,
                    }
                )
    # Cedar reports an unknown action too; keep one message per policy and name.
    return problems


_TICKED = re.compile(r"`([^`]+)`")


def _locate(problem: PolicyProblem, engine: CedarEngine, model: SchemaModel) -> dict[str, object]:
    """A validation problem with the line of the offending name and a spelling hint."""
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
    ticked = _TICKED.findall(message)
    if info is not None and ticked:
        name = ticked[0].split(".")[-1].strip('"')
        if "::" in name:
            name = name.split("::", 1)[1].strip('"')
        line = _line_of(info, name)
        if line:
            out["line"] = line
    missing = re.match(r"attribute `([^`]+)` in context for (\S+) not found", message)
    if missing:
        message += _hint(missing.group(1), missing.group(2), model)
    out["message"] = message
    return out


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


def _line_of(info: PolicyInfo, name: str) -> int | None:
    if not info.text or not info.line or not name:
        return None
    m = re.search(r"(?<![A-Za-z0-9_])" + re.escape(name) + r"(?![A-Za-z0-9_])", info.text)
    if not m:
        return None
    return info.line + info.text.count("\n", 0, m.start())


def _opt_str(value: object) -> str | None:
    return None if value is None else str(value)


def _opt_int(value: object) -> int | None:
    return value if isinstance(value, int) else None
