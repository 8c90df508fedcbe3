"""The stages of a call, each a method that returns ``None`` (go on) or the outcome that
ends the call. :mod:`clearance.harness.pipeline` orders them; nothing here calls the next
stage.

- :meth:`Stages._resolve`: the tool (a selected tool of the session's agent), the call id;
- :meth:`Stages._validate`: a JSON object of bounded size and depth, valid for the schema;
- :meth:`Stages._canonicalize`: the declared facts (rule R11);
- :meth:`Stages._guard_arguments`: argument guardrails, in order (a rewrite feeds the next);
- :meth:`Stages._evaluate`: the authority evaluator (and a shadow one);
then :mod:`clearance.harness._approval` (a grant, or an ask) and
:mod:`clearance.harness._running` (a slot, the handler, result guardrails).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from clearance import _pointer
from clearance._validation import schema_problem
from clearance.facts.base import FactError
from clearance.facts.declared import apply_facts
from clearance.guardrails.base import GuardrailContext, GuardrailOutcome
from clearance.harness import shape
from clearance.harness._call_state import CallState, copy_json, elapsed_us
from clearance.harness._guards import FAILED, check_guardrail
from clearance.harness._recorder import Recorder
from clearance.harness._records import verdict_record
from clearance.harness._redaction import (
    scrub,
    values_at,
    visible_facts,
)
from clearance.harness.outcomes import CallOutcome
from clearance.harness.tools import Tool
from clearance.policy.base import AuthzRequest, Verdict, as_evaluator, check_verdict, evaluate

if TYPE_CHECKING:
    from clearance.harness.session import Harness

__all__ = ["Stages"]

_STORE_POLL = 0.2
"""Seconds between looks at a shared ask store while a call waits for its answer."""

_NO_FACTS: Mapping[str, Any] = {}
"""The facts of a tool that declares none (shared: requests never change it)."""


class Stages(Recorder):
    """The stages of a call (see the module docstring)."""

    def __init__(self, harness: Harness) -> None:
        super().__init__(harness)
        self._argument_guards: dict[str, tuple[Any, ...]] = {}

    # -- resolve ------------------------------------------------------------------------

    async def _resolve(self, call: CallState) -> CallOutcome | None:
        """The name must be a selected tool of this session's agent, the call id a string."""
        session = call.session
        tool = session.tools.get(call.name)
        if tool is None:
            known = call.name in self.harness.registry
            msg = (
                f"tool {call.name!r} is not available to this agent"
                if known
                else f"unknown tool {call.name!r}"
            )
            return await self._end_early(call, "invalid", msg, stage="resolve")
        call.tool = tool
        call.withheld.update(tool.sensitive)
        if not isinstance(call.call_id, str) or not call.call_id:
            return await self._end_early(
                call, "invalid", "call_id must be a non-empty string", stage="call_id"
            )
        return None

    async def _claim_call_id(self, call: CallState) -> CallOutcome | None:
        """A call id names one call for the session's lifetime (not for a dry run)."""
        session = call.session
        if call.call_id in session.call_ids:
            call.record["duplicate_call_id"] = True
            return await self._end_early(
                call,
                "invalid",
                f"call id {call.call_id!r} was already used in this session",
                stage="call_id",
            )
        session.call_ids.add(call.call_id)
        return None

    # -- validate -----------------------------------------------------------------------

    async def _validate(self, call: CallState) -> CallOutcome | None:
        """A JSON object of bounded size and depth, valid against the tool's schema."""
        tool, h = call.tool, self.harness
        assert tool is not None
        t = time.perf_counter()
        problem = shape.check_shape(call.arguments, h.max_argument_bytes, h.max_argument_depth)
        if problem is None:
            call.secrets.update(values_at(call.arguments, call.withheld))
            problem = self._schema_problem(call, tool, call.arguments)
        call.timing["validate"] = elapsed_us(t)
        call.record["schema"] = {"valid": problem is None, "error": scrub(problem, call.secrets)}
        if problem is not None:
            return await self._end_early(
                call, "invalid", f"invalid arguments: {problem}", stage="schema"
            )
        return None

    @staticmethod
    def _schema_problem(call: CallState, tool: Tool, arguments: Any) -> str | None:
        secret_values = call.secrets
        return schema_problem(
            tool.validator,
            arguments,
            withheld=call.withheld,
            scrub=lambda text: scrub(text, secret_values) or "",
        )

    # -- canonical facts ------------------------------------------------------------------

    async def _canonicalize(self, call: CallState) -> CallOutcome | None:
        """Each declared argument takes its canonical value, once; every stage from here
        on, and the handler, sees that value (R11)."""
        tool = call.tool
        assert tool is not None
        if not tool.declared_facts:
            return None
        t = time.perf_counter()
        ended = await self._facts(call, call.arguments, stage="facts")
        call.timing["facts"] = elapsed_us(t)
        return ended if isinstance(ended, CallOutcome) else None

    async def _facts(
        self, call: CallState, arguments: dict[str, Any], *, stage: str, guard: str | None = None
    ) -> dict[str, Any] | CallOutcome:
        """Canonicalize the declared facts of ``arguments`` (R11); the canonical arguments,
        or the outcome that ends the call when one cannot be canonicalized (R1)."""
        tool = call.tool
        assert tool is not None
        try:
            canonical, facts = apply_facts(tool.declared_facts, arguments)
            # The canonical value must still be one the tool accepts (a resolved path may
            # be longer than the schema allows, say): never hand the handler anything else.
            problem = self._schema_problem(call, tool, canonical)
        except FactError as exc:
            problem = exc.reason
        if problem is not None:
            call.record["facts"] = {"error": scrub(problem, call.secrets)}
            if guard is not None:
                return await self._end_early(
                    call,
                    "blocked",
                    f"guardrail {guard!r} produced arguments that cannot be canonicalized: "
                    f"{scrub(problem, call.secrets)}",
                    stage=stage,
                )
            # A refusal of what the call would act on, not a malformed call: ``blocked``,
            # as a guardrail's refusal is.
            return await self._end_early(
                call, "blocked", f"refused: {scrub(problem, call.secrets)}", stage=stage
            )
        call.facts = facts
        call.arguments = canonical
        if call.withheld:
            call.secrets.update(values_at(canonical, call.withheld))
        call.record["facts"] = visible_facts(facts, call.withheld)
        return canonical

    # -- argument guardrails --------------------------------------------------------------

    async def _guard_arguments(self, call: CallState) -> CallOutcome | None:
        """The argument guardrails, in order; a replace feeds the next one. Then the
        handler's own copy of the final arguments is taken: whatever the evaluator, a
        shadow evaluator, an ask answerer or the caller later does to the arguments, the
        handler runs exactly the ones that were validated and authorized (R2, R6)."""
        tool = call.tool
        assert tool is not None
        guards = self._argument_guards.get(tool.qualified_name)
        if guards is None:
            guards = self._argument_guards[tool.qualified_name] = tuple(
                g for g in self.harness.argument_guardrails if g.applies_to(tool.qualified_name)
            )
        if guards:
            t = time.perf_counter()
            ended = await self._argument_guardrails(call, guards)
            call.timing["guardrails"] = elapsed_us(t)
            if ended is not None:
                return ended
        else:
            call.record["guardrails"] = []
            call.timing["guardrails"] = 0
        call.dispatch_arguments = copy_json(call.arguments)
        return None

    async def _argument_guardrails(
        self, call: CallState, guards: tuple[Any, ...]
    ) -> CallOutcome | None:
        tool, session, h = call.tool, call.session, self.harness
        assert tool is not None
        arguments: dict[str, Any] = call.arguments
        outcomes: list[dict[str, Any]] = []
        call.record["guardrails"] = outcomes
        gctx = GuardrailContext(
            tool.qualified_name,
            tool.model_alias,
            session.principal,
            session.id,
            call.turn_id,
            call.call_id,
            "arguments",
        )
        for guard in guards:
            outcome, entry = await check_guardrail(
                guard,
                arguments,
                gctx,
                outcomes,
                secret_values=call.secrets,
                diagnose=lambda exc, stage: self._diagnose(call, exc, stage=stage),
            )
            if outcome is FAILED:
                return await self._end_early(
                    call,
                    "blocked",
                    f"guardrail {guard.name!r} failed; the call was blocked",
                    stage="guardrail",
                )
            if outcome is None:
                continue
            if outcome.action == "block":
                return await self._end_early(
                    call,
                    "blocked",
                    f"blocked by guardrail {guard.name!r}: {scrub(outcome.message, call.secrets)}",
                    stage="guardrail",
                )
            if outcome.action == "redact":
                call.withheld.update(outcome.pointers)
                call.secrets.update(values_at(arguments, outcome.pointers))
            elif outcome.action == "ask":
                call.guard_asks.append(
                    (guard.name, outcome.message or f"guardrail {guard.name} asks")
                )
            elif outcome.action == "replace":
                problem = shape.check_shape(
                    outcome.value, h.max_argument_bytes, h.max_argument_depth
                )
                if problem is None:
                    problem = self._schema_problem(call, tool, outcome.value)
                if problem is not None:
                    entry["error"] = "replacement invalid"
                    return await self._end_early(
                        call,
                        "blocked",
                        f"guardrail {guard.name!r} produced arguments the schema rejects: "
                        f"{scrub(problem, call.secrets)}",
                        stage="guardrail",
                    )
                removed = {t for _, t in _pointer.iter_strings(arguments)} - {
                    t for _, t in _pointer.iter_strings(outcome.value)
                }
                if tool.declared_facts:
                    # A rewrite is canonicalized like the call itself (R11).
                    canonical = await self._facts(
                        call, outcome.value, stage="guardrail", guard=guard.name
                    )
                    if isinstance(canonical, CallOutcome):
                        entry["error"] = "replacement cannot be canonicalized"
                        return canonical
                    outcome = GuardrailOutcome.replace(canonical)
                arguments = outcome.value
                # Records made from here on (a later block, a failure) show the rewrite,
                # and whatever it rewrote away never surfaces in a message (R8).
                call.arguments = arguments
                call.secrets.update(t for t in removed if t)
                call.secrets.update(values_at(arguments, call.withheld))
        return None

    # -- the evaluator --------------------------------------------------------------------

    async def _evaluate(self, call: CallState, context: Mapping[str, Any]) -> CallOutcome | None:
        """The evaluator sees exactly the arguments the handler will get (R2); only
        ``allow`` and ``ask`` go on (R4)."""
        tool, session, h = call.tool, call.session, self.harness
        assert tool is not None
        t = time.perf_counter()
        request = AuthzRequest(
            session.principal,
            tool.info,
            call.arguments,
            session.info(call.turn_id),
            context,
            call.facts if call.facts is not None else _NO_FACTS,
        )
        evaluator = session.evaluator
        failed = False
        try:
            verdict = evaluator.evaluate(request)
            if type(verdict) is not Verdict:  # async evaluators, or a wrong answer
                if inspect.isawaitable(verdict):
                    verdict = await verdict
                verdict = check_verdict(evaluator, verdict)
        except Exception as exc:
            self._diagnose(call, exc, stage="evaluator")
            verdict = Verdict(
                "deny",
                errors=(f"{type(exc).__name__}",),
                message="the authority evaluator failed",
                evaluator=as_evaluator(evaluator).name,
            )
            failed = True
        call.timing["evaluate"] = elapsed_us(t)
        call.record["verdict"] = verdict_record(verdict, failed, call.secrets)
        if h.shadow_evaluator is not None:
            call.record["shadow"] = await self._shadow(call, request, verdict)
        if verdict.effect != "allow" and verdict.effect != "ask":
            reason = scrub(verdict.message, call.secrets) or (
                "denied by " + ", ".join(verdict.reasons) if verdict.reasons else "denied"
            )
            return await self._end_early(
                call,
                "denied",
                reason,
                stage="evaluator",
                decision="error" if failed else "deny",
                reasons=verdict.reasons,
            )
        call.verdict = verdict
        return None

    async def _shadow(
        self, call: CallState, request: AuthzRequest, enforced: Verdict
    ) -> dict[str, Any]:
        shadow = self.harness.shadow_evaluator
        assert shadow is not None
        try:
            verdict = await evaluate(shadow, request)
        except Exception as exc:
            self._diagnose(call, exc, stage="shadow evaluator")
            return {"effect": "error", "agrees": False}
        return {
            "effect": verdict.effect,
            "reasons": list(verdict.reasons),
            "agrees": verdict.effect == enforced.effect,
        }
