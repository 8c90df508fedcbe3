"""The MCP gateway, end to end: `python -m clearance gateway` as a subprocess, the official
MCP client on the other side, real upstream servers behind it (git and the test server)."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from clearance import ConfigError, Harness, Principal, ToolRegistry
from clearance.config import load_gateway_config
from clearance.mcp import connect_server
from clearance.policy.local import LocalEvaluator

Upstream = Any  # tests/mcp/conftest.py: the `upstream` fixture


async def until(condition: Callable[[], bool]) -> None:
    """Wait for what another process records in a file (no event crosses processes)."""
    with anyio.fail_after(5):
        while not condition():  # noqa: ASYNC110
            await anyio.sleep(0.02)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout


def write_config(tmp_path: Path, upstream: Upstream, repo: Path | None = None) -> Path:
    """A clearance.toml serving the test upstream, and mcp-server-git on ``repo`` if given."""
    config = tmp_path / "clearance.toml"
    env = ", ".join(f'{k} = "{v}"' for k, v in upstream.env.items())
    text = f"""
[evaluator]
kind = "local"
allow = ["up.echo", "up.slow"{', "git.git_status", "git.git_log"' if repo else ""}]
ask = ["up.write_note"]
deny = [{'"git.git_add", "git.git_commit"' if repo else ""}]

[journal]
path = "journal.db"

[approvals]
ask_timeout = 20

[gateway]
principal = 'User::"alice"'

[[mcp_servers]]
name = "up"
program = "{upstream.program}"
args = {upstream.args!r}
env = {{ {env} }}
tools = ["up.echo", "up.slow", "up.write_note"]
"""
    if repo is not None:
        text += f"""
[[mcp_servers]]
name = "git"
program = "{Path(sys.executable).parent / "mcp-server-git"}"
args = ["--repository", "{repo}"]
tools = ["git.git_status", "git.git_log", "git.git_add", "git.git_commit"]
read_only = ["git_status", "git_log"]
"""
    config.write_text(text)
    return config


class Answers:
    """An elicitation callback that answers asks from a list, recording each question."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []

    async def __call__(self, context: Any, params: Any) -> types.ElicitResult:
        self.asked.append(params.message)
        answer = self.answers.pop(0)
        if answer == "decline":
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"decision": answer})


def text(result: types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


def status(result: types.CallToolResult) -> str:
    assert result.meta is not None
    return str(result.meta["clearance/outcome"]["status"])


@asynccontextmanager
async def stdio_gateway(config: Path, **options: Any) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "clearance", "gateway", "--config", str(config)],
        cwd=config.parent,
    )
    async with Client(params, **options) as client:
        yield client


@pytest.mark.anyio
async def test_stdio_gateway_end_to_end(tmp_path: Path, upstream: Upstream, git_repo: Path) -> None:
    config = write_config(tmp_path, upstream, git_repo)
    answers = Answers("allow_once", "deny")
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    with anyio.fail_after(40):
        async with stdio_gateway(config, elicitation_callback=answers) as client:
            listed = sorted(t.name for t in (await client.list_tools()).tools)
            # Only the selected tools exist, under their model aliases.
            assert listed == [
                "git__git_add",
                "git__git_commit",
                "git__git_log",
                "git__git_status",
                "up__echo",
                "up__slow",
                "up__write_note",
            ]
            status_tool = next(
                t for t in (await client.list_tools()).tools if t.name == "git__git_status"
            )
            assert status_tool.annotations is not None and status_tool.annotations.read_only_hint

            allowed = await client.call_tool("git__git_status", {"repo_path": str(git_repo)})
            assert not allowed.is_error and "README.md" in text(allowed)

            # Denied: the reason comes back, and the repository shows nothing reached git.
            head = git(git_repo, "rev-parse", "HEAD")
            denied = await client.call_tool(
                "git__git_add", {"repo_path": str(git_repo), "files": ["README.md"]}
            )
            assert denied.is_error and status(denied) == "denied"
            assert "deny:git.git_add" in text(denied)
            committed = await client.call_tool(
                "git__git_commit", {"repo_path": str(git_repo), "message": "sneaky"}
            )
            assert committed.is_error and "deny:git.git_commit" in text(committed)
            assert git(git_repo, "diff", "--cached", "--name-only") == ""
            assert git(git_repo, "rev-parse", "HEAD") == head

            # Asks go to the client as elicitations (input_required on this 2026 connection).
            once = await client.call_tool("up__write_note", {"text": "approved"})
            assert not once.is_error and text(once) == "approved"
            refused = await client.call_tool("up__write_note", {"text": "refused"})
            assert refused.is_error and status(refused) == "denied"
            assert len(answers.asked) == 2 and "up__write_note" in answers.asked[0]
            notes = [c["args"]["text"] for c in upstream.calls() if c["tool"] == "write_note"]
            assert notes == ["approved"]

            # Upstream progress reaches the client with its numbers.
            slow = await client.call_tool(
                "up__slow", {"seconds": 0.2, "steps": 2}, progress_callback=on_progress
            )
            assert not slow.is_error
            assert seen == [(1.0, 2.0, "step 1"), (2.0, 2.0, "step 2")]

            # A client-side cancel reaches the upstream server as a cancel.
            with anyio.move_on_after(10) as scope:

                async def cancel_on_progress(
                    progress: float, total: float | None, message: str | None
                ) -> None:
                    scope.cancel()

                await client.call_tool(
                    "up__slow", {"seconds": 30, "steps": 30}, progress_callback=cancel_on_progress
                )
            assert scope.cancelled_caught
            await until(lambda: any(c.get("cancelled") for c in upstream.calls()))

            # The upstream server dies mid-call: that call fails cleanly, the next recovers.
            async def kill_on_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                if progress == 1:
                    upstream.kill()

            crashed = await client.call_tool(
                "up__slow", {"seconds": 30, "steps": 30}, progress_callback=kill_on_progress
            )
            assert crashed.is_error
            assert "upstream server 'up' exited or dropped the connection" in text(crashed)
            # A tool that is not listed does not exist: a protocol error, as MCP says.
            with pytest.raises(MCPError, match="Unknown tool"):
                await client.call_tool("git__git_diff", {"repo_path": str(git_repo)})
            recovered = await client.call_tool("up__echo", {"text": "back"})
            assert not recovered.is_error and text(recovered) == "back"
            assert len(upstream.started()) == 2


@pytest.mark.anyio
async def test_stdio_gateway_handshake_era_elicitation(tmp_path: Path, upstream: Upstream) -> None:
    config = write_config(tmp_path, upstream)
    answers = Answers("allow_session")
    with anyio.fail_after(30):
        async with stdio_gateway(config, elicitation_callback=answers, mode="legacy") as client:
            assert client.protocol_version == "2025-11-25"
            first = await client.call_tool("up__write_note", {"text": "one"})
            assert not first.is_error and text(first) == "one"
            # allow_session covers the same call again without asking.
            again = await client.call_tool("up__write_note", {"text": "one"})
            assert not again.is_error
            assert len(answers.asked) == 1
            echoed = await client.call_tool("up__echo", {"text": "hi"})
            assert text(echoed) == "hi"
    assert [c["args"]["text"] for c in upstream.calls() if c["tool"] == "write_note"] == [
        "one",
        "one",
    ]
    # The journal's call ids carry the MCP request ids.
    with sqlite3.connect(tmp_path / "journal.db") as db:
        ids = [
            row[0] for row in db.execute("SELECT call_id FROM events WHERE type = 'call_decided'")
        ]
    db.close()
    assert len(ids) == 3 and all(i.startswith("mcp-") for i in ids)


@asynccontextmanager
async def http_gateway(tmp_path: Path, config: Path) -> AsyncIterator[tuple[str, str]]:
    token_file = tmp_path / "secrets" / "gateway.token"
    log = tmp_path / "gateway.err"
    with open(log, "wb") as err:  # noqa: ASYNC230 (the child's stderr, opened once)
        process = await anyio.open_process(
            [
                sys.executable,
                "-m",
                "clearance",
                "gateway",
                "--config",
                str(config),
                "--transport",
                "http",
                "--port",
                "0",
                "--token-file",
                str(token_file),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            cwd=tmp_path,
        )
    async with process:
        url = ""
        with anyio.fail_after(30):
            while not url:
                for line in log.read_text().splitlines():
                    if "listening on " in line:
                        url = line.split("listening on ", 1)[1].strip()
                if process.returncode is not None:
                    pytest.fail(f"the gateway exited: {log.read_text()}")
                await anyio.sleep(0.05)
        try:
            yield url, token_file.read_text().strip()
        finally:
            process.terminate()
            with anyio.fail_after(20):
                code = await process.wait()
        # SIGTERM shuts the gateway down cleanly.
        assert code == 0, log.read_text()


@asynccontextmanager
async def http_client(url: str, token: str, **options: Any) -> AsyncIterator[Client]:
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        async with Client(streamable_http_client(url, http_client=http), **options) as client:
            yield client


@pytest.mark.anyio
async def test_http_gateway_tokens_and_calls(tmp_path: Path, upstream: Upstream) -> None:
    config = write_config(tmp_path, upstream)
    async with http_gateway(tmp_path, config) as (url, token):
        token_file = tmp_path / "secrets" / "gateway.token"
        assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
        assert len(token) >= 32

        # Without a valid token: 401 and nothing else.
        request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        accept = {"Accept": "application/json, text/event-stream"}
        async with httpx2.AsyncClient() as http:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": token}):
                response = await http.post(url, json=request, headers={**accept, **headers})
                assert response.status_code == 401
                assert response.content == b""
            other = await http.get(url.rsplit("/", 1)[0] + "/anything")
            assert other.status_code == 401

        with anyio.fail_after(30):
            # A 2026-era client without elicitation: its asks wait for a person (the
            # default ask_fallback, "pending"; tests/mcp/test_gateway_pending.py).
            async with http_client(url, token) as client:
                names = {t.name for t in (await client.list_tools()).tools}
                assert names == {"up__echo", "up__slow", "up__write_note"}
                echoed = await client.call_tool("up__echo", {"text": "over http"})
                assert not echoed.is_error and text(echoed) == "over http"
                fallback = await client.call_tool("up__write_note", {"text": "nobody asked"})
                assert fallback.is_error and status(fallback) == "pending"
                assert "needs a person's approval (ask ask_" in text(fallback)
                assert "clearance asks" not in text(fallback)  # R13: never how to answer

            # Sessionless (2026-era) requests share one clearance session for the gateway's
            # life, so an allow_session answer is taken as allow_once: the next call asks again.
            answers = Answers("allow_session", "allow_session")
            async with http_client(url, token, elicitation_callback=answers) as client:
                for _ in range(2):
                    noted = await client.call_tool("up__write_note", {"text": "sessionless"})
                    assert not noted.is_error, text(noted)
                assert len(answers.asked) == 2

            # The gateway is a Streamable HTTP MCP server: a harness can use it as a source.
            registry = ToolRegistry()
            async with Harness(registry, evaluator=LocalEvaluator(allow=["remote.up__echo"])) as h:
                remote = await connect_server(
                    h,
                    name="remote",
                    url=url,
                    headers={"Authorization": f"Bearer {token}"},
                    tools=["remote.up__echo"],
                )
                assert [t.qualified_name for t in remote] == ["remote.up__echo"]
                session = await h.create_session(principal=Principal("User", "carol"))
                chained = await session.call_tool("remote__up__echo", {"text": "via"}, call_id="r1")
                assert chained.ok and chained.text == "via"
            with pytest.raises(ConfigError, match="could not be reached"):
                async with Harness(ToolRegistry(), evaluator=LocalEvaluator()) as h:
                    await connect_server(
                        h, name="remote", url=url, headers={"Authorization": "Bearer wrong"}
                    )

            # A handshake-era client with elicitation gets the ask over its HTTP session.
            answers = Answers("allow_once")
            async with http_client(
                url, token, mode="legacy", elicitation_callback=answers
            ) as client:
                assert client.protocol_version == "2025-11-25"
                noted = await client.call_tool("up__write_note", {"text": "asked over http"})
                assert not noted.is_error and text(noted) == "asked over http"
                assert len(answers.asked) == 1
    assert [c["args"]["text"] for c in upstream.calls() if c["tool"] == "write_note"] == [
        "sessionless",
        "sessionless",
        "asked over http",
    ]


def test_gateway_config_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "clearance.toml"
    cases = {
        "[gateway]\nport = 'x'\n": "port must be an integer",
        "[gateway]\nbogus = 1\n": "unknown key",
        "[[mcp_servers]]\nname = 'a'\nprogram = 'x'\nurl = 'http://h'\n": "exactly one of",
        "[[mcp_servers]]\nname = 'a'\n": "exactly one of",
        "[[gateway.tokens]]\nprincipal = 'User::\"a\"'\n": "token_file",
        "[[mcp_servers]]\nname = 'a'\nprogram = 'x'\n[[mcp_servers]]\nname = 'a'\nprogram = 'y'\n": "two",
        "[[mcp_servers]]\nname = 'a'\nurl = 'http://h'\nheaders = { A = '${CLEARANCE_UNSET_VAR}' }\n": "CLEARANCE_UNSET_VAR",
    }
    for text_, message in cases.items():
        config.write_text(text_)
        with pytest.raises(ConfigError, match=message):
            load_gateway_config(config)
    secret = tmp_path / "alice.token"
    secret.write_text("a-long-enough-token-for-alice\n")
    config.write_text(
        "[gateway]\ntransport = 'http'\nport = 0\nask_fallback = 'allow_once'\n"
        "[[gateway.tokens]]\nprincipal = 'User::\"alice\"'\ntoken_file = 'alice.token'\n"
        "[[mcp_servers]]\nname = 'remote'\nurl = 'http://127.0.0.1:1/mcp'\n"
        "headers = { Authorization = 'Bearer ${CLEARANCE_TEST_SECRET}' }\n"
    )
    monkeypatch.setenv("CLEARANCE_TEST_SECRET", "s3cret")
    loaded = load_gateway_config(config)
    assert loaded.transport == "http" and loaded.port == 0 and loaded.ask_fallback == "allow_once"
    assert loaded.tokens[0].token == "a-long-enough-token-for-alice"
    assert str(loaded.tokens[0].principal) == 'User::"alice"'
    assert "a-long-enough" not in repr(loaded)
    assert loaded.servers[0].headers == {"Authorization": "Bearer s3cret"}


def test_telemetry_middleware_only_when_it_can_go_somewhere() -> None:
    from clearance.mcp.gateway import Gateway
    from clearance.policy import NoopEvaluator

    harness = Harness(ToolRegistry(), evaluator=NoopEvaluator())
    alice = Principal("User", "alice")

    def names(gateway: Gateway) -> list[str]:
        return [type(m).__name__ for m in gateway._server.middleware]

    assert "OpenTelemetryMiddleware" in names(Gateway(harness, principal=alice, telemetry=True))
    assert "OpenTelemetryMiddleware" not in names(
        Gateway(harness, principal=alice, telemetry=False)
    )
    # No tracer provider is installed in the tests: spans would go nowhere.
    assert "OpenTelemetryMiddleware" not in names(Gateway(harness, principal=alice))
