"""AuthZEN: an AuthZenEvaluator asking a real ``clearance pdp`` over real HTTP gives the
same decisions as the local evaluator on the same policies.

Three PDP processes run on one workspace of files, directories and symlinks, each with the
bundled ``files`` and ``shell`` tools (their path and command facts canonicalized on both
ends: rule R11): the ``coding`` Cedar pack, Cedar policies that read the principal's
attributes and groups (sent as ``subject.properties``), and local rules with argument globs.
For random principals and calls, ``Harness.decide`` through the PDP and through the local
evaluator agree on the outcome, the deciding policies and the message; so does ``clearance
replay`` (which sends many calls per ``evaluations`` request): no call flips.

Provenance is outside this property on purpose: the PDP does not take it from the request
(every value counts as from a tool there), see docs/authzen.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from authzen_support import RunningPdp, start_pdp
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import commands, paths

from clearance import Harness, MemoryJournal, Principal
from clearance.config import build_evaluator, build_registry, load_config
from clearance.policy.authzen import AuthZenEvaluator
from clearance.tuning import replay_async

pytestmark = pytest.mark.anyio

KINDS = ("coding", "principals", "rules")

PRINCIPALS_POLICIES = """
@id("read-all")
permit (principal, action in Action::"read_only", resource);

@id("infra-writes")
permit (principal in Team::"infra", action == Action::"files.write_file", resource)
when { principal has level && principal.level >= 3 };

@id("ask-writes-in-docs")
@ask("A write in docs.")
permit (principal, action == Action::"files.write_file", resource)
when { context.facts.path.segments.contains("docs") };

@id("no-env")
forbid (principal, action, resource)
when { context has facts && context.facts has path && context.facts.path.name == ".env" };

@id("ops-git-status")
permit (principal in Team::"ops", action == Action::"shell.run", resource)
when { context.facts.command.program == "git" && context.facts.command.subcommand == "status" };
"""

PRINCIPALS_SCHEMA = {
    "entityTypes": {
        "Team": {},
        "User": {
            "memberOfTypes": ["Team"],
            "shape": {
                "type": "Record",
                "attributes": {"level": {"type": "Long", "required": False}},
            },
        },
        "Agent": {"memberOfTypes": ["Team"]},
    },
    "principalTypes": ["User", "Agent"],
}

RULES = """
[evaluator]
kind = "local"
allow = ["files.read_file", "files.list_dir", "files.search(path=src/**)",
         "files.write_file(path=src/**)", "shell.run(command=git status*)"]
ask = ["files.write_file(path=docs/**)", "files.move_file", "shell.run(command=ls *)"]
deny = ["files.write_file(path=**/.env)", "files.move_file(destination=**/.env)",
        "shell.run(command=*rm*)"]
"""


def _project(root: Path, kind: str) -> Path:
    """A project directory deciding with ``kind``, on the shared workspace."""
    project = root / kind
    project.mkdir()
    tools = '[tools.files]\nroot = "../ws"\n[tools.shell]\nroot = "../ws"\n'
    if kind == "coding":
        config = '[evaluator]\nkind = "cedar"\npack = "coding"\n' + tools
    elif kind == "principals":
        policies = project / "policies"
        policies.mkdir()
        (policies / "p.cedar").write_text(PRINCIPALS_POLICIES)
        (policies / "schema.json").write_text(json.dumps(PRINCIPALS_SCHEMA))
        config = '[evaluator]\nkind = "cedar"\npolicies = "policies"\n' + tools
    else:
        config = RULES + tools
    path = project / "clearance.toml"
    path.write_text(config + '[journal]\npath = "state/clearance.db"\n')
    return path


def _workspace(root: Path) -> None:
    ws = root / "ws"
    for folder in ("src", "docs", "a", ".git"):
        (ws / folder).mkdir(parents=True)
    for name in ("src/b.py", "docs/a", "a/b.py", ".env", "docs/.env"):
        (ws / name).write_text("x\n")
    (ws / "link").symlink_to("src")
    (ws / "out").symlink_to(root)  # leaves the workspace: refused at both ends
    (ws / "loop").symlink_to("loop")


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("authzen-same")
    _workspace(root)
    configs = {kind: _project(root, kind) for kind in KINDS}
    running: dict[str, RunningPdp] = {}
    try:
        for kind, config in configs.items():
            running[kind] = start_pdp("--config", str(config), cwd=config.parent)
        yield {"configs": configs, "pdps": running}
    finally:
        for pdp in running.values():
            pdp.stop()


def _harnesses(setup: dict[str, Any], kind: str) -> tuple[Harness, Harness, AuthZenEvaluator]:
    config = load_config(setup["configs"][kind])
    pdp: RunningPdp = setup["pdps"][kind]
    remote = AuthZenEvaluator(pdp.url, token=pdp.token, ask_field="ask", batch_size=7)
    local = Harness(
        build_registry(config), evaluator=build_evaluator(config), journal=MemoryJournal()
    )
    through = Harness(build_registry(config), evaluator=remote, journal=MemoryJournal())
    return local, through, remote


principals = st.builds(
    lambda kind, ident, level, teams: Principal(
        kind, ident, {} if level is None else {"level": level}, [("Team", t) for t in teams]
    ),
    st.sampled_from(["User", "Agent"]),
    st.sampled_from(["alice", "bob", 'e"ve', "ünï"]),
    st.none() | st.integers(min_value=0, max_value=5),
    st.lists(st.sampled_from(["infra", "ops"]), unique=True, max_size=2),
)


@st.composite
def calls(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    tool = draw(
        st.sampled_from(
            [
                "files.read_file",
                "files.write_file",
                "files.move_file",
                "files.list_dir",
                "files.search",
                "shell.run",
            ]
        )
    )
    if tool == "files.write_file":
        return tool, {"path": draw(paths), "content": draw(st.sampled_from(["x", ""]))}
    if tool == "files.move_file":
        return tool, {"source": draw(paths), "destination": draw(paths)}
    if tool == "files.search":
        return tool, {"pattern": "x", "path": draw(paths)}
    if tool == "shell.run":
        return tool, {"command": draw(commands)}
    if draw(st.booleans()):
        return tool, {"path": draw(paths)}
    return tool, {"path": draw(st.integers())}  # the schema refuses it at the PEP


PEOPLE = [
    Principal("User", "alice"),
    Principal("User", "bob", {"level": 4}, [("Team", "infra")]),
    Principal("User", "carol", {"level": 2}, [("Team", "infra"), ("Team", "ops")]),
    Principal("Agent", "bot", {}, [("Team", "ops")]),
]
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("files.read_file", {"path": "src/b.py"}),
    ("files.read_file", {"path": "link/b.py"}),
    ("files.read_file", {"path": "out/x"}),
    ("files.read_file", {"path": ".env"}),
    ("files.write_file", {"path": "src/new.py", "content": "x"}),
    ("files.write_file", {"path": "./src//../src/new.py", "content": "x"}),
    ("files.write_file", {"path": "docs/new.md", "content": "x"}),
    ("files.write_file", {"path": ".env", "content": "x"}),
    ("files.write_file", {"path": "docs/.env", "content": "x"}),
    ("files.write_file", {"path": ".git/config", "content": "x"}),
    ("files.write_file", {"path": "loop/x", "content": "x"}),
    ("files.move_file", {"source": "src/b.py", "destination": "docs/b.py"}),
    ("files.move_file", {"source": "a/b.py", "destination": ".env"}),
    ("files.list_dir", {"path": "."}),
    ("files.search", {"pattern": "x", "path": "src"}),
    ("shell.run", {"command": "git status"}),
    ("shell.run", {"command": "git status -s"}),
    ("shell.run", {"command": "git  'status'"}),
    ("shell.run", {"command": "git push"}),
    ("shell.run", {"command": "ls -la src"}),
    ("shell.run", {"command": "ls ../.."}),
    ("shell.run", {"command": "rm -rf /"}),
    ("shell.run", {"command": "pytest -q"}),
    ("files.read_file", {"path": 7}),
]
"""Every policy and rule above decides at least one of these for one of PEOPLE."""


@pytest.mark.parametrize("kind", KINDS)
async def test_every_policy_decides_the_same_there_as_here(
    setup: dict[str, Any], kind: str
) -> None:
    local, through, remote = _harnesses(setup, kind)
    outcomes: set[str] = set()
    reasons: set[str] = set()
    async with remote:
        for principal in PEOPLE:
            for tool, arguments in CALLS:
                here = await local.decide(principal=principal, tool=tool, arguments=arguments)
                there = await through.decide(principal=principal, tool=tool, arguments=arguments)
                assert (there.outcome, there.reasons, there.message) == (
                    here.outcome,
                    here.reasons,
                    here.message,
                ), (kind, principal, tool, arguments, here.to_json(), there.to_json())
                outcomes.add(here.outcome)
                reasons.update(here.reasons)
    # The matrix reaches every effect and every policy: agreement means something.
    assert {"allow", "ask", "deny", "invalid"} <= outcomes, outcomes
    ids = {
        "principals": {
            "read-all",
            "infra-writes",
            "ask-writes-in-docs",
            "no-env",
            "ops-git-status",
        },
        "coding": {"read-freely", "ask-before-write", "no-git-internals", "shell-allowlist"},
        "rules": {"allow:shell.run(command=git status*)", "ask:files.move_file"},
    }[kind]
    assert ids <= reasons, ids - reasons


@settings(max_examples=25)
@given(
    kind=st.sampled_from(KINDS),
    cases=st.lists(st.tuples(principals, calls()), min_size=1, max_size=6),
)
async def test_a_remote_decision_is_the_local_decision(
    setup: dict[str, Any], kind: str, cases: list[tuple[Principal, tuple[str, dict[str, Any]]]]
) -> None:
    local, through, remote = _harnesses(setup, kind)
    async with remote:
        for principal, (tool, arguments) in cases:
            here = await local.decide(principal=principal, tool=tool, arguments=arguments)
            there = await through.decide(principal=principal, tool=tool, arguments=arguments)
            assert (there.outcome, there.reasons) == (here.outcome, here.reasons), (
                kind,
                principal,
                tool,
                arguments,
                here.to_json(),
                there.to_json(),
            )
            if here.outcome in ("ask", "deny"):
                assert there.message == here.message
            if there.verdict is not None:
                assert there.verdict["evaluator"] == "authzen"
                assert there.verdict["errors"] == here.verdict["errors"] if here.verdict else True


@settings(max_examples=8)
@given(
    kind=st.sampled_from(KINDS),
    cases=st.lists(st.tuples(principals, calls()), min_size=1, max_size=30),
)
async def test_a_replay_through_the_pdp_flips_nothing(
    setup: dict[str, Any], kind: str, cases: list[tuple[Principal, tuple[str, dict[str, Any]]]]
) -> None:
    local, through, remote = _harnesses(setup, kind)
    lines = [
        json.dumps(
            {
                "principal": {
                    "type": p.type,
                    "id": p.id,
                    "attrs": dict(p.attrs),
                    "parents": [list(x) for x in p.parents],
                },
                "tool": tool,
                "arguments": arguments,
            }
        )
        for p, (tool, arguments) in cases
    ]
    report = await replay_async(lines, through, baseline=local)
    assert report.flips == 0, [f.to_json() for f in report.flip_list]
    assert report.outcomes == report.baseline_outcomes
    assert report.calls == len(cases)
    assert not report.errors, report.errors
    await remote.aclose()
