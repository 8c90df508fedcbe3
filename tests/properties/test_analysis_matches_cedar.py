"""The analysis's encoding of Cedar decides every request as Cedar does.

For random requests of every tool (principal type, id, groups and attributes; context
values drawn from the schema's types, biased towards the policies' own literals so that
conditions go both ways; longs up to the 64-bit limits, where arithmetic overflows), the
verdict the z3 formulas give once the request is pinned equals the verdict Cedar gives
through the loaded set's engine (``decide``, the path a live call takes). Two sets: the
bundled coding pack, and one written to exercise every encoded construct (groups from
``entities.json`` and from the host, ``is``, ``has``, optional and principal attributes,
arithmetic that overflows, ``if``, ``like``, ``containsAny``, ``unless``, ``@ask``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import z3
from cedarpy import pst
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clearance.harness.tools import ToolRegistry
from clearance.policy.cedar.analysis import decide
from clearance.policy.cedar.analysis._checks import load_view
from clearance.policy.cedar.analysis._values import (
    LONG_MAX,
    LONG_MIN,
    RecordVal,
    Scalar,
    SetVal,
    Value,
)
from clearance.policy.cedar.analysis._world import Request, SetView, ToolWorld, nodes_under
from clearance.toolsets.confinement import Confinement
from clearance.toolsets.files import files_tools
from clearance.toolsets.git import git_tools
from clearance.toolsets.shell import shell_tools

ROOT = Path(__file__).resolve().parents[2]
CODING = ROOT / "clearance" / "packs" / "coding"


def _registry() -> ToolRegistry:
    """The bundled tools (their schemas and facts are what the schema is generated from)."""
    registry = ToolRegistry()
    registry.register("files", files_tools(ROOT))
    registry.register("shell", shell_tools(ROOT))
    registry.register("git", git_tools(ROOT, confinement=Confinement(kind="none")))
    return registry


CONSTRUCTS = """\
@id("read")
permit (principal, action in Action::"read_only", resource);

@id("eng-writes")
permit (principal in Team::"eng", action == Action::"files.write_file", resource)
when { principal is User && principal.level >= 3 };

@id("not-far")
forbid (principal is User, action == Action::"files.read_file", resource)
when { context.input has offset && context.input.offset + 1000 > 5000 };

@id("ask-pytest")
@ask("pytest runs the workspace's code")
permit (principal is User, action == Action::"shell.run", resource)
when { context.facts.command.program == "pytest" };

@id("no-keys")
forbid (principal, action == Action::"files.read_file", resource)
when {
  context.facts.path.name like "*.pem" ||
  context.facts.path.segments.containsAny([".ssh", ".gnupg"])
};

@id("overflow")
forbid (principal, action == Action::"files.read_file", resource)
when { context.input has limit && context.input.limit * 1000000000000 > 9 };

@id("example-only")
forbid (principal is User, action == Action::"files.write_file", resource)
unless { principal has email && principal.email like "*@example.com" };

@id("ops")
permit (principal is User, action == Action::"shell.run", resource)
when {
  principal.roles.contains("ops") &&
  (if context.facts.command.program == "git"
   then context.facts.command.options.isEmpty()
   else !context.facts.command.outside_root)
};

@id("alice-git")
permit (principal == User::"alice", action in Action::"mutating", resource)
when { resource.namespace == "git" && context.session.id != "" };

@id("carol-edits")
permit (principal in User::"carol", action == Action::"files.edit", resource);

@id("no-agents")
forbid (principal is Agent, action in Action::"mutating", resource)
when { !(principal in Team::"bots") };

@id("files-read-only")
permit (principal, action, resource in Namespace::"files")
when { context.tool.read_only && [1, 2].contains(3) == false };
"""

SCHEMA = {
    "entityTypes": {
        "Team": {"memberOfTypes": ["Team"]},
        "User": {
            "memberOfTypes": ["Team"],
            "shape": {
                "type": "Record",
                "attributes": {
                    "level": {"type": "Long"},
                    "email": {"type": "String", "required": False},
                    "roles": {"type": "Set", "element": {"type": "String"}},
                },
            },
        },
        "Agent": {"memberOfTypes": ["Team"]},
    },
    "principalTypes": ["User", "Agent"],
}

ENTITIES = [
    {"uid": {"type": "User", "id": "alice"}, "attrs": {"level": 1, "roles": []}, "parents": []},
    {"uid": {"type": "User", "id": "bob"}, "attrs": {"level": 5, "roles": ["ops"]},
     "parents": [{"type": "Team", "id": "infra"}]},
    {"uid": {"type": "Team", "id": "infra"}, "attrs": {}, "parents": [{"type": "Team", "id": "eng"}]},
    {"uid": {"type": "Team", "id": "eng"}, "attrs": {}, "parents": []},
]  # fmt: skip

GROUPS = [("Team", "eng"), ("Team", "infra"), ("Team", "bots")]
IDS = ["alice", "bob", "carol", ""]


def _worlds(directory: Path) -> tuple[SetView, list[ToolWorld], list[str]]:
    tools = list(_registry())
    view = load_view(directory, tools)
    worlds = [ToolWorld(tool, [view], n) for n, tool in enumerate(tools)]
    literals: set[str] = {".git", "git", "ls", "-l", "x.pem", "a@example.com", "main.py"}
    literals.update(
        n.value for n in nodes_under(*view.nodes.values()) if isinstance(n, pst.StringLit)
    )
    return view, worlds, sorted(literals)


@pytest.fixture(scope="module")
def constructs(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[SetView, list[ToolWorld], list[str]]:
    directory = tmp_path_factory.mktemp("constructs")
    (directory / "policies.cedar").write_text(CONSTRUCTS)
    (directory / "schema.json").write_text(json.dumps(SCHEMA))
    (directory / "entities.json").write_text(json.dumps(ENTITIES))
    return _worlds(directory)


@pytest.fixture(scope="module")
def coding() -> tuple[SetView, list[ToolWorld], list[str]]:
    return _worlds(CODING)


def _scalars(kind: str, literals: list[str]) -> st.SearchStrategy[Any]:
    if kind == "Bool":
        return st.booleans()
    if kind == "Long":
        return st.one_of(
            st.integers(-10, 10_000),
            st.sampled_from([LONG_MIN, LONG_MAX, 4001, 3999, 0]),
            st.integers(LONG_MIN, LONG_MAX),
        )
    return st.one_of(
        st.sampled_from(literals),
        st.sampled_from(literals).map(lambda s: "k" + s),
        st.text(max_size=4),
    )


def _like(value: Value, literals: list[str], bound: int) -> st.SearchStrategy[Any]:
    """Values for what the policies read of ``value`` (the parts the world made variables
    for; Cedar is sent only those, as a live call is)."""
    if isinstance(value, Scalar):
        return _scalars(value.kind, literals)
    if isinstance(value, SetVal):
        return st.lists(_scalars(value.element, literals), max_size=bound, unique=True)
    assert isinstance(value, RecordVal), value
    shape = value.shape
    required: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for name, (_, item) in value.fields.items():
        if name == "tool":
            continue
        strategy = _like(item, literals, bound)
        declared = shape.attributes[name] if shape is not None else None
        (required if declared is None or declared.required else optional)[name] = strategy
    return st.fixed_dictionaries(required, optional=optional)


@st.composite
def _requests(
    draw: st.DrawFn, view: SetView, worlds: list[ToolWorld], literals: list[str]
) -> tuple[ToolWorld, Request]:
    world = draw(st.sampled_from(worlds))
    context = draw(_like(world.context, literals, world.bound))
    context["tool"] = world.tool_value
    kind = draw(st.sampled_from(world.types))
    ident = draw(st.sampled_from(IDS))
    attrs = draw(_like(world.attrs[kind], literals, world.bound)) if kind in world.attrs else {}
    parents = [{"type": t, "id": i} for t, i in GROUPS if draw(st.integers(0, 3)) == 0]
    known = view.loaded.extra_by_uid.get((kind, ident))
    if known is not None:
        parents += [dict(p) for p in known.get("parents", []) if dict(p) not in parents]
        attrs = {**known.get("attrs", {}), **attrs}
    principal = {"uid": {"type": kind, "id": ident}, "attrs": attrs, "parents": parents}
    request = Request(world.tool.qualified_name, principal, world.action, world.resource, context)
    return world, request


def _encoded_verdict(world: ToolWorld, request: Request) -> str:
    solver = z3.Solver()
    solver.add(*world.facts, *world.pinned(request))
    assert solver.check() == z3.sat
    model = solver.model()
    verdicts = world.verdicts(0)
    held = [
        v
        for v, formula in verdicts.items()
        if z3.is_true(model.eval(formula, model_completion=True))
    ]
    assert len(held) == 1, held
    return held[0]


def _same_verdicts(
    data: st.DataObject, setup: tuple[SetView, list[ToolWorld], list[str]], tool: str
) -> None:
    view, worlds, literals = setup
    world = next(w for w in worlds if w.tool.qualified_name == tool)
    _, request = data.draw(_requests(view, [world], literals))
    cedar = decide(view, request).effect
    assert _encoded_verdict(world, request) == cedar, request


# Per tool, so that every tool's policies meet as many requests (one principal type, id
# and context in a few hundred is what a policy on one tool and one id needs to be hit).
TOOLS = [t.qualified_name for t in _registry()]
SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.mark.parametrize("tool", TOOLS)
@SETTINGS
@given(data=st.data())
def test_the_encoding_decides_the_constructs_set_as_cedar(
    data: st.DataObject, constructs: Any, tool: str
) -> None:
    _same_verdicts(data, constructs, tool)


@pytest.mark.parametrize("tool", TOOLS)
@SETTINGS
@given(data=st.data())
def test_the_encoding_decides_the_coding_pack_as_cedar(
    data: st.DataObject, coding: Any, tool: str
) -> None:
    _same_verdicts(data, coding, tool)


def test_every_verdict_is_reached(constructs: Any) -> None:
    """The constructs set allows, asks and denies something (so the property above compares
    all three kinds of verdict, not only denials)."""
    _, worlds, _ = constructs
    reached = set()
    for world in worlds:
        for verdict, formula in world.verdicts(0).items():
            solver = z3.Solver()
            solver.add(*world.facts, formula)
            if solver.check() == z3.sat:
                reached.add(verdict)
    assert reached == {"allow", "ask", "deny"}
