"""What kernel confinement (rule R15) costs a ``shell.run`` call and a ``process.start``.

The same command through the real handler, confined (the Landlock exec wrapper: a Python
interpreter that walks the workspace for secrets, builds the ruleset and execs the program)
and unconfined (``Confinement(kind="none")``), timed call by call in interleaved blocks so
that machine noise hits every row alike. Two commands (``true``, and ``git status`` in a
small repository) in two workspaces: a small one (20 files, a ``.env`` at the top) and a
larger one (5,000 files in 250 directories, ``.env`` files in some), where the walk for
secrets costs more. A ``process`` row is one long-running process's round trip through
the real ``process.*`` handlers: ``process.start`` of ``cat``, ``process.write`` of a line,
``process.read`` until it comes back (the program runs: the wrapper has confined it and
exec'd), and ``process.stop``. The table shows the median and p99 in milliseconds, and the
ratio.

    python benchmarks/bench_confinement.py [--rounds 6] [--block 10] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from _bench import Contender, interleave, summarize

from clearance import CallContext, CallToolResult, Principal
from clearance.toolsets import process_tools, shell_tools
from clearance.toolsets.confinement import Confinement, landlock_abi

CTX = CallContext(
    session_id="s",
    turn_id=None,
    call_id="c",
    qualified_name="shell.run",
    model_alias="shell__run",
    principal=Principal("User", "bench"),
)


def small(base: Path) -> Path:
    work = base / "small"
    (work / "src").mkdir(parents=True)
    for i in range(20):
        (work / "src" / f"m{i}.py").write_text(f"x = {i}\n")
    (work / ".env").write_text("API_KEY=bench\n")
    return work


def large(base: Path) -> Path:
    work = base / "large"
    for d in range(250):
        directory = work / f"pkg{d // 25}" / f"mod{d}"
        directory.mkdir(parents=True)
        for f in range(20):
            (directory / f"f{f}.py").write_text("pass\n")
        if d % 50 == 0:
            (directory / ".env").write_text("API_KEY=bench\n")
    (work / ".env").write_text("API_KEY=bench\n")
    return work


def contender(name: str, work: Path, command: str, confinement: Confinement) -> Contender:
    (tool,) = shell_tools(work, allowed_programs=None, confinement=confinement)

    async def call(i: int) -> object:
        result = tool.handler({"command": command}, CTX)
        assert isinstance(result, CallToolResult) and not result.is_error, result.text
        return result

    return Contender(name, call)


def process_contender(name: str, work: Path, confinement: Confinement) -> Contender:
    start, read, write, stop = (t.handler for t in process_tools(work, confinement=confinement))

    async def call(i: int) -> object:
        started = start({"command": "cat"}, CTX)
        assert isinstance(started, CallToolResult) and not started.is_error, started.text
        process_id = json.loads(started.text)["id"]
        write({"id": process_id, "input": f"line {i}\n"}, CTX)
        seen = ""
        while f"line {i}" not in seen:
            answer = read({"id": process_id, "wait": 5}, CTX)
            assert isinstance(answer, CallToolResult) and not answer.is_error, answer.text
            seen += json.loads(answer.text)["output"]
        return stop({"id": process_id}, CTX)

    return Contender(name, call)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6, help="interleaved rounds")
    parser.add_argument("--block", type=int, default=10, help="calls per contender per round")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    abi = landlock_abi()
    if abi < 1:
        raise SystemExit("the kernel offers no Landlock: nothing to compare")
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        workspaces = {"small": small(base), "large": large(base)}
        commands = {"true": "true"}
        if shutil.which("git"):
            for work in workspaces.values():
                subprocess.run(["git", "init", "-q", str(work)], check=True)
            commands["git status"] = "git status --short"
        contenders = []
        for ws_name, work in workspaces.items():
            for cmd_name, command in commands.items():
                for mode in ("unconfined", "confined"):
                    confinement = Confinement(kind="none" if mode == "unconfined" else "landlock")
                    name = f"{ws_name}|{cmd_name}|{mode}"
                    contenders.append(contender(name, work, command, confinement))
            for mode in ("unconfined", "confined"):
                confinement = Confinement(kind="none" if mode == "unconfined" else "landlock")
                name = f"{ws_name}|process|{mode}"
                contenders.append(process_contender(name, work, confinement))
        asyncio.run(interleave(contenders, rounds=args.rounds, block=args.block, warmup=3))
        rows = [summarize(c) for c in contenders]
    medians = {r.name: r.median for r in rows}
    table = []
    for r in rows:
        ws_name, cmd_name, mode = r.name.split("|")
        base_median = medians[f"{ws_name}|{cmd_name}|unconfined"]
        table.append(
            {
                "workspace": ws_name,
                "command": cmd_name,
                "mode": mode,
                "calls": r.calls,
                "median_ms": round(r.median / 1000, 2),
                "p99_ms": round(r.p99 / 1000, 2),
                "round_medians_ms": f"{r.low / 1000:.1f}-{r.high / 1000:.1f}",
                "x_unconfined": round(r.median / base_median, 2),
            }
        )
    if args.json:
        print(json.dumps({"abi": abi, "rows": table}, indent=2))
        return
    print(
        f"Landlock ABI {abi}; milliseconds per shell.run call, or per process round trip "
        "(start, write, read it back, stop), through the real handlers"
    )
    header = f"{'workspace':<10} {'command':<11} {'mode':<11} {'calls':>6} {'median':>8}"
    print(header + f" {'p99':>8} {'rounds':>11} {'x':>6}")
    for row in table:
        print(
            f"{row['workspace']:<10} {row['command']:<11} {row['mode']:<11} {row['calls']:>6} "
            f"{row['median_ms']:>8.2f} {row['p99_ms']:>8.2f} {row['round_medians_ms']:>11} "
            f"{row['x_unconfined']:>6.2f}"
        )
    print(f"(load average while running: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
