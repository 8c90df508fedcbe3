"""Deciding corpus lines with an AuthZEN PDP: many calls in one ``evaluations`` request.

:func:`~clearance.tuning._decide.decide_lines` decides one line after another; with an
:class:`~clearance.policy.authzen.AuthZenEvaluator` that would be one round trip per
line. Here the lines of a chunk (the evaluator's ``batch_size``) are decided concurrently,
each in its own task, inside a :class:`~clearance.policy.authzen.DecisionBatch`: every
stage before the evaluator runs as usual, each call's evaluation request waits in the
batch, and one ``evaluations`` request decides them all. Then the chunk is counted in
corpus order, so the report and the flips are the same as one by one.

The conversation ledgers stay shared between consecutive lines, as in ``decide_lines``:
a line's task is started only after the previous one has settled (its evaluation request
is built, or it ended before the evaluator), so a later line's entries never reach an
earlier line's request. A baseline (local policies) decides each line at the same point,
against the same ledger.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import anyio

from clearance.harness.outcomes import Decision
from clearance.harness.session import Harness
from clearance.policy.authzen import AuthZenEvaluator, DecisionBatch
from clearance.provenance import Provenance
from clearance.tuning._corpus import CorpusCall, CorpusError, parse_corpus_line
from clearance.tuning._flips import Flip
from clearance.tuning._ledgers import Ledgers
from clearance.tuning._progress import CHECK_EVERY, Checkpoint
from clearance.tuning._tally import Tally

__all__ = ["decide_lines_batched"]


class _Line:
    """One decided line of a chunk: the call, its decision, the baseline's."""

    __slots__ = ("before", "call", "decision")

    def __init__(self, call: CorpusCall) -> None:
        self.call = call
        self.decision: Decision | None = None
        self.before: Decision | None = None


async def _decide(
    harness: Harness, batch: DecisionBatch, line: _Line, ledger: Provenance | None
) -> None:
    """Decide one line as a member of ``batch`` (its evaluation waits there)."""
    call = line.call
    assert call.arguments is not None
    with batch.member():
        line.decision = await harness.decide(
            principal=call.principal,
            tool=call.tool,
            arguments=call.arguments,
            context=call.context,
            provenance=ledger,
            with_provenance=False,
        )


async def decide_lines_batched(
    numbered: Iterable[tuple[int, str]],
    harness: Harness,
    evaluator: AuthZenEvaluator,
    baseline: Harness | None,
    tally: Tally,
    *,
    skip_bad: bool,
    path: str | None,
    on_flip: Callable[[Flip], None] | None,
    checkpoint: Checkpoint | None = None,
) -> None:
    """:func:`~clearance.tuning._decide.decide_lines`, with ``harness``'s evaluator
    (``evaluator``) consulted in batches. Same arguments, same counting.

    Raises:
        CorpusError: a line does not parse and ``skip_bad`` is false.
    """
    ledgers = Ledgers(harness.trust)
    base_ledgers = ledgers
    if baseline is not None and baseline.trust != harness.trust:
        base_ledgers = Ledgers(baseline.trust)
    lines = iter(numbered)
    since = 0
    try:
        while True:
            chunk: list[_Line] = []
            batch = DecisionBatch(evaluator)
            failed: CorpusError | None = None
            stopped = False
            ended = True
            async with anyio.create_task_group() as tg:
                for number, text in lines:
                    if checkpoint is not None:
                        if since == CHECK_EVERY:
                            if checkpoint(since):
                                stopped = True
                                break
                            since = 0
                        since += 1
                    try:
                        call = parse_corpus_line(text, number, path=path)
                    except CorpusError as exc:
                        tally.lines += 1
                        if not skip_bad:
                            failed = exc
                            break
                        tally.add_bad(exc)
                        continue
                    if call is None:
                        continue
                    tally.lines += 1
                    if call.arguments is None:
                        tally.withheld += 1
                        continue
                    line = _Line(call)
                    chunk.append(line)
                    batch.expect()
                    tg.start_soon(
                        _decide, harness, batch, line, ledgers.for_conversation(call.conversation)
                    )
                    await batch.settled()
                    if baseline is not None:
                        line.before = await baseline.decide(
                            principal=call.principal,
                            tool=call.tool,
                            arguments=call.arguments,
                            context=call.context,
                            provenance=base_ledgers.for_conversation(call.conversation),
                            with_provenance=False,
                        )
                    if len(chunk) >= evaluator.batch_size:
                        ended = False
                        break
                await batch.settled()
                await batch.flush()
            for line in chunk:
                assert line.decision is not None
                flip = tally.add(line.call, line.decision, line.before)
                if flip is not None and on_flip is not None:
                    on_flip(flip)
            if failed is not None:
                raise failed
            if stopped:
                tally.interrupted = True
                return
            if ended:
                break
        if checkpoint is not None:
            checkpoint(since)  # the last lines: nothing is left to stop
    finally:
        await evaluator.aclose()
