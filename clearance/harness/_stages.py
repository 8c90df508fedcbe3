"""The stages of a call, each a method that returns ``None`` (go on) or the outcome that
ends the call. :mod:`clearance.harness.pipeline` orders them; nothing here calls the next
stage.

- :meth:`Stages._resolve`: the tool (a selected tool of the session's agent), the call id;
- :meth:`Stages._validate`: a JSON object of bounded size and depth, valid for the schema;
- :meth:`Stages._canonicalize`: the declared facts (rule R11);
- :meth:`Stages._guard_arguments`: argument guardrails, in order (a rewrite feeds the next);
- :meth:`Stages._evaluate`: the authority evaluator (and a shadow one);
- :meth:`Stages._approve`: a grant, or an ask;
- :meth:`Stages._guard_result`: result guardrails;
- :meth:`Stages._dispatch`: a slot, then the handler.
"""

from __future__ import annotations

import contextlib
import inspect
import secrets
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio

from clearance import _pointer
from clearance._validation import schema_problem
from clearance.errors import AskError
from clearance.facts.base import FactError
from clearance.facts.declared import apply_facts
from clearance.guardrails.base import GuardrailContext, GuardrailOutcome
from clearance.harness import shape
from clearance.harness._call_state import CallState, copy_json, elapsed_us
from clearance.harness._guards import FAILED, check_guardrail
from clearance.harness._recorder import Recorder
from clearance.harness._records import result_from_json, verdict_record
from clearance.harness._redaction import (
    scrub,
    values_at,
    visible,
    visible_facts,
    withheld_deciding,
)
from clearance.harness.approvals import (
    PermissionAsk,
    PermissionDecision,
    arguments_hash,
    grant_from_answer,
    suggest_scopes,
)
from clearance.harness.ask_store import StoredAsk
from clearance.harness.outcomes import CallOutcome, OutcomeStatus
from clearance.harness.tools import CallContext, CallToolResult, ResultError, Tool
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
        self._result_guards: dict[str, tuple[Any, ...]] = {}

    # -- resolve ------------------------------------------------------------------------

    async def _resolve(self, call: CallState) -> CallOutcome | None:
        """The name must be a selected tool of this session's agent; a call id names one
        call for the session's lifetime."""
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
        if call.dry:
            return None
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

    # -- approval -------------------------------------------------------------------------

    async def _approve(self, call: CallState) -> CallOutcome | None:
        """A matching grant answers an ask; otherwise a person or the app does. In a dry
        run the ask is reported, not put."""
        verdict = call.verdict
        assert verdict is not None
        asks = call.guard_asks
        if verdict.effect == "ask" or asks:
            t = time.perf_counter()
            policies = tuple(verdict.reasons if verdict.effect == "ask" else ()) + tuple(
                g for g, _ in asks
            )
            why = (
                "; ".join(
                    ([verdict.message] if verdict.effect == "ask" and verdict.message else [])
                    + [r for _, r in asks]
                )
                or "approval required"
            )
            if call.dry:
                call.record.update(stage="ask", decision="ask", reasons=policies, message=why)
                return None
            try:
                allowed = await self._ask(call, scrub(why, call.secrets) or why, policies)
            except Exception as exc:  # the journal or grant store failed: fail closed (R1)
                self._diagnose(call, exc, stage="ask")
                call.record.setdefault("ask", {})["message"] = "the approval could not be recorded"
                allowed = False
                call.grant = None
            call.timing["ask"] = elapsed_us(t)
            if not allowed:
                return await self._end_early(
                    call,
                    "denied",
                    call.record["ask"].get("message") or "the approval was denied",
                    stage="ask",
                    decision="ask",
                    reasons=policies,
                    outcome="pending" if call.pending else None,
                )
        if call.dry:
            call.record.update(stage="evaluator", decision="allow", reasons=verdict.reasons)
            return None
        call.record["decision"] = "allow" if verdict.effect == "allow" else "ask"
        call.record["reasons"] = verdict.reasons
        return None

    async def _ask(self, call: CallState, reason: str, policies: tuple[str, ...]) -> bool:
        """Put the call to its grants, then to a person or the app: whether it is allowed
        (``call.grant`` holds the grant used or created)."""
        tool, session, h = call.tool, call.session, self.harness
        assert tool is not None
        arguments: dict[str, Any] = call.arguments
        principal = str(session.principal)
        # A grant's scope must constrain every field that decides what the call does.
        deciding = tuple(f.field for f in tool.declared_facts)
        path_fields = (
            tuple(f.field for f in tool.declared_facts if f.kind.name == "path")
            if deciding
            else None
        )
        other_facts = tuple(f.field for f in tool.declared_facts if f.kind.name != "path")
        record: dict[str, Any] = {"reason": reason, "policies": list(policies)}
        call.record["ask"] = record
        grant = h.grants.find(principal, tool.qualified_name, arguments, session.id)
        if grant is not None:
            record.update(answer="grant", grant=grant.grant_id)
            call.grant = grant
            return True
        store = h.ask_store
        args_hash = arguments_hash(arguments)
        key = call.resume_key or call.call_id
        stored = store.find(principal, tool.qualified_name, key, args_hash)
        blind = withheld_deciding(deciding, call.withheld)
        if blind:
            # Nobody approves what they cannot see (issue 19): a deciding argument that is
            # withheld (sensitive, or redacted by a guardrail) cannot be shown, so the
            # call is not put to a person at all.
            record.update(
                answer="deny",
                how="unshowable",
                message="this call needs approval, but what decides it ("
                + ", ".join(f"/{name}" for name in blind)
                + ") is withheld and cannot be shown to a person; denied",
            )
            return False
        ask = PermissionAsk(
            ask_id=stored.ask_id if stored is not None else "ask_" + secrets.token_hex(6),
            session_id=session.id,
            turn_id=call.turn_id,
            call_id=call.call_id,
            tool=tool.model_alias,
            qualified_name=tool.qualified_name,
            model_alias=tool.model_alias,
            principal=principal,
            arguments=visible(arguments, call.withheld),
            reason=reason,
            policies=policies,
            deciding=deciding,
            facts=visible_facts(call.facts or {}, call.withheld),
            suggestions=suggest_scopes(
                arguments,
                withheld=call.withheld,
                path_fields=path_fields,
                other_facts=other_facts,
            ),
        )
        record["ask_id"] = ask.ask_id
        if stored is None:
            store.put(StoredAsk.of(ask, args_hash, call_key=key))
            await self._record(call, "permission_asked", {**call.identity(), **ask.to_json()})
        if stored is not None and stored.status == "answered" and stored.decision is not None:
            # Answered while the call was paused (elsewhere, or before a restart): the
            # answer applies to this call, once.
            if store.consume(stored.ask_id):
                ask.settle(stored.decision)
        elif call.host and (
            call.wait is False or (call.wait is None and not session.asks.answerable)
        ):
            # A host that can pause: the ask waits in the store, the call comes back
            # pending, and the same call tried again sees the answer.
            record.update(
                answer="pending",
                how="pending",
                message=f"approval pending (ask {ask.ask_id}); try the call again once it "
                "is answered",
            )
            call.pending = True
            return False
        running = call.running
        if running is not None and session.on_permission_ask is None:
            # Closing the session answers an ask that waits in the stream ("closed":
            # denied, as documented), so the close need not cancel this call; an ask
            # callback may never return, so a call waiting for one is cancelled.
            running.quiet = True
        decision: PermissionDecision | None
        if ask.decision is not None:
            decision, how = ask.decision, "store"
        else:
            decision, how = await self._wait_for_answer(ask, session, store)
            if decision is not None and how != "store":
                with contextlib.suppress(AskError):
                    store.answer(ask.ask_id, decision, via=decision.via or how)
                store.consume(ask.ask_id)
            elif decision is None:
                store.withdraw(ask.ask_id, how)
        if session.closed and decision is not None:
            # Answered, but the session closed meanwhile: no grant may outlive it (R5).
            decision, how = None, "closed"
        record.update(answer=decision.decision if decision else "deny", how=how)
        if decision is not None and decision.decided_by:
            record["answered_by"] = decision.decided_by
        if decision is not None and decision.via:
            record["via"] = decision.via
        if decision is not None and decision.message:
            record["message"] = scrub(decision.message, call.secrets)
        new_grant = None
        if decision is not None and decision.decision != "deny":
            try:
                new_grant = grant_from_answer(
                    ask, decision, arguments, path_fields=path_fields, other_facts=other_facts
                )
                if new_grant is not None:
                    h.grants.add(new_grant)
                    record["grant_created"] = new_grant.to_json(public=True)
            except Exception as exc:
                self._diagnose(call, exc, stage="grant")
                decision, record["answer"] = None, "deny"
                record["message"] = "the answer could not be applied; denied"
        allowed = decision is not None and decision.decision != "deny"
        if allowed and running is not None:
            running.quiet = False  # answered before any close: cancellable again
        if not allowed and "message" not in record:
            record["message"] = {
                "timeout": "nobody answered the approval request in time; denied",
                "closed": "the session closed before the approval was answered; denied",
                "unanswerable": "this call needs approval and no one is set up to answer; denied",
                "error": "the approval callback failed; denied",
            }.get(how, "the approval was denied")
        await self._record(
            call,
            "permission_decided",
            {
                **call.identity(),
                "ask_id": ask.ask_id,
                "answer": record["answer"],
                "how": how,
                "by": record.get("answered_by"),
                "via": record.get("via"),
                "grant": new_grant.grant_id if new_grant else None,
            },
        )
        call.grant = new_grant
        return allowed

    async def _wait_for_answer(
        self, ask: PermissionAsk, session: Any, store: Any
    ) -> tuple[PermissionDecision | None, str]:
        """The session's answerer (callback or stream) answers; with a store other
        processes share, an answer given there (``clearance asks approve``) counts too."""
        if not store.shared:
            decision, how = await session.asks.answer(ask)
            return decision, how
        found: list[PermissionDecision] = []

        async def from_store() -> None:
            while ask.open:
                await anyio.sleep(_STORE_POLL)
                stored = store.get(ask.ask_id)
                if stored is not None and stored.status == "answered" and stored.decision:
                    if ask.open and store.consume(ask.ask_id):
                        found.append(stored.decision)
                        ask.settle(stored.decision)
                    return

        async with anyio.create_task_group() as tg:
            tg.start_soon(from_store)
            decision, how = await session.asks.answer(ask)
            tg.cancel_scope.cancel()
        if found and decision is found[0]:
            how = "store"
        return decision, how

    # -- the handler and its result -------------------------------------------------------

    async def _dispatch(
        self, call: CallState, tool: Tool, ctx: CallContext
    ) -> tuple[OutcomeStatus, Any, str | None]:
        """Wait for a slot, then run the handler; the slot is released however it ends."""
        lock = call.session.lock
        if not self.dispatcher.try_acquire_slot(tool, lock):
            await self.dispatcher.acquire_slot(tool, lock)
        try:
            if call.running is not None and call.running.requested:
                # The session closed before the handler could start (a backend where the
                # close only flags the call): it never starts.
                return "cancelled", None, "the call was cancelled"
            call.started_at = time.perf_counter()
            return await self._invoke(call, tool, ctx)
        finally:
            self.dispatcher.release_slot(tool, lock)

    async def _invoke(
        self, call: CallState, tool: Tool, ctx: CallContext
    ) -> tuple[OutcomeStatus, Any, str | None]:
        deadline: anyio.CancelScope | None = None
        try:
            if tool.timeout is None:
                if tool.is_async:  # the common case, one coroutine less
                    return "ok", await tool.handler(call.dispatch_arguments, ctx), None
                return (
                    "ok",
                    await self.dispatcher.call_handler(tool, call.dispatch_arguments, ctx),
                    None,
                )
            with anyio.move_on_after(tool.timeout) as deadline:
                return (
                    "ok",
                    await self.dispatcher.call_handler(tool, call.dispatch_arguments, ctx),
                    None,
                )
        except Exception as exc:
            if deadline is None or not deadline.cancel_called:
                self._diagnose(call, exc, stage="handler")
                if ctx.cancelled:
                    return "cancelled", None, "the call was cancelled"
                return "failed", None, f"the tool failed (correlation id {call.correlation_id})"
        ctx.cancel()
        return "timeout", None, f"the call timed out after {tool.timeout:g}s"

    async def _guard_result(
        self, call: CallState, status: OutcomeStatus, result: CallToolResult
    ) -> tuple[OutcomeStatus, CallToolResult | None, str | None]:
        """The result guardrails, in order: the result the model sees, or why it is
        withheld."""
        tool, session, h = call.tool, call.session, self.harness
        assert tool is not None
        guards = self._result_guards.get(tool.qualified_name)
        if guards is None:
            guards = self._result_guards[tool.qualified_name] = tuple(
                g for g in h.result_guardrails if g.applies_to(tool.qualified_name)
            )
        if not guards:
            return status, result, None
        gctx = GuardrailContext(
            tool.qualified_name,
            tool.model_alias,
            session.principal,
            session.id,
            call.turn_id,
            call.call_id,
            "result",
        )
        value = result.to_json()
        entries: list[dict[str, Any]] = []
        call.record["result_guardrails"] = entries
        for guard in guards:
            outcome, _ = await check_guardrail(
                guard,
                value,
                gctx,
                entries,
                secret_values=call.secrets,
                diagnose=lambda exc, stage: self._diagnose(call, exc, stage=stage),
            )
            if outcome is FAILED:
                return (
                    "blocked",
                    None,
                    f"result guardrail {guard.name!r} failed; the result was withheld "
                    f"(correlation id {call.correlation_id})",
                )
            if outcome is None:
                continue
            if outcome.action == "block":
                return (
                    "blocked",
                    None,
                    f"the result was withheld by guardrail {guard.name!r}: "
                    f"{scrub(outcome.message, call.secrets)}",
                )
            if outcome.action == "redact":
                value = _pointer.redact(value, outcome.pointers)
            elif outcome.action == "replace":
                value = outcome.value
        try:
            final = result_from_json(value)
        except (ResultError, KeyError, TypeError) as exc:
            self._diagnose(call, exc, stage="result guardrails")
            return (
                "blocked",
                None,
                "result guardrails produced an invalid result "
                f"(correlation id {call.correlation_id})",
            )
        return ("error" if final.is_error else "ok"), final, None
