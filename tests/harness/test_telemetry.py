"""OpenTelemetry (the ``otel`` extra): each call is a GenAI ``execute_tool`` span with
clearance's decision, a child span per stage it went through, and metrics; no withheld
value in any attribute (R8); both ways in (``call_tool``, ``authorize`` + ``record_result``).
Spans and metrics go to the SDK's in-memory exporter and reader, through providers given to
``Telemetry`` (the global ones are left alone)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from clearance import (
    CallContext,
    Harness,
    MemoryJournal,
    PermissionAsk,
    Principal,
    Telemetry,
    Tool,
    ToolRegistry,
)
from clearance.facts import CustomFact
from clearance.guardrails import ArgumentGuardrail, GuardrailOutcome, ResultGuardrail
from clearance.harness.approvals import Answer
from clearance.policy import LocalEvaluator

pytestmark = pytest.mark.anyio

ALICE = Principal("User", "alice")
SECRET = "hunter2-topsecret-9f3a"
REWRITTEN = "rewritten-away-value-77c1"

SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "token": {"type": "string"}},
    "required": ["path"],
    "additionalProperties": False,
}


class Otel:
    """An SDK tracer provider with an in-memory exporter, and a meter provider with an
    in-memory reader."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def telemetry(self, **options: Any) -> Telemetry:
        return Telemetry(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **options
        )

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def roots(self) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name.startswith("execute_tool")]

    def children(self, root: ReadableSpan) -> dict[str, ReadableSpan]:
        assert root.context is not None
        found = {
            s.name: s
            for s in self.spans()
            if s.parent is not None and s.parent.span_id == root.context.span_id
        }
        return found

    def points(self, metric: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        assert data is not None
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for m in scope.metrics
            if m.name == metric
            for point in m.data.data_points
        ]


@pytest.fixture
def otel() -> Iterator[Otel]:
    telemetry = Otel()
    yield telemetry
    telemetry.tracer_provider.shutdown()
    telemetry.meter_provider.shutdown()


def registry(handler: Any = None, *, sensitive: tuple[str, ...] = ()) -> ToolRegistry:
    """``files.read_file``; with ``sensitive`` its ``path`` is a declared fact, so that the
    path alone decides and a call carrying a withheld value may still be asked."""

    async def read(arguments: dict[str, Any], ctx: CallContext) -> str:
        return "contents of " + str(arguments["path"])

    reg = ToolRegistry()
    reg.register(
        "files",
        [
            Tool(
                "read_file",
                handler or read,
                description="Read a text file in the workspace.",
                input_schema=SCHEMA,
                read_only=True,
                sensitive=sensitive,
                facts={"/path": CustomFact(str, name="label")} if sensitive else {},
            )
        ],
    )
    return reg


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_an_allowed_call_is_an_execute_tool_span_with_its_stages(otel: Otel) -> None:
    async with Harness(
        registry(),
        evaluator=LocalEvaluator(allow=["files.read_file"]),
        telemetry=otel.telemetry(),
    ) as harness:
        session = await harness.create_session(principal=ALICE)
        outcome = await session.call_tool(
            "files__read_file", {"path": "a.txt"}, call_id="call_1", turn_id="t1"
        )
    assert outcome.ok
    (root,) = otel.roots()
    assert root.name == "execute_tool files.read_file"
    assert root.kind is SpanKind.INTERNAL
    got = attributes(root)
    assert got["gen_ai.operation.name"] == "execute_tool"
    assert got["gen_ai.tool.name"] == "files.read_file"
    assert got["gen_ai.tool.call.id"] == "call_1"
    assert got["gen_ai.tool.type"] == "function"
    assert got["gen_ai.tool.description"] == "Read a text file in the workspace."
    assert got["clearance.tool.model_alias"] == "files__read_file"
    assert got["clearance.decision"] == "allow"
    assert got["clearance.decision.stage"] == "evaluator"
    assert got["clearance.outcome"] == "ok"
    assert got["clearance.correlation_id"] == outcome.correlation_id
    assert got["clearance.session.id"] == session.id
    assert "error.type" not in got
    assert root.status.status_code is StatusCode.UNSET
    children = otel.children(root)
    assert set(children) == {"clearance.schema", "clearance.evaluator", "clearance.dispatch"}
    assert attributes(children["clearance.schema"])["clearance.schema.valid"] is True
    assert attributes(children["clearance.evaluator"])["clearance.verdict.effect"] == "allow"
    assert attributes(children["clearance.dispatch"])["clearance.dispatch.status"] == "ok"
    # The stages are placed where they ran: in order, inside the call's span.
    order = [children[n] for n in ("clearance.schema", "clearance.evaluator")]
    order.append(children["clearance.dispatch"])
    assert root.start_time is not None and root.end_time is not None
    previous_end = root.start_time
    for child in order:
        assert child.start_time is not None and child.end_time is not None
        assert previous_end <= child.start_time <= child.end_time <= root.end_time
        previous_end = child.end_time


async def test_the_handler_runs_inside_the_dispatch_span(otel: Otel) -> None:
    """Async handlers in the call's task, sync ones in a worker thread: what they trace
    nests under the call."""
    tracer = otel.tracer_provider.get_tracer("the handler")

    async def traced(arguments: dict[str, Any], ctx: CallContext) -> str:
        with tracer.start_as_current_span("inside async"):
            return "ok"

    def traced_sync(arguments: dict[str, Any], ctx: CallContext) -> str:
        with tracer.start_as_current_span("inside sync"):
            return "ok"

    for handler, inner in ((traced, "inside async"), (traced_sync, "inside sync")):
        otel.exporter.clear()
        async with Harness(
            registry(handler),
            evaluator=LocalEvaluator(allow=["files.read_file"]),
            telemetry=otel.telemetry(),
        ) as harness:
            session = await harness.create_session(principal=ALICE)
            assert (await session.call_tool("files__read_file", {"path": "a"}, call_id="c")).ok
        (root,) = otel.roots()
        dispatch = otel.children(root)["clearance.dispatch"]
        (span,) = [s for s in otel.spans() if s.name == inner]
        assert span.parent is not None and dispatch.context is not None
        assert span.parent.span_id == dispatch.context.span_id
        assert span.context is not None and root.context is not None
        assert span.context.trace_id == root.context.trace_id


async def test_the_call_span_is_a_child_of_the_callers_current_span(otel: Otel) -> None:
    tracer = otel.tracer_provider.get_tracer("the agent")
    async with Harness(
        registry(), evaluator=LocalEvaluator(allow=["files.read_file"]), telemetry=otel.telemetry()
    ) as harness:
        session = await harness.create_session(principal=ALICE)
        with tracer.start_as_current_span("invoke_agent coder") as agent:
            await session.call_tool("files__read_file", {"path": "a"}, call_id="c")
    (root,) = otel.roots()
    assert root.parent is not None
    assert root.parent.span_id == agent.get_span_context().span_id


async def test_a_denied_call_is_a_span_with_the_decision_and_no_dispatch(otel: Otel) -> None:
    async with Harness(
        registry(),
        evaluator=LocalEvaluator(allow=["files.read_file"], deny=["files.read_file(path=*.env)"]),
        telemetry=otel.telemetry(),
    ) as harness:
        session = await harness.create_session(principal=ALICE)
        outcome = await session.call_tool("files__read_file", {"path": "prod.env"}, call_id="c1")
    assert outcome.status == "denied"
    (root,) = otel.roots()
    got = attributes(root)
    assert got["clearance.decision"] == "deny"
    assert got["clearance.decision.stage"] == "evaluator"
    assert got["clearance.outcome"] == "denied"
    assert list(got["clearance.decision.policies"]) == list(outcome.reasons)
    assert outcome.reasons
    assert got["error.type"] == "denied"
    assert root.status.status_code is StatusCode.ERROR
    # The status description is the class of the end, never the message.
    assert root.status.description == "denied"
    children = otel.children(root)
    assert set(children) == {"clearance.schema", "clearance.evaluator"}
    assert attributes(children["clearance.evaluator"])["clearance.verdict.effect"] == "deny"


async def test_calls_that_end_in_an_early_stage(otel: Otel) -> None:
    block = ArgumentGuardrail(
        lambda value, ctx: (
            GuardrailOutcome.block("no") if value["path"] == "blocked" else GuardrailOutcome.allow()
        ),
        tools="files.*",
        name="no-blocked",
    )
    async with Harness(
        registry(),
        evaluator=LocalEvaluator(allow=["files.read_file"]),
        argument_guardrails=[block],
        telemetry=otel.telemetry(),
    ) as harness:
        session = await harness.create_session(principal=ALICE)
        blocked = await session.call_tool("files__read_file", {"path": "blocked"}, call_id="b")
        invalid = await session.call_tool("files__read_file", {"path": 3}, call_id="i")
        unknown = await session.call_tool("files__nope", {}, call_id="u")
        allowed = await session.call_tool("files__read_file", {"path": "fine"}, call_id="a")
    assert [o.status for o in (blocked, invalid, unknown, allowed)] == [
        "blocked",
        "invalid",
        "invalid",
        "ok",
    ]
    roots = {attributes(r)["gen_ai.tool.call.id"]: r for r in otel.roots()}
    assert set(roots) == {"b", "i", "u", "a"}

    b = roots["b"]
    assert attributes(b)["clearance.decision.stage"] == "guardrail"
    assert attributes(b)["error.type"] == "blocked"
    children = otel.children(b)
    assert set(children) == {"clearance.schema", "clearance.guardrails"}
    guard = attributes(children["clearance.guardrails"])
    assert list(guard["clearance.guardrail.names"]) == ["no-blocked"]
    assert list(guard["clearance.guardrail.actions"]) == ["block"]
    start, end = children["clearance.guardrails"].start_time, b.end_time
    assert start is not None and end is not None and start <= end

    i = roots["i"]
    assert attributes(i)["clearance.decision.stage"] == "schema"
    assert attributes(i)["clearance.outcome"] == "invalid"
    assert attributes(otel.children(i)["clearance.schema"])["clearance.schema.valid"] is False
    assert set(otel.children(i)) == {"clearance.schema"}

    u = roots["u"]
    assert u.name == "execute_tool"  # no such tool: no name from the model in the span name
    assert "gen_ai.tool.name" not in attributes(u)
    assert attributes(u)["clearance.tool.requested"] == "files__nope"
    assert otel.children(u) == {}

    a = roots["a"]
    assert set(otel.children(a)) == {
        "clearance.schema",
        "clearance.guardrails",
        "clearance.evaluator",
        "clearance.dispatch",
    }
    assert list(
        attributes(otel.children(a)["clearance.guardrails"])["clearance.guardrail.actions"]
    ) == ["allow"]


async def test_asks_and_grants(otel: Otel) -> None:
    async with Harness(
        registry(),
        evaluator=LocalEvaluator(ask=["files.read_file"]),
        telemetry=otel.telemetry(),
    ) as harness:
        answers: Iterator[Answer] = iter(["allow_session", "deny"])

        async def answer(ask: PermissionAsk) -> Answer:
            await anyio.sleep(0.02)
            return next(answers)

        session = await harness.create_session(principal=ALICE, on_permission_ask=answer)
        first = await session.call_tool("files__read_file", {"path": "a"}, call_id="c1")
        again = await session.call_tool("files__read_file", {"path": "a"}, call_id="c2")
        other = await session.call_tool("files__read_file", {"path": "b"}, call_id="c3")
    assert (first.status, again.status, other.status) == ("ok", "ok", "denied")
    roots = {attributes(r)["gen_ai.tool.call.id"]: r for r in otel.roots()}

    asked = otel.children(roots["c1"])["clearance.ask"]
    got = attributes(asked)
    assert got["clearance.ask.answer"] == "allow_session"
    assert got["clearance.ask.id"].startswith("ask_")
    assert got["clearance.grant.id"] == first.grant
    assert asked.start_time is not None and asked.end_time is not None
    assert asked.end_time - asked.start_time >= 15_000_000  # the 20 ms the answer took
    assert attributes(roots["c1"])["clearance.decision"] == "ask"
    assert attributes(roots["c1"])["clearance.decision.stage"] == "ask"

    granted = attributes(roots["c2"])
    assert granted["clearance.grant.id"] == first.grant
    assert attributes(otel.children(roots["c2"])["clearance.ask"])["clearance.ask.answer"] == (
        "grant"
    )

    denied = attributes(roots["c3"])
    assert denied["clearance.decision"] == "ask"
    assert denied["clearance.decision.stage"] == "ask"
    assert denied["clearance.outcome"] == "denied"
    assert "clearance.dispatch" not in otel.children(roots["c3"])

    waits = {p.attributes["clearance.ask.answer"]: p for p in otel.points("clearance.ask.duration")}
    assert set(waits) == {"allow_session", "grant", "deny"}
    assert waits["allow_session"].count == 1 and waits["allow_session"].sum >= 0.015
    assert waits["grant"].sum < 0.015


async def test_metrics_count_decisions_by_outcome_and_time_stages(otel: Otel) -> None:
    async with Harness(
        registry(),
        evaluator=LocalEvaluator(allow=["files.read_file"], deny=["files.read_file(path=x*)"]),
        telemetry=otel.telemetry(),
    ) as harness:
        session = await harness.create_session(principal=ALICE)
        for n in range(3):
            await session.call_tool("files__read_file", {"path": f"a{n}"}, call_id=f"ok{n}")
        await session.call_tool("files__read_file", {"path": "x1"}, call_id="no")
    counts = {
        (p.attributes["clearance.decision"], p.attributes["clearance.outcome"]): p.value
        for p in otel.points("clearance.decisions")
    }
    assert counts == {("allow", "ok"): 3, ("deny", "denied"): 1}
    stages = {
        p.attributes["clearance.stage"]: p.count for p in otel.points("clearance.stage.duration")
    }
    assert stages == {"schema": 4, "evaluator": 4, "dispatch": 3}
    calls = {
        p.attributes.get("error.type"): p.count
        for p in otel.points("gen_ai.execute_tool.duration")
        if p.attributes["gen_ai.tool.name"] == "files.read_file"
    }
    assert calls == {None: 3, "denied": 1}


async def test_host_run_calls_authorize_then_record_result(otel: Otel) -> None:
    async def never(arguments: dict[str, Any], ctx: CallContext) -> str:
        raise AssertionError("the host runs this tool")

    async with Harness(
        registry(never),
        evaluator=LocalEvaluator(
            allow=["files.read_file"], ask=["files.read_file(path=ask*)"], deny=["*(path=*.env)"]
        ),
        telemetry=otel.telemetry(),
    ) as harness:
        session = await harness.create_session(principal=ALICE)
        allowed = await session.authorize("files__read_file", {"path": "a"}, call_id="h1")
        assert allowed.allowed
        assert otel.roots() == []  # the call goes on until the host reports its run
        await anyio.sleep(0.01)  # the host runs the tool
        outcome = await session.record_result("h1", "the contents")
        denied = await session.authorize("files__read_file", {"path": "b.env"}, call_id="h2")
        pending = await session.authorize(
            "files__read_file", {"path": "ask-me"}, call_id="h3", wait=False
        )
        async with session.execution(
            (await session.authorize("files__read_file", {"path": "c"}, call_id="h4")).call_id
        ) as run:
            run.result("done")
    assert outcome.ok and denied.status == "denied" and pending.status == "pending"
    roots = {attributes(r)["gen_ai.tool.call.id"]: r for r in otel.roots()}
    assert set(roots) == {"h1", "h2", "h3", "h4"}

    h1 = roots["h1"]
    assert attributes(h1)["clearance.host"] is True
    assert attributes(h1)["clearance.outcome"] == "ok"
    children = otel.children(h1)
    assert set(children) == {"clearance.schema", "clearance.evaluator", "clearance.dispatch"}
    run_span = children["clearance.dispatch"]
    assert attributes(run_span)["clearance.host"] is True
    assert run_span.start_time is not None and run_span.end_time is not None
    assert run_span.end_time - run_span.start_time >= 5_000_000  # the host's 10 ms

    assert attributes(roots["h2"])["clearance.decision"] == "deny"
    assert "clearance.dispatch" not in otel.children(roots["h2"])
    assert attributes(roots["h3"])["clearance.outcome"] == "pending"
    assert attributes(roots["h3"])["error.type"] == "pending"
    assert attributes(roots["h4"])["clearance.outcome"] == "ok"
    assert "clearance.dispatch" in otel.children(roots["h4"])


async def test_an_authorized_call_never_reported_ends_when_the_session_closes(
    otel: Otel,
) -> None:
    async with Harness(
        registry(), evaluator=LocalEvaluator(allow=["files.read_file"]), telemetry=otel.telemetry()
    ) as harness:
        session = await harness.create_session(principal=ALICE)
        assert (await session.authorize("files__read_file", {"path": "a"}, call_id="h1")).allowed
        assert otel.roots() == []
        await session.aclose()
        (root,) = otel.roots()
    got = attributes(root)
    assert (got["clearance.decision"], got["clearance.outcome"]) == ("allow", "cancelled")
    assert "clearance.dispatch" not in otel.children(root)  # it never started
    counts = {
        (p.attributes["clearance.decision"], p.attributes["clearance.outcome"]): p.value
        for p in otel.points("clearance.decisions")
    }
    assert counts == {("allow", "cancelled"): 1}


async def test_run_authorized_runs_in_a_live_dispatch_span(otel: Otel) -> None:
    tracer = otel.tracer_provider.get_tracer("the handler")

    async def traced(arguments: dict[str, Any], ctx: CallContext) -> str:
        with tracer.start_as_current_span("inside"):
            return "ok"

    async with Harness(
        registry(traced),
        evaluator=LocalEvaluator(allow=["files.read_file"]),
        telemetry=otel.telemetry(),
    ) as harness:
        session = await harness.create_session(principal=ALICE)
        await session.authorize("files__read_file", {"path": "a"}, call_id="r1")
        assert (await session.run_authorized("r1")).ok
    (root,) = otel.roots()
    dispatch = otel.children(root)["clearance.dispatch"]
    (inside,) = [s for s in otel.spans() if s.name == "inside"]
    assert inside.parent is not None and dispatch.context is not None
    assert inside.parent.span_id == dispatch.context.span_id
    assert [s.name for s in otel.spans()].count("clearance.dispatch") == 1


async def test_a_result_withheld_by_a_result_guardrail(otel: Otel) -> None:
    withhold = ResultGuardrail(
        lambda value, ctx: GuardrailOutcome.block("secret in the result"),
        tools="files.*",
        name="withhold",
    )
    async with Harness(
        registry(),
        evaluator=LocalEvaluator(allow=["files.read_file"]),
        result_guardrails=[withhold],
        telemetry=otel.telemetry(),
    ) as harness:
        session = await harness.create_session(principal=ALICE)
        outcome = await session.call_tool("files__read_file", {"path": "a"}, call_id="c")
    assert outcome.status == "blocked"
    (root,) = otel.roots()
    got = attributes(root)
    assert got["clearance.decision"] == "allow"
    assert got["clearance.outcome"] == "blocked"
    assert got["clearance.result.blocked"] is True
    children = otel.children(root)
    assert set(children) == {
        "clearance.schema",
        "clearance.evaluator",
        "clearance.dispatch",
        "clearance.result_guardrails",
    }
    assert list(
        attributes(children["clearance.result_guardrails"])["clearance.guardrail.actions"]
    ) == ["block"]


async def test_a_cancelled_call_ends_its_spans(otel: Otel) -> None:
    started = anyio.Event()

    async def slow(arguments: dict[str, Any], ctx: CallContext) -> str:
        started.set()
        await anyio.sleep(30)
        return "never"

    async with Harness(
        registry(slow),
        evaluator=LocalEvaluator(allow=["files.read_file"]),
        telemetry=otel.telemetry(),
    ) as harness:
        session = await harness.create_session(principal=ALICE)
        outcomes = []

        async def call() -> None:
            outcomes.append(await session.call_tool("files__read_file", {"path": "a"}, call_id="c"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            with anyio.fail_after(5):
                await started.wait()
            await session.aclose()
    assert outcomes[0].status == "cancelled"
    (root,) = otel.roots()
    assert attributes(root)["clearance.outcome"] == "cancelled"
    dispatch = otel.children(root)["clearance.dispatch"]
    assert attributes(dispatch)["clearance.dispatch.status"] == "cancelled"


@pytest.mark.parametrize("capture", [False, True])
async def test_no_withheld_value_in_any_attribute(otel: Otel, capture: bool) -> None:
    """R8: a sensitive argument, a value a guardrail redacts and a value a guardrail
    rewrites away appear in no span attribute, no metric attribute and no log line, whether
    the arguments are captured or not, on calls that run, that are denied and that ask."""
    redact = ArgumentGuardrail(
        lambda value, ctx: (
            GuardrailOutcome.redact(["/path"])
            if "redact" in value["path"]
            else GuardrailOutcome.allow()
        ),
        tools="files.*",
        name="redact",
    )
    rewrite = ArgumentGuardrail(
        lambda value, ctx: (
            GuardrailOutcome.replace({**value, "path": "safe.txt"})
            if value["path"] == REWRITTEN
            else GuardrailOutcome.allow()
        ),
        tools="files.*",
        name="rewrite",
    )
    seen: list[str] = []

    async def echo(arguments: dict[str, Any], ctx: CallContext) -> str:
        seen.append(json.dumps(arguments))
        return "ok"

    async with Harness(
        registry(echo, sensitive=("/token",)),
        evaluator=LocalEvaluator(
            allow=["files.read_file"],
            deny=["files.read_file(path=deny*)"],
            ask=["files.read_file(path=ask*)"],
        ),
        argument_guardrails=[redact, rewrite],
        telemetry=otel.telemetry(capture_arguments=capture),
    ) as harness:
        session = await harness.create_session(
            principal=ALICE, on_permission_ask=lambda ask: "allow_once"
        )
        calls = [
            {"path": "a.txt", "token": SECRET},
            {"path": "deny-" + SECRET, "token": SECRET},
            {"path": "ask.txt", "token": SECRET},
            {"path": "redact-" + SECRET},
            {"path": REWRITTEN, "token": SECRET},
            {"path": "invalid", "token": SECRET, "extra": SECRET},
        ]
        outcomes = [
            await session.call_tool("files__read_file", arguments, call_id=f"c{n}")
            for n, arguments in enumerate(calls)
        ]
    assert [o.status for o in outcomes] == ["ok", "denied", "ok", "ok", "ok", "invalid"]
    assert any(SECRET in s for s in seen)  # the handler got the values: they were real
    assert len(otel.roots()) == len(calls)

    def texts(value: Any) -> list[str]:
        if isinstance(value, str):
            return [value]
        if isinstance(value, (list, tuple)):
            return [t for v in value for t in texts(v)]
        return [str(value)]

    found = []
    for span in otel.spans():
        for key, value in (span.attributes or {}).items():
            found += [f"{span.name} {key}={t}" for t in texts(value)]
        found.append(f"{span.name} status={span.status.description}")
        found.append(span.name)
    data = otel.reader.get_metrics_data()
    assert data is not None
    found.append(data.to_json())
    for line in found:
        assert SECRET not in line and REWRITTEN not in line, line

    roots = {attributes(r)["gen_ai.tool.call.id"]: attributes(r) for r in otel.roots()}
    if capture:
        shown = json.loads(roots["c0"]["gen_ai.tool.call.arguments"])
        assert shown == {"path": "a.txt", "token": "[REDACTED]"}
        assert json.loads(roots["c3"]["gen_ai.tool.call.arguments"]) == {"path": "[REDACTED]"}
        assert json.loads(roots["c4"]["gen_ai.tool.call.arguments"])["path"] == "safe.txt"
    else:
        assert not any("gen_ai.tool.call.arguments" in a for a in roots.values())


async def test_a_span_that_does_not_record_costs_no_spans_but_keeps_the_metrics(
    otel: Otel,
) -> None:
    """Sampled out (or no SDK): no child span, no dispatch span, the handler still runs
    once, and every measurement is still taken (the dispatch timed from its slot)."""
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    exporter = InMemorySpanExporter()
    sampled_out = TracerProvider(sampler=ALWAYS_OFF)
    sampled_out.add_span_processor(SimpleSpanProcessor(exporter))
    ran: list[str] = []

    async def handler(arguments: dict[str, Any], ctx: CallContext) -> str:
        ran.append(arguments["path"])
        await anyio.sleep(0.01)
        return "ok"

    async with Harness(
        registry(handler),
        evaluator=LocalEvaluator(allow=["files.read_file"], deny=["*(path=no)"]),
        telemetry=Telemetry(tracer_provider=sampled_out, meter_provider=otel.meter_provider),
    ) as harness:
        session = await harness.create_session(principal=ALICE)
        assert (await session.call_tool("files__read_file", {"path": "a"}, call_id="c1")).ok
        no = await session.call_tool("files__read_file", {"path": "no"}, call_id="c2")
    assert no.status == "denied" and ran == ["a"]
    assert exporter.get_finished_spans() == ()
    counts = {
        (p.attributes["clearance.decision"], p.attributes["clearance.outcome"]): p.value
        for p in otel.points("clearance.decisions")
    }
    assert counts == {("allow", "ok"): 1, ("deny", "denied"): 1}
    stages = {p.attributes["clearance.stage"]: p for p in otel.points("clearance.stage.duration")}
    assert {name: p.count for name, p in stages.items()} == {
        "schema": 2,
        "evaluator": 2,
        "dispatch": 1,
    }
    assert stages["dispatch"].sum >= 0.009  # the handler's 10 ms
    sampled_out.shutdown()


async def test_a_failing_telemetry_never_changes_a_call(
    otel: Otel, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken:
        def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
            return self

        def start_span(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError(SECRET)

    ran: list[str] = []

    async def handler(arguments: dict[str, Any], ctx: CallContext) -> str:
        ran.append(arguments["path"])
        return "ok"

    journal = MemoryJournal()
    with caplog.at_level(logging.WARNING, logger="clearance"):
        async with Harness(
            registry(handler),
            evaluator=LocalEvaluator(allow=["files.read_file"], deny=["*(path=no)"]),
            journal=journal,
            telemetry=Telemetry(tracer_provider=Broken(), meter_provider=otel.meter_provider),
        ) as harness:
            session = await harness.create_session(principal=ALICE)
            ok = await session.call_tool("files__read_file", {"path": "a"}, call_id="c1")
            no = await session.call_tool("files__read_file", {"path": "no"}, call_id="c2")
    assert (ok.status, no.status, ran) == ("ok", "denied", ["a"])
    assert [e.type for e in journal.events(call_id="c1")] == [
        "call_decided",
        "tool_started",
        "tool_finished",
    ]
    assert SECRET not in caplog.text


def run_child(code: str, *, hide_otel: bool) -> subprocess.CompletedProcess[str]:
    prelude = (
        textwrap.dedent(
            """
            import importlib.abc, sys

            class HideOtel(importlib.abc.MetaPathFinder):
                def find_spec(self, name, path=None, target=None):
                    if name.partition(".")[0] == "opentelemetry":
                        raise ModuleNotFoundError(f"No module named {name!r}", name=name)

            sys.meta_path.insert(0, HideOtel())
            """
        )
        if hide_otel
        else ""
    )
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
    )


CALL = """
import anyio, sys
from clearance import Harness, Principal, Tool, ToolRegistry
from clearance.policy import LocalEvaluator

async def read(arguments, ctx):
    return "ok"

def harness(**options):
    reg = ToolRegistry()
    reg.register("files", [Tool("read_file", read, input_schema={"type": "object"})])
    return Harness(reg, evaluator=LocalEvaluator(allow=["files.*"]), **options)

async def call(**options):
    async with harness(**options) as h:
        session = await h.create_session(principal=Principal("User", "alice"))
        outcome = await session.call_tool("files__read_file", {}, call_id="c1")
        return h.telemetry, outcome.status
"""


def test_without_opentelemetry_nothing_changes_and_nothing_is_imported() -> None:
    done = run_child(
        CALL
        + textwrap.dedent(
            """
            from clearance.errors import MissingExtraError
            print(anyio.run(call))
            print(anyio.run(lambda: call(telemetry=False)))
            try:
                harness(telemetry=True)
            except MissingExtraError as exc:
                assert exc.extra == "otel", exc
                print(str(exc).endswith("pip install 'clearance[otel]'"))
            print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
            """
        ),
        hide_otel=True,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:4] == ["(None, 'ok')", "(None, 'ok')", "True", "[]"]


def test_installed_but_not_configured_it_stays_off_and_unimported() -> None:
    done = run_child(
        CALL
        + textwrap.dedent(
            """
            print(anyio.run(call))
            print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
            """
        ),
        hide_otel=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["(None, 'ok')", "[]"]


def test_on_by_itself_when_the_application_set_a_tracer_provider() -> None:
    done = run_child(
        textwrap.dedent(
            """
            from opentelemetry import trace
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import SimpleSpanProcessor
            from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
                InMemorySpanExporter,
            )
            exporter = InMemorySpanExporter()
            provider = TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(exporter))
            trace.set_tracer_provider(provider)
            """
        )
        + textwrap.dedent(CALL)
        + textwrap.dedent(
            """
            telemetry, status = anyio.run(call)
            print(type(telemetry).__name__, status)
            print(sorted(s.name for s in exporter.get_finished_spans()))
            exporter.clear()
            print(anyio.run(lambda: call(telemetry=False)), exporter.get_finished_spans())
            """
        ),
        hide_otel=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split("\n")
    assert lines[0] == "Telemetry ok"
    assert lines[1] == str(
        sorted(
            [
                "clearance.dispatch",
                "clearance.evaluator",
                "clearance.schema",
                "execute_tool files.read_file",
            ]
        )
    )
    assert lines[2] == "(None, 'ok') ()"


def test_the_example_in_the_docs_prints_the_spans() -> None:
    """docs/telemetry.md's example, in a process of its own (it sets the global provider)."""
    from doc_examples import python_blocks

    ((line, code),) = python_blocks("telemetry.md")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"docs/telemetry.md:{line}: {done.stderr}"
    spans = [json.loads(part) for part in _json_objects(done.stdout)]
    names = {span["name"]: span for span in spans}
    assert set(names) == {
        "execute_tool app.echo",
        "clearance.schema",
        "clearance.evaluator",
        "clearance.dispatch",
    }
    call = names["execute_tool app.echo"]["attributes"]
    assert call["gen_ai.tool.call.id"] == "call_1" and call["clearance.decision"] == "allow"


def _json_objects(text: str) -> list[str]:
    """The top-level JSON objects ConsoleSpanExporter printed one after the other."""
    decoder, at = json.JSONDecoder(), 0
    found: list[str] = []
    while True:
        start = text.find("{", at)
        if start < 0:
            return found
        _, end = decoder.raw_decode(text, start)
        found.append(text[start:end])
        at = end
