"""What a replay counts, in bounded memory, mergeable across worker processes.

Memory stays bounded on corpora of millions of lines: counters, a fixed-size reservoir
sample of timings, a capped list of flips per priority and a few bytes per distinct group.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

from clearance.harness.pipeline import Decision
from clearance.tuning._corpus import CorpusCall, CorpusError
from clearance.tuning._flips import FLIP_PRIORITIES, Flip, flip_priority
from clearance.tuning._groups import GroupFinding, GroupFindings

__all__ = ["OUTCOMES", "STAGES", "GroupCounts", "Tally"]

OUTCOMES: tuple[str, ...] = ("allow", "ask", "deny", "error", "blocked", "invalid")
"""Every outcome of :meth:`Harness.decide`, in report order."""
STAGES: tuple[str, ...] = ("validate", "guardrails", "evaluate", "total")
"""The pipeline stages whose decision time is reported."""

_MAX_ERROR_KINDS = 100
_MAX_BAD_SAMPLES = 20

# Group flags: which labels the group's calls carry, and whether any call did not run as is.
_BENIGN, _ATTACK, _STOPPED, _BASE_STOPPED = 1, 2, 4, 8

Timing = tuple[int, int, int, int]
"""Microseconds per stage, in :data:`STAGES` order."""


@dataclass(frozen=True, slots=True)
class GroupCounts:
    """Labelled groups, and how many of them each side let through or stopped."""

    benign: int
    useful: int
    """Benign groups all of whose calls were allowed without asking."""
    attack: int
    stopped: int
    """Attack groups with at least one call that did not run as is."""
    baseline_useful: int
    baseline_stopped: int


@dataclass
class Tally:
    """What a replay counts; picklable and mergeable (one per worker process)."""

    sample_size: int
    max_flips: int
    seed: int = 0
    lines: int = 0
    calls: int = 0
    bad: int = 0
    bad_samples: list[tuple[int, str]] = field(default_factory=list)
    withheld: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    baseline_outcomes: Counter[str] = field(default_factory=Counter)
    confusion: dict[str, Counter[str]] = field(default_factory=dict)
    groups: dict[str, int] = field(default_factory=dict)
    hits: Counter[str] = field(default_factory=Counter)
    guardrail_hits: Counter[str] = field(default_factory=Counter)
    error_calls: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    seen_timings: int = 0
    timings: list[Timing] = field(default_factory=list)
    flips: int = 0
    flip_kinds: Counter[str] = field(default_factory=Counter)
    kept_flips: list[list[Flip]] = field(default_factory=list)
    """The flips kept, one list per :func:`flip_priority`, each in corpus order."""
    findings: GroupFindings = field(default_factory=GroupFindings)
    """The calls that show which benign groups were not fully allowed and which attack
    groups were not stopped."""
    interrupted: bool = False
    """The replay was stopped before the end of the corpus."""
    _rng: random.Random | None = None

    def __post_init__(self) -> None:
        if not self.kept_flips:
            self.kept_flips = [[] for _ in range(FLIP_PRIORITIES)]

    def _random(self) -> random.Random:
        if self._rng is None:
            self._rng = random.Random(self.seed)
        return self._rng

    def add_bad(self, error: CorpusError) -> None:
        """Count a line skipped because it does not parse."""
        self.bad += 1
        if len(self.bad_samples) < _MAX_BAD_SAMPLES:
            self.bad_samples.append((error.line, error.reason))

    def add(self, call: CorpusCall, decision: Decision, baseline: Decision | None) -> Flip | None:
        """Count one decided call; return its flip when the baseline decided otherwise."""
        self.calls += 1
        outcome = decision.outcome
        self.outcomes[outcome] += 1
        if call.expected is not None:
            row = self.confusion.get(call.expected)
            if row is None:
                row = self.confusion[call.expected] = Counter()
            row[outcome] += 1
        self._count_reasons(decision)
        self._sample_timing(decision)
        flags = _label_flags(call)
        if outcome != "allow":
            flags |= _STOPPED
        flip: Flip | None = None
        if baseline is not None:
            before = baseline.outcome
            self.baseline_outcomes[before] += 1
            if before != "allow":
                flags |= _BASE_STOPPED
            if before != outcome:
                flip = self._flip(call, decision, baseline)
        if call.group is not None:
            flags |= self.groups.get(call.group, 0)
            self.groups[call.group] = flags
            self.findings.add(call, decision, stopped=bool(flags & _STOPPED))
        return flip

    def _count_reasons(self, decision: Decision) -> None:
        verdict = decision.verdict
        if verdict is not None:
            for reason in dict.fromkeys(verdict.get("reasons") or ()):
                self.hits[reason] += 1
            errors = verdict.get("errors")
            if errors or decision.outcome == "error":
                self.error_calls += 1
                for message in errors or (decision.message or "the evaluator failed",):
                    text = str(message)
                    if text in self.errors or len(self.errors) < _MAX_ERROR_KINDS:
                        self.errors[text] += 1
        for guard in decision.guardrails:
            action = guard.get("action")
            if action not in (None, "allow") and not guard.get("advisory"):
                self.guardrail_hits[f"{guard.get('name')}:{action}"] += 1

    def _sample_timing(self, decision: Decision) -> None:
        timing = decision.timing_us
        sample = (
            timing.get("validate", 0),
            timing.get("guardrails", 0),
            timing.get("evaluate", 0),
            timing.get("total", 0),
        )
        self.seen_timings += 1
        if len(self.timings) < self.sample_size:
            self.timings.append(sample)
        else:
            slot = self._random().randrange(self.seen_timings)
            if slot < self.sample_size:
                self.timings[slot] = sample

    def _flip(self, call: CorpusCall, decision: Decision, baseline: Decision) -> Flip:
        flip = Flip(
            call.line,
            call.id,
            str(call.principal),
            call.tool,
            baseline.outcome,
            decision.outcome,
            baseline.reasons,
            decision.reasons,
            call.group,
            call.label,
        )
        self.flips += 1
        self.flip_kinds[flip.kind] += 1
        kept = self.kept_flips[flip_priority(flip.baseline, flip.outcome)]
        if len(kept) < self.max_flips:
            kept.append(flip)
        return flip

    def group_counts(self) -> GroupCounts:
        """The labelled groups and what each side did to them. A group with both labels
        counts as an attack group."""
        benign = attack = useful = stopped = base_useful = base_stopped = 0
        for flags in self.groups.values():
            if flags & _ATTACK:
                attack += 1
                stopped += bool(flags & _STOPPED)
                base_stopped += bool(flags & _BASE_STOPPED)
            elif flags & _BENIGN:
                benign += 1
                useful += not flags & _STOPPED
                base_useful += not flags & _BASE_STOPPED
        return GroupCounts(benign, useful, attack, stopped, base_useful, base_stopped)

    def group_findings(self) -> tuple[tuple[GroupFinding, ...], tuple[GroupFinding, ...]]:
        """(benign groups not fully allowed, attack groups not stopped), as
        :meth:`group_counts` counts them, with the calls that show it."""
        stopped_benign = [
            g for g, f in self.groups.items() if f & _BENIGN and not f & _ATTACK and f & _STOPPED
        ]
        running_attacks = [g for g, f in self.groups.items() if f & _ATTACK and not f & _STOPPED]
        return self.findings.findings(stopped_benign, running_attacks)

    def merge(self, other: Tally) -> None:
        """Add what ``other`` (another worker's tally) counted."""
        self.lines += other.lines
        self.calls += other.calls
        self.interrupted = self.interrupted or other.interrupted
        self.findings.merge(other.findings)
        self.bad += other.bad
        self.bad_samples = sorted(self.bad_samples + other.bad_samples)[:_MAX_BAD_SAMPLES]
        self.withheld += other.withheld
        self.outcomes.update(other.outcomes)
        self.baseline_outcomes.update(other.baseline_outcomes)
        for expected, row in other.confusion.items():
            self.confusion.setdefault(expected, Counter()).update(row)
        for group, flags in other.groups.items():
            self.groups[group] = self.groups.get(group, 0) | flags
        self.hits.update(other.hits)
        self.guardrail_hits.update(other.guardrail_hits)
        self.error_calls += other.error_calls
        for message, count in other.errors.items():
            if message in self.errors or len(self.errors) < _MAX_ERROR_KINDS:
                self.errors[message] += count
        self.timings = _merge_samples(
            self.timings, self.seen_timings, other.timings, other.seen_timings, self.sample_size
        )
        self.seen_timings += other.seen_timings
        self.flips += other.flips
        self.flip_kinds.update(other.flip_kinds)
        for mine, theirs in zip(self.kept_flips, other.kept_flips, strict=True):
            mine.extend(theirs)
            mine.sort(key=lambda f: f.line)
            del mine[self.max_flips :]


def _label_flags(call: CorpusCall) -> int:
    if call.label == "benign":
        return _BENIGN
    if call.label == "attack":
        return _ATTACK
    return 0


def _merge_samples(
    a: list[Timing], seen_a: int, b: list[Timing], seen_b: int, size: int
) -> list[Timing]:
    """Merge two reservoir samples into one that still represents both streams fairly."""
    if len(a) + len(b) <= size:
        return a + b
    total = seen_a + seen_b
    take_a = min(len(a), round(size * seen_a / total)) if total else 0
    take_b = min(len(b), size - take_a)
    rng = random.Random(total)
    return rng.sample(a, take_a) + rng.sample(b, take_b)
