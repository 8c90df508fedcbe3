"""Hosts that run their own tools: ``session.authorize`` then ``record_result`` (or
``execution``), through every stage ``call_tool`` runs, with one journal record per step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from clearance import (
    CallContext,
    Harness,
    MemoryJournal,
    NotAuthorizedError,
    Principal,
    Tool,
    ToolRegistry,
)
from clearance.guardrails import ResultGuardrail
from clearance.guardrails.base import GuardrailOutcome
from clearance.harness.approvals import Answer
from clearance.policy import LocalEvaluator
from clearance.toolsets import register_files

pytestmark = pytest.mark.anyio

ALICE = Principal("User", "alice")


def never(arguments: dict[str, Any], ctx: CallContext) -> str:
    raise AssertionError("the host runs this tool, not clearance")


def registry(tmp_path: Path) -> ToolRegistry:
    reg = ToolRegistry()
    register_files(reg, tmp_path)
    reg.register(
        "mail",
        [
            Tool(
                "send",
                never,
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
    return reg


def types(journal: MemoryJournal, call_id: str) -> list[str]:
    return [e.type for e in journal.events(call_id=call_id)]


async def test_an_allowed_call_runs_with_the_canonical_arguments_and_is_recorded(
    tmp_path: Path,
) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("hello")
    (tmp_path / "link").symlink_to("docs")
    journal = MemoryJournal()
    redact = ResultGuardrail(
        lambda value, ctx: GuardrailOutcome.replace(
            {**value, "content": [{"type": "text", "text": "[hidden]"}]}
        ),
        tools="files.read_file",
    )
    async with Harness(
        registry(tmp_path),
        evaluator=LocalEvaluator(allow=["files.read_file"]),
        journal=journal,
        result_guardrails=[redact],
    ) as harness:
        session = await harness.create_session(principal=ALICE)
        auth = await session.authorize("files__read_file", {"path": "./link/a.md"}, call_id="c1")
        assert auth.allowed and auth.status == "allowed"
        assert auth.arguments == {"path": "docs/a.md"}  # canonical: what the host must run
        assert auth.decision == "allow" and auth.reasons == ("allow:files.read_file",)
        assert types(journal, "c1") == ["call_decided"]
        decided = journal.events(call_id="c1")[0].data
        assert decided["outcome"] == "authorized"
        # The host runs the tool itself, then reports what it returned.
        outcome = await session.record_result("c1", (tmp_path / auth.arguments["path"]).read_text())
        assert outcome.status == "ok" and outcome.text == "[hidden]"  # result guardrails ran
        assert types(journal, "c1") == ["call_decided", "tool_started", "tool_finished"]
        started = journal.events(call_id="c1")[1].data
        assert started["arguments"] == {"path": "docs/a.md"} and started["host"] is True
        with pytest.raises(NotAuthorizedError):
            await session.record_result("c1", "again")  # one end per call (R7)


async def test_a_denied_call_cannot_be_recorded(tmp_path: Path) -> None:
    journal = MemoryJournal()
    async with Harness(
        registry(tmp_path), evaluator=LocalEvaluator(allow=["files.read_file"]), journal=journal
    ) as harness:
        session = await harness.create_session(principal=ALICE)
        auth = await session.authorize(
            "mail__send", {"to": "Bob@Example.com", "body": "hi"}, call_id="m1"
        )
        assert auth.status == "denied" and not auth.allowed and auth.arguments is None
        assert auth.message and auth.correlation_id in auth.message
        assert auth.outcome is not None and auth.outcome.to_model()["is_error"] is True
        with pytest.raises(NotAuthorizedError):
            await session.record_result("m1", "sent anyway")
        escaped = await session.authorize("files__read_file", {"path": "../x"}, call_id="m2")
        assert escaped.status == "denied" and escaped.outcome is not None
        assert escaped.outcome.status == "blocked"
    assert types(journal, "m1") == ["call_decided"]
    assert types(journal, "m2") == ["call_decided"]


async def test_asks_and_grants_work_for_host_run_calls(tmp_path: Path) -> None:
    asked: list[dict[str, Any]] = []

    def person(ask: Any) -> Answer:
        asked.append(dict(ask.arguments))
        return "allow_session"

    journal = MemoryJournal()
    async with Harness(
        registry(tmp_path), evaluator=LocalEvaluator(ask=["mail.send"]), journal=journal
    ) as harness:
        session = await harness.create_session(principal=ALICE, on_permission_ask=person)
        args = {"to": "Bob@Example.com", "body": "hi"}
        first = await session.authorize("mail.send", args, call_id="a1")
        second = await session.authorize(
            "mail.send", {**args, "to": "bob@example.com"}, call_id="a2"
        )
        assert first.allowed and second.allowed
        assert first.arguments == {"to": "bob@example.com", "body": "hi"}
        assert asked == [{"to": "bob@example.com", "body": "hi"}]  # asked once (R5)
        assert second.grant is not None and first.ask_id is not None
        await session.record_result("a1", "sent")
    assert types(journal, "a1") == [
        "permission_asked",
        "permission_decided",
        "call_decided",
        "tool_started",
        "tool_finished",
    ]
    assert types(journal, "a2") == ["call_decided"]  # authorized, never run: no start (R7)


async def test_execution_records_the_start_before_the_run(tmp_path: Path) -> None:
    journal = MemoryJournal()
    async with Harness(
        registry(tmp_path), evaluator=LocalEvaluator(allow=["files.*"]), journal=journal
    ) as harness:
        session = await harness.create_session(principal=ALICE)
        await session.authorize("files.list_dir", {}, call_id="e1")
        async with session.execution("e1") as run:
            assert types(journal, "e1") == ["call_decided", "tool_started"]
            assert run.arguments == {"path": "."} or run.arguments == {}
            run.result({"entries": []})
        assert run.outcome is not None and run.outcome.status == "ok"
        await session.authorize("files.list_dir", {}, call_id="e2")
        with pytest.raises(RuntimeError):
            async with session.execution("e2"):
                raise RuntimeError("the tool crashed")
        await session.authorize("files.list_dir", {}, call_id="e3")
        failed = await session.record_result("e3", error=OSError("disk"))
        assert failed.status == "failed" and failed.correlation_id in failed.text
    ends = [e.data["status"] for e in journal.events() if e.type == "tool_finished"]
    assert ends == ["ok", "failed", "failed"]


async def test_a_closed_session_forgets_its_authorizations(tmp_path: Path) -> None:
    async with Harness(registry(tmp_path), evaluator=LocalEvaluator(allow=["files.*"])) as harness:
        session = await harness.create_session(principal=ALICE)
        assert (await session.authorize("files.list_dir", {}, call_id="x1")).allowed
        await session.aclose()
        with pytest.raises(NotAuthorizedError):
            await session.record_result("x1", "late")


async def test_reusing_a_call_id_is_refused(tmp_path: Path) -> None:
    async with Harness(registry(tmp_path), evaluator=LocalEvaluator(allow=["files.*"])) as harness:
        session = await harness.create_session(principal=ALICE)
        assert (await session.authorize("files.list_dir", {}, call_id="d1")).allowed
        again = await session.authorize("files.list_dir", {}, call_id="d1")
        assert again.status == "denied" and again.outcome is not None
        assert again.outcome.status == "invalid"


async def test_an_ask_raised_right_after_a_listener_task_was_started_reaches_it(
    tmp_path: Path,
) -> None:
    """Issue 15: a UI task started with start_soon gets the ask raised right after."""
    async with Harness(
        registry(tmp_path), evaluator=LocalEvaluator(ask=["files.write_file"])
    ) as harness:
        session = await harness.create_session(principal=ALICE)

        async def ui() -> None:
            async for ask in session.permission_asks():
                await ask.respond("allow_once")
                return

        async with anyio.create_task_group() as tg:
            tg.start_soon(ui)
            outcome = await session.call_tool("files.write_file", {"path": "n.txt", "content": "x"})
        assert outcome.status == "ok", outcome.text


async def test_an_authorized_call_can_be_run_by_clearance(tmp_path: Path) -> None:
    ran: list[dict[str, Any]] = []

    def echo(arguments: dict[str, Any], ctx: CallContext) -> str:
        ran.append(arguments)
        return "done"

    reg = ToolRegistry()
    reg.register("x", [Tool("echo", echo)])
    journal = MemoryJournal()
    async with Harness(reg, evaluator=LocalEvaluator(allow=["x.*"]), journal=journal) as harness:
        session = await harness.create_session(principal=ALICE)
        auth = await session.authorize("x.echo", {}, call_id="r1")
        outcome = await session.run_authorized("r1")
        assert auth.allowed and outcome.status == "ok" and ran == [{}]
        with pytest.raises(NotAuthorizedError):
            await session.run_authorized("r1")
    assert types(journal, "r1") == ["call_decided", "tool_started", "tool_finished"]


async def test_a_resume_key_finds_the_answer_for_a_retry_under_a_new_call_id(
    tmp_path: Path,
) -> None:
    async with Harness(registry(tmp_path), evaluator=LocalEvaluator(ask=["mail.send"])) as h:
        session = await h.create_session(principal=ALICE)
        args = {"to": "bob@example.com", "body": "hi"}
        first = await session.authorize("mail.send", args, call_id="a", resume_key="k")
        assert first.pending and first.ask_id is not None
        await h.answer_ask(first.ask_id, "allow_once")
        other_key = await session.authorize("mail.send", args, call_id="b", resume_key="z")
        assert other_key.pending  # another key: not this answer
        retry = await session.authorize("mail.send", args, call_id="c", resume_key="k")
        assert retry.allowed
