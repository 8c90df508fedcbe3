"""A session: one conversation of one principal with one agent, and its two ways in
(``call_tool``; ``authorize`` + ``record_result`` for hosts that run their own tools).

Created by :meth:`Harness.create_session <clearance.harness.session.Harness.create_session>`;
both names are importable from :mod:`clearance.harness.session`.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from clearance.errors import ClosedError
from clearance.harness._call_state import CallState
from clearance.harness._provenance import result_values
from clearance.harness.approvals import (
    AskCallback,
    PermissionAsk,
)
from clearance.harness.asks import AskDesk
from clearance.harness.cancellation import this_task
from clearance.harness.dispatch import SessionLock
from clearance.harness.journal import EventStream, JournalEvent
from clearance.harness.outcomes import Authorization, CallOutcome
from clearance.harness.pipeline import Execution
from clearance.harness.providers import Provider, Run
from clearance.harness.tools import CallToolResult, Tool
from clearance.policy.base import (
    AuthorityEvaluator,
    Principal,
    SessionInfo,
)
from clearance.provenance import Provenance
from clearance.provenance.ledger import Role

__all__ = ["AgentDefinition", "Session"]

if TYPE_CHECKING:
    from clearance.harness.session import Harness

log = logging.getLogger("clearance")

_HOST_TEXTS = 4096


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class AgentDefinition:
    """An agent: its name, the tools it may see, and its instructions."""

    name: str
    tools: Sequence[str] | None = None
    """Qualified-name globs of the tools this agent may call; ``None`` means all."""
    instructions: str = ""
    capabilities: Sequence[str] | None = None
    """Extra local allow rules that narrow the harness evaluator for this agent's sessions
    (a call must pass both); ``None`` adds nothing."""


class Session:
    """One conversation of one principal with one agent. Create with
    :meth:`Harness.create_session`."""

    def __init__(
        self,
        harness: Harness,
        session_id: str,
        principal: Principal,
        agent: AgentDefinition,
        selected: Mapping[str, Tool],
        evaluator: AuthorityEvaluator,
        on_permission_ask: AskCallback | None,
    ) -> None:
        self.harness = harness
        self.id = session_id
        self.principal = principal
        self.principal_text = str(principal)
        """``str(principal)`` (``User::"alice"``), as every ``call_decided`` names it."""
        self.agent = agent
        self.evaluator = evaluator
        self.tools: Mapping[str, Tool] = harness.registry.by_name(selected)
        """The tools this session may call, by qualified name and by model alias
        (read-only: shared by the sessions of the same selection)."""
        self.call_ids: set[str] = set()
        self.lock = SessionLock()
        self.running: set[Any] = set()
        """Handles of the calls in the pipeline now (being decided, queued or running
        their handler); ``cancel()`` ends each before or while its handler runs."""
        self.closed = False
        self._inflight = 0
        self._idle_at = 0
        self._infos: dict[str | None, SessionInfo] = {}
        self._idle: anyio.Event | None = None
        self.asks = AskDesk(
            callback=on_permission_ask,
            timeout=harness.ask_timeout,
            diagnostics=harness.diagnostics,
        )
        """Where this session's asks are answered (see :class:`AskDesk`)."""
        self.authorized: dict[str, CallState] = {}
        """Calls ``authorize`` allowed whose run the host has not recorded yet, by call id."""
        self.provenance = Provenance(trust=harness.trust, enabled=harness.provenance_enabled)
        """The values that entered this session (messages, tool results) and where each
        came from (:mod:`clearance.provenance`)."""
        self._host_texts: dict[str, None] = {}
        """Digests of the messages the host gave (bounded, oldest forgotten first)."""
        self.unjournaled: list[dict[str, Any]] = []
        """Messages and results the host gave since the last call, as ``message_added``
        data, for the pipeline to journal before that session's next call
        (``Harness(journal_messages=True)`` only)."""
        if agent.instructions:
            self.add_message("system", agent.instructions)

    @property
    def on_permission_ask(self) -> AskCallback | None:
        """The callback that answers this session's asks (None: the ask stream does)."""
        return self.asks.callback

    @on_permission_ask.setter
    def on_permission_ask(self, callback: AskCallback | None) -> None:
        self.asks.callback = callback

    @property
    def selected_tools(self) -> list[Tool]:
        """The tools this session's agent may call (each once)."""
        return list({t.qualified_name: t for t in self.tools.values()}.values())

    async def call_tool(
        self,
        name: str,
        arguments: Any,
        *,
        call_id: str | None = None,
        turn_id: str | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> CallOutcome:
        """Run one tool call through the pipeline and return how it ended.

        ``name`` is the model alias (``files__read_file``) or the qualified name. Denials,
        blocks, invalid arguments and tool failures come back as a ``CallOutcome`` the
        model can be shown; only misuse (a closed session) raises.

        Raises:
            ClosedError: the session or harness is closed.
        """
        if self.closed:
            raise ClosedError(f"session {self.id} is closed")
        return await self.harness.pipeline.call(
            self, name, arguments, call_id=call_id, turn_id=turn_id, context=context
        )

    def run(self, prompt: str, *, provider: Provider, max_turns: int = 50) -> Run:
        """Start an agent run: the provider's tool calls go through the pipeline. The
        prompt is recorded as the user's (:meth:`add_user_message`)."""
        self.add_user_message(prompt)
        return Run(self, prompt, provider, max_turns=max_turns)

    def add_user_message(self, text: str) -> None:
        """Record the user's own words, as the host received them (what she typed, the
        prompt it hands the agent): the one way a value becomes the user's (rule R14).

        Call it from the host's entry point, never with text a model or a framework
        produced: an agent framework shows the tool layer "user" messages that a model
        wrote (a sub-agent's input), so the adapters never read the user from there
        (their ``run`` entry points call this with the run's input).

        Raises:
            TypeError: ``text`` is not a string.
        """
        self.add_message("user", text)

    def add_message(self, role: Role, text: str) -> None:
        """Record a message the host gives: the user's (``"user"``, as
        :meth:`add_user_message`) or the application's instructions (``"system"``). Its
        values count as the user's own (system messages unless the trust list says
        otherwise): see :mod:`clearance.provenance`. Tool results need no call: the
        pipeline records each result it returns.

        Raises:
            ValueError: ``role`` is neither ``"user"`` nor ``"system"``.
            TypeError: ``text`` is not a string.
        """
        self.provenance.add_message(role, text)
        if self.harness.journal_messages:
            # What the ledger reads of it, and one character more (its overflow).
            self.unjournaled.append({"role": role, "content": text[: self.provenance.max_scan + 1]})
        texts = self._host_texts
        if len(texts) >= _HOST_TEXTS:
            del texts[next(iter(texts))]
        texts[_digest(text)] = None

    def is_host_message(self, text: str) -> bool:
        """Whether the host gave ``text`` as a message of this session
        (:meth:`add_user_message`, :meth:`add_message`, the agent's instructions; the
        last 4096 of them): an adapter that sees it again in a framework's history has
        nothing new to record."""
        return isinstance(text, str) and _digest(text) in self._host_texts

    def add_tool_result(self, tool: str, call_id: str, value: Any) -> None:
        """Record a tool result clearance did not return (a replayed conversation, a tool
        the host ran outside :meth:`authorize`): a string, a JSON value or a
        ``CallToolResult``. ``tool`` is a tool's qualified name or model alias (another
        name is recorded as given); its values count as that tool's, never the user's
        unless the trust list names the tool."""
        found = self.tools.get(tool)
        name = found.qualified_name if found is not None else tool
        if isinstance(value, CallToolResult):
            value = result_values(value)
        self.provenance.add_result(name, call_id, value)
        if self.harness.journal_messages:
            self.unjournaled.append(
                {"role": "tool", "tool": name, "call_id": call_id, "content": value}
            )

    def events(self) -> EventStream:
        """This session's events, from now on (bounded buffer; see ``EventItem.dropped``)."""
        return self.harness.hub.subscribe(self.id)

    def permission_asks(self) -> AsyncIterator[PermissionAsk]:
        """Asks of this session, to answer with ``await ask.respond(...)``.

        Used when the session has no ``on_permission_ask`` callback. While at least one
        iterator is open, asks wait here (up to the harness ``ask_timeout``); with none
        open and no callback, an ask waits a moment for one (a UI task that was just
        started) and is then denied. The iterator counts from this call, not from its
        first step.
        """
        return self.asks.listen()

    def info(self, turn_id: str | None) -> SessionInfo:
        """The session as evaluators see it (one shared value per turn)."""
        info = self._infos.get(turn_id)
        if info is None:
            if len(self._infos) > 1024:
                self._infos.clear()
            info = self._infos[turn_id] = SessionInfo(self.id, turn_id)
        return info

    @property
    def in_flight(self) -> int:
        """Calls of this session that entered the pipeline and have not ended yet."""
        return self._inflight

    def _enter(self) -> None:
        self._inflight += 1

    def _leave(self) -> None:
        self._inflight -= 1
        if self._inflight <= self._idle_at and self._idle is not None:
            self._idle.set()

    @property
    def open_asks(self) -> list[PermissionAsk]:
        """The asks of this session waiting for an answer now."""
        return self.asks.open_asks

    async def authorize(
        self,
        name: str,
        arguments: Any,
        *,
        call_id: str | None = None,
        turn_id: str | None = None,
        context: Mapping[str, Any] | None = None,
        wait: bool | None = None,
        resume_key: str | None = None,
    ) -> Authorization:
        """Put a call that the host will run itself through every stage before dispatch,
        exactly as :meth:`call_tool` does (schema, canonical facts, guardrails, evaluator,
        grants, asks, the journal's ``call_decided``).

        An ``allowed`` authorization carries the final, canonical arguments: the host must
        run the tool with those, then report with :meth:`record_result` (or run it inside
        :meth:`execution`). A ``denied`` one carries what the model may be shown.

        An ask is answered by the session's callback or stream and waited for; when nobody
        here can answer (or ``wait=False``) the authorization comes back ``pending`` with
        its ``ask_id``: the ask waits in the harness's ask store, to be answered from
        anywhere (``harness.answer_ask``, ``clearance asks approve``), and the same call
        (same call id and arguments) tried again, in this session or another, after a
        restart too, gets the answer: ``allow_once`` authorizes it once. ``wait=True``
        waits for an answer even with nobody here to give it (up to ``ask_timeout``).
        ``resume_key`` finds a stored answer by something other than the call id (a
        client that retries a call under a new id: the same key, tool, principal and
        canonical arguments).

        Raises:
            ClosedError: the session or harness is closed.
        """
        if self.closed:
            raise ClosedError(f"session {self.id} is closed")
        return await self.harness.pipeline.authorize(
            self,
            name,
            arguments,
            call_id=call_id,
            turn_id=turn_id,
            context=context,
            wait=wait,
            resume_key=resume_key,
        )

    async def run_authorized(self, call_id: str) -> CallOutcome:
        """Run a call that :meth:`authorize` allowed as :meth:`call_tool` would: clearance
        runs its handler (queue, limits, cancellation, result guardrails, journal). For a
        host that decides first and lets clearance run the tool after (``call_tool`` is
        ``authorize`` then this). An authorization that no longer holds (see
        :meth:`holds`) is withdrawn and the call ends ``denied`` without running.

        Raises:
            NotAuthorizedError: the call was not authorized here, or already run.
        """
        return await self.harness.pipeline.run_authorized(self, call_id)

    async def record_result(
        self,
        call_id: str,
        result: Any = None,
        *,
        error: BaseException | str | None = None,
        status: str | None = None,
    ) -> CallOutcome:
        """Record the run of a call that :meth:`authorize` allowed: journal its start and
        end, run the result guardrails, and return what the model may see.

        Args:
            call_id: the authorized call.
            result: what the tool returned (a string, JSON value, ``CallToolResult``...).
            error: the tool failed (the model sees a generic failure with a correlation
                id; an exception goes to the ``diagnostics`` callback).
            status: ``"cancelled"`` or ``"timeout"`` for a run that ended so; ``"error"``
                for a domain error the result describes.

        Raises:
            NotAuthorizedError: the call was not authorized here, or already recorded.
        """
        return await self.harness.pipeline.record_result(
            self, call_id, result, error=error, status=status
        )

    def holds(self, call_id: str) -> bool:
        """Whether :meth:`authorize` allowed ``call_id``, it has not run, and its
        authorization still holds (rule R12): it is younger than the harness's
        ``authorization_ttl``, and the grant that allowed it (if one did) still covers
        it. A host that kept an authorization a while (across a pause for another ask)
        asks this, and decides the call again (:meth:`withdraw`, then :meth:`authorize`)
        when it does not: :meth:`execution` and :meth:`run_authorized` would refuse it."""
        call = self.authorized.get(call_id)
        return call is not None and self.harness.pipeline.stale(call) is None

    async def withdraw(self, call_id: str) -> None:
        """Give up the allowed, unused authorization of ``call_id``: nothing of it runs,
        the journal records ``authorization_withdrawn``, and the call id is free, so the
        same call may be decided again with :meth:`authorize` (its grants, revocations
        and policies as they are then).

        Raises:
            NotAuthorizedError: the call was not authorized here, or already run.
        """
        call = self.authorized.get(call_id)
        stale = self.harness.pipeline.stale(call) if call is not None else None
        await self.harness.pipeline.withdraw(self, call_id, stale or "withdrawn")

    def execution(self, call_id: str) -> AbstractAsyncContextManager[Execution]:
        """Record the run of an authorized call around the host's own execution::

            async with session.execution(auth.call_id) as run:
                run.result(await my_tool(**run.arguments))
            model_sees = run.outcome

        The start is journaled on entry (before the tool runs: R7), the end with result
        guardrails on exit; an exception that leaves the block is recorded as a failure.
        An authorization that no longer holds (see :meth:`holds`) is refused on entry,
        before the block runs.

        Raises:
            StaleAuthorizationError: the authorization expired or its grant was revoked
                (rule R12): the call did not run; decide it again.
            NotAuthorizedError: the call was not authorized here, or already recorded.
        """
        return self.harness.pipeline.execution(self, call_id)

    async def aclose(self) -> None:
        """Close the session: deny open asks, cancel running and queued calls, drop its
        session grants and event streams.

        Calls still being decided are cancelled too, and the close waits until every
        call of the session has ended (a journal write in progress is finished first):
        once it returns, no handler of this session starts, and every call has its one
        end on record (R7). A call that is already past its handler (result guardrails,
        its ``tool_finished``) is waited for, not cancelled."""
        if self.closed:
            return
        self.closed = True
        self.asks.close()
        # A handler may close its own session: its call is not cancelled (it is the one
        # closing) and not waited for (it would wait for itself); it ends on its own.
        current = this_task()
        own = [r for r in self.running if current is not None and r.task is current]
        for running in list(self.running):
            if running not in own:
                running.cancel()
        # Let cancelled calls write their tool_finished before the session is gone.
        if self._inflight > len(own):
            self._idle_at = len(own)
            self._idle = anyio.Event()
            with anyio.CancelScope(shield=True):
                await self._idle.wait()
        telemetry = self.harness.telemetry
        if telemetry is not None:  # authorized, never reported: their spans end here
            for call in self.authorized.values():
                telemetry.end(call, "cancelled", call.record.get("decision"), ())
        self.authorized.clear()
        await self._close_tools()
        self.harness.grants.end_session(self.id)
        self.harness.hub.close_session(self.id)
        self.harness.sessions.pop(self.id, None)
        with anyio.CancelScope(shield=True):
            try:
                await self.harness.journal.append(
                    JournalEvent("session_closed", self.id, None, None, {})
                )
            except Exception as exc:
                log.warning("journal failed to record session close: %r", exc)

    async def _close_tools(self) -> None:
        """Run the tools' ``on_session_close`` callbacks (each once): what a tool keeps
        for this session (its processes) ends with it. A failing one is logged; the
        others still run."""
        hooks = {id(t.on_session_close): t.on_session_close for t in self.tools.values()}
        for hook in hooks.values():
            if hook is None:
                continue
            with anyio.CancelScope(shield=True):
                try:
                    await anyio.to_thread.run_sync(hook, self.id)
                except Exception as exc:
                    log.warning("a tool's session close callback failed: %r", exc)

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
