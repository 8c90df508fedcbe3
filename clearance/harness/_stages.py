"""The stages of a call, each a method that returns ``None`` (go on) or what ends the call.
:mod:`clearance.harness.pipeline` orders them; nothing here calls the next stage.

The stages that never wait (resolve, the call id, validation, canonical facts) are plain
methods returning an :class:`~clearance.harness._recorder.Early` (how the call ends, which
the pipeline records), so that a call that goes on pays for no coroutine; the ones that may
wait (guardrails, the evaluator) are coroutines returning the outcome.

- :meth:`Stages._resolve`: the tool (a selected tool of the session's agent), the call id;
- :meth:`Stages._validate`: a JSON object of bounded size and depth, valid for the schema;
- :meth:`Stages._canonicalize`: the declared facts (rule R11);
- :meth:`Stages._guard_arguments`: argument guardrails, in order (a rewrite feeds the next);
- :meth:`Stages._evaluate`: the authority evaluator (and a shadow one);
then :mod:`clearance.harness._approval` (a grant, or an ask) and
:mod:`clearance.harness._running` (a slot, the handler, result guardrails).
"""

from __future__ import annotations

import hashlib
import inspect
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from clearance import _pointer
from clearance._limits import text_fault
from clearance._validation import schema_problem
from clearance.facts.base import FactError
from clearance.facts.declared import apply_facts
from clearance.guardrails.base import GuardrailContext, GuardrailOutcome
from clearance.harness import shape
from clearance.harness._call_state import CallState, copy_json, elapsed_us, tool_names
from clearance.harness._guards import FAILED, check_guardrail_now
from clearance.harness._recorder import Early, Recorder
from clearance.harness._records import verdict_record
from clearance.harness._redaction import (
    scrub,
    values_at,
    visible_facts,
    visible_provenance,
)
from clearance.harness.outcomes import CallOutcome
from clearance.harness.tools import Tool
from clearance.harness.view import CallView
from clearance.policy.base import AuthzRequest, Verdict, as_evaluator, check_verdict, evaluate
from clearance.provenance.ledger import Described

if TYPE_CHECKING:
    from clearance.harness.session import Harness

__all__ = ["Stages"]

_NO_FACTS: Mapping[str, Any] = {}
"""The facts of a tool that declares none (shared: requests never change it)."""


class Stages(Recorder):
    """The stages of a call (see the module docstring)."""

    def __init__(self, harness: Harness) -> None:
        super().__init__(harness)
        self._argument_guards: dict[str, tuple[Any, ...]] = {}
        self._names: dict[str, dict[str, Any]] = {}

    # -- resolve ------------------------------------------------------------------------

    def _resolve(self, call: CallState) -> Early | None:
        """The name must be a selected tool of this session's agent, the call id a string."""
        tool = call.session.tools.get(call.name)
        if tool is None:
            registry = self.harness.registry
            known = call.name in registry
            if known:
                # Not this agent's, but its withheld arguments are withheld all the same:
                # the refusal's record must not keep what the tool would have (R8).
                self._withhold_as(call, registry.get(call.name))
            msg = (
                f"tool {call.name!r} is not available to this agent"
                if known
                else f"unknown tool {call.name!r}"
            )
            return Early("invalid", msg, "resolve")
        call.tool = tool
        names = self._names.get(tool.qualified_name)
        if names is None:
            names = self._names[tool.qualified_name] = tool_names(tool)
        call.names = names
        if tool.sensitive:
            call.withheld.update(tool.sensitive)
        call_id = call.call_id
        if not isinstance(call_id, str) or not call_id:
            return Early("invalid", "call_id must be a non-empty string", "call_id")
        fault = text_fault(call_id)
        if fault is not None:
            # No journal can store this id (SQLite and PostgreSQL refuse the record): the
            # call is refused under a stand-in id, so that its call_decided is still
            # written (R7: one per call that entered the pipeline).
            call.call_id = (
                "unstorable-"
                + hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
            )
            return Early("invalid", f"call_id {fault}; recorded as {call.call_id}", "call_id")
        return None

    def _withhold_as(self, call: CallState, tool: Tool) -> None:
        """Withhold what ``tool`` marks sensitive in the call's arguments, wherever the
        call's records show them (its copies too, when the arguments are of a shape the
        pipeline would read)."""
        if tool.sensitive:
            call.withheld.update(tool.sensitive)
            h = self.harness
            arguments = call.arguments
            if shape.check_shape(arguments, h.max_argument_bytes, h.max_argument_depth) is None:
                call.withhold(values_at(arguments, tool.sensitive))

    def _claim_call_id(self, call: CallState) -> Early | None:
        """A call id names one call for the session's lifetime (not for a dry run).

        The ids are held for as long as the session lives, never forgotten (a forgotten id
        could run twice, R7): a session holding ``max_session_calls`` of them refuses new
        calls instead, which bounds its memory; the host goes on in a new session."""
        call_ids = call.session.call_ids
        if call.call_id in call_ids:
            call.record["duplicate_call_id"] = True
            return Early(
                "invalid", f"call id {call.call_id!r} was already used in this session", "call_id"
            )
        limit = self.harness.max_session_calls
        if len(call_ids) >= limit:
            return Early(
                "invalid",
                f"this session has used its {limit} call ids (max_session_calls): "
                "further calls need a new session",
                "call_id",
            )
        call_ids.add(call.call_id)
        return None

    # -- validate -----------------------------------------------------------------------

    def _validate(self, call: CallState) -> Early | None:
        """A JSON object of bounded size and depth, valid against the tool's schema."""
        tool, h = call.tool, self.harness
        assert tool is not None
        t = time.perf_counter()
        arguments = call.arguments
        problem = shape.check_shape(arguments, h.max_argument_bytes, h.max_argument_depth)
        if problem is None:
            if call.withheld:
                call.withhold(values_at(arguments, call.withheld))
            if not tool.validator.is_valid(arguments):  # else no error text to build
                problem = self._schema_problem(call, tool, arguments)
        call.timing["validate"] = int((time.perf_counter() - t) * 1_000_000)
        if problem is None:
            call.record["schema"] = {"valid": True, "error": None}
            return None
        call.record["schema"] = {"valid": False, "error": scrub(problem, call.secrets)}
        return Early("invalid", f"invalid arguments: {problem}", "schema")

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

    def _canonicalize(self, call: CallState) -> Early | None:
        """Each declared argument takes its canonical value, once; every stage from here
        on, and the handler, sees that value (R11)."""
        tool = call.tool
        assert tool is not None
        if not tool.declared_facts:
            return None
        t = time.perf_counter()
        ended = self._facts(call, call.arguments, stage="facts")
        call.timing["facts"] = elapsed_us(t)
        return ended if isinstance(ended, Early) else None

    def _facts(
        self, call: CallState, arguments: dict[str, Any], *, stage: str, guard: str | None = None
    ) -> dict[str, Any] | Early:
        """Canonicalize the declared facts of ``arguments`` (R11); the canonical arguments,
        or how the call ends when one cannot be canonicalized (R1)."""
        tool = call.tool
        assert tool is not None
        try:
            canonical, facts = apply_facts(
                tool.declared_facts, arguments, session_id=call.session.id
            )
            # The canonical value must still be one the tool accepts (a resolved path may
            # be longer than the schema allows, say): never hand the handler anything else.
            problem = self._schema_problem(call, tool, canonical)
        except FactError as exc:
            problem = exc.reason
        if problem is not None:
            call.record["facts"] = {"error": scrub(problem, call.secrets)}
            if guard is not None:
                return Early(
                    "blocked",
                    f"guardrail {guard!r} produced arguments that cannot be canonicalized: "
                    f"{scrub(problem, call.secrets)}",
                    stage,
                )
            # A refusal of what the call would act on, not a malformed call: ``blocked``,
            # as a guardrail's refusal is.
            return Early("blocked", f"refused: {scrub(problem, call.secrets)}", stage)
        call.facts = facts
        call.arguments = canonical
        if call.withheld:
            call.withhold(values_at(canonical, call.withheld))
        call.record["facts"] = visible_facts(facts, call.withheld)
        return canonical

    # -- argument guardrails --------------------------------------------------------------

    def _argument_guards_of(self, tool: Tool) -> tuple[Any, ...]:
        """The argument guardrails that apply to ``tool``, in order (found once per tool)."""
        guards = self._argument_guards.get(tool.qualified_name)
        if guards is None:
            guards = self._argument_guards[tool.qualified_name] = tuple(
                g for g in self.harness.argument_guardrails if g.applies_to(tool.qualified_name)
            )
        return guards

    async def _guard_arguments(
        self, call: CallState, guards: tuple[Any, ...]
    ) -> CallOutcome | None:
        """The argument guardrails, in order; a replace feeds the next one. Then
        :meth:`_keep_arguments`."""
        t = time.perf_counter()
        ended = await self._argument_guardrails(call, guards)
        call.timing["guardrails"] = elapsed_us(t)
        if ended is not None:
            return ended
        self._keep_arguments(call)
        return None

    @staticmethod
    def _no_argument_guardrails(call: CallState) -> None:
        """The guardrail stage of a tool no argument guardrail applies to (its record
        says so); then :meth:`_keep_arguments`."""
        call.record["guardrails"] = []
        call.timing["guardrails"] = 0
        Stages._keep_arguments(call)

    @staticmethod
    def _keep_arguments(call: CallState) -> None:
        """Take the handler's own copy of the final arguments: whatever the evaluator, a
        shadow evaluator, an ask answerer or the caller later does to the arguments, the
        handler runs exactly the ones that were validated and authorized (R2, R6). Then
        the call's one view (:mod:`clearance.harness.view`), which every surface renders
        from here on."""
        call.dispatch_arguments = copy_json(call.arguments)
        tool, session = call.tool, call.session
        assert tool is not None
        call.view = CallView(
            principal=session.principal_text,
            session_id=session.id,
            turn_id=call.turn_id,
            call_id=call.call_id,
            tool=tool.model_alias,
            qualified_name=tool.qualified_name,
            model_alias=tool.model_alias,
            arguments=call.arguments,
            facts=call.facts,
            scope_fields=tool.deciding,
            withheld=call.withheld,
            secrets=call.withheld_values,
        )

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
            call.ledger or session.provenance,
        )

        def diagnose(exc: BaseException, stage: str) -> None:
            self._diagnose(call, exc, stage=stage)

        for guard in guards:
            # A sync check (most are) is run and recorded without a coroutine.
            checked = check_guardrail_now(
                guard, arguments, gctx, outcomes, secret_values=call.secrets, diagnose=diagnose
            )
            if not isinstance(checked, tuple):
                checked = await checked
            outcome, entry = checked
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
                call.withhold(values_at(arguments, outcome.pointers))
            elif outcome.action == "ask":
                call.guard_asks += (
                    (guard.name, outcome.message or f"guardrail {guard.name} asks"),
                )
            elif outcome.action == "replace":
                problem = shape.check_shape(
                    outcome.value, h.max_argument_bytes, h.max_argument_depth
                )
                if problem is None:
                    # What the rewrite puts at a withheld pointer is withheld from here
                    # on: a refusal below (a fact that cannot be canonicalized) may
                    # quote it (R8).
                    call.withhold(values_at(outcome.value, call.withheld))
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
                    canonical = self._facts(
                        call, outcome.value, stage="guardrail", guard=guard.name
                    )
                    if isinstance(canonical, Early):
                        entry["error"] = "replacement cannot be canonicalized"
                        return await self._end_early(
                            call, canonical.status, canonical.message, stage=canonical.stage
                        )
                    outcome = GuardrailOutcome.replace(canonical)
                arguments = outcome.value
                # Records made from here on (a later block, a failure) show the rewrite,
                # and whatever it rewrote away never surfaces in a message (R8).
                call.arguments = arguments
                call.secrets.update(t for t in removed if t)
                call.withhold(values_at(arguments, call.withheld))
        return None

    # -- the evaluator --------------------------------------------------------------------

    async def _evaluate(self, call: CallState, context: Mapping[str, Any]) -> CallOutcome | None:
        """The evaluator sees exactly the arguments the handler will get (R2); only
        ``allow`` and ``ask`` go on (R4)."""
        tool, session, h = call.tool, call.session, self.harness
        assert tool is not None
        t = time.perf_counter()
        facts = call.facts
        provenance = self._provenance(call)
        request = AuthzRequest.make(
            session.principal,
            tool.info,
            call.arguments,
            session.info(call.turn_id),
            context,
            facts if facts is not None else _NO_FACTS,
            provenance,
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
        call.timing["evaluate"] = int((time.perf_counter() - t) * 1_000_000)
        if provenance.computed:  # what the decision read of it
            call.record["provenance"] = visible_provenance(provenance.computed, call.withheld)
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

    def _provenance(self, call: CallState) -> Described:
        """Where each final argument came from (:mod:`clearance.provenance`), under the
        harness's trust list, for the evaluator. Each argument's record is computed when
        a policy first reads it: a call whose policies read none pays for none."""
        ledger = call.ledger or call.session.provenance
        provenance = ledger.describe(call.arguments, self.harness.trust)
        call.provenance = provenance
        if call.view is not None:
            call.view.provenance = provenance
        return provenance

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
