"""Waiting for an answer given elsewhere (issue 31): ``authorize(wait=True)`` with nobody here
to answer waits for the ask store, and an answer given in the store while a host's callback
still waits settles the call at once (the callback is cancelled). The answers come from
another process: the real ``clearance asks`` command, sealed with an approver's key."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from support import cli_answer

from clearance import CallContext, Harness, MemoryJournal, Principal, Tool, ToolRegistry
from clearance.harness.approvals import Answer
from clearance.harness.ask_store import MemoryAskStore
from clearance.harness.ask_store_sqlite import SqliteAskStore
from clearance.policy import LocalEvaluator

pytestmark = pytest.mark.anyio

ALICE = Principal("User", "alice")
ARGS = {"to": "bob@example.com", "body": "hello"}


def send(arguments: dict[str, Any], ctx: CallContext) -> str:
    return f"sent to {arguments['to']}"


def harness(db: Path | None, **options: Any) -> Harness:
    reg = ToolRegistry()
    reg.register(
        "mail",
        [
            Tool(
                "send",
                send,
                input_schema={
                    "type": "object",
                    "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
                    "required": ["to", "body"],
                    "additionalProperties": False,
                },
                facts={"/to": "email"},
            )
        ],
    )
    store = SqliteAskStore(db) if db is not None else MemoryAskStore()
    options.setdefault("journal", MemoryJournal())
    return Harness(reg, evaluator=LocalEvaluator(ask=["mail.send"]), ask_store=store, **options)


async def waiting_ask(h: Harness) -> str:
    """The id of the ask the call waits on, once it is in the store."""
    with anyio.fail_after(10):
        while not h.pending_asks():  # noqa: ASYNC110 (a store another process answers)
            await anyio.sleep(0.02)
    (ask,) = h.pending_asks()
    return ask.ask_id


def decided(h: Harness) -> list[dict[str, Any]]:
    journal = h.journal
    assert isinstance(journal, MemoryJournal)
    return [e.data for e in journal.events() if e.type == "permission_decided"]


async def test_authorize_wait_true_waits_for_an_answer_from_the_cli(tmp_path: Path) -> None:
    db = tmp_path / "asks.db"
    async with harness(db, ask_timeout=60) as h:
        session = await h.create_session(principal=ALICE)  # no callback, no listener
        got: list[Any] = []

        async def call() -> None:
            got.append(await session.authorize("mail.send", ARGS, call_id="c1", wait=True))

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            ask_id = await waiting_ask(h)
            await anyio.sleep(0.5)  # well past the 0.1 s in which it used to be denied
            assert not got  # still waiting
            await cli_answer(db, ask_id, approver_name="carol")
            with anyio.fail_after(10):
                while not got:  # noqa: ASYNC110 (the store is read every 0.2 s)
                    await anyio.sleep(0.02)
        (auth,) = got
        assert auth.allowed and auth.answered_by == "carol"
        assert decided(h)[-1]["how"] == "store" and decided(h)[-1]["by"] == "carol"
        outcome = await session.run_authorized("c1")
        assert outcome.ok and outcome.text == "sent to bob@example.com"
        # once: the same call id tried again is a reused id, and another call is asked anew
        again = await session.authorize("mail.send", ARGS, call_id="c2", wait=False)
        assert again.pending


async def test_authorize_wait_true_is_denied_when_nobody_answers_in_time(tmp_path: Path) -> None:
    async with harness(tmp_path / "asks.db", ask_timeout=0.6) as h:
        session = await h.create_session(principal=ALICE)
        started = time.monotonic()
        auth = await session.authorize("mail.send", ARGS, call_id="c1", wait=True)
        assert not auth.allowed and not auth.pending
        assert time.monotonic() - started >= 0.5
        assert decided(h)[-1]["how"] == "timeout"
        assert h.pending_asks() == []  # the ask was withdrawn


async def test_authorize_wait_true_takes_an_answer_given_in_process() -> None:
    async with harness(None, ask_timeout=60) as h:  # a memory store: this process only
        session = await h.create_session(principal=ALICE)
        got: list[Any] = []

        async def call() -> None:
            got.append(await session.authorize("mail.send", ARGS, call_id="c1", wait=True))

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            ask_id = await waiting_ask(h)
            await anyio.sleep(0.3)
            await h.answer_ask(ask_id, "allow_once", by="bob", via="inbox")
        assert got[0].allowed and got[0].answered_by == "bob"


@pytest.mark.parametrize("answer", ["allow_once", "deny"])
async def test_an_answer_from_the_cli_settles_a_call_whose_callback_still_waits(
    tmp_path: Path, answer: str
) -> None:
    db = tmp_path / "asks.db"
    cancelled = anyio.Event()

    async def never_answers(ask: Any) -> Answer:
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()
        raise AssertionError("unreachable")

    async with harness(db, ask_timeout=120) as h:
        session = await h.create_session(principal=ALICE, on_permission_ask=never_answers)
        outcomes: list[Any] = []

        async def call() -> None:
            outcomes.append(await session.call_tool("mail.send", ARGS, call_id="c1"))

        with anyio.fail_after(30):  # ask_timeout is 120 s: only the store's answer ends it
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                ask_id = await waiting_ask(h)
                await cli_answer(db, ask_id, answer=answer, approver_name="carol")
            await cancelled.wait()
        (outcome,) = outcomes
        assert outcome.ok is (answer == "allow_once")
        (record,) = decided(h)
        assert record["how"] == "store" and record["by"] == "carol"
        assert record["answer"] == answer


async def test_an_answer_in_process_settles_a_call_whose_callback_still_waits() -> None:
    cancelled = anyio.Event()

    async def never_answers(ask: Any) -> Answer:
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()
        raise AssertionError("unreachable")

    async with harness(None, ask_timeout=120) as h:
        session = await h.create_session(principal=ALICE, on_permission_ask=never_answers)
        outcomes: list[Any] = []

        async def call() -> None:
            outcomes.append(await session.call_tool("mail.send", ARGS, call_id="c1"))

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                ask_id = await waiting_ask(h)
                await h.answer_ask(ask_id, "allow_once", by="bob", via="inbox")
            await cancelled.wait()
        assert outcomes[0].ok
        assert decided(h)[-1]["how"] == "store"
