"""The harness (tools + evaluator + guardrails + journal + limits) and its sessions.

::

    async with Harness(registry, evaluator=LocalEvaluator(allow=["files.*"])) as harness:
        session = await harness.create_session(principal=Principal("User", "alice"))
        outcome = await session.call_tool("files__read_file", {"path": "notes.txt"}, call_id="c1")
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import anyio
from anyio.abc import TaskGroup

from clearance.errors import AskError, ClosedError
from clearance.guardrails.base import ArgumentGuardrail, ResultGuardrail
from clearance.harness._session import AgentDefinition, Session
from clearance.harness.approvals import (
    Answer,
    AskCallback,
    GrantScope,
    GrantStore,
    MemoryGrantStore,
    PermissionDecision,
    coerce_decision,
)
from clearance.harness.approvers import Credential
from clearance.harness.ask_store import (
    AskStore,
    MemoryAskStore,
    StoredAsk,
    host_credential,
    sweep_expired,
)
from clearance.harness.asks import Diagnostics
from clearance.harness.dispatch import Dispatcher
from clearance.harness.journal import EventHub, EventStream, Journal, JournalEvent, MemoryJournal
from clearance.harness.outcomes import Decision
from clearance.harness.pipeline import Pipeline
from clearance.harness.telemetry import Telemetry, telemetry_for
from clearance.harness.tools import ToolRegistry
from clearance.policy.base import (
    AllOf,
    AuthorityEvaluator,
    Principal,
    as_evaluator,
    bind,
)
from clearance.policy.local import LocalEvaluator
from clearance.provenance import Provenance, TrustList

__all__ = ["AgentDefinition", "Harness", "Session"]

log = logging.getLogger("clearance")
_SWEEP_EVERY = 60.0
"""Seconds between two sweeps of expired asks by :meth:`Harness.pending_asks`."""


class Harness:
    """Tools, the authority evaluator, guardrails, journal and limits, shared by sessions.

    Args:
        registry: the tools. It freezes when the first session is created.
        evaluator: decides allow / deny / ask. Required: there is no implicit allow-all
            (rule R4); pass ``NoopEvaluator()`` to allow everything on purpose.
        argument_guardrails: run in order on validated arguments, before the evaluator.
        result_guardrails: run in order on results, before the model and journal see them.
        journal: where events go (default: a ``MemoryJournal``).
        grant_store: where ``allow_session``/``allow_always`` grants live.
        ask_store: where asks wait for their answers (default: memory). A shared store
            (``SqliteAskStore``) lets another process answer them (``clearance asks``)
            and a paused ``authorize`` resume after a restart.
        shadow_evaluator: a candidate evaluated beside ``evaluator`` on every call, whose
            disagreements are recorded but never enforced.
        max_concurrency: handlers running at once, harness-wide.
        max_queue: calls that may wait for a slot; beyond that calls end ``overloaded``.
        ask_timeout: seconds an ask waits for an answer before it is denied.
        pending_ask_ttl: seconds a stored ask (one ``authorize`` left pending) stays
            answerable; an older one, answered or not, no longer applies (default a day).
        authorization_ttl: seconds an allowed ``authorize`` stays usable (rule R12): a
            call not run (``execution``, ``run_authorized``) within it is refused and
            must be decided again (default 300).
        max_argument_bytes: the largest serialized arguments accepted (default 1 MiB).
        max_argument_depth: the deepest nesting accepted (default 64).
        max_session_calls: call ids one session remembers (rule R7: a reused one is
            refused); once that many are held, the session refuses new calls, so its
            memory stays bounded and no id is ever forgotten while it lives; a host
            replaces it with a new session (the gateway does so for sessionless clients)
            (default 100,000).
        diagnostics: ``(correlation_id, exception, info)``, called with the exceptions
            behind generic failures; those never reach the model.
        cancel_grace: seconds a cancelled sync handler gets to notice ``ctx.cancelled``.
        telemetry: OpenTelemetry spans and metrics for each call
            (:mod:`clearance.harness.telemetry`): ``None`` (default) when OpenTelemetry is
            imported and a tracer provider is set as the harness is built, ``True``
            always, ``False`` never, or a ``Telemetry`` with its own providers.
        trust: which sources, besides the user's messages, count as the user's own for
            provenance (``TrustList.from_directory(pack)`` reads a pack's
            ``provenance.toml``); default: system messages do, no tool does.
        provenance: ``False`` when no policy reads provenance: sessions record nothing
            and calls pay nothing for it; a policy that reads it anyway sees every value
            as from a tool (``"tool:*"``), never the user's, so it denies rather than
            trusts.
        journal_messages: ``True`` to journal the messages and tool results the host
            gives each session (``message_added`` records, written before the session's
            next call), so that ``clearance journal export`` gives every call the
            conversation its provenance was read from and a replay decides it as it was
            decided live. Off by default: a message is the user's own text, and a value
            she typed is kept there even when a later call withholds it (rule R8 covers
            arguments and results, not what the user wrote).
        host_lease: seconds a shared ask store keeps the asks this process's calls wait
            on after the process last renewed its lease (a waiting call renews it a few
            times per lease); once it lapses, or the process is gone, they read ``host
            gone`` and cannot be answered (default 30).
    """

    def __init__(
        self,
        registry: ToolRegistry,
        *,
        evaluator: AuthorityEvaluator,
        argument_guardrails: Iterable[ArgumentGuardrail | Callable[..., Any]] = (),
        result_guardrails: Iterable[ResultGuardrail | Callable[..., Any]] = (),
        journal: Journal | None = None,
        grant_store: GrantStore | None = None,
        ask_store: AskStore | None = None,
        shadow_evaluator: AuthorityEvaluator | None = None,
        max_concurrency: int = 16,
        max_queue: int = 256,
        ask_timeout: float = 300.0,
        pending_ask_ttl: float = 86_400.0,
        authorization_ttl: float = 300.0,
        max_argument_bytes: int = 1 << 20,
        max_argument_depth: int = 64,
        max_session_calls: int = 100_000,
        diagnostics: Diagnostics | None = None,
        cancel_grace: float = 5.0,
        event_buffer: int = 1024,
        telemetry: Telemetry | bool | None = None,
        trust: TrustList | None = None,
        provenance: bool = True,
        journal_messages: bool = False,
        host_lease: float = 30.0,
    ) -> None:
        if not isinstance(registry, ToolRegistry):
            raise TypeError("registry must be a ToolRegistry")
        if evaluator is None or not callable(getattr(evaluator, "evaluate", None)):
            raise TypeError(
                "evaluator must be an authority evaluator (NoopEvaluator() to allow all)"
            )
        if ask_timeout <= 0:
            raise ValueError("ask_timeout must be positive")
        if not authorization_ttl > 0:
            raise ValueError("authorization_ttl must be positive")
        if not host_lease > 0:
            raise ValueError("host_lease must be positive")
        if isinstance(max_session_calls, bool) or not (
            isinstance(max_session_calls, int) and max_session_calls > 0
        ):
            raise ValueError("max_session_calls must be a positive integer")
        self.registry = registry
        self.evaluator = evaluator
        self.argument_guardrails = tuple(
            _as_guardrail(g, ArgumentGuardrail) for g in argument_guardrails
        )
        self.result_guardrails = tuple(_as_guardrail(g, ResultGuardrail) for g in result_guardrails)
        self.journal: Journal = journal if journal is not None else MemoryJournal()
        self.grants: GrantStore = grant_store if grant_store is not None else MemoryGrantStore()
        self.ask_store: AskStore = ask_store if ask_store is not None else MemoryAskStore()
        self.shadow_evaluator = shadow_evaluator
        self.ask_timeout = ask_timeout
        self.pending_ask_ttl = pending_ask_ttl
        self._swept_at = 0.0
        self.authorization_ttl = float(authorization_ttl)
        """Seconds an allowed authorization stays usable (see ``authorization_ttl``)."""
        self.max_argument_bytes = max_argument_bytes
        self.max_argument_depth = max_argument_depth
        self.max_session_calls = max_session_calls
        """Call ids one session holds before it refuses new calls (see ``max_session_calls``)."""
        self.diagnostics = diagnostics
        if trust is not None and not isinstance(trust, TrustList):
            raise TypeError("trust must be a TrustList (TrustList.from_directory(pack))")
        self.trust = trust if trust is not None else TrustList()
        """Which sources count as the user's own in every session (:mod:`clearance.provenance`)."""
        self.provenance_enabled = bool(provenance)
        """Whether sessions record their messages and results (see ``provenance``)."""
        self.journal_messages = bool(journal_messages) and self.provenance_enabled
        """Whether the messages the host gives are journaled (see ``journal_messages``)."""
        self.dispatcher = Dispatcher(
            max_concurrency=max_concurrency, max_queue=max_queue, cancel_grace=cancel_grace
        )
        self.hub = EventHub(event_buffer)
        self.telemetry = telemetry_for(telemetry)
        """Where calls are traced, or None (see the ``telemetry`` argument)."""
        self.pipeline = Pipeline(self)
        self.sessions: dict[str, Session] = {}
        self._bound = False
        self._closed = False
        self._task_group: TaskGroup | None = None
        self._decide_sessions: dict[tuple[str, str, int | None], Session] = {}
        self.applied_answers: dict[str, None] = {}
        """The asks whose answers this harness applied (newest last): a store rolled back
        by hand (an answer set from ``consumed`` to ``answered`` again) cannot make one
        answer authorize twice here (R5)."""
        self.unjournaled: deque[JournalEvent] = deque()
        """Records of the harness itself (``policies_reloaded``) that the evaluator gave
        from a synchronous place, for the pipeline to journal before the next call is
        decided (and the harness when it closes)."""
        self.close_hooks: list[Callable[[], Awaitable[None]]] = []
        """Async callables run (last first) when the harness closes, before the journal."""
        host = getattr(self.journal, "host", None)
        self.host: str = (
            host
            if isinstance(host, str) and host
            else os.environ.get("CLEARANCE_HOST") or socket.gethostname() or "localhost"
        )
        """The host every ask and record names (the journal's host id when it has one,
        else ``$CLEARANCE_HOST`` or the machine's name)."""
        self.instance = f"{self.host}/{os.getpid()}/{secrets.token_hex(4)}"
        """This process's lease in a shared ask store (see ``host_lease``)."""
        self.host_lease = float(host_lease)

    async def __aenter__(self) -> Harness:
        if as_evaluator(self.evaluator).allows_everything:
            log.warning("clearance harness started with NoopEvaluator: every call is allowed")
        # Background work (MCP server connections, watchers) runs in this task group and
        # ends when the harness closes: no unowned tasks.
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        return self

    @property
    def task_group(self) -> TaskGroup:
        """The harness's task group, for background work; only inside ``async with``."""
        if self._task_group is None:
            raise ClosedError("the harness is not started: use 'async with Harness(...)'")
        return self._task_group

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every session (cancelling running calls) and the journal."""
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            for session in list(self.sessions.values()):
                await session.aclose()
            self.hub.close()
            end = getattr(self.ask_store, "end", None)
            if callable(end):
                try:
                    end(self.instance)  # this process's waiting asks are over
                except Exception as exc:
                    log.warning("could not end this host's lease in the ask store: %r", exc)
            for hook in reversed(self.close_hooks):
                try:
                    await hook()
                except Exception as exc:
                    log.warning("a harness close hook failed: %r", exc)
            try:
                await self.pipeline.journal_harness_records()
            except Exception as exc:
                log.warning("journal failed to record a policy reload: %r", exc)
        if self._task_group is not None:
            # Exited outside the shielded scope: cancel scopes must nest.
            self._task_group.cancel_scope.cancel()
            await self._task_group.__aexit__(None, None, None)
            self._task_group = None
        with anyio.CancelScope(shield=True):
            await self.journal.aclose()

    def _hear_reloads(self, evaluator: Any, role: str) -> None:
        """Journal and count each reload of ``evaluator``'s policies (a Cedar evaluator's
        ``on_reload``): a set that failed to load is seen beside the decisions."""
        listeners = getattr(evaluator, "on_reload", None)
        if isinstance(listeners, list):
            listeners.append(lambda reload: self._policies_reloaded(role, reload))

    def _policies_reloaded(self, role: str, reload: Any) -> None:
        """A ``policies_reloaded`` record for the next call to write (the evaluator
        reloads from a synchronous place: its watch runs inside ``evaluate``)."""
        data = {
            "evaluator": role,
            "loaded": bool(reload.loaded),
            "how": reload.how,
            "policy_version": reload.policy_version,
            "error": reload.error,
            "directory": reload.directory,
            "host": self.host,
        }
        self.unjournaled.append(JournalEvent("policies_reloaded", "", None, None, data))
        if self.telemetry is not None:
            self.telemetry.policy_reloaded(role, loaded=bool(reload.loaded), how=reload.how)

    def freeze(self) -> None:
        """Freeze the registry and check the evaluator's rules against it (once)."""
        if not self._bound:
            bind(self.evaluator, self.registry)
            self._hear_reloads(self.evaluator, "live")
            if self.shadow_evaluator is not None:
                bind(self.shadow_evaluator, self.registry)
                self._hear_reloads(self.shadow_evaluator, "shadow")
            names = [t.qualified_name for t in self.registry]
            for guard in (*self.argument_guardrails, *self.result_guardrails):
                if not any(guard.applies_to(name) for name in names):
                    # Not an error (tools may come later in another harness), but a
                    # guardrail that guards nothing is almost always a typo in its globs.
                    log.warning(
                        "guardrail %r applies to no registered tool (tools=%s)",
                        guard.name,
                        list(getattr(guard, "tools", ())),
                    )
            self._bound = True
        self.registry.freeze()

    async def create_session(
        self,
        *,
        principal: Principal,
        agent: AgentDefinition | None = None,
        on_permission_ask: AskCallback | None = None,
        session_id: str | None = None,
    ) -> Session:
        """Open a session for ``principal`` running ``agent``.

        Raises:
            ClosedError: the harness is closed.
            UnknownToolError: the agent names a tool that is not registered.
            ConfigError: the evaluator's rules do not fit the registered tools.
        """
        if self._closed:
            raise ClosedError("the harness is closed")
        if not isinstance(principal, Principal):
            raise TypeError("principal must be a Principal")
        self.freeze()
        agent = agent or AgentDefinition("default")
        selected = self.registry.select(agent.tools)
        evaluator = self._agent_evaluator(agent)
        sid = session_id or "s_" + secrets.token_hex(8)
        if sid in self.sessions:
            raise ValueError(f"session id {sid!r} is in use")
        session = Session(self, sid, principal, agent, selected, evaluator, on_permission_ask)
        # A reused session id starts clean: no session grant of an earlier session with
        # this id may carry over (R5).
        self.grants.end_session(sid)
        self.sessions[sid] = session
        await self.journal.append(
            JournalEvent(
                "session_created",
                sid,
                None,
                None,
                {"principal": str(principal), "agent": agent.name, "tools": sorted(selected)},
            )
        )
        return session

    def events(self) -> EventStream:
        """Events of every session, from now on."""
        return self.hub.subscribe(None)

    def pending_asks(self) -> list[StoredAsk]:
        """The asks waiting for an answer, in this process or (with a shared ask store)
        any process."""
        oldest = time.time() - self.pending_ask_ttl
        if oldest - self._swept_at > _SWEEP_EVERY:
            # Older asks no host applies an answer to: closed as expired in the store.
            self._swept_at = oldest
            sweep_expired(self.ask_store, self.pending_ask_ttl)
        return [a for a in self.ask_store.pending() if a.created_at >= oldest]

    async def answer_ask(
        self,
        ask_id: str,
        decision: Answer | PermissionDecision,
        *,
        scope: GrantScope | None = None,
        by: str | None = None,
        via: str | None = None,
        credential: Credential | None = None,
    ) -> StoredAsk:
        """Answer a pending ask from anywhere: a call waiting for it (here, or in another
        process sharing the ask store) goes on, and a paused ``authorize`` with the same
        call id sees the answer when it is tried again.

        The host answers (rule R13): the answer is sealed with the host key and recorded
        as given by ``by``, whom the host vouches for. With an approver's ``credential``
        it is sealed with their key and recorded as theirs.

        Args:
            ask_id: the ask.
            decision: ``allow_once``, ``allow_session``, ``allow_always``, ``deny``, or a
                ``PermissionDecision``.
            scope: for ``allow_session``/``allow_always``, one of the ask's
                ``suggestions`` (default: the exact call).
            by: who answered (recorded with the answer and any grant).
            via: through what (``cli``, ``inbox``, ``openai-agents``...).
            credential: an approver's key to seal the answer with (default: the host's).

        Raises:
            AskError: no such ask, it is not pending, the answer is not valid, or the
                credential is not a registered approver's.
            ConfigError: the host key cannot be read or made.
        """
        answer = coerce_decision(decision, scope=scope)
        stored_ask = self.ask_store.get(ask_id)
        if (
            stored_ask is not None
            and answer.scope is not None
            and answer.scope not in stored_ask.suggestions
        ):
            # Checked here, not only when the answer is applied: an answer that would be
            # refused later must not be recorded as given.
            raise AskError(f"the scope is not one ask {ask_id} offers (see its suggestions)")
        if by is not None or via is not None:
            answer = PermissionDecision(
                answer.decision,
                scope=answer.scope,
                message=answer.message,
                expires_in=answer.expires_in,
                decided_by=by or answer.decided_by,
                via=via or answer.via,
            )
        key = credential if credential is not None else host_credential(self.ask_store)
        stored = self.ask_store.answer(ask_id, answer, credential=key, by=by, via=via)
        assert stored.decision is not None
        answer = stored.decision  # who answered, as recorded (an approver: their name)
        for session in list(self.sessions.values()):
            live = session.asks.find(ask_id)
            if live is not None and live.open:
                live.settle(answer)
        return stored

    async def decide(
        self,
        *,
        principal: Principal,
        tool: str,
        arguments: Any,
        agent: AgentDefinition | None = None,
        context: Mapping[str, Any] | None = None,
        provenance: Provenance | None = None,
        with_provenance: bool = True,
        session: Session | None = None,
        caller: Mapping[str, Any] | None = None,
    ) -> Decision:
        """What the pipeline would decide for one call, without running or asking
        anything: schema check, argument guardrails and the evaluator (an ask stays
        ``ask``; grants are not consulted). For ``clearance policy explain`` and
        ``clearance replay``, which journal nothing; and for ``clearance pdp``, which
        gives an open ``session`` of ``principal`` and the ``caller`` that asked: the
        decision is then journaled in that session as a ``call_decided`` record of
        outcome ``answered`` naming the caller (a journal that fails raises).

        ``provenance`` holds the conversation the call was made in (the user's messages,
        the tool results before it): the call's arguments are described against it, under
        this harness's trust list. Without it nothing was seen but the agent's
        instructions: every other value is made up.

        ``with_provenance=False`` leaves :attr:`Decision.provenance` ``None``: every
        argument's record is then computed only if a policy, rule or guardrail read it
        (as in ``call_tool``), not for the explanation. The decision itself is the same;
        for callers that only count outcomes (``clearance replay``), to whom the records
        are most of a decision's cost."""
        if self._closed:
            raise ClosedError("the harness is closed")
        if session is not None or caller is not None:
            held = session.principal if session is not None else None
            if (
                caller is None
                or held is None
                or held != principal
                or held.attrs != principal.attrs
                or tuple(held.parents) != tuple(principal.parents)
            ):
                raise ValueError("a journaled decision needs the caller and a session of principal")
        else:
            session = self._decide_session(principal, agent)
        assert session is not None
        return await self.pipeline.decide(
            session,
            tool,
            arguments,
            context=context,
            provenance=provenance,
            with_provenance=with_provenance,
            caller=caller,
        )

    def _decide_session(self, principal: Principal, agent: AgentDefinition | None) -> Session:
        """The unjournaled session ``decide`` decides ``principal``'s calls in (kept per
        principal and agent, up to 10,000)."""
        self.freeze()
        key = (principal.type, principal.id, id(agent) if agent is not None else None)
        session = self._decide_sessions.get(key)
        if session is None or session.principal.attrs != principal.attrs:
            agent = agent or AgentDefinition("default")
            evaluator = self._agent_evaluator(agent)
            session = Session(
                self, "decide", principal, agent, self.registry.select(agent.tools), evaluator, None
            )
            if len(self._decide_sessions) < 10_000:
                self._decide_sessions[key] = session
        return session

    def _agent_evaluator(self, agent: AgentDefinition) -> AuthorityEvaluator:
        if agent.capabilities is None:
            return self.evaluator

        narrow = LocalEvaluator(allow=agent.capabilities)
        narrow.bind(self.registry)
        return AllOf(self.evaluator, narrow)


def _as_guardrail(value: Any, kind: type[ArgumentGuardrail] | type[ResultGuardrail]) -> Any:
    if all(hasattr(value, a) for a in ("applies_to", "run", "advisory", "name", "timeout")):
        stage = getattr(value, "stage", kind.stage)
        if stage != kind.stage:
            where = "argument_guardrails" if kind.stage == "arguments" else "result_guardrails"
            raise TypeError(f"{value!r} is a {stage} guardrail; it cannot go in {where}")
        return value
    if callable(value):
        return kind(value)
    raise TypeError(f"{value!r} is not a guardrail")
