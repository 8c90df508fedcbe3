"""The provenance ledger of each corpus line's conversation, shared by consecutive lines.

A corpus line that carries a ``conversation`` is decided in it: its messages and tool
results are recorded, in order, in a :class:`~clearance.provenance.Provenance` ledger
handed to ``decide``. Consecutive lines whose conversation extends the previous line's (the
calls of one task, in order) share a ledger, given only the new entries: ``decide`` only
reads it.
"""

from __future__ import annotations

from clearance.provenance import Provenance, TrustList
from clearance.tuning._corpus import ConversationEntry

__all__ = ["Ledgers"]


class Ledgers:
    """The ledger of each line's conversation, under one trust list, reusing the previous
    line's when this conversation starts with all of that one."""

    __slots__ = ("_entries", "_ledger", "_trust")

    def __init__(self, trust: TrustList) -> None:
        self._trust = trust
        self._entries: tuple[ConversationEntry, ...] = ()
        self._ledger: Provenance | None = None

    def for_conversation(
        self, conversation: tuple[ConversationEntry, ...] | None
    ) -> Provenance | None:
        if conversation is None:
            return None
        known = self._entries
        ledger = self._ledger
        if ledger is None or conversation[: len(known)] != known:
            ledger, known = Provenance(trust=self._trust), ()
        for index in range(len(known), len(conversation)):
            _record(ledger, conversation[index], index)
        self._entries, self._ledger = conversation, ledger
        return ledger


def _record(ledger: Provenance, entry: ConversationEntry, index: int) -> None:
    if entry.role == "tool":
        assert entry.tool is not None  # checked when the line was parsed
        ledger.add_result(
            entry.tool, entry.call_id or f"conversation-{index}", entry.content, entry.arguments
        )
    else:
        ledger.add_message(entry.role, entry.content)
