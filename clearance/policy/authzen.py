"""Decide with the PDP an organization already runs: an OpenID AuthZEN enforcement point.

:class:`AuthZenEvaluator` turns each call into an AuthZEN Authorization API 1.0 evaluation
request (the mapping is in :mod:`clearance.policy.authzen_wire`), POSTs it to the PDP's
``/access/v1/evaluation`` over a pooled HTTPS connection, and maps the Decision back:
``true`` allows, ``false`` denies, and a context field the configuration names
(``ask_field``) asks a person. :meth:`AuthZenEvaluator.evaluate_many` sends many calls in
one ``/access/v1/evaluations`` request (``clearance replay`` uses it through
:class:`DecisionBatch`).

Fail closed (R1)
----------------
The evaluator never raises for what the PDP does: a PDP that cannot be reached, times out,
resets the connection, answers a status other than 200, or answers anything but a Decision
(not JSON, a member named twice, ``"decision": "yes"``, an ``evaluations`` list of the
wrong length) gives a **deny** verdict whose ``errors`` name the PDP and the cause
(``authzen https://pdp.example.com: answered HTTP 500``), so that the journal's
``call_decided`` record says who failed and how. One exchange takes at most ``timeout``
seconds in all, and nothing is retried: a call is decided by one answer or denied.

The token is read from the environment (``token_env``, default
``CLEARANCE_AUTHZEN_TOKEN``) when the evaluator is built; the bundled shell tool never
passes the environment on, so an agent cannot read it there. Without one, no
``Authorization`` header is sent, and a PDP that wants one answers 401: every call is
denied, and the journal says the variable was not set.
"""

from __future__ import annotations

import contextvars
import dataclasses
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import anyio

from clearance.policy._authzen_http import PdpClient, PdpFailure
from clearance.policy.authzen_wire import (
    EVALUATION_PATH,
    EVALUATIONS_PATH,
    MalformedAnswer,
    dumps,
    evaluation_request,
    metadata_url,
    pdp_url,
    verdict_from_decision,
)
from clearance.policy.base import AuthzRequest, Evaluator, Verdict

__all__ = ["DEFAULT_TOKEN_ENV", "AuthZenEvaluator", "DecisionBatch"]

DEFAULT_TOKEN_ENV = "CLEARANCE_AUTHZEN_TOKEN"
"""The environment variable the bearer token is read from unless another is named."""

_OPTIONS = {"decision_context": True}
"""Sent with every request: ``clearance pdp`` then answers each Decision's context
(reasons, the ask); another PDP ignores what it does not know, as the specification says."""


@dataclass(frozen=True, slots=True)
class _Endpoints:
    evaluation: str
    evaluations: str | None


class AuthZenEvaluator(Evaluator):
    """Decides each call with an AuthZEN PDP (see the module docstring).

    Args:
        url: the PDP's URL (its identifier): ``https://...``, or ``http://`` to this
            machine only. The endpoints are its default paths below it, or, with
            ``discovery``, those its metadata document names.
        token: the bearer token; default: the value of the environment variable
            ``token_env``.
        token_env: where the token is read from when ``token`` is not given.
        timeout: seconds one decision (one exchange with the PDP) may take in all.
        ask_field: the Decision context member that, when set (``true``, a string: the
            reason shown, or an object), asks a person instead of allowing or denying.
            None: a PDP cannot ask (``clearance pdp`` answers asks in ``"ask"``).
        send_arguments: send the call's canonical arguments (``context.arguments``). The
            PDP is the authority, as the local evaluator is, so it sees sensitive ones too.
        send_provenance: send each argument's provenance record (``context.provenance``).
        ca_file: a PEM file of the CAs that sign the PDP's certificate.
        discovery: read the PDP's metadata (``/.well-known/authzen-configuration``) for
            its endpoints before the first decision, and check that it names this PDP.
        max_connections: connections kept open to the PDP at most.
        batch_size: evaluations sent in one ``evaluations`` request at most.

    Raises:
        MissingExtraError: the ``authzen`` extra (h11) is not installed.
        ValueError: an option is out of range, or the URL is not one a token may go to.
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        token_env: str = DEFAULT_TOKEN_ENV,
        timeout: float = 2.0,
        ask_field: str | None = None,
        send_arguments: bool = True,
        send_provenance: bool = False,
        ca_file: str | os.PathLike[str] | None = None,
        discovery: bool = False,
        max_connections: int = 16,
        batch_size: int = 64,
    ) -> None:
        self.url = pdp_url(url)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):
            raise ValueError("timeout must be a number of seconds")
        if not 0 < timeout <= 300:
            raise ValueError("timeout must be more than 0 and at most 300 seconds")
        if not 1 <= max_connections <= 1024:
            raise ValueError("max_connections must be between 1 and 1024")
        if not 1 <= batch_size <= 1000:
            raise ValueError("batch_size must be between 1 and 1000")
        if ask_field is not None and (not isinstance(ask_field, str) or not ask_field):
            raise ValueError("ask_field must be a non-empty string (or None)")
        if token is None:
            token = os.environ.get(token_env) or None
        if token is not None and (
            not token.isascii() or not token.isprintable() or " " in token.strip()
        ):
            raise ValueError(f"the token ({token_env}) must be printable ASCII without spaces")
        self.token_env = token_env
        self.timeout = float(timeout)
        self.ask_field = ask_field
        self.send_arguments = send_arguments
        self.send_provenance = send_provenance
        self.discovery = discovery
        self.batch_size = batch_size
        self._http = PdpClient(
            token=token.strip() if token else None,
            timeout=self.timeout,
            ca_file=os.fspath(ca_file) if ca_file is not None else None,
            max_connections=max_connections,
        )
        self._endpoints: _Endpoints | None = (
            None
            if discovery
            else _Endpoints(self.url + EVALUATION_PATH, self.url + EVALUATIONS_PATH)
        )

    name = "authzen"

    def __repr__(self) -> str:  # never the token
        return f"AuthZenEvaluator({self.url!r})"

    async def __aenter__(self) -> AuthZenEvaluator:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connections of the running event loop (``build_harness`` does it
        when the harness closes)."""
        await self._http.aclose()

    # -- deciding -----------------------------------------------------------------------

    async def evaluate(self, request: AuthzRequest) -> Verdict:
        """Decide one call with one evaluation request (or, inside a
        :class:`DecisionBatch`, with the batch's request)."""
        try:
            body = evaluation_request(
                request, arguments=self.send_arguments, provenance=self.send_provenance
            )
            payload = dumps({**body, "options": _OPTIONS})
        except ValueError as exc:
            return self._failed(PdpFailure(f"the call cannot be sent: {exc}"))
        member = _MEMBER.get()
        if member is not None and member.batch.evaluator is self and not member.queued:
            return await member.queue(body)
        try:
            endpoints = await self._found()
            answer = await self._http.exchange("POST", endpoints.evaluation, payload)
            return self._read(answer)
        except PdpFailure as failure:
            return self._failed(failure)
        except MalformedAnswer as exc:
            return self._failed(PdpFailure(f"answered something that is not a Decision: {exc}"))

    async def evaluate_many(self, requests: Sequence[AuthzRequest]) -> list[Verdict]:
        """Decide several calls with as few ``evaluations`` requests as ``batch_size``
        allows (one evaluation request each when the PDP's metadata names no
        ``evaluations`` endpoint). A call that cannot be sent, or a batch the PDP does not
        answer, is denied like a single call."""
        verdicts: list[Verdict | None] = [None] * len(requests)
        bodies: list[tuple[int, dict[str, Any]]] = []
        for index, request in enumerate(requests):
            try:
                body = evaluation_request(
                    request, arguments=self.send_arguments, provenance=self.send_provenance
                )
                dumps(body)  # each one is checked alone: one bad call denies only itself
                bodies.append((index, body))
            except ValueError as exc:
                verdicts[index] = self._failed(PdpFailure(f"the call cannot be sent: {exc}"))
        decided = await self._decide_bodies([body for _, body in bodies])
        for (index, _), verdict in zip(bodies, decided, strict=True):
            verdicts[index] = verdict
        return [v for v in verdicts if v is not None]

    async def _decide_bodies(self, bodies: Sequence[dict[str, Any]]) -> list[Verdict]:
        """One verdict per evaluation request body, in order."""
        out: list[Verdict] = []
        for start in range(0, len(bodies), self.batch_size):
            chunk = bodies[start : start + self.batch_size]
            try:
                endpoints = await self._found()
            except PdpFailure as failure:
                out.extend(self._failed(failure) for _ in chunk)
                continue
            if endpoints.evaluations is None or len(chunk) == 1:
                out.extend([await self._decide_one(endpoints.evaluation, body) for body in chunk])
                continue
            out.extend(await self._decide_batch(endpoints.evaluations, chunk))
        return out

    async def _decide_one(self, url: str, body: dict[str, Any]) -> Verdict:
        try:
            answer = await self._http.exchange("POST", url, dumps({**body, "options": _OPTIONS}))
            return self._read(answer)
        except PdpFailure as failure:
            return self._failed(failure)
        except MalformedAnswer as exc:
            return self._failed(PdpFailure(f"answered something that is not a Decision: {exc}"))

    async def _decide_batch(self, url: str, chunk: Sequence[dict[str, Any]]) -> list[Verdict]:
        """One ``evaluations`` request (``execute_all``: every evaluation answered, in
        order); a subject shared by all is sent once, as the request's default."""
        items = [dict(body) for body in chunk]
        request: dict[str, Any] = {"options": {"evaluations_semantic": "execute_all", **_OPTIONS}}
        first = items[0]["subject"]
        if all(item["subject"] == first for item in items):
            request["subject"] = first
            for item in items:
                del item["subject"]
        request["evaluations"] = items
        try:
            answer = await self._http.exchange("POST", url, dumps(request))
            if not isinstance(answer, dict) or not isinstance(answer.get("evaluations"), list):
                raise MalformedAnswer("an evaluations answer must hold an 'evaluations' list")
            decisions = answer["evaluations"]
            if len(decisions) != len(items):
                raise MalformedAnswer(
                    f"{len(items)} evaluations were asked and {len(decisions)} answered"
                )
            return [self._read(d) for d in decisions]
        except PdpFailure as failure:
            return [self._failed(failure) for _ in items]
        except MalformedAnswer as exc:
            malformed = PdpFailure(f"answered something that is not a list of Decisions: {exc}")
            return [self._failed(malformed) for _ in items]

    # -- endpoints ----------------------------------------------------------------------

    async def _found(self) -> _Endpoints:
        """The endpoints: the default paths, or (``discovery``) the metadata's, read once.

        Raises:
            PdpFailure: the metadata cannot be read or does not describe this PDP (tried
                again at the next decision).
        """
        if self._endpoints is not None:
            return self._endpoints
        where = metadata_url(self.url)
        try:
            document = await self._http.exchange("GET", where)
        except PdpFailure as failure:
            raise PdpFailure(f"its metadata: {failure.cause}", failure.detail) from None
        self._endpoints = self._read_metadata(document)
        return self._endpoints

    def _read_metadata(self, document: Any) -> _Endpoints:
        if not isinstance(document, dict):
            raise PdpFailure("its metadata is not a JSON object")
        named = document.get("policy_decision_point")
        if not isinstance(named, str) or named.rstrip("/") != self.url:
            # The specification's defence against a PDP mix-up: never use another's.
            raise PdpFailure("its metadata names another policy_decision_point")
        found: dict[str, str | None] = {}
        for key in ("access_evaluation_endpoint", "access_evaluations_endpoint"):
            value = document.get(key)
            if value is None:
                found[key] = None
                continue
            try:
                found[key] = pdp_url(value) if isinstance(value, str) else pdp_url("")
            except ValueError as exc:
                raise PdpFailure(f"its metadata's {key} is refused: {exc}") from None
        evaluation = found["access_evaluation_endpoint"]
        if evaluation is None:
            raise PdpFailure("its metadata names no access_evaluation_endpoint")
        return _Endpoints(evaluation, found["access_evaluations_endpoint"])

    def _read(self, decision: Any) -> Verdict:
        """A Decision as a verdict, the errors it reports named after this PDP.

        Raises:
            MalformedAnswer: ``decision`` is not a Decision.
        """
        verdict = verdict_from_decision(decision, evaluator=self.name, ask_field=self.ask_field)
        if not verdict.errors:
            return verdict
        named = tuple(f"authzen {self.url}: {error}" for error in verdict.errors)
        return dataclasses.replace(verdict, errors=named)

    def _failed(self, failure: PdpFailure) -> Verdict:
        """The deny verdict of a PDP that did not decide: the PDP and the cause in
        ``errors`` (and the detail, for the journal), the cause in the message."""
        errors = [f"authzen {self.url}: {failure.cause}"]
        if failure.detail:
            errors.append(f"authzen {self.url}: {failure.detail}")
        return Verdict(
            "deny",
            (),
            tuple(errors),
            f"the AuthZEN PDP did not decide ({failure.cause}); the call is denied",
            self.name,
        )


# --- batches (clearance replay) -------------------------------------------------------------


class _Slot:
    __slots__ = ("body", "done", "verdict")

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.done = anyio.Event()
        self.verdict: Verdict | None = None


class _Member:
    __slots__ = ("batch", "queued")

    def __init__(self, batch: DecisionBatch) -> None:
        self.batch = batch
        self.queued = False

    async def queue(self, body: dict[str, Any]) -> Verdict:
        self.queued = True
        slot = _Slot(body)
        self.batch._slots.append(slot)
        self.batch._one_settled()
        await slot.done.wait()
        assert slot.verdict is not None
        return slot.verdict


_MEMBER: contextvars.ContextVar[_Member | None] = contextvars.ContextVar(
    "clearance_authzen_batch_member", default=None
)


class DecisionBatch:
    """Decisions made concurrently whose evaluations go to the PDP together, in one
    ``evaluations`` request, instead of one request each.

    The caller starts each decision in a task of its own, inside :meth:`member`, and says
    so first with :meth:`expect`; :meth:`settled` waits until every started decision has
    either reached the evaluator (its request built, waiting in the batch) or ended
    before it; :meth:`flush` sends what waits and wakes each decision with its verdict.
    Nothing here waits on a clock: a decision never waits for others that will not come.
    A decision's second evaluation (an evaluator consulted twice) is sent alone.

    Create it inside the event loop that decides.
    """

    def __init__(self, evaluator: AuthZenEvaluator) -> None:
        self.evaluator = evaluator
        self._slots: list[_Slot] = []
        self._running = 0
        self._settled = anyio.Event()
        self._settled.set()

    @property
    def waiting(self) -> int:
        """Evaluations waiting to be sent."""
        return len(self._slots)

    def expect(self) -> None:
        """One more decision is about to start (call before starting its task)."""
        if self._running == 0:
            self._settled = anyio.Event()
        self._running += 1

    def _one_settled(self) -> None:
        self._running -= 1
        if self._running == 0:
            self._settled.set()

    @contextmanager
    def member(self) -> Iterator[None]:
        """Inside, this task's evaluation by the batch's evaluator waits in the batch."""
        member = _Member(self)
        token = _MEMBER.set(member)
        try:
            yield
        finally:
            _MEMBER.reset(token)
            if not member.queued:
                self._one_settled()

    async def settled(self) -> None:
        """Wait until every expected decision waits in the batch or has ended."""
        await self._settled.wait()

    async def flush(self) -> None:
        """Send every waiting evaluation and give each decision its verdict."""
        slots, self._slots = self._slots, []
        if not slots:
            return
        try:
            verdicts = await self.evaluator._decide_bodies([slot.body for slot in slots])
            for slot, verdict in zip(slots, verdicts, strict=True):
                slot.verdict = verdict
        finally:
            for slot in slots:
                if slot.verdict is None:  # the flush was cancelled or failed: deny
                    slot.verdict = self.evaluator._failed(PdpFailure("the batch was not sent"))
                slot.done.set()
