"""Two hosts and the inbox sharing one PostgreSQL database: an ask one host raised is
answered in the inbox (``clearance inbox --db postgresql://...``, a real process), another
host applies the answer, and the grant it made holds on both."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from inbox_support import ALICE, WRITE_SCHEMA, Running, bearer, start_inbox, token_of
from postgres_support import fresh_schema

from clearance import Harness, Tool, ToolRegistry
from clearance.harness.journal import MemoryJournal
from clearance.policy import LocalEvaluator

pytestmark = pytest.mark.anyio

ARGS = {"path": "notes/plan.md", "content": "ship it"}


@pytest.fixture
def database() -> Iterator[str]:
    with fresh_schema() as (url, _):
        yield url


def host(url: str, workspace: Path, ran: list[str]) -> tuple[Harness, MemoryJournal]:
    """A host with its own connections to the database (as another process would have)."""
    from clearance.harness.ask_store_postgres import PostgresAskStore
    from clearance.harness.grants_postgres import PostgresGrantStore

    registry = ToolRegistry()

    def write(arguments: dict[str, Any], ctx: Any) -> str:
        ran.append(arguments["path"])
        return "written"

    registry.register(
        "notes",
        [
            Tool(
                "write",
                write,
                input_schema=WRITE_SCHEMA,
                root=str(workspace),
                facts={"/path": "path"},
            )
        ],
    )
    journal = MemoryJournal()
    harness = Harness(
        registry,
        evaluator=LocalEvaluator(ask=["notes.write"]),
        ask_store=PostgresAskStore(url),
        grant_store=PostgresGrantStore(url),
        journal=journal,
    )
    return harness, journal


@pytest.fixture
def inbox_over(database: str, tmp_path: Path) -> Iterator[Running]:
    running = start_inbox("--db", database, "--port", "0", "--user", "alice", cwd=tmp_path)
    try:
        yield running
    finally:
        running.stop()


async def test_an_ask_from_one_host_answered_in_the_inbox_goes_on_in_another(
    database: str, inbox_over: Running, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    ran: list[str] = []
    first, _ = host(database, workspace, ran)
    second, second_journal = host(database, workspace, ran)
    async with first, second:
        paused = await (await first.create_session(principal=ALICE)).authorize(
            "notes.write", ARGS, call_id="c1"
        )
        assert paused.pending and paused.ask_id is not None
        async with httpx.AsyncClient(base_url=inbox_over.url) as client:
            alice = bearer(token_of(inbox_over.links["alice"]))
            listed = await client.get("/asks", headers=alice)
            assert paused.ask_id in listed.json()["cards"]
            given = await client.post(
                "/answer",
                data={
                    "ask_id": paused.ask_id,
                    "decision": "allow_always",
                    "scope": "2",  # path under notes/
                },
                headers={"accept": "application/json", **alice},
            )
            assert given.status_code == 200, given.text
        # The other host (after the first went away, say) applies the answer.
        session = await second.create_session(principal=ALICE)
        with anyio.fail_after(10):
            resumed = await session.authorize("notes.write", ARGS, call_id="c1")
        assert resumed.allowed and resumed.answered_by == "alice"
        (decided,) = [
            e.data for e in second_journal.events(call_id="c1") if e.type == "permission_decided"
        ]
        assert (decided["by"], decided["via"]) == ("alice", "inbox")
        # The allow_always grant holds on both hosts, for that prefix only.
        other = {"path": "notes/later.md", "content": "x"}
        again = await (await first.create_session(principal=ALICE)).authorize(
            "notes.write", other, call_id="c2"
        )
        assert again.allowed and again.grant is not None
        outside = {"path": "plans/a.md", "content": "x"}
        assert (await session.authorize("notes.write", outside, call_id="c3")).pending
