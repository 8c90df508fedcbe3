"""The commands a person runs again and again import only what they use (issue 34).

Start-up time is measured by ``benchmarks/bench_cli_startup.py``; these tests guard the
cause without timing anything: a real subprocess runs each command against a real SQLite
store (a call journaled, a grant, a pending ask) and reports which modules it imported.
Cedar, pydantic, the MCP SDK, the configuration and the verbs not run must not be among
them. The root's help lists every verb as click would, without importing one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import click
import pytest

from clearance import Harness, Principal, SqliteGrantStore, SqliteJournal, Tool, ToolRegistry
from clearance.cli import commands  # noqa: F401  (every verb registered, to compare)
from clearance.cli.main import VERBS, cli
from clearance.harness.ask_store_sqlite import SqliteAskStore
from clearance.policy import LocalEvaluator

HEAVY = (
    "cedarpy",
    "mcp",
    "pydantic",
    "jsonschema_rs",
    "clearance.config._build",
    "clearance.config._guardrails",
    "clearance.config._gateway",
    "clearance.toolsets",
    "clearance.guardrails",
    "clearance.policy.cedar",
    "clearance.harness.session",
    "clearance.harness.journal._records",
    "clearance.tuning._runner",
)
"""Modules none of these commands needs (each costs tens of milliseconds or more): with
``--db`` they do not read the configuration at all, without it they read the file and
build nothing."""

PATH = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}

# Runs one command in this interpreter and prints the modules it imported, as JSON.
PROBE = """
import json, sys
from clearance.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
else:
    code = 0
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


async def _fill(db: Path) -> None:
    registry = ToolRegistry()
    registry.register(
        "notes",
        [
            Tool("read", lambda args, ctx: "text", input_schema=PATH, read_only=True),
            Tool("write", lambda args, ctx: "written", input_schema=PATH),
        ],
    )
    asks = SqliteAskStore(db)
    async with Harness(
        registry,
        evaluator=LocalEvaluator(allow=["notes.read"], ask=["notes.write"]),
        journal=SqliteJournal(db),
        grant_store=SqliteGrantStore(db),
        ask_store=asks,
    ) as harness:
        alice = await harness.create_session(
            principal=Principal("User", "alice"), on_permission_ask=lambda _: "allow_always"
        )
        assert (await alice.call_tool("notes__read", {"path": "a"})).ok
        assert (await alice.call_tool("notes__write", {"path": "b"})).ok  # a grant
        bob = await harness.create_session(principal=Principal("User", "bob"))
        assert (await bob.authorize("notes__write", {"path": "c"})).pending
    asks.close()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("startup") / "clearance.db"
    anyio.run(_fill, db)
    return db


def _imported(*args: str, cwd: Path) -> tuple[str, set[str]]:
    """Run ``clearance ARGS`` in a subprocess: its standard output and imported modules."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    assert report["code"] in (0, None), done.stderr
    return done.stdout, set(report["modules"])


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY or m.startswith(HEAVY))


@pytest.mark.parametrize(
    ("args", "shown", "verb"),
    [
        (("asks", "list"), "notes.write", "asks"),
        (("grants", "list"), "notes.write", "grants"),
        (("journal",), "notes.read", "journal"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, tuple) else "",
)
@pytest.mark.parametrize("given", ["--db", "clearance.toml"])
def test_a_command_imports_only_what_it_uses(
    store: Path, args: tuple[str, ...], shown: str, verb: str, given: str
) -> None:
    if given == "--db":
        out, modules = _imported(*args, "--db", str(store), cwd=store.parent)
        assert "clearance.config" not in modules
    else:
        (store.parent / "clearance.toml").write_text(
            f'[journal]\npath = "{store.name}"\n[evaluator]\nkind = "noop"\n'
        )
        out, modules = _imported(*args, cwd=store.parent)
        assert "clearance.config" in modules  # it read the file
    assert shown in out  # it ran and read the store
    assert not _heavy(modules), _heavy(modules)
    others = {m for v in VERBS.values() for m in v.modules} - set(VERBS[verb].modules)
    assert not others & modules, sorted(others & modules)


def test_the_root_help_imports_no_verb(tmp_path: Path) -> None:
    out, modules = _imported("--help", cwd=tmp_path)
    assert "\n  asks " in out and "\n  journal " in out
    assert not _heavy(modules), _heavy(modules)
    verbs = {m for v in VERBS.values() for m in v.modules}
    assert not verbs & modules, sorted(verbs & modules)


@pytest.mark.parametrize("width", [60, 80, 100, 200])
def test_the_root_help_lists_each_verb_as_click_would(width: int) -> None:
    # commands (imported above) registered every verb: click's own listing reads each
    # verb's help, the lazy one reads VERBS; they must print the same.
    assert sorted(cli.commands) == sorted(VERBS)
    ctx = click.Context(cli, terminal_width=width, max_content_width=width)
    lazy, plain = ctx.make_formatter(), ctx.make_formatter()
    cli.format_commands(ctx, lazy)
    click.Group.format_commands(cli, ctx, plain)
    assert lazy.getvalue() == plain.getvalue()
    assert all(f"\n  {name} " in lazy.getvalue() for name in VERBS)


def test_each_summary_is_the_first_paragraph_of_its_help() -> None:
    for name, verb in VERBS.items():
        help_text = cli.commands[name].help or ""
        assert " ".join(help_text.split("\n\n")[0].split()) == verb.summary, name
