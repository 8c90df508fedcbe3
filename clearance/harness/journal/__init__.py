"""The journal: every step of every call, in order.

Each record has ``version``, ``seq`` (monotonic per journal, continued after a reopen),
``ts`` (Unix seconds), ``session_id``, ``turn_id``, ``call_id``, ``type`` and ``data``. Types:

- ``session_created``: principal, agent, selected tools; ``session_closed``;
- ``call_decided``: the explanation record, exactly one per call that entered the pipeline
  (schema check, each guardrail outcome, the verdict with reasons and errors, the ask and
  its answer, the grant used, the outcome, and the time each stage took in microseconds);
- ``permission_asked`` / ``permission_decided``;
- ``tool_started`` (final arguments, withheld values replaced), ``tool_progress``,
  ``tool_finished`` (status ``ok | error | failed | blocked | cancelled | timeout |
  interrupted``);
- ``authorization_withdrawn``: an allowed authorization the host never used that no longer
  holds (expired, its grant revoked, or given up; rule R12): the call did not run;
- ``message_added``: a message or tool result the host gave the session, with
  ``Harness(journal_messages=True)`` only (what a replay of its calls' provenance reads);
- ``policies_reloaded``: the evaluator's policies reloaded, or failed to and the previous
  set stayed (a record of the harness: ``session_id`` is empty).

Rule R7: a call that started has exactly one ``tool_started`` and one ``tool_finished``.
Opening a durable journal (:class:`JsonlJournal`, :class:`SqliteJournal`) appends a
``tool_finished`` with status ``interrupted`` for every start left without an end by a
crash. Rule R8: sensitive or redacted values never reach a record (the pipeline withholds
them before it appends).

Sinks: :class:`MemoryJournal` (tests, short-lived apps), :class:`JsonlJournal` (one JSON
object per line, append-only) and :class:`SqliteJournal` (the embedded default: WAL, one
writer thread, indexed reads). The write path never validates: ``data`` is a plain dict,
encoded once. The pydantic models (:func:`parse_event`) describe and check the stored
form for readers, exporters and tests.

Where things are (each a private module of this package; import the names from here):

- ``_event``: :class:`JournalEvent`, the record types, :func:`encode_data`;
- ``_records``: the typed form (``*Data`` and ``*Record`` models, :func:`parse_event`,
  :func:`event_json_schema`);
- ``_protocol``: the :class:`Journal` protocol and :class:`MemoryJournal`;
- ``_durable``: what the durable sinks share (:data:`Durability`, the writer lock, the
  ``interrupted`` end of a start a crash left open);
- ``_jsonl``: :class:`JsonlJournal` and its reader;
- ``_sqlite``: :class:`SqliteJournal` (the event loop's side), with ``_sqlite_schema``
  (schema and migrations), ``_sqlite_writer`` (the writer thread), ``_start_log`` (the
  start log), ``_sqlite_recovery`` (opening after a crash) and ``_sqlite_read`` (reading);
- ``_postgres``: :class:`PostgresJournal` (several hosts, one PostgreSQL database; needs
  the ``postgres`` extra, so it is imported on first use and is not in ``__all__``), with
  ``_postgres_writer`` (the writer thread) and ``_postgres_host`` (hosts, sessions and
  recovery across hosts);
- ``_reading``: :func:`read_journal` for a file of either kind;
- ``_hub``: :class:`EventHub` / :class:`EventStream`, the events a UI subscribes to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from clearance import _lazy
from clearance.harness.journal._durable import (
    INTERRUPTED_MESSAGE,
    Durability,
)
from clearance.harness.journal._event import (
    EVENT_TYPES,
    JOURNAL_VERSION,
    EventType,
    JournalEvent,
    encode_data,
)
from clearance.harness.journal._hub import (
    EventHub,
    EventItem,
    EventStream,
    summarize,
)
from clearance.harness.journal._jsonl import (
    JsonlJournal,
    read_jsonl,
)
from clearance.harness.journal._protocol import (
    Journal,
    MemoryJournal,
)
from clearance.harness.journal._reading import (
    read_journal,
)
from clearance.harness.journal._sqlite import (
    SqliteJournal,
)
from clearance.harness.journal._sqlite_read import (
    read_sqlite,
)
from clearance.harness.journal._sqlite_schema import (
    MIGRATIONS,
    SCHEMA_VERSION,
    is_sqlite_file,
)

if TYPE_CHECKING:
    from clearance.harness.journal._postgres import PostgresJournal as PostgresJournal
    from clearance.harness.journal._records import (
        AskRecord,
        AuthorizationWithdrawnData,
        AuthorizationWithdrawnRecord,
        CallDecidedData,
        CallDecidedRecord,
        EventRecord,
        GuardrailRecord,
        MessageAddedData,
        MessageAddedRecord,
        PermissionAskedData,
        PermissionAskedRecord,
        PermissionDecidedData,
        PermissionDecidedRecord,
        PoliciesReloadedData,
        PoliciesReloadedRecord,
        ResultReference,
        SchemaCheck,
        SessionClosedData,
        SessionClosedRecord,
        SessionCreatedData,
        SessionCreatedRecord,
        ShadowRecord,
        ToolFinishedData,
        ToolFinishedRecord,
        ToolProgressData,
        ToolProgressRecord,
        ToolStartedData,
        ToolStartedRecord,
        VerdictRecord,
        event_json_schema,
        parse_event,
    )

# Imported when first read. PostgresJournal needs psycopg (the ``postgres`` extra): the
# package imports without it (MissingExtraError says how to install). The typed records
# are pydantic models, which reading and writing a journal never need (``clearance
# journal`` starts without them, issue 34).
__getattr__, __dir__ = _lazy.lazy_attributes(
    __name__,
    {
        "clearance.harness.journal._postgres": ("PostgresJournal",),
        "clearance.harness.journal._records": (
            "AskRecord",
            "AuthorizationWithdrawnData",
            "AuthorizationWithdrawnRecord",
            "CallDecidedData",
            "CallDecidedRecord",
            "EventRecord",
            "GuardrailRecord",
            "MessageAddedData",
            "MessageAddedRecord",
            "PermissionAskedData",
            "PermissionAskedRecord",
            "PermissionDecidedData",
            "PermissionDecidedRecord",
            "PoliciesReloadedData",
            "PoliciesReloadedRecord",
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
        ),
    },
)


__all__ = [
    "AskRecord",
    "AuthorizationWithdrawnData",
    "AuthorizationWithdrawnRecord",
    "CallDecidedData",
    "CallDecidedRecord",
    "Durability",
    "EVENT_TYPES",
    "EventHub",
    "EventItem",
    "EventRecord",
    "EventStream",
    "EventType",
    "GuardrailRecord",
    "INTERRUPTED_MESSAGE",
    "JOURNAL_VERSION",
    "Journal",
    "JournalEvent",
    "JsonlJournal",
    "MIGRATIONS",
    "MemoryJournal",
    "MessageAddedData",
    "MessageAddedRecord",
    "PermissionAskedData",
    "PermissionAskedRecord",
    "PermissionDecidedData",
    "PermissionDecidedRecord",
    "PoliciesReloadedData",
    "PoliciesReloadedRecord",
    "ResultReference",
    "SCHEMA_VERSION",
    "SchemaCheck",
    "SessionClosedData",
    "SessionClosedRecord",
    "SessionCreatedData",
    "SessionCreatedRecord",
    "ShadowRecord",
    "SqliteJournal",
    "ToolFinishedData",
    "ToolFinishedRecord",
    "ToolProgressData",
    "ToolProgressRecord",
    "ToolStartedData",
    "ToolStartedRecord",
    "VerdictRecord",
    "encode_data",
    "event_json_schema",
    "is_sqlite_file",
    "parse_event",
    "read_journal",
    "read_jsonl",
    "read_sqlite",
    "summarize",
]
