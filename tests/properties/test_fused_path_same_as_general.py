"""The fused path of ``call_tool`` (``Pipeline._fused``) ends every call exactly as the
general stages do: the same outcomes, the same journal records (fields, order, ``seq``),
the same diagnostics, for allowed, denied, asked and invalid calls, handlers that succeed,
fail, raise or return what is not a result, an evaluator that fails or must be awaited, a
sensitive argument, canonical facts, and a journal whose ``append`` fails.

Two harnesses run the same random calls, one with ``pipeline.fused = False`` (every call
through the general stages); only what differs by nature (timestamps, durations, session
and correlation ids) is left out of the comparison.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clearance import (
    CallContext,
    CallToolResult,
    Harness,
    JournalEvent,
    MemoryJournal,
    PermissionAsk,
    Principal,
    Tool,
    ToolRegistry,
)
from clearance.harness.outcomes import CallOutcome
from clearance.policy import AuthzRequest, LocalEvaluator, Verdict

pytestmark = pytest.mark.anyio

ALICE = Principal("User", "alice")
SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "maxLength": 40},
        "n": {"type": "integer"},
        "answer": {"type": "string"},
        "token": {"type": "string"},
    },
    "required": ["path"],
    "additionalProperties": False,
}


async def ok(arguments: dict[str, Any], ctx: CallContext) -> Any:
    return f"read {arguments['path']}"


async def structured(arguments: dict[str, Any], ctx: CallContext) -> Any:
    return {"path": arguments["path"], "n": arguments.get("n")}


async def domain_error(arguments: dict[str, Any], ctx: CallContext) -> Any:
    return CallToolResult("no such file", is_error=True)


async def raises(arguments: dict[str, Any], ctx: CallContext) -> Any:
    raise RuntimeError(f"disk on fire at {arguments['path']} {arguments.get('token')}")


async def not_a_result(arguments: dict[str, Any], ctx: CallContext) -> Any:
    return object()


def sync_ok(arguments: dict[str, Any], ctx: CallContext) -> Any:
    return "sync"


def registry() -> ToolRegistry:
    registry = ToolRegistry()
    registry.register(
        "t",
        [
            Tool("ok", ok, input_schema=SCHEMA),
            Tool("structured", structured, input_schema=SCHEMA),
            Tool("domain", domain_error, input_schema=SCHEMA),
            Tool("raises", raises, input_schema=SCHEMA),
            Tool("not_a_result", not_a_result, input_schema=SCHEMA),
            Tool("sync", sync_ok, input_schema=SCHEMA),
            Tool("secret", ok, input_schema=SCHEMA, sensitive=["/token"]),
            Tool("faceted", ok, input_schema=SCHEMA, facts={"/n": "number"}),
            Tool("asked", ok, input_schema=SCHEMA),
            Tool("denied", ok, input_schema=SCHEMA),
            Tool("timed", ok, input_schema=SCHEMA, timeout=5),
            Tool("unselected", ok, input_schema=SCHEMA),
        ],
    )
    return registry


class Evaluator:
    """Local rules, failing for ``n == 666`` and answering through an awaitable for
    ``n == 7`` (an evaluator that must be awaited)."""

    name = "flaky"

    def __init__(self) -> None:
        self.local = LocalEvaluator(
            allow=["t.*", "t.denied(path=public/**)"],
            ask=["t.asked", "t.*(path=ask/**)"],
            deny=[
                "t.denied",
                "t.unselected",
                "t.*(path=**/.env)",
                "t.faceted(n=13)",
                "t.structured(path.from=tool)",
            ],
        )

    def bind(self, tools: Any) -> None:
        self.local.bind(tools)

    def evaluate(self, request: AuthzRequest) -> Any:
        n = request.arguments.get("n")
        if n == 666:
            raise ValueError("the rule store is unreachable")
        verdict = self.local.evaluate(request)
        if n == 7:

            async def later() -> Verdict:
                return verdict

            return later()
        return verdict


class FailingJournal(MemoryJournal):
    """A journal whose own ``append`` refuses the records of calls with ``n == 99``
    (so the pipeline must use ``append``, not ``append_now``)."""

    async def append(self, event: JournalEvent) -> JournalEvent:
        if event.data.get("arguments", {}) and event.data["arguments"].get("n") == 99:
            raise OSError("disk full")
        return await super().append(event)


TOOLS = [
    "t__ok",
    "t__structured",
    "t__domain",
    "t__raises",
    "t__not_a_result",
    "t__sync",
    "t__secret",
    "t__faceted",
    "t__asked",
    "t__denied",
    "t__timed",
    "t__unselected",
    "t__nope",
    "t.ok",
]
PATHS = ["src/a.py", "public/x", "ask/y", "deep/.env", "z" * 41, ""]
ANSWERS = ["allow_once", "allow_session", "deny", "boom"]

arguments_st: st.SearchStrategy[Any] = st.one_of(
    st.fixed_dictionaries(
        {"path": st.sampled_from(PATHS)},
        optional={
            "n": st.one_of(st.sampled_from([0, 7, 13, 99, 666]), st.integers(-5, 5)),
            "answer": st.sampled_from(ANSWERS),
            "token": st.sampled_from(["hunter2", "s3cr3t-value"]),
            "extra": st.just(1),  # not in the schema: invalid
        },
    ),
    st.sampled_from([None, [], "path", {"path": 3}]),
)
calls_st = st.lists(
    st.tuples(st.sampled_from(TOOLS), arguments_st, st.sampled_from([None, "dup"])),
    min_size=1,
    max_size=12,
)

_CORRELATION = re.compile(r"correlation id [0-9a-f]+")
_RANDOM_IDS = frozenset({"grant", "grant_id", "ask_id"})
"""Random ids: compared by whether there is one."""


def _plain(value: Any, session_id: str) -> Any:
    if isinstance(value, str):
        return _CORRELATION.sub("correlation id X", value).replace(session_id, "S")
    if isinstance(value, dict):
        return {
            k: (v is not None) if k in _RANDOM_IDS else _plain(v, session_id)
            for k, v in value.items()
            if k not in ("timing_us", "duration_us", "correlation_id", "created_at")
        }
    if isinstance(value, list | tuple):
        return [_plain(v, session_id) for v in value]
    return value


def _outcome(outcome: CallOutcome, session_id: str) -> Any:
    result = outcome.result.to_json() if outcome.result is not None else None
    return _plain(
        {
            "call_id": outcome.call_id,
            "tool": outcome.tool,
            "qualified_name": outcome.qualified_name,
            "model_alias": outcome.model_alias,
            "status": outcome.status,
            "result": result,
            "message": outcome.message,
            "decision": outcome.decision,
            "reasons": list(outcome.reasons),
            "granted": outcome.grant is not None,
        },
        session_id,
    )


def answer(ask: PermissionAsk) -> Any:
    given_answer = ask.arguments.get("answer", "deny")
    if given_answer == "boom":
        raise RuntimeError("the approver crashed")
    return given_answer


async def run(calls: list[tuple[str, Any, str | None]], *, fused: bool, failing: bool) -> Any:
    journal = FailingJournal() if failing else MemoryJournal()
    diagnosed: list[tuple[str, str, str]] = []
    harness = Harness(
        registry(),
        evaluator=Evaluator(),
        journal=journal,
        diagnostics=lambda cid, exc, info: diagnosed.append(
            (info["stage"], info["call_id"], type(exc).__name__)
        ),
    )
    harness.pipeline.fused = fused
    outcomes = []
    async with harness:
        session = await harness.create_session(
            principal=ALICE,
            on_permission_ask=answer,
        )
        for i, (tool, arguments, call_id) in enumerate(calls):
            outcome = await session.call_tool(
                tool, arguments, call_id=call_id or f"c{i}", turn_id=f"turn{i % 2}"
            )
            outcomes.append(_outcome(outcome, session.id))
        records = [
            (e.seq, e.type, e.turn_id, e.call_id, _plain(e.data, session.id))
            for e in journal.events(session_id=session.id)
        ]
        ledger = (
            session.provenance.places,
            session.provenance.overflowed,
            session.provenance.origin("read src/a.py"),
        )
    return outcomes, records, diagnosed, ledger


@settings(max_examples=150, deadline=None)
@given(calls=calls_st, failing=st.booleans())
async def test_fused_calls_end_as_general_ones(
    calls: list[tuple[str, Any, str | None]], failing: bool
) -> None:
    general = await run(calls, fused=False, failing=failing)
    fused = await run(calls, fused=True, failing=failing)
    assert fused[0] == general[0]  # outcomes
    assert fused[1] == general[1]  # journal records, in order, with their seq
    assert fused[2] == general[2]  # diagnostics
    assert fused[3] == general[3]  # what entered the session's provenance


async def test_the_fused_path_is_taken_and_can_be_turned_off() -> None:
    """Not vacuous: an allowed call of a plain tool takes the fused path, a call of a tool
    with a timeout or a sync handler does not, and ``fused = False`` turns it off."""
    taken: list[str] = []
    async with Harness(registry(), evaluator=Evaluator()) as harness:
        pipeline = harness.pipeline
        fused = pipeline._fused

        async def spy(call: Any, context: Any) -> Any:
            taken.append(call.name)
            return await fused(call, context)

        pipeline._fused = spy  # type: ignore[method-assign]
        session = await harness.create_session(principal=ALICE)
        assert (await session.call_tool("t__ok", {"path": "src/a"})).ok
        assert (await session.call_tool("t__timed", {"path": "src/a"})).ok
        assert (await session.call_tool("t__sync", {"path": "src/a"})).ok
        pipeline.fused = False
        assert (await session.call_tool("t__ok", {"path": "src/b"})).ok
    assert taken == ["t__ok"]
