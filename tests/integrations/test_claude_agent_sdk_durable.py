"""Durable asks through the Claude Agent SDK adapter (issue 31): an ask answered from another
process (the real ``clearance asks`` CLI, sealed with an approver's key) reaches Claude
Code's retry, which comes with a new tool use id; ``allow_always`` makes its grant; a
restarted host finds the answer; ``wait=True`` waits for it. The real SDK against
:class:`ScriptedClaudeCode` (offline), a real SQLite ask store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from claude_agent_sdk import query
from support import cli_answer

from clearance import Harness, MemoryJournal, Principal, ToolRegistry
from clearance.harness.ask_store_sqlite import SqliteAskStore
from clearance.harness.grants_sqlite import SqliteGrantStore
from clearance.integrations.claude_agent_sdk import ClaudeAgentAdapter
from clearance.integrations.claude_agent_sdk_scripted import ScriptedClaudeCode, ScriptedToolUse
from clearance.integrations.claude_code_tools import claude_code_tools
from clearance.policy import LocalEvaluator

pytestmark = pytest.mark.anyio

ALICE = Principal("User", "alice")
WRITE = {"file_path": "notes/todo.md", "content": "ship it"}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "notes").mkdir(parents=True)
    return ws.resolve()


def host(root: Path, db: Path, journal: MemoryJournal, **options: Any) -> Harness:
    """A host over the ask and grant stores in ``db`` (a restart is a new one)."""
    registry = ToolRegistry()
    registry.register("claude", claude_code_tools(root))
    return Harness(
        registry,
        evaluator=LocalEvaluator(ask=["claude.write(file_path=notes/**)"]),
        journal=journal,
        ask_store=SqliteAskStore(db),
        grant_store=SqliteGrantStore(db),
        **options,
    )


async def run(adapter: ClaudeAgentAdapter, root: Path, tid: str) -> ScriptedClaudeCode:
    """Claude Code making the Write call under the tool use id ``tid``."""
    cli = ScriptedClaudeCode([[ScriptedToolUse("Write", WRITE, tid)]], cwd=root)
    async for _ in query(prompt="write the todo", options=adapter.options(), transport=cli):
        pass
    return cli


def decided(journal: MemoryJournal, call_id: str) -> dict[str, Any]:
    (record,) = [e.data for e in journal.events(call_id=call_id) if e.type == "call_decided"]
    return record


async def test_an_answer_from_the_cli_reaches_the_retry_under_a_new_tool_use_id(
    root: Path, tmp_path: Path
) -> None:
    db, journal = tmp_path / "state.db", MemoryJournal()
    async with host(root, db, journal) as h:
        adapter = ClaudeAgentAdapter(await h.create_session(principal=ALICE))
        first = await run(adapter, root, "toolu_1")
        assert first.ran == []
        (pending,) = h.pending_asks()
        assert pending.ask_id in first.model_saw["toolu_1"]
        await cli_answer(db, pending.ask_id, answer="allow_once", approver_name="carol")
        retry = await run(adapter, root, "toolu_2")  # Claude Code's retry: a new id
        assert [name for name, _ in retry.ran] == ["Write"]
        assert (root / "notes" / "todo.md").read_text() == "ship it"
        record = decided(journal, "toolu_2")
        assert record["ask"]["answered_by"] == "carol" and record["ask"]["how"] == "store"
        # once: a third try is asked anew, and nothing runs
        third = await run(adapter, root, "toolu_3")
        assert third.ran == []
        (again,) = h.pending_asks()
        assert again.ask_id != pending.ask_id


async def test_allow_always_from_the_cli_makes_a_grant_a_restarted_host_uses(
    root: Path, tmp_path: Path
) -> None:
    db, journal = tmp_path / "state.db", MemoryJournal()
    async with host(root, db, journal) as h:
        first = await run(ClaudeAgentAdapter(await h.create_session(principal=ALICE)), root, "t1")
        assert first.ran == []
        (pending,) = h.pending_asks()
    await cli_answer(db, pending.ask_id, answer="allow_always", approver_name="carol")
    async with host(root, db, journal) as h:  # the host restarted: a new clearance session
        adapter = ClaudeAgentAdapter(await h.create_session(principal=ALICE))
        retry = await run(adapter, root, "t2")
        assert [name for name, _ in retry.ran] == ["Write"]
        (grant,) = h.grants.list()
        assert grant.tool == "claude.write"
        later = await run(adapter, root, "t3")  # the grant answers; nobody is asked
        assert [name for name, _ in later.ran] == ["Write"]
        assert decided(journal, "t3")["grant"] == grant.grant_id
        assert h.pending_asks() == []


async def test_wait_true_waits_in_the_hook_for_the_cli(root: Path, tmp_path: Path) -> None:
    db, journal = tmp_path / "state.db", MemoryJournal()
    async with host(root, db, journal, ask_timeout=60) as h:
        adapter = ClaudeAgentAdapter(await h.create_session(principal=ALICE), wait=True)
        done: list[ScriptedClaudeCode] = []

        async def claude() -> None:
            done.append(await run(adapter, root, "toolu_w"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(claude)
            with anyio.fail_after(10):
                while not h.pending_asks():  # noqa: ASYNC110 (another process answers)
                    await anyio.sleep(0.02)
            await anyio.sleep(0.3)
            assert not done  # the hook still waits
            (pending,) = h.pending_asks()
            await cli_answer(db, pending.ask_id, answer="allow_once", approver_name="carol")
        assert [name for name, _ in done[0].ran] == ["Write"]
        assert decided(journal, "toolu_w")["ask"]["answered_by"] == "carol"
