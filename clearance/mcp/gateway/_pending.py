"""Asks of a client that cannot be asked: the call comes back pending, a person answers it
elsewhere, the client calls again.

With ``ask_fallback = "pending"`` (the default), a call from a client that cannot answer an
elicitation (no elicitation capability, ``[gateway] elicitation = false``, or a connection
that cannot carry the request) goes through ``session.authorize(..., wait=False)``:

- allowed (by the evaluator, a grant, or an answer given since an earlier try): clearance
  runs it (``session.run_authorized``: queue, limits, journal, result guardrails) and the
  client gets the usual result;
- denied (a policy, or a person who answered ``deny``): the usual denied result;
- pending: an ``isError`` result whose text says what waits (the ask id, the tool, its
  arguments, deciding ones first), that a person answers it, and that calling the tool
  again with the same arguments runs it once it is approved. It never says how to answer
  (rule R13: nothing the model sees tells it how): the person learns that from the
  gateway's log (``clearance.mcp``, on stderr, which the model never sees), which names
  the ``clearance asks`` commands, and from ``clearance inbox``.

The client's next call is a new request with a new call id: the ask is found again by its
principal, the tool and the call's canonical arguments (``resume_key``), so an answer
authorizes that call only (``allow_once``: once), never another tool's or other arguments,
and never another principal's.
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import mcp_types

from clearance._text import printable
from clearance.harness.ask_display import ask_lines, deciding_fields
from clearance.harness.outcomes import Authorization
from clearance.harness.session import Harness, Session
from clearance.harness.tools import Tool
from clearance.mcp.gateway._convert import mcp_result, relay_to
from clearance.mcp.sources import progress_relay, reset_progress_relay

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

__all__ = ["PendingCalls", "resume_key"]

_log = logging.getLogger("clearance.mcp")

_WIDTH = 200
"""The longest line an argument that does not decide the call gets (``clearance asks show``
shows it whole)."""


def resume_key(tool: Tool) -> str:
    """What a client's call of ``tool`` is found again by when it is tried again (with the
    principal and the canonical arguments, which the ask store matches too)."""
    return "mcp:" + tool.qualified_name


class PendingCalls:
    """Calls whose asks wait in the ask store for a person (see the module docstring).

    Args:
        harness: the gateway's harness (its ask store holds the asks).
        show_ask_store: name the ask store's file (``--db PATH``) in the commands the log
            gives; ``False`` when ``clearance asks`` finds it on its own.
        is_sessionless: whether a clearance session serves requests without an MCP
            session (an ``allow_session`` answer there counts once).
    """

    def __init__(
        self,
        harness: Harness,
        *,
        show_ask_store: bool,
        is_sessionless: Callable[[str], bool],
    ) -> None:
        self.harness = harness
        self.show_ask_store = show_ask_store
        self._is_sessionless = is_sessionless

    async def call(
        self,
        session: Session,
        ctx: ServerRequestContext[Any, Any],
        tool: Tool,
        arguments: Any,
        *,
        call_id: str,
        context: Mapping[str, Any],
    ) -> mcp_types.CallToolResult:
        """Authorize the call without waiting for a person; run it when allowed."""
        auth = await session.authorize(
            tool.model_alias,
            arguments,
            call_id=call_id,
            context=context,
            wait=False,
            resume_key=resume_key(tool),
        )
        if auth.pending:
            self._tell_the_person(auth)
            return self.result(auth)
        if not auth.allowed:
            assert auth.outcome is not None
            return mcp_result(auth.outcome)
        if auth.grant is not None and self._is_sessionless(session.id):
            self._no_session_grant(session, auth)
        relay = progress_relay(relay_to(ctx.session))
        try:
            outcome = await session.run_authorized(auth.call_id)
        finally:
            reset_progress_relay(relay)
        return mcp_result(outcome)

    def _no_session_grant(self, session: Session, auth: Authorization) -> None:
        """Requests without an MCP session share one clearance session for the gateway's
        lifetime: an ``allow_session`` answer there would act like ``allow_always``, so its
        grant is dropped and the answer counts for this call only (as an elicited
        ``allow_session`` does there)."""
        grants = self.harness.grants
        for grant in grants.list(principal=str(session.principal), tool=auth.qualified_name):
            if grant.grant_id == auth.grant and grant.kind == "session":
                grants.revoke(grant.grant_id)
                # The person's answer still allows this call, once: it runs as an
                # allow_once would, not on the grant just dropped (which run_authorized
                # would find revoked, rule R12).
                held = session.authorized.get(auth.call_id)
                if held is not None and held.grant is not None:
                    held.grant = None
                _log.info(
                    "allow_session for %s has no MCP session to live in; allowed once",
                    auth.call_id,
                )

    def result(self, auth: Authorization) -> mcp_types.CallToolResult:
        """The result of a call whose ask waits for a person."""
        return mcp_types.CallToolResult(
            content=[mcp_types.TextContent(type="text", text=self.message(auth))],
            is_error=True,
            _meta={
                "clearance/outcome": {
                    "status": "pending",
                    "call_id": auth.call_id,
                    "decision": "ask",
                    "reasons": list(auth.reasons),
                    "correlation_id": auth.correlation_id,
                    "ask_id": auth.ask_id,
                }
            },
        )

    def message(self, auth: Authorization) -> str:
        """What the client (its model, then the user) is told: what waits, that a person
        answers it, and that the same call runs once it is approved; never how to answer
        it (rule R13)."""
        ask_id = printable(auth.ask_id or "")
        tool = printable(auth.tool)
        stored = self.harness.ask_store.get(auth.ask_id) if auth.ask_id else None
        lines = [
            f"Not run yet: {tool} needs a person's approval (ask {ask_id}).",
            "Tell the user that this call waits for their approval. Only the user can give "
            "it, outside this conversation; do not try to approve it.",
        ]
        if stored is not None:
            arguments = dict(stored.arguments)
            shown = ask_lines(arguments, deciding_fields(stored), width=_WIDTH)
            lines += [
                f"Why approval is needed: {printable(stored.reason)}",
                "Arguments:",
                *(f"  {line}" for line in shown or ["(no arguments)"]),
            ]
        lines.append(
            f"Once it is approved, call {tool} again with the same arguments: it runs then "
            "(once, for an allow_once approval). Until then the call asks again and does not run."
        )
        return "\n".join(lines)

    def _tell_the_person(self, auth: Authorization) -> None:
        """Log (for the person running the gateway, never the model) how the ask is
        answered."""
        ask_id = printable(auth.ask_id or "")
        store = self.harness.ask_store
        if not store.shared:
            _log.warning(
                "ask %s (%s) waits; this gateway keeps its asks in memory: only its own "
                "process can answer it (harness.answer_ask)",
                ask_id,
                printable(auth.tool),
            )
            return
        db = ""
        location = getattr(store, "location", None)  # a file's absolute path, or a URL
        if self.show_ask_store and isinstance(location, str):
            db = " --db " + printable(shlex.quote(location))
        _log.warning(
            "ask %s (%s) waits for a person: clearance asks show %s%s, then "
            "clearance asks approve|deny %s%s (or clearance inbox%s)",
            ask_id,
            printable(auth.tool),
            ask_id,
            db,
            ask_id,
            db,
            db,
        )
