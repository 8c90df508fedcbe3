"""What the benchmark scripts share: timing contenders in interleaved rounds, and summaries.

The machine the figures come from is shared (two cores, other jobs running tests), so a
figure is only ever compared with one measured in the same process, at the same time:
``interleave`` runs a block of calls of each contender in turn, round after round, in a
new order each round, so that a burst of load hits every contender alike. Each call is
timed on its own; the summary gives the median over all calls and the range of the
per-round medians (how much the machine moved the figure during the run).

Every contender is called with the call's number, and is expected to use it to make its
arguments distinct (a path per call), so that no memo of identical requests can make a
figure.
"""

from __future__ import annotations

import gc
import random
import statistics
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["Contender", "Summary", "interleave", "percentile", "summarize"]

Call = Callable[[int], Awaitable[object]]


@dataclass
class Contender:
    """One thing to time: ``call(i)`` makes call number ``i`` (distinct arguments)."""

    name: str
    call: Call
    between: Callable[[], Awaitable[None]] | None = None
    """Untimed, after each block (clear an in-memory journal so it cannot grow)."""
    samples: list[float] = field(default_factory=list)
    """Microseconds per call, every call."""
    rounds: list[float] = field(default_factory=list)
    """The median of each round's block."""
    counter: int = 0


@dataclass(frozen=True)
class Summary:
    name: str
    calls: int
    median: float
    p99: float
    low: float
    """The lowest per-round median."""
    high: float
    """The highest per-round median."""

    def range_text(self) -> str:
        return f"{self.low:.1f}-{self.high:.1f}"


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def interleave(
    contenders: Sequence[Contender],
    *,
    rounds: int,
    block: int | Mapping[str, int],
    warmup: int = 200,
    seed: int = 7,
) -> None:
    """Time ``block`` calls of each contender per round, for ``rounds`` rounds, in a
    shuffled order each round (fills each contender's ``samples`` and ``rounds``).
    ``block`` may give each contender (by name) its own count, so that a contender whose
    call takes milliseconds does not make a round last minutes.

    Every contender is warmed first (``warmup`` calls, untimed): caches a running system
    would have warm (compiled globs, Cedar slices, principals) are warm for all.
    """
    sizes = {c.name: block if isinstance(block, int) else block[c.name] for c in contenders}
    order = list(contenders)
    rng = random.Random(seed)
    for contender in order:
        for _ in range(warmup):
            contender.counter += 1
            await contender.call(contender.counter)
        if contender.between is not None:
            await contender.between()
    clock = time.perf_counter_ns
    for _ in range(rounds):
        rng.shuffle(order)
        for contender in order:
            call = contender.call
            block_samples = []
            n = contender.counter
            for _ in range(sizes[contender.name]):
                n += 1
                start = clock()
                await call(n)
                block_samples.append((clock() - start) / 1000)
            contender.counter = n
            contender.samples.extend(block_samples)
            contender.rounds.append(statistics.median(block_samples))
            if contender.between is not None:
                await contender.between()
        gc.collect()  # between rounds, untimed: a collection never lands on one contender


def summarize(contender: Contender) -> Summary:
    samples = contender.samples
    return Summary(
        contender.name,
        len(samples),
        statistics.median(samples),
        percentile(samples, 0.99),
        min(contender.rounds),
        max(contender.rounds),
    )
