"""What provenance adds to a tool call, measured beside the same call without it, in one run.

Run: ``python benchmarks/bench_provenance.py`` (``--quick`` for a short run, ``--json``).

Every figure is the median time of one ``session.call_tool`` of ``bank.send_money`` with new
arguments every call (a new IBAN, amount and subject: no memo can make a figure), measured
call by call in interleaved rounds (see ``_bench.py``), the local evaluator deciding with a
rule that reads provenance (``deny bank.send_money(recipient.from=tool)``; without
provenance, a deny rule on the recipient's value instead, so both have as many rules):

- **no provenance**: ``Harness(provenance=False)``: sessions record nothing and describe
  nothing (what a call costs without the feature);
- **empty session**: provenance on, but the session has recorded nothing yet (no message,
  and results too short to hold a value): what a call pays before anything entered;
- **100 results**: a session with one user message and 100 prior tool results of 2 KB each
  (statements in the YAML-like text AgentDojo's tools return: IBANs, amounts, dates,
  subjects, URLs and addresses); the call's recipient, amount and subject are described
  against all of them;
- the same two with a 2 KB ``body`` argument (a mail-like text with a URL and an address
  inside), whose inside values are found and looked up too.

Records are computed when a policy first reads them (here: the recipient's, for the deny
rule), and results are scanned then, once. Then, outside the call: what recording and
scanning one 2 KB result costs (paid once per result), ``describe`` alone with every record
computed, and the ledger's size.

Target (issue 16): provenance adds <= 10 us per call with 100 prior results of 2 KB each.

One full run (2 shared cores, load average about 2.5; the plain call_tool of
bench_pipeline.py measured 23.5 us in the same minutes): no provenance 22.3 us, empty
session 29.8 (+7.5: the recipient's record, read by the rule), 100 prior results 33.7
(+11.4: the target missed by about 1.4 us here), with a 2 KB body 33.9 (+10.6; the body's
record is not read by the rule); recording and scanning one 2 KB result 827 us (once per
result, and only when a record is first asked for); the three records alone 13.4 us. The
cost hardly grows with the results before the call: it is reading the new argument's value;
the lookups themselves are constant-time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench import Contender, Summary, interleave, percentile, summarize

from clearance import Harness, MemoryJournal, Principal, Tool, ToolRegistry
from clearance.policy import LocalEvaluator
from clearance.provenance import Provenance

SEND = {
    "type": "object",
    "properties": {
        "recipient": {"type": "string"},
        "amount": {"type": "number"},
        "subject": {"type": "string"},
        "body": {"type": "string"},
    },
    "required": ["recipient", "amount", "subject"],
    "additionalProperties": False,
}
RULES = {"allow": ["bank.send_money"], "deny": ["bank.send_money(recipient.from=tool)"]}
BODY = (
    "Hello Bob, as discussed the invoice for the December rent is attached; the details "
    "are on https://portal.example-rent.com/invoices/2024/12 and questions go to "
    "billing@example-rent.com. Thanks, and see you on the 14th for the 3 items we noted. "
) * 9


async def sent(arguments: dict[str, Any], ctx: Any) -> str:
    return "ok"  # shorter than a literal: the empty session stays empty


def statement(n: int) -> str:
    """A 2 KB tool result in the YAML-like text AgentDojo's banking tools return."""
    lines = []
    k = 0
    while sum(len(line) + 1 for line in lines) < 2048:
        m = n * 100 + k
        lines += [
            f"- amount: {50 + m % 900}.{m % 100:02d}",
            f"  date: '2024-{1 + m % 12:02d}-{1 + m % 28:02d}'",
            f"  id: {m}",
            f"  recipient: GB{10 + m % 89}NWBK{m:014d}",
            f"  subject: Payment {m} for order {m * 7}",
            f"  note: see https://shop{m % 50}.example.com/o/{m} or mail s{m}@example.net",
        ]
        k += 1
    return "\n".join(lines)[:2048]


def registry() -> ToolRegistry:
    registry = ToolRegistry()
    registry.register("bank", [Tool("send_money", sent, input_schema=SEND)])
    registry.register("web", [Tool("get_page", sent, read_only=True)])
    return registry


class SendCall:
    """A harness and one session; ``call(n)`` sends money with new arguments."""

    def __init__(self, *, results: int, body: bool, provenance: bool = True) -> None:
        self.journal = MemoryJournal()
        # Without provenance, a deny rule on the same argument that reads its value (one
        # rule more costs the same in both).
        rules = RULES if provenance else {**RULES, "deny": ["bank.send_money(recipient=ZZ*)"]}
        self.harness = Harness(
            registry(),
            evaluator=LocalEvaluator(**rules),
            journal=self.journal,
            provenance=provenance,
        )
        self.results = results
        self.body = body
        self.session: Any = None

    async def start(self, stack: AsyncExitStack) -> None:
        await stack.enter_async_context(self.harness)
        self.session = await self.harness.create_session(principal=Principal("User", "alice"))
        if self.results:
            self.session.add_message(
                "user", "Please pay my rent to GB29NWBK60161331926819, 1200 EUR, subject rent"
            )
            for i in range(self.results):
                self.session.add_tool_result("web.get_page", f"r{i}", statement(i))

    async def call(self, n: int) -> None:
        arguments: dict[str, Any] = {
            "recipient": f"DE{10 + n % 89}3704{n:014d}",
            "amount": 10 + n % 1000,
            "subject": f"Rent {n}",
        }
        if self.body:
            arguments["body"] = f"{n} {BODY}"[:2048]
        outcome = await self.session.call_tool("bank__send_money", arguments, call_id=f"c{n}")
        if not outcome.ok:
            raise SystemExit(f"a benchmark call was refused: {outcome.text}")

    async def between(self) -> None:
        self.journal._events.clear()  # a long run must not grow memory


def timed(function: Any, runs: int) -> tuple[float, float]:
    """Median and p99 in microseconds of ``function(i)`` over ``runs`` calls."""
    clock = time.perf_counter_ns
    times = []
    for i in range(runs):
        start = clock()
        function(i)
        times.append((clock() - start) / 1000)
    return statistics.median(times), percentile(times, 0.99)


def outside(runs: int) -> dict[str, Any]:
    """Recording a 2 KB result and ``describe`` alone, and the ledger's size."""
    texts = [statement(1000 + i) for i in range(runs)]

    def record(i: int) -> None:
        ledger = Provenance()
        ledger.add_result("web.get_page", "r", texts[i])
        ledger.origin("x")  # results are scanned when a record is first asked for

    full = Provenance()
    full.add_message("user", "Please pay my rent to GB29NWBK60161331926819, 1200 EUR")
    for i in range(100):
        full.add_result("web.get_page", f"r{i}", statement(i))

    full.origin("x")

    def describe(i: int) -> None:
        dict(  # every record computed (a policy reads one: about a third of this)
            full.describe(
                {
                    "recipient": f"DE{10 + i % 89}3704{i:014d}",
                    "amount": 10 + i,
                    "subject": f"R {i}",
                }
            )
        )

    record_us = timed(record, runs)
    describe_us = timed(describe, runs * 10)
    return {
        "record_2kb_result_us": record_us,
        "describe_3_arguments_us": describe_us,
        "ledger_values_after_100_results": len(full._marks),
        "ledger_overflowed": full.overflowed,
    }


async def measure(rounds: int, block: int) -> list[Summary]:
    targets = {
        "no provenance": SendCall(results=0, body=False, provenance=False),
        "empty session": SendCall(results=0, body=False),
        "100 results of 2 KB": SendCall(results=100, body=False),
        "no provenance, 2 KB body": SendCall(results=0, body=True, provenance=False),
        "100 results, 2 KB body": SendCall(results=100, body=True),
    }
    contenders = [Contender(name, t.call, t.between) for name, t in targets.items()]
    async with AsyncExitStack() as stack:
        for target in targets.values():
            await target.start(stack)
        await interleave(contenders, rounds=rounds, block=block)
    return [summarize(c) for c in contenders]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short run")
    parser.add_argument("--json", action="store_true", help="print JSON")
    options = parser.parse_args()
    rounds, block, runs = (6, 200, 200) if options.quick else (20, 500, 1000)
    summaries = anyio.run(measure, rounds, block)
    extra = outside(runs)
    by_name = {s.name: s for s in summaries}
    added = by_name["100 results of 2 KB"].median - by_name["no provenance"].median
    added_empty = by_name["empty session"].median - by_name["no provenance"].median
    added_body = (
        by_name["100 results, 2 KB body"].median - by_name["no provenance, 2 KB body"].median
    )
    if options.json:
        print(
            json.dumps(
                {
                    "calls": [s.__dict__ for s in summaries],
                    "added_us": added,
                    "added_empty_us": added_empty,
                    "added_with_body_us": added_body,
                    **extra,
                },
                indent=2,
            )
        )
        return
    print("session.call_tool of bank.send_money (microseconds, same rounds)")
    print(f"{'':34}{'median':>8}{'p99':>9}   round medians")
    for s in summaries:
        print(f"{s.name:34}{s.median:8.1f}{s.p99:9.1f}   {s.range_text()}")
    print()
    print(f"provenance adds, empty session:        {added_empty:+.1f} us")
    print(f"provenance adds, 3 arguments:          {added:+.1f} us")
    print(f"provenance adds, with a 2 KB body:     {added_body:+.1f} us")
    med, p99 = extra["record_2kb_result_us"]
    print(f"recording + scanning one 2 KB result:  {med:.1f} us median, {p99:.1f} us p99")
    med, p99 = extra["describe_3_arguments_us"]
    print(f"all 3 records alone, 100 results:      {med:.1f} us median, {p99:.1f} us p99")
    print(
        f"ledger after 100 results:              {extra['ledger_values_after_100_results']} "
        f"values, overflowed: {extra['ledger_overflowed']}"
    )
    print()
    verdict = "met" if added <= 10 else "MISSED"
    print(
        f"Target (issue 16): provenance adds <= 10 us with 100 prior 2 KB results: {verdict} ({added:+.1f} us)"
    )


if __name__ == "__main__":
    main()
