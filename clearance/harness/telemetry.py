"""OpenTelemetry for tool calls: a span per call, a child span per stage, and metrics.

With the ``otel`` extra (``opentelemetry-api``) a harness can report each call as a span
named after the OpenTelemetry GenAI conventions for tool execution (span
``execute_tool <tool>``, kind ``INTERNAL``, ``gen_ai.operation.name = "execute_tool"``,
``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.type``,
``gen_ai.tool.description``, ``error.type``), with clearance's decision on it, and a child
span for each stage the call went through (``clearance.schema``, ``clearance.facts``,
``clearance.guardrails``, ``clearance.evaluator``, ``clearance.ask``,
``clearance.dispatch``, ``clearance.result_guardrails``). The handler runs inside its
``clearance.dispatch`` span, so whatever it traces itself nests under the call.

How it is switched on (``Harness(telemetry=...)``): ``None`` (the default) reports only
when OpenTelemetry is already imported and a real tracer provider is set when the harness
is built; ``True`` always (the global providers, MissingExtraError without the extra);
``False`` never; or a :class:`Telemetry` with its own providers. Without OpenTelemetry
nothing of it is imported and a call pays for four ``is None`` tests.

How it stays cheap and out of the pipeline's way: the stages already time themselves into
``CallState.timing``; a traced call gets a ``timing`` that also notes when each entry was
written (:class:`_Marks`), so that the stage spans are made, with their real start and end
times, when the call ends. Only the dispatch span is live (the handler's own spans need a
parent while it runs). The pipeline calls three hooks: :meth:`Telemetry.begin` (deciding
starts), :meth:`Telemetry.dispatch` (around the handler), and :meth:`Telemetry.end` from
``_finished`` (a call that ran), ``_outcome`` (one that did not) or the session's close (one
``authorize`` allowed that the host never reported).

Nothing withheld reaches an attribute (rule R8): spans and metrics carry names, ids,
statuses, decisions, policy ids and timings, never a message, an error text or an
argument; ``gen_ai.tool.call.arguments`` is recorded only with ``capture_arguments=True``,
and then as the journal shows the arguments (withheld values replaced, rewritten-away
values scrubbed). Telemetry never changes a call: a failure in it is logged and the call
goes on as decided.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from clearance.errors import MissingExtraError
from clearance.harness._redaction import scrub_record, visible

if TYPE_CHECKING:
    from clearance.harness._call_state import CallState
    from clearance.harness.tools import Tool

__all__ = ["Telemetry", "telemetry_for"]

log = logging.getLogger("clearance")

T = TypeVar("T")

STAGES = {
    "validate": "schema",
    "facts": "facts",
    "guardrails": "guardrails",
    "evaluate": "evaluator",
    "ask": "ask",
    "result_guardrails": "result_guardrails",
}
"""``CallState.timing`` keys of the stages, and the stage names spans and metrics use."""

_RECORD_STAGES = {"schema": "schema", "facts": "facts", "guardrail": "guardrails"}
"""A call's deciding stage (its record's ``stage``) whose time may be missing from
``timing`` when it ended the call (the stage notes its time after it returns)."""

_STAGE_BUCKETS = (
    0.000_005,
    0.000_01,
    0.000_025,
    0.000_05,
    0.000_1,
    0.000_25,
    0.000_5,
    0.001,
    0.002_5,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)
"""Seconds: a stage takes microseconds (schema, a local evaluator) to seconds (a handler)."""

_ASK_BUCKETS = (0.01, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0)
"""Seconds: a grant answers in microseconds, a person in seconds to minutes."""

_CALL_BUCKETS = (
    0.000_01,
    0.000_05,
    0.000_1,
    0.000_5,
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.08,
    0.16,
    0.32,
    0.64,
    1.28,
    2.56,
    5.12,
    10.24,
    20.48,
    40.96,
    81.92,
)
"""Seconds: the GenAI operation buckets, with room below for calls denied in microseconds."""

_STAGE_ATTRIBUTES = {stage: {"clearance.stage": stage} for stage in (*STAGES.values(), "dispatch")}
"""The attributes of each stage's measurements (made once: they never change)."""

_DISPATCH = _STAGE_ATTRIBUTES["dispatch"]

_MAX_TEXT = 256
"""The longest name or id put in an attribute (the model chooses call ids and names)."""

_warned = False


def telemetry_for(option: Telemetry | bool | None) -> Telemetry | None:
    """The telemetry a harness reports to, from its ``telemetry`` option (see the module
    docstring); None when it reports nothing."""
    if option is None:
        return Telemetry() if _provider_configured() else None
    if option is True:
        return Telemetry()
    if option is False:
        return None
    if isinstance(option, Telemetry):
        return option
    raise TypeError("telemetry must be a Telemetry, True, False or None")


def _provider_configured() -> bool:
    """Whether the application set an OpenTelemetry tracer provider (it then imported
    OpenTelemetry itself: nothing is imported here to find out)."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return False
    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


class _Marks(dict[str, int]):
    """``CallState.timing`` of a traced call: each stage's microseconds, as the pipeline
    writes them, and when each was written (the stage's end, ``perf_counter``)."""

    __slots__ = ("ends",)

    def __init__(self) -> None:
        super().__init__()
        self.ends: dict[str, float] = {}

    def __setitem__(self, key: str, value: int) -> None:
        dict.__setitem__(self, key, value)
        self.ends[key] = time.perf_counter()


class _Trace:
    """One call's telemetry: its span, and how to place ``perf_counter`` times on the
    span clock."""

    __slots__ = ("context", "dispatched", "perf0", "recording", "span", "time0", "tool")

    def __init__(self, tool: Tool | None, perf0: float, time0: int) -> None:
        self.tool = tool
        self.perf0 = perf0
        self.time0 = time0
        self.span: Any = None
        self.context: Any = None
        """The context whose current span is the call's (the parent of its stages)."""
        self.recording = False
        """Whether the span records (no SDK, or sampled out: metrics only, no spans)."""
        self.dispatched = False
        """The handler ran in a live dispatch span (else a host's run is placed after)."""

    def ns(self, perf: float) -> int:
        return self.time0 + int((perf - self.perf0) * 1e9)


class Telemetry:
    """Where a harness reports its calls: spans, and metrics.

    Args:
        tracer_provider: the provider of the spans (default: the global one, as
            ``opentelemetry.trace.get_tracer_provider()`` returns it when a span starts).
        meter_provider: the provider of the metrics (default: the global one).
        capture_arguments: also record ``gen_ai.tool.call.arguments`` (opt-in in the GenAI
            conventions): the final arguments as the journal shows them, withheld values
            replaced by ``[REDACTED]``.

    Metrics: ``clearance.decisions`` (a counter of calls by ``clearance.decision`` and
    ``clearance.outcome``), ``clearance.ask.duration`` (how long asks waited, by answer),
    ``clearance.stage.duration`` (each stage, by ``clearance.stage``),
    ``clearance.policy.reloads`` (each reload of the policies, by ``clearance.evaluator``,
    ``clearance.outcome`` ``loaded`` or ``failed`` and ``clearance.reload``) and the GenAI
    ``gen_ai.execute_tool.duration`` (whole calls, by tool and ``error.type``), durations
    in seconds.

    Raises:
        MissingExtraError: OpenTelemetry is not installed (``pip install 'clearance[otel]'``).
    """

    def __init__(
        self,
        *,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        capture_arguments: bool = False,
    ) -> None:
        try:
            from opentelemetry import context, metrics, trace
        except ImportError:
            raise MissingExtraError("otel", "OpenTelemetry telemetry") from None
        from clearance._version import __version__

        self._trace_api = trace
        self._context_api = context
        self._tracer = trace.get_tracer("clearance", __version__, tracer_provider=tracer_provider)
        meter = metrics.get_meter("clearance", __version__, meter_provider=meter_provider)
        self.capture_arguments = capture_arguments
        self._decisions = meter.create_counter(
            "clearance.decisions", unit="{call}", description="Tool calls by decision and outcome."
        )
        self._reloads = meter.create_counter(
            "clearance.policy.reloads",
            unit="{reload}",
            description="Policy reloads by evaluator, outcome (loaded, failed) and how.",
        )
        self._ask_duration = meter.create_histogram(
            "clearance.ask.duration",
            unit="s",
            description="How long an ask waited for its answer (a grant, a person, the app).",
            explicit_bucket_boundaries_advisory=_ASK_BUCKETS,
        )
        self._stage_duration = meter.create_histogram(
            "clearance.stage.duration",
            unit="s",
            description="How long each stage of a tool call took.",
            explicit_bucket_boundaries_advisory=_STAGE_BUCKETS,
        )
        self._call_duration = meter.create_histogram(
            "gen_ai.execute_tool.duration",
            unit="s",
            description="How long a tool call took, deciding and running.",
            explicit_bucket_boundaries_advisory=_CALL_BUCKETS,
        )
        self._tool_attributes: dict[str, dict[str, Any]] = {}
        self._internal = trace.SpanKind.INTERNAL
        self._error = trace.StatusCode.ERROR

    # -- the hooks ------------------------------------------------------------------------

    def policy_reloaded(self, evaluator: str, *, loaded: bool, how: str) -> None:
        """Count one reload of ``evaluator``'s policies (``live`` or ``shadow``)."""
        self._reloads.add(
            1,
            {
                "clearance.evaluator": evaluator,
                "clearance.outcome": "loaded" if loaded else "failed",
                "clearance.reload": how,
            },
        )

    def begin(self, call: CallState) -> None:
        """Deciding starts: the call's span, started at the call's start."""
        try:
            perf0, time0 = time.perf_counter(), time.time_ns()
            tool = call.session.tools.get(call.name)
            attributes: dict[str, Any]
            if tool is not None:
                static = self._tool_attributes.get(tool.qualified_name)
                if static is None:
                    static = self._tool_attributes[tool.qualified_name] = _tool_attributes(tool)
                attributes = dict(static)
                name = "execute_tool " + tool.qualified_name
            else:
                attributes = {"gen_ai.operation.name": "execute_tool"}
                if isinstance(call.name, str):
                    attributes["clearance.tool.requested"] = call.name[:_MAX_TEXT]
                name = "execute_tool"
            if isinstance(call.call_id, str):
                attributes["gen_ai.tool.call.id"] = call.call_id[:_MAX_TEXT]
            attributes["clearance.session.id"] = call.session.id
            attributes["clearance.correlation_id"] = call.correlation_id
            if call.host:
                attributes["clearance.host"] = True
            trace = _Trace(tool, perf0, time0)
            trace.span = span = self._tracer.start_span(
                name, kind=self._internal, attributes=attributes, start_time=trace.ns(call.t0)
            )
            trace.recording = span.is_recording()
            if trace.recording:
                trace.context = self._trace_api.set_span_in_context(span)
            call.timing = _Marks()
            call.trace = trace
        except Exception as exc:
            _failed(exc)

    async def dispatch(
        self,
        call: CallState,
        invoke: Callable[..., Awaitable[T]],
        *args: Any,
    ) -> T:
        """Run the handler (``invoke(*args)``) inside the call's dispatch span, the current
        span while it runs; the handler runs exactly once whatever happens here."""
        trace = call.trace
        if trace is None or not trace.recording:  # no span to run in: timed in _end
            return await invoke(*args)
        try:
            span = self._tracer.start_span(
                "clearance.dispatch",
                context=trace.context,
                kind=self._internal,
                attributes=_DISPATCH,
            )
            token = self._context_api.attach(self._trace_api.set_span_in_context(span))
            trace.dispatched = True
            started = time.perf_counter()
        except Exception as exc:
            _failed(exc)
            return await invoke(*args)
        try:
            outcome = await invoke(*args)
        except BaseException:
            self._end_dispatch(span, token, started, "cancelled")
            raise
        status = outcome[0] if isinstance(outcome, tuple) and outcome else None
        self._end_dispatch(span, token, started, status)
        return outcome

    def _end_dispatch(self, span: Any, token: Any, started: float, status: Any) -> None:
        try:
            self._context_api.detach(token)
            if isinstance(status, str):
                span.set_attribute("clearance.dispatch.status", status)
                if status not in ("ok", "error"):
                    span.set_attribute("error.type", status)
                    span.set_status(self._error, status)
            span.end()
            self._stage_duration.record(time.perf_counter() - started, _DISPATCH)
        except Exception as exc:
            _failed(exc)

    def end(
        self,
        call: CallState,
        status: str,
        decision: str | None,
        reasons: Sequence[str],
        *,
        result_blocked: bool = False,
    ) -> None:
        """The call ended (ran and finished, or ended before running) with ``status``,
        ``decision`` and its deciding ``reasons``: its stage spans, its metrics, and the end
        of its span."""
        trace = call.trace
        if trace is None:
            return
        call.trace = None  # ends once
        try:
            self._end(call, trace, status, decision, reasons, result_blocked)
        except Exception as exc:
            _failed(exc)
            try:
                trace.span.end()
            except Exception as again:
                _failed(again)

    # -- the end of a call ----------------------------------------------------------------

    def _end(
        self,
        call: CallState,
        trace: _Trace,
        status: str,
        decision: str | None,
        reasons: Sequence[str],
        result_blocked: bool,
    ) -> None:
        now = time.perf_counter()
        span = trace.span
        record = call.record
        outcome = "pending" if call.pending else ("blocked" if result_blocked else status)
        decided = decision or "none"
        self._decisions.add(1, {"clearance.decision": decided, "clearance.outcome": outcome})
        call_metric: dict[str, Any] = {"gen_ai.operation.name": "execute_tool"}
        tool = trace.tool
        if tool is not None and call.tool is not None:
            call_metric["gen_ai.tool.name"] = tool.qualified_name
        if outcome != "ok":
            call_metric["error.type"] = outcome
        self._call_duration.record(now - call.t0, call_metric)
        placed = self._stages(call, trace, now)
        if not trace.recording:
            span.end()
            return
        attributes: dict[str, Any] = {
            "clearance.outcome": outcome,
            "clearance.decision": decided,
        }
        stage = record.get("stage") or _deciding_stage(record)
        if stage:
            attributes["clearance.decision.stage"] = stage
        if reasons:
            attributes["clearance.decision.policies"] = [str(r) for r in reasons]
        verdict = record.get("verdict")
        if verdict and verdict.get("evaluator"):
            attributes["clearance.decision.evaluator"] = str(verdict["evaluator"])
        grant = record.get("grant") or (record.get("ask") or {}).get("grant")
        if grant:
            attributes["clearance.grant.id"] = str(grant)
        if result_blocked:
            attributes["clearance.result.blocked"] = True
        if self.capture_arguments and type(call.arguments) is dict:
            if call.view is not None:
                shown = call.view.shown_arguments
            else:  # refused before its view was made: what was known then, scrubbed alike
                shown = visible(call.arguments, call.withheld)
                if call.secrets:
                    shown = scrub_record({"arguments": shown}, call.secrets)["arguments"]
            attributes["gen_ai.tool.call.arguments"] = json.dumps(shown, ensure_ascii=False)
        if outcome != "ok":
            # GenAI's error.type: a low-cardinality class of how the call ended, from
            # clearance's statuses (denied, blocked, invalid, pending, overloaded, error,
            # failed, cancelled, timeout).
            attributes["error.type"] = outcome
            span.set_status(self._error, outcome)
        span.set_attributes(attributes)
        ask = record.get("ask")
        tracer, parent, internal, ns = self._tracer, trace.context, self._internal, trace.ns
        for stage, start, end in placed:
            child = tracer.start_span(
                "clearance." + stage,
                context=parent,
                kind=internal,
                attributes=_stage_attributes(stage, record, ask),
                start_time=ns(start),
            )
            child.end(end_time=ns(end))
        span.end(end_time=ns(now))

    def _stages(self, call: CallState, trace: _Trace, now: float) -> list[tuple[str, float, float]]:
        """``(stage, start, end)`` of each stage the call went through (``perf_counter``
        times), but a dispatch already traced live; their durations are recorded."""
        timing = call.timing
        ends = timing.ends if isinstance(timing, _Marks) else {}
        record = call.record
        placed: list[tuple[str, float, float]] = []
        last = call.t0
        for key, end in ends.items():
            stage = STAGES.get(key)
            if stage is None:
                if key == "total":
                    last = max(last, end)
                continue
            if key == "guardrails" and not record.get("guardrails"):
                continue  # no argument guardrail applies to the tool
            start = end - timing[key] / 1e6
            placed.append((stage, start, end))
            last = max(last, end)
        ended_in = _RECORD_STAGES.get(record.get("stage", ""))
        if ended_in is not None and all(stage != ended_in for stage, _, _ in placed):
            # The stage that ended the call times itself after it returns: it ran from
            # the end of the stage before it until now.
            placed.append((ended_in, last, now))
        if call.started_written and not trace.dispatched:
            # A tool the host ran: from the authorization to the reported result (or one
            # clearance ran outside a span: the handler's slot to its end).
            results = next((s for s in placed if s[0] == "result_guardrails"), None)
            if call.host:
                begun = ends.get("total", last)
            else:
                begun = call.started_at or ends.get("total", last)
            placed.append(("dispatch", begun, results[1] if results else now))
        record_stage = self._stage_duration.record
        for stage, start, end in placed:
            record_stage(max(end - start, 0.0), _STAGE_ATTRIBUTES[stage])
        ask = record.get("ask")
        if ask is not None and "ask" in timing:
            answer: dict[str, Any] = {}
            if ask.get("answer"):
                answer["clearance.ask.answer"] = str(ask["answer"])
            if ask.get("how"):
                answer["clearance.ask.how"] = str(ask["how"])
            self._ask_duration.record(timing["ask"] / 1e6, answer)
        return placed


def _tool_attributes(tool: Tool) -> dict[str, Any]:
    """The attributes every call of ``tool`` carries."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool.qualified_name,
        # GenAI's "function": the agent chooses the arguments, the client (clearance, or
        # the host through it) runs the tool.
        "gen_ai.tool.type": "function",
        "clearance.tool.model_alias": tool.model_alias,
        "clearance.tool.read_only": tool.read_only,
    }
    if tool.description:
        attributes["gen_ai.tool.description"] = tool.description
    return attributes


def _deciding_stage(record: Mapping[str, Any]) -> str | None:
    """The stage that decided a call that went on: the ask (a grant or an answer), else
    the evaluator."""
    if "ask" in record:
        return "ask"
    if "verdict" in record:
        return "evaluator"
    return None


def _stage_attributes(
    stage: str, record: Mapping[str, Any], ask: Mapping[str, Any] | None
) -> dict[str, Any]:
    """What a stage's span says of it: names, actions, effects, never a value."""
    if stage == "schema":
        schema = record.get("schema") or {}
        return {"clearance.stage": stage, "clearance.schema.valid": bool(schema.get("valid"))}
    if stage == "facts":
        refused = "error" in (record.get("facts") or {})
        return {"clearance.stage": stage, "clearance.facts.refused": refused}
    if stage in ("guardrails", "result_guardrails"):
        entries = record.get("guardrails" if stage == "guardrails" else "result_guardrails")
        entries = entries or []
        return {
            "clearance.stage": stage,
            "clearance.guardrail.names": [str(e.get("name")) for e in entries],
            "clearance.guardrail.actions": [str(e.get("action")) for e in entries],
        }
    if stage == "evaluator":
        verdict = record.get("verdict") or {}
        attributes: dict[str, Any] = {
            "clearance.stage": stage,
            "clearance.verdict.effect": str(verdict.get("effect")),
        }
        if verdict.get("reasons"):
            attributes["clearance.verdict.policies"] = [str(r) for r in verdict["reasons"]]
        if verdict.get("errors"):
            attributes["clearance.verdict.error_count"] = len(verdict["errors"])
        return attributes
    if stage == "ask" and ask is not None:
        attributes = {"clearance.stage": stage}
        for key, name in (
            ("ask_id", "clearance.ask.id"),
            ("answer", "clearance.ask.answer"),
            ("how", "clearance.ask.how"),
            ("grant", "clearance.grant.id"),
        ):
            if ask.get(key):
                attributes[name] = str(ask[key])
        if ask.get("grant_created"):
            created = ask["grant_created"]
            if isinstance(created, Mapping) and created.get("grant_id"):
                attributes["clearance.grant.id"] = str(created["grant_id"])
        return attributes
    if stage == "dispatch":
        return {"clearance.stage": stage, "clearance.host": True}
    return {"clearance.stage": stage}


def _failed(exc: Exception) -> None:
    """Telemetry failed: said once, and the call goes on as decided."""
    global _warned
    if not _warned:
        _warned = True
        # The type only: an exception's text could carry what a call withholds (R8).
        log.warning("clearance telemetry failed (%s); calls go on untraced", type(exc).__name__)
