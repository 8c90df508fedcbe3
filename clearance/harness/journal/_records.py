"""The typed form of a record: a pydantic model per type, for readers, exporters and tests.

The write path never validates (``data`` is a plain dict, encoded once); these models
describe and check the stored form (:func:`parse_event`), and generate its JSON Schema
(:func:`event_json_schema`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from clearance.harness.journal._event import JournalEvent

__all__ = [
    "AskRecord",
    "AuthorizationWithdrawnData",
    "AuthorizationWithdrawnRecord",
    "CallDecidedData",
    "CallDecidedRecord",
    "EventRecord",
    "GuardrailRecord",
    "MessageAddedData",
    "MessageAddedRecord",
    "PoliciesReloadedData",
    "PoliciesReloadedRecord",
    "PermissionAskedData",
    "PermissionAskedRecord",
    "PermissionDecidedData",
    "PermissionDecidedRecord",
    "ResultReference",
    "SchemaCheck",
    "SessionClosedData",
    "SessionClosedRecord",
    "SessionCreatedData",
    "SessionCreatedRecord",
    "ShadowRecord",
    "ToolFinishedData",
    "ToolFinishedRecord",
    "ToolProgressData",
    "ToolProgressRecord",
    "ToolStartedData",
    "ToolStartedRecord",
    "VerdictRecord",
    "event_json_schema",
    "parse_event",
]


class _Model(BaseModel):
    # Readers accept fields added by later versions; tests check none are undocumented.
    model_config = ConfigDict(extra="allow")


class _ToolIdentity(_Model):
    tool: str | None
    """The tool's model alias (the name as given when the tool is unknown)."""
    qualified_name: str | None
    model_alias: str | None


class SessionCreatedData(_Model):
    """``session_created``: who opened the session and what it may call."""

    principal: str
    """The principal entity, e.g. ``User::"alice"``."""
    agent: str
    tools: list[str]
    """Qualified names of the selected tools."""


class SessionClosedData(_Model):
    """``session_closed`` carries no data."""


class MessageAddedData(_Model):
    """``message_added``: a message the host gave the session (``Session.add_message``,
    ``add_user_message``, an agent's instructions) or a tool result it recorded
    (``Session.add_tool_result``), journaled only with ``Harness(journal_messages=True)``
    so that ``clearance journal export`` can give each call the conversation its
    provenance was read from. Written before the session's next call is decided."""

    role: Literal["user", "system", "tool"]
    content: Any = None
    """A message's text (the characters the provenance ledger reads of it); a tool
    result's values (text or any JSON value)."""
    tool: str | None = None
    """For a result: the qualified name of the tool that returned it."""
    call_id: str | None = None
    """For a result: the id of the call that returned it."""
    unrecorded: str | None = None
    """Why the content is not here (it cannot be stored: a lone surrogate, a value that is
    not JSON): a replay of the calls after it may read less of the user's than they did."""


class PoliciesReloadedData(_Model):
    """``policies_reloaded``: the evaluator's policies were reloaded (its directory watch
    saw a change, or ``reload()``: SIGHUP in the gateway), or failed to load and the
    previous set stayed in force. A record of the harness, not of a session: its
    ``session_id`` is empty. Written before the next call is decided (and when the
    harness closes)."""

    evaluator: Literal["live", "shadow"]
    loaded: bool
    """True: the new set decides from now on; False: it failed to load (``error``)."""
    how: Literal["watch", "reload"]
    policy_version: str | None
    """The digest of the set in force after it (as ``call_decided`` records it)."""
    error: str | None = None
    directory: str | None = None
    host: str | None = None


class SchemaCheck(_Model):
    """The JSON Schema check of the arguments."""

    valid: bool
    error: str | None = None


class GuardrailRecord(_Model):
    """One guardrail's outcome on the arguments (or, in ``result_guardrails``, the result)."""

    name: str
    advisory: bool
    action: Literal["allow", "replace", "redact", "block", "ask", "error"] | None = None
    message: str | None = None
    pointers: list[str] | None = None
    """The JSON pointers a ``redact`` withheld."""
    error: str | None = None
    """The exception type when the guardrail failed, or why a replacement was refused."""


class VerdictRecord(_Model):
    """What the authority evaluator returned (``effect`` ``error`` when it failed)."""

    effect: Literal["allow", "deny", "ask", "error"]
    reasons: list[str]
    annotations: dict[str, Any] = Field(default_factory=dict)
    errors: list[str] = Field(default_factory=list)
    message: str | None = None
    evaluator: str | None = None
    policy_version: str | None = None
    """The digest of the policy set that decided (``Verdict.policy_version``)."""


class ShadowRecord(_Model):
    """A shadow evaluator's verdict on the same request (recorded, never enforced)."""

    effect: str
    reasons: list[str] = Field(default_factory=list)
    agrees: bool


class AskRecord(_Model):
    """The ask and its answer (``answer`` ``grant`` when a stored grant answered)."""

    reason: str
    policies: list[str]
    ask_id: str | None = None
    answer: str | None = None
    """``allow_once``, ``allow_session``, ``allow_always``, ``deny``; ``grant`` when a
    stored grant answered; ``pending`` when the ask waits in the store (``authorize``)."""
    how: str | None = None
    """``callback``, ``stream``, ``store`` (answered through the ask store: another
    process, ``clearance asks``, ``harness.answer_ask``), ``pending``, ``timeout``,
    ``closed``, ``unanswerable``, ``error``, ``unshowable`` (a deciding argument is
    withheld, so no person was asked)."""
    answered_by: str | None = None
    """Who answered, when the answer said (``PermissionDecision.decided_by``)."""
    via: str | None = None
    """Through what the answer came (``terminal``, ``cli``, ``gateway``, a framework)."""
    grant: str | None = None
    message: str | None = None
    grant_created: dict[str, Any] | None = None


class CallDecidedData(_ToolIdentity):
    """``call_decided``: the explanation record, one per call that entered the pipeline."""

    principal: str
    arguments: dict[str, Any] | None
    """The arguments as decided, withheld values replaced by ``[REDACTED]``; ``None`` when
    they were not a JSON object."""
    schema_: SchemaCheck | None = Field(default=None, alias="schema")
    facts: dict[str, Any] | None = None
    """The canonical facts of the declared arguments, by argument (none of a withheld one),
    or ``{"error": ...}`` when one could not be canonicalized (rule R11)."""
    provenance: dict[str, Any] | None = None
    """Where each argument came from, by argument (:mod:`clearance.provenance`: ``sources``,
    ``user``, ``tool``, ``made_up``, ``untrusted_values``, ``made_up_values``,
    ``tool_values``; a withheld argument's without ``tool_values``): the records the
    decision read (an argument's is computed when a policy, rule or guardrail first reads
    it); absent when none was read or the call ended before the evaluator."""
    guardrails: list[GuardrailRecord] | None = None
    verdict: VerdictRecord | None = None
    shadow: ShadowRecord | None = None
    ask: AskRecord | None = None
    stage: str | None = None
    """Where a call that did not run ended: ``resolve``, ``call_id``, ``schema``,
    ``facts``, ``guardrail``, ``evaluator``, ``ask`` or ``dispatch``."""
    duplicate_call_id: bool | None = None
    decision: Literal["allow", "deny", "ask", "error"] | None
    """The authorization decision; ``None`` when the call ended before the evaluator."""
    reasons: list[str]
    grant: str | None = None
    outcome: Literal[
        "dispatched",
        "authorized",
        "pending",
        "denied",
        "blocked",
        "invalid",
        "overloaded",
        "cancelled",
        "error",
        "interrupted",
        "answered",
    ]
    """``dispatched`` (a ``tool_started`` follows), ``authorized`` (the host runs the call:
    a ``tool_started`` follows when it reports the run), ``pending`` (its ask waits in the
    store; the same call tried again is a new entry), or how the call ended without
    running; ``interrupted``: its process stopped while it waited on its ask (written by
    recovery, with ``asked_seq``); ``answered``: a decision ``clearance pdp`` gave another
    enforcement point (``caller``), which runs the call or not (nothing follows)."""
    message: str | None = None
    correlation_id: str
    """The call's correlation id (on an ``interrupted`` call: its ask id)."""
    timing_us: dict[str, int]
    host: str | None = None
    """The host that decided the call (``Harness.host``: the journal's host id, else
    ``$CLEARANCE_HOST`` or the machine's name)."""
    asked_seq: int | None = None
    """On ``interrupted`` records: the ``seq`` of the ``permission_asked`` they end."""
    caller: dict[str, Any] | None = None
    """On ``answered`` records: who asked ``clearance pdp`` (``token``: the name of the
    token it presented; ``address``: its network address)."""


class ToolStartedData(_ToolIdentity):
    """``tool_started``: recorded before the handler runs (committed, or, with
    ``SqliteJournal``'s default durability, in its start log; see ``docs/journal.md``)."""

    arguments: dict[str, Any] | None
    """The final arguments the handler gets, withheld values replaced."""
    correlation_id: str
    host: bool | None = None
    """True when the host ran the call (``authorize`` + ``record_result``)."""


class ToolProgressData(_ToolIdentity):
    """``tool_progress``: what a handler reported with ``ctx.progress``."""

    message: str
    data: dict[str, Any] | None = None


class ResultReference(_Model):
    """What the journal keeps of a result: text and structure; images by hash and size."""

    content: list[dict[str, Any]]
    structured_content: Any = None
    is_error: bool


class ToolFinishedData(_ToolIdentity):
    """``tool_finished``: exactly one per ``tool_started`` (rule R7)."""

    status: Literal["ok", "error", "failed", "cancelled", "timeout", "interrupted"]
    """How the handler ended."""
    duration_us: int | None
    """Handler run time; ``None`` for ``interrupted``."""
    correlation_id: str | None
    message: str | None = None
    result_blocked: bool = False
    """A result guardrail withheld the result from the model (it saw ``blocked``)."""
    result: ResultReference | None = None
    result_guardrails: list[GuardrailRecord] | None = None
    """Each result guardrail's outcome (advisory ones included)."""
    started_seq: int | None = None
    """On ``interrupted`` records: the ``seq`` of the start they close."""


class PermissionAskedData(_ToolIdentity):
    """``permission_asked``: the ask as its answerer saw it (withheld values replaced)."""

    ask_id: str
    call_id: str
    principal: str
    arguments: dict[str, Any] | None
    reason: str
    policies: list[str]
    suggestions: list[dict[str, Any]]
    deciding: list[str] = []
    """The arguments that decide what the call does, shown first and in full: the declared
    facts, or for a tool without facts every argument."""
    facts: dict[str, Any] = {}
    """Their canonical facts (none of a withheld argument)."""
    notes: dict[str, str] = {}
    """Per deciding argument, the warning shown beside it (a look-alike value and its
    canonical form)."""
    host: str | None = None
    """The host whose call asked (``Harness.host``)."""


class PermissionDecidedData(_ToolIdentity):
    """``permission_decided``: the answer, how it came, and the grant it created."""

    ask_id: str
    answer: str
    how: str
    by: str | None = None
    """Who answered, when the answer said."""
    via: str | None = None
    """Through what the answer came."""
    grant: str | None = None


class AuthorizationWithdrawnData(_ToolIdentity):
    """``authorization_withdrawn``: an allowed authorization that was never used, and no
    longer holds (rule R12); the call did not run (no ``tool_started`` follows)."""

    reason: Literal["expired", "revoked", "withdrawn"]
    """``expired``: not used within the harness's ``authorization_ttl``; ``revoked``: the
    grant that allowed it no longer covers the call; ``withdrawn``: the host gave it up
    (``session.withdraw``)."""
    grant: str | None = None
    """The grant that had allowed the call, if one did."""
    message: str
    """What the model may be shown."""
    correlation_id: str


class _Envelope(_Model):
    version: int
    seq: int
    ts: float
    session_id: str
    turn_id: str | None
    call_id: str | None


class SessionCreatedRecord(_Envelope):
    """A ``session_created`` record."""

    type: Literal["session_created"]
    data: SessionCreatedData


class SessionClosedRecord(_Envelope):
    """A ``session_closed`` record."""

    type: Literal["session_closed"]
    data: SessionClosedData


class CallDecidedRecord(_Envelope):
    """A ``call_decided`` record."""

    type: Literal["call_decided"]
    data: CallDecidedData


class PermissionAskedRecord(_Envelope):
    """A ``permission_asked`` record."""

    type: Literal["permission_asked"]
    data: PermissionAskedData


class PermissionDecidedRecord(_Envelope):
    """A ``permission_decided`` record."""

    type: Literal["permission_decided"]
    data: PermissionDecidedData


class ToolStartedRecord(_Envelope):
    """A ``tool_started`` record."""

    type: Literal["tool_started"]
    data: ToolStartedData


class ToolProgressRecord(_Envelope):
    """A ``tool_progress`` record."""

    type: Literal["tool_progress"]
    data: ToolProgressData


class ToolFinishedRecord(_Envelope):
    """A ``tool_finished`` record."""

    type: Literal["tool_finished"]
    data: ToolFinishedData


class MessageAddedRecord(_Envelope):
    """A ``message_added`` record."""

    type: Literal["message_added"]
    data: MessageAddedData


class PoliciesReloadedRecord(_Envelope):
    """A ``policies_reloaded`` record."""

    type: Literal["policies_reloaded"]
    data: PoliciesReloadedData


class AuthorizationWithdrawnRecord(_Envelope):
    """An ``authorization_withdrawn`` record."""

    type: Literal["authorization_withdrawn"]
    data: AuthorizationWithdrawnData


EventRecord: TypeAlias = Annotated[
    SessionCreatedRecord
    | SessionClosedRecord
    | CallDecidedRecord
    | PermissionAskedRecord
    | PermissionDecidedRecord
    | ToolStartedRecord
    | ToolProgressRecord
    | ToolFinishedRecord
    | AuthorizationWithdrawnRecord
    | MessageAddedRecord
    | PoliciesReloadedRecord,
    Field(discriminator="type"),
]
"""One validated record; the ``type`` field selects the model."""

_RECORD: TypeAdapter[EventRecord] = TypeAdapter(EventRecord)


def parse_event(event: JournalEvent | dict[str, Any]) -> EventRecord:
    """Validate one record (an event or its JSON form) and return its typed model.

    For readers, exporters and tests; the write path never calls it.

    Raises:
        pydantic.ValidationError: the record does not have the documented form.
    """
    raw = event.to_json() if isinstance(event, JournalEvent) else event
    return _RECORD.validate_python(raw)


def event_json_schema() -> dict[str, Any]:
    """The JSON Schema of a record, generated from the models (for docs and other tools)."""
    return _RECORD.json_schema(by_alias=True)
