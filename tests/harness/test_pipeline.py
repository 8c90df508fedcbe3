import json
import threading
from typing import Any

import anyio
import pytest
from support import ALICE, PATH_SCHEMA, Recorder, coding_registry, harness

from clearance import (
    AgentDefinition,
    CallContext,
    CallToolResult,
    ClosedError,
    MemoryJournal,
    Tool,
    ToolRegistry,
)
from clearance.guardrails.base import ArgumentGuardrail, GuardrailOutcome, ResultGuardrail
from clearance.policy import AuthzRequest, LocalEvaluator, NoopEvaluator, Verdict

pytestmark = pytest.mark.anyio


def types(journal: MemoryJournal, call_id: str) -> list[str]:
    return [e.type for e in journal.events(call_id=call_id)]


async def test_allowed_call_runs_and_is_journaled() -> None:
    rec = Recorder()
    journal = MemoryJournal()
    async with harness(
        coding_registry(rec), evaluator=LocalEvaluator(allow=["files.*"]), journal=journal
    ) as h:
        s = await h.create_session(principal=ALICE)
        out = await s.call_tool("files__read_file", {"path": "a.txt"}, call_id="c1", turn_id="t1")
    assert out.status == "ok" and out.decision == "allow"
    assert out.reasons == ("allow:files.*",)
    assert json.loads(out.text) == {"ran": "files.read_file"}
    assert rec.calls == [("files.read_file", {"path": "a.txt"})]
    assert types(journal, "c1") == ["call_decided", "tool_started", "tool_finished"]
    decided = journal.events(call_id="c1")[0]
    assert decided.turn_id == "t1"
    assert decided.data["verdict"]["reasons"] == ["allow:files.*"]
    assert set(decided.data["timing_us"]) >= {"validate", "guardrails", "evaluate", "total"}


async def test_qualified_name_works_too() -> None:
    rec = Recorder()
    async with harness(coding_registry(rec), evaluator=NoopEvaluator()) as h:
        s = await h.create_session(principal=ALICE)
        out = await s.call_tool("files.read_file", {"path": "a"})
    assert out.ok and out.tool == "files__read_file" and out.qualified_name == "files.read_file"


@pytest.mark.parametrize(
    ("name", "arguments", "status", "needle"),
    [
        ("files__nope", {}, "invalid", "unknown tool 'files__nope'"),
        ("shell__run", {"command": "ls"}, "invalid", "not available to this agent"),
        ("files__read_file", [1, 2], "invalid", "must be a JSON object"),
        ("files__read_file", None, "invalid", "must be a JSON object"),
        ("files__read_file", {"path": 3}, "invalid", '/path: 3 is not of type "string"'),
        ("files__read_file", {"path": "a", "x": 1}, "invalid", "Additional properties"),
        ("files__read_file", {}, "invalid", "required"),
        ("files__read_file", {"path": "x" * (1 << 20)}, "invalid", "the limit is 1048576"),
        ("files__read_file", {"path": float("nan")}, "invalid", "non-finite"),
        ("files__read_file", {"path": object()}, "invalid", "not JSON"),
        ("files__write_file", {"path": "a", "content": "b"}, "denied", "no rule allows"),
    ],
)
async def test_bad_calls_get_a_clear_answer_and_nothing_runs(
    name: str, arguments: Any, status: str, needle: str
) -> None:
    rec = Recorder()
    journal = MemoryJournal()
    async with harness(
        coding_registry(rec), evaluator=LocalEvaluator(allow=["files.read_file"]), journal=journal
    ) as h:
        s = await h.create_session(
            principal=ALICE, agent=AgentDefinition("reader", tools=["files.*"])
        )
        out = await s.call_tool(name, arguments, call_id="c1")
    assert out.status == status
    assert needle in out.text
    assert out.correlation_id and out.correlation_id in out.text
    assert rec.calls == []
    assert types(journal, "c1") == ["call_decided"]


async def test_too_deep_arguments() -> None:
    rec = Recorder()
    registry = ToolRegistry()
    registry.register("x", [Tool("deep", rec.handler("x.deep"), input_schema={"type": "object"})])
    nested: Any = {}
    for _ in range(70):
        nested = {"a": nested}
    async with harness(registry, evaluator=NoopEvaluator()) as h:
        s = await h.create_session(principal=ALICE)
        out = await s.call_tool("x__deep", nested)
        ok = await s.call_tool("x__deep", {"a": {"b": {}}})
    assert out.status == "invalid" and "deeper than 64" in out.text
    assert ok.ok and rec.names() == ["x.deep"]


async def test_reused_call_id_is_rejected_and_first_call_stays_completed() -> None:
    rec = Recorder()
    journal = MemoryJournal()
    async with harness(coding_registry(rec), evaluator=NoopEvaluator(), journal=journal) as h:
        s = await h.create_session(principal=ALICE)
        first = await s.call_tool("files__read_file", {"path": "a"}, call_id="c1")
        again = await s.call_tool("files__read_file", {"path": "b"}, call_id="c1")
    assert first.ok
    assert again.status == "invalid" and "already used" in again.text
    assert rec.calls == [("files.read_file", {"path": "a"})]
    finished = [e for e in journal.events(call_id="c1") if e.type == "tool_finished"]
    assert [e.data["status"] for e in finished] == ["ok"]


class Boom(Exception):
    pass


class RaisingEvaluator:
    def evaluate(self, request: AuthzRequest) -> Verdict:
        raise Boom("secret detail")


class GarbageEvaluator:
    def evaluate(self, request: AuthzRequest) -> Any:
        return "allow"


@pytest.mark.parametrize("evaluator", [RaisingEvaluator(), GarbageEvaluator()])
async def test_evaluator_failure_denies(evaluator: Any) -> None:
    rec = Recorder()
    seen: list[BaseException] = []
    journal = MemoryJournal()
    async with harness(
        coding_registry(rec),
        evaluator=evaluator,
        journal=journal,
        diagnostics=lambda cid, exc, info: seen.append(exc),
    ) as h:
        s = await h.create_session(principal=ALICE)
        out = await s.call_tool("files__read_file", {"path": "a"}, call_id="c1")
    assert out.status == "denied" and out.decision == "error"
    assert "secret detail" not in out.text
    assert rec.calls == [] and len(seen) == 1
    assert journal.events(call_id="c1")[0].data["verdict"]["effect"] == "error"


async def test_handler_exception_is_generic_for_model_and_full_for_diagnostics() -> None:
    async def explode(arguments: dict[str, Any], ctx: CallContext) -> str:
        raise Boom("database password is hunter2")

    registry = ToolRegistry()
    registry.register("x", [Tool("boom", explode)])
    seen: list[tuple[str, BaseException]] = []
    async with harness(
        registry,
        evaluator=NoopEvaluator(),
        diagnostics=lambda cid, exc, info: seen.append((cid, exc)),
    ) as h:
        s = await h.create_session(principal=ALICE)
        out = await s.call_tool("x__boom", {})
    assert out.status == "failed"
    assert "hunter2" not in out.text and out.correlation_id in out.text
    assert seen[0][0] == out.correlation_id and isinstance(seen[0][1], Boom)


async def test_domain_errors_and_invalid_results() -> None:
    registry = ToolRegistry()
    registry.register(
        "x",
        [
            Tool("missing", lambda a, c: CallToolResult("no such file", is_error=True)),
            Tool("weird", lambda a, c: {1, 2}),
        ],
    )
    async with harness(registry, evaluator=NoopEvaluator()) as h:
        s = await h.create_session(principal=ALICE)
        missing = await s.call_tool("x__missing", {})
        weird = await s.call_tool("x__weird", {})
    assert missing.status == "error" and missing.text == "no such file"
    assert missing.to_model()["is_error"] is True
    assert weird.status == "failed" and "invalid result" in weird.text


async def test_timeout_ends_the_call() -> None:
    async def slow(arguments: dict[str, Any], ctx: CallContext) -> str:
        await anyio.sleep_forever()
        return "never"

    registry = ToolRegistry()
    registry.register("x", [Tool("slow", slow, timeout=0.05)])
    journal = MemoryJournal()
    async with harness(registry, evaluator=NoopEvaluator(), journal=journal) as h:
        s = await h.create_session(principal=ALICE)
        with anyio.fail_after(5):
            out = await s.call_tool("x__slow", {}, call_id="c1")
    assert out.status == "timeout" and "timed out after 0.05s" in out.text
    assert journal.events(call_id="c1")[-1].data["status"] == "timeout"


async def test_sync_handler_sees_cancellation_and_reports_progress() -> None:
    started = threading.Event()
    saw_cancel = threading.Event()

    def worker(arguments: dict[str, Any], ctx: CallContext) -> str:
        ctx.progress("working", {"step": 1})
        started.set()
        while not ctx.cancelled:
            saw_cancel.wait(0.01)
        saw_cancel.set()
        ctx.raise_if_cancelled()
        return "unreachable"

    registry = ToolRegistry()
    registry.register("x", [Tool("work", worker, timeout=0.2)])
    journal = MemoryJournal()
    async with harness(registry, evaluator=NoopEvaluator(), journal=journal) as h:
        s = await h.create_session(principal=ALICE)
        with anyio.fail_after(5):
            out = await s.call_tool("x__work", {}, call_id="c1")
    assert out.status == "timeout"
    assert saw_cancel.is_set()
    assert types(journal, "c1") == [
        "call_decided",
        "tool_started",
        "tool_progress",
        "tool_finished",
    ]
    assert journal.events(call_id="c1")[2].data["data"] == {"step": 1}


async def test_overload_is_refused_at_once() -> None:
    release = anyio.Event()
    entered = anyio.Event()

    async def hold(arguments: dict[str, Any], ctx: CallContext) -> str:
        entered.set()
        await release.wait()
        return "done"

    registry = ToolRegistry()
    registry.register("x", [Tool("hold", hold, read_only=True)])
    results: list[str] = []
    async with harness(registry, evaluator=NoopEvaluator(), max_concurrency=1, max_queue=1) as h:
        s = await h.create_session(principal=ALICE)

        async def call(cid: str) -> None:
            results.append((await s.call_tool("x__hold", {}, call_id=cid)).status)

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call, "a")
                await entered.wait()
                tg.start_soon(call, "b")
                await anyio.wait_all_tasks_blocked()
                overloaded = await s.call_tool("x__hold", {}, call_id="c")
                assert overloaded.status == "overloaded"
                release.set()
    assert sorted(results) == ["ok", "ok"]


async def test_closing_session_cancels_running_and_queued_calls() -> None:
    entered = anyio.Event()

    async def hold(arguments: dict[str, Any], ctx: CallContext) -> str:
        entered.set()
        await anyio.sleep_forever()
        return "never"

    registry = ToolRegistry()
    registry.register("x", [Tool("hold", hold)])  # mutating: the second call queues
    journal = MemoryJournal()
    statuses: dict[str, str] = {}
    async with harness(registry, evaluator=NoopEvaluator(), journal=journal) as h:
        s = await h.create_session(principal=ALICE)

        async def call(cid: str) -> None:
            statuses[cid] = (await s.call_tool("x__hold", {}, call_id=cid)).status

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call, "running")
                await entered.wait()
                tg.start_soon(call, "queued")
                await anyio.wait_all_tasks_blocked()
                await s.aclose()
        with pytest.raises(ClosedError):
            await s.call_tool("x__hold", {})
    assert statuses == {"running": "cancelled", "queued": "cancelled"}
    for cid in statuses:
        finished = [e for e in journal.events(call_id=cid) if e.type == "tool_finished"]
        assert [e.data["status"] for e in finished] == ["cancelled"]


async def test_caller_cancellation_still_ends_the_call_once() -> None:
    entered = anyio.Event()

    async def hold(arguments: dict[str, Any], ctx: CallContext) -> str:
        entered.set()
        await anyio.sleep_forever()
        return "never"

    registry = ToolRegistry()
    registry.register("x", [Tool("hold", hold)])
    journal = MemoryJournal()
    async with harness(registry, evaluator=NoopEvaluator(), journal=journal) as h:
        s = await h.create_session(principal=ALICE)
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(s.call_tool, "x__hold", {})
                await entered.wait()
                tg.cancel_scope.cancel()
    finished = [e for e in journal.events() if e.type == "tool_finished"]
    assert [e.data["status"] for e in finished] == ["cancelled"]


async def test_sensitive_arguments_are_withheld_from_records_and_messages() -> None:
    rec = Recorder()
    registry = ToolRegistry()
    schema = {
        "type": "object",
        "properties": {"user": {"type": "string"}, "token": {"type": "string", "maxLength": 4}},
    }
    registry.register(
        "api", [Tool("login", rec.handler("api.login"), input_schema=schema, sensitive=["/token"])]
    )
    journal = MemoryJournal()
    async with harness(registry, evaluator=NoopEvaluator(), journal=journal) as h:
        s = await h.create_session(principal=ALICE)
        ok = await s.call_tool("api__login", {"user": "al", "token": "s3cr"}, call_id="ok")
        bad = await s.call_tool("api__login", {"user": "al", "token": "TOPSECRET"}, call_id="bad")
    assert ok.ok and rec.calls == [("api.login", {"user": "al", "token": "s3cr"})]
    assert bad.status == "invalid" and "TOPSECRET" not in bad.text
    dump = json.dumps([e.to_json() for e in journal.events()])
    assert "s3cr" not in dump and "TOPSECRET" not in dump
    started = next(e for e in journal.events(call_id="ok") if e.type == "tool_started")
    assert started.data["arguments"] == {"user": "al", "token": "[REDACTED]"}


async def test_guardrail_replace_is_revalidated_and_authorized() -> None:
    rec = Recorder()

    def lower(arguments: dict[str, Any], ctx: Any) -> GuardrailOutcome:
        return GuardrailOutcome.replace({"path": arguments["path"].lower()})

    def break_schema(arguments: dict[str, Any], ctx: Any) -> GuardrailOutcome:
        return GuardrailOutcome.replace({"path": 1})

    async with harness(
        coding_registry(rec),
        evaluator=LocalEvaluator(allow=["files.read_file(path=docs/*)"]),
        argument_guardrails=[ArgumentGuardrail(lower, tools="files.*")],
    ) as h:
        s = await h.create_session(principal=ALICE)
        out = await s.call_tool("files__read_file", {"path": "DOCS/A.md"})
    assert out.ok and rec.calls == [("files.read_file", {"path": "docs/a.md"})]

    rec2 = Recorder()
    async with harness(
        coding_registry(rec2),
        evaluator=NoopEvaluator(),
        argument_guardrails=[ArgumentGuardrail(break_schema)],
    ) as h:
        s = await h.create_session(principal=ALICE)
        out = await s.call_tool("files__read_file", {"path": "a"})
    assert out.status == "blocked" and "schema rejects" in out.text and rec2.calls == []


async def test_guardrail_block_advisory_and_failure() -> None:
    rec = Recorder()

    def block(arguments: dict[str, Any], ctx: Any) -> GuardrailOutcome:
        return GuardrailOutcome.block("no reading today")

    def crash(arguments: dict[str, Any], ctx: Any) -> GuardrailOutcome:
        raise RuntimeError("bug")

    journal = MemoryJournal()
    async with harness(
        coding_registry(rec),
        evaluator=NoopEvaluator(),
        journal=journal,
        argument_guardrails=[
            ArgumentGuardrail(block, tools="files.read_file", advisory=True, name="advice"),
            ArgumentGuardrail(crash, tools="files.list_dir", name="crashy"),
            ArgumentGuardrail(block, tools="shell.*", name="noshell"),
        ],
    ) as h:
        s = await h.create_session(principal=ALICE)
        advised = await s.call_tool("files__read_file", {"path": "a"}, call_id="a")
        crashed = await s.call_tool("files__list_dir", {"path": "a"}, call_id="b")
        blocked = await s.call_tool("shell__run", {"command": "ls"}, call_id="c")
    assert advised.ok
    assert journal.events(call_id="a")[0].data["guardrails"] == [
        {"name": "advice", "advisory": True, "action": "block", "message": "no reading today"}
    ]
    assert crashed.status == "blocked" and "crashy" in crashed.text
    assert blocked.status == "blocked" and "no reading today" in blocked.text
    assert rec.names() == ["files.read_file"]


async def test_result_guardrails_redact_and_block() -> None:
    async def leak(arguments: dict[str, Any], ctx: CallContext) -> str:
        return "key=AKIAIOSFODNN7EXAMPLE"

    def redact_text(result: dict[str, Any], ctx: Any) -> GuardrailOutcome:
        return GuardrailOutcome.redact(["/content/0/text"])

    def block_all(result: dict[str, Any], ctx: Any) -> GuardrailOutcome:
        return GuardrailOutcome.block("not for you")

    registry = ToolRegistry()
    registry.register("x", [Tool("leak", leak), Tool("other", leak)])
    journal = MemoryJournal()
    async with harness(
        registry,
        evaluator=NoopEvaluator(),
        journal=journal,
        result_guardrails=[
            ResultGuardrail(redact_text, tools="x.leak"),
            ResultGuardrail(block_all, tools="x.other"),
        ],
    ) as h:
        s = await h.create_session(principal=ALICE)
        redacted = await s.call_tool("x__leak", {})
        blocked = await s.call_tool("x__other", {})
    assert redacted.ok and redacted.text == "[REDACTED]"
    assert blocked.status == "blocked" and "AKIA" not in blocked.text
    assert "AKIAIOSFODNN7EXAMPLE" not in json.dumps([e.to_json() for e in journal.events()])


class FailingJournal(MemoryJournal):
    async def append(self, event: Any) -> Any:
        if event.type == "tool_started":
            raise OSError("disk full")
        return await super().append(event)


async def test_journal_failure_before_dispatch_denies() -> None:
    rec = Recorder()
    async with harness(
        coding_registry(rec), evaluator=NoopEvaluator(), journal=FailingJournal()
    ) as h:
        s = await h.create_session(principal=ALICE)
        out = await s.call_tool("files__read_file", {"path": "a"})
    assert out.status == "denied" and "journal" in out.text and rec.calls == []


async def test_harness_requires_an_explicit_evaluator() -> None:
    with pytest.raises(TypeError):
        harness(coding_registry(Recorder()), evaluator=None)


async def test_agent_capabilities_only_narrow() -> None:
    rec = Recorder()
    async with harness(
        coding_registry(rec), evaluator=LocalEvaluator(allow=["files.read_file"])
    ) as h:
        s = await h.create_session(
            principal=ALICE,
            agent=AgentDefinition("a", capabilities=["files.read_file(path=docs/*)", "shell.run"]),
        )
        inside = await s.call_tool("files__read_file", {"path": "docs/a"})
        outside = await s.call_tool("files__read_file", {"path": "src/a"})
        widened = await s.call_tool("shell__run", {"command": "ls"})
    assert inside.ok
    assert outside.status == "denied" and widened.status == "denied"
    assert rec.calls == [("files.read_file", {"path": "docs/a"})]


async def test_path_schema_used_by_support() -> None:
    assert PATH_SCHEMA["required"] == ["path"]


async def test_decide_runs_every_stage_but_nothing_else() -> None:
    rec = Recorder()
    journal = MemoryJournal()

    def no_env(arguments: dict[str, Any], ctx: Any) -> GuardrailOutcome:
        if arguments.get("path", "").endswith(".env"):
            return GuardrailOutcome.block("no .env files")
        return GuardrailOutcome.allow()

    async with harness(
        coding_registry(rec),
        evaluator=LocalEvaluator(allow=["files.read_file"], ask=["files.write_file"]),
        argument_guardrails=[ArgumentGuardrail(no_env)],
        journal=journal,
    ) as h:
        allow = await h.decide(principal=ALICE, tool="files.read_file", arguments={"path": "a"})
        ask = await h.decide(
            principal=ALICE, tool="files__write_file", arguments={"path": "a", "content": "x"}
        )
        deny = await h.decide(principal=ALICE, tool="shell.run", arguments={"command": "ls"})
        blocked = await h.decide(
            principal=ALICE, tool="files.read_file", arguments={"path": ".env"}
        )
        invalid = await h.decide(principal=ALICE, tool="files.read_file", arguments={})
        unknown = await h.decide(principal=ALICE, tool="git.push", arguments={})
    assert (allow.outcome, allow.stage, allow.reasons) == (
        "allow",
        "evaluator",
        ("allow:files.read_file",),
    )
    assert (ask.outcome, ask.reasons) == ("ask", ("ask:files.write_file",))
    assert (deny.outcome, deny.stage) == ("deny", "evaluator")
    assert (blocked.outcome, blocked.stage) == ("blocked", "guardrail")
    assert "no .env files" in (blocked.message or "")
    assert (invalid.outcome, invalid.stage) == ("invalid", "schema")
    assert (unknown.outcome, unknown.stage) == ("invalid", "resolve")
    assert "evaluate" in allow.timing_us and allow.to_json()["outcome"] == "allow"
    assert rec.calls == [] and len(journal) == 0


async def test_slow_sync_guardrail_blocks_and_stage_mismatch_is_refused() -> None:
    import time as _time

    rec = Recorder()

    def slow(arguments: dict[str, Any], ctx: Any) -> GuardrailOutcome:
        _time.sleep(0.06)  # a sync check cannot be interrupted; it is failed afterwards
        return GuardrailOutcome.allow()

    async with harness(
        coding_registry(rec),
        evaluator=NoopEvaluator(),
        argument_guardrails=[ArgumentGuardrail(slow, timeout=0.01, name="slow")],
    ) as h:
        s = await h.create_session(principal=ALICE)
        out = await s.call_tool("files__read_file", {"path": "a"})
    assert out.status == "blocked" and "slow" in out.text and rec.calls == []
    with pytest.raises(TypeError, match="result guardrail"):
        harness(
            coding_registry(rec),
            evaluator=NoopEvaluator(),
            argument_guardrails=[ResultGuardrail(slow)],
        )


async def test_a_guardrail_that_guards_nothing_is_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def allow(arguments: dict[str, Any], ctx: Any) -> GuardrailOutcome:
        return GuardrailOutcome.allow()

    async with harness(
        coding_registry(Recorder()),
        evaluator=NoopEvaluator(),
        argument_guardrails=[ArgumentGuardrail(allow, tools="flies.*", name="typo")],
    ) as h:
        await h.create_session(principal=ALICE)
    assert any("'typo' applies to no registered tool" in r.getMessage() for r in caplog.records)


async def test_a_handler_may_close_its_own_session() -> None:
    holder: dict[str, Any] = {}

    async def closer(arguments: dict[str, Any], ctx: CallContext) -> str:
        await holder["session"].aclose()
        return "closed myself"

    registry = ToolRegistry()
    registry.register("x", [Tool("close", closer)])
    journal = MemoryJournal()
    async with harness(registry, evaluator=NoopEvaluator(), journal=journal) as h:
        holder["session"] = s = await h.create_session(principal=ALICE)
        with anyio.fail_after(5):
            out = await s.call_tool("x__close", {}, call_id="c1")
        assert s.closed and s.id not in h.sessions
    assert out.ok and out.text == "closed myself"
    types = [e.type for e in journal.events()]
    assert types.count("session_closed") == 1 and types.count("tool_finished") == 1
