"""Per-call cost against the number of rules: clearance, toolwarden, tollgate, raw cedarpy.

Run: ``python benchmarks/bench_scaling.py`` (``--quick``: up to 10,000 rules and fewer
calls; ``--max N`` caps the sizes; ``--plot FILE``; ``--json``). The full run loads
100,000 Cedar policies (about 1.5 minutes and 3 GB on the development VM).

The scenario is ``_peers.py``'s: an allowed ``read_file`` of a new path every call, its two
rules (allow ``src/``, deny ``*.env``) beside ``rules - 2`` others spread over 1,000 other
tools and, past 1,000 rules, over 100 principals. At each size, in interleaved rounds
(``_bench.py``), one call through:

* ``clearance local``: ``session.call_tool`` with ``LocalEvaluator`` rules (its rules name
  no principal: past 1,000 rules a tool has several), schema validation, ``MemoryJournal``;
* ``clearance Cedar``: the same ``call_tool`` with ``CedarEvaluator`` policies;
* ``toolwarden``: its wrapped call (decision only);
* ``tollgate``: ``execute_async`` (its YAML rules are set on the evaluator directly past
  10,000 rules: parsing 100,000 rules of YAML takes minutes and is not part of a call);
* ``cedarpy``: ``cedarpy.is_authorized`` with the whole set parsed once into handles (the
  decision alone, no pipeline), as an integration without slicing would call it;
* ``Cedar floor``: cedarpy's lowest-level call on a set of only the called tool's two
  policies, with only the context they read: Cedar's own cost, under any library.

Before timing, the Cedar evaluator's decision, reasons and errors on sample calls (allowed,
forbidden, not permitted) are checked against cedarpy on the whole set (rule R10).

Targets (issue 18): ``call_tool`` with Cedar <= 25 us at 1, 100, 10,000 and 100,000
policies; with local rules <= 10 us and flat from 3 to 1,000 rules.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import cedarpy

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench import Contender, Summary, interleave, summarize
from _peers import cedar_rules, local_rules, tollgate_call, tool_names, toolwarden_call

from clearance import Harness, MemoryJournal, Principal, Tool, ToolRegistry
from clearance.policy import AuthzRequest, LocalEvaluator, SessionInfo
from clearance.policy.cedar import CedarEvaluator

SIZES = (3, 100, 1_000, 10_000, 100_000)
LOCAL_MAX = 10_000  # past this, local rules would need ever more tools registered
SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
    "required": ["path"],
    "additionalProperties": False,
}
RESULTS = Path(__file__).resolve().parent / "results"


async def noop(arguments: dict[str, Any], ctx: Any) -> str:
    return "ok"


def registry() -> ToolRegistry:
    registry = ToolRegistry()
    registry.register("files", [Tool("read_file", noop, input_schema=SCHEMA, read_only=True)])
    for namespace, names in tool_names():
        registry.register(
            namespace, [Tool(n, noop, input_schema=SCHEMA, read_only=True) for n in names]
        )
    return registry


async def clearance_call(
    stack: AsyncExitStack, evaluator: Any
) -> tuple[Callable[[int], Awaitable[None]], Callable[[], Awaitable[None]], Any]:
    """``call(n)``, ``between()`` and the session of a harness over ``evaluator``."""
    journal = MemoryJournal()
    harness = await stack.enter_async_context(
        Harness(registry(), evaluator=evaluator, journal=journal)
    )
    session = await harness.create_session(principal=Principal("User", "alice"))

    async def call(n: int) -> None:
        arguments = {"path": f"src/app/{n}.py", "limit": n}
        outcome = await session.call_tool("files__read_file", arguments, call_id=f"c{n}")
        if not outcome.ok:
            raise SystemExit(f"a benchmark call was refused: {outcome.text}")

    async def between() -> None:
        journal._events.clear()  # untimed: a long run must not grow memory

    return call, between, session


class Cedarpy:
    """The scenario's policies as a whole-set ``PolicySet`` and entities, for
    ``cedarpy.is_authorized`` (and for the R10 check)."""

    def __init__(self, text: str, tools: list[Tool]) -> None:
        entities = [
            {
                "uid": {"type": "Tool", "id": t.qualified_name},
                "attrs": {
                    "namespace": t.namespace,
                    "read_only": t.read_only,
                    "source": "callback",
                },
                "parents": [{"type": "Namespace", "id": t.namespace}],
            }
            for t in tools
        ]
        entities += [
            {
                "uid": {"type": "Action", "id": t.qualified_name},
                "attrs": {},
                "parents": [
                    {"type": "Action", "id": "call_tool"},
                    {"type": "Action", "id": "read_only" if t.read_only else "mutating"},
                    {"type": "Action", "id": f"ns:{t.namespace}"},
                ],
            }
            for t in tools
        ]
        self.policies = cedarpy.PolicySet.from_str(text)
        self.entities = cedarpy.Entities.from_json_str(json.dumps(entities))

    def request(self, n: int, path: str | None = None) -> dict[str, Any]:
        return {
            "principal": {"type": "User", "id": "alice"},
            "action": {"type": "Action", "id": "files.read_file"},
            "resource": {"type": "Tool", "id": "files.read_file"},
            "context": {
                "input": {"path": path or f"src/app/{n}.py", "limit": n},
                "session": {"id": "s"},  # no turn: Cedar has no null
                "tool": {"read_only": True, "annotations": {}},
            },
        }

    async def call(self, n: int) -> None:
        cedarpy.is_authorized(self.request(n), self.policies, self.entities)


class CedarFloor:
    """Cedar itself: cedarpy's lowest-level call on a set of only the called tool's two
    policies, with only the context they read. What a decision costs without Python
    around it, whatever a library does: the floor under ``clearance Cedar``."""

    def __init__(self, whole: Cedarpy) -> None:
        from cedarpy import _internal

        self.batch = _internal.is_authorized_batch
        self.policies = cedarpy.PolicySet.from_str(cedar_rules(2))
        self.entities = whole.entities._inner

    async def call(self, n: int) -> None:
        request = {
            "principal": {"type": "User", "id": "alice"},
            "action": {"type": "Action", "id": "files.read_file"},
            "resource": {"type": "Tool", "id": "files.read_file"},
            "context": f'{{"input": {{"path": "src/app/{n}.py"}}}}',
        }
        self.batch([request], self.policies, self.entities, None, False)


def check_r10(evaluator: CedarEvaluator, whole: Cedarpy, tool: Tool) -> int:
    """The evaluator (sliced) against cedarpy on the whole set, on sample calls: same
    decision, same reasons (by ``@id``), same number of errors. Returns the calls checked.

    Raises:
        SystemExit: they differ.
    """
    principal, session = Principal("User", "alice"), SessionInfo("s")
    paths = ["src/app/1.py", "src/.env", "docs/a.md", "src/a/b/c.py", "x.env"]
    for n, path in enumerate(paths):
        ours = evaluator.evaluate(
            AuthzRequest(principal, tool.info, {"path": path, "limit": n}, session)
        )
        theirs = cedarpy.is_authorized(whole.request(n, path), whole.policies, whole.entities)
        labels = theirs.diagnostics.id_annotations_by_reason
        their_reasons = {labels.get(r, r) for r in theirs.diagnostics.reasons}
        same = (
            (ours.effect != "deny") == theirs.allowed
            and set(ours.reasons) == their_reasons
            and len(ours.errors) == len(theirs.diagnostics.errors)
        )
        if not same:
            raise SystemExit(f"R10: {path}: clearance {ours} but the whole set says {theirs}")
    return len(paths)


def block_for(cost_us: float, quick: bool) -> int:
    """Calls per round for a contender costing ``cost_us``: about 20 ms a block."""
    budget = 5_000 if quick else 20_000
    return max(3, min(300, int(budget / max(cost_us, 1.0))))


async def calibrate(contender: Contender) -> float:
    """Rough microseconds per call (the median of a few, after a few warm calls), to size
    its blocks: a median, so that one call the machine delayed does not size them."""
    for _ in range(3):
        contender.counter += 1
        await contender.call(contender.counter)
    times = []
    for _ in range(9):
        contender.counter += 1
        start = time.perf_counter()
        await contender.call(contender.counter)
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


async def measure_size(
    rules: int, rounds: int, quick: bool, folder: Path, *, cedar_only: bool = False
) -> list[Summary]:
    """Every contender that runs at ``rules`` rules, interleaved (``cedar_only``: clearance
    Cedar, cedarpy on the whole set and the Cedar floor)."""
    tools = list(registry())
    contenders: list[Contender] = []
    async with AsyncExitStack() as stack:
        cedar_size = 1 if rules == 3 else rules  # Cedar's smallest set: the one permit
        text = cedar_rules(cedar_size)
        whole = Cedarpy(text, tools)
        evaluator = CedarEvaluator(text)
        call, between, _ = await clearance_call(stack, evaluator)
        read_file = next(t for t in tools if t.qualified_name == "files.read_file")
        checked = check_r10(evaluator, whole, read_file)
        print(f"  {cedar_size:>7,} Cedar policies: R10 checked on {checked} calls", file=sys.stderr)
        contenders.append(Contender(f"clearance Cedar|{cedar_size}", call, between))
        contenders.append(Contender(f"cedarpy whole set|{cedar_size}", whole.call))
        contenders.append(Contender(f"Cedar floor|{cedar_size}", CedarFloor(whole).call))
        if rules <= LOCAL_MAX and not cedar_only:
            call, between, _ = await clearance_call(stack, LocalEvaluator(**local_rules(rules)))
            contenders.append(Contender(f"clearance local|{rules}", call, between))
        if not cedar_only:
            contenders += peers(rules, folder)
        # Each contender's block is sized to its cost, so that a round stays short even
        # where one call takes tens of milliseconds (cedarpy on 100,000 policies).
        blocks = {c.name: block_for(await calibrate(c), quick) for c in contenders}
        await interleave(contenders, rounds=rounds, block=blocks, warmup=20)
        summaries = [summarize(c) for c in contenders]
    gc.collect()
    return summaries


def peers(rules: int, folder: Path) -> list[Contender]:
    """toolwarden and tollgate at ``rules`` rules (those installed)."""
    found: list[Contender] = []
    try:
        found.append(Contender(f"toolwarden|{rules}", toolwarden_call(rules)))
    except ImportError:
        pass
    try:
        call_fn, clear = tollgate_call(rules, folder)

        async def empty() -> None:
            clear()

        found.append(Contender(f"tollgate|{rules}", call_fn, empty))
    except ImportError:
        pass
    return found


def plot(rows: dict[str, list[tuple[int, Summary]]], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(8, 5))
    styles = {
        "clearance local": "o-",
        "clearance Cedar": "s-",
        "toolwarden": "^--",
        "tollgate": "v--",
        "cedarpy whole set": "x:",
        "Cedar floor": "+:",
    }
    for name, points in rows.items():
        xs = [size for size, _ in points]
        ax.plot(xs, [s.median for _, s in points], styles.get(name, "o-"), label=name)
        ax.fill_between(xs, [s.low for _, s in points], [s.high for _, s in points], alpha=0.15)
    ax.axhline(25, color="grey", linestyle=":", linewidth=1, label="25 us (Cedar target)")
    ax.axhline(10, color="grey", linestyle="-.", linewidth=1, label="10 us (local target)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("rules / policies in the set (the called tool's own: 2)")
    ax.set_ylabel("median per call, microseconds (band: per-round medians)")
    ax.set_title("One allowed call, new arguments each time, by the size of the rule set")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="up to 10,000 rules, fewer calls")
    parser.add_argument("--max", type=int, default=None, help="largest rule count to run")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--plot", type=Path, default=RESULTS / "policy_scaling.png")
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args(argv)
    logging.disable(logging.WARNING)  # most of the 1,000 tools are ungoverned by design
    limit = options.max or (10_000 if options.quick else SIZES[-1])
    rounds = options.rounds or (3 if options.quick else 10)
    rows: dict[str, list[tuple[int, Summary]]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for rules in (s for s in SIZES if s <= limit):
            print(f"{rules:>7,} rules ...", file=sys.stderr)
            for summary in anyio.run(measure_size, rules, rounds, options.quick, Path(folder)):
                name, size = summary.name.split("|")
                rows.setdefault(name, []).append((int(size), summary))
    if options.json:
        print(
            json.dumps(
                {name: [(size, s.__dict__) for size, s in points] for name, points in rows.items()},
                indent=2,
            )
        )
    else:
        report(rows)
    if plot(rows, options.plot):
        print(f"plot: {options.plot}")
    else:
        print("plot skipped: matplotlib is not installed (pip install -e '.[bench]')")
    return 0


def report(rows: dict[str, list[tuple[int, Summary]]]) -> None:
    print("Median microseconds per call (range of per-round medians), new arguments each call")
    names = list(rows)
    print(f"{'rules':>8}" + "".join(f"{n:>22}" for n in names))
    sizes = sorted({size for points in rows.values() for size, _ in points})
    for size in sizes:
        cells = []
        for name in names:
            found = [s for sz, s in rows[name] if sz == size]
            cells.append(f"{found[0].median:>9.1f} ({found[0].range_text()})" if found else "")
        print(f"{size:>8,}" + "".join(f"{c:>22}" for c in cells))
    print()
    print("Targets (issue 18)")
    cedar = dict(rows.get("clearance Cedar", []))
    for size in (1, 100, 10_000, 100_000):
        if size in cedar:
            median = cedar[size].median
            verdict = "met" if median <= 25 else "MISSED"
            print(
                f"  {verdict:7} call_tool with Cedar <= 25 us at {size:>7,} policies: {median:.1f} us"
            )
    local = dict(rows.get("clearance local", []))
    if 3 in local and 1_000 in local:
        flat = local[1_000].median / local[3].median
        print(
            f"  {'met' if flat <= 1.15 else 'MISSED':7} local rules flat from 3 to 1,000: "
            f"{local[3].median:.1f} -> {local[1_000].median:.1f} us ({flat:.2f}x)"
        )


if __name__ == "__main__":
    sys.exit(main())
