"""Permission asks, their answers, and the grants that remember them.

When the evaluator or a guardrail says ``ask``, the pipeline first looks for a matching
grant; failing that it raises a :class:`PermissionAsk`, answered by the session's
``on_permission_ask`` callback or through ``session.permission_asks()``:

- ``allow_once``: this call only (never stored; it authorizes exactly the asked call);
- ``allow_session``: a grant that dies with the session;
- ``allow_always``: a grant kept in the grant store (persisted by ``SqliteGrantStore``);
- ``deny``: the call is denied.

A grant binds a principal, a tool and an argument scope: the exact arguments by default,
wider only when the answer names one of the ask's ``suggestions`` (or an explicit
:class:`GrantScope` that passes :func:`grant_from_answer`'s rule). Grants are consulted
only for calls that would otherwise be asked: a deny never reaches them (rule R3).
Scopes, grants and the memory store live in :mod:`clearance.harness.grants`, the SQLite
store in :mod:`clearance.harness.grants_sqlite`; both are re-exported here.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import anyio

from clearance import _pointer
from clearance.errors import AskError
from clearance.harness.grants import (
    Grant,
    GrantScope,
    GrantStore,
    MemoryGrantStore,
    arguments_hash,
    guess_path_fields,
    new_grant_id,
    suggest_scopes,
)
from clearance.harness.grants_sqlite import SqliteGrantStore

__all__ = [
    "ANSWERS",
    "Answer",
    "AskCallback",
    "Grant",
    "GrantScope",
    "GrantStore",
    "MemoryGrantStore",
    "PermissionAsk",
    "PermissionDecision",
    "SqliteGrantStore",
    "arguments_hash",
    "coerce_decision",
    "grant_from_answer",
    "new_grant_id",
    "suggest_scopes",
]

Answer = Literal["allow_once", "allow_session", "allow_always", "deny"]
ANSWERS: tuple[str, ...] = ("allow_once", "allow_session", "allow_always", "deny")


@dataclass(frozen=True, slots=True)
class PermissionDecision:
    """An answer to an ask, with an optional wider scope and a message for the record."""

    decision: Answer
    scope: GrantScope | None = None
    """For ``allow_session``/``allow_always``: one of the ask's suggestions (or an explicit
    scope); default is the exact call."""
    message: str | None = None
    expires_in: float | None = None
    """Seconds until the grant expires (``None``: no expiry)."""
    decided_by: str | None = None
    """Who answered (a user name), recorded with the grant."""
    via: str | None = None
    """Through what the answer came (``terminal``, ``cli``, ``gateway``, ``inbox``,
    ``openai-agents``...), recorded in the journal."""

    def __post_init__(self) -> None:
        if self.decision not in ANSWERS:
            raise AskError(f"{self.decision!r} is not one of {', '.join(ANSWERS)}")


@dataclass(eq=False)
class PermissionAsk:
    """A call waiting for a person's or the app's approval.

    Answer it by returning a decision from ``on_permission_ask`` or with
    ``await ask.respond("allow_once")`` when it came from ``session.permission_asks()``.
    """

    ask_id: str
    session_id: str
    turn_id: str | None
    call_id: str
    tool: str
    """The tool's model alias (what the model called)."""
    qualified_name: str
    model_alias: str
    principal: str
    arguments: dict[str, Any]
    """The arguments with sensitive and redacted values replaced by ``[REDACTED]``."""
    reason: str
    policies: tuple[str, ...] = ()
    """The policies, rules or guardrails that asked."""
    suggestions: tuple[GrantScope, ...] = ()
    created_at: float = field(default_factory=time.time)
    deciding: tuple[str, ...] = ()
    """The arguments that decide what the call does, to be shown first and in full: the
    tool's declared facts (paths, commands, recipients, URLs, amounts); for a tool that
    declares none, every argument (:mod:`clearance.harness.view`)."""
    facts: dict[str, Any] = field(default_factory=dict)
    """The canonical facts of those arguments (none of a withheld one), e.g. what a path
    resolves to; ``arguments`` already hold the canonical values."""
    notes: dict[str, str] = field(default_factory=dict)
    """Per deciding argument, a warning to show beside its value: a look-alike (mixed
    scripts, compatibility letters) and its canonical form."""
    _answer: PermissionDecision | None = field(default=None, repr=False)
    _closed: str | None = field(default=None, repr=False)
    _event: anyio.Event = field(default_factory=anyio.Event, repr=False)

    @property
    def answered(self) -> bool:
        return self._answer is not None

    @property
    def decision(self) -> PermissionDecision | None:
        """The answer, once answered."""
        return self._answer

    @property
    def closed(self) -> str | None:
        """Why the ask was closed unanswered (``timeout``, ``closed``, ``withdrawn``,
        ``unanswerable``, ``error``), or None while it is open or once answered."""
        return self._closed

    @property
    def open(self) -> bool:
        """Whether the ask still waits for an answer."""
        return self._answer is None and self._closed is None

    async def respond(
        self,
        decision: Answer | PermissionDecision,
        *,
        scope: GrantScope | None = None,
        message: str | None = None,
    ) -> None:
        """Answer the ask.

        Raises:
            AskError: it was already answered, timed out, withdrawn, or the answer is not
                one of ``allow_once``, ``allow_session``, ``allow_always``, ``deny``.
        """
        self.settle(coerce_decision(decision, scope=scope, message=message))

    def settle(self, decision: PermissionDecision) -> None:
        """Record the answer and wake whoever waits for it.

        Raises:
            AskError: the ask is closed or already answered.
        """
        if self._closed is not None:
            raise AskError(f"ask {self.ask_id} is closed ({self._closed})")
        if self._answer is not None:
            raise AskError(f"ask {self.ask_id} was already answered")
        self._answer = decision
        self._event.set()

    def close(self, why: str) -> None:
        """Close the ask unanswered (a no-op once it is answered or closed)."""
        if self._closed is None and self._answer is None:
            self._closed = why
            self._event.set()

    async def wait(self) -> None:
        """Wait until the ask is answered or closed."""
        await self._event.wait()

    def to_json(self) -> dict[str, Any]:
        return {
            "ask_id": self.ask_id,
            "call_id": self.call_id,
            "tool": self.tool,
            "qualified_name": self.qualified_name,
            "model_alias": self.model_alias,
            "principal": self.principal,
            "arguments": self.arguments,
            "reason": self.reason,
            "policies": list(self.policies),
            "suggestions": [s.to_json(public=True) for s in self.suggestions],
            "deciding": list(self.deciding),
            "facts": self.facts,
            "notes": self.notes,
        }


def coerce_decision(
    value: Any, *, scope: GrantScope | None = None, message: str | None = None
) -> PermissionDecision:
    """Turn a callback's return value into a decision, or raise ``AskError``."""
    if isinstance(value, PermissionDecision):
        if scope is not None or message is not None:
            return replace(value, scope=scope or value.scope, message=message or value.message)
        return value
    if isinstance(value, str) and value in ANSWERS:
        return PermissionDecision(value, scope=scope, message=message)  # type: ignore[arg-type]
    raise AskError(f"an ask must be answered with one of {', '.join(ANSWERS)}, not {value!r}")


AskCallback = Callable[
    [PermissionAsk], "Answer | PermissionDecision | Awaitable[Answer | PermissionDecision]"
]


def grant_from_answer(
    ask: PermissionAsk,
    decision: PermissionDecision,
    arguments: Mapping[str, Any],
    *,
    path_fields: Iterable[str] | None = None,
    other_facts: Iterable[str] = (),
) -> Grant | None:
    """The grant an ``allow_session``/``allow_always`` answer creates (None otherwise).

    The scope is the answer's, else the exact call. One of the ask's ``suggestions`` is
    taken as offered. Any other scope must not be wider than what was offered in a way
    that frees a path (issue 19), so it must:

    1. cover the asked call, and
    2. constrain every deciding field of the call: each field a suggested prefix scope
       constrains, each path field of the tool (``path_fields``, else guessed by name
       as :func:`~clearance.harness.grants.suggest_scopes` does) and each field of
       ``other_facts``, present in the call or not (a later call carrying it would be
       covered with it free). An exact scope constrains every field; a
       prefix scope the fields it names; a ``tool`` scope none, so it is refused unless
       offered or the call has no such field.

    Args:
        ask: the ask that was answered.
        decision: the answer.
        arguments: the asked call's final arguments.
        path_fields: the tool's top-level path arguments, as given to ``suggest_scopes``.
        other_facts: the tool's other top-level fact arguments, as given to
            ``suggest_scopes``.

    Raises:
        AskError: the answer names a scope that is not one of the ask's suggestions and
            does not cover the asked call or leaves one of its deciding fields free.
    """
    if decision.decision not in ("allow_session", "allow_always"):
        return None
    scope = decision.scope or GrantScope.exact(arguments)
    if scope not in ask.suggestions:
        _check_unoffered(scope, ask, arguments, path_fields, other_facts)
    now = time.time()
    return Grant(
        grant_id=new_grant_id(),
        principal=ask.principal,
        tool=ask.qualified_name,
        scope=scope,
        kind="session" if decision.decision == "allow_session" else "always",
        session_id=ask.session_id if decision.decision == "allow_session" else None,
        created_at=now,
        expires_at=now + decision.expires_in if decision.expires_in else None,
        decided_by=decision.decided_by,
        widened_by=(decision.decided_by or "unknown") if scope.widened else None,
    )


def _check_unoffered(
    scope: GrantScope,
    ask: PermissionAsk,
    arguments: Mapping[str, Any],
    path_fields: Iterable[str] | None,
    other_facts: Iterable[str],
) -> None:
    if not scope.covers(arguments):
        raise AskError("the grant scope does not cover the asked call")
    if scope.kind == "exact":
        return
    names = guess_path_fields(arguments) if path_fields is None else tuple(path_fields)
    names += tuple(other_facts)
    required = {"/" + _pointer.escape(name) for name in names}
    for offered in ask.suggestions:
        required.update(offered.fields)
    free = sorted(required - set(scope.fields))
    if free:
        raise AskError(
            f"the grant scope leaves {', '.join(free)} free; a scope that was not offered "
            "must constrain every path and fact field of the call"
        )
