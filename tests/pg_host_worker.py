"""One host of the multi-host test (tests/harness/test_postgres_hosts.py), run as a process.

``python pg_host_worker.py URL INDEX CALLS DIR RESTART``: host ``w<INDEX>`` makes CALLS
calls of ``files.write`` (asked; a grant answers) for ``User::"alice"`` (more when the test
has not yet restarted the server, with RESTART 1, or revoked the grant: it goes on until
DIR/restarted and DIR/revoked exist, and 20 calls after), then raises one ask that
the next host answers and answers the previous host's. Host 0 gives the grant (its first
call is answered ``allow_always`` for any arguments); the others wait for it. A call
that is denied backs off 20 ms, as a client would. It writes DIR/w<INDEX>.json:
every call (id, start and end wall time, status, grant), the calls whose handler ran, and
the ask it raised.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import anyio

from clearance import (
    Answer,
    CallContext,
    Harness,
    JournalError,
    PermissionAsk,
    PermissionDecision,
    Principal,
    Tool,
    ToolRegistry,
)
from clearance.harness.ask_store_postgres import PostgresAskStore
from clearance.harness.grants import GrantScope
from clearance.harness.grants_postgres import PostgresGrantStore
from clearance.harness.journal import PostgresJournal
from clearance.harness.postgres import PostgresDatabase
from clearance.policy import LocalEvaluator

ALICE = Principal("User", "alice")
SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
    "additionalProperties": False,
}


async def main(url: str, index: int, calls: int, out: Path, expect_restart: bool) -> None:
    ran: list[str] = []

    async def write(arguments: dict[str, Any], ctx: CallContext) -> str:
        ran.append(ctx.call_id)
        return "written"

    registry = ToolRegistry()
    registry.register(
        "files",
        [Tool("write", write, input_schema=SCHEMA), Tool("special", write, input_schema=SCHEMA)],
    )
    database = PostgresDatabase(url, timeout=2.0)
    grants = PostgresGrantStore(database)
    asks = PostgresAskStore(database)
    journal = PostgresJournal(url, host=f"w{index}")
    first = [index == 0]

    def answer(ask: PermissionAsk) -> PermissionDecision | Answer:
        if first[0]:
            first[0] = False
            return PermissionDecision("allow_always", scope=GrantScope.tool(), decided_by="w0")
        return "deny"

    records: list[list[Any]] = []
    grant_file = out / "grant"
    async with Harness(
        registry,
        evaluator=LocalEvaluator(ask=["files.*"]),
        grant_store=grants,
        ask_store=asks,
        journal=journal,
        max_queue=10_000,
    ) as harness:
        session = await harness.create_session(principal=ALICE, on_permission_ask=answer)
        if index == 0:
            given = await session.call_tool("files__write", {"text": "grant"}, call_id="grant")
            assert given.ok and given.grant, given
            grant_file.write_text(given.grant)
        while not grant_file.exists():  # noqa: ASYNC110 (another process writes it)
            await anyio.sleep(0.01)
        # At least CALLS calls, and on until the test has restarted the server (when it
        # does) and revoked the grant, and 20 calls after that.
        flags = [out / "revoked"] + ([out / "restarted"] if expect_restart else [])
        n, after = 0, 0
        while n < calls or after < 20:
            if all(f.exists() for f in flags):
                after += 1
            n += 1
            call_id = f"w{index}-{n}"
            start = time.time()
            outcome = await session.call_tool("files__write", {"text": str(n)}, call_id=call_id)
            records.append([call_id, start, time.time(), outcome.status, outcome.grant])
            if outcome.status != "ok":
                await anyio.sleep(0.02)
        ask_record = await ask_phase(harness, index)
    grants.close()
    database.close()
    result = {
        "host": f"w{index}",
        "session": session.id,
        "calls": records,
        "ran": ran,
        "ask": ask_record,
    }
    (out / f"w{index}.json").write_text(json.dumps(result))


async def ask_phase(harness: Harness, index: int) -> dict[str, Any]:
    """Raise one ask (answered by the next host) and answer the previous host's."""
    with anyio.fail_after(60):
        while True:  # a host retries while the store is away (the server restarting)
            try:
                session = await harness.create_session(principal=Principal("User", f"w{index}"))
                break
            except JournalError:
                await anyio.sleep(0.1)
    result: dict[str, Any] = {}
    previous = f"ask-w{(index - 1) % 4}"

    async def raise_ask() -> None:
        start = time.time()
        outcome = await session.call_tool("files__special", {"text": "?"}, call_id=f"ask-w{index}")
        result.update(status=outcome.status, start=start, end=time.time(), session=session.id)

    async def answer_previous() -> None:
        # The previous host raises its ask once its own calls are done, which on a loaded
        # machine can be minutes after this host's (10,000 calls each): wait as long as the
        # test does (its 900 s), not less.
        with anyio.fail_after(840):
            while True:
                found = [a for a in harness.ask_store.pending() if a.call_id == previous]
                if found:
                    await harness.answer_ask(found[0].ask_id, "allow_once", by=f"w{index}")
                    result["answered"] = time.time()
                    return
                await anyio.sleep(0.02)

    async with anyio.create_task_group() as tg:
        listening = session.permission_asks()  # asks wait here, for the store's answer

        async def listen() -> None:
            async for _ask in listening:
                pass

        tg.start_soon(listen)
        tg.start_soon(answer_previous)
        await raise_ask()
        while "answered" not in result:  # noqa: ASYNC110 (the other task sets it)
            await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    return result


if __name__ == "__main__":
    anyio.run(
        main, sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]), sys.argv[5] == "1"
    )
