import json
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import anyio
import pytest
from store_backends import Stores, stores_fixture
from support import ALICE, BOB, WRITE_SCHEMA, Recorder, coding_registry, harness

from clearance import (
    AskError,
    GrantScope,
    MemoryGrantStore,
    MemoryJournal,
    PermissionAsk,
    PermissionDecision,
    Tool,
    ToolRegistry,
)
from clearance.guardrails import ArgumentGuardrail, GuardrailOutcome
from clearance.harness._approval import what_asks
from clearance.harness.approvals import (
    Answer,
    Grant,
    coerce_decision,
    grant_from_answer,
    suggest_scopes,
)
from clearance.policy import LocalEvaluator, Verdict

pytestmark = pytest.mark.anyio

stores = stores_fixture()  # the persistence test runs on SQLite and on PostgreSQL

ASK_WRITES = LocalEvaluator(allow=["files.read_file"], ask=["files.write_file", "files.list_dir"])


async def test_callback_allow_once_runs_only_that_call(tmp_path: Path) -> None:
    rec = Recorder()
    asks: list[PermissionAsk] = []

    async def answer(ask: PermissionAsk) -> Answer:
        asks.append(ask)
        return "allow_once"

    journal = MemoryJournal()
    registry = coding_registry(rec, root=tmp_path)  # the path is a declared fact
    async with harness(registry, evaluator=ASK_WRITES, journal=journal) as h:
        s = await h.create_session(principal=ALICE, on_permission_ask=answer)
        out = await s.call_tool(
            "files__write_file", {"path": "src/a.py", "content": "x"}, call_id="w1", turn_id="t1"
        )
        again = await s.call_tool(
            "files__write_file", {"path": "src/a.py", "content": "x"}, call_id="w2"
        )
    assert out.ok and again.ok and len(asks) == 2  # allow_once is never stored
    ask = asks[0]
    assert (ask.tool, ask.qualified_name, ask.model_alias) == (
        "files__write_file",
        "files.write_file",
        "files__write_file",
    )
    assert ask.call_id == "w1" and ask.turn_id == "t1" and ask.principal == 'User::"alice"'
    assert ask.policies == ("ask:files.write_file",)
    assert ask.deciding == ("path",)  # the declared fact: the content does not decide
    kinds = [s.kind for s in ask.suggestions]
    assert kinds == ["exact", "prefix", "tool"]
    assert ask.suggestions[1].prefix == "src/"
    types = [e.type for e in journal.events(call_id="w1")]
    assert types == [
        "permission_asked",
        "permission_decided",
        "call_decided",
        "tool_started",
        "tool_finished",
    ]
    decided = journal.events(call_id="w1")[2].data
    assert decided["decision"] == "ask" and decided["ask"]["answer"] == "allow_once"


async def test_allow_session_grant_covers_scope_and_dies_with_session() -> None:
    rec = Recorder()
    answers: Iterator[Answer | PermissionDecision] = iter(
        [PermissionDecision("allow_session", scope=None), "deny"]
    )
    async with harness(coding_registry(rec), evaluator=ASK_WRITES) as h:
        s = await h.create_session(principal=ALICE, on_permission_ask=lambda ask: next(answers))
        first = await s.call_tool("files__write_file", {"path": "a", "content": "1"})
        same = await s.call_tool("files__write_file", {"path": "a", "content": "1"})
        other = await s.call_tool("files__write_file", {"path": "a", "content": "2"})
        assert first.ok and same.ok and same.grant is not None
        assert other.status == "denied"
        assert len(h.grants.list()) == 1
        await s.aclose()
        assert h.grants.list() == []


async def test_widened_scope_from_suggestions_and_principal_binding(tmp_path: Path) -> None:
    rec = Recorder()

    def widen(ask: PermissionAsk) -> PermissionDecision:
        return PermissionDecision(
            "allow_always", scope=ask.suggestions[1], decided_by="alice@example.com"
        )

    async with harness(coding_registry(rec, root=tmp_path), evaluator=ASK_WRITES) as h:
        s = await h.create_session(principal=ALICE, on_permission_ask=widen)
        await s.call_tool("files__write_file", {"path": "src/a.py", "content": "1"})
        (grant,) = h.grants.list()
        assert grant.widened_by == "alice@example.com" and grant.scope.prefix == "src/"
        s.on_permission_ask = lambda ask: "deny"
        assert (await s.call_tool("files__write_file", {"path": "src/b.py", "content": "2"})).ok
        assert (
            await s.call_tool("files__write_file", {"path": "src/../x", "content": "2"})
        ).status == "denied"
        assert (
            await s.call_tool("files__write_file", {"path": "lib/b.py", "content": "2"})
        ).status == "denied"
        bob = await h.create_session(principal=BOB, on_permission_ask=lambda ask: "deny")
        assert (
            await bob.call_tool("files__write_file", {"path": "src/b.py", "content": "2"})
        ).status == "denied"


async def test_raising_or_nonsense_callback_denies() -> None:
    rec = Recorder()

    def boom(ask: PermissionAsk) -> Answer:
        raise RuntimeError("ui crashed")

    async with harness(coding_registry(rec), evaluator=ASK_WRITES) as h:
        s = await h.create_session(principal=ALICE, on_permission_ask=boom)
        out = await s.call_tool("files__write_file", {"path": "a", "content": "1"})
        # Not an answer, on purpose: what a confused callback returns.
        s.on_permission_ask = lambda ask: "sure"  # type: ignore[assignment, return-value]
        out2 = await s.call_tool("files__write_file", {"path": "a", "content": "1"})
    assert out.status == "denied" and "callback failed" in out.text
    assert out2.status == "denied" and rec.calls == []


async def test_no_answerer_denies_at_once() -> None:
    rec = Recorder()
    async with harness(coding_registry(rec), evaluator=ASK_WRITES) as h:
        s = await h.create_session(principal=ALICE)
        with anyio.fail_after(2):
            out = await s.call_tool("files__write_file", {"path": "a", "content": "1"})
    assert out.status == "denied" and "no one is set up to answer" in out.text


async def test_stream_answers_concurrent_asks_out_of_order() -> None:
    rec = Recorder()
    outcomes: dict[str, str] = {}
    async with harness(coding_registry(rec), evaluator=ASK_WRITES) as h:
        s = await h.create_session(principal=ALICE)

        async def call(cid: str, path: str) -> None:
            outcomes[cid] = (
                await s.call_tool("files__list_dir", {"path": path}, call_id=cid)
            ).status

        async def answer_in_reverse() -> None:
            pending: list[PermissionAsk] = []
            async for ask in s.permission_asks():
                pending.append(ask)
                if len(pending) == 3:
                    break
            for ask in reversed(pending):
                await ask.respond("deny" if ask.call_id == "b" else "allow_once")
            with pytest.raises(AskError, match="already answered"):
                await pending[0].respond("deny")

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(answer_in_reverse)
                await anyio.wait_all_tasks_blocked()
                for cid in "abc":
                    tg.start_soon(call, cid, cid)
    assert outcomes == {"a": "ok", "b": "denied", "c": "ok"}
    assert sorted(a["path"] for _, a in rec.calls) == ["a", "c"]


async def test_stream_timeout_and_late_answer() -> None:
    rec = Recorder()
    journal = MemoryJournal()
    async with harness(
        coding_registry(rec), evaluator=ASK_WRITES, ask_timeout=0.05, journal=journal
    ) as h:
        s = await h.create_session(principal=ALICE)
        seen: list[PermissionAsk] = []

        async def listen() -> None:
            async for ask in s.permission_asks():
                seen.append(ask)
                return

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(listen)
                await anyio.wait_all_tasks_blocked()
                out = await s.call_tool("files__list_dir", {"path": "a"}, call_id="c1")
        with pytest.raises(AskError, match="timeout"):
            await seen[0].respond("allow_once")
    assert out.status == "denied" and "in time" in out.text
    decided = next(e for e in journal.events(call_id="c1") if e.type == "permission_decided")
    assert decided.data["how"] == "timeout"


async def test_closing_session_denies_open_asks_and_cancel_withdraws() -> None:
    rec = Recorder()
    async with harness(coding_registry(rec), evaluator=ASK_WRITES) as h:
        s = await h.create_session(principal=ALICE)
        results: list[str] = []
        got: list[PermissionAsk] = []

        async def listen() -> None:
            got.extend([ask async for ask in s.permission_asks()])

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(listen)
                await anyio.wait_all_tasks_blocked()

                async def call() -> None:
                    results.append((await s.call_tool("files__list_dir", {"path": "a"})).status)

                tg.start_soon(call)
                await anyio.wait_all_tasks_blocked()
                assert len(s.open_asks) == 1
                await s.aclose()
    assert results == ["denied"] and rec.calls == []
    with pytest.raises(AskError, match="closed"):
        await got[0].respond("allow_once")


async def test_allow_always_persists_in_the_store_and_revoke(stores: Stores) -> None:
    rec = Recorder()
    store = stores.grants()
    async with harness(coding_registry(rec), evaluator=ASK_WRITES, grant_store=store) as h:
        s = await h.create_session(principal=ALICE, on_permission_ask=lambda a: "allow_always")
        assert (await s.call_tool("files__write_file", {"path": "a", "content": "1"})).ok
    store.close()
    reopened = stores.grants()
    (grant,) = reopened.list()
    assert grant.kind == "always" and grant.principal == 'User::"alice"'
    async with harness(coding_registry(rec), evaluator=ASK_WRITES, grant_store=reopened) as h:
        s = await h.create_session(principal=ALICE, on_permission_ask=lambda a: "deny")
        assert (
            await s.call_tool("files__write_file", {"path": "a", "content": "1"})
        ).grant == grant.grant_id
        assert reopened.revoke(grant.grant_id)
        assert (
            await s.call_tool("files__write_file", {"path": "a", "content": "1"})
        ).status == "denied"
    reopened.close()
    assert stores.grants().list() == []


def test_scope_rules() -> None:
    exact = GrantScope.exact({"a": 1})
    assert exact.covers({"a": 1}) and not exact.covers({"a": 2})
    prefix = GrantScope.prefix_of("/path", "src/")
    assert prefix.covers({"path": "src/x/y"})
    assert not prefix.covers({"path": "src/../etc"}) and not prefix.covers({"path": "/src/x"})
    assert not prefix.covers({"other": "src/x"})
    assert json.loads(json.dumps(prefix.to_json()))["prefix"] == "src/"
    with pytest.raises(AskError):
        PermissionDecision("maybe")  # type: ignore[arg-type]


# --- the grant an answer makes, and the answer itself --------------------------------------

MOVE = {"source": "src/app.py", "destination": "public/app.py"}


def _asked(arguments: Mapping[str, object], *, offered: bool = True) -> PermissionAsk:
    return PermissionAsk(
        ask_id="ask_1",
        session_id="s1",
        turn_id=None,
        call_id="c1",
        tool="files__move_file",
        qualified_name="files.move_file",
        model_alias="files__move_file",
        principal="User::alice",
        arguments=dict(arguments),
        reason="r",
        suggestions=suggest_scopes(arguments) if offered else (),
    )


def test_a_grant_carries_the_answer_its_session_its_expiry_and_who_widened_it() -> None:
    ask = _asked(MOVE)
    exact = grant_from_answer(
        ask, PermissionDecision("allow_session", expires_in=60, decided_by="bob"), MOVE
    )
    assert exact is not None
    assert (exact.principal, exact.tool, exact.kind, exact.session_id) == (
        "User::alice",
        "files.move_file",
        "session",
        "s1",
    )
    assert exact.scope == GrantScope.exact(MOVE)
    assert exact.expires_at == exact.created_at + 60
    assert exact.created_at <= time.time()
    assert (exact.decided_by, exact.widened_by) == ("bob", None)  # the exact call: not widened
    tool = GrantScope.tool()
    always = grant_from_answer(ask, PermissionDecision("allow_always", scope=tool), MOVE)
    assert always is not None
    assert (always.kind, always.session_id, always.expires_at) == ("always", None, None)
    assert always.widened_by == "unknown"  # widened, by someone the answer did not name
    named = grant_from_answer(
        ask, PermissionDecision("allow_always", scope=tool, decided_by="carol"), MOVE
    )
    assert named is not None and named.widened_by == "carol"
    for answer in ("allow_once", "deny"):
        assert grant_from_answer(ask, PermissionDecision(answer), MOVE) is None


def test_an_unoffered_exact_scope_of_the_call_is_accepted() -> None:
    ask = _asked(MOVE, offered=False)
    decision = PermissionDecision("allow_session", scope=GrantScope.exact(dict(MOVE)))
    grant = grant_from_answer(ask, decision, MOVE)
    assert grant is not None and grant.scope == GrantScope.exact(MOVE)


def test_an_unoffered_scope_is_refused_in_words_that_say_why() -> None:
    ask = _asked(MOVE, offered=False)
    elsewhere = GrantScope.prefixes_of({"/source": "lib/", "/destination": "public/"})
    with pytest.raises(AskError) as info:
        grant_from_answer(ask, PermissionDecision("allow_session", scope=elsewhere), MOVE)
    assert str(info.value) == "the grant scope does not cover the asked call"
    with pytest.raises(AskError) as info:
        grant_from_answer(ask, PermissionDecision("allow_session", scope=GrantScope.tool()), MOVE)
    assert str(info.value) == (
        "the grant scope leaves /destination, /source free; a scope that was not offered "
        "must constrain every path and fact field of the call"
    )


def test_an_answer_replaces_the_scope_or_the_message_it_names() -> None:
    base = PermissionDecision("allow_session", message="ok", decided_by="bob")
    assert coerce_decision(base) is base
    prefix = GrantScope.prefix_of("/path", "src/")
    scoped = coerce_decision(base, scope=prefix)
    assert (scoped.scope, scoped.message, scoped.decided_by) == (prefix, "ok", "bob")
    noted = coerce_decision(PermissionDecision("allow_session", scope=prefix), message="why")
    assert (noted.scope, noted.message) == (prefix, "why")
    assert coerce_decision("deny", message="no") == PermissionDecision("deny", message="no")
    with pytest.raises(AskError) as info:
        PermissionDecision("maybe")  # type: ignore[arg-type]
    assert str(info.value) == "'maybe' is not one of allow_once, allow_session, allow_always, deny"
    with pytest.raises(AskError) as info:
        coerce_decision("yes")
    assert str(info.value) == (
        "an ask must be answered with one of allow_once, allow_session, allow_always, deny,"
        " not 'yes'"
    )


async def test_responding_passes_the_scope_and_message_and_closing_an_answered_ask_does_nothing() -> (
    None
):
    ask = _asked({"path": "src/a"})
    prefix = GrantScope.prefix_of("/path", "src/")
    await ask.respond("allow_always", scope=prefix, message="fine")
    assert ask.decision == PermissionDecision("allow_always", scope=prefix, message="fine")
    ask.close("timeout")
    assert ask.closed is None and ask.answered and not ask.open
    with pytest.raises(AskError) as info:
        await ask.respond("deny")
    assert str(info.value) == "ask ask_1 was already answered"
    unanswered = _asked({"path": "src/a"})
    unanswered.close("timeout")
    unanswered.close("closed")
    assert unanswered.closed == "timeout" and not unanswered.open
    with pytest.raises(AskError) as info:
        await unanswered.respond("allow_once")
    assert str(info.value) == "ask ask_1 is closed (timeout)"


def test_an_ask_as_json_is_the_documented_record_without_the_exact_hash() -> None:
    ask = _asked(MOVE)
    ask.policies = ("ask:files.*",)
    ask.deciding = ("source", "destination")
    ask.facts = {"source": {"value": "src/app.py"}}
    record = json.loads(json.dumps(ask.to_json()))
    assert record == {
        "ask_id": "ask_1",
        "call_id": "c1",
        "tool": "files__move_file",
        "qualified_name": "files.move_file",
        "model_alias": "files__move_file",
        "principal": "User::alice",
        "arguments": MOVE,
        "reason": "r",
        "policies": ["ask:files.*"],
        "suggestions": [s.to_json(public=True) for s in suggest_scopes(MOVE)],
        "deciding": ["source", "destination"],
        "facts": {"source": {"value": "src/app.py"}},
        "notes": {},
    }
    assert [s["arguments_hash"] for s in record["suggestions"]] == [None, None, None]


# --- the approval stage's record -----------------------------------------------------------


async def test_a_denied_ask_ends_the_call_with_its_record() -> None:
    journal = MemoryJournal()
    async with harness(coding_registry(Recorder()), evaluator=ASK_WRITES, journal=journal) as h:
        s = await h.create_session(principal=ALICE, on_permission_ask=lambda ask: "deny")
        out = await s.call_tool("files__write_file", {"path": "a", "content": "x"}, call_id="c1")
    assert (out.status, out.decision, out.reasons) == ("denied", "ask", ("ask:files.write_file",))
    assert out.text.startswith("the approval was denied (correlation id ")
    decided = next(e.data for e in journal.events(call_id="c1") if e.type == "call_decided")
    assert (decided["stage"], decided["decision"], decided["outcome"]) == ("ask", "ask", "denied")
    assert decided["reasons"] == ["ask:files.write_file"]
    assert decided["message"] == "the approval was denied"
    assert {k: decided["ask"][k] for k in ("reason", "policies", "answer", "how", "message")} == {
        "reason": "approval required by ask:files.write_file",
        "policies": ["ask:files.write_file"],
        "answer": "deny",
        "how": "callback",
        "message": "the approval was denied",
    }
    assert decided["timing_us"]["ask"] >= 0


class _BrokenGrants(MemoryGrantStore):
    def find(self, *args: object, **kwargs: object) -> None:
        raise RuntimeError("the grant store is away")


async def test_a_failing_grant_store_denies_the_ask_and_says_so() -> None:
    journal = MemoryJournal()
    seen: list[tuple[str, BaseException, dict[str, object]]] = []
    async with harness(
        coding_registry(Recorder()),
        evaluator=ASK_WRITES,
        journal=journal,
        grant_store=_BrokenGrants(),
        diagnostics=lambda cid, exc, info: seen.append((cid, exc, info)),
    ) as h:
        s = await h.create_session(principal=ALICE, on_permission_ask=lambda ask: "allow_once")
        out = await s.call_tool("files__write_file", {"path": "a", "content": "x"}, call_id="c1")
    assert (out.status, out.decision) == ("denied", "ask")
    assert out.text.startswith("the approval could not be recorded (correlation id ")
    [(correlation_id, exc, info)] = seen
    assert str(exc) == "the grant store is away" and correlation_id in out.text
    assert (info["stage"], info["call_id"], info["tool"]) == ("ask", "c1", "files__write_file")
    decided = next(e.data for e in journal.events(call_id="c1") if e.type == "call_decided")
    assert decided["ask"]["message"] == "the approval could not be recorded"
    assert decided["grant"] is None and "ask" in decided["timing_us"]


async def test_the_reason_shown_to_a_person_holds_no_withheld_value(tmp_path: Path) -> None:
    def ask_about(arguments: dict[str, object], ctx: object) -> GuardrailOutcome:
        return GuardrailOutcome.ask(f"writes {arguments['content']} to {arguments['path']}")

    registry = ToolRegistry()
    registry.register(
        "files",
        [
            Tool(
                "write_file",
                Recorder().handler("files.write_file"),
                input_schema=WRITE_SCHEMA,
                sensitive=["/content"],
                # The path decides (declared), the withheld content does not: the call
                # can be put to a person.
                root=tmp_path,
                facts={"/path": "path"},
            )
        ],
    )
    asks: list[PermissionAsk] = []

    def answer(ask: PermissionAsk) -> Answer:
        asks.append(ask)
        return "allow_once"

    async with harness(
        registry,
        evaluator=LocalEvaluator(allow=["files.*"]),
        argument_guardrails=[ArgumentGuardrail(ask_about, name="review")],
    ) as h:
        s = await h.create_session(principal=ALICE, on_permission_ask=answer)
        out = await s.call_tool(
            "files__write_file", {"path": "a.txt", "content": "hunter2"}, call_id="c1"
        )
    assert out.ok
    [ask] = asks
    assert "hunter2" not in ask.reason and ask.reason.endswith("to a.txt")
    assert ask.policies == ("review",)


def test_what_asks_names_the_policies_and_the_reasons() -> None:
    ask = Verdict("ask", ("p1", "p2"), message="big refund", evaluator="x")
    assert what_asks(Verdict("allow", ("p",)), ()) is None
    assert what_asks(Verdict("deny", ("p",)), ()) is None
    assert what_asks(ask, ()) == (("p1", "p2"), "big refund")
    # No reason given: the policies that asked are named (the inbox's "Why").
    assert what_asks(Verdict("ask", ("p1",)), ()) == (("p1",), "approval required by p1")
    assert what_asks(Verdict("ask", ()), ()) == ((), "approval required")
    guard_asks = (("review", "looks odd"), ("size", "large"))
    assert what_asks(ask, guard_asks) == (
        ("p1", "p2", "review", "size"),
        "big refund; looks odd; large",
    )
    assert what_asks(Verdict("allow", ("p",)), guard_asks) == (
        ("review", "size"),
        "looks odd; large",
    )
    assert what_asks(Verdict("allow", ("p",)), (("review", ""),)) == (
        ("review",),
        "approval required by review",
    )


async def test_a_call_a_grant_covers_is_recorded_as_granted() -> None:
    journal = MemoryJournal()
    store = MemoryGrantStore()
    grant = Grant("g_1", 'User::"alice"', "files.write_file", GrantScope.tool(), "always")
    store.add(grant)
    async with harness(
        coding_registry(Recorder()), evaluator=ASK_WRITES, journal=journal, grant_store=store
    ) as h:
        s = await h.create_session(principal=ALICE)
        out = await s.call_tool("files__write_file", {"path": "a", "content": "x"}, call_id="c1")
    assert out.ok
    decided = next(e.data for e in journal.events(call_id="c1") if e.type == "call_decided")
    assert (decided["ask"]["answer"], decided["ask"]["grant"], decided["grant"]) == (
        "grant",
        "g_1",
        "g_1",
    )


async def test_declared_path_facts_shape_the_suggested_scopes(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    registry = ToolRegistry()
    registry.register(
        "out",
        [
            Tool(
                "save",
                Recorder().handler("out.save"),
                input_schema={
                    "type": "object",
                    "properties": {"target": {"type": "string"}, "path": {"type": "string"}},
                    "required": ["target", "path"],
                    "additionalProperties": False,
                },
                facts={"/target": "path_entry"},
                root=tmp_path,
            )
        ],
    )
    asks: list[PermissionAsk] = []

    def answer(ask: PermissionAsk) -> Answer:
        asks.append(ask)
        return "deny"

    async with harness(registry, evaluator=LocalEvaluator(ask=["out.save"])) as h:
        s = await h.create_session(principal=ALICE, on_permission_ask=answer)
        await s.call_tool("out__save", {"target": "out/a.txt", "path": "label"}, call_id="c1")
    [ask] = asks
    # 'target' is the declared path ('path' here is only a label): the prefix scope is
    # offered on it alone.
    assert [s.description for s in ask.suggestions] == [
        "this exact call",
        "target under out/",
        "any arguments",
    ]


async def test_no_prefix_scope_is_suggested_while_another_fact_decides_the_call(
    tmp_path: Path,
) -> None:
    (tmp_path / "docs").mkdir()
    registry = ToolRegistry()
    registry.register(
        "mail",
        [
            Tool(
                "attach",
                Recorder().handler("mail.attach"),
                input_schema={
                    "type": "object",
                    "properties": {"file": {"type": "string"}, "to": {"type": "string"}},
                    "required": ["file", "to"],
                    "additionalProperties": False,
                },
                facts={"/file": "path_entry", "/to": "email"},
                root=tmp_path,
            )
        ],
    )
    asks: list[PermissionAsk] = []

    def answer(ask: PermissionAsk) -> Answer:
        asks.append(ask)
        return "deny"

    async with harness(registry, evaluator=LocalEvaluator(ask=["mail.attach"])) as h:
        s = await h.create_session(principal=ALICE, on_permission_ask=answer)
        await s.call_tool("mail__attach", {"file": "docs/r.pdf", "to": "bob@example.com"})
    [ask] = asks
    assert [s.kind for s in ask.suggestions] == ["exact", "tool"]  # a prefix frees the recipient


async def test_an_answer_s_unoffered_scope_must_constrain_the_declared_facts(
    tmp_path: Path,
) -> None:
    registry = ToolRegistry()
    schema = {
        "type": "object",
        "properties": {
            "target": {"type": "string"},
            "path": {"type": "string"},
            "to": {"type": "string"},
        },
        "required": ["target", "path", "to"],
        "additionalProperties": False,
    }
    registry.register(
        "out",
        [
            Tool(
                "save",
                Recorder().handler("out.save"),
                input_schema=schema,
                facts={"/target": "path_entry", "/to": "email"},
                root=tmp_path,
            )
        ],
    )
    # 'target' is at the root (no prefix scope is offered); 'path' is only a label.
    arguments = {"target": "a.txt", "path": "x/label", "to": "bob@example.com"}
    journal = MemoryJournal()
    scopes = [
        GrantScope.prefix_of("/path", "x/"),  # leaves the declared path free
        GrantScope.prefixes_of({"/path": "x/", "/target": "a"}),  # leaves the recipient free
    ]
    answers = iter(PermissionDecision("allow_always", scope=s, decided_by="bob") for s in scopes)
    failures: list[tuple[BaseException, dict[str, object]]] = []
    async with harness(
        registry,
        evaluator=LocalEvaluator(ask=["out.save"]),
        journal=journal,
        diagnostics=lambda cid, exc, info: failures.append((exc, info)),
    ) as h:
        s = await h.create_session(principal=ALICE, on_permission_ask=lambda ask: next(answers))
        for i in range(len(scopes)):
            out = await s.call_tool("out__save", arguments, call_id=f"c{i}")
            assert out.status == "denied"
            assert h.grants.list() == []
        decided = [e.data for e in journal.events() if e.type == "call_decided"]
    assert [d["ask"]["message"] for d in decided] == ["the answer could not be applied; denied"] * 2
    assert [d["ask"]["answer"] for d in decided] == ["deny", "deny"]
    assert [(type(exc), info["stage"]) for exc, info in failures] == [(AskError, "grant")] * 2
    assert "leaves /target, /to free" in str(failures[0][0])


async def test_a_grant_made_by_an_answer_is_recorded_without_its_hash() -> None:
    journal = MemoryJournal()
    async with harness(coding_registry(Recorder()), evaluator=ASK_WRITES, journal=journal) as h:
        s = await h.create_session(principal=ALICE, on_permission_ask=lambda ask: "allow_always")
        out = await s.call_tool("files__write_file", {"path": "a", "content": "x"}, call_id="c1")
        [grant] = h.grants.list()
    assert out.ok
    decided = next(e.data for e in journal.events(call_id="c1") if e.type == "call_decided")
    assert decided["ask"]["grant_created"] == grant.to_json(public=True)
    assert decided["ask"]["grant_created"]["scope"]["arguments_hash"] is None
    assert decided["grant"] == grant.grant_id
    answered = next(e.data for e in journal.events(call_id="c1") if e.type == "permission_decided")
    assert (answered["answer"], answered["grant"]) == ("allow_always", grant.grant_id)


async def test_each_way_an_ask_goes_unanswered_is_recorded_in_its_words() -> None:
    journal = MemoryJournal()

    def broken(ask: PermissionAsk) -> Answer:
        raise RuntimeError("the approval UI crashed")

    async with harness(
        coding_registry(Recorder()), evaluator=ASK_WRITES, journal=journal, ask_timeout=0.2
    ) as h:
        nobody = await h.create_session(principal=ALICE)
        await nobody.call_tool("files__write_file", {"path": "a", "content": "x"}, call_id="n")
        failing = await h.create_session(principal=ALICE, on_permission_ask=broken)
        await failing.call_tool("files__write_file", {"path": "a", "content": "x"}, call_id="e")
        closing = await h.create_session(principal=ALICE)
        async with anyio.create_task_group() as tg:

            async def close_when_asked() -> None:
                async for _ask in closing.permission_asks():
                    await closing.aclose()

            tg.start_soon(close_when_asked)
            await closing.call_tool("files__write_file", {"path": "a", "content": "x"}, call_id="c")
    expected = {
        "n": ("unanswerable", "this call needs approval and no one is set up to answer; denied"),
        "e": ("error", "the approval callback failed; denied"),
        "c": ("closed", "the session closed before the approval was answered; denied"),
    }
    for call_id, (how, message) in expected.items():
        events = journal.events(call_id=call_id)
        decided = next(e.data for e in events if e.type == "call_decided")
        assert (decided["ask"]["answer"], decided["ask"]["how"], decided["ask"]["message"]) == (
            "deny",
            how,
            message,
        )
        asked = next(e.data for e in events if e.type == "permission_asked")
        answered = next(e.data for e in events if e.type == "permission_decided")
        assert answered["ask_id"] == asked["ask_id"] == decided["ask"]["ask_id"]
        assert (answered["answer"], answered["how"]) == ("deny", how)
