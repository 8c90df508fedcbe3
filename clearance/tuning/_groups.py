"""Which labelled tasks a policy set failed: the benign groups it did not fully allow and the
attack groups it did not stop, each with the calls that show it and their deciding policies.

A replay reports utility and security as counts; tuning needs the names. For a benign group
the first call (in corpus order) that was not simply allowed is kept, with its outcome and
the policies that decided it: that is the call to look at. For an attack group the first
few attack calls are kept while the group has not been stopped, with the policies that
allowed them; they are dropped once a call of the group is stopped. So memory stays at a few
calls per attack group still running and one per benign group that was stopped (the first
``limit`` of those), and the findings of worker processes merge.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from clearance.harness.pipeline import Decision
from clearance.tuning._corpus import CorpusCall

__all__ = ["ATTACK_CALLS_KEPT", "GroupCall", "GroupFinding", "GroupFindings"]

ATTACK_CALLS_KEPT = 3
"""How many allowed calls of an attack group that was not stopped are kept (the first)."""


@dataclass(frozen=True, slots=True)
class GroupCall:
    """One call of a labelled group, as decided."""

    line: int
    id: str | None
    tool: str
    outcome: str
    reasons: tuple[str, ...]
    """The deciding policies (the verdict's reasons)."""
    message: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "id": self.id,
            "tool": self.tool,
            "outcome": self.outcome,
            "policies": list(self.reasons),
            "message": self.message,
        }


@dataclass(frozen=True, slots=True)
class GroupFinding:
    """A benign group not fully allowed, or an attack group not stopped."""

    group: str
    label: str
    """``benign`` or ``attack``."""
    calls: tuple[GroupCall, ...]
    """Benign: the first call that was not simply allowed. Attack: its first calls (at
    most :data:`ATTACK_CALLS_KEPT`), all allowed, with the policies that allowed them."""

    @property
    def policies(self) -> tuple[str, ...]:
        """The deciding policies of :attr:`calls`, each once."""
        return tuple(dict.fromkeys(r for c in self.calls for r in c.reasons))

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "label": self.label,
            "policies": list(self.policies),
            "calls": [c.to_json() for c in self.calls],
        }


def _call(call: CorpusCall, decision: Decision) -> GroupCall:
    return GroupCall(
        call.line, call.id, call.tool, decision.outcome, decision.reasons, decision.message
    )


@dataclass
class GroupFindings:
    """The calls kept per group while a replay runs (picklable, mergeable)."""

    limit: int = 1000
    """At most this many benign groups' calls are kept (the earliest)."""
    benign: dict[str, GroupCall] = field(default_factory=dict)
    """Group → its first call that was not allowed (calls not labelled attack)."""
    attack: dict[str, list[GroupCall]] = field(default_factory=dict)
    """Group → its first allowed attack calls, while the group has not been stopped."""

    def add(self, call: CorpusCall, decision: Decision, *, stopped: bool) -> None:
        """Note one decided call; ``stopped``: its group has had a call that was not
        allowed (this one or an earlier one)."""
        group = call.group
        if group is None:
            return
        if stopped:
            self.attack.pop(group, None)
            if (
                decision.outcome != "allow"
                and call.label != "attack"
                and group not in self.benign
                and len(self.benign) < self.limit
            ):
                self.benign[group] = _call(call, decision)
            return
        if call.label == "attack":
            kept = self.attack.setdefault(group, [])
            if len(kept) < ATTACK_CALLS_KEPT:
                kept.append(_call(call, decision))

    def merge(self, other: GroupFindings) -> None:
        """Add what another worker's findings hold (its lines may come before ours)."""
        for group, found in other.benign.items():
            mine = self.benign.get(group)
            if mine is None or found.line < mine.line:
                self.benign[group] = found
        if len(self.benign) > self.limit:
            first = sorted(self.benign.items(), key=lambda item: item[1].line)[: self.limit]
            self.benign = dict(first)
        for group, calls in other.attack.items():
            merged = sorted(self.attack.get(group, []) + calls, key=lambda c: c.line)
            self.attack[group] = merged[:ATTACK_CALLS_KEPT]

    def findings(
        self, stopped_benign: Iterable[str], running_attacks: Iterable[str]
    ) -> tuple[tuple[GroupFinding, ...], tuple[GroupFinding, ...]]:
        """(benign groups not fully allowed, attack groups not stopped), each in the order
        of their first kept call, for the groups the tally counts as such. A benign group
        whose call was not kept (past ``limit``) is left out."""
        benign = [
            GroupFinding(group, "benign", (self.benign[group],))
            for group in stopped_benign
            if group in self.benign
        ]
        attack = [
            GroupFinding(group, "attack", tuple(self.attack[group]))
            for group in running_attacks
            if self.attack.get(group)
        ]
        benign.sort(key=lambda f: f.calls[0].line)
        attack.sort(key=lambda f: f.calls[0].line)
        return tuple(benign), tuple(attack)
