"""A running gateway takes new policies without a restart (issue 32): SIGHUP reloads them
(it used to kill the gateway), a set that does not load leaves the last good one in force,
and the directory is watched as the library's ``watch=True`` watches it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from clearance import Principal, SqliteJournal, ToolRegistry
from clearance.config import build_evaluator, load_config
from clearance.policy.cedar import CedarEvaluator

TIME_SERVER = Path(sys.executable).parent / "mcp-server-time"
CLOCK = '@id("clock") permit(principal, action == Action::"time.get_current_time", resource);\n'


def _project(tmp_path: Path) -> Path:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "p.cedar").write_text(CLOCK)
    config = tmp_path / "clearance.toml"
    config.write_text(
        '[evaluator]\nkind = "cedar"\npolicies = "policies"\n\n'
        '[journal]\npath = "journal.db"\n\n'
        "[gateway]\nprincipal = 'User::\"alice\"'\n\n"
        f'[[mcp_servers]]\nname = "time"\nprogram = "{TIME_SERVER}"\n'
        'read_only = ["get_current_time"]\n'
    )
    return config


def _wait_for(log: Path, text: str, process: subprocess.Popen[bytes], seconds: float = 60) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        shown = log.read_text()
        if text in shown:
            return shown
        if process.poll() is not None:
            pytest.fail(f"the gateway exited ({process.returncode}): {shown}")
        time.sleep(0.05)
    pytest.fail(f"{text!r} never came: {log.read_text()}")


def test_sighup_reloads_the_policies_and_keeps_the_last_good_set(tmp_path: Path) -> None:
    assert TIME_SERVER.exists(), "pip install mcp-server-time (the test extra)"
    config = _project(tmp_path)
    log = tmp_path / "gateway.err"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLEARANCE")}
    with open(log, "wb") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "clearance", "gateway", "--config", str(config),
             "--transport", "http", "--port", "0", "--token-file", str(tmp_path / "tok")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, cwd=tmp_path,
            env=env,
        )  # fmt: skip
    try:
        _wait_for(log, "listening on", process)
        (tmp_path / "policies" / "p.cedar").write_text(CLOCK.replace("clock", "clock-2"))
        process.send_signal(signal.SIGHUP)
        _wait_for(log, "SIGHUP: policies reloaded (sha256:", process)
        (tmp_path / "policies" / "p.cedar").write_text("permit(principal, action syntax")
        process.send_signal(signal.SIGHUP)
        shown = _wait_for(log, "the last good set stays in force", process)
        assert "p.cedar:1" in shown
        assert process.poll() is None  # still serving
    finally:
        process.terminate()
        process.wait(timeout=30)
    # Both reloads are in the journal too (written at the latest when the gateway closes).
    journal = SqliteJournal(tmp_path / "journal.db")
    try:
        reloads = [e.data for e in journal.events() if e.type == "policies_reloaded"]
    finally:
        anyio.run(journal.aclose)
    assert [(r["loaded"], r["how"]) for r in reloads] == [(True, "reload"), (False, "reload")]
    assert "p.cedar:1" in reloads[1]["error"]
    assert reloads[1]["policy_version"] == reloads[0]["policy_version"]  # the last good set


def test_a_configured_cedar_directory_is_watched_unless_told_not_to(tmp_path: Path) -> None:
    config = _project(tmp_path)
    watched = build_evaluator(load_config(config))
    assert isinstance(watched, CedarEvaluator) and watched._watch
    config.write_text(
        config.read_text().replace(
            'policies = "policies"\n', 'policies = "policies"\nwatch = false\n'
        )
    )
    once = build_evaluator(load_config(config))
    assert isinstance(once, CedarEvaluator) and not once._watch


@pytest.mark.anyio
async def test_a_shadow_set_in_the_configuration_is_decided_beside_and_journaled(
    tmp_path: Path,
) -> None:
    # [evaluator] shadow: a candidate set decided on every call beside the live one,
    # journaled, never enforced; build_harness (and so the gateway) takes it from the file.
    from clearance.config import build_harness
    from clearance.harness.journal_sqlite import read_sqlite
    from clearance.toolsets.files import register_files

    (tmp_path / "live").mkdir()
    (tmp_path / "live" / "p.cedar").write_text(
        '@id("reads") permit(principal, action == Action::"files.read_file", resource);'
    )
    (tmp_path / "candidate").mkdir()
    (tmp_path / "candidate" / "p.cedar").write_text(
        '@id("reads") permit(principal, action == Action::"files.read_file", resource);\n'
        '@id("no-notes") forbid(principal, action, resource)\n'
        '  when { context.input has path && context.input.path like "notes*" };'
    )
    (tmp_path / "notes.txt").write_text("n")
    config_path = tmp_path / "clearance.toml"
    config_path.write_text(
        '[evaluator]\nkind = "cedar"\npolicies = "live"\nshadow = "candidate"\n\n'
        '[journal]\npath = "journal.db"\n\n[approvals]\ngrants = "grants.db"\n'
    )
    config = load_config(config_path)
    assert config.evaluator.shadow == (tmp_path / "candidate").resolve()
    registry = ToolRegistry()
    register_files(registry, tmp_path)
    async with build_harness(config, registry=registry) as harness:
        session = await harness.create_session(principal=Principal("User", "alice"))
        ran = await session.call_tool("files__read_file", {"path": "notes.txt"}, call_id="c1")
    assert ran.status == "ok"  # the shadow never decides
    (decided,) = [e for e in read_sqlite(tmp_path / "journal.db") if e.type == "call_decided"]
    shadow = decided.data["shadow"]
    assert shadow["effect"] == "deny" and shadow["reasons"] == ["no-notes"]
    assert shadow["agrees"] is False
