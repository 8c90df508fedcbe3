"""``replay``: decide every call of a corpus and measure the outcome.

Each call goes through :meth:`~clearance.Harness.decide`: tool resolution, the argument
schema, the argument guardrails and the evaluator, exactly as a live call would, but nothing
runs, nobody is asked (an ask stays ``ask``) and nothing is journaled. ``jobs=N`` hands the
corpus to :mod:`clearance.tuning._parallel`. ``progress`` and ``stop`` (see
:mod:`clearance.tuning._progress`) let a caller show how far it is and stop it early with
the report of what was decided until then.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterable

import anyio

from clearance.harness.session import Harness
from clearance.tuning._corpus import numbered_lines
from clearance.tuning._decide import decide_lines
from clearance.tuning._flips import Flip
from clearance.tuning._harness_spec import HarnessFactory, as_harness
from clearance.tuning._parallel import replay_parallel
from clearance.tuning._progress import Checkpoint, ReplayProgress, count_lines
from clearance.tuning._report import ReplayReport, build_report, policy_ids
from clearance.tuning._tally import Tally

__all__ = ["replay", "replay_async"]


async def replay_async(
    corpus: str | os.PathLike[str] | Iterable[str],
    harness: Harness | HarnessFactory,
    *,
    baseline: Harness | HarnessFactory | None = None,
    skip_bad: bool = False,
    max_flips: int = 1000,
    sample_size: int = 10_000,
    on_flip: Callable[[Flip], None] | None = None,
    progress: Callable[[ReplayProgress], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> ReplayReport:
    """:func:`replay` in one process, for callers already inside an event loop.

    Raises:
        CorpusError: a line does not parse and ``skip_bad`` is false.
    """
    start = time.perf_counter()
    tally = Tally(sample_size, max_flips)
    path = str(corpus) if isinstance(corpus, str | os.PathLike) else None
    live = as_harness(harness)
    base = as_harness(baseline) if baseline is not None else None
    await decide_lines(
        numbered_lines(corpus),
        live,
        base,
        tally,
        skip_bad=skip_bad,
        path=path,
        on_flip=on_flip,
        checkpoint=_checkpoint(path, start, progress, stop),
    )
    return build_report(
        tally,
        policy_ids(live.evaluator),
        has_baseline=base is not None,
        elapsed=time.perf_counter() - start,
        jobs=1,
        max_flips=max_flips,
    )


def _checkpoint(
    path: str | None,
    start: float,
    progress: Callable[[ReplayProgress], None] | None,
    stop: Callable[[], bool] | None,
) -> Checkpoint | None:
    """The checkpoint of a one-process replay: report progress, ask whether to stop."""
    if progress is None and stop is None:
        return None
    total = count_lines(path) if path is not None and progress is not None else None
    done = 0

    def checkpoint(lines: int) -> bool:
        nonlocal done
        done += lines
        if progress is not None:
            progress(ReplayProgress(done, total, time.perf_counter() - start))
        return stop is not None and stop()

    return checkpoint


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
    progress: Callable[[ReplayProgress], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> ReplayReport:
    """Decide every call of a corpus and measure the outcome (see ``docs/replay.md``).

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
        progress: called with a :class:`ReplayProgress` every few lines (and at the end),
            in the calling thread.
        stop: asked as often; once it returns True the replay stops within a few lines
            (every worker, with ``jobs > 1``) and returns the report of what was decided
            so far, with ``interrupted`` set. Ctrl-C handlers set what it reads.

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
                progress=progress,
                stop=stop,
            )

        return anyio.run(run)
    if isinstance(harness, Harness) or isinstance(baseline, Harness):
        raise TypeError("with jobs > 1, pass harness factories (e.g. a HarnessSpec), not harnesses")
    factory, base_factory = harness, baseline  # narrowed: factories only

    def parallel(path: str, shown_path: str | None) -> ReplayReport:
        return replay_parallel(
            path,
            factory,
            baseline=base_factory,
            jobs=jobs,
            skip_bad=skip_bad,
            max_flips=max_flips,
            sample_size=sample_size,
            on_flip=on_flip,
            shown_path=shown_path,
            progress=progress,
            stop=stop,
        )

    if isinstance(corpus, str | os.PathLike):
        return parallel(str(corpus), None)
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as tmp:
        for text in corpus:
            tmp.write(text if text.endswith("\n") else text + "\n")
    try:
        return parallel(tmp.name, "<corpus>")
    finally:
        os.unlink(tmp.name)
