"""R3 deny wins, for Cedar policies: whenever a forbid's scope and condition match a call,
the verdict is deny, whatever permits (with or without ``@ask``) also match, and no
combination with other evaluators turns it into an allow or an ask."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clearance.harness.tools import Tool, ToolRegistry
from clearance.policy import AllOf, NoopEvaluator
from clearance.policy.base import AuthzRequest, Principal, SessionInfo, evaluate
from clearance.policy.cedar import CedarEvaluator

# --- a model of the policies and calls (test_r4_default_deny_cedar imports it) -------------


def _handler(arguments: dict[str, Any], ctx: Any) -> str:
    return "ok"


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


TOOLS: dict[str, tuple[bool, dict[str, Any]]] = {
    "files.read_file": (True, _object({"path": {"type": "string"}}, ["path"])),
    "files.write_file": (
        False,
        _object({"path": {"type": "string"}, "content": {"type": "string"}}, ["path", "content"]),
    ),
    "shell.run": (False, _object({"command": {"type": "string"}}, ["command"])),
    "shop.refund": (
        False,
        _object({"amount": {"type": "number"}, "count": {"type": "integer"}}, ["amount"]),
    ),
}


def _registry() -> ToolRegistry:
    registry = ToolRegistry()
    by_namespace: dict[str, list[Tool]] = {}
    for qualified, (read_only, schema) in TOOLS.items():
        namespace, name = qualified.split(".")
        tool = Tool(name, _handler, input_schema=schema, read_only=read_only)
        by_namespace.setdefault(namespace, []).append(tool)
    for namespace, tools in by_namespace.items():
        registry.register(namespace, tools)
    return registry


REGISTRY = _registry()
PRINCIPALS = [("User", "alice"), ("User", "bob"), ("Agent", "coder")]
PREFIXES = ["src/", "../", "", "docs/a"]


def groups(tool: str) -> set[str]:
    namespace = tool.split(".")[0]
    read_only = TOOLS[tool][0]
    return {tool, "call_tool", "read_only" if read_only else "mutating", f"ns:{namespace}"}


@dataclass(frozen=True)
class CallCase:
    principal: tuple[str, str]
    tool: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class PolicySpec:
    name: str
    effect: str
    ask: bool
    principal: tuple[str, ...]  # () any, ("==", type, id), ("is", type)
    action: tuple[str, ...]  # () any, ("==", tool), ("in", group, ...)
    resource: tuple[str, ...]  # () any, ("==", tool), ("in", namespace)
    condition: tuple[Any, ...]  # () none, ("prefix", p), ("count>", k), ("not-alice",)

    def matches(self, call: CallCase) -> bool:
        """Whether Cedar should find this policy satisfied by ``call``."""
        p = self.principal
        if p and p[0] == "==" and call.principal != (p[1], p[2]):
            return False
        if p and p[0] == "is" and call.principal[0] != p[1]:
            return False
        a = self.action
        if a and a[0] == "==" and call.tool != a[1]:
            return False
        if a and a[0] == "in" and not set(a[1:]) & groups(call.tool):
            return False
        r = self.resource
        if r and r[0] == "==" and call.tool != r[1]:
            return False
        if r and r[0] == "in" and call.tool.split(".")[0] != r[1]:
            return False
        c = self.condition
        if c and c[0] == "prefix":
            path = call.arguments.get("path")
            return isinstance(path, str) and path.startswith(c[1])
        if c and c[0] == "count>":
            count = call.arguments.get("count")
            return isinstance(count, int) and count > c[1]
        if c and c[0] == "not-alice":
            return call.principal != ("User", "alice")
        return True

    def cedar(self) -> str:
        lines = [f'@id("{self.name}")']
        if self.ask:
            lines.append(f'@ask("{self.name} asks")')
        p = self.principal
        principal = (
            "principal"
            if not p
            else f'principal == {p[1]}::"{p[2]}"'
            if p[0] == "=="
            else f"principal is {p[1]}"
        )
        a = self.action
        action = (
            "action"
            if not a
            else f'action == Action::"{a[1]}"'
            if a[0] == "=="
            else "action in [" + ", ".join(f'Action::"{g}"' for g in a[1:]) + "]"
        )
        r = self.resource
        resource = (
            "resource"
            if not r
            else f'resource == Tool::"{r[1]}"'
            if r[0] == "=="
            else f'resource in Namespace::"{r[1]}"'
        )
        text = "\n".join(lines) + f"\n{self.effect}({principal}, {action}, {resource})"
        c = self.condition
        if c and c[0] == "prefix":
            text += f' when {{ context.input has path && context.input.path like "{c[1]}*" }}'
        elif c and c[0] == "count>":
            text += f" when {{ context.input has count && context.input.count > {c[1]} }}"
        elif c and c[0] == "not-alice":
            text += ' unless { principal == User::"alice" }'
        return text + ";"


@st.composite
def _policy(draw: st.DrawFn, index: int) -> PolicySpec:
    effect = draw(st.sampled_from(["permit", "forbid"]))
    principal = draw(
        st.one_of(
            st.just(()),
            st.sampled_from(PRINCIPALS).map(lambda p: ("==", *p)),
            st.sampled_from([("is", "User"), ("is", "Agent")]),
        )
    )
    all_groups = sorted(set().union(*(groups(t) for t in TOOLS)) - set(TOOLS))
    action = draw(
        st.one_of(
            st.just(()),
            st.sampled_from(sorted(TOOLS)).map(lambda t: ("==", t)),
            st.lists(
                st.sampled_from(all_groups + sorted(TOOLS)), min_size=1, max_size=3, unique=True
            ).map(lambda gs: ("in", *gs)),
        )
    )
    resource = draw(
        st.one_of(
            st.just(()),
            st.sampled_from(sorted(TOOLS)).map(lambda t: ("==", t)),
            st.sampled_from(["files", "shell", "shop"]).map(lambda ns: ("in", ns)),
        )
    )
    condition = draw(
        st.one_of(
            st.just(()),
            st.sampled_from(PREFIXES).map(lambda p: ("prefix", p)),
            st.integers(-2, 5).map(lambda k: ("count>", k)),
            st.just(("not-alice",)),
        )
    )
    ask = effect == "permit" and draw(st.booleans())
    return PolicySpec(f"p{index}", effect, ask, principal, action, resource, condition)


@st.composite
def policy_sets(draw: st.DrawFn) -> list[PolicySpec]:
    size = draw(st.integers(0, 8))
    return [draw(_policy(i)) for i in range(size)]


@st.composite
def call_cases(draw: st.DrawFn) -> CallCase:
    tool = draw(st.sampled_from(sorted(TOOLS)))
    path = draw(st.sampled_from(["src/a.py", "../etc", "docs/a.md", "x"]))
    choices: dict[str, dict[str, Any]] = {
        "files.read_file": {"path": path},
        "files.write_file": {"path": path, "content": "c"},
        "shell.run": {"command": "ls"},
        "shop.refund": {"amount": draw(st.sampled_from([1, 2.5, 0.0001]))},
    }
    arguments = choices[tool]
    if tool == "shop.refund" and draw(st.booleans()):
        arguments["count"] = draw(st.integers(-3, 7))
    return CallCase(draw(st.sampled_from(PRINCIPALS)), tool, arguments)


def build_evaluator(policies: list[PolicySpec]) -> CedarEvaluator:
    evaluator = CedarEvaluator("\n".join(p.cedar() for p in policies))
    evaluator.bind(REGISTRY)
    return evaluator


def request_for(call: CallCase) -> AuthzRequest:
    return AuthzRequest(
        Principal(*call.principal), REGISTRY.get(call.tool).info, call.arguments, SessionInfo("s")
    )


# --- the property ------------------------------------------------------------------------


@given(policies=policy_sets(), calls=st.lists(call_cases(), min_size=1, max_size=8))
def test_r3_a_matching_forbid_always_denies(
    policies: list[PolicySpec], calls: list[CallCase]
) -> None:
    evaluator = build_evaluator(policies)
    for call in calls:
        forbids = {p.name for p in policies if p.effect == "forbid" and p.matches(call)}
        verdict = evaluator.evaluate(request_for(call))
        if forbids:
            assert verdict.effect == "deny", (call, verdict)
            assert set(verdict.reasons) == forbids, (call, verdict)


@pytest.mark.anyio
@given(policies=policy_sets(), call=call_cases())
async def test_r3_no_other_evaluator_overrides_a_cedar_deny(
    policies: list[PolicySpec], call: CallCase
) -> None:
    cedar = build_evaluator(policies)
    request = request_for(call)
    alone = cedar.evaluate(request)
    for combined in (AllOf(NoopEvaluator(), cedar), AllOf(cedar, NoopEvaluator())):
        verdict = await evaluate(combined, request)
        if alone.effect == "deny":
            assert verdict.effect == "deny"
        else:
            assert verdict.effect == alone.effect
