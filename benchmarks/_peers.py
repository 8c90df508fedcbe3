"""The same policy, the same call, in clearance and in its peers, at any number of rules.

The scenario every benchmark here shares: an agent reads files, ``read_file(path, limit)``,
allowed under ``src/``, denied for ``*.env``, and the call made is an allowed read of a
new path every time (``src/app/<n>.py``, ``limit=<n>``). Around those two rules the rule
set grows: ``rules - 2`` more rules, spread over 1,000 other tools and, past 1,000 rules,
over 100 principals as well (rule ``k`` is about tool ``k % 1000`` and user
``k // 1000``), as a large deployment's per-tool, per-user grants would be. The called
tool's own rules stay the same at every size: what the figures show is whether a call
pays for rules that are not about it.

Builders (each returns ``call(n) -> awaitable``):

- :func:`toolwarden_call`: toolwarden's ``Gate.wrap`` guard (decision only: no schema, no
  audit sink), one ``@policy`` per rule;
- :func:`tollgate_call`: tollgate's ``ControlTower.execute_async`` with a YAML policy (one
  rule per rule, matched in order), a manifest with the parameter schema and a path
  constraint, and an in-memory audit sink;
- :func:`cedar_rules` / :func:`local_rules`: the same rules for clearance's evaluators.

toolwarden and tollgate are optional (the ``bench`` extra): a builder raises
``ImportError`` without them, and the scripts then leave their columns out.
"""

from __future__ import annotations

import contextlib
import io
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

__all__ = [
    "TOOLS",
    "USERS",
    "YAML_UP_TO",
    "cedar_rules",
    "local_rules",
    "spread",
    "tollgate_call",
    "tool_names",
    "toolwarden_call",
]

TOOLS = 1_000
"""How many other tools the rules are spread over."""
USERS = 100
"""How many principals the rules are spread over once every tool has one."""
YAML_UP_TO = 10_000
"""The most rules written to tollgate's YAML file (see :func:`tollgate_call`)."""

Call = Callable[[int], Awaitable[Any]]


def spread(rules: int) -> list[tuple[int, int]]:
    """``(tool, user)`` of each of the ``rules - 2`` rules beside the called tool's two."""
    return [(k % TOOLS, (k // TOOLS) % USERS) for k in range(max(0, rules - 2))]


async def read_file(path: str, limit: int = 0) -> str:
    """The tool itself: does nothing, so that the figures are the enforcement's."""
    return "ok"


def toolwarden_call(rules: int) -> Call:
    """toolwarden's wrapped ``read_file`` under ``rules`` policies."""
    from toolwarden import NOT_APPLICABLE, Allow, Deny, Facts, Gate, Verdict, policy

    @policy("read_src", tools=("read_file",))
    def read_src(f: Facts) -> Verdict:
        return Allow() if str(f.args.get("path", "")).startswith("src/") else NOT_APPLICABLE

    @policy("no_env", tools=("read_file",), permits=False)
    def no_env(f: Facts) -> Verdict:
        return (
            Deny("an env file") if str(f.args.get("path", "")).endswith(".env") else NOT_APPLICABLE
        )

    def grant(tool: int, user: int, k: int) -> Any:
        def body(f: Facts, user: str = f"u{user}", prefix: str = f"dir{k}/") -> Verdict:
            if f.principal.get("user") != user:
                return NOT_APPLICABLE
            return Allow() if str(f.args.get("path", "")).startswith(prefix) else NOT_APPLICABLE

        return policy(f"p{k}", tools=(f"tool{tool}",))(body)

    policies = [read_src, no_env] + [grant(t, u, k) for k, (t, u) in enumerate(spread(rules))]
    gate = Gate(policies, [], strict=False)
    # wrap() audits coverage against the wrapped tools and prints what the other tools'
    # policies look like from there (phantom tools): not part of a call, kept out of view.
    with contextlib.redirect_stderr(io.StringIO()):
        guarded = gate.wrap({"read_file": read_file}, principal={"user": "alice"})["read_file"]

    async def call(n: int) -> Any:
        return await guarded(path=f"src/app/{n}.py", limit=n)

    return call


class _MemoryAudit:
    """tollgate's audit sink, in memory (as clearance's MemoryJournal)."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def emit(self, event: Any) -> None:
        self.events.append(event)


def tollgate_call(rules: int, folder: Path | None = None) -> tuple[Call, Callable[[], None]]:
    """tollgate's ``execute_async`` of ``read_file`` under ``rules`` YAML rules; with the
    function that empties its in-memory audit sink."""
    import yaml
    from tollgate import (
        AgentContext,
        AutoApprover,
        ControlTower,
        Effect,
        Intent,
        ToolRequest,
        YamlPolicyEvaluator,
    )
    from tollgate import ToolRegistry as Manifest

    folder = folder or Path(tempfile.mkdtemp(prefix="clearance-bench-"))
    others = [
        {
            "id": f"r{k}",
            "tool": f"tool{tool}",
            "action": "call",
            "agent": {"agent_id": f"u{user}"},
            "decision": "ALLOW",
        }
        for k, (tool, user) in enumerate(spread(rules))
    ]
    # The called tool's allow sits in the middle of the list (tollgate matches in order).
    mine = {"id": "read", "tool": "files", "action": "read_file", "decision": "ALLOW"}
    listed = [*others[: len(others) // 2], mine, *others[len(others) // 2 :]]
    policy_file = folder / f"tollgate-policy-{rules}.yaml"
    # Past 10,000 rules the YAML holds only the called tool's rule and the full list is
    # set on the evaluator after loading: tollgate parses YAML in pure Python (minutes for
    # 100,000 rules), which is loading, not a call.
    in_file = listed if rules <= YAML_UP_TO else [mine]
    policy_file.write_text(yaml.safe_dump({"version": "1", "rules": in_file}, sort_keys=False))
    manifest = folder / f"tollgate-manifest-{rules}.yaml"
    schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["path"],
    }
    manifest.write_text(
        yaml.safe_dump(
            {
                "version": "1.0.0",
                "tools": {
                    "files": {
                        "effect": "read",
                        "resource_type": "file",
                        "params_schema": schema,
                        # allowed under src/, never an env file
                        "constraints": {
                            "param_constraints": {"path": {"pattern": r"^src/(?!.*\.env$)"}}
                        },
                    }
                },
            }
        )
    )
    audit = _MemoryAudit()
    evaluator = YamlPolicyEvaluator(policy_file)
    if evaluator.rules != listed:
        evaluator.rules = listed
        evaluator._validate_rules()
    tower = ControlTower(evaluator, AutoApprover(), audit, registry=Manifest(manifest))
    agent = AgentContext(agent_id="alice", version="1", owner="bench")
    intent = Intent(action="read", reason="benchmark")

    async def call(n: int) -> Any:
        params = {"path": f"src/app/{n}.py", "limit": n}
        request = ToolRequest(
            tool="files",
            action="read_file",
            resource_type="file",
            effect=Effect.READ,
            params=params,
            manifest_version="1.0.0",
        )
        return await tower.execute_async(agent, intent, request, lambda: read_file(**params))

    return call, audit.events.clear


def local_rules(rules: int) -> dict[str, list[str]]:
    """The scenario as ``LocalEvaluator`` rules (its rules have no principal: rule ``k``
    is about tool ``k % 1000`` only), for a registry from :func:`tool_names`."""
    allow = ["files.read_file(path=src/**)"]
    allow += [
        f"ns{t // 100}.tool{t % 100}(path=dir{k}/**)" for k, (t, _) in enumerate(spread(rules))
    ]
    return {"allow": allow, "deny": ["files.read_file(path=**/*.env)"]}


def cedar_rules(rules: int) -> str:
    """The scenario as Cedar policies, for a registry from :func:`tool_names`."""
    policies = [
        '@id("read-src")\npermit(principal == User::"alice", action == Action::"files.read_file", '
        'resource) when { context.input.path like "src/*" };',
        '@id("no-env")\nforbid(principal, action, resource) '
        'when { context.input has path && context.input.path like "*.env" };',
    ]
    policies += [
        f'@id("p{k}")\npermit(principal == User::"u{user}", '
        f'action == Action::"ns{tool // 100}.tool{tool % 100}", resource) '
        f'when {{ context.input.path like "dir{k}/*" }};'
        for k, (tool, user) in enumerate(spread(rules))
    ]
    return "\n".join(policies[:rules])


def tool_names() -> list[tuple[str, list[str]]]:
    """``(namespace, names)`` of the 1,000 other tools, ``ns0.tool0`` ... ``ns9.tool99``."""
    return [(f"ns{n}", [f"tool{j}" for j in range(100)]) for n in range(TOOLS // 100)]
