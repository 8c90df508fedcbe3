"""A journal's records as one row per call, and a row as a line of a replay corpus.

A row joins a call's ``call_decided`` record with its ``tool_finished`` (by session and
call id). :func:`corpus_record` writes it in the corpus format ``clearance replay`` reads
(``clearance journal export``)::

    {"principal": "User::\\"alice\\"", "tool": "files.read_file", "arguments": {...},
     "decision": "allow", "expected": "allow", "reasons": [...], "outcome": "ok",
     "id": "<session>/<call>", "group": "<session>", "session_id": "...", "call_id": "...",
     "turn_id": null, "ts": 1767225600.0}

``arguments`` is ``null`` when any value was withheld (the journal never had it).
``expected`` is the decision taken, so a replay reports every call whose decision flips;
calls that ended before the evaluator (unknown tool, invalid arguments) have
``decision: null`` and no ``expected``. ``grant`` names the grant that allowed a call its
policies asked for (``expected`` stays the policies' ``ask``: a replay decides policies,
not the person's answers).

With ``CallFolder(conversations=True)`` each row also carries ``conversation``, what its
session had seen when it was decided, in the corpus's form: the messages the host gave
(``message_added``, journaled with ``Harness(journal_messages=True)``) and the results of
the session's earlier calls as the model was shown them (``tool_finished``, with the
call's final arguments), so that a replay reads each argument's provenance as the live
decision did. Values the journal withheld (rule R8) are withheld there too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from clearance._pointer import REDACTED, iter_strings
from clearance.harness.journal import JournalEvent
from clearance.provenance.results import shown_values

__all__ = ["CallFolder", "CallRow", "calls_from_events", "corpus_record"]


@dataclass(slots=True)
class CallRow:
    """One call, as the table and the export show it."""

    seq: int
    """The ``seq`` of its ``call_decided`` record."""
    ts: float
    session_id: str
    call_id: str | None
    turn_id: str | None
    principal: str | None
    tool: str
    """The qualified name (the name as given when the tool was unknown)."""
    decision: str | None
    reasons: list[str]
    status: str
    """How the call ended (``ok``, ``denied``...); ``running`` while a started call has no
    end; ``not started`` for an allowed call whose start is not (or not yet) recorded."""
    decision_us: int | None
    run_us: int | None = None
    arguments: dict[str, Any] | None = None
    withheld: bool = False
    message: str | None = None
    correlation_id: str | None = None
    finished: bool = field(default=False)
    stage: str | None = None
    """The stage that ended the call before it ran, or that decided it (``facts``,
    ``guardrail``, ``schema``, ``evaluator``, ``ask``...)."""
    stopped_by: str | None = None
    """What stopped a call before any policy decided it: ``facts /path`` (the argument
    that could not be canonicalized), ``guardrail NAME``, or the stage's name."""
    host: str | None = None
    """The host that decided the call (records written before hosts were named: None)."""
    grant: str | None = None
    """The grant that allowed the call, when one did."""
    read_provenance: bool = False
    """Whether its decision read the provenance of an argument."""
    seen: tuple[list[dict[str, Any]], int] | None = None
    """With ``CallFolder(conversations=True)``: its session's conversation (which only
    grows) and how many of its entries the call had seen when it was decided. A row keeps
    the shared list, not a copy: an export holds one conversation per session, not one
    per call."""

    @property
    def conversation(self) -> list[dict[str, Any]] | None:
        """What its session had seen when it was decided, in the corpus's form (None
        without ``CallFolder(conversations=True)``)."""
        if self.seen is None:
            return None
        entries, count = self.seen
        return entries[:count]

    @property
    def decided(self) -> tuple[str, str]:
        """The decision and what decided it, as the table shows them: the evaluator's
        decision and policies, or, for a call stopped before the evaluator, ``deny`` and
        what stopped it (a refusal is a denial whatever stage gives it)."""
        if self.decision is not None:
            return self.decision, ",".join(self.reasons) or "-"
        if self.stopped_by is not None:
            return "deny", self.stopped_by
        return "-", "-"

    @property
    def duration_us(self) -> int | None:
        """Deciding plus running (the handler's time), when known."""
        if self.decision_us is None and self.run_us is None:
            return None
        return (self.decision_us or 0) + (self.run_us or 0)

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "ts": self.ts,
            "session_id": self.session_id,
            "call_id": self.call_id,
            "turn_id": self.turn_id,
            "host": self.host,
            "principal": self.principal,
            "tool": self.tool,
            "decision": self.decision,
            "reasons": self.reasons,
            "status": self.status,
            "duration_us": self.duration_us,
            "message": self.message,
            "correlation_id": self.correlation_id,
        }

    def cells(self) -> tuple[str, ...]:
        """The row of the ``clearance journal`` table."""
        decision, by = self.decided
        return (
            datetime.fromtimestamp(self.ts).strftime("%Y-%m-%d %H:%M:%S"),
            self.host or "-",
            self.session_id,
            self.principal or "-",
            self.tool,
            decision,
            by,
            self.status,
            _duration(self.duration_us),
        )


class CallFolder:
    """Folds records into calls; feed it records in ``seq`` order. With
    ``conversations=True`` each row gets its session's conversation (see the module doc):
    an export pays for it, the table does not."""

    def __init__(self, *, conversations: bool = False) -> None:
        self.rows: list[CallRow] = []
        self._conversations: dict[str, list[dict[str, Any]]] | None = {} if conversations else None
        self._started: dict[tuple[str, str | None], Any] = {}
        """Final arguments of the started calls, for their result's entry."""
        self.sessions_with_messages: set[str] = set()
        """Sessions that have ``message_added`` records."""
        self._running: dict[tuple[str, str | None], CallRow] = {}
        self._authorized: dict[tuple[str, str | None], CallRow] = {}
        """Calls a host runs itself: complete at their decision, updated in place when the
        host reports the run or the authorization is withdrawn (R12)."""

    def feed(self, event: JournalEvent) -> CallRow | None:
        """Take one record; return the call it completes, if any."""
        data = event.data
        if event.type == "call_decided":
            timing = data.get("timing_us") or {}
            arguments = data.get("arguments")
            withheld = _has_withheld(arguments)
            outcome = str(data.get("outcome") or "unknown")
            row = CallRow(
                seq=event.seq,
                ts=event.ts,
                session_id=event.session_id,
                call_id=event.call_id,
                turn_id=event.turn_id,
                principal=data.get("principal"),
                tool=str(data.get("qualified_name") or data.get("tool") or "?"),
                decision=data.get("decision"),
                reasons=[str(r) for r in data.get("reasons") or ()],
                # A dispatched call runs once its start is recorded; until then (or for
                # good, when the journal failed to record the start) it has not started.
                status="not started" if outcome == "dispatched" else outcome,
                decision_us=timing.get("total"),
                arguments=None if withheld or not isinstance(arguments, dict) else arguments,
                withheld=withheld,
                message=data.get("message"),
                correlation_id=data.get("correlation_id"),
                stage=data.get("stage"),
                stopped_by=None if outcome == "dispatched" else _stopped_by(data),
                host=data.get("host") if isinstance(data.get("host"), str) else None,
                grant=data.get("grant") if isinstance(data.get("grant"), str) else None,
                read_provenance=bool(data.get("provenance")),
            )
            if self._conversations is not None:
                entries = self._conversations.setdefault(event.session_id, [])
                row.seen = (entries, len(entries))
            self.rows.append(row)
            if outcome == "dispatched":
                self._running[(event.session_id, event.call_id)] = row
                return None
            if outcome == "authorized":
                self._authorized[(event.session_id, event.call_id)] = row
            row.finished = True
            return row
        key = (event.session_id, event.call_id)
        if self._conversations is not None:
            self._converse(event, key)
        if event.type == "message_added":
            self.sessions_with_messages.add(event.session_id)
            return None
        if event.type == "authorization_withdrawn":
            withdrawn = self._authorized.pop(key, None)
            if withdrawn is not None:
                withdrawn.status = f"withdrawn ({data.get('reason') or 'withdrawn'})"
                withdrawn.message = data.get("message") or withdrawn.message
            return None
        if event.type == "tool_started":
            started = self._running.get(key)
            if started is None and key in self._authorized:
                self._running[key] = self._authorized.pop(key)  # the host runs it now
                started = self._running[key]
            if started is not None:
                started.status = "running"
            return None
        if event.type == "tool_finished":
            row_or_none = self._running.pop(key, None)
            if row_or_none is None:
                return None
            row_or_none.status = str(data.get("status") or "unknown")
            if data.get("result_blocked"):  # the handler ran; the model saw "blocked"
                row_or_none.status = "result blocked"
            row_or_none.run_us = data.get("duration_us")
            row_or_none.message = data.get("message") or row_or_none.message
            row_or_none.finished = True
            return row_or_none
        return None

    def _converse(self, event: JournalEvent, key: tuple[str, str | None]) -> None:
        """Add what ``event`` gave its session to the session's conversation."""
        assert self._conversations is not None
        data = event.data
        entry: dict[str, Any] | None = None
        if event.type == "message_added" and "content" in data:
            entry = {k: data[k] for k in ("role", "tool", "call_id", "content") if k in data}
        elif event.type == "tool_started":
            self._started[key] = data.get("arguments")
        elif event.type == "tool_finished":
            arguments = self._started.pop(key, None)
            result = data.get("result")
            # What the model was shown, as the live ledger recorded it (see
            # clearance.harness._running): a result no guardrail blocked.
            if (
                isinstance(result, dict)
                and data.get("status") in ("ok", "error")
                and not data.get("result_blocked")
            ):
                content = result.get("content")
                entry = {
                    "role": "tool",
                    "tool": str(data.get("qualified_name") or data.get("tool") or "?"),
                    "call_id": event.call_id,
                    "content": shown_values(
                        content if isinstance(content, list) else [],
                        result.get("structured_content"),
                    ),
                }
                if isinstance(arguments, dict):
                    entry["arguments"] = arguments
        if entry is not None:
            self._conversations.setdefault(event.session_id, []).append(entry)


def calls_from_events(events: Iterable[JournalEvent]) -> list[CallRow]:
    """One row per call (in the order the calls were decided), from records in ``seq``
    order. A started call with no end yet has status ``running``."""
    calls = CallFolder()
    for event in events:
        calls.feed(event)
    return calls.rows


def corpus_record(row: CallRow) -> dict[str, Any]:
    """A call in the corpus format of ``clearance replay`` (see the module doc)."""
    record: dict[str, Any] = {
        "principal": row.principal,
        "tool": row.tool,
        "arguments": row.arguments,
        "decision": row.decision,
    }
    if row.decision is not None:
        record["expected"] = row.decision
    if row.grant is not None:
        record["grant"] = row.grant
    conversation = row.conversation
    if conversation is not None:
        record["conversation"] = conversation
    record.update(
        reasons=row.reasons,
        outcome=row.status,
        id=f"{row.session_id}/{row.call_id}",
        group=row.session_id,
        session_id=row.session_id,
        call_id=row.call_id,
        turn_id=row.turn_id,
        ts=row.ts,
    )
    return record


_REFUSED_ARGUMENT = re.compile(r"argument (/\S*) \(")


def _stopped_by(data: dict[str, Any]) -> str | None:
    """What ended a call before the evaluator decided it (see :attr:`CallRow.stopped_by`);
    ``None`` when the evaluator (or an ask) decided."""
    stage = data.get("stage")
    if not isinstance(stage, str) or stage in ("evaluator", "ask") or data.get("decision"):
        return None
    if stage == "facts":
        facts = data.get("facts")
        error = facts.get("error") if isinstance(facts, dict) else None
        found = _REFUSED_ARGUMENT.match(error) if isinstance(error, str) else None
        return f"facts {found.group(1)}" if found else "facts"
    if stage == "guardrail":
        names = [
            str(g.get("name"))
            for g in data.get("guardrails") or ()
            if isinstance(g, dict) and (g.get("action") == "block" or g.get("error"))
        ]
        return f"guardrail {','.join(names)}" if names else "guardrail"
    return stage


def _has_withheld(value: Any) -> bool:
    return any(text == REDACTED for _, text in iter_strings(value))


def _duration(us: int | None) -> str:
    if us is None:
        return "-"
    if us < 1000:
        return f"{us} us"
    if us < 1_000_000:
        return f"{us / 1000:.1f} ms"
    return f"{us / 1_000_000:.2f} s"
