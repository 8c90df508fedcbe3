"""MCP servers as tool sources, against real servers: the test upstream, git and time."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import mcp_types
import pytest

from clearance import ConfigError, Harness, Principal, ToolRegistrationError, ToolRegistry
from clearance.mcp import start_stdio_server
from clearance.mcp.sources import prepare_tools
from clearance.policy.local import LocalEvaluator
from clearance.policy.noop import NoopEvaluator

pytestmark = pytest.mark.anyio

ALICE = Principal("User", "alice")
Upstream = Any  # tests/mcp/conftest.py: the `upstream` fixture


def program(name: str) -> str:
    """A console script of this environment (mcp-server-git and mcp-server-time are test
    dependencies: missing, the test fails rather than skips)."""
    path = Path(sys.executable).parent / name
    assert path.exists(), f"{name} is missing: pip install mcp-server-git mcp-server-time"
    return str(path)


async def until(condition: Callable[[], bool]) -> None:
    """Wait for what another process records in a file (no event crosses processes)."""
    with anyio.fail_after(5):
        while not condition():  # noqa: ASYNC110
            await anyio.sleep(0.02)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout


async def test_registers_selected_tools_with_schemas_and_flag_provenance(
    upstream: Upstream, caplog: pytest.LogCaptureFixture
) -> None:
    registry = ToolRegistry()
    async with Harness(registry, evaluator=NoopEvaluator()) as harness:
        with caplog.at_level(logging.WARNING, logger="clearance.mcp"):
            tools = await start_stdio_server(
                harness,
                name="up",
                program=upstream.program,
                args=upstream.args,
                env=upstream.env,
                tools=None,
                read_only=["echo"],
                trust_annotations=False,
            )
        names = sorted(t.qualified_name for t in tools)
        # 'Shout' becomes a clearance name; the string-schema tool is skipped, with a warning.
        assert names == ["up.echo", "up.fail", "up.shout", "up.slow", "up.write_note"]
        assert "bad_schema" in caplog.text
        echo = registry.get("up__echo")
        assert echo.qualified_name == "up.echo" and echo.source == "mcp" and echo.server == "up"
        assert echo.input_schema["properties"] == {"text": {"type": "string"}}
        assert echo.read_only and echo.annotations["clearance.read_only_source"] == "config"
        # The server says slow is read-only, but annotations are not trusted by default.
        slow = registry.get("up.slow")
        assert slow.annotations["readOnlyHint"] is True
        assert not slow.read_only and slow.annotations["clearance.read_only_source"] == "default"


async def test_selection_trust_and_unknown_patterns(upstream: Upstream) -> None:
    registry = ToolRegistry()
    async with Harness(registry, evaluator=NoopEvaluator()) as harness:
        tools = await start_stdio_server(
            harness,
            name="up",
            program=upstream.program,
            args=upstream.args,
            env=upstream.env,
            tools=["up.echo", "slow", "up.write_*"],
            trust_annotations=True,
        )
        assert sorted(t.name for t in tools) == ["echo", "slow", "write_note"]
        assert "up.fail" not in registry and "up__shout" not in registry
        slow = registry.get("up.slow")
        assert slow.read_only and slow.annotations["clearance.read_only_source"] == "server"
        assert not registry.get("up.write_note").read_only
        with pytest.raises(ConfigError, match="bad_schema"):
            # Asked for explicitly, a skipped tool is an error, never silently missing.
            await start_stdio_server(
                harness,
                name="up2",
                program=upstream.program,
                args=upstream.args,
                env=upstream.env,
                tools=["up2.bad_schema"],
            )
        # A namespace the registry refuses is refused before any process starts.
        with pytest.raises(ToolRegistrationError, match="already registered"):
            await start_stdio_server(
                harness, name="up", program=upstream.program, args=upstream.args, env=upstream.env
            )
        with pytest.raises(ToolRegistrationError, match="reserved"):
            await start_stdio_server(harness, name="mcp", program=upstream.program)
    assert len(upstream.started()) == 2


async def test_a_program_that_does_not_start_is_a_config_error(tmp_path: Path) -> None:
    async with Harness(ToolRegistry(), evaluator=NoopEvaluator()) as harness:
        with pytest.raises(ConfigError, match="could not be started"):
            await start_stdio_server(harness, name="none", program=str(tmp_path / "missing"))


async def test_calls_are_forwarded_and_upstream_errors_name_the_server(
    upstream: Upstream,
) -> None:
    registry = ToolRegistry()
    evaluator = LocalEvaluator(allow=["up.echo", "up.fail", "up.shout"], deny=["up.write_note"])
    async with Harness(registry, evaluator=evaluator) as harness:
        await start_stdio_server(
            harness, name="up", program=upstream.program, args=upstream.args, env=upstream.env
        )
        session = await harness.create_session(principal=ALICE)
        ok = await session.call_tool("up__echo", {"text": "hi"}, call_id="c1")
        assert ok.status == "ok" and ok.text == "hi"
        shout = await session.call_tool("up.shout", {"text": "hi"}, call_id="c2")
        assert shout.text == "HI"
        failed = await session.call_tool("up__fail", {}, call_id="c3")
        assert failed.status == "error"
        assert "upstream server 'up' reported an error" in failed.text
        assert "no such thing" in failed.text
        denied = await session.call_tool("up__write_note", {"text": "x"}, call_id="c4")
        assert denied.status == "denied"
    assert [c["tool"] for c in upstream.calls()] == ["echo", "Shout", "fail"]


async def test_progress_is_journaled_and_cancellation_reaches_the_server(
    upstream: Upstream,
) -> None:
    registry = ToolRegistry()
    async with Harness(registry, evaluator=NoopEvaluator()) as harness:
        await start_stdio_server(
            harness, name="up", program=upstream.program, args=upstream.args, env=upstream.env
        )
        session = await harness.create_session(principal=ALICE)
        done = await session.call_tool("up__slow", {"seconds": 0.2, "steps": 3}, call_id="p1")
        assert done.status == "ok"
        progress = [
            e.data["message"]
            for e in harness.journal.events(call_id="p1")
            if e.type == "tool_progress"
        ]
        assert progress == ["step 1", "step 2", "step 3"]

        with anyio.fail_after(10):
            async with session.events() as events, anyio.create_task_group() as tg:

                async def call() -> None:
                    await session.call_tool("up__slow", {"seconds": 30, "steps": 30}, call_id="p2")

                tg.start_soon(call)
                async for item in events:
                    assert item.event is not None
                    if item.event.type == "tool_progress" and item.event.call_id == "p2":
                        tg.cancel_scope.cancel()
                        break
        finished = [e for e in harness.journal.events(call_id="p2") if e.type == "tool_finished"]
        assert [e.data["status"] for e in finished] == ["cancelled"]
        # The server got notifications/cancelled and stopped its handler.
        await until(lambda: any(c.get("cancelled") for c in upstream.calls()))


async def test_call_timeout_cancels_upstream_and_names_the_server(upstream: Upstream) -> None:
    async with Harness(ToolRegistry(), evaluator=NoopEvaluator()) as harness:
        await start_stdio_server(
            harness,
            name="up",
            program=upstream.program,
            args=upstream.args,
            env=upstream.env,
            call_timeout=0.3,
        )
        session = await harness.create_session(principal=ALICE)
        outcome = await session.call_tool("up__slow", {"seconds": 20, "steps": 20}, call_id="t1")
        assert outcome.status == "error"
        assert "upstream server 'up' did not answer 'slow' within 0.3s" in outcome.text
        await until(lambda: any(c.get("cancelled") for c in upstream.calls()))
        assert (
            await session.call_tool("up__echo", {"text": "still"}, call_id="t2")
        ).text == "still"


async def test_a_killed_server_fails_the_call_cleanly_and_restarts_on_the_next(
    upstream: Upstream,
) -> None:
    async with Harness(ToolRegistry(), evaluator=NoopEvaluator()) as harness:
        await start_stdio_server(
            harness, name="up", program=upstream.program, args=upstream.args, env=upstream.env
        )
        session = await harness.create_session(principal=ALICE)
        assert (await session.call_tool("up__echo", {"text": "a"}, call_id="k1")).ok

        # Killed in the middle of a call: that call fails with a clear error.
        outcome = []
        async with session.events() as events, anyio.create_task_group() as tg:

            async def call() -> None:
                outcome.append(
                    await session.call_tool("up__slow", {"seconds": 30, "steps": 30}, call_id="k2")
                )

            tg.start_soon(call)
            with anyio.fail_after(10):
                async for item in events:
                    assert item.event is not None
                    if item.event.type == "tool_progress":
                        upstream.kill()
                        break
        assert outcome[0].status == "error"
        assert "upstream server 'up' exited or dropped the connection" in outcome[0].text
        assert "started again on the next call" in outcome[0].text

        # The next call starts a new server process and succeeds.
        again = await session.call_tool("up__echo", {"text": "b"}, call_id="k3")
        assert again.ok and again.text == "b"
        assert len(upstream.started()) == 2

        # Killed while idle: the very next call already recovers.
        upstream.kill()
        await anyio.sleep(0.2)
        idle = await session.call_tool("up__echo", {"text": "c"}, call_id="k4")
        assert idle.ok and idle.text == "c"
        assert len(upstream.started()) == 3


async def test_restart_never_reports_the_server_gone(upstream: Upstream) -> None:
    async with Harness(ToolRegistry(), evaluator=NoopEvaluator()) as harness:
        await start_stdio_server(
            harness,
            name="up",
            program=upstream.program,
            args=upstream.args,
            env=upstream.env,
            restart="never",
        )
        session = await harness.create_session(principal=ALICE)
        upstream.kill()
        await anyio.sleep(0.2)
        gone = await session.call_tool("up__echo", {"text": "a"}, call_id="n1")
        assert gone.status == "error" and "restart='never'" in gone.text
        assert len(upstream.started()) == 1


async def test_git_and_time_servers_as_tool_sources(git_repo: Path) -> None:
    registry = ToolRegistry()
    evaluator = LocalEvaluator(
        allow=["git.git_status", "git.git_log", "time.get_current_time"], deny=["git.git_add"]
    )
    async with Harness(registry, evaluator=evaluator) as harness:
        git_tools = await start_stdio_server(
            harness,
            name="git",
            program=program("mcp-server-git"),
            args=["--repository", str(git_repo)],
            tools=["git.git_status", "git.git_log", "git.git_add"],
            read_only=["git_status", "git_log"],
        )
        assert sorted(t.name for t in git_tools) == ["git_add", "git_log", "git_status"]
        await start_stdio_server(
            harness,
            name="time",
            program=program("mcp-server-time"),
            tools=["time.get_current_time"],
        )
        session = await harness.create_session(principal=ALICE)
        status = await session.call_tool(
            "git__git_status", {"repo_path": str(git_repo)}, call_id="g1"
        )
        assert status.ok and "README.md" in status.text
        now = await session.call_tool("time__get_current_time", {"timezone": "UTC"}, call_id="g2")
        assert now.ok and '"timezone": "UTC"' in now.text
        add = await session.call_tool(
            "git__git_add", {"repo_path": str(git_repo), "files": ["README.md"]}, call_id="g3"
        )
        assert add.status == "denied"
    # The denied git_add never reached the server: nothing is staged.
    assert git(git_repo, "diff", "--cached", "--name-only") == ""


async def test_tools_whose_names_collide_are_both_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``GIT_STATUS`` and ``git_status`` both become ``git_status``: neither is registered,
    so no pattern or policy meant for one can apply to the other."""
    upstream: Any = SimpleNamespace(name="up", handler=lambda remote: lambda arguments, ctx: None)
    listed = [
        mcp_types.Tool(name=name, input_schema={"type": "object"})
        for name in ("GIT_STATUS", "echo", "git_status", "Git.Status", "git_log")
    ]
    with caplog.at_level(logging.WARNING, logger="clearance.mcp"):
        tools = prepare_tools(upstream, listed, None, ["git_status"], trust_annotations=False)
    assert [t.name for t in tools] == ["echo", "git_log"]
    assert "'GIT_STATUS', 'git_status', 'Git.Status'" in caplog.text
    # asked for by name, the refused tool is an error, never silently missing or swapped
    for pattern in ("GIT_STATUS", "git_status", "up.git_status"):
        with pytest.raises(ConfigError, match="matches no usable tool"):
            prepare_tools(upstream, listed, [pattern], None, trust_annotations=False)
