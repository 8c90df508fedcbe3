"""MCP clients without elicitation (issue 14): an ask stays pending, a person answers it
with the real ``clearance asks`` console script, and the client's next identical call gets
the answer. The pending result never says how to answer (rule R13); the gateway's log
does, for the person.

The official MCP client, without an ``elicitation_callback`` (so it declares no
elicitation), talks to ``python -m clearance gateway`` over stdio and HTTP, with the test
upstream server behind it (tests/mcp/upstream_server.py), which records every call that
reaches it: a call that was not approved must never show up there.
"""

from __future__ import annotations

import functools
import os
import secrets
import shlex
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from support import approver

from clearance import CallContext, ConfigError, Harness, Principal, Tool, ToolRegistry
from clearance.config import load_gateway_config
from clearance.harness.ask_store_sqlite import SqliteAskStore
from clearance.harness.journal import SqliteJournal
from clearance.mcp.gateway import Gateway, PrincipalToken
from clearance.policy import LocalEvaluator

pytestmark = pytest.mark.anyio

Upstream = Any  # tests/mcp/conftest.py: the `upstream` fixture

CLI = Path(sys.executable).parent / "clearance"
"""The ``clearance`` console script of this environment."""


def write_config(tmp_path: Path, upstream: Upstream, *, gateway: str = "") -> Path:
    """A clearance.toml serving the test upstream: ``up.echo`` allowed, ``up.write_note``
    asks."""
    config = tmp_path / "clearance.toml"
    env = ", ".join(f'{k} = "{v}"' for k, v in upstream.env.items())
    config.write_text(
        f"""
[evaluator]
kind = "local"
allow = ["up.echo"]
ask = ["up.write_note"]

[journal]
path = "journal.db"

[approvals]
ask_timeout = 20

[gateway]
principal = 'User::"alice"'
{gateway}

[[mcp_servers]]
name = "up"
program = "{upstream.program}"
args = {upstream.args!r}
env = {{ {env} }}
tools = ["up.echo", "up.write_note"]
"""
    )
    return config


def text(result: types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


def outcome(result: types.CallToolResult) -> dict[str, Any]:
    assert result.meta is not None
    found = result.meta["clearance/outcome"]
    assert isinstance(found, dict)
    return found


def pending(result: types.CallToolResult) -> str:
    """The ask id of a pending result (checking that it is one, and says so)."""
    assert result.is_error, text(result)
    assert outcome(result)["status"] == "pending", text(result)
    ask_id = outcome(result)["ask_id"]
    assert isinstance(ask_id, str) and f"(ask {ask_id})" in text(result)
    return ask_id


def command(ask_id: str, verb: str, *, db: Path | None = None) -> list[str]:
    """``clearance asks <verb> ASK [--db DB]`` as argv, as a person types it."""
    return [str(CLI), "asks", verb, ask_id, *(["--db", str(db)] if db is not None else [])]


def tells_nothing_of_how_to_answer(result: types.CallToolResult) -> None:
    """R13: nothing the model sees tells it how to answer."""
    body = text(result)
    for hint in ("clearance", "asks approve", "inbox", "--db", "answer_ask", "approvers"):
        assert hint not in body, body


def notes(upstream: Upstream) -> list[str]:
    """What reached the upstream ``write_note``, in order."""
    return [c["args"]["text"] for c in upstream.calls() if c["tool"] == "write_note"]


async def run_cli(argv: list[str], *, cwd: Path) -> str:
    """Run the real console script; its stdout (it must succeed)."""
    done = await anyio.run_process(argv, cwd=cwd, check=False, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


async def asks(*args: str, cwd: Path) -> str:
    return await run_cli([str(CLI), "asks", *args], cwd=cwd)


@asynccontextmanager
async def stdio_gateway(config: Path, **options: Any) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "clearance", "gateway", "--config", str(config)],
        cwd=config.parent,
        # This environment (the SDK passes only a few variables by default): the gateway
        # then reads the tests' approver directory, as the CLI processes do.
        env=dict(os.environ),
    )
    async with Client(params, **options) as client:
        yield client


async def test_stdio_ask_is_pending_then_answered_with_the_cli(
    tmp_path: Path, upstream: Upstream
) -> None:
    config = write_config(tmp_path, upstream)
    with anyio.fail_after(90):
        # No elicitation_callback: the client declares no elicitation.
        async with stdio_gateway(config) as client:
            first = await client.call_tool("up__write_note", {"text": "one"})
            ask_id = pending(first)
            body = text(first)
            assert "up__write_note needs a person's approval" in body
            assert '  text: "one"' in body
            assert "do not try to approve it" in body
            tells_nothing_of_how_to_answer(first)
            assert "call up__write_note again with the same arguments" in body
            assert notes(upstream) == []

            # Tried again before anyone answered: the same ask, still not run.
            assert pending(await client.call_tool("up__write_note", {"text": "one"})) == ask_id
            listed = await asks("list", cwd=tmp_path)
            assert ask_id in listed and listed.count("ask_") == 1
            assert notes(upstream) == []

            approver("carol")
            # The gateway runs from the configuration's directory: there `clearance asks`
            # finds the store by itself, without --db.
            await run_cli([*command(ask_id, "approve"), "--by", "carol"], cwd=tmp_path)
            ran = await client.call_tool("up__write_note", {"text": "one"})
            assert not ran.is_error and text(ran) == "one"
            assert outcome(ran)["status"] == "ok"
            assert notes(upstream) == ["one"]

            # allow_once: the next identical call asks again.
            second = pending(await client.call_tool("up__write_note", {"text": "one"}))
            assert second != ask_id
            assert notes(upstream) == ["one"]

            # An approval covers its own call only: other arguments stay pending.
            other = pending(await client.call_tool("up__write_note", {"text": "two"}))
            await asks("approve", second, "--by", "carol", cwd=tmp_path)
            assert pending(await client.call_tool("up__write_note", {"text": "two"})) == other
            assert notes(upstream) == ["one"]
            again = await client.call_tool("up__write_note", {"text": "one"})
            assert not again.is_error and notes(upstream) == ["one", "one"]

            # Denied: the retry is denied and never reaches the upstream server.
            await asks("deny", other, "--by", "carol", cwd=tmp_path)
            denied = await client.call_tool("up__write_note", {"text": "two"})
            assert denied.is_error and outcome(denied)["status"] == "denied", text(denied)
            assert notes(upstream) == ["one", "one"]

            # allow_always: later identical calls run without an ask.
            kept = pending(await client.call_tool("up__write_note", {"text": "kept"}))
            await asks("approve", kept, "--answer", "allow_always", "--by", "carol", cwd=tmp_path)
            for _ in range(3):
                done = await client.call_tool("up__write_note", {"text": "kept"})
                assert not done.is_error and outcome(done)["status"] == "ok", text(done)
            assert notes(upstream) == ["one", "one", "kept", "kept", "kept"]
            assert "no pending asks" in await asks("list", cwd=tmp_path)

    events = list(SqliteJournal(tmp_path / "journal.db").events())
    decided = [e.data for e in events if e.type == "permission_decided"]
    answered = [d for d in decided if d["answer"] != "pending"]
    assert [(d["answer"], d["by"], d["via"]) for d in answered] == [
        ("allow_once", "carol", "cli"),
        ("allow_once", "carol", "cli"),
        ("deny", "carol", "cli"),
        ("allow_always", "carol", "cli"),
    ]
    # Each run is on record from its start to its end, as clearance ran it.
    finished = [e for e in events if e.type == "tool_finished"]
    assert [e.data["status"] for e in finished] == ["ok"] * 5


async def test_pending_text_is_escaped(tmp_path: Path, upstream: Upstream) -> None:
    """What the arguments carry cannot act on the terminal or hide text in the message a
    person reads (shown as visible escapes, as in every approval surface)."""
    config = write_config(tmp_path, upstream)
    hostile = "\x1b]52;c;aGk=\x07\x1b[2J\u202etxt.exe"
    with anyio.fail_after(60):
        async with stdio_gateway(config) as client:
            result = await client.call_tool("up__write_note", {"text": hostile})
            pending(result)
    body = text(result)
    for raw in ("\x1b", "\x07", "\u202e"):
        assert raw not in body
    assert "\\u001b]52;c;aGk=\\u0007\\u001b[2J\\u202etxt.exe" in body
    assert notes(upstream) == []


async def test_deny_fallback_still_denies(tmp_path: Path, upstream: Upstream) -> None:
    config = write_config(tmp_path, upstream, gateway='ask_fallback = "deny"')
    with anyio.fail_after(60):
        async with stdio_gateway(config) as client:
            result = await client.call_tool("up__write_note", {"text": "no"})
            assert result.is_error and outcome(result)["status"] == "denied"
            assert "cannot be asked" in text(result)
            assert "clearance asks" not in text(result)
            echoed = await client.call_tool("up__echo", {"text": "fine"})
            assert text(echoed) == "fine"
    assert notes(upstream) == []
    assert "no pending asks" in await asks("list", cwd=tmp_path)


@asynccontextmanager
async def http_gateway(config: Path, cwd: Path) -> AsyncIterator[tuple[str, str]]:
    """``clearance gateway --transport http`` run from ``cwd``: its URL and token."""
    token_file = cwd / "gateway.token"
    log = cwd / "gateway.err"
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
            cwd=cwd,
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
                await process.wait()


@asynccontextmanager
async def http_client(url: str, token: str, **options: Any) -> AsyncIterator[Client]:
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        async with Client(streamable_http_client(url, http_client=http), **options) as client:
            yield client


async def test_http_pending_names_the_store_and_sessions_keep_their_rules(
    tmp_path: Path, upstream: Upstream
) -> None:
    """Run from another directory, the gateway names its ask store (``--db``) in the
    commands, which work as given from anywhere. A sessionless (2026) client's
    ``allow_session`` counts once; a handshake-era client's lasts its MCP session."""
    config = write_config(tmp_path, upstream)
    elsewhere = tmp_path / "elsewhere"
    shell = tmp_path / "shell"
    elsewhere.mkdir()
    shell.mkdir()
    store = (tmp_path / "journal.db").resolve()
    async with http_gateway(config, elsewhere) as (url, token):
        with anyio.fail_after(90):
            async with http_client(url, token) as client:
                first = await client.call_tool("up__write_note", {"text": "http"})
                ask_id = pending(first)
                tells_nothing_of_how_to_answer(first)
                # The person's view: the gateway's log (stderr) names the store.
                err = elsewhere / "gateway.err"
                wanted = f"clearance asks approve|deny {ask_id} --db "
                with anyio.fail_after(10):
                    while wanted not in err.read_text():  # noqa: ASYNC110 (a child's stderr)
                        await anyio.sleep(0.05)
                assert f"--db {shlex.quote(str(store))}" in err.read_text()
                approver("dana")
                await run_cli([*command(ask_id, "approve", db=store), "--by", "dana"], cwd=shell)
                ran = await client.call_tool("up__write_note", {"text": "http"})
                assert not ran.is_error and text(ran) == "http"

                # Sessionless: allow_session has no session to live in, so it counts once.
                asked = await client.call_tool("up__write_note", {"text": "session"})
                argv = command(pending(asked), "approve", db=store)
                await run_cli([*argv, "--answer", "allow_session", "--by", "dana"], cwd=shell)
                ran = await client.call_tool("up__write_note", {"text": "session"})
                assert not ran.is_error, text(ran)
                pending(await client.call_tool("up__write_note", {"text": "session"}))
                assert notes(upstream) == ["http", "session"]

            # A handshake-era client without elicitation, with an MCP session.
            async with http_client(url, token, mode="legacy") as client:
                assert client.protocol_version == "2025-11-25"
                asked = await client.call_tool("up__write_note", {"text": "legacy"})
                argv = command(pending(asked), "approve", db=store)
                await run_cli([*argv, "--answer", "allow_session", "--by", "dana"], cwd=shell)
                for _ in range(2):
                    ran = await client.call_tool("up__write_note", {"text": "legacy"})
                    assert not ran.is_error, text(ran)
            # A new MCP session: its grant ended with the old one.
            async with http_client(url, token, mode="legacy") as client:
                pending(await client.call_tool("up__write_note", {"text": "legacy"}))
    assert notes(upstream) == ["http", "session", "legacy", "legacy"]


ALICE = Principal("User", "alice")
BOB = Principal("User", "bob")
NOTE = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
    "additionalProperties": False,
}


@asynccontextmanager
async def in_process(
    tmp_path: Path, ran: list[str], **harness_options: Any
) -> AsyncIterator[tuple[Harness, str, dict[Principal, str]]]:
    """An in-process HTTP gateway (alice and bob each with a token) over a harness whose
    ``t.note`` asks; ``ran`` collects what the tool ran with."""

    async def note(arguments: dict[str, Any], ctx: CallContext) -> str:
        text = str(arguments["text"])
        ran.append(text)
        return text

    registry = ToolRegistry()
    registry.register("t", [Tool("note", note, input_schema=NOTE)])
    tokens = {ALICE: secrets.token_urlsafe(32), BOB: secrets.token_urlsafe(32)}
    async with Harness(registry, evaluator=LocalEvaluator(ask=["t.note"]), **harness_options) as h:
        gateway = Gateway(h, principal=ALICE)
        assert gateway.ask_fallback == "pending"
        urls: list[str] = []
        ready = anyio.Event()

        def on_ready(url: str) -> None:
            urls.append(url)
            ready.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(
                functools.partial(
                    gateway.serve_http,
                    [PrincipalToken(p, t) for p, t in tokens.items()],
                    port=0,
                    ready=on_ready,
                )
            )
            with anyio.fail_after(10):
                await ready.wait()
            yield h, urls[0], tokens
            tg.cancel_scope.cancel()


async def test_an_answer_is_for_its_principal_only(tmp_path: Path) -> None:
    """Alice's approved ask never lets Bob's identical call run (asks in memory: only the
    gateway's process answers, here in-process)."""
    ran: list[str] = []
    async with in_process(tmp_path, ran) as (harness, url, tokens):
        with anyio.fail_after(60):
            async with (
                http_client(url, tokens[ALICE]) as alice,
                http_client(url, tokens[BOB]) as bob,
            ):
                asked = await alice.call_tool("t__note", {"text": "same"})
                alice_ask = pending(asked)
                tells_nothing_of_how_to_answer(asked)
                bob_ask = pending(await bob.call_tool("t__note", {"text": "same"}))
                assert bob_ask != alice_ask

                answered = await harness.answer_ask(alice_ask, "allow_once", by="ops", via="inbox")
                assert answered.principal == str(ALICE)
                assert pending(await bob.call_tool("t__note", {"text": "same"})) == bob_ask
                assert ran == []
                done = await alice.call_tool("t__note", {"text": "same"})
                assert not done.is_error and text(done) == "same"
                assert ran == ["same"]
                assert pending(await bob.call_tool("t__note", {"text": "same"})) == bob_ask

                # allow_once is once even when the client retries several times at once.
                again = pending(await alice.call_tool("t__note", {"text": "same"}))
                await harness.answer_ask(again, "allow_once", by="ops", via="inbox")
                results: list[types.CallToolResult] = []

                async def retry() -> None:
                    results.append(await alice.call_tool("t__note", {"text": "same"}))

                async with anyio.create_task_group() as tg:
                    for _ in range(5):
                        tg.start_soon(retry)
                assert sorted(outcome(r)["status"] for r in results) == ["ok"] + ["pending"] * 4
    assert ran == ["same", "same"]


async def test_a_store_path_is_quoted_for_the_shell(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A store file whose path has a space and a quote: the ``--db`` the gateway's log
    gives the person works when pasted into a shell (here: split as a shell would, then
    run); the result the model sees names none of it."""
    folder = tmp_path / "my asks"
    folder.mkdir()
    store_path = folder / "it's.db"
    ran: list[str] = []
    store = SqliteAskStore(store_path)
    async with in_process(tmp_path, ran, ask_store=store) as (_, url, tokens):
        with anyio.fail_after(60):
            async with http_client(url, tokens[ALICE]) as alice:
                asked = await alice.call_tool("t__note", {"text": "quoted"})
                ask_id = pending(asked)
                tells_nothing_of_how_to_answer(asked)
                (logged,) = [
                    r.getMessage() for r in caplog.records if f"ask {ask_id} " in r.getMessage()
                ]
                argv = shlex.split(logged.split(", then ")[1].split(" (or ")[0])
                assert argv[:3] == ["clearance", "asks", "approve|deny"]
                assert argv[4:] == ["--db", str(store_path)]
                approver("erin")
                await run_cli(
                    [str(CLI), "asks", "approve", *argv[3:], "--by", "erin"], cwd=tmp_path
                )
                done = await alice.call_tool("t__note", {"text": "quoted"})
                assert not done.is_error, text(done)
    store.close()
    assert ran == ["quoted"]


def test_ask_fallback_values(tmp_path: Path) -> None:
    config = tmp_path / "clearance.toml"
    config.write_text("[gateway]\n")
    assert load_gateway_config(config).ask_fallback == "pending"
    for value in ("pending", "deny", "allow_once"):
        config.write_text(f"[gateway]\nask_fallback = '{value}'\n")
        assert load_gateway_config(config).ask_fallback == value
    config.write_text("[gateway]\nask_fallback = 'later'\n")
    with pytest.raises(ConfigError, match=r"ask_fallback must be one of pending, deny.*'later'"):
        load_gateway_config(config)

    harness = Harness(ToolRegistry(), evaluator=LocalEvaluator())
    gateway = Gateway(harness, principal=ALICE)
    assert gateway.ask_fallback == "pending"
    with pytest.raises(ValueError, match="ask_fallback must be one of pending"):
        Gateway(harness, principal=ALICE, ask_fallback="later")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="ask_fallback must be one of pending"):
        gateway.ask_fallback = "later"  # type: ignore[assignment]
    assert gateway.ask_fallback == "pending"
