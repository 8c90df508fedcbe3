"""``replay(jobs=N)``: the corpus split across worker processes, their tallies merged.

The corpus is cut into chunks of lines dealt round-robin to the workers; each worker
builds its own harness from the same picklable factory, decides its lines and sends back
its :class:`~clearance.tuning._tally.Tally`. Flips go to one file per worker and are
streamed to ``on_flip`` in corpus order once every worker is done.

Progress and stopping cross processes through a shared counter of lines read and a shared
stop event: the parent polls ``stop`` while it waits and sets the event, every worker stops
within a few lines and sends back what it counted. Workers ignore SIGINT: a Ctrl-C on the
terminal reaches the whole process group, and only the parent decides what it means (the
command line: stop and report).
"""

from __future__ import annotations

import heapq
import json
import multiprocessing
import os
import queue
import signal
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import anyio

from clearance.harness.session import Harness
from clearance.tuning._corpus import CorpusError, open_corpus
from clearance.tuning._decide import decide_lines
from clearance.tuning._flips import Flip
from clearance.tuning._harness_spec import HarnessFactory, as_harness
from clearance.tuning._progress import ReplayProgress, count_lines
from clearance.tuning._report import ReplayReport, build_report, policy_ids
from clearance.tuning._tally import Tally

__all__ = ["replay_parallel"]

_CHUNK = 512
"""Lines per chunk when the corpus is split across worker processes."""


def replay_parallel(
    path: str,
    factory: HarnessFactory,
    *,
    baseline: HarnessFactory | None,
    jobs: int,
    skip_bad: bool,
    max_flips: int,
    sample_size: int,
    on_flip: Callable[[Flip], None] | None,
    shown_path: str | None,
    progress: Callable[[ReplayProgress], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> ReplayReport:
    """Replay the corpus file ``path`` in ``jobs`` worker processes.

    ``shown_path`` is the name errors give the corpus (``None``: ``path``); ``progress``
    and ``stop`` are as for :func:`~clearance.tuning.replay`.

    Raises:
        CorpusError: a line does not parse and ``skip_bad`` is false (the first such line
            of any worker).
        RuntimeError: a worker failed otherwise, or exited without an answer.
    """
    start = time.perf_counter()
    # Build one harness here first: a configuration or policy error surfaces as itself, and
    # the policy ids come from it.
    ids = policy_ids(as_harness(factory).evaluator)
    if baseline is not None:
        as_harness(baseline)
    # fork where there is one: spawn would re-run the main module, which `python -m
    # clearance` does not guard. The parent runs no event loop while it waits.
    methods = multiprocessing.get_all_start_methods()
    ctx: Any = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    results = ctx.Queue()
    read = ctx.Value("q", 0)
    stopping = ctx.Event()
    total = count_lines(path) if progress is not None else None
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
                    read,
                    stopping,
                ),
                daemon=True,
            )
            for k in range(jobs)
        ]
        for process in workers:
            process.start()
        answers: list[Any] = []
        try:
            while len(answers) < len(workers):
                answers.extend(_answers(results, workers, len(workers) - len(answers)))
                if stop is not None and not stopping.is_set() and stop():
                    stopping.set()
                if progress is not None:
                    progress(ReplayProgress(read.value, total, time.perf_counter() - start))
        finally:
            stopping.set()  # leaving early (an error, a second Ctrl-C): the workers stop too
            for process in workers:
                process.join(timeout=5)
                if process.is_alive():
                    process.terminate()
        tally = _merged(answers, sample_size, max_flips)
        if on_flip is not None:
            _stream_flips([f for f in flip_files if f is not None], on_flip)
    return build_report(
        tally,
        ids,
        has_baseline=baseline is not None,
        elapsed=time.perf_counter() - start,
        jobs=jobs,
        max_flips=max_flips,
    )


def _answers(results: Any, workers: list[Any], missing: int) -> list[Any]:
    """The answers that arrive within a tenth of a second (the polling period of progress
    and stop).

    Raises:
        RuntimeError: every worker has exited and an answer is still missing (a worker
            killed, or one that died without reporting).
    """
    try:
        return [results.get(timeout=0.1)]
    except queue.Empty:
        pass
    if any(p.is_alive() for p in workers):
        return []
    # Every worker is gone: what they put on the queue before exiting is there by now.
    found: list[Any] = []
    while len(found) < missing:
        try:
            found.append(results.get(timeout=1))
        except queue.Empty:
            codes = ", ".join(str(p.exitcode) for p in workers)
            raise RuntimeError(
                f"a replay worker exited without an answer (exit codes: {codes})"
            ) from None
    return found


def _merged(answers: list[Any], sample_size: int, max_flips: int) -> Tally:
    """The workers' tallies merged, or the first worker failure raised."""
    failures = [a for a in answers if a[0] == "failed"]
    if failures:
        _, worker, message = failures[0]
        raise RuntimeError(f"replay worker {worker} failed: {message}")
    corpus_errors = sorted((a[2] for a in answers if a[0] == "corpus"), key=lambda e: e[1])
    if corpus_errors:
        reason, line, where = corpus_errors[0]
        raise CorpusError(reason, line=line, path=where)
    tally = Tally(sample_size, max_flips)
    for _, _, part in sorted(answers, key=lambda a: a[1]):
        tally.merge(part)
    return tally


def _my_lines(path: str, worker: int, jobs: int) -> Iterator[tuple[int, str]]:
    with open_corpus(path) as handle:
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
    read: Any,
    stopping: Any,
) -> None:
    # Ctrl-C is the parent's to interpret (it sets ``stopping``).
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def checkpoint(lines: int) -> bool:
        with read.get_lock():
            read.value += lines
        return bool(stopping.is_set())

    try:
        tally = Tally(sample_size, max_flips, seed=worker)
        harness = as_harness(factory)
        base = as_harness(baseline) if baseline is not None else None
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
                checkpoint,
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
    tally: Tally,
    skip_bad: bool,
    path: str,
    on_flip: Callable[[Flip], None] | None,
    checkpoint: Callable[[int], bool],
) -> None:
    await decide_lines(
        lines,
        harness,
        baseline,
        tally,
        skip_bad=skip_bad,
        path=path,
        on_flip=on_flip,
        checkpoint=checkpoint,
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
