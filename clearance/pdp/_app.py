"""The PDP server: its routes, what it refuses, and how a clearance decision is answered.

Routes (a plain ASGI application: every byte it reads and writes is here):

- ``GET /.well-known/authzen-configuration`` (with the public URL's path after it, if it
  has one): the metadata document, public (it names endpoints, nothing else).
- ``POST /access/v1/evaluation``: one evaluation request; the answer is one Decision.
- ``POST /access/v1/evaluations``: an evaluations request; the answer is
  ``{"evaluations": [Decision, ...]}`` in order (fewer under ``deny_on_first_deny`` or
  ``permit_on_first_permit``: up to the first that decides), or one Decision when the
  request holds no evaluations.

Refusals, each a status and one sentence (``text/plain``), nothing decided: no or another
bearer token (401, with ``WWW-Authenticate: Bearer``), a ``Content-Type`` other than
``application/json`` (415), a body over ``max_body`` bytes (413), a body that is not one
I-JSON object or not an AuthZEN request (400, naming what is wrong), an ``X-Request-ID``
that is not 1 to 256 visible ASCII characters (400), another path (404), another method
(405, with ``Allow``). A request's ``X-Request-ID`` is echoed on every answer to it.

A Decision is ``{"decision": true|false}``, the shape the interop scenarios compare. Its
context is sent when the request asks for it (``"options": {"decision_context": true}``,
which :class:`~clearance.policy.AuthZenEvaluator` always sends: a PEP that does not
understand a context may reject the decision, says the specification), and
``context.error`` whenever the evaluation failed. Each evaluation is decided by
``Harness.decide`` (the tool's schema, its canonical facts, then the evaluator; guardrails
belong to the enforcement point, which runs them before it asks, and are not run here), and
its full answer is:

=========  ======================================================================
allow      ``{"decision": true, "context": {"reasons": [...]}}``
ask        ``{"decision": false, "context": {"reason": "approval_required",
           "ask": "<what the ask would say>", "reasons": [...]}}``
deny       ``{"decision": false, "context": {"reason": "denied", "message", "reasons"}}``
invalid    ``{"decision": false, "context": {"reason": "invalid_arguments" |
           "unknown_tool", "message"}}`` (``unknown_tool`` also as ``error`` 404)
error      ``{"decision": false, "context": {"reason": "evaluation_error", "error":
           {"status": 500, "message"}}}``: the evaluator failed
=========  ======================================================================

Evaluation errors the evaluator recorded (a Cedar policy that erred and was skipped) are in
``context.errors``. Provenance is the caller's: the records its request sends in
``context.provenance`` (:class:`~clearance.provenance.ReportedProvenance`); an argument it
sends none for counts as from a tool (the fail-safe ledger, ``Provenance(enabled=False)``),
so a policy that reads it denies rather than trusts.

Every evaluation is journaled (with ``journal=True``, the default): a ``call_decided``
record of outcome ``answered`` in the harness's journal, naming the caller (``caller``:
the name of the token it presented and its address), in a session of the principal
(``session_created`` when first seen, one session per caller and principal, at most
``max_sessions`` kept open: the least recently used is closed). An evaluation whose record
cannot be written is answered ``false`` with ``context.error`` (R1).
"""

from __future__ import annotations

import hmac
import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

import anyio

from clearance.harness.outcomes import Decision
from clearance.harness.session import AgentDefinition, Harness, Session
from clearance.pdp._requests import (
    BadRequest,
    Evaluation,
    evaluation,
    evaluations,
    wants_context,
)
from clearance.policy.authzen_wire import (
    EVALUATION_PATH,
    EVALUATIONS_PATH,
    METADATA_PATH,
    MalformedAnswer,
    dumps,
    loads,
)
from clearance.provenance import Provenance, ReportedProvenance
from clearance.types import Principal

__all__ = ["AuthZenPdp"]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

_TEXT = b"text/plain; charset=utf-8"
_JSON = b"application/json"


class _Refused(Exception):
    """A request answered with ``status`` and one sentence."""

    def __init__(self, status: int, message: str, headers: list[tuple[bytes, bytes]]) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers


def _refuse(status: int, message: str, *headers: tuple[bytes, bytes]) -> _Refused:
    return _Refused(status, message, list(headers))


class AuthZenPdp:
    """clearance's evaluator served as an AuthZEN PDP: an ASGI application.

    Args:
        harness: decides (its registry holds the tools, its evaluator the policies).
        token: the bearer token every evaluation request must carry.
        base_url: the PDP's public URL (its identifier in the metadata); ``serve`` sets it
            to the address it listens on when not given.
        max_body: the largest request body read, in bytes.
        max_evaluations: the most evaluations one request may hold.
        journal: journal every evaluation in the harness's journal (see the module
            docstring); ``False`` for a PDP whose decisions need no record.
        token_name: what the journal calls the token callers present (``clearance pdp``:
            the environment variable it came from).
        max_sessions: sessions (one per caller and principal) kept open for journaling.

    Raises:
        ValueError: the token is shorter than 16 characters or not printable ASCII.
    """

    def __init__(
        self,
        harness: Harness,
        *,
        token: str,
        base_url: str | None = None,
        max_body: int = 1 << 20,
        max_evaluations: int = 1000,
        journal: bool = True,
        token_name: str = "token",
        max_sessions: int = 1024,
    ) -> None:
        if len(token) < 16 or not token.isascii() or not token.isprintable() or " " in token:
            raise ValueError(
                "the PDP's token must be at least 16 printable ASCII characters without spaces"
            )
        self.harness = harness
        self._expected = f"Bearer {token}".encode()
        self.base_url = base_url.rstrip("/") if base_url else None
        self.max_body = max_body
        self.max_evaluations = max_evaluations
        # The fail-safe ledger: every value from a tool (see the module docstring).
        self._provenance = Provenance(enabled=False)
        self.journal = journal
        self.token_name = token_name
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[tuple[str, str, str, str], Session] = OrderedDict()
        """The journaling sessions, by caller and principal (attributes included), least
        recently used first."""
        self._opening = anyio.Lock()

    def __repr__(self) -> str:  # never the token
        return f"AuthZenPdp({self.base_url!r})"

    # -- ASGI ---------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # lifespan and websockets: nothing to do
        echoed: list[tuple[bytes, bytes]] = []
        try:
            request_id = _header(scope, b"x-request-id")
            if request_id is not None:
                if not 1 <= len(request_id) <= 256 or not all(33 <= c <= 126 for c in request_id):
                    raise _refuse(400, "X-Request-ID must be 1 to 256 visible ASCII characters")
                echoed.append((b"x-request-id", request_id))
            status, body = await self._route(scope, receive, _caller(scope, self.token_name))
            await _respond(send, status, _JSON, dumps(body), echoed)
        except _Refused as refused:
            message = (refused.message + "\n").encode()
            await _respond(send, refused.status, _TEXT, message, echoed + refused.headers)

    async def _route(
        self, scope: Scope, receive: Receive, caller: dict[str, str]
    ) -> tuple[int, Any]:
        path, method = scope["path"], scope["method"]
        if path == self._metadata_path():
            if method != "GET":
                raise _refuse(405, "use GET", (b"allow", b"GET"))
            return 200, self.metadata()
        if path not in (EVALUATION_PATH, EVALUATIONS_PATH):
            raise _refuse(404, "no such endpoint")
        if method != "POST":
            raise _refuse(405, "use POST", (b"allow", b"POST"))
        given = _header(scope, b"authorization") or b""
        if not hmac.compare_digest(given, self._expected):
            raise _refuse(
                401,
                "a bearer token is required (Authorization: Bearer <token>)",
                (b"www-authenticate", b'Bearer realm="clearance"'),
            )
        kind = (_header(scope, b"content-type") or b"").split(b";", 1)[0].strip().lower()
        if kind != _JSON:
            raise _refuse(415, "the body must be application/json")
        try:
            request = loads(await self._body(receive))
        except MalformedAnswer as exc:
            raise _refuse(400, f"the body is not I-JSON: {exc.reason}") from None
        try:
            full = wants_context(request)
            if path == EVALUATION_PATH:
                return 200, shaped(await self._decide(evaluation(request), caller), full)
            found, semantic = evaluations(request, limit=self.max_evaluations)
            if found is None:
                return 200, shaped(await self._decide(evaluation(request), caller), full)
        except BadRequest as exc:
            raise _refuse(400, str(exc)) from None
        answers = await self._decide_all(found, semantic, caller)
        return 200, {"evaluations": [shaped(a, full) for a in answers]}

    async def _body(self, receive: Receive) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _refuse(400, "the client went away")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                raise _refuse(413, f"the body is larger than {self.max_body} bytes")
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    # -- deciding -----------------------------------------------------------------------

    async def _decide_all(
        self, found: list[Evaluation], semantic: str, caller: dict[str, str]
    ) -> list[dict[str, Any]]:
        answers = []
        for item in found:
            answer = await self._decide(item, caller)
            answers.append(answer)
            if (semantic == "deny_on_first_deny" and not answer["decision"]) or (
                semantic == "permit_on_first_permit" and answer["decision"]
            ):
                break
        return answers

    async def _decide(self, item: Evaluation, caller: dict[str, str]) -> dict[str, Any]:
        if item.mismatch is not None:
            return {
                "decision": False,
                "context": {
                    "reason": "invalid_request",
                    "message": item.mismatch,
                    "error": {"status": 400, "message": item.mismatch},
                },
            }
        provenance = (
            ReportedProvenance(item.provenance, trust=self.harness.trust)
            if item.provenance
            else self._provenance
        )
        try:
            session = await self._session(item.principal, caller) if self.journal else None
            decision = await self.harness.decide(
                principal=item.principal,
                tool=item.tool,
                arguments=item.arguments,
                provenance=provenance,
                with_provenance=False,
                session=session,
                caller=caller if session is not None else None,
            )
        except Exception as exc:  # a closed harness, a failed journal, a bug: not allowed
            message = f"the PDP failed to decide ({type(exc).__name__})"
            return {
                "decision": False,
                "context": {
                    "reason": "evaluation_error",
                    "error": {"status": 500, "message": message},
                },
            }
        return answer_of(decision)

    async def _session(self, principal: Principal, caller: dict[str, str]) -> Session:
        """The open session of ``caller`` and ``principal`` (its attributes and parents
        as this request gives them), opened when first needed."""
        key = (
            json.dumps(caller, sort_keys=True),
            str(principal),
            json.dumps(dict(principal.attrs), sort_keys=True, default=str),
            json.dumps([list(p) for p in principal.parents]),
        )
        async with self._opening:
            session = self._sessions.get(key)
            if session is not None and not session.closed:
                self._sessions.move_to_end(key)
                return session
            session = await self.harness.create_session(
                principal=principal, agent=AgentDefinition("pdp")
            )
            self._sessions[key] = session
            while len(self._sessions) > self.max_sessions:
                _, oldest = self._sessions.popitem(last=False)
                await oldest.aclose()
            return session

    # -- metadata -----------------------------------------------------------------------

    def _metadata_path(self) -> str:
        prefix = urlsplit(self.base_url).path.rstrip("/") if self.base_url else ""
        return METADATA_PATH + prefix

    def metadata(self) -> dict[str, Any]:
        """The metadata document: this PDP's identifier and its two endpoints."""
        base = self.base_url or ""
        return {
            "policy_decision_point": base,
            "access_evaluation_endpoint": base + EVALUATION_PATH,
            "access_evaluations_endpoint": base + EVALUATIONS_PATH,
        }


def shaped(answer: dict[str, Any], full: bool) -> dict[str, Any]:
    """``answer`` as sent: whole when the request asked for the context, else the bare
    decision, with ``context.error`` when the evaluation failed."""
    if full:
        return answer
    context = answer.get("context", {})
    if "error" in context:
        return {"decision": answer["decision"], "context": {"error": context["error"]}}
    return {"decision": answer["decision"]}


def answer_of(decision: Decision) -> dict[str, Any]:
    """A clearance decision as an AuthZEN Decision (the table in the module docstring)."""
    context: dict[str, Any] = {}
    if decision.reasons:
        context["reasons"] = list(decision.reasons)
    verdict = decision.verdict or {}
    errors = verdict.get("errors") if isinstance(verdict, dict) else None
    outcome = decision.outcome
    if outcome == "allow":
        if errors:
            context["errors"] = list(errors)
        return {"decision": True, "context": context} if context else {"decision": True}
    if outcome == "ask":
        context["reason"] = "approval_required"
        context["ask"] = decision.message or True
    elif outcome == "deny":
        context["reason"] = "denied"
        if decision.message:
            context["message"] = decision.message
    elif outcome == "error":
        context["reason"] = "evaluation_error"
        context["error"] = {"status": 500, "message": decision.message or "the evaluator failed"}
    elif decision.stage == "resolve":
        context["reason"] = "unknown_tool"
        context["message"] = decision.message or "no such tool"
        context["error"] = {"status": 404, "message": context["message"]}
    else:  # invalid arguments, or a fact that cannot be canonicalized
        context["reason"] = "invalid_arguments"
        if decision.message:
            context["message"] = decision.message
    if errors:
        context["errors"] = list(errors)
    return {"decision": False, "context": context}


def _caller(scope: Scope, token_name: str) -> dict[str, str]:
    """Who asks, as the journal names it: the token it presented (only one opens this
    PDP) and its network address."""
    client = scope.get("client")
    address = str(client[0]) if client else "unknown"
    return {"token": token_name, "address": address}


def _header(scope: Scope, name: bytes) -> bytes | None:
    found = [value for key, value in scope["headers"] if key.lower() == name]
    if len(found) > 1:
        raise _refuse(400, f"the {name.decode()} header is given more than once")
    return found[0] if found else None


async def _respond(
    send: Send, status: int, kind: bytes, body: bytes, headers: list[tuple[bytes, bytes]]
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", kind),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
