"""Issue 34, orphans: a host that dies while its calls wait on asks takes its asks with it.

A real host process (a harness over a SQLite or PostgreSQL store, its call waiting on an ask
that nobody answers) is killed with SIGKILL, or stopped (SIGSTOP) until the lease it renews
lapses. Then, through the real CLI in subprocesses: the ask is listed and shown as ``host
gone``, naming its host, and cannot be answered (a clear refusal, exit 2); the inbox shows
it without an answer form and refuses an answer; and once the host's journal is recovered
(its next start, or ``clearance store recover``) the call is in ``clearance journal`` with
its end, ``interrupted``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from postgres_support import fresh_schema
from support import approver

from clearance.harness.ask_store import HOST_GONE
from clearance.harness.ask_store_sqlite import SqliteAskStore
from clearance.harness.journal import JsonlJournal, SqliteJournal

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")

HOST = textwrap.dedent(
    """
    import json
    import sys

    import anyio

    from clearance import Harness, Principal, Tool, ToolRegistry
    from clearance.policy import LocalEvaluator

    kind, journal_at, asks_at, host, lease = sys.argv[1:6]
    SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}


    async def never_answered(ask):  # a person who never comes back to the terminal
        await anyio.sleep_forever()


    async def main():
        registry = ToolRegistry()
        registry.register("files", [Tool("delete", lambda a, c: "deleted", input_schema=SCHEMA)])
        if kind in ("sqlite", "jsonl"):
            from clearance.harness.ask_store_sqlite import SqliteAskStore
            from clearance.harness.journal import JsonlJournal, SqliteJournal

            sink = SqliteJournal if kind == "sqlite" else JsonlJournal
            journal, asks = sink(journal_at), SqliteAskStore(asks_at)
        else:
            from clearance.harness.ask_store_postgres import PostgresAskStore
            from clearance.harness.journal import PostgresJournal

            journal, asks = PostgresJournal(journal_at, host=host), PostgresAskStore(asks_at)
        async with Harness(
            registry,
            evaluator=LocalEvaluator(ask=["files.*"]),
            journal=journal,
            ask_store=asks,
            host_lease=float(lease),
        ) as harness:
            session = await harness.create_session(
                principal=Principal("User", "alice"), on_permission_ask=never_answered
            )
            result = await session.call_tool(
                "files__delete", {"path": "build/x"}, call_id="c1", turn_id="t1"
            )
            print(json.dumps({"status": result.status}), flush=True)
        asks.close()


    anyio.run(main)
    """
)


def _clearance(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "clearance", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def _start_host(
    kind: str, journal: str, asks: str, host: str, lease: float
) -> subprocess.Popen[str]:
    env = {**os.environ, "CLEARANCE_HOST": host}
    return subprocess.Popen(
        [sys.executable, "-c", HOST, kind, journal, asks, host, str(lease)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _waiting_ask(db: str, child: subprocess.Popen[str]) -> dict[str, Any]:
    """The one ask the host raised, once it is in the store (as ``asks list --json``)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert child.poll() is None, child.communicate()
        listed = _clearance("asks", "list", "--db", db, "--json")
        if listed.returncode == 0:
            found = json.loads(listed.stdout)
            if found:
                (ask,) = found
                return dict(ask)
        time.sleep(0.2)
    raise AssertionError("the host raised no ask")


def _listed(db: str) -> dict[str, Any]:
    listed = _clearance("asks", "list", "--db", db, "--json")
    assert listed.returncode == 0, listed.stderr
    (ask,) = json.loads(listed.stdout)
    return dict(ask)


def _check_gone(db: str, ask_id: str, host: str) -> None:
    """Every surface of the CLI shows the ask as its host gone, and refuses to answer it."""
    ask = _listed(db)
    assert (ask["ask_id"], ask["status"], ask["closed_why"]) == (ask_id, "closed", HOST_GONE)
    assert ask["host"] == host
    table = _clearance("asks", "list", "--db", db)
    assert table.returncode == 0
    assert "host gone" in table.stdout and host in table.stdout, table.stdout
    shown = _clearance("asks", "show", ask_id, "--db", db)
    assert shown.returncode == 0
    assert f"its host {host} is gone" in shown.stdout, shown.stdout
    approver("oncall")
    refused = _clearance("asks", "approve", ask_id, "--db", db, "--approver", "oncall")
    assert refused.returncode == 2, refused.stdout
    assert "cannot be answered" in refused.stderr and f"'{host}' is gone" in refused.stderr
    assert _listed(db)["status"] == "closed"  # nothing answered it


def _check_inbox(db: str, ask_id: str, host: str) -> None:
    """The inbox shows the ask as its host gone, with no answer form, and refuses (409)
    an answer sent anyway."""
    import anyio
    import httpx

    from clearance.inbox import Inbox

    async def check() -> None:
        store = SqliteAskStore(db)
        try:
            inbox = Inbox(store, users=["oncall"])
            token = inbox.people.tokens["oncall"]
            base = "http://127.0.0.1:8766"
            transport = httpx.ASGITransport(app=inbox.asgi_app(port=8766))
            bearer = {"authorization": f"Bearer {token}"}
            async with httpx.AsyncClient(transport=transport, base_url=base) as client:
                cards = (await client.get("/asks", headers=bearer)).json()["cards"]
                assert f'data-ask-id="{ask_id}"' in cards and "host-gone" in cards
                assert f"Its host <code>{host}</code> is gone" in cards
                assert 'action="/answer"' not in cards  # no answer form
                sent = await client.post(
                    "/answer",
                    data={"ask_id": ask_id, "decision": "allow_once"},
                    headers={"origin": base, "accept": "application/json", **bearer},
                )
                assert sent.status_code == 409, sent.text
                assert "cannot be answered" in sent.json()["message"]
                assert "goes on" not in sent.json()["message"]
        finally:
            store.close()

    anyio.run(check)


def _journal_call(db: str) -> dict[str, Any]:
    shown = _clearance("journal", "--db", db, "--json")
    assert shown.returncode == 0, shown.stderr
    (call,) = [c for c in json.loads(shown.stdout) if c["call_id"] == "c1"]
    return dict(call)


@pytest.fixture
def killed() -> Iterator[list[subprocess.Popen[str]]]:
    children: list[subprocess.Popen[str]] = []
    yield children
    for child in children:
        if child.poll() is None:
            child.kill()
        child.communicate(timeout=30)


def test_sqlite_a_killed_hosts_ask_is_gone_and_its_call_ends_interrupted(
    tmp_path: Path, killed: list[subprocess.Popen[str]]
) -> None:
    journal, asks = str(tmp_path / "journal.db"), str(tmp_path / "asks.db")
    child = _start_host("sqlite", journal, asks, "orphan-host", 30.0)
    killed.append(child)
    ask = _waiting_ask(asks, child)
    assert (ask["status"], ask["host"], ask["principal"]) == (
        "pending",
        "orphan-host",
        'User::"alice"',
    )
    assert ask["session_id"] and ask["instance"]
    assert "orphan-host" in _clearance("asks", "list", "--db", asks).stdout

    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    # The lease has 30 s left, but the host's process is gone (same machine: its pid).
    _check_gone(asks, ask["ask_id"], "orphan-host")

    _check_inbox(asks, ask["ask_id"], "orphan-host")

    # The host's next start recovers its journal: the call that waited gets its end.
    SqliteJournal(journal).close()
    call = _journal_call(journal)
    assert call["status"] == "interrupted" and call["decision"] == "ask"
    assert call["principal"] == 'User::"alice"' and call["tool"] == "files.delete"
    assert "waited for its approval" in call["message"]
    SqliteJournal(journal).close()  # recovered once: no second end
    listed = _clearance("journal", "--db", journal, "--json")
    assert len(json.loads(listed.stdout)) == 1


def test_sqlite_a_stalled_hosts_lease_lapses_and_its_call_is_denied(
    tmp_path: Path, killed: list[subprocess.Popen[str]]
) -> None:
    """A host that stops renewing (SIGSTOP: alive, frozen) loses its ask when its lease
    lapses; woken up, its call sees that and ends denied instead of waiting on."""
    journal, asks = str(tmp_path / "journal.db"), str(tmp_path / "asks.db")
    child = _start_host("sqlite", journal, asks, "stalled-host", 1.0)
    killed.append(child)
    ask = _waiting_ask(asks, child)
    time.sleep(0.6)  # a few renewals: the lease holds while it renews
    assert _listed(asks)["status"] == "pending"
    os.kill(child.pid, signal.SIGSTOP)
    try:
        time.sleep(1.6)
        _check_gone(asks, ask["ask_id"], "stalled-host")
    finally:
        os.kill(child.pid, signal.SIGCONT)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    assert json.loads(out.strip().splitlines()[-1]) == {"status": "denied"}
    call = _journal_call(journal)
    assert call["status"] == "denied"
    store = SqliteAskStore(asks)
    try:
        assert store.get(ask["ask_id"]).closed_why == HOST_GONE  # type: ignore[union-attr]
    finally:
        store.close()


def test_postgres_a_killed_hosts_ask_is_gone_and_recover_ends_its_call(
    killed: list[subprocess.Popen[str]],
) -> None:
    with fresh_schema() as (url, _schema):
        child = _start_host("postgres", url, url, "pg-orphan", 30.0)
        killed.append(child)
        ask = _waiting_ask(url, child)
        assert (ask["status"], ask["host"]) == ("pending", "pg-orphan")
        before = _clearance("journal", "--db", url, "--json")
        assert [c for c in json.loads(before.stdout or "[]") if c["call_id"] == "c1"] == []

        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        _check_gone(url, ask["ask_id"], "pg-orphan")

        deadline = time.monotonic() + 30
        while True:  # the server drops the dead host's lock once it sees the socket close
            done = _clearance("store", "recover", "--host", "pg-orphan", "--url", url, "--json")
            if done.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {"host": "pg-orphan", "interrupted": 1}
        call = _journal_call(url)
        assert call["status"] == "interrupted" and call["decision"] == "ask"
        assert call["principal"] == 'User::"alice"'
        again = _clearance("store", "recover", "--host", "pg-orphan", "--url", url, "--json")
        assert json.loads(again.stdout)["interrupted"] == 0  # one end per call


def test_sqlite_a_paused_ask_a_host_then_waits_on_ends_with_that_host(
    tmp_path: Path, killed: list[subprocess.Popen[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A paused call's ask has no lease (it outlives its process, to be answered later);
    when a host then waits on it (the same call tried again, waiting), the ask takes that
    host's lease, so it is gone when that host dies instead of pending forever."""
    import anyio

    from clearance import Harness, Principal, Tool, ToolRegistry
    from clearance.policy import LocalEvaluator

    journal, asks = str(tmp_path / "journal.db"), str(tmp_path / "asks.db")
    monkeypatch.setenv("CLEARANCE_HOST", "orphan-host")

    async def pause() -> None:
        registry = ToolRegistry()
        schema = {"type": "object", "properties": {"path": {"type": "string"}}}
        registry.register("files", [Tool("delete", lambda a, c: "x", input_schema=schema)])
        store = SqliteAskStore(asks)
        async with Harness(
            registry, evaluator=LocalEvaluator(ask=["files.*"]), ask_store=store
        ) as harness:
            session = await harness.create_session(principal=Principal("User", "alice"))
            paused = await session.authorize(
                "files__delete", {"path": "build/x"}, call_id="c1", wait=False
            )
            assert paused.status == "pending"
        store.close()

    anyio.run(pause)
    paused = _listed(asks)
    assert (paused["status"], paused["instance"]) == ("pending", None)

    child = _start_host("sqlite", journal, asks, "orphan-host", 30.0)
    killed.append(child)
    deadline = time.monotonic() + 60
    while _listed(asks)["instance"] is None:  # the host waits on it: its lease now
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, "the waiting host never took the ask"
        time.sleep(0.2)
    assert _listed(asks)["ask_id"] == paused["ask_id"]  # the same ask, not a second one

    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    _check_gone(asks, paused["ask_id"], "orphan-host")


def test_jsonl_a_killed_hosts_call_that_waited_ends_interrupted_at_its_next_start(
    tmp_path: Path, killed: list[subprocess.Popen[str]]
) -> None:
    """A JSON-lines journal recovers a call that waited on its ask as SQLite does: its next
    open appends the call's one ``call_decided``, ``interrupted``."""
    journal, asks = str(tmp_path / "journal.jsonl"), str(tmp_path / "asks.db")
    child = _start_host("jsonl", journal, asks, "orphan-host", 30.0)
    killed.append(child)
    ask = _waiting_ask(asks, child)
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    before = Path(journal).read_text().splitlines()
    assert json.loads(before[-1])["type"] == "permission_asked"

    JsonlJournal(journal).close()
    call = _journal_call(journal)
    assert (call["status"], call["decision"]) == ("interrupted", "ask")
    assert "waited for its approval" in call["message"]
    [ended] = [json.loads(line) for line in Path(journal).read_text().splitlines()[len(before) :]]
    assert ended["data"]["ask"]["ask_id"] == ask["ask_id"]
    JsonlJournal(journal).close()  # recovered once: no second end
    assert len(Path(journal).read_text().splitlines()) == len(before) + 1
