"""The approval stage: a grant answers an ask, or a person or the app does (rules R3, R5).

A call whose evaluator (or an argument guardrail) asks is first put to the grant store;
failing a grant, to the ask store (an answer given while the call was paused applies to it
once), then to the session's answerer (:class:`~clearance.harness.asks.AskDesk`): its
callback or its stream, and, with a store other processes share, an answer given there.
A host that can pause (``authorize``) gets ``pending`` instead of waiting when nobody here
can answer. Nobody is asked to approve a call whose deciding argument is withheld. The ask,
its suggestions and the grant an answer makes are rendered from the call's one view
(:mod:`clearance.harness.view`).

Only a person answers (rule R13): the ask store reports an answer only when its seal
verifies under a registered approver's key or the host's (:mod:`clearance.harness.approvers`);
an answer the host gives here (callback, stream) is recorded sealed with the host key. An
answer is applied once per ask id in this harness, whatever the store says later.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Sequence
from typing import Any

import anyio

from clearance.errors import AskError, ClearanceError, ConfigError
from clearance.harness._call_state import CallState, elapsed_us
from clearance.harness._recorder import Recorder
from clearance.harness._redaction import scrub
from clearance.harness.approvals import PermissionAsk, PermissionDecision, arguments_hash
from clearance.harness.ask_store import HOST_GONE, StoredAsk, host_credential
from clearance.harness.grants import find_grant
from clearance.harness.outcomes import CallOutcome
from clearance.policy.base import Verdict

__all__ = ["Approval", "apply_once", "approval_required", "what_asks"]

_STORE_POLL = 0.2
"""Seconds between looks at a shared ask store while a call waits for its answer."""

_APPLIED_KEPT = 100_000
"""How many applied ask ids a harness remembers (the oldest are forgotten first; an ask
older than ``pending_ask_ttl`` is not applied anyway)."""


def apply_once(harness: Any, store: Any, ask_id: str) -> bool:
    """Mark the answer of ``ask_id`` as applied: True the first time only, in the store and
    in this harness (a store whose row was set back to ``answered`` by hand does not make
    one answer count twice here)."""
    applied: dict[str, None] = harness.applied_answers
    if ask_id in applied or not store.consume(ask_id):
        return False
    applied[ask_id] = None
    if len(applied) > _APPLIED_KEPT:
        del applied[next(iter(applied))]
    return True


def what_asks(
    verdict: Verdict, guard_asks: Sequence[tuple[str, str]]
) -> tuple[tuple[str, ...], str] | None:
    """``(policies, reason)`` when the call needs approval (the evaluator asks, or an
    argument guardrail does), else None."""
    if verdict.effect != "ask" and not guard_asks:
        return None
    policies = tuple(verdict.reasons if verdict.effect == "ask" else ()) + tuple(
        g for g, _ in guard_asks
    )
    why = "; ".join(
        ([verdict.message] if verdict.effect == "ask" and verdict.message else [])
        + [r for _, r in guard_asks if r]
    )
    # No reason given: name the policies that asked (what a person is shown as "Why"),
    # as the Cedar evaluator does for a permit without @ask.
    return policies, why or approval_required(policies)


def approval_required(policies: Sequence[str]) -> str:
    """The reason of an ask whose policies gave none: ``approval required by`` them."""
    return "approval required by " + ", ".join(policies) if policies else "approval required"


class Approval(Recorder):
    """The approval stage (see the module docstring)."""

    # -- approval -------------------------------------------------------------------------

    async def _approve(self, call: CallState) -> CallOutcome | None:
        """A matching grant answers an ask; otherwise a person or the app does."""
        verdict = call.verdict
        assert verdict is not None
        asking = what_asks(verdict, call.guard_asks)
        if asking is not None:
            policies, why = asking
            t = time.perf_counter()
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
        self._approved(call, verdict)
        return None

    @staticmethod
    def _approved(call: CallState, verdict: Verdict) -> None:
        """Record the decision of a call that goes on: ``allow``, or ``ask`` (answered)."""
        record = call.record
        record["decision"] = "allow" if verdict.effect == "allow" else "ask"
        record["reasons"] = verdict.reasons

    async def _ask(self, call: CallState, reason: str, policies: tuple[str, ...]) -> bool:
        """Put the call to its grants, then to a person or the app: whether it is allowed
        (``call.grant`` holds the grant used or created). What the person is shown, and
        what a grant must constrain, is the call's one view (:mod:`clearance.harness.view`)."""
        tool, session, h, view = call.tool, call.session, self.harness, call.view
        assert tool is not None and view is not None
        arguments: dict[str, Any] = call.arguments
        principal = view.principal
        record: dict[str, Any] = {"reason": reason, "policies": list(policies)}
        call.record["ask"] = record
        grant = await find_grant(h.grants, principal, tool.qualified_name, arguments, session.id)
        if grant is not None:
            record.update(answer="grant", grant=grant.grant_id)
            call.grant = grant
            return True
        store = h.ask_store
        args_hash = arguments_hash(arguments)
        key = call.resume_key or call.call_id
        stored = store.find(principal, tool.qualified_name, key, args_hash)
        if stored is not None and time.time() - stored.created_at > h.pending_ask_ttl:
            # An ask nobody answered (or applied) in time is not an answer for today's call.
            store.withdraw(stored.ask_id, "expired")
            stored = None
        if (
            stored is not None
            and stored.status == "pending"
            and call.resume_key is not None
            and any(s.asks.find(stored.ask_id) is not None for s in list(h.sessions.values()))
        ):
            # Found by a resume key while another call of the same key waits on it here:
            # this call is asked on its own (one ask, one waiting call, one answer).
            stored = None
        if stored is not None and stored.ask_id in h.applied_answers:
            # Applied here already, yet found again (a store set back by hand): that
            # answer is spent; the call is asked anew.
            stored = None
        blind = view.unshowable
        if blind:
            # Nobody approves what they cannot see (issue 19): a deciding argument whose
            # value is withheld (sensitive, redacted by a guardrail, or carrying a copy of
            # a withheld value) cannot be shown, so the call is not put to a person at all.
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
            session_id=view.session_id,
            turn_id=view.turn_id,
            call_id=view.call_id,
            tool=view.tool,
            qualified_name=view.qualified_name,
            model_alias=view.model_alias,
            principal=principal,
            arguments=view.shown_arguments,
            reason=reason,
            policies=policies,
            deciding=view.deciding,
            facts=view.shown_facts,
            notes=view.notes,
            suggestions=view.suggestions(),
        )
        record["ask_id"] = ask.ask_id
        pauses = call.host and (
            call.wait is False or (call.wait is None and not session.asks.answerable)
        )
        if stored is None:
            # A call that waits here lives as long as this process, and so does its ask
            # (its lease: ``instance``); a paused call's ask outlives the process.
            waits = store.shared and not pauses and callable(getattr(store, "renew", None))
            shown = StoredAsk.of(
                ask, args_hash, call_key=key, host=h.host, instance=h.instance if waits else None
            )
            if waits:
                store.put(shown, lease=h.host_lease)
            else:
                store.put(shown)
            await self._record(
                call,
                "permission_asked",
                {**call.identity(), **ask.to_json(), "host": h.host},
            )
        elif stored.status == "pending" and not pauses and stored.instance is None:
            # A paused call's ask (it has no lease) that a call of this process now waits
            # on: it lives while this process does, and reads ``host gone`` when it dies,
            # like an ask raised here.
            adopt = getattr(store, "adopt", None)
            if store.shared and callable(adopt):
                adopt(stored.ask_id, h.instance, h.host, h.host_lease)
        if stored is not None and stored.status == "answered" and stored.decision is not None:
            # Answered while the call was paused (elsewhere, or before a restart): the
            # answer applies to this call, once.
            if apply_once(h, store, stored.ask_id):
                ask.settle(stored.decision)
        elif pauses:
            # A host that can pause: the ask waits in the store, the call comes back
            # pending, and the same call tried again sees the answer.
            record.update(
                answer="pending",
                how="pending",
                message=f"approval pending (ask {ask.ask_id}); try the call again once it "
                "is answered",
            )
            call.pending = True
            # The same call (by its call id, not found by a resume key) tried again
            # while its ask still waits: its pending decision is on record already, with
            # its ask; a host that tries again (an adapter resumed before the answer is
            # given) adds no second record (one decision record per asked call).
            call.pending_recorded = (
                stored is not None and stored.status == "pending" and call.resume_key is None
            )
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
            decision, how = await self._wait_for_answer(
                ask, session, store, elsewhere=call.host and call.wait is True
            )
            if decision is not None:
                # Recorded where it was not (an answer from the stream or the callback,
                # sealed as the host's), and applied once wherever it came from: an answer
                # given in the store (``answer_ask``) while a callback waited is "store" and
                # still answered there; left so, the same call tried again would be
                # allowed by it again.
                try:
                    with contextlib.suppress(AskError):
                        store.answer(
                            ask.ask_id,
                            decision,
                            credential=host_credential(store),
                            via=decision.via or how,
                        )
                except ConfigError as exc:  # no host key here: the ask cannot stay open
                    self._diagnose(call, exc, stage="ask")
                    store.withdraw(ask.ask_id, "answered in process")
                apply_once(h, store, ask.ask_id)
            else:
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
                new_grant = view.grant(ask, decision)
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
        self, ask: PermissionAsk, session: Any, store: Any, *, elsewhere: bool = False
    ) -> tuple[PermissionDecision | None, str]:
        """The session's answerer (callback or stream) answers; with a store other
        processes share, an answer given there (``clearance asks approve``) counts too,
        and settles the call at once (a callback still waiting is cancelled).
        ``elsewhere``: a host that waits (``authorize(wait=True)``) with nobody here to
        answer waits for an answer from the store or ``harness.answer_ask``."""
        if not store.shared:
            decision, how = await session.asks.answer(ask, elsewhere=elsewhere)
            return decision, how
        found: list[PermissionDecision] = []

        h = self.harness
        renew = getattr(store, "renew", None)
        renewed = time.monotonic()

        async def from_store() -> None:
            nonlocal renewed
            while ask.open:
                await anyio.sleep(_STORE_POLL)
                try:
                    if callable(renew) and time.monotonic() - renewed > h.host_lease / 4:
                        # The ask lives while this process renews its lease.
                        renew(h.instance, h.host, h.host_lease)
                        renewed = time.monotonic()
                    stored = store.get(ask.ask_id)
                except ClearanceError:
                    # The store is away for a moment (a database restart): the call keeps
                    # waiting, closed, and reads the answer once it is back (ask_timeout
                    # bounds the wait).
                    continue
                if stored is not None and stored.status == "answered" and stored.decision:
                    if ask.open and apply_once(self.harness, store, ask.ask_id):
                        found.append(stored.decision)
                        ask.settle(stored.decision)
                    return
                if stored is not None and stored.closed_why == HOST_GONE:
                    # Its lease lapsed while this process stalled: nobody can answer it
                    # any more, so the call does not wait for an answer (denied).
                    ask.close(HOST_GONE)
                    return

        async with anyio.create_task_group() as tg:
            tg.start_soon(from_store)
            decision, how = await session.asks.answer(ask, elsewhere=elsewhere)
            tg.cancel_scope.cancel()
        if found and decision is found[0]:
            how = "store"
        return decision, how
