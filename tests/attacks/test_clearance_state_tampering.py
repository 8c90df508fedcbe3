"""Attacks on clearance's own state: the journal and grant store, and the configuration.

``build_registry`` gives the files tools the journal and grant store as ``protected_files``:
"files no tool reads, writes, moves or searches ... when they live inside the workspace".
That happens with the default configuration whenever the state directory is under the
workspace (``clearance run`` started in the home directory: ``~/.local/state/clearance/...``)
or when a ``clearance.toml`` puts ``[journal] path`` in it.

- The protection compares the path of the entry a tool names with the protected paths, so
  a move of any *directory above* the journal is an ordinary move: it carries the live
  journal and grant store away (and with them the next run's history and grants), and
  after it the moved files are no longer at a protected path.
- The configuration that decides everything (``./clearance.toml``, read from the current
  directory, which is the workspace) is not protected at all: one approved write replaces
  the evaluator (``kind = "noop"``) for every later run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clearance import Principal
from clearance.config import Config, build_harness, load_config
from clearance.harness.approvals import Answer, MemoryGrantStore, PermissionAsk

pytestmark = pytest.mark.anyio

ALICE = Principal("User", "alice")


def approve(ask: PermissionAsk) -> Answer:
    return "allow_once"


async def call(config: Config, name: str, arguments: dict[str, Any], **options: Any) -> Any:
    async with build_harness(config, **options) as harness:
        session = await harness.create_session(principal=ALICE, on_permission_ask=approve)
        return await session.call_tool(name, arguments)


async def test_moving_a_directory_above_the_journal_does_not_move_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"  # `clearance run` started in the home directory
    home.mkdir()
    monkeypatch.delenv("CLEARANCE_STATE_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))
    config = Config.default(home)
    journal = config.journal.path
    assert journal.is_relative_to(home)  # the state directory is in the workspace

    # A real SqliteJournal and SqliteGrantStore at the default path (build_harness opens them).
    outcome = await call(
        config, "files__move_file", {"source": ".local", "destination": "backup/local"}
    )

    assert journal.exists(), (
        f"the live journal was moved away by files.move_file ({outcome.status}); it is now "
        f"at {sorted(str(p.relative_to(home)) for p in home.rglob('clearance.db'))}"
    )


async def test_the_configuration_in_the_workspace_is_protected_like_the_journal(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "project"
    workspace.mkdir()
    toml = workspace / "clearance.toml"
    toml.write_text(
        '[evaluator]\nkind = "cedar"\npack = "coding"\n\n'
        '[journal]\npath = "../state/clearance.db"\n\n'
        "[tools.files]\n[tools.shell]\n"
    )
    (tmp_path / "state").mkdir()
    config = load_config(toml)

    await call(
        config,
        "files__write_file",
        {"path": "clearance.toml", "content": '[evaluator]\nkind = "noop"\n\n[tools.files]\n'},
        grant_store=MemoryGrantStore(),
    )

    assert load_config(toml).evaluator.kind == "cedar", (
        "the agent rewrote the configuration the next `clearance run` uses"
    )
