"""The Claude Agent SDK adapter, run with the real SDK (``query``, ``ClaudeSDKClient``, its
control protocol and hook plumbing) against :class:`ScriptedClaudeCode`, a transport that
plays Claude Code offline: no network, no ``claude`` binary. Real files, symlinks and
``bash`` subprocesses for the tools."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import (
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookMatcher,
    PermissionResultAllow,
    PermissionResultDeny,
    ResultMessage,
    ToolPermissionContext,
    ToolResultBlock,
    UserMessage,
    query,
)
from doc_examples import DOCS, python_blocks, run_block

from clearance import (
    Harness,
    JournalEvent,
    MemoryJournal,
    NotAuthorizedError,
    PermissionDecision,
    Principal,
    Session,
    Tool,
    ToolRegistry,
)
from clearance.guardrails import GuardrailOutcome, ResultGuardrail, SecretScanner
from clearance.harness.approvals import Answer
from clearance.integrations.claude_agent_sdk import VIA, ClaudeAgentAdapter, ClaudeAsk
from clearance.integrations.claude_agent_sdk_scripted import ScriptedClaudeCode, ScriptedToolUse
from clearance.integrations.claude_code_tools import (
    CLAUDE_CODE_NAMES,
    bash_line,
    claude_code_tools,
)
from clearance.policy import LocalEvaluator

pytestmark = pytest.mark.anyio

ALICE = Principal("User", "alice")
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A workspace with a link into docs, a link to the secrets, and a file of keys."""
    ws = tmp_path / "ws"
    (ws / "docs").mkdir(parents=True)
    (ws / "docs" / "a.md").write_text("hello from docs\n")
    (ws / "docs" / "keys.md").write_text(f"aws_access_key_id = {AWS_KEY}\n")
    (ws / ".env").write_text("TOKEN=hunter2\n")
    (ws / "link").symlink_to("docs")
    (ws / "docs" / "notes.md").symlink_to("../.env")
    (ws / "notes").mkdir()
    return ws.resolve()


def make_harness(root: Path, journal: MemoryJournal, **options: Any) -> Harness:
    registry = ToolRegistry()
    registry.register("claude", claude_code_tools(root))
    evaluator = options.pop(
        "evaluator",
        LocalEvaluator(
            allow=[
                "claude.read(file_path=docs/**)",
                "claude.bash(command=ls *)",
                "claude.bash(command=cat docs/*)",
            ],
            ask=["claude.write(file_path=notes/**)"],
            deny=["claude.*(file_path=**/.env)"],
        ),
    )
    return Harness(registry, evaluator=evaluator, journal=journal, **options)


async def run(
    adapter: ClaudeAgentAdapter, cli: ScriptedClaudeCode, options: ClaudeAgentOptions | None = None
) -> list[Any]:
    return [
        message
        async for message in query(
            prompt="work", options=options or adapter.options(), transport=cli
        )
    ]


def use(name: str, tool_input: dict[str, Any], tid: str) -> list[ScriptedToolUse]:
    return [ScriptedToolUse(name, tool_input, tid)]


def events(journal: MemoryJournal, call_id: str, kind: str) -> list[JournalEvent]:
    return [e for e in journal.events(call_id=call_id) if e.type == kind]


def tool_results(messages: Sequence[Any]) -> dict[str, Any]:
    """What the host application's message stream shows for each tool use."""
    found = {}
    for message in messages:
        if isinstance(message, UserMessage) and isinstance(message.content, list):
            for block in message.content:
                if isinstance(block, ToolResultBlock):
                    found[block.tool_use_id] = block
    return found


def hook_requests(cli: ScriptedClaudeCode, event: str) -> list[dict[str, Any]]:
    return [
        r
        for r in cli.requests
        if r["subtype"] == "hook_callback" and r["input"]["hook_event_name"] == event
    ]


async def test_an_allowed_read_runs_with_the_resolved_path(root: Path) -> None:
    journal = MemoryJournal()
    async with make_harness(root, journal) as harness:
        session = await harness.create_session(principal=ALICE)
        adapter = ClaudeAgentAdapter(session)
        cli = ScriptedClaudeCode([use("Read", {"file_path": "./link/a.md"}, "toolu_r")], cwd=root)
        messages = await run(adapter, cli)
    # Claude Code ran the path clearance checked (the link resolved), not the model's
    assert cli.ran == [("Read", {"file_path": f"{root}/docs/a.md"})]
    (pre,) = hook_requests(cli, "PreToolUse")
    specific = pre["response"]["response"]["hookSpecificOutput"]
    assert specific["permissionDecision"] == "allow"
    assert specific["updatedInput"] == {"file_path": f"{root}/docs/a.md"}
    assert cli.model_saw["toolu_r"] == "hello from docs\n"
    assert tool_results(messages)["toolu_r"].content == "hello from docs\n"
    assert isinstance(messages[-1], ResultMessage) and not messages[-1].is_error
    (decided,) = events(journal, "toolu_r", "call_decided")
    assert decided.data["outcome"] == "authorized"
    assert decided.data["arguments"] == {"file_path": "docs/a.md"}
    (started,) = events(journal, "toolu_r", "tool_started")
    (finished,) = events(journal, "toolu_r", "tool_finished")
    assert started.data["host"] is True and finished.data["status"] == "ok"


async def test_bash_runs_exactly_the_checked_argv_in_the_workspace(root: Path) -> None:
    journal = MemoryJournal()
    async with make_harness(root, journal) as harness:
        session = await harness.create_session(principal=ALICE)
        adapter = ClaudeAgentAdapter(session)
        cli = ScriptedClaudeCode(
            [
                use("Bash", {"command": "ls   'docs'"}, "toolu_ls"),
                # allowed by `ls *` as one argv; a shell would run the second command
                use("Bash", {"command": "ls docs; touch pwned"}, "toolu_semi"),
                use("Bash", {"command": "ls $(touch pwned2) docs"}, "toolu_subst"),
            ],
            cwd=root / "notes",  # the shell starts elsewhere: relative paths still mean root
        )
        await run(adapter, cli)
    assert cli.ran[0] == ("Bash", {"command": f"cd -- {root} && 'ls' docs"})
    assert cli.model_saw["toolu_ls"] == "a.md\nkeys.md\nnotes.md\n"
    assert cli.ran[1][1]["command"] == f"cd -- {root} && 'ls' 'docs;' touch pwned"
    assert not (root / "pwned").exists() and not (root / "notes" / "pwned").exists()
    assert not (root / "pwned2").exists() and not (root / "notes" / "pwned2").exists()
    (decided,) = events(journal, "toolu_ls", "call_decided")
    assert decided.data["arguments"] == {"command": "ls docs"}


def test_bash_line_quotes_what_the_shell_would_read_as_more_than_a_word() -> None:
    def shell(argv: list[str]) -> bytes:
        line = bash_line(shlex.join(argv), "/")
        return subprocess.run(["bash", "-c", line], capture_output=True, check=False).stdout

    assert bash_line("FOO=bar env", "/w") == "cd -- /w && 'FOO=bar' env"
    assert shell(["FOO=bar", "env"]) == b""  # a program named FOO=bar, not an assignment
    assert b"x" in shell(["time", "echo", "x"])  # /usr/bin/time, not the shell keyword
    words = ["it's", "a b", "$HOME", "*", "`id`", "|", "~"]
    assert shell(["printf", "%s\\n", *words]).decode().splitlines() == words


async def test_a_denied_call_is_denied_with_its_message_and_never_recorded(root: Path) -> None:
    journal = MemoryJournal()
    async with make_harness(root, journal) as harness:
        session = await harness.create_session(principal=ALICE)
        adapter = ClaudeAgentAdapter(session)
        cli = ScriptedClaudeCode(
            [
                # Claude Code would run a Read without asking: the hook still decides
                use("Read", {"file_path": "docs/notes.md"}, "toolu_env"),
                use("Read", {"file_path": "/etc/passwd"}, "toolu_out"),
                use("Skill", {"skill": "x"}, "toolu_unknown"),
            ],
            cwd=root,
        )
        messages = await run(adapter, cli)
        for tid in ("toolu_env", "toolu_out", "toolu_unknown"):
            with pytest.raises(NotAuthorizedError):
                await session.record_result(tid, result="smuggled")
    assert cli.ran == []
    assert "deny:claude.*(file_path=**/.env)" in cli.model_saw["toolu_env"]
    assert "TOKEN" not in json.dumps(cli.model_saw)
    assert tool_results(messages)["toolu_env"].is_error is True
    assert "unknown tool" in cli.model_saw["toolu_unknown"].lower()
    assert hook_requests(cli, "PostToolUse") == []
    assert [r for r in cli.requests if r["subtype"] == "can_use_tool"] == []
    for tid in ("toolu_env", "toolu_out", "toolu_unknown"):
        (decided,) = events(journal, tid, "call_decided")
        assert decided.data["outcome"] != "authorized"
        assert events(journal, tid, "tool_started") == []
        assert events(journal, tid, "tool_finished") == []


async def test_an_ask_answered_allow_session_is_not_asked_again(root: Path) -> None:
    journal = MemoryJournal()
    asked: list[ClaudeAsk] = []

    def answer(ask: ClaudeAsk) -> PermissionDecision:
        asked.append(ask)
        return PermissionDecision("allow_session", decided_by="alice")

    async with make_harness(root, journal) as harness:
        session = await harness.create_session(principal=ALICE)
        adapter = ClaudeAgentAdapter(session, on_ask=answer)
        write = {"file_path": "notes/todo.md", "content": "ship it"}
        cli = ScriptedClaudeCode(
            [use("Write", write, "toolu_w1"), use("Write", write, "toolu_w2")], cwd=root
        )
        await run(adapter, cli)
        # a new session does not inherit the session grant
        other = ClaudeAgentAdapter(await harness.create_session(principal=ALICE), on_ask=answer)
        await run(other, ScriptedClaudeCode([use("Write", write, "toolu_w3")], cwd=root))
    assert len(asked) == 2
    assert asked[0].tool_name == "Write" and asked[0].tool_use_id == "toolu_w1"
    assert asked[0].ask.qualified_name == "claude.write"
    assert asked[0].ask.arguments == {"file_path": "notes/todo.md", "content": "ship it"}
    assert asked[1].tool_use_id == "toolu_w3"
    assert [name for name, _ in cli.ran] == ["Write", "Write"]
    assert (root / "notes" / "todo.md").read_text() == "ship it"
    (decided,) = events(journal, "toolu_w1", "permission_decided")
    assert decided.data["answer"] == "allow_session"
    assert decided.data["by"] == "alice" and decided.data["via"] == VIA
    assert events(journal, "toolu_w2", "permission_decided") == []
    (second,) = events(journal, "toolu_w2", "call_decided")
    assert second.data["outcome"] == "authorized" and second.data["grant"] is not None


async def test_an_ask_answered_deny_denies_and_a_failing_on_ask_denies(root: Path) -> None:
    journal = MemoryJournal()

    def deny(ask: ClaudeAsk) -> Answer:
        return "deny"

    def broken(ask: ClaudeAsk) -> Answer:
        raise RuntimeError("the approval UI is down")

    async with make_harness(root, journal) as harness:
        write = {"file_path": "notes/x.md", "content": "x"}
        for on_ask, tid in ((deny, "toolu_d"), (broken, "toolu_b")):
            session = await harness.create_session(principal=ALICE)
            cli = ScriptedClaudeCode([use("Write", write, tid)], cwd=root)
            await run(ClaudeAgentAdapter(session, on_ask=on_ask), cli)
            assert cli.ran == []
            assert "denied" in cli.model_saw[tid]
        assert harness.pending_asks() == []  # no ask is left open
    assert not (root / "notes" / "x.md").exists()
    (decided,) = events(journal, "toolu_d", "permission_decided")
    assert decided.data["answer"] == "deny" and decided.data["via"] == VIA
    assert events(journal, "toolu_b", "tool_started") == []


async def test_without_an_answerer_an_ask_denies_and_says_how_to_answer(root: Path) -> None:
    journal = MemoryJournal()
    async with make_harness(root, journal) as harness:
        session = await harness.create_session(principal=ALICE)
        write = {"file_path": "notes/y.md", "content": "y"}
        cli = ScriptedClaudeCode([use("Write", write, "toolu_p")], cwd=root)
        await run(ClaudeAgentAdapter(session), cli)
        (pending,) = harness.pending_asks()
        # stored under Claude Code's session, not the tool use id its retry will not have
        assert pending.call_id == "claude-agent-sdk:scripted-session"
        assert pending.ask_id in cli.model_saw["toolu_p"]
        # answered from elsewhere (an inbox, `clearance asks approve`): the retry passes
        await harness.answer_ask(pending.ask_id, "allow_session", by="bob", via="cli")
        retry = ScriptedClaudeCode([use("Write", write, "toolu_p2")], cwd=root)
        await run(ClaudeAgentAdapter(session), retry)
    assert cli.ran == [] and [name for name, _ in retry.ran] == ["Write"]


async def test_a_redacted_result_never_reaches_the_model(root: Path) -> None:
    journal = MemoryJournal()
    async with make_harness(
        root, journal, result_guardrails=[SecretScanner(action="redact")]
    ) as harness:
        session = await harness.create_session(principal=ALICE)
        cli = ScriptedClaudeCode(
            [
                use("Read", {"file_path": "docs/keys.md"}, "toolu_read"),
                use("Bash", {"command": "cat docs/keys.md"}, "toolu_cat"),
            ],
            cwd=root,
        )
        messages = await run(ClaudeAgentAdapter(session), cli)
    for tid in ("toolu_read", "toolu_cat"):
        assert AWS_KEY not in cli.model_saw[tid]
        assert "[REDACTED:aws_access_key_id]" in cli.model_saw[tid]
        assert AWS_KEY not in json.dumps(tool_results(messages)[tid].content)
        assert AWS_KEY not in json.dumps(cli.outputs[tid])
        assert AWS_KEY not in json.dumps([e.data for e in journal.events(call_id=tid)])
    # the tool ran and returned the key: it was kept from the model, not from the tool
    (post,) = [r for r in hook_requests(cli, "PostToolUse") if r["tool_use_id"] == "toolu_cat"]
    assert AWS_KEY in post["input"]["tool_response"]["stdout"]
    assert post["response"]["response"]["hookSpecificOutput"]["updatedToolOutput"] == {
        "stdout": "aws_access_key_id = [REDACTED:aws_access_key_id]\n",
        "stderr": "",
        "interrupted": False,
    }


async def test_a_withheld_result_keeps_the_tools_output_shape(root: Path) -> None:
    journal = MemoryJournal()
    async with make_harness(
        root, journal, result_guardrails=[SecretScanner(action="block")]
    ) as harness:
        session = await harness.create_session(principal=ALICE)
        cli = ScriptedClaudeCode(
            [
                use("Read", {"file_path": "link/keys.md"}, "toolu_read"),
                use("Bash", {"command": "cat docs/keys.md"}, "toolu_cat"),
                use("Read", {"file_path": "docs/a.md"}, "toolu_clean"),
                use("Write", {"file_path": "notes/k.md", "content": AWS_KEY}, "toolu_write"),
            ],
            cwd=root,
        )
        await run(ClaudeAgentAdapter(session, on_ask=lambda ask: "allow_once"), cli)
    for tid in ("toolu_read", "toolu_cat", "toolu_write"):
        assert AWS_KEY not in cli.model_saw[tid]
        assert "[withheld by clearance: " in cli.model_saw[tid]
        (finished,) = events(journal, tid, "tool_finished")
        assert finished.data["result_blocked"] is True
    assert cli.outputs["toolu_read"]["file"]["filePath"] == f"{root}/docs/keys.md"
    assert cli.outputs["toolu_cat"]["interrupted"] is False
    # a variant's tag stays (another would not fit the output schema), its texts do not
    assert cli.outputs["toolu_write"]["type"] == "create"
    assert cli.outputs["toolu_write"]["content"] == ""
    assert cli.model_saw["toolu_clean"] == "hello from docs\n"  # nothing to withhold
    (clean,) = [r for r in hook_requests(cli, "PostToolUse") if r["tool_use_id"] == "toolu_clean"]
    assert clean["response"]["response"] == {}


async def test_a_result_a_guardrail_reshaped_reaches_the_model_in_the_tools_shape(
    root: Path,
) -> None:
    # Claude Code keeps the original output when a replacement does not fit the tool's
    # output schema: a guardrail's summary of another shape must not let the key through.
    def summarize(value: Any, ctx: Any) -> GuardrailOutcome:
        lines = len(value["structured_content"]["stdout"].splitlines())
        return GuardrailOutcome.replace(
            {
                "content": [{"type": "text", "text": f"{lines} line(s) of output"}],
                "structured_content": {"summary": lines},
                "is_error": False,
            }
        )

    journal = MemoryJournal()
    guardrails = [
        ResultGuardrail(summarize, tools="claude.bash"),
        SecretScanner(action="withhold", tools="claude.read"),
    ]
    async with make_harness(root, journal, result_guardrails=guardrails) as harness:
        session = await harness.create_session(principal=ALICE)
        cli = ScriptedClaudeCode(
            [
                use("Bash", {"command": "cat docs/keys.md"}, "toolu_sum"),
                use("Read", {"file_path": "docs/keys.md"}, "toolu_held"),
            ],
            cwd=root,
        )
        await run(ClaudeAgentAdapter(session), cli)
    assert cli.model_saw["toolu_sum"] == "1 line(s) of output"
    assert cli.outputs["toolu_sum"] == {
        "stdout": "1 line(s) of output",
        "stderr": "",
        "interrupted": False,
    }
    assert AWS_KEY not in json.dumps(cli.outputs["toolu_held"])
    assert cli.model_saw["toolu_held"] == "[REDACTED]"


async def test_the_journal_holds_one_complete_record_per_call(root: Path) -> None:
    journal = MemoryJournal()
    async with make_harness(root, journal) as harness:
        session = await harness.create_session(principal=ALICE)
        adapter = ClaudeAgentAdapter(session, on_ask=lambda ask: "allow_once")
        cli = ScriptedClaudeCode(
            [
                use("Read", {"file_path": "link/a.md"}, "toolu_1"),
                use("Read", {"file_path": ".env"}, "toolu_2"),
                use("Write", {"file_path": "notes/n.md", "content": "n"}, "toolu_3"),
                use("Read", {"file_path": "docs/missing.md"}, "toolu_4"),  # the tool fails
            ],
            cwd=root,
        )
        await run(adapter, cli)
    ran = {"toolu_1": "ok", "toolu_3": "ok", "toolu_4": "failed"}
    for tid in ("toolu_1", "toolu_2", "toolu_3", "toolu_4"):
        assert len(events(journal, tid, "call_decided")) == 1
        started, finished = (
            events(journal, tid, "tool_started"),
            events(journal, tid, "tool_finished"),
        )
        if tid in ran:
            assert len(started) == 1 and len(finished) == 1
            assert finished[0].data["status"] == ran[tid]
            assert started[0].seq < finished[0].seq
        else:
            assert started == [] and finished == []
    (answered,) = events(journal, "toolu_3", "permission_decided")
    assert answered.data["via"] == VIA and answered.data["answer"] == "allow_once"
    assert [e.type for e in journal.events(call_id="toolu_4")][-1] == "tool_finished"


async def test_can_use_tool_alone_authorizes_what_claude_code_asks_about(root: Path) -> None:
    journal = MemoryJournal()
    async with make_harness(root, journal) as harness:
        session = await harness.create_session(principal=ALICE)
        adapter = ClaudeAgentAdapter(session, on_ask=lambda ask: "allow_once")
        options = ClaudeAgentOptions(can_use_tool=adapter.can_use_tool)  # no hooks
        cli = ScriptedClaudeCode(
            [
                use("Write", {"file_path": "notes/../notes/c.md", "content": "c"}, "toolu_w"),
                use("Bash", {"command": "rm -rf docs"}, "toolu_rm"),
            ],
            cwd=root,
        )
        await run(adapter, cli, options)
    assert cli.ran == [("Write", {"file_path": f"{root}/notes/c.md", "content": "c"})]
    assert (root / "docs" / "a.md").exists()
    assert "no rule allows claude.bash" in cli.model_saw["toolu_rm"]
    (started,) = events(journal, "toolu_w", "call_decided")
    assert started.data["outcome"] == "authorized"


async def test_claude_codes_own_ask_rules_get_the_hooks_decision(root: Path) -> None:
    journal = MemoryJournal()
    async with make_harness(root, journal) as harness:
        session = await harness.create_session(principal=ALICE)
        adapter = ClaudeAgentAdapter(session)
        cli = ScriptedClaudeCode(
            [use("Read", {"file_path": "link/a.md"}, "toolu_a")], cwd=root, ask_rules=["Read"]
        )
        await run(adapter, cli)
    (prompt,) = [r for r in cli.requests if r["subtype"] == "can_use_tool"]
    assert prompt["response"]["response"]["behavior"] == "allow"
    assert cli.ran == [("Read", {"file_path": f"{root}/docs/a.md"})]
    assert len(events(journal, "toolu_a", "call_decided")) == 1  # decided once


async def test_a_call_run_with_other_input_is_withheld_and_stops_the_run(root: Path) -> None:
    journal = MemoryJournal()

    async def rewrite(hook_input: Any, tool_use_id: str | None, context: Any) -> Any:
        # a hook after clearance's that changes what runs
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "updatedInput": {"file_path": f"{root}/docs/keys.md"},
            }
        }

    async with make_harness(root, journal) as harness:
        session = await harness.create_session(principal=ALICE)
        adapter = ClaudeAgentAdapter(session)
        options = adapter.options(hooks={"PreToolUse": [HookMatcher(hooks=[rewrite])]})
        cli = ScriptedClaudeCode(
            [
                use("Read", {"file_path": "docs/a.md"}, "toolu_x"),
                use("Read", {"file_path": "docs/a.md"}, "toolu_y"),
            ],
            cwd=root,
        )
        await run(adapter, cli, options)
    assert AWS_KEY not in json.dumps(cli.model_saw)
    assert "other input" in cli.model_saw["toolu_x"]
    assert cli.stop_reason is not None and "toolu_y" not in cli.model_saw
    (finished,) = events(journal, "toolu_x", "tool_finished")
    assert finished.data["status"] == "failed"


async def test_mapped_names_reach_declared_tools_and_other_names_are_denied(root: Path) -> None:
    journal = MemoryJournal()
    registry = ToolRegistry()
    registry.register("claude", claude_code_tools(root, only=["Read"]))
    registry.register(
        "notes",
        [
            Tool(
                "add",
                lambda args, ctx: None,
                input_schema={
                    "type": "object",
                    "properties": {"text": {"type": "string"}},
                    "required": ["text"],
                    "additionalProperties": False,
                },
            )
        ],
    )

    def mcp_tool(name: str, tool_input: dict[str, Any]) -> Any:
        return [{"type": "text", "text": f"added {tool_input['text']}"}]

    evaluator = LocalEvaluator(allow=["notes.add", "claude.read"])
    async with Harness(registry, evaluator=evaluator, journal=journal) as harness:
        session = await harness.create_session(principal=ALICE)
        with pytest.raises(ValueError, match=r"notes\.typo"):
            ClaudeAgentAdapter(session, names={"mcp__notes__add": "notes.typo"})
        adapter = ClaudeAgentAdapter(session, names={"mcp__notes__add": "notes.add"})
        cli = ScriptedClaudeCode(
            [
                use("mcp__notes__add", {"text": "hi"}, "toolu_m"),
                use("mcp__notes__remove", {"text": "hi"}, "toolu_u"),
                use("Bash", {"command": "ls"}, "toolu_b"),  # not declared: no claude.bash
            ],
            cwd=root,
            run_tool=mcp_tool,
        )
        await run(adapter, cli)
    assert cli.ran == [("mcp__notes__add", {"text": "hi"})]
    assert "unknown tool" in cli.model_saw["toolu_u"].lower()
    assert "unknown tool" in cli.model_saw["toolu_b"].lower()
    (decided,) = events(journal, "toolu_m", "call_decided")
    assert decided.data["qualified_name"] == "notes.add"


async def test_a_session_that_cannot_authorize_denies_everything(root: Path) -> None:
    journal = MemoryJournal()
    async with make_harness(root, journal) as harness:
        session: Session = await harness.create_session(principal=ALICE)
        adapter = ClaudeAgentAdapter(session)
        await session.aclose()
        cli = ScriptedClaudeCode([use("Read", {"file_path": "docs/a.md"}, "toolu_c")], cwd=root)
        await run(adapter, cli)
    assert cli.ran == []
    assert "could not authorize" in cli.model_saw["toolu_c"]


async def test_a_check_while_a_call_runs_is_a_call_of_its_own(root: Path) -> None:
    # WebFetch asks PreToolUse about each redirect with the tool use id of the fetch.
    journal = MemoryJournal()
    evaluator = LocalEvaluator(allow=["claude.web_fetch(url=https://docs.example/**)"])
    async with make_harness(root, journal, evaluator=evaluator) as harness:
        adapter = ClaudeAgentAdapter(await harness.create_session(principal=ALICE))

        async def fetch(tool_input: dict[str, Any]) -> Any:
            hook_input = {
                "hook_event_name": "PreToolUse",
                "tool_name": "WebFetch",
                "tool_input": tool_input,
                "tool_use_id": "toolu_f",
            }
            output = await adapter.pre_tool_use(hook_input, "toolu_f", {"signal": None})  # type: ignore[arg-type]
            return output["hookSpecificOutput"]  # type: ignore[typeddict-item]

        first = await fetch({"url": "HTTPS://Docs.Example/a", "prompt": "summarize"})
        assert first["permissionDecision"] == "allow"
        assert first["updatedInput"] == {"url": "https://docs.example/a", "prompt": "summarize"}
        # each page it fetches, with only its url: allowed as it is (no rewrite), or denied
        redirect = await fetch({"url": "https://docs.example/b"})
        assert redirect == {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
            "permissionDecisionReason": "allowed by clearance",
        }
        assert (await fetch({"url": "https://evil.example/c"}))["permissionDecision"] == "deny"
        # another tool under a running call's id is not a check of it
        other = await adapter.pre_tool_use(
            {
                "hook_event_name": "PreToolUse",
                "tool_name": "Read",
                "tool_input": {"file_path": "docs/a.md"},
                "tool_use_id": "toolu_f",
            },  # type: ignore[arg-type]
            "toolu_f",
            {"signal": None},
        )
        assert other["hookSpecificOutput"]["permissionDecision"] == "deny"  # type: ignore[typeddict-item]
    decided = [e for e in journal.events() if e.type == "call_decided"]
    assert [e.call_id for e in decided] == ["toolu_f", "toolu_f/1", "toolu_f/2"]
    assert decided[1].data["arguments"] == {"url": "https://docs.example/b", "prompt": "summarize"}


async def test_a_sdk_client_session_keeps_its_grants_across_queries(root: Path) -> None:
    journal = MemoryJournal()
    answers: list[str] = []

    def answer(ask: ClaudeAsk) -> Answer:
        answers.append(ask.tool_use_id)
        return "allow_session"

    async with make_harness(root, journal) as harness:
        session = await harness.create_session(principal=ALICE)
        adapter = ClaudeAgentAdapter(session, on_ask=answer)
        write = {"file_path": "notes/s.md", "content": "s"}
        cli = ScriptedClaudeCode(
            [use("Write", write, "toolu_s1"), use("Write", write, "toolu_s2")], cwd=root
        )
        async with ClaudeSDKClient(adapter.options(), transport=cli) as client:
            await client.query("write it twice")
            messages = [m async for m in client.receive_response()]
    assert answers == ["toolu_s1"]
    assert isinstance(messages[-1], ResultMessage)
    assert [name for name, _ in cli.ran] == ["Write", "Write"]


def test_the_names_cover_the_tools_claude_code_names() -> None:
    for name in ("Bash", "Read", "Write", "Edit", "MultiEdit", "Glob", "Grep", "WebFetch"):
        assert CLAUDE_CODE_NAMES[name].startswith("claude.")
    for name in ("WebSearch", "NotebookEdit", "TodoWrite", "Task", "Agent"):
        assert name in CLAUDE_CODE_NAMES
    with pytest.raises(ValueError, match="Nope"):
        claude_code_tools("/", only=["Nope"])


def test_importing_without_the_sdk_says_what_to_install() -> None:
    code = (
        "import sys; sys.modules['claude_agent_sdk'] = None\n"
        "from clearance.errors import MissingExtraError\n"
        "import clearance.integrations.claude_code_tools  # the toolset needs no SDK\n"
        "try:\n"
        "    import clearance.integrations.claude_agent_sdk\n"
        "except MissingExtraError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ
    )
    assert done.stdout.strip().endswith("pip install 'clearance[claude-agent-sdk]'")
    assert done.stdout.count("\n") == 1


def test_the_example_runs() -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "claude_agent_sdk_example.py"
    done = subprocess.run(
        [sys.executable, str(example)],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("asked    write-1: claude.write")
    assert sum(line.startswith("asked") for line in lines) == 1
    assert "ran      Read {'file_path': '<ws>/docs/a.md'}" in lines
    assert "model    saw read-1: alpha" in lines
    assert any(line.startswith("model    saw read-2: no rule allows") for line in lines)
    assert "model    saw bash-2: aws_access_key_id = [REDACTED:aws_access_key_id]" in lines
    assert "journal  write-1: allow_session by alice via claude-agent-sdk" in lines
    assert "journal  write-2: authorized (a grant)" in lines
    assert "AKIA" not in done.stdout


def section_blocks(page: str, heading: str) -> list[tuple[int, str]]:
    """The ```python blocks of one ``## heading`` section of ``docs/<page>``."""
    lines = (DOCS / page).read_text(encoding="utf-8").splitlines()
    start = lines.index(heading) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    return [(line, code) for line, code in python_blocks(page) if start < line <= end]


@pytest.mark.parametrize(
    ("line", "code"),
    section_blocks("integrations.md", "## Claude Agent SDK"),
    ids=lambda v: str(v) if isinstance(v, int) else "",
)
def test_the_docs_section_runs(line: int, code: str) -> None:
    run_block("integrations.md", line, code)


async def test_the_prompt_and_the_results_enter_provenance(root: Path) -> None:
    """The adapter's UserPromptSubmit hook records the user's prompt, and every result
    reported through PostToolUse enters the session's provenance."""
    journal = MemoryJournal()
    async with make_harness(root, journal) as harness:
        session = await harness.create_session(principal=ALICE)
        adapter = ClaudeAgentAdapter(session)
        cli = ScriptedClaudeCode([use("Read", {"file_path": "docs/a.md"}, "toolu_p")], cwd=root)
        messages = [
            m
            async for m in query(
                prompt="Read docs/a.md and mail it to bob@x.example",
                options=adapter.options(),
                transport=cli,
            )
        ]
    assert isinstance(messages[-1], ResultMessage)
    (submitted,) = hook_requests(cli, "UserPromptSubmit")
    assert submitted["input"]["prompt"] == "Read docs/a.md and mail it to bob@x.example"
    ledger = session.provenance
    assert ledger.origin("bob@x.example")["sources"] == ["user"]
    assert ledger.origin("hello from docs")["sources"] == ["tool:claude.read"]


class HostUI:
    """A host's own ``can_use_tool`` (an approval UI written for Claude Code): answers
    with ``allow``, ``deny`` or ``edit`` (an allow with other input), and records what it
    was shown."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.shown: list[tuple[str, dict[str, Any], str | None, str | None]] = []

    async def __call__(
        self, tool_name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResultAllow | PermissionResultDeny:
        reason = getattr(context, "decision_reason", None)
        self.shown.append((tool_name, dict(tool_input), context.tool_use_id, reason))
        if self.answer == "deny":
            return PermissionResultDeny(message="not today")
        if self.answer == "edit":
            return PermissionResultAllow(updated_input={**tool_input, "content": "other"})
        return PermissionResultAllow()


@pytest.mark.parametrize("answer", ["allow", "deny", "edit"])
async def test_the_hosts_own_can_use_tool_answers_clearances_asks(root: Path, answer: str) -> None:
    """Issue 31: options() keeps a can_use_tool of the host's own. clearance decides
    first (the .env read is denied without asking it); its ask goes to the host's
    callback, whose answer is the ask's, journaled as given through the SDK."""
    journal = MemoryJournal()
    ui = HostUI(answer)
    async with make_harness(root, journal) as harness:
        session = await harness.create_session(principal=ALICE)
        adapter = ClaudeAgentAdapter(session)
        cli = ScriptedClaudeCode(
            [
                use("Read", {"file_path": ".env"}, "toolu_env"),
                use("Write", {"file_path": "notes/n.md", "content": "n"}, "toolu_w"),
            ],
            cwd=root,
        )
        await run(adapter, cli, adapter.options(ClaudeAgentOptions(can_use_tool=ui)))
    assert [(name, tid) for name, _, tid, _ in ui.shown] == [("Write", "toolu_w")]
    assert ui.shown[0][1] == {"file_path": "notes/n.md", "content": "n"}
    reason = ui.shown[0][3]
    assert reason is None or reason.startswith("clearance asks: ")
    (decided,) = events(journal, "toolu_w", "permission_decided")
    assert decided.data["via"] == VIA
    if answer == "allow":
        assert decided.data["answer"] == "allow_once"
        assert cli.ran == [("Write", {"file_path": f"{root}/notes/n.md", "content": "n"})]
        assert (root / "notes" / "n.md").read_text() == "n"
    else:
        assert decided.data["answer"] == "deny"
        assert cli.ran == [] and not (root / "notes" / "n.md").exists()
        expected = "not today" if answer == "deny" else "approves a call as it was asked"
        assert expected in cli.model_saw["toolu_w"]


@pytest.mark.parametrize("answer", ["allow", "deny"])
async def test_claude_codes_own_prompt_for_an_allowed_call_still_reaches_the_hosts_callback(
    root: Path, answer: str
) -> None:
    """A call clearance allows that Claude Code's own ask rule prompts for goes to the
    host's can_use_tool as before the adapter: both must allow it."""
    journal = MemoryJournal()
    ui = HostUI(answer)
    async with make_harness(root, journal) as harness:
        session = await harness.create_session(principal=ALICE)
        adapter = ClaudeAgentAdapter(session)
        cli = ScriptedClaudeCode(
            [use("Read", {"file_path": "link/a.md"}, "toolu_a")], cwd=root, ask_rules=["Read"]
        )
        await run(adapter, cli, adapter.options(can_use_tool=ui))
    # It sees the input clearance authorized (canonical), once.
    assert [(n, i, t) for n, i, t, _ in ui.shown] == [
        ("Read", {"file_path": f"{root}/docs/a.md"}, "toolu_a")
    ]
    if answer == "allow":
        assert cli.ran == [("Read", {"file_path": f"{root}/docs/a.md"})]
    else:
        assert cli.ran == []
    assert len(events(journal, "toolu_a", "call_decided")) == 1


async def test_one_answerer_of_asks(root: Path) -> None:
    async with make_harness(root, MemoryJournal()) as harness:
        session = await harness.create_session(principal=ALICE)
        adapter = ClaudeAgentAdapter(session, on_ask=lambda ask: "allow_once")
        with pytest.raises(ValueError, match="give one of them"):
            adapter.options(can_use_tool=HostUI("allow"))
        other = ClaudeAgentAdapter(await harness.create_session(principal=ALICE))
        with pytest.raises(ValueError, match="another ClaudeAgentAdapter's can_use_tool"):
            other.options(can_use_tool=adapter.can_use_tool)
        # Its own can_use_tool given back is not a host's.
        assert other.options(can_use_tool=other.can_use_tool).can_use_tool == other.can_use_tool
