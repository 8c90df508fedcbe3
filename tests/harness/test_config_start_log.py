"""``[journal] start_log`` with ``store = "postgresql://..."``: the configuration's way to
give the PostgreSQL journal its local start log (``PostgresJournal(start_log=...)``), and
the files tools keep their hands off it (its rows go into the shared journal when the host
restarts: a tool that wrote it would forge records)."""

from __future__ import annotations

from pathlib import Path

import pytest
from postgres_support import fresh_schema

from clearance import Principal
from clearance.config import build_harness, load_config
from clearance.errors import ConfigError
from clearance.harness.approvals import Answer, PermissionAsk

pytestmark = pytest.mark.anyio

ALICE = Principal("User", "alice")


def write_config(where: Path, text: str) -> Path:
    config = where / "clearance.toml"
    config.write_text(text)
    return config


def test_start_log_is_read_beside_a_store(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        'store = "postgresql://db.internal/clearance"\n'
        '[journal]\nstart_log = "state/starts.log"\n[evaluator]\nkind = "noop"\n',
    )
    assert load_config(config).journal.start_log == tmp_path / "state" / "starts.log"
    # Without it the server commits each start first.
    config.write_text('store = "postgresql://db.internal/clearance"\n[evaluator]\nkind = "noop"\n')
    assert load_config(config).journal.start_log is None


def test_start_log_without_a_store_is_an_error_naming_it(tmp_path: Path) -> None:
    config = write_config(
        tmp_path, '[journal]\nstart_log = "starts.log"\n[evaluator]\nkind = "noop"\n'
    )
    with pytest.raises(ConfigError, match=r"clearance.toml:2: .*start_log is the PostgreSQL"):
        load_config(config)


async def test_the_harness_journals_through_the_start_log_and_tools_cannot_touch_it(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "project"
    workspace.mkdir()
    log = workspace / "state" / "starts.log"
    asked: list[PermissionAsk] = []

    def approve(ask: PermissionAsk) -> Answer:
        asked.append(ask)
        return "allow_once"

    with fresh_schema() as (url, _):
        config = load_config(
            write_config(
                workspace,
                f'store = "{url}"\n[journal]\nstart_log = "state/starts.log"\n'
                '[evaluator]\nkind = "noop"\n[tools.files]\nroot = "."\n',
            )
        )
        async with build_harness(config) as harness:
            session = await harness.create_session(principal=ALICE, on_permission_ask=approve)
            (workspace / "notes.txt").write_text("hello")
            read = await session.call_tool("files__read_file", {"path": "notes.txt"})
            assert read.ok and "hello" in read.text
            assert log.exists()  # the journal writes its starts there
            for name, arguments in (
                ("files__read_file", {"path": "state/starts.log"}),
                ("files__write_file", {"path": "state/starts.log", "content": "[]\n"}),
                ("files__write_file", {"path": "state/starts.log.old", "content": "[]\n"}),
                ("files__move_file", {"source": "state/starts.log", "destination": "x"}),
            ):
                outcome = await session.call_tool(name, arguments)
                assert not outcome.ok, (name, outcome)
            events = list(harness.journal.events())
        assert not log.exists()  # a clean close removes it
        assert not (workspace / "x").exists()
        assert not (workspace / "state" / "starts.log.old").exists()
    assert next(e.data["status"] for e in events if e.type == "tool_finished") == "ok"
