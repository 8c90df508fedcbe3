"""One request must never stop the gateway (issue 38).

A request id with a lone surrogate stopped the SQLite journal's writer for good (every
later call of every client denied, and the start log it left blocked every restart); a lone
surrogate in a call's arguments tore down the upstream server every client shares; a 3 MB
request id became part of the call id and of every record of the call. Here hostile ids,
tool names and arguments (lone surrogates, NUL, huge, deeply nested, ``NaN``) go through
the gateway's HTTP entry points (the 2026-07-28 single-exchange POST, which parses with
``json.loads``, and a handshake-era session), over real HTTP to an in-process gateway with
a real SQLite journal and the test upstream server (tests/mcp/upstream_server.py); after
each, the official MCP client's next call must be served, and at the end the journal must
be whole (every call decided once, every start ended), reopen cleanly, and the upstream
must never have been restarted.
"""

from __future__ import annotations

import functools
import json
import math
import secrets
import sys
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from anyio.from_thread import start_blocking_portal
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.inbound import encode_header_value

from clearance import CallContext, Harness, Principal, Tool, ToolRegistry
from clearance.harness.journal import SqliteJournal, read_sqlite
from clearance.mcp import start_stdio_server
from clearance.mcp.gateway import Gateway, PrincipalToken
from clearance.policy import LocalEvaluator

pytestmark = pytest.mark.anyio

ALICE = Principal("User", "alice")
HERE = Path(__file__).resolve().parent
MODERN = "2026-07-28"
LEGACY = "2025-11-25"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "hostile", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@dataclass
class Served:
    url: str
    token: str
    harness: Harness
    journal_path: Path
    upstream_pids: Path


def _registry() -> ToolRegistry:
    async def echo(arguments: dict[str, Any], ctx: CallContext) -> str:
        return json.dumps(arguments)[:100]

    reg = ToolRegistry()
    schema = {"type": "object"}
    reg.register("t", [Tool("echo", echo, input_schema=schema, read_only=True)])
    return reg


@asynccontextmanager
async def _serving(tmp: Path) -> AsyncIterator[Served]:
    journal_path = tmp / "journal.db"
    pids = tmp / "upstream.pids"
    journal = SqliteJournal(journal_path)
    evaluator = LocalEvaluator(allow=["t.*", "up.*"])
    async with Harness(_registry(), evaluator=evaluator, journal=journal) as h:
        await start_stdio_server(
            h,
            name="up",
            program=sys.executable,
            args=[str(HERE / "upstream_server.py")],
            env={"UPSTREAM_PIDS": str(pids)},
            tools=["up.echo"],
        )
        gateway = Gateway(h, principal=ALICE)
        token = secrets.token_urlsafe(32)
        ready = anyio.Event()
        urls: list[str] = []

        def on_ready(url: str) -> None:
            urls.append(url)
            ready.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(
                functools.partial(
                    gateway.serve_http, [PrincipalToken(ALICE, token)], port=0, ready=on_ready
                )
            )
            with anyio.fail_after(20):
                await ready.wait()
            yield Served(urls[0], token, h, journal_path, pids)
            tg.cancel_scope.cancel()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One gateway for every example (in its own thread and event loop): what one hostile
    request does must not show in the next."""
    tmp = tmp_path_factory.mktemp("hostile")
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(_serving(tmp)) as found,
    ):
        yield found
    # Closed: the journal must be whole, and must reopen without setting anything aside.
    _check_journal(found.journal_path)
    SqliteJournal(found.journal_path).close()
    assert not Path(f"{found.journal_path}-starts.rejected").exists()
    assert len(found.upstream_pids.read_text().split()) == 1  # never restarted


def _check_journal(path: Path) -> None:
    events = read_sqlite(path)
    decided = Counter(e.call_id for e in events if e.type == "call_decided")
    started = Counter(e.call_id for e in events if e.type == "tool_started")
    finished = Counter(e.call_id for e in events if e.type == "tool_finished")
    assert decided and all(n == 1 for n in decided.values())  # R7: one decision per call
    assert started == finished and set(started) <= set(decided)
    for e in events:
        # A call id stays short whatever the request id (a long one is hashed).
        assert e.call_id is None or len(e.call_id) <= 4 + 64 + 1 + 8, e.call_id[:100]
        request_id = e.data.get("context", {}).get("mcp_request_id")
        assert request_id is None or len(str(request_id)) <= 64


# -- hostile values ---------------------------------------------------------------------

LONE = st.sampled_from(["\ud800", "\udfff", "a\udc80b"])
BAD_TEXT = st.one_of(
    LONE,
    st.just("\x00"),
    st.just("nul\x00in"),
    st.text(st.characters(codec="utf-8"), max_size=20),
    st.builds(lambda n: "x" * n, st.sampled_from([65, 5000, 300_000])),
)


def _deep(depth: int, leaf: Any) -> Any:
    value = leaf
    for n in range(depth):
        value = [value] if n % 2 else {"k": value}
    return value


ARGUMENT_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | BAD_TEXT | st.just(math.nan),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(BAD_TEXT, inner, max_size=3),
    max_leaves=6,
)
ARGUMENTS = st.one_of(
    st.dictionaries(BAD_TEXT, ARGUMENT_VALUES, max_size=3),
    st.builds(lambda d, leaf: {"deep": _deep(d, leaf)}, st.sampled_from([63, 65, 190]), LONE),
    st.builds(lambda n: {"big": "y" * n}, st.sampled_from([10, 1_000_000])),
)
REQUEST_IDS = st.one_of(
    st.integers(),
    BAD_TEXT,
    st.just("z" * 3_000_000),
)
NAMES = st.one_of(st.sampled_from(["t__echo", "up__echo", "nope"]), BAD_TEXT)


@dataclass(repr=False)
class Hostile:
    mode: str
    request_id: Any
    name: Any
    arguments: Any

    def __repr__(self) -> str:  # a 3 MB id is not worth printing whole
        parts = (self.mode, self.request_id, self.name, self.arguments)
        return "Hostile(" + ", ".join(_short(ascii(part)) for part in parts) + ")"


def _short(text: str) -> str:
    return text if len(text) <= 300 else f"{text[:150]}...<{len(text)} chars>...{text[-100:]}"


HOSTILE = st.builds(Hostile, st.sampled_from(["modern", "legacy"]), REQUEST_IDS, NAMES, ARGUMENTS)


# -- raw requests -----------------------------------------------------------------------


def _body(request_id: Any, name: Any, arguments: Any, meta: dict[str, Any] | None) -> bytes:
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if meta is not None:
        params["_meta"] = meta
    message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    return json.dumps(message).encode()  # ASCII: lone surrogates and NaN go as written


async def _send(http: httpx2.AsyncClient, served: Served, case: Hostile) -> httpx2.Response:
    auth = {"Authorization": f"Bearer {served.token}", **ACCEPT}
    if case.mode == "modern":
        name = case.name
        try:
            header = encode_header_value(name)
        except UnicodeEncodeError:  # a lone surrogate has no bytes: send something else
            header = "x"
        headers = {
            **auth,
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": "tools/call",
            "Mcp-Name": header,
        }
        return await http.post(
            served.url,
            content=_body(case.request_id, name, case.arguments, ENVELOPE),
            headers=headers,
        )
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": LEGACY,
            "capabilities": {},
            "clientInfo": {"name": "hostile", "version": "0"},
        },
    }
    opened = await http.post(served.url, json=init, headers=auth)
    assert opened.status_code == 200, opened.text
    session = {**auth, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
    session["MCP-Protocol-Version"] = LEGACY
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    await http.post(served.url, json=note, headers=session)
    try:
        return await http.post(
            served.url,
            content=_body(case.request_id, case.name, case.arguments, None),
            headers=session,
        )
    finally:
        await http.delete(served.url, headers=session)


def _answer(response: httpx2.Response) -> dict[str, Any] | None:
    """The JSON-RPC message of a response (JSON or one SSE event), if any."""
    text = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:] for line in text.splitlines() if line.startswith("data:")]
        text = data[-1] if data else ""
    try:
        found = json.loads(text)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


async def _well_behaved(served: Served) -> None:
    headers = {"Authorization": f"Bearer {served.token}"}
    async with (
        create_mcp_http_client(headers=headers) as http,
        Client(streamable_http_client(served.url, http_client=http), mode="auto") as client,
    ):
        for tool in ("t__echo", "up__echo"):
            result = await client.call_tool(tool, {"text": "still here"})
            assert result.meta is not None
            assert result.meta["clearance/outcome"]["status"] == "ok", result


# -- the property -----------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:Generating overly large repr")
@settings(max_examples=25)
@given(case=HOSTILE)
async def test_no_request_stops_the_gateway(served: Served, case: Hostile) -> None:
    with anyio.fail_after(60):
        async with httpx2.AsyncClient(timeout=30) as http:
            try:
                response = await _send(http, served, case)
            except (httpx2.ReadError, httpx2.WriteError, httpx2.RemoteProtocolError):
                # A header past the HTTP server's limit (a huge Mcp-Name): it answers 400
                # and closes the connection while the rest is still being sent.
                response = None
        if response is not None:
            assert response.status_code < 500, response.text[:300]
            answer = _answer(response)
            if answer is not None and "error" in answer:
                message = answer["error"]["message"]
                assert len(message) < 2000  # names what was wrong, without echoing it whole
        await _well_behaved(served)
        writer = served.harness.journal._writer  # type: ignore[attr-defined]
        assert writer.failure is None and writer.is_alive()


async def test_a_bad_value_is_refused_with_a_sentence(served: Served) -> None:
    """Each hostile value refuses its request alone, with ``INVALID_PARAMS`` and a
    sentence naming what was wrong and where."""
    cases = [
        (Hostile("modern", "\ud800", "t__echo", {}), "the request id holds a lone surrogate"),
        (Hostile("modern", 1, "t__echo", {"a": ["\udfff"]}), "at /a/0: a string holds a lone"),
        (Hostile("modern", 1, "t__echo", {"\ud800": 1}), "a key holds a lone surrogate"),
        (Hostile("modern", 1, "t\x00", {}), "the tool name holds a NUL character"),
        (Hostile("modern", 1, "t__echo", {"n": math.nan}), "at /n: nan is not a JSON number"),
        (Hostile("legacy", 1, "t__echo", {"d": _deep(100, 1)}), "nested deeper than 64"),
        (Hostile("legacy", 1, "t" * 300, {}), "the tool name is longer than 256 characters"),
    ]
    async with httpx2.AsyncClient(timeout=30) as http:
        for case, expected in cases:
            answer = _answer(await _send(http, served, case))
            assert answer is not None and answer["error"]["code"] == -32602, answer
            assert expected in answer["error"]["message"], answer["error"]["message"]
    await _well_behaved(served)


async def test_a_huge_request_id_is_hashed_into_the_call_id(served: Served) -> None:
    """A 3 MB request id made every record of its call 3 MB; now the call id holds a hash
    of it, and the call is served."""
    request_id = "z" * 3_000_000
    async with httpx2.AsyncClient(timeout=30) as http:
        answer = _answer(await _send(http, served, Hostile("modern", request_id, "t__echo", {})))
    assert answer is not None and answer["id"] == request_id
    call_id = answer["result"]["_meta"]["clearance/outcome"]["call_id"]
    assert call_id.startswith("mcp-#") and len(call_id) < 40
    records = served.harness.journal.events(call_id=call_id)
    assert [e.type for e in records] == ["call_decided", "tool_started", "tool_finished"]
    assert len(json.dumps([e.to_json() for e in records])) < 10_000


async def test_a_lone_surrogate_never_reaches_the_shared_upstream_server(tmp_path: Path) -> None:
    """A call whose arguments an MCP server cannot be sent (a lone surrogate: the SDK's
    serializer raises mid-write) replaced the server process every client shares, and a
    concurrent call of another client failed. The in-process pipeline accepts such
    arguments (issue 12), so the upstream connection refuses that call alone, before
    anything is written."""
    pids = tmp_path / "pids"
    evaluator = LocalEvaluator(allow=["up.*"])
    async with Harness(ToolRegistry(), evaluator=evaluator) as h:
        await start_stdio_server(
            h,
            name="up",
            program=sys.executable,
            args=[str(HERE / "upstream_server.py")],
            env={"UPSTREAM_PIDS": str(pids)},
            tools=["up.echo", "up.slow"],
        )
        other = await h.create_session(principal=Principal("User", "bob"))
        session = await h.create_session(principal=ALICE)
        slow: list[Any] = []

        async def concurrent() -> None:
            slow.append(await other.call_tool("up__slow", {"seconds": 0.5}, call_id="slow"))

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(concurrent)
                await anyio.sleep(0.1)
                bad = await session.call_tool("up__echo", {"text": "a\ud800"}, call_id="bad")
            assert bad.is_error
            assert "cannot be sent" in bad.text and "lone surrogate" in bad.text
            assert slow[0].ok, slow[0].text
            good = await session.call_tool("up__echo", {"text": "fine"}, call_id="good")
            assert good.ok and good.text == "fine"
    assert len(pids.read_text().split()) == 1


async def test_hostile_requests_over_stdio(tmp_path: Path) -> None:
    """The stdio entry point: its parser refuses a lone surrogate itself; what it lets
    through (a NUL in a name, a huge id, deep arguments, NaN) is refused or bounded by the
    gateway, and the next call is served."""
    config = tmp_path / "clearance.toml"
    config.write_text(
        '[evaluator]\nkind = "local"\nallow = ["up.echo"]\n\n[journal]\npath = "journal.db"\n\n'
        f'[[mcp_servers]]\nname = "up"\nprogram = "{sys.executable}"\n'
        f'args = ["{HERE / "upstream_server.py"}"]\ntools = ["up.echo"]\n'
    )

    def call(request_id: Any, name: str, arguments: Any) -> bytes:
        params = {"name": name, "arguments": arguments}
        message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        return json.dumps(message).encode() + b"\n"

    async with await anyio.open_process(
        [sys.executable, "-m", "clearance", "gateway", "--config", str(config)],
        cwd=tmp_path,
        stderr=None,
    ) as process:
        assert process.stdin is not None and process.stdout is not None
        buffered = b""

        async def answer(request_id: Any) -> dict[str, Any]:
            nonlocal buffered
            while True:
                while b"\n" in buffered:
                    line, buffered = buffered.split(b"\n", 1)
                    found = json.loads(line)
                    if found.get("id") == request_id:
                        return dict(found)
                buffered += await process.stdout.receive()  # type: ignore[union-attr]

        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": LEGACY,
                "capabilities": {},
                "clientInfo": {"name": "hostile", "version": "0"},
            },
        }
        with anyio.fail_after(60):
            await process.stdin.send(json.dumps(init).encode() + b"\n")
            await answer(0)
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            await process.stdin.send(json.dumps(note).encode() + b"\n")
            await process.stdin.send(call(1, "up__echo\x00", {}))
            assert "the tool name holds a NUL" in (await answer(1))["error"]["message"]
            await process.stdin.send(call(2, "up__echo", {"d": _deep(100, 1)}))
            assert "nested deeper than 64" in (await answer(2))["error"]["message"]
            await process.stdin.send(call(3, "up__echo", {"text": "\ud800"}))
            await process.stdin.send(call("z" * 3_000_000, "up__echo", {"text": "big id"}))
            big = await answer("z" * 3_000_000)
            call_id = big["result"]["_meta"]["clearance/outcome"]["call_id"]
            assert call_id.startswith("mcp-#") and len(call_id) < 40
            await process.stdin.send(call(4, "up__echo", {"text": "still here"}))
            served = await answer(4)
            assert served["result"]["content"][0]["text"] == "still here"
            await process.stdin.aclose()
            await process.wait()
    _check_journal(tmp_path / "journal.db")
