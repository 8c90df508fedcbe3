"""Flips: calls a baseline and the replayed policies decide differently, riskiest first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["FLIP_PRIORITIES", "Flip", "flip_priority"]

# Flip kinds in report order: loosening first, the riskiest (deny to allow) leading.
_FLIP_ORDER = {
    ("deny", "allow"): 0,
    ("error", "allow"): 0,
    ("blocked", "allow"): 0,
    ("invalid", "allow"): 0,
    ("ask", "allow"): 1,
    ("deny", "ask"): 2,
    ("error", "ask"): 2,
    ("blocked", "ask"): 2,
    ("invalid", "ask"): 2,
}
_TIGHTENING = 3
_LAST_PRIORITY = 4

FLIP_PRIORITIES = _LAST_PRIORITY + 1
"""How many values :func:`flip_priority` returns (``0`` .. ``FLIP_PRIORITIES - 1``)."""


def flip_priority(before: str, after: str) -> int:
    """Where a flip from outcome ``before`` to ``after`` is listed: 0 (deny, error, blocked
    or invalid to allow), 1 (ask to allow), 2 (to ask), 3 (tightening), 4 (the rest)."""
    if (before, after) in _FLIP_ORDER:
        return _FLIP_ORDER[(before, after)]
    if before == "allow" or (before == "ask" and after != "allow"):
        return _TIGHTENING
    return _LAST_PRIORITY


@dataclass(frozen=True, slots=True)
class Flip:
    """A call decided differently by the baseline and by the replayed policies."""

    line: int
    id: str | None
    principal: str
    tool: str
    baseline: str
    """The baseline's outcome."""
    outcome: str
    """The replayed policies' outcome."""
    baseline_reasons: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()
    group: str | None = None
    label: str | None = None

    @property
    def kind(self) -> str:
        """``deny->allow`` and the like."""
        return f"{self.baseline}->{self.outcome}"

    @property
    def loosens(self) -> bool:
        """True when the replayed policies let through more than the baseline did."""
        return flip_priority(self.baseline, self.outcome) < 2 or (
            self.baseline not in ("allow", "ask") and self.outcome == "ask"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "id": self.id,
            "principal": self.principal,
            "tool": self.tool,
            "baseline": self.baseline,
            "outcome": self.outcome,
            "kind": self.kind,
            "baseline_reasons": list(self.baseline_reasons),
            "reasons": list(self.reasons),
            "group": self.group,
            "label": self.label,
        }
