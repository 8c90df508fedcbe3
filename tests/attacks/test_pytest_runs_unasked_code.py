"""Attacks on the bundled setup through ``pytest``, which the coding pack runs without an ask.

The setup a user gets (``clearance run`` with no ``clearance.toml``): the ``coding`` Cedar
pack over the ``files`` and ``shell`` tools in the workspace, a ``PathScope`` guardrail.
``shell-allowlist`` permits ``pytest`` with a list of harmless options, without asking, as
long as ``context.facts.command.outside_root`` is false. These tests show code that no one
allowed to run, running through that permit:

- pytest follows symlinks to directories (and files) it finds while collecting, so a
  symlink in the workspace that leads out makes ``pytest -q`` import and run code from
  outside the workspace, while the command fact says ``outside_root: false`` (the fact
  walks below the named directories for ``grep -R`` and ``ls -L``, not for pytest);
- pytest runs any file named on its command line, not only tests: a ``.txt`` or ``.rst``
  file's ``>>>`` lines as doctests, any ``.py`` module at import. So one approved write of
  an innocent-looking text file (its middle elided on the terminal) becomes code that the
  unasked ``pytest docs/notes.txt`` runs; and scripts already in the repository run too.

Each test is a real harness built by ``build_harness(Config.default(workspace))``, real
files and symlinks, and a real pytest subprocess; the evidence of code running is a file
the code writes outside the workspace.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from clearance import MemoryJournal, Principal
from clearance.config import Config, build_harness
from clearance.harness.approvals import Answer, MemoryGrantStore, PermissionAsk

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(shutil.which("pytest") is None, reason="needs pytest on PATH"),
]

ALICE = Principal("User", "alice")


def marker_code(marker: Path) -> str:
    return f"import pathlib; pathlib.Path({str(marker)!r}).write_text('ran')"


async def run_calls(
    workspace: Path,
    calls: list[tuple[str, dict[str, Any]]],
    answer: Callable[[PermissionAsk], Answer] = lambda ask: "deny",
) -> tuple[list[Any], list[PermissionAsk]]:
    """Run ``calls`` in one session of the default configuration over ``workspace``."""
    asks: list[PermissionAsk] = []

    def on_ask(ask: PermissionAsk) -> Answer:
        asks.append(ask)
        return answer(ask)

    config = Config.default(workspace)
    outcomes = []
    async with build_harness(
        config, journal=MemoryJournal(), grant_store=MemoryGrantStore()
    ) as harness:
        session = await harness.create_session(principal=ALICE, on_permission_ask=on_ask)
        for n, (name, arguments) in enumerate(calls):
            outcomes.append(await session.call_tool(name, arguments, call_id=f"c{n}"))
    return outcomes, asks


@pytest.mark.parametrize("command", ["pytest -q", "pytest -q tests"])
async def test_pytest_does_not_run_tests_reached_through_a_symlink_out_of_the_workspace(
    tmp_path: Path, command: str
) -> None:
    workspace = tmp_path / "workspace"
    (workspace / "tests").mkdir(parents=True)
    (workspace / "tests" / "test_ok.py").write_text("def test_ok():\n    pass\n")
    outside = tmp_path / "shared"  # e.g. a monorepo's shared package, beside the workspace
    outside.mkdir()
    marker = tmp_path / "outside-code-ran"
    (outside / "test_shared.py").write_text(
        marker_code(marker) + "\n\ndef test_shared():\n    pass\n"
    )
    (workspace / "tests" / "shared").symlink_to(outside, target_is_directory=True)

    (outcome,), asks = await run_calls(workspace, [("shell__run", {"command": command})])

    # Today: allowed by shell-allowlist, nobody asked, and the code outside ran.
    assert not marker.exists(), (
        f"code outside the workspace ran without being allowed ({outcome.decision}, "
        f"{len(asks)} asks)"
    )


async def test_pytest_does_not_run_a_test_file_that_links_out_of_the_workspace(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    marker = tmp_path / "outside-code-ran"
    (outside / "checks.py").write_text(marker_code(marker) + "\n\ndef test_x():\n    pass\n")
    (workspace / "test_linked.py").symlink_to(outside / "checks.py")

    (outcome,), _ = await run_calls(workspace, [("shell__run", {"command": "pytest -q"})])

    assert not marker.exists(), f"code outside the workspace ran ({outcome.decision})"


async def test_an_approved_text_file_is_not_run_as_code_by_unasked_pytest(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "workspace"
    (workspace / "docs").mkdir(parents=True)
    marker = tmp_path / "doctest-ran"
    # What the person approves: a notes file. On the terminal the middle of a long content
    # is elided, so the one code line need not even be shown.
    notes = (
        "Release notes\n=============\n\n"
        + "Lorem ipsum dolor sit amet. " * 40
        + f"\n\n>>> {marker_code(marker)}\n\n"
        + "Consectetur adipiscing elit. " * 40
        + "\n"
    )

    def approve_writes(ask: PermissionAsk) -> Answer:
        return "allow_once" if ask.qualified_name == "files.write_file" else "deny"

    outcomes, asks = await run_calls(
        workspace,
        [
            ("files__write_file", {"path": "docs/notes.txt", "content": notes}),
            ("shell__run", {"command": "pytest -q docs/notes.txt"}),
        ],
        answer=approve_writes,
    )

    assert outcomes[0].status == "ok", outcomes[0].text  # the approved write happened
    # Today the person was asked only about the write; pytest then ran the file unasked.
    assert not marker.exists(), (
        "a text file the person approved was run as code; asked about: "
        f"{[a.qualified_name for a in asks]}"
    )


async def test_unasked_pytest_does_not_run_a_non_test_script(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    (workspace / "scripts").mkdir(parents=True)
    marker = tmp_path / "deploy-ran"
    # A script with effects at import, as deploy and migration scripts have.
    (workspace / "scripts" / "deploy.py").write_text(marker_code(marker) + "\n")

    (outcome,), asks = await run_calls(
        workspace, [("shell__run", {"command": "pytest -q scripts/deploy.py"})]
    )

    assert not marker.exists(), (
        f"a non-test script ran through the pytest permit ({outcome.decision}, {len(asks)} asks)"
    )


async def test_unasked_pytest_does_not_write_outside_the_workspace_through_its_cache_link(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "workspace"
    (workspace / "tests").mkdir(parents=True)
    (workspace / "tests" / "test_a.py").write_text("def test_a():\n    assert False\n")
    victim = tmp_path / "config"  # any directory of the user's, outside the workspace
    victim.mkdir()
    (victim / "settings").write_text("keep\n")
    (workspace / ".pytest_cache").symlink_to(victim, target_is_directory=True)

    (outcome,), asks = await run_calls(workspace, [("shell__run", {"command": "pytest -q"})])

    written = sorted(str(p.relative_to(victim)) for p in victim.rglob("*") if p.is_file())
    assert written == ["settings"], (
        f"pytest wrote outside the workspace ({outcome.decision}, {len(asks)} asks): {written}"
    )
