"""Replay a corpus of tool calls through the pipeline and measure a policy set.

A corpus is JSON lines, one tool call per line (``docs/replay.md`` has the full format)::

    {"principal": "User::\\"alice\\"", "tool": "files.read_file", "arguments": {"path": "a"},
     "expected": "allow", "label": "benign", "group": "task-3", "id": "c1"}

Each call goes through :meth:`~clearance.Harness.decide`: tool resolution, the argument
schema, the argument guardrails and the evaluator, exactly as a live call would, but nothing
runs, nobody is asked (an ask stays ``ask``) and nothing is journaled. The
:class:`ReplayReport` says:

* how many calls ended ``allow``, ``ask``, ``deny``, ``error``, ``blocked`` or ``invalid``;
* agreement with ``expected`` and the confusion table (expected by actual outcome);
* per group: benign groups whose every call was allowed without asking (**utility**) and
  attack groups with at least one call that did not run as is, i.e. was denied, blocked,
  asked, invalid or failed to evaluate (**security**);
* how often each policy (rule) decided a call, and the policies that never did;
* evaluation errors; p50 / p99 decision time per stage;
* with a baseline harness, every call whose decision flips, loosening flips
  (deny to allow) first.

Memory stays bounded on corpora of millions of lines: the report keeps counters, a fixed-size
reservoir sample of timings, a capped list of flips (every flip can be streamed to
``on_flip``) and a few bytes per distinct group. ``jobs=N`` splits the corpus across ``N``
worker processes, each building its own harness from the same factory, and merges what
they counted.
"""

from __future__ import annotations

import heapq
import itertools
import json
import math
import multiprocessing
import os
import random
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO

import anyio

from clearance.errors import ClearanceError
from clearance.policy.base import Principal

if TYPE_CHECKING:
    from clearance.harness.pipeline import Decision
    from clearance.harness.session import Harness

__all__ = [
    "OUTCOMES",
    "STAGES",
    "CorpusCall",
    "CorpusError",
    "Flip",
    "HarnessFactory",
    "HarnessSpec",
    "ReplayReport",
    "load_tool_declarations",
    "parse_corpus_line",
    "policy_ids",
    "read_corpus",
    "register_tool_declarations",
    "replay",
    "replay_async",
]

Outcome = Literal["allow", "ask", "deny", "error", "blocked", "invalid"]
Expected = Literal["allow", "ask", "deny"]
Label = Literal["benign", "attack"]

OUTCOMES: tuple[str, ...] = ("allow", "ask", "deny", "error", "blocked", "invalid")
"""Every outcome of :meth:`Harness.decide`, in report order."""
STAGES: tuple[str, ...] = ("validate", "guardrails", "evaluate", "total")
"""The pipeline stages whose decision time is reported."""

HarnessFactory = Callable[[], "Harness"]
"""A zero-argument callable that builds a fresh harness (picklable for ``jobs > 1``)."""

_EXPECTED = {"allow": "allow", "ask": "ask", "deny": "deny", "error": "deny"}
_LABELS = ("benign", "attack")
_CHUNK = 512
"""Lines per chunk when the corpus is split across worker processes."""
_MAX_ERROR_KINDS = 100
_MAX_BAD_SAMPLES = 20
_PRINCIPAL_CACHE = 4096

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
_LAST_PRIORITY = 4


class CorpusError(ClearanceError):
    """A corpus line is not a valid call.

    Attributes:
        line: the 1-based line number.
        path: the corpus file, when it came from one.
        reason: what is wrong with the line.
    """

    def __init__(self, reason: str, *, line: int, path: str | None = None) -> None:
        where = f"{path}:{line}" if path else f"line {line}"
        super().__init__(f"{where}: {reason}")
        self.reason = reason
        self.line = line
        self.path = path


# --- the corpus -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CorpusCall:
    """One corpus line, parsed."""

    line: int
    """The 1-based line number in the corpus."""
    principal: Principal
    tool: str
    """The qualified tool name (a model alias works too)."""
    arguments: dict[str, Any] | None
    """``None`` when the source withheld them (a journal export of a sensitive call):
    such a call is counted as withheld and not decided."""
    expected: Expected | None = None
    label: Label | None = None
    group: str | None = None
    id: str | None = None
    context: Mapping[str, Any] | None = None
    """Extra application context passed to the evaluator."""

    @property
    def name(self) -> str:
        """The call's ``id``, else ``line N``."""
        return self.id if self.id is not None else f"line {self.line}"


_principals: dict[str, Principal] = {}


def _parse_principal(value: Any) -> Principal:
    if isinstance(value, str):
        found = _principals.get(value)
        if found is None:
            found = Principal.parse(value)
            if len(_principals) >= _PRINCIPAL_CACHE:
                _principals.clear()
            _principals[value] = found
        return found
    return Principal.from_json(value)


def parse_corpus_line(text: str, line: int, *, path: str | None = None) -> CorpusCall | None:
    """Parse one corpus line; ``None`` for a blank line.

    Keys other than ``principal``, ``tool``, ``arguments``, ``expected``, ``label``,
    ``group``, ``id`` and ``context`` are ignored (a journal export carries more).

    Raises:
        CorpusError: the line is not JSON or a field is missing or of the wrong kind.
    """
    if not text or text.isspace():
        return None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CorpusError(
            f"not JSON: {exc.msg} (column {exc.colno})", line=line, path=path
        ) from None
    except RecursionError:
        raise CorpusError("not JSON: nested too deeply", line=line, path=path) from None
    if not isinstance(raw, dict):
        raise CorpusError(
            f"a corpus line must be a JSON object, not {type(raw).__name__}", line=line, path=path
        )

    def bad(message: str) -> CorpusError:
        return CorpusError(message, line=line, path=path)

    if "principal" not in raw:
        raise bad('missing \'principal\' (like "User::\\"alice\\"")')
    try:
        principal = _parse_principal(raw["principal"])
    except ValueError as exc:
        raise bad(str(exc)) from None
    tool = raw.get("tool")
    if not isinstance(tool, str) or not tool:
        raise bad("'tool' must be a non-empty string (the qualified name, like files.read_file)")
    if "arguments" not in raw:
        raise bad("missing 'arguments' (a JSON object; null when withheld)")
    arguments = raw["arguments"]
    if arguments is not None and not isinstance(arguments, dict):
        raise bad(f"'arguments' must be a JSON object or null, not {type(arguments).__name__}")
    expected: Any = raw.get("expected")
    if expected is not None:
        if expected not in _EXPECTED:
            raise bad(f"'expected' must be allow, deny or ask, not {expected!r}")
        expected = _EXPECTED[expected]
    label = raw.get("label")
    if label is not None and label not in _LABELS:
        raise bad(f"'label' must be benign or attack, not {label!r}")
    group = raw.get("group")
    if group is not None:
        if isinstance(group, bool) or not isinstance(group, str | int):
            raise bad("'group' must be a string")
        group = str(group)
    ident = raw.get("id")
    if ident is not None:
        if isinstance(ident, bool) or not isinstance(ident, str | int):
            raise bad("'id' must be a string")
        ident = str(ident)
    context = raw.get("context")
    if context is not None and not isinstance(context, dict):
        raise bad("'context' must be a JSON object")
    return CorpusCall(line, principal, tool, arguments, expected, label, group, ident, context)


def _numbered(source: str | os.PathLike[str] | Iterable[str] | TextIO) -> Iterator[tuple[int, str]]:
    if isinstance(source, str | os.PathLike):
        with open(source, encoding="utf-8") as handle:
            yield from enumerate(handle, 1)
    else:
        yield from enumerate(source, 1)


def read_corpus(
    source: str | os.PathLike[str] | Iterable[str],
    *,
    skip_bad: bool = False,
    on_bad: Callable[[CorpusError], None] | None = None,
) -> Iterator[CorpusCall]:
    """The calls of a corpus file (or of an iterable of lines), lazily.

    Args:
        source: a path, or lines.
        skip_bad: skip lines that do not parse (reporting each to ``on_bad``) instead of
            raising.
        on_bad: called with the error of each skipped line.

    Raises:
        CorpusError: a line does not parse and ``skip_bad`` is false.
    """
    path = str(source) if isinstance(source, str | os.PathLike) else None
    for number, text in _numbered(source):
        try:
            call = parse_corpus_line(text, number, path=path)
        except CorpusError as exc:
            if not skip_bad:
                raise
            if on_bad is not None:
                on_bad(exc)
            continue
        if call is not None:
            yield call


# --- what a replay counts ---------------------------------------------------------------------


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
        return _flip_priority(self.baseline, self.outcome) < 2 or (
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


def _flip_priority(before: str, after: str) -> int:
    if (before, after) in _FLIP_ORDER:
        return _FLIP_ORDER[(before, after)]
    if before == "allow" or (before == "ask" and after != "allow"):
        return 3  # tightening
    return _LAST_PRIORITY


# Group flags: which labels the group's calls carry, and whether any call did not run as is.
_BENIGN, _ATTACK, _STOPPED, _BASE_STOPPED = 1, 2, 4, 8


@dataclass
class _Tally:
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
    timings: list[tuple[int, int, int, int]] = field(default_factory=list)
    flips: int = 0
    flip_kinds: Counter[str] = field(default_factory=Counter)
    kept_flips: list[list[Flip]] = field(default_factory=list)
    _rng: random.Random | None = None

    def __post_init__(self) -> None:
        if not self.kept_flips:
            self.kept_flips = [[] for _ in range(_LAST_PRIORITY + 1)]

    def rng(self) -> random.Random:
        if self._rng is None:
            self._rng = random.Random(self.seed)
        return self._rng

    def add_bad(self, error: CorpusError) -> None:
        self.bad += 1
        if len(self.bad_samples) < _MAX_BAD_SAMPLES:
            self.bad_samples.append((error.line, error.reason))

    def add(
        self,
        call: CorpusCall,
        decision: Decision,
        baseline: Decision | None,
    ) -> Flip | None:
        self.calls += 1
        outcome = decision.outcome
        self.outcomes[outcome] += 1
        stopped = outcome != "allow"
        if call.expected is not None:
            row = self.confusion.get(call.expected)
            if row is None:
                row = self.confusion[call.expected] = Counter()
            row[outcome] += 1
        verdict = decision.verdict
        if verdict is not None:
            for reason in dict.fromkeys(verdict.get("reasons") or ()):
                self.hits[reason] += 1
            errors = verdict.get("errors")
            if errors or outcome == "error":
                self.error_calls += 1
                for message in errors or (decision.message or "the evaluator failed",):
                    text = str(message)
                    if text in self.errors or len(self.errors) < _MAX_ERROR_KINDS:
                        self.errors[text] += 1
        for guard in decision.guardrails:
            action = guard.get("action")
            if action not in (None, "allow") and not guard.get("advisory"):
                self.guardrail_hits[f"{guard.get('name')}:{action}"] += 1
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
            slot = self.rng().randrange(self.seen_timings)
            if slot < self.sample_size:
                self.timings[slot] = sample
        flip: Flip | None = None
        flags = 0
        if call.label == "benign":
            flags |= _BENIGN
        elif call.label == "attack":
            flags |= _ATTACK
        if stopped:
            flags |= _STOPPED
        if baseline is not None:
            before = baseline.outcome
            self.baseline_outcomes[before] += 1
            if before != "allow":
                flags |= _BASE_STOPPED
            if before != outcome:
                flip = Flip(
                    call.line,
                    call.id,
                    str(call.principal),
                    call.tool,
                    before,
                    outcome,
                    baseline.reasons,
                    decision.reasons,
                    call.group,
                    call.label,
                )
                self.flips += 1
                self.flip_kinds[flip.kind] += 1
                kept = self.kept_flips[_flip_priority(before, outcome)]
                if len(kept) < self.max_flips:
                    kept.append(flip)
        if call.group is not None:
            self.groups[call.group] = self.groups.get(call.group, 0) | flags
        return flip

    def merge(self, other: _Tally) -> None:
        self.lines += other.lines
        self.calls += other.calls
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


def _merge_samples(
    a: list[tuple[int, int, int, int]],
    seen_a: int,
    b: list[tuple[int, int, int, int]],
    seen_b: int,
    size: int,
) -> list[tuple[int, int, int, int]]:
    """Merge two reservoir samples into one that still represents both streams fairly."""
    if len(a) + len(b) <= size:
        return a + b
    total = seen_a + seen_b
    take_a = min(len(a), round(size * seen_a / total)) if total else 0
    take_b = min(len(b), size - take_a)
    rng = random.Random(total)
    return rng.sample(a, take_a) + rng.sample(b, take_b)


# --- the report -------------------------------------------------------------------------------


def _percentile(sorted_values: list[int], q: float) -> int:
    if not sorted_values:
        return 0
    return sorted_values[min(len(sorted_values) - 1, math.ceil(q * len(sorted_values)) - 1)]


def _rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


@dataclass(frozen=True, slots=True)
class ReplayReport:
    """What a replay found. Build one with :func:`replay`; print it with
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
    """Expected (allow, ask, deny) → actual outcome → calls, for calls with ``expected``."""
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

    @property
    def agreement(self) -> tuple[int, int]:
        """(calls agreeing with ``expected``, calls with ``expected``); deny, error,
        blocked and invalid all agree with an expected deny."""
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
            },
            "security": {
                "attack_groups": self.attack_groups,
                "stopped": self.security_groups,
                "rate": self.security,
                "baseline_stopped": self.baseline_security_groups,
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
        }


def _effective(outcome: str) -> str:
    return outcome if outcome in ("allow", "ask") else "deny"


def _report(
    tally: _Tally,
    ids: tuple[str, ...] | None,
    *,
    has_baseline: bool,
    elapsed: float,
    jobs: int,
    max_flips: int,
) -> ReplayReport:
    benign = attack = useful = stopped = base_useful = base_stopped = 0
    for flags in tally.groups.values():
        if flags & _ATTACK:
            attack += 1
            stopped += bool(flags & _STOPPED)
            base_stopped += bool(flags & _BASE_STOPPED)
        elif flags & _BENIGN:
            benign += 1
            useful += not flags & _STOPPED
            base_useful += not flags & _BASE_STOPPED
    latency: dict[str, dict[str, int]] = {}
    for index, stage in enumerate(STAGES):
        values = sorted(sample[index] for sample in tally.timings)
        latency[stage] = {
            "p50": _percentile(values, 0.50),
            "p99": _percentile(values, 0.99),
            "max": values[-1] if values else 0,
        }
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
            for e in ("allow", "ask", "deny")
            if e in tally.confusion
        },
        benign_groups=benign,
        utility_groups=useful,
        attack_groups=attack,
        security_groups=stopped,
        hits=dict(tally.hits.most_common()),
        never_hit=never,
        guardrail_hits=dict(tally.guardrail_hits.most_common()),
        error_calls=tally.error_calls,
        errors=dict(tally.errors.most_common()),
        latency_us=latency,
        timing_sample=len(tally.timings),
        flips=tally.flips,
        flip_kinds=dict(tally.flip_kinds.most_common()),
        flip_list=flips,
        baseline_outcomes={o: tally.baseline_outcomes.get(o, 0) for o in OUTCOMES}
        if has_baseline
        else None,
        baseline_utility_groups=base_useful if has_baseline else None,
        baseline_security_groups=base_stopped if has_baseline else None,
        elapsed=elapsed,
        jobs=jobs,
    )


def policy_ids(evaluator: Any) -> tuple[str, ...] | None:
    """The ids of every policy or rule an evaluator holds, as they appear in
    ``Verdict.reasons``; ``None`` when it cannot say.

    Knows :class:`~clearance.policy.LocalEvaluator` (``allow:files.*``),
    :class:`~clearance.policy.CedarEvaluator` (each policy's ``@id``, else Cedar's id;
    templates excluded), :class:`~clearance.policy.AllOf` (the union) and
    :class:`~clearance.policy.NoopEvaluator` (none). Any other evaluator may define a
    ``policy_ids`` attribute or method.
    """
    from clearance.policy.base import AllOf
    from clearance.policy.local import LocalEvaluator
    from clearance.policy.noop import NoopEvaluator

    if isinstance(evaluator, LocalEvaluator):
        return tuple(dict.fromkeys(rule.id for rule in evaluator.rules))
    if isinstance(evaluator, NoopEvaluator):
        return ()
    if isinstance(evaluator, AllOf):
        out: dict[str, None] = {}
        for inner in evaluator.evaluators:
            ids = policy_ids(inner)
            if ids is None:
                return None
            out.update(dict.fromkeys(ids))
        return tuple(out)
    hook = getattr(evaluator, "policy_ids", None)
    if hook is not None:
        value = hook() if callable(hook) else hook
        return tuple(str(v) for v in value)
    engine = getattr(evaluator, "engine", None)
    infos = getattr(engine, "policies", None)
    if infos is not None:
        return tuple(dict.fromkeys(str(i.label) for i in infos if i.kind != "template"))
    return None


# --- harness factories ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HarnessSpec:
    """A picklable recipe for a replay harness, as the command line builds it.

    Tools come from the configuration's bundled toolsets (``--config``, else
    ``./clearance.toml``, else the built-in default: ``files`` and ``shell``) plus the
    declarations in ``tools`` (a JSON file; see :func:`load_tool_declarations`); with
    declarations and no configuration file, only the declared tools. Handlers never run. The evaluator is the configuration's, unless ``policies`` (a Cedar
    directory, or a TOML rules file) or ``rules`` (a TOML rules file) replaces it. The
    configuration's argument guardrails apply. Nothing is journaled.
    """

    config: str | None = None
    policies: str | None = None
    """A directory of ``.cedar`` files, or a ``.toml`` file of local rules."""
    rules: str | None = None
    """A TOML file with ``allow`` / ``ask`` / ``deny`` lists (LocalEvaluator)."""
    tools: str | None = None
    """A JSON file of tool declarations registered beside the configured toolsets."""
    evaluator: Any = None
    """An evaluator object to use instead (it must be picklable for ``jobs > 1``)."""

    def with_policies(self, policies: str) -> HarnessSpec:
        """The same tools and guardrails, deciding with other policies (a baseline)."""
        return HarnessSpec(self.config, policies, None, self.tools, None)

    def build_registry(self) -> Any:
        """The tools: the configured toolsets plus the declared ones. With declarations
        and no configuration file at all, only the declared tools (the built-in default's
        ``files`` and ``shell`` would be noise in someone else's corpus)."""
        from clearance.config import build_registry, find_config, resolve_config
        from clearance.harness.tools import ToolRegistry

        if self.tools is not None and self.config is None and find_config() is None:
            registry = ToolRegistry()
        else:
            registry = build_registry(resolve_config(self.config))
        if self.tools is not None:
            register_tool_declarations(registry, load_tool_declarations(self.tools))
        return registry

    def build_evaluator(self) -> Any:
        from clearance.config import build_evaluator, resolve_config

        if self.evaluator is not None:
            return self.evaluator
        if self.rules is not None:
            from clearance.policy.local import LocalEvaluator

            return LocalEvaluator.from_file(self.rules)
        if self.policies is not None:
            path = Path(self.policies)
            if path.is_file():
                from clearance.policy.local import LocalEvaluator

                return LocalEvaluator.from_file(path)
            from clearance.policy.cedar import CedarEvaluator

            return CedarEvaluator.from_directory(path)
        return build_evaluator(resolve_config(self.config))

    def __call__(self) -> Harness:
        from clearance.config import build_guardrails, resolve_config
        from clearance.harness.approvals import MemoryGrantStore
        from clearance.harness.journal import MemoryJournal
        from clearance.harness.session import Harness

        config = resolve_config(self.config)
        argument_guardrails, _ = build_guardrails(config)
        harness = Harness(
            self.build_registry(),
            evaluator=self.build_evaluator(),
            argument_guardrails=argument_guardrails,
            journal=MemoryJournal(),
            grant_store=MemoryGrantStore(),
            max_argument_bytes=config.limits.max_argument_bytes,
        )
        harness.freeze()  # bind now: a policy error surfaces before the first line
        return harness


def load_tool_declarations(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read tool declarations: a JSON list (or ``{"tools": [...]}``) of objects with
    ``name`` (qualified: ``banking.send_money``), ``input_schema`` (or MCP's
    ``inputSchema``), and optionally ``description``, ``read_only``, ``annotations``,
    ``sensitive``.

    Raises:
        ConfigError: the file cannot be read or a declaration is malformed.
    """
    from clearance.errors import ConfigError

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read the tools file: {exc.strerror}", path=str(path)) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"the tools file is not JSON: {exc}", path=str(path)) from None
    items = data.get("tools") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise ConfigError('expected a JSON list of tools (or {"tools": [...]})', path=str(path))
    out: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(name, str) or "." not in name:
            raise ConfigError(
                f"tools[{index}]: 'name' must be a qualified name like banking.send_money",
                path=str(path),
            )
        out.append(item)
    return out


def _never_run(arguments: dict[str, Any], ctx: Any) -> str:
    raise RuntimeError("a replayed tool is never run")


def register_tool_declarations(registry: Any, declarations: Iterable[Mapping[str, Any]]) -> None:
    """Register declared tools (see :func:`load_tool_declarations`) with handlers that
    never run.

    Raises:
        ToolRegistrationError: a declaration is not a valid tool.
    """
    from clearance.harness.tools import Tool

    by_namespace: dict[str, list[Any]] = {}
    for item in declarations:
        namespace, _, name = str(item["name"]).partition(".")
        schema = item.get("input_schema", item.get("inputSchema"))
        options: dict[str, Any] = {
            "description": str(item.get("description") or ""),
            "read_only": bool(item.get("read_only", False)),
            "annotations": dict(item.get("annotations") or {}),
            "sensitive": tuple(item.get("sensitive") or ()),
        }
        if schema is not None:
            options["input_schema"] = schema
        by_namespace.setdefault(namespace, []).append(Tool(name, _never_run, **options))
    for namespace, tools in by_namespace.items():
        registry.register(namespace, tools)


# --- running a replay -------------------------------------------------------------------------


async def _decide_lines(
    numbered: Iterable[tuple[int, str]],
    harness: Harness,
    baseline: Harness | None,
    tally: _Tally,
    *,
    skip_bad: bool,
    path: str | None,
    on_flip: Callable[[Flip], None] | None,
) -> None:
    decide = harness.decide
    base_decide = baseline.decide if baseline is not None else None
    for number, text in numbered:
        try:
            call = parse_corpus_line(text, number, path=path)
        except CorpusError as exc:
            tally.lines += 1
            if not skip_bad:
                raise
            tally.add_bad(exc)
            continue
        if call is None:
            continue
        tally.lines += 1
        if call.arguments is None:
            tally.withheld += 1
            continue
        decision = await decide(
            principal=call.principal, tool=call.tool, arguments=call.arguments, context=call.context
        )
        before = None
        if base_decide is not None:
            before = await base_decide(
                principal=call.principal,
                tool=call.tool,
                arguments=call.arguments,
                context=call.context,
            )
        flip = tally.add(call, decision, before)
        if flip is not None and on_flip is not None:
            on_flip(flip)


async def replay_async(
    corpus: str | os.PathLike[str] | Iterable[str],
    harness: Harness | HarnessFactory,
    *,
    baseline: Harness | HarnessFactory | None = None,
    skip_bad: bool = False,
    max_flips: int = 1000,
    sample_size: int = 10_000,
    on_flip: Callable[[Flip], None] | None = None,
) -> ReplayReport:
    """:func:`replay` in one process, for callers already inside an event loop.

    Raises:
        CorpusError: a line does not parse and ``skip_bad`` is false.
    """
    start = time.perf_counter()
    tally = _Tally(sample_size, max_flips)
    path = str(corpus) if isinstance(corpus, str | os.PathLike) else None
    live = _as_harness(harness)
    base = _as_harness(baseline) if baseline is not None else None
    await _decide_lines(
        _numbered(corpus),
        live,
        base,
        tally,
        skip_bad=skip_bad,
        path=path,
        on_flip=on_flip,
    )
    return _report(
        tally,
        policy_ids(live.evaluator),
        has_baseline=base is not None,
        elapsed=time.perf_counter() - start,
        jobs=1,
        max_flips=max_flips,
    )


def _as_harness(value: Harness | HarnessFactory) -> Harness:
    from clearance.harness.session import Harness

    if isinstance(value, Harness):
        return value
    built = value()
    if not isinstance(built, Harness):
        raise TypeError(f"the harness factory returned {type(built).__name__}, not a Harness")
    return built


def replay(
    corpus: str | os.PathLike[str] | Iterable[str],
    harness: Harness | HarnessFactory,
    *,
    baseline: Harness | HarnessFactory | None = None,
    jobs: int = 1,
    skip_bad: bool = False,
    max_flips: int = 1000,
    sample_size: int = 10_000,
    on_flip: Callable[[Flip], None] | None = None,
) -> ReplayReport:
    """Decide every call of a corpus and measure the outcome (see the module docstring).

    Args:
        corpus: a corpus file, or its lines (read lazily, once).
        harness: the harness deciding, or a factory building one. With ``jobs > 1`` it
            must be a picklable factory (a :class:`HarnessSpec`, or a module-level
            function): each worker process builds its own.
        baseline: a second harness (or factory) deciding the same calls; every call whose
            outcome differs is a :class:`Flip`.
        jobs: worker processes. The corpus is split into chunks of lines dealt round-robin
            to the workers; an iterable corpus is first spooled to a temporary file.
        skip_bad: count and skip lines that do not parse instead of stopping at the first.
        max_flips: how many flips the report keeps (loosening ones first); ``on_flip``
            still sees every one.
        sample_size: calls kept in the reservoir sample the latency percentiles come from.
        on_flip: called with every flip (with ``jobs > 1``: after the workers finish, in
            corpus order).

    Returns:
        The report.

    Raises:
        CorpusError: a line does not parse and ``skip_bad`` is false (the first such line).
    """
    if jobs < 1:
        raise ValueError("jobs must be at least 1")
    if jobs == 1:

        async def run() -> ReplayReport:
            return await replay_async(
                corpus,
                harness,
                baseline=baseline,
                skip_bad=skip_bad,
                max_flips=max_flips,
                sample_size=sample_size,
                on_flip=on_flip,
            )

        return anyio.run(run)
    from clearance.harness.session import Harness

    if isinstance(harness, Harness) or isinstance(baseline, Harness):
        raise TypeError("with jobs > 1, pass harness factories (e.g. a HarnessSpec), not harnesses")
    if isinstance(corpus, str | os.PathLike):
        return _replay_parallel(
            str(corpus), harness, baseline, jobs, skip_bad, max_flips, sample_size, on_flip, None
        )
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as tmp:
        for text in corpus:
            tmp.write(text if text.endswith("\n") else text + "\n")
    try:
        return _replay_parallel(
            tmp.name, harness, baseline, jobs, skip_bad, max_flips, sample_size, on_flip, "<corpus>"
        )
    finally:
        os.unlink(tmp.name)


def _my_lines(path: str, worker: int, jobs: int) -> Iterator[tuple[int, str]]:
    with open(path, encoding="utf-8") as handle:
        for number, text in enumerate(handle, 1):
            if ((number - 1) // _CHUNK) % jobs == worker:
                yield number, text


def _worker(
    path: str,
    shown_path: str | None,
    worker: int,
    jobs: int,
    factory: HarnessFactory,
    baseline: HarnessFactory | None,
    skip_bad: bool,
    max_flips: int,
    sample_size: int,
    flips_file: str | None,
    results: Any,
) -> None:
    try:
        tally = _Tally(sample_size, max_flips, seed=worker)
        harness = _as_harness(factory)
        base = _as_harness(baseline) if baseline is not None else None
        handle = open(flips_file, "w", encoding="utf-8") if flips_file else None
        try:

            def keep(flip: Flip) -> None:
                assert handle is not None
                handle.write(json.dumps(flip.to_json()) + "\n")

            anyio.run(
                _run_worker_lines,
                _my_lines(path, worker, jobs),
                harness,
                base,
                tally,
                skip_bad,
                shown_path or path,
                keep if handle is not None else None,
            )
        finally:
            if handle is not None:
                handle.close()
        results.put(("ok", worker, tally))
    except CorpusError as exc:
        results.put(("corpus", worker, (exc.reason, exc.line, exc.path)))
    except BaseException as exc:
        results.put(("failed", worker, f"{type(exc).__name__}: {exc}"))


async def _run_worker_lines(
    lines: Iterable[tuple[int, str]],
    harness: Harness,
    baseline: Harness | None,
    tally: _Tally,
    skip_bad: bool,
    path: str,
    on_flip: Callable[[Flip], None] | None,
) -> None:
    await _decide_lines(
        lines, harness, baseline, tally, skip_bad=skip_bad, path=path, on_flip=on_flip
    )


def _replay_parallel(
    path: str,
    factory: HarnessFactory,
    baseline: HarnessFactory | None,
    jobs: int,
    skip_bad: bool,
    max_flips: int,
    sample_size: int,
    on_flip: Callable[[Flip], None] | None,
    shown_path: str | None,
) -> ReplayReport:
    start = time.perf_counter()
    # Build one harness here first: a configuration or policy error surfaces as itself, and
    # the policy ids come from it.
    ids = policy_ids(_as_harness(factory).evaluator)
    if baseline is not None:
        _as_harness(baseline)
    # fork where there is one: spawn would re-run the main module, which `python -m
    # clearance` does not guard. The parent runs no event loop while it waits.
    methods = multiprocessing.get_all_start_methods()
    ctx: Any = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory(prefix="clearance-replay-") as tmp:
        flip_files = [
            os.path.join(tmp, f"flips-{k}.jsonl") if on_flip is not None else None
            for k in range(jobs)
        ]
        workers = [
            ctx.Process(
                target=_worker,
                args=(
                    path,
                    shown_path,
                    k,
                    jobs,
                    factory,
                    baseline,
                    skip_bad,
                    max_flips,
                    sample_size,
                    flip_files[k],
                    results,
                ),
                daemon=True,
            )
            for k in range(jobs)
        ]
        for process in workers:
            process.start()
        answers: list[Any] = []
        try:
            answers.extend(results.get() for _ in workers)
        finally:
            for process in workers:
                process.join(timeout=5)
                if process.is_alive():
                    process.terminate()
        failures = [a for a in answers if a[0] == "failed"]
        if failures:
            _, worker, message = failures[0]
            raise RuntimeError(f"replay worker {worker} failed: {message}")
        corpus_errors = sorted((a[2] for a in answers if a[0] == "corpus"), key=lambda e: e[1])
        if corpus_errors:
            reason, line, where = corpus_errors[0]
            raise CorpusError(reason, line=line, path=where)
        tally = _Tally(sample_size, max_flips)
        for _, _, part in sorted(answers, key=lambda a: a[1]):
            tally.merge(part)
        if on_flip is not None:
            _stream_flips([f for f in flip_files if f is not None], on_flip)
    return _report(
        tally,
        ids,
        has_baseline=baseline is not None,
        elapsed=time.perf_counter() - start,
        jobs=jobs,
        max_flips=max_flips,
    )


def _read_flips(path: str) -> Iterator[Flip]:
    with open(path, encoding="utf-8") as handle:
        for text in handle:
            raw = json.loads(text)
            yield Flip(
                raw["line"],
                raw["id"],
                raw["principal"],
                raw["tool"],
                raw["baseline"],
                raw["outcome"],
                tuple(raw["baseline_reasons"]),
                tuple(raw["reasons"]),
                raw["group"],
                raw["label"],
            )


def _stream_flips(files: list[str], on_flip: Callable[[Flip], None]) -> None:
    for flip in heapq.merge(*(_read_flips(f) for f in files), key=lambda f: f.line):
        on_flip(flip)
