"""Deciding corpus lines: each call through :meth:`Harness.decide`, counted in a tally.

A line that carries a ``conversation`` is decided in that conversation: its messages and
tool results are recorded, in order, in a :class:`~clearance.provenance.Provenance` ledger
handed to ``decide``, so the call's provenance (``context.provenance`` in Cedar) is what a
live session would have derived. The ledger is recorded under the deciding harness's trust
list, as a session's is (which fields of a trusted result count, and which results are
matched as phrases, is decided when a result is recorded); a baseline with another trust
list gets a ledger of its own. A line without one is decided with an empty ledger (every
value found nowhere). Consecutive lines whose conversation extends the previous line's (the
calls of one task, in order) share a ledger, given only the new entries: ``decide`` only
reads it (:mod:`clearance.tuning._ledgers`).

A harness whose evaluator is an :class:`~clearance.policy.AuthZenEvaluator` decides in
batches instead (:mod:`clearance.tuning._decide_batched`): one ``evaluations`` request for
many lines, counted the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from clearance.harness.session import Harness
from clearance.policy.authzen import AuthZenEvaluator
from clearance.tuning._corpus import CorpusError, parse_corpus_line
from clearance.tuning._decide_batched import decide_lines_batched
from clearance.tuning._flips import Flip
from clearance.tuning._ledgers import Ledgers
from clearance.tuning._progress import CHECK_EVERY, Checkpoint
from clearance.tuning._tally import Tally

__all__ = ["decide_lines"]


async def decide_lines(
    numbered: Iterable[tuple[int, str]],
    harness: Harness,
    baseline: Harness | None,
    tally: Tally,
    *,
    skip_bad: bool,
    path: str | None,
    on_flip: Callable[[Flip], None] | None,
    checkpoint: Checkpoint | None = None,
) -> None:
    """Parse and decide each ``(line number, text)``, counting into ``tally``.

    Each call runs every stage before dispatch (tool, schema, argument guardrails,
    evaluator) and nothing after: no handler, no ask, no journal. A call whose arguments
    the source withheld is counted as withheld, not decided.

    Args:
        numbered: the lines, with their 1-based numbers.
        harness: decides each call.
        baseline: decides each call too, when given; a different outcome is a flip.
        tally: what is counted.
        skip_bad: count and skip lines that do not parse instead of raising.
        path: the corpus file, named in errors.
        on_flip: called with each flip.
        checkpoint: called with the lines read since its last call, every
            :data:`CHECK_EVERY` lines and at the end; when it returns True the replay
            stops there and ``tally.interrupted`` is set.

    Raises:
        CorpusError: a line does not parse and ``skip_bad`` is false.
    """
    evaluator = harness.evaluator
    if isinstance(evaluator, AuthZenEvaluator):  # a remote PDP: many calls per request
        await decide_lines_batched(
            numbered,
            harness,
            evaluator,
            baseline,
            tally,
            skip_bad=skip_bad,
            path=path,
            on_flip=on_flip,
            checkpoint=checkpoint,
        )
        return
    decide = harness.decide
    base_decide = baseline.decide if baseline is not None else None
    ledgers = Ledgers(harness.trust)
    base_ledgers = ledgers
    if baseline is not None and baseline.trust != harness.trust:
        base_ledgers = Ledgers(baseline.trust)
    since = 0
    for number, text in numbered:
        if checkpoint is not None:
            if since == CHECK_EVERY:
                if checkpoint(since):
                    tally.interrupted = True
                    return
                since = 0
            since += 1
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
        provenance = ledgers.for_conversation(call.conversation)
        decision = await decide(
            principal=call.principal,
            tool=call.tool,
            arguments=call.arguments,
            context=call.context,
            provenance=provenance,
            with_provenance=False,  # a replay counts outcomes: no records to explain
        )
        before = None
        if base_decide is not None:
            before = await base_decide(
                principal=call.principal,
                tool=call.tool,
                arguments=call.arguments,
                context=call.context,
                provenance=base_ledgers.for_conversation(call.conversation),
                with_provenance=False,
            )
        flip = tally.add(call, decision, before)
        if flip is not None and on_flip is not None:
            on_flip(flip)
    if checkpoint is not None:
        checkpoint(since)  # the last lines: nothing is left to stop
