"""The replay report: what a replay found, as a value and as JSON."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from clearance.policy.base import AuthorityEvaluator, as_evaluator
from clearance.tuning._flips import Flip
from clearance.tuning._groups import GroupFinding
from clearance.tuning._tally import OUTCOMES, STAGES, Tally

__all__ = ["ReplayReport", "build_report", "policy_ids"]


@dataclass(frozen=True, slots=True)
class ReplayReport:
    """What a replay found. Build one with :func:`~clearance.tuning.replay`; print it with
    ``clearance replay`` or serialize it with :meth:`to_json`."""

    lines: int
    """Non-blank corpus lines read."""
    calls: int
    """Calls decided."""
    bad_lines: int
    """Lines skipped because they did not parse (``skip_bad``)."""
    bad_samples: tuple[tuple[int, str], ...]
    """The first skipped lines: (line number, what was wrong)."""
    withheld: int
    """Calls whose arguments the source withheld: not decided."""
    outcomes: Mapping[str, int]
    """Calls per outcome (every key of :data:`OUTCOMES`)."""
    confusion: Mapping[str, Mapping[str, int]]
    """Expected (allow, ask, deny, blocked, invalid) → actual outcome → calls, for calls
    with ``expected``."""
    benign_groups: int
    utility_groups: int
    """Benign groups all of whose calls were allowed without asking."""
    attack_groups: int
    security_groups: int
    """Attack groups with at least one call denied, blocked, asked, invalid or in error."""
    hits: Mapping[str, int]
    """Policy (rule) id → calls it decided (it is among the verdict's reasons)."""
    never_hit: tuple[str, ...] | None
    """Policies that decided no call; ``None`` when the evaluator cannot list its
    policies."""
    guardrail_hits: Mapping[str, int]
    """``guardrail:action`` → calls where an enforced guardrail did not simply allow."""
    error_calls: int
    """Calls whose evaluation reported errors (or failed)."""
    errors: Mapping[str, int]
    """Error message → calls (the 100 most distinct messages)."""
    latency_us: Mapping[str, Mapping[str, int]]
    """Stage → ``{"p50", "p99", "max"}`` in microseconds, from a reservoir sample."""
    timing_sample: int
    """How many calls the latency figures were computed from."""
    flips: int
    """Calls whose outcome differs from the baseline's (0 without a baseline)."""
    flip_kinds: Mapping[str, int]
    """``before->after`` → calls."""
    flip_list: tuple[Flip, ...]
    """The flips kept (at most ``max_flips``): loosening ones first, deny to allow leading,
    then in corpus order."""
    baseline_outcomes: Mapping[str, int] | None
    """The baseline's calls per outcome, when there was a baseline."""
    baseline_utility_groups: int | None
    baseline_security_groups: int | None
    elapsed: float
    """Seconds the replay took (wall clock)."""
    jobs: int
    benign_not_allowed: tuple[GroupFinding, ...] = ()
    """The benign groups not fully allowed, each with its first call that was not allowed
    and the policies that decided it (the first 1,000 such groups), in corpus order."""
    attacks_not_stopped: tuple[GroupFinding, ...] = ()
    """The attack groups not stopped, each with its first calls and the policies that
    allowed them, in corpus order."""
    interrupted: bool = False
    """The replay was stopped (Ctrl-C) before the end of the corpus: the report covers the
    lines read until then."""

    @property
    def agreement(self) -> tuple[int, int]:
        """(calls agreeing with ``expected``, calls with ``expected``). As in
        ``clearance policy test``, a call agrees with the outcome it expects: an evaluator
        error (enforced as a denial) with ``deny``; a call stopped before the policies
        (``blocked``: a fact that could not be canonicalized; ``invalid`` arguments) only
        with ``blocked`` or ``invalid``, never with ``deny``, which says the policies
        denied it."""
        agree = total = 0
        for expected, row in self.confusion.items():
            for actual, count in row.items():
                total += count
                if _effective(actual) == expected:
                    agree += count
        return agree, total

    @property
    def utility(self) -> float | None:
        """Share of benign groups fully allowed (``None`` without benign groups)."""
        return _rate(self.utility_groups, self.benign_groups)

    @property
    def security(self) -> float | None:
        """Share of attack groups stopped (``None`` without attack groups)."""
        return _rate(self.security_groups, self.attack_groups)

    @property
    def calls_per_second(self) -> float:
        return self.calls / self.elapsed if self.elapsed > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        agree, with_expected = self.agreement
        return {
            "lines": self.lines,
            "calls": self.calls,
            "bad_lines": self.bad_lines,
            "bad_samples": [{"line": n, "error": e} for n, e in self.bad_samples],
            "withheld": self.withheld,
            "outcomes": dict(self.outcomes),
            "agreement": {
                "agree": agree,
                "with_expected": with_expected,
                "rate": _rate(agree, with_expected),
            },
            "confusion": {k: dict(v) for k, v in self.confusion.items()},
            "utility": {
                "benign_groups": self.benign_groups,
                "fully_allowed": self.utility_groups,
                "rate": self.utility,
                "baseline_fully_allowed": self.baseline_utility_groups,
                "not_fully_allowed": [f.to_json() for f in self.benign_not_allowed],
            },
            "security": {
                "attack_groups": self.attack_groups,
                "stopped": self.security_groups,
                "rate": self.security,
                "baseline_stopped": self.baseline_security_groups,
                "not_stopped": [f.to_json() for f in self.attacks_not_stopped],
            },
            "policies": {
                "hits": dict(self.hits),
                "never_hit": list(self.never_hit) if self.never_hit is not None else None,
            },
            "guardrails": dict(self.guardrail_hits),
            "errors": {"calls": self.error_calls, "messages": dict(self.errors)},
            "latency_us": {k: dict(v) for k, v in self.latency_us.items()},
            "timing_sample": self.timing_sample,
            "flips": {
                "total": self.flips,
                "kinds": dict(self.flip_kinds),
                "calls": [f.to_json() for f in self.flip_list],
            },
            "baseline_outcomes": dict(self.baseline_outcomes)
            if self.baseline_outcomes is not None
            else None,
            "elapsed_s": round(self.elapsed, 6),
            "calls_per_second": round(self.calls_per_second, 1),
            "jobs": self.jobs,
            "interrupted": self.interrupted,
        }


def _percentile(sorted_values: list[int], q: float) -> int:
    if not sorted_values:
        return 0
    return sorted_values[min(len(sorted_values) - 1, math.ceil(q * len(sorted_values)) - 1)]


def _rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _effective(outcome: str) -> str:
    return "deny" if outcome == "error" else outcome


def _latency(tally: Tally) -> dict[str, dict[str, int]]:
    latency: dict[str, dict[str, int]] = {}
    for index, stage in enumerate(STAGES):
        values = sorted(sample[index] for sample in tally.timings)
        latency[stage] = {
            "p50": _percentile(values, 0.50),
            "p99": _percentile(values, 0.99),
            "max": values[-1] if values else 0,
        }
    return latency


def build_report(
    tally: Tally,
    ids: tuple[str, ...] | None,
    *,
    has_baseline: bool,
    elapsed: float,
    jobs: int,
    max_flips: int,
) -> ReplayReport:
    """The report of what ``tally`` counted.

    Args:
        tally: the counts (merged, when several workers counted).
        ids: every policy id the evaluator holds (``None``: it cannot say).
        has_baseline: whether a baseline decided the same calls.
        elapsed: the wall-clock seconds the replay took.
        jobs: the worker processes it used.
        max_flips: how many flips to list.
    """
    groups = tally.group_counts()
    benign_not_allowed, attacks_not_stopped = tally.group_findings()
    flips = tuple(itertools.islice(itertools.chain.from_iterable(tally.kept_flips), max_flips))
    never = tuple(i for i in ids if i not in tally.hits) if ids is not None else None
    return ReplayReport(
        lines=tally.lines,
        calls=tally.calls,
        bad_lines=tally.bad,
        bad_samples=tuple(tally.bad_samples),
        withheld=tally.withheld,
        outcomes={o: tally.outcomes.get(o, 0) for o in OUTCOMES},
        confusion={
            e: {o: tally.confusion[e].get(o, 0) for o in OUTCOMES}
            for e in ("allow", "ask", "deny", "blocked", "invalid")
            if e in tally.confusion
        },
        benign_groups=groups.benign,
        utility_groups=groups.useful,
        attack_groups=groups.attack,
        security_groups=groups.stopped,
        hits=dict(tally.hits.most_common()),
        never_hit=never,
        guardrail_hits=dict(tally.guardrail_hits.most_common()),
        error_calls=tally.error_calls,
        errors=dict(tally.errors.most_common()),
        latency_us=_latency(tally),
        timing_sample=len(tally.timings),
        flips=tally.flips,
        flip_kinds=dict(tally.flip_kinds.most_common()),
        flip_list=flips,
        baseline_outcomes={o: tally.baseline_outcomes.get(o, 0) for o in OUTCOMES}
        if has_baseline
        else None,
        baseline_utility_groups=groups.baseline_useful if has_baseline else None,
        baseline_security_groups=groups.baseline_stopped if has_baseline else None,
        elapsed=elapsed,
        jobs=jobs,
        benign_not_allowed=benign_not_allowed,
        attacks_not_stopped=attacks_not_stopped,
        interrupted=tally.interrupted,
    )


def policy_ids(evaluator: AuthorityEvaluator) -> tuple[str, ...] | None:
    """The ids of every policy or rule an evaluator holds, as they appear in
    ``Verdict.reasons`` (``None`` when it cannot say): what a report's ``never_hit`` is
    computed from. The evaluator's :meth:`~clearance.policy.Evaluator.policy_ids`."""
    return as_evaluator(evaluator).policy_ids()
