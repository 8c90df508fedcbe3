"""Asks through the gateway: sent to the MCP client as elicitations, or answered by the
fallback.

When the client can answer elicitations, an ask is sent as one (a form: allow once, for
the session, always, or deny; and, when the ask offers two or more grant scopes, which
calls a session or permanent grant covers: this exact call, every path under its
directory, any arguments, as the terminal prompt offers them): as an ``elicitation/create`` request on a
handshake-era (2025) connection (:class:`Direct`), or as an ``input_required`` result
that the client answers by retrying the call on a 2026-07-28 connection (:class:`Rounds`).
A client that cannot elicit gets the configured fallback: ``pending`` (the default) puts
the call through :mod:`._pending` instead (the ask waits in the ask store for a person, the
client calls again), any other value answers the ask at once. Anything but an explicit
allow from the client denies.
"""

from __future__ import annotations

import contextvars
import dataclasses
import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import anyio
import mcp_types
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import TypeAdapter, ValidationError

from clearance._text import printable
from clearance.harness.approvals import ANSWERS, Answer, PermissionAsk, PermissionDecision
from clearance.harness.ask_display import ask_lines, deciding_fields
from clearance.harness.grants import GrantScope
from clearance.harness.pipeline import CallOutcome
from clearance.harness.session import Session
from clearance.mcp.gateway._config import AskFallback
from clearance.mcp.gateway._convert import mcp_result
from clearance.mcp.sources import progress_relay, reset_progress_relay
from clearance.types import Principal

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext
    from mcp.server.session import ServerSession

__all__ = [
    "ASK_KEY",
    "ASK_SCHEMA",
    "Asks",
    "Direct",
    "Rounds",
    "SCOPE_FIELD",
    "ask_message",
    "ask_schema",
    "decision_of",
    "scope_choices",
]

_log = logging.getLogger("clearance.mcp")

ASK_KEY = "clearance_permission"
"""The key of the ask among an ``input_required`` result's input requests."""

_CHOICES: tuple[tuple[str, str], ...] = (
    ("allow_once", "Allow once"),
    ("allow_session", "Allow for this session"),
    ("allow_always", "Always allow"),
    ("deny", "Deny"),
)

ASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {
            "type": "string",
            "title": "Decision",
            "description": "Allow this tool call?",
            "oneOf": [{"const": value, "title": title} for value, title in _CHOICES],
            "default": "deny",
        }
    },
    "required": ["decision"],
}
"""The elicitation form of an ask that offers one grant scope or none: one choice."""

SCOPE_FIELD = "scope"
"""The form field naming the grant's scope, among the ask's suggestions."""
_WIDENS = ("allow_session", "allow_always")
"""The answers that create a grant, so whose scope matters."""


def scope_choices(ask: PermissionAsk) -> list[tuple[str, GrantScope]]:
    """The values the form's scope field offers, each with the suggestion it stands for:
    the scope's kind (``exact``, ``prefix``, ``tool``), numbered when two suggestions share
    a kind (``prefix-2``)."""
    kinds = [scope.kind for scope in ask.suggestions]
    return [
        (scope.kind if kinds.count(scope.kind) == 1 else f"{scope.kind}-{n}", scope)
        for n, scope in enumerate(ask.suggestions, 1)
    ]


def ask_schema(ask: PermissionAsk) -> dict[str, Any]:
    """The elicitation form of ``ask``: :data:`ASK_SCHEMA`, plus a scope field when the ask
    offers two or more scopes (titled with each scope's description: ``this exact call``,
    ``path under src/``, ``any arguments``), the exact call by default."""
    choices = scope_choices(ask)
    if len(choices) < 2:
        return ASK_SCHEMA
    decision = ASK_SCHEMA["properties"]["decision"]
    return {
        **ASK_SCHEMA,
        "properties": {
            "decision": decision,
            SCOPE_FIELD: {
                "type": "string",
                "title": "The grant covers",
                "description": "For 'Allow for this session' and 'Always allow': which "
                "calls of this tool the grant lets through without asking again.",
                "oneOf": [
                    {"const": value, "title": printable(scope.description)}
                    for value, scope in choices
                ],
                "default": choices[0][0],
            },
        },
    }


_ASK_WIDTH = 2000
"""The longest line an argument that does not decide what the call does gets in an ask."""

_ELICIT_RESULT = TypeAdapter(mcp_types.ElicitResult)


def ask_message(ask: PermissionAsk) -> str:
    """The elicitation's text: the tool, why it asks, then the arguments as
    :func:`~clearance.harness.ask_display.ask_lines` lays them out for every approval
    surface: the fields that decide what the call does first and whole (however long the
    rest), then the others, long values elided in the middle with both ends kept."""
    lines = ask_lines(ask.arguments, deciding_fields(ask), width=_ASK_WIDTH, notes=ask.notes)
    return "\n".join(
        [
            f"Allow {printable(ask.model_alias)}?",
            f"Why approval is needed: {printable(ask.reason)}",
            *(lines or ["(no arguments)"]),
        ]
    )


def decision_of(response: Any, ask: PermissionAsk | None = None) -> PermissionDecision:
    """An elicitation answer to ``ask`` as a decision; anything but an explicit allow
    denies. An allow for the session or always may name a scope: it must be one of the
    ask's (see :func:`scope_choices`), or the answer denies; without one the grant covers
    the exact call."""
    if response is None:
        return PermissionDecision("deny", message="the client sent no answer; denied")
    try:
        result = (
            response
            if isinstance(response, mcp_types.ElicitResult)
            else _ELICIT_RESULT.validate_python(
                response.model_dump(by_alias=True) if hasattr(response, "model_dump") else response
            )
        )
    except ValidationError:
        return PermissionDecision("deny", message="the client's answer was not understood; denied")
    if result.action != "accept" or not result.content:
        return PermissionDecision("deny", message=f"the user chose {result.action}; denied")
    choice = result.content.get("decision")
    if choice not in ANSWERS:
        return PermissionDecision("deny", message="the client's answer was not understood; denied")
    scope: GrantScope | None = None
    named = result.content.get(SCOPE_FIELD)
    if choice in _WIDENS and named is not None:
        offered = dict(scope_choices(ask)) if ask is not None else {}
        found = offered.get(named) if isinstance(named, str) else None
        if found is None:
            return PermissionDecision(
                "deny", message="the client's answer named a scope the ask did not offer; denied"
            )
        scope = found
    return PermissionDecision(
        cast(Answer, choice),
        scope=scope,
        message="denied by the user" if choice == "deny" else None,
        decided_by="mcp-elicitation",
    )


class _Exchange:
    """How the asks of one call reach its client."""

    async def answer(self, ask: PermissionAsk) -> PermissionDecision:
        raise NotImplementedError


_EXCHANGE: contextvars.ContextVar[_Exchange | None] = contextvars.ContextVar(
    "clearance_gateway_exchange", default=None
)


class Asks:
    """The gateway's answerer of asks (every gateway session's ``on_permission_ask``).

    Args:
        fallback: what an ask becomes when the client cannot elicit (``pending``: see
            :mod:`._pending`; here, where a call cannot be left pending, it denies).
        elicitation: send asks to clients that support elicitation.
        is_sessionless: whether a clearance session serves requests without an MCP
            session (an ``allow_session`` there is given as ``allow_once``).
    """

    def __init__(
        self,
        *,
        fallback: AskFallback,
        elicitation: bool,
        is_sessionless: Callable[[str], bool],
    ) -> None:
        self.fallback_answer: AskFallback = fallback
        self.elicitation = elicitation
        self._is_sessionless = is_sessionless
        self._waiting: dict[str, Rounds] = {}
        """Calls waiting for the client to retry with an answer, by their request state."""

    async def on_ask(self, ask: PermissionAsk) -> PermissionDecision:
        """Answer ``ask`` through the exchange of the call that asked."""
        exchange = _EXCHANGE.get()
        if exchange is None:  # a call that did not come through this gateway
            decision = self._fallback_decision(ask)
        else:
            decision = await exchange.answer(ask)
        if decision.decision == "allow_session" and self._is_sessionless(ask.session_id):
            # Requests without an MCP session share one clearance session for the
            # gateway's lifetime; a "session" grant there would act like "always".
            decision = dataclasses.replace(
                decision,
                decision="allow_once",
                message="allow_session has no session to live in here; allowed once",
            )
        return decision

    def can_elicit(self, client: ServerSession) -> bool:
        """Whether asks may be sent to ``client`` as elicitations."""
        if not self.elicitation:
            return False
        caps = client.client_capabilities
        if caps is None or caps.elicitation is None:
            return False
        # An empty elicitation capability means form mode (the only mode before URL mode).
        return caps.elicitation.form is not None or caps.elicitation.url is None

    @property
    def pending(self) -> bool:
        """Whether the asks of a client that cannot be asked are left pending."""
        return self.fallback_answer == "pending"

    def reachable(self, ctx: ServerRequestContext[Any, Any]) -> bool:
        """Whether an ask of a call made through ``ctx`` can be put to its client: as an
        ``input_required`` result on a 2026-07-28 connection, else as an
        ``elicitation/create`` request (which :class:`Direct` checks again when it asks)."""
        if not self.can_elicit(ctx.session):
            return False
        return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS or ctx.session.can_send_request

    def fallback(self, ask: PermissionAsk) -> PermissionDecision:
        """The answer for a client that cannot be asked."""
        return self._fallback_decision(ask)

    def _fallback_decision(self, ask: PermissionAsk) -> PermissionDecision:
        # "pending" is not an answer: a call that reaches here cannot be left pending
        # (it came another way than the gateway's pending path), so it is denied.
        if self.fallback_answer in ("deny", "pending"):
            return PermissionDecision(
                "deny",
                message=f"{printable(ask.model_alias)} needs approval and this MCP client "
                "cannot be asked; denied",
            )
        return PermissionDecision(cast(Answer, self.fallback_answer))

    @contextmanager
    def direct(self, ctx: ServerRequestContext[Any, Any]) -> Iterator[None]:
        """Send the asks of calls made inside this block to ``ctx``'s client as
        ``elicitation/create`` requests (see :class:`Direct`)."""
        token = _EXCHANGE.set(Direct(self, ctx))
        try:
            yield
        finally:
            _EXCHANGE.reset(token)

    async def resume(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: mcp_types.CallToolRequestParams,
        *,
        principal: Principal,
        session_key: str | None,
        arguments_key: str,
    ) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult:
        """A client's retry of a call that asked: deliver its answer, wait for what comes
        next. The retry must come from the same principal and MCP session, for the same
        tool and arguments, with the request state it was given.

        Raises:
            MCPError: the request state is unknown or expired, or the retry differs.
        """
        state = params.request_state
        rounds = self._waiting.get(state) if isinstance(state, str) else None
        if (
            rounds is None
            or rounds.principal != principal
            or rounds.session_key != session_key
            or rounds.tool_name != params.name
            or rounds.arguments_key != arguments_key
        ):
            raise MCPError(code=mcp_types.INVALID_PARAMS, message="Invalid or expired requestState")
        del self._waiting[rounds.token]
        response = (params.input_responses or {}).get(ASK_KEY)
        rounds.deliver(decision_of(response, rounds.ask))
        return await rounds.wait(ctx)


class Direct(_Exchange):
    """A call on a handshake-era connection: asks go out as ``elicitation/create``."""

    def __init__(self, asks: Asks, ctx: ServerRequestContext[Any, Any]) -> None:
        self.asks = asks
        self.ctx = ctx

    async def answer(self, ask: PermissionAsk) -> PermissionDecision:
        session = self.ctx.session
        if not (self.asks.can_elicit(session) and session.can_send_request):
            return self.asks.fallback(ask)
        # An elicitation that fails raises: the pipeline then denies (rule R1).
        result = await session.elicit_form(
            ask_message(ask), ask_schema(ask), related_request_id=self.ctx.request_id
        )
        return decision_of(result, ask)


@dataclass(eq=False)
class Rounds(_Exchange):
    """A call on a 2026-07-28 connection: asks go out as ``input_required`` results.

    The call runs in a background task (:meth:`run`) that outlives the request; each
    request of the call (the first, then each retry with an answer) waits in :meth:`wait`
    for the call to end or to ask.
    """

    asks: Asks
    principal: Principal
    session_key: str | None
    tool_name: str
    arguments_key: str
    token: str
    outcome: CallOutcome | None = None
    failed: bool = False
    ask: PermissionAsk | None = None
    answer_value: PermissionDecision | None = None
    answered: anyio.Event = field(default_factory=anyio.Event)
    wake: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    client: ServerSession | None = None

    async def run(
        self,
        session: Session,
        alias: str,
        arguments: Any,
        call_id: str,
        context: Mapping[str, Any],
    ) -> None:
        token = _EXCHANGE.set(self)
        relay = progress_relay(self._relay)
        try:
            with self.scope:
                self.outcome = await session.call_tool(
                    alias, arguments, call_id=call_id, context=context
                )
        except Exception as exc:
            _log.warning("gateway call %s failed: %r", call_id, exc)
            self.failed = True
        finally:
            reset_progress_relay(relay)
            _EXCHANGE.reset(token)
            self.asks._waiting.pop(self.token, None)
            self.done.set()
            self.wake.set()

    async def _relay(self, progress: float, total: float | None, message: str | None) -> None:
        if self.client is not None:
            await self.client.report_progress(progress, total, message)

    async def answer(self, ask: PermissionAsk) -> PermissionDecision:
        self.ask = ask
        self.answered = anyio.Event()
        self.wake.set()
        # The harness's ask_timeout bounds this wait; an unanswered ask is then denied.
        await self.answered.wait()
        value = self.answer_value
        assert value is not None
        return value

    def deliver(self, decision: PermissionDecision) -> None:
        self.answer_value = decision
        self.ask = None
        self.answered.set()

    async def wait(
        self, ctx: ServerRequestContext[Any, Any]
    ) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult:
        """Wait for the call to end or to ask; the answer for this request."""
        self.client = ctx.session
        try:
            while True:
                wake = self.wake
                if self.done.is_set():
                    if self.outcome is None:
                        raise MCPError(code=mcp_types.INTERNAL_ERROR, message="the call failed")
                    return mcp_result(self.outcome)
                if self.ask is not None and not self.answered.is_set():
                    self.asks._waiting[self.token] = self
                    return mcp_types.InputRequiredResult(
                        input_requests={
                            ASK_KEY: mcp_types.ElicitRequest(
                                params=mcp_types.ElicitRequestFormParams(
                                    message=ask_message(self.ask),
                                    requested_schema=ask_schema(self.ask),
                                )
                            )
                        },
                        request_state=self.token,
                    )
                await wake.wait()
                self.wake = anyio.Event()
        except anyio.get_cancelled_exc_class():
            # The client cancelled this request (or went away): cancel the call too.
            self.scope.cancel()
            raise
        finally:
            self.client = None
