"""What a request for each tool carries: the static parts of its Cedar request, and only the
context attributes that a policy able to apply to the tool reads.

Sending less keeps a decision cheap and changes nothing: a policy that cannot apply to a tool
can neither be satisfied nor error on it, and a policy that can apply gets every attribute
its conditions read (a ``has`` test keeps the attribute's presence). :func:`tool_plans` also
finds the tools no permit can match (``CedarEvaluator.ungoverned``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cedarpy import pst

from clearance.policy.cedar._values import PolicyInfo
from clearance.policy.cedar.entities import Need, to_cedar
from clearance.policy.cedar.schema import (
    BOOL,
    CALL_TOOL,
    MUTATING,
    NAMESPACE_TYPE,
    READ_ONLY,
    TOOL_TYPE,
    Attribute,
    RecordType,
    SchemaModel,
    namespace_group,
)
from clearance.types import ToolLike

__all__ = ["ToolPlan", "context_need", "merge_needs", "tool_plans"]


def merge_needs(a: Need, b: Need) -> Need:
    """What ``a`` and ``b`` read together."""
    if a is None or b is None:
        return None
    out = dict(a)
    for key, sub in b.items():
        out[key] = merge_needs(out[key], sub) if key in out else sub
    return out


def _mark(root: dict[str, Any], path: Sequence[str], full: bool) -> dict[str, Any] | None:
    """Record that ``context.<path>`` is read (``full``) or tested with ``has``."""
    if not path:
        return None if full else root
    node: dict[str, Any] = root
    for i, key in enumerate(path):
        last = i == len(path) - 1
        if key in node and node[key] is None:
            return root  # already needed whole
        if last:
            node[key] = None if full else node.get(key, {})
        else:
            node = node.setdefault(key, {})
    return root


def _context_path(expr: Any) -> list[str] | None:
    attrs: list[str] = []
    while isinstance(expr, pst.GetAttr):
        attrs.append(expr.attr)
        expr = expr.base
    if isinstance(expr, pst.Var) and expr.name == "context":
        attrs.reverse()
        return attrs
    return None


def context_need(template: pst.Template) -> Need:
    """The context attributes ``template``'s conditions read."""
    root: dict[str, Any] | None = {}

    def visit(node: Any) -> None:
        nonlocal root
        if root is None:
            return
        if isinstance(node, pst.GetAttr):
            path = _context_path(node)
            if path is not None:
                root = _mark(root, path, full=True)
                return
        elif isinstance(node, pst.HasAttr):
            path = _context_path(node.base)
            if path is not None:
                root = _mark(root, [*path, *node.attrs], full=False)
                return
        elif isinstance(node, pst.Var):
            if node.name == "context":
                root = None
            return
        if isinstance(node, tuple | list):
            for item in node:
                visit(item)
        elif isinstance(node, Mapping):
            for item in node.values():
                visit(item)
        elif hasattr(node, "__dataclass_fields__"):
            for name in node.__dataclass_fields__:
                visit(getattr(node, name))

    visit(template.clauses)
    return root


@dataclass(frozen=True, slots=True)
class ToolPlan:
    """The static parts of every request for one tool."""

    action: dict[str, str]
    resource: dict[str, str]
    input_type: RecordType
    input_need: Need
    send_input: bool
    session_need: Need
    send_session: bool
    tool_value: Any
    send_tool: bool
    label: str
    facts_type: RecordType | None = None
    facts_need: Need = None
    send_facts: bool = False
    provenance_type: RecordType | None = None
    provenance_need: Need = None
    send_provenance: bool = False


@dataclass(slots=True)
class _Group:
    """What the policies naming one action (or no action) need and cover, merged."""

    need: Need = field(default_factory=dict)
    covers_all: bool = False
    tools: set[str] = field(default_factory=set)
    namespaces: set[str] = field(default_factory=set)

    def add(self, info: PolicyInfo, need: Need, model: SchemaModel) -> None:
        self.need = merge_needs(self.need, need)
        if info.effect != "permit":
            return
        cover = _resource_cover(info, model)
        if cover == "all":
            self.covers_all = True
        elif cover is not None:
            (self.tools if cover[0] == "tool" else self.namespaces).add(cover[1])

    def covers(self, tool: ToolLike) -> bool:
        return (
            self.covers_all
            or tool.qualified_name in self.tools
            or tool.namespace in self.namespaces
        )


def _resource_cover(info: PolicyInfo, model: SchemaModel) -> str | tuple[str, str] | None:
    """Which tools a permit's resource scope can match: all, one tool, one namespace, none."""
    scope = info.resource
    tool_type = model.qualify(TOOL_TYPE)
    if scope.op == "any" or scope.slot:
        return "all"  # a template slot: any link may name any tool
    if scope.op == "is":
        return "all" if scope.entity_type == tool_type else None
    if scope.op == "is in" and scope.entity_type != tool_type:
        return None
    if not scope.entities:
        return "all"
    target = scope.entities[0]
    if target.type == tool_type:
        return ("tool", target.id)
    if scope.op != "==" and target.type == model.qualify(NAMESPACE_TYPE):
        return ("ns", target.id)
    return None  # a tool's only ancestor is its namespace


def tool_plans(
    model: SchemaModel,
    tools: Sequence[ToolLike],
    infos: Sequence[PolicyInfo],
    tree: Mapping[str, pst.Template],
) -> tuple[dict[str, ToolPlan], tuple[str, ...]]:
    """Per tool: whether any permit can match it, and the context its policies read.

    Policies are grouped by the action ids their scope names (one group for no action
    constraint), so the work is linear in policies plus tools, not their product.
    """
    action_type = model.action_type
    unconstrained = _Group()
    by_action: dict[str, _Group] = {}
    for info in infos:
        if info.kind == "template":
            continue  # a template authorizes nothing; its links are listed separately
        node = tree.get(info.template_id or info.id)
        reads = context_need(node) if node is not None else None
        if info.action.op == "any":
            unconstrained.add(info, reads, model)
            continue
        for entity in info.action.entities:
            if entity.type == action_type:
                by_action.setdefault(entity.id, _Group()).add(info, reads, model)
    tool_type = model.qualify(TOOL_TYPE)
    tool_ctx = RecordType(
        {"read_only": Attribute(BOOL, True), "annotations": Attribute(model.annotations, True)}
    )
    plans: dict[str, ToolPlan] = {}
    ungoverned: list[str] = []
    for tool in tools:
        ids = (
            tool.qualified_name,
            CALL_TOOL,
            READ_ONLY if tool.read_only else MUTATING,
            namespace_group(tool.namespace),
        )
        groups = [unconstrained, *(by_action[i] for i in ids if i in by_action)]
        if not any(g.covers(tool) for g in groups):
            ungoverned.append(tool.qualified_name)
        need: Need = {}
        for group in groups:
            need = merge_needs(need, group.need)
        top = (
            need
            if need is not None
            else {"input": None, "session": None, "tool": None, "facts": None, "provenance": None}
        )
        tool_need: Need = top.get("tool", {})
        tool_value = (
            to_cedar(
                tool_ctx,
                {"read_only": tool.read_only, "annotations": dict(tool.annotations)},
                "tool",
                tool_need,
            )
            if "tool" in top
            else None
        )
        plans[tool.qualified_name] = ToolPlan(
            action={"type": action_type, "id": tool.qualified_name},
            resource={"type": tool_type, "id": tool.qualified_name},
            input_type=model.tools[tool.qualified_name].input,
            input_need=top.get("input"),
            send_input="input" in top,
            session_need=top.get("session"),
            send_session="session" in top,
            tool_value=tool_value,
            send_tool="tool" in top,
            label=tool.qualified_name,
            facts_type=model.tools[tool.qualified_name].facts,
            facts_need=top.get("facts"),
            send_facts="facts" in top,
            provenance_type=model.tools[tool.qualified_name].provenance,
            provenance_need=top.get("provenance"),
            send_provenance="provenance" in top,
        )
    return plans, tuple(ungoverned)
