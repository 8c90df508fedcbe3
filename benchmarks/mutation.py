"""Mutation testing of the code that decides (issue 20), one module at a time.

A mutant is a copy of a module with one small change (``<`` for ``<=``, ``True`` for
``False``, a string emptied, a call's argument dropped). A test suite that checks a rule
fails on the mutants that break it: the mutant is *killed*. A mutant that *survives*
is a change nobody would notice: either a gap in the tests, or an equivalent mutant
(the change cannot alter behaviour), listed with its reason in ``docs/mutation.md``.

For each module this copies the project (``clearance/``, ``tests/`` and the files tests
read) into a work directory, runs `mutmut <https://github.com/boxed/mutmut>`_ there on
that module alone with only the tests that cover it, and prints killed / survived /
timeout per module::

    python benchmarks/mutation.py                          # the whole deciding set
    python benchmarks/mutation.py clearance/facts/numbers.py
    python benchmarks/mutation.py clearance/policy/local.py --survivors
    python benchmarks/mutation.py clearance/facts/numbers.py --tests tests/facts/test_numbers.py
    python benchmarks/mutation.py --list                   # the modules and their tests

Runs under ``nice -n 19`` with one worker (``--jobs`` for more): the machine is shared.
A timeout counts as killed. Mutants mutmut never tested because it stopped early (the
clean tests failed, or no selected test covers the module) are counted *not checked*,
with the survivors. Survivors that match an entry of ``docs/mutation.md``'s list
of equivalent mutants are counted apart (``equivalent``); ``--survivors`` prints the
diff of every other one. The exit status is 1 when a module has an unlisted survivor.

Hypothesis runs with a fixed seed (``--hypothesis-seed=0``) so that a run repeats.
``--ref REV`` takes the project from a git revision instead of the working tree (a run
that others' uncommitted edits cannot move). ``--resume FILE`` tests again only the
mutants a run saved with ``--json FILE`` did not kill, and adds the ones it killed: new
tests are measured without testing every killed mutant again (the module itself must be
the one that run mutated, byte for byte).
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "DECIDING_SET",
    "Equivalent",
    "ModuleResult",
    "main",
    "parse_equivalents",
    "run_module",
]

ROOT = Path(__file__).resolve().parent.parent

# What the tests read beside clearance/ and tests/ (packs, examples, docs checked by tests).
_COPIED = ("clearance", "tests", "pyproject.toml", "policies", "examples", "docs", "README.md")

_FACTS_TESTS = (
    "tests/facts",
    "tests/harness/test_facts_stage.py",
    "tests/properties/test_r11_what_is_checked_is_what_runs.py",
    "tests/properties/test_r11_command_facts.py",
    "tests/attacks/test_url_fact_differentials.py",
    "tests/attacks/test_local_rules_on_commands.py",
    "tests/attacks/test_local_rules_canonical_spelling.py",
    "tests/attacks/test_cedar_number_edges.py",
    "tests/attacks/test_git_repository_config.py",
)
_GRANT_TESTS = (
    "tests/harness/test_grant_scopes.py",
    "tests/harness/test_approvals.py",
    "tests/harness/test_grant_revocation.py",
    "tests/harness/test_store_grants.py",
    "tests/properties/test_r5_once_means_once.py",
    "tests/properties/test_r12_revocation_is_immediate.py",
    "tests/properties/test_r3_deny_wins.py",
)
_LOCAL_TESTS = (
    "tests/policy/test_local.py",
    "tests/policy/test_local_globs.py",
    "tests/policy/test_local_numbers.py",
    "tests/policy/test_rules_hot_path.py",
    "tests/policy/test_evaluator_contract.py",
    "tests/attacks/test_local_rules_on_commands.py",
    "tests/attacks/test_local_rules_canonical_spelling.py",
    "tests/properties/test_r2_r4_authorization.py",
    "tests/properties/test_r3_deny_wins.py",
    "tests/properties/test_r3_provenance.py",
)
_CEDAR_TESTS = (
    "tests/policy/test_cedar_evaluator.py",
    "tests/policy/test_cedar_messages.py",
    "tests/policy/test_evaluator_contract.py",
    "tests/properties/test_r3_deny_wins_cedar.py",
    "tests/properties/test_r4_default_deny_cedar.py",
    "tests/properties/test_r10_same_decision_at_any_scale.py",
    "tests/attacks/test_cedar_number_edges.py",
    "tests/attacks/test_url_fact_differentials.py",
)
_STAGE_TESTS = (
    "tests/harness/test_pipeline.py",
    "tests/harness/test_facts_stage.py",
    "tests/harness/test_approvals.py",
    "tests/harness/test_grant_scopes.py",
    "tests/harness/test_host_runs_tools.py",
    "tests/harness/test_review_regressions.py",
    "tests/harness/test_durable_asks.py",
    "tests/harness/test_session_close.py",
    "tests/harness/test_journal_crash.py",
    "tests/harness/test_approvals_docs.py",
    "tests/harness/test_decide_stages.py",
    "tests/attacks/test_blind_asks.py",
    "tests/properties/test_r1_fail_closed.py",
    "tests/properties/test_r2_r4_authorization.py",
    "tests/properties/test_r2_r6_authorize.py",
    "tests/properties/test_r3_deny_wins.py",
    "tests/properties/test_r5_once_means_once.py",
    "tests/properties/test_r6_validated_arguments_only.py",
)

DECIDING_SET: dict[str, tuple[str, ...]] = {
    # Least likely to change under a run first (the order `all` runs them in).
    **{
        f"clearance/facts/{name}.py": _FACTS_TESTS
        for name in (
            "base",
            "numbers",
            "paths",
            "web",
            "command",
            "_command_argv",
            "_command_paths",
            "_command_words",
            "declared",
        )
    },
    "clearance/guardrails/paths.py": (
        "tests/guardrails/test_path_scope.py",
        "tests/properties/test_r9_scoped_paths.py",
        "tests/harness/test_facts_stage.py",
        "tests/facts/test_paths.py",
    ),
    "clearance/harness/grants.py": _GRANT_TESTS,
    "clearance/harness/approvals.py": _GRANT_TESTS,
    "clearance/policy/globs.py": _LOCAL_TESTS,
    "clearance/policy/_rules.py": _LOCAL_TESTS,
    "clearance/policy/local.py": _LOCAL_TESTS,
    "clearance/policy/cedar/_verdicts.py": _CEDAR_TESTS,
    "clearance/policy/cedar/_plans.py": _CEDAR_TESTS,
    "clearance/harness/_approval.py": _STAGE_TESTS,
    "clearance/harness/_stages.py": _STAGE_TESTS,
}
"""Each module of the deciding set, with the tests that cover it."""

# Exit codes of a mutant's test run, as mutmut records them (mutmut.stats).
_KILLED = {1, 3}
_SURVIVED = {0}
_NO_TESTS = {5, 33}
_TIMEOUT = {24, -24, 36, 152, 255}


@dataclass(frozen=True)
class Equivalent:
    """A surviving mutant that cannot change behaviour, as ``docs/mutation.md`` lists it."""

    module: str
    function: str
    change: tuple[str, ...]
    """The diff's removed and added lines (``-``/``+`` and the text, stripped)."""
    reason: str
    context: tuple[str, ...] = ()
    """Unchanged lines the entry shows (stripped): the mutant's diff must show them too, so
    that a change that recurs in the function (``return False`` to ``return True``) is
    matched only where the entry says."""

    def matches(self, module: str, function: str, diff: str) -> bool:
        """Whether a survivor of ``function`` in ``module``, with this ``diff``, is this one."""
        if (module, function, _diff_change(diff)) != (self.module, self.function, self.change):
            return False
        shown = set(_context_lines(diff))
        return all(line in shown for line in self.context)


@dataclass
class ModuleResult:
    """One module's mutants, by outcome."""

    module: str
    killed: int = 0
    timeout: int = 0
    survived: list[str] = field(default_factory=list)
    equivalent: list[str] = field(default_factory=list)
    no_tests: list[str] = field(default_factory=list)
    not_checked: list[str] = field(default_factory=list)
    """Never tested: mutmut stopped before it reached them (its log says why)."""
    other: Counter[str] = field(default_factory=Counter)
    diffs: dict[str, str] = field(default_factory=dict)
    source_sha256: str = ""
    """The SHA-256 of the mutated module's text."""

    @property
    def total(self) -> int:
        return (
            self.killed
            + self.timeout
            + len(self.survived)
            + len(self.equivalent)
            + len(self.no_tests)
            + len(self.not_checked)
            + sum(self.other.values())
        )

    @property
    def score(self) -> float:
        """Killed and timed out, of the mutants that are not equivalent."""
        counted = self.total - len(self.equivalent)
        return 100.0 * (self.killed + self.timeout) / counted if counted else 100.0


def parse_equivalents(text: str) -> list[Equivalent]:
    """Read the equivalent mutants out of ``docs/mutation.md``.

    Each entry is a level-3 heading naming the module and the function, a ``diff`` block
    with the mutated lines (or several blocks in a row, one mutant each, for mutants that
    share one reason), and the reason below it. Unchanged lines in a block (a leading
    space) must appear in the mutant's diff too: they pin a change that recurs in the
    function to one place::

        ### `clearance/facts/numbers.py` `NumberFact.canonical`
        ```diff
        -        if len(text) > LIMIT:
        +        if len(text) >= LIMIT:
        ```
        Why the change cannot alter a decision.

    Args:
        text: The document.

    Returns:
        The entries (one per diff block), in the order of the document.
    """
    heading = re.compile(r"^### `(?P<module>[^`]+)` `(?P<function>[^`]+)`\s*$")
    entries: list[Equivalent] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = heading.match(lines[i])
        i += 1
        if not match:
            continue
        changes: list[tuple[tuple[str, ...], tuple[str, ...]]] = []
        while i < len(lines) and not lines[i].startswith("#"):
            if not lines[i].startswith("```diff"):
                if lines[i].strip():
                    break  # the reason
                i += 1
                continue
            i += 1
            block: list[str] = []
            while i < len(lines) and not lines[i].startswith("```"):
                block.append(lines[i])
                i += 1
            i += 1
            text = "\n".join(block)
            changes.append((_diff_change(text), _context_lines(text)))
        reason: list[str] = []
        while i < len(lines) and not lines[i].startswith("#"):
            reason.append(lines[i].strip())
            i += 1
        entries.extend(
            Equivalent(
                module=match["module"],
                function=match["function"],
                change=change,
                reason=" ".join(part for part in reason if part),
                context=context,
            )
            for change, context in changes
        )
    return entries


def _change_line(line: str) -> str:
    if line[:1] in "+-" and not line.startswith(("+++", "---")):
        return line[0] + line[1:].strip()
    return ""


def _diff_change(diff: str) -> tuple[str, ...]:
    return tuple(line for line in map(_change_line, diff.splitlines()) if line)


def _context_lines(diff: str) -> tuple[str, ...]:
    return tuple(line.strip() for line in diff.splitlines() if line[:1] == " " and line.strip())


def function_of(mutant: str) -> str:
    """``Class.method`` or ``function`` of a mutmut mutant name."""
    mangled = mutant.partition("__mutmut_")[0].rpartition(".")[2]
    if mangled.startswith("x_"):
        return mangled[2:]
    return ".".join(part for part in mangled[1:].split("ǁ") if part)


def _copy_project(work: Path, *, ref: str | None) -> None:
    if ref is not None:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", "--format=tar", ref, *_COPIED],
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(work)], input=archive, check=True)
        return
    ignore = shutil.ignore_patterns("__pycache__", ".hypothesis", "*.pyc", "mutants")
    for name in _COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, work / name, ignore=ignore)
        elif source.exists():
            shutil.copy2(source, work / name)


def _source_sha256(work: Path, module: str) -> str:
    return hashlib.sha256((work / module).read_bytes()).hexdigest()


def _mutmut_config(module: str, tests: Sequence[str]) -> str:
    settings = {
        "source_paths": ["clearance"],
        "only_mutate": [module],
        "pytest_add_cli_args_test_selection": list(tests),
        # A fixed seed: a Hypothesis test kills a mutant in every run or in none.
        "pytest_add_cli_args": ["-p", "no:cacheprovider", "--hypothesis-seed=0"],
        "also_copy": [name for name in _COPIED if name not in ("clearance", "tests")],
        "use_git_change_detection": False,
        "use_setproctitle": False,
    }
    body = "\n".join(f"{key} = {json.dumps(value)}" for key, value in settings.items())
    return f"\n[tool.mutmut]\n{body}\n"


def _mutmut(work: Path, args: Sequence[str], *, log: Path, verbose: bool) -> int:
    mutmut = Path(sys.executable).with_name("mutmut")
    command = ["nice", "-n", "19", str(mutmut), *args]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    with log.open("a") as out:
        out.write(f"$ {shlex.join(command)}\n")
        out.flush()
        stdout = None if verbose else out
        return subprocess.run(
            command, cwd=work, stdout=stdout, stderr=subprocess.STDOUT, env=env, check=False
        ).returncode


_DIFFS_SCRIPT = """
import json, sys
from mutmut.mutation.diff_apply import get_diff_for_mutant
path = sys.argv[1]
print(json.dumps({name: get_diff_for_mutant(name, path=path) for name in sys.argv[2:]}))
"""


def _diffs(work: Path, module: str, names: Sequence[str]) -> dict[str, str]:
    if not names:
        return {}
    output = subprocess.run(
        [sys.executable, "-c", _DIFFS_SCRIPT, module, *names],
        cwd=work,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    diffs: dict[str, str] = json.loads(output)
    return diffs


def collect(
    work: Path, module: str, equivalents: Sequence[Equivalent], *, only: Sequence[str] = ()
) -> ModuleResult:
    """Read a finished run's outcomes for ``module`` out of its work directory.

    Args:
        work: The directory the run was made in.
        module: The module, as a path from the project root.
        equivalents: The listed equivalent mutants.
        only: The mutant name globs the run was limited to (the others are left out).
    """
    meta = json.loads((work / "mutants" / f"{module}.meta").read_text())
    codes: dict[str, int | None] = {
        name: code
        for name, code in meta["exit_code_by_key"].items()
        if not only or any(fnmatch.fnmatchcase(name, pattern) for pattern in only)
    }
    result = ModuleResult(module, source_sha256=_source_sha256(work, module))
    survivors: list[str] = []
    for name, code in sorted(codes.items(), key=lambda item: _mutant_order(item[0])):
        if code in _KILLED:
            result.killed += 1
        elif code in _TIMEOUT:
            result.timeout += 1
        elif code in _SURVIVED:
            survivors.append(name)
        elif code in _NO_TESTS:
            result.no_tests.append(name)
        elif code is None:
            result.not_checked.append(name)
        else:
            result.other[f"exit {code}"] += 1
    result.diffs = _diffs(work, module, survivors + result.no_tests)
    for name in survivors:
        function, diff = function_of(name), result.diffs[name]
        listed = any(e.matches(module, function, diff) for e in equivalents)
        (result.equivalent if listed else result.survived).append(name)
    return result


def resumed(previous: dict[str, object], result: ModuleResult) -> ModuleResult:
    """``result`` of a run over ``previous``'s unkilled mutants, with the ones it killed.

    Args:
        previous: One module's entry of a ``--json`` file.
        result: The new run's result, limited to those mutants.

    Raises:
        ValueError: the module is not the one the previous run mutated.
    """
    if previous.get("source_sha256") != result.source_sha256:
        raise ValueError(f"{result.module} changed since the run being resumed: run it whole again")
    killed, timeout = previous["killed"], previous["timeout"]
    assert isinstance(killed, int) and isinstance(timeout, int)
    result.killed += killed
    result.timeout += timeout
    return result


def _unkilled(previous: dict[str, object]) -> list[str]:
    names: list[str] = []
    for key in ("survived", "equivalent", "no_tests", "not_checked"):
        value = previous.get(key, [])
        assert isinstance(value, list)
        names += value
    return names


def _mutant_order(name: str) -> tuple[str, int]:
    head, _, number = name.rpartition("__mutmut_")
    return head, int(number) if number.isdigit() else 0


def run_module(
    module: str,
    tests: Sequence[str],
    *,
    work: Path,
    jobs: int = 1,
    ref: str | None = None,
    only: Sequence[str] = (),
    verbose: bool = False,
) -> Path:
    """Run mutmut on one module in ``work`` (made here) and return its log's path.

    Args:
        module: The module, as a path from the project root.
        tests: The test files or directories that cover it.
        work: An empty or missing directory to run in.
        jobs: Mutants tested at once.
        ref: A git revision to take the project from, instead of the working tree.
        only: Mutant name globs (``*x_canonical*``) to run instead of all of the module's.
        verbose: Show mutmut's own output.

    Raises:
        RuntimeError: mutmut stopped before it made the mutants (its log says why). When
            it stops after (the clean tests fail, no test covers the module), the
            mutants it did not test are left "not checked" in its meta file.
    """
    work.mkdir(parents=True, exist_ok=True)
    _copy_project(work, ref=ref)
    with (work / "pyproject.toml").open("a") as pyproject:
        pyproject.write(_mutmut_config(module, tests))
    log = work / "mutmut.log"
    status = _mutmut(work, ["run", "--max-children", str(jobs), *only], log=log, verbose=verbose)
    if not (work / "mutants" / f"{module}.meta").exists():
        raise RuntimeError(f"mutmut stopped with status {status} on {module}; see {log}")
    if status != 0:
        print(
            f"mutmut stopped with status {status} on {module}; its untested mutants are"
            f" counted 'not checked'; see {log}",
            file=sys.stderr,
        )
    return log


def _table(results: Sequence[ModuleResult]) -> str:
    header = (
        f"{'module':<38} {'mutants':>7} {'killed':>6} {'timeout':>7} {'survived':>8}"
        f" {'equiv':>5} {'no tests':>8} {'unchecked':>9} {'score':>6}"
    )
    shown = [*results, _total(results)] if len(results) > 1 else results
    return "\n".join([header, "-" * len(header), *map(_row, shown)])


def _row(r: ModuleResult) -> str:
    other = ", ".join(f"{n} {k}" for k, n in sorted(r.other.items()))
    return (
        f"{r.module:<38} {r.total:>7} {r.killed:>6} {r.timeout:>7} {len(r.survived):>8}"
        f" {len(r.equivalent):>5} {len(r.no_tests):>8} {len(r.not_checked):>9}"
        f" {r.score:>5.1f}%" + (f"  ({other})" if other else "")
    )


def _total(results: Sequence[ModuleResult]) -> ModuleResult:
    total = ModuleResult("total")
    for r in results:
        total.killed += r.killed
        total.timeout += r.timeout
        total.survived += r.survived
        total.equivalent += r.equivalent
        total.no_tests += r.no_tests
        total.not_checked += r.not_checked
        total.other += r.other
    return total


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (see the module's docstring)."""
    parser = argparse.ArgumentParser(
        description="Mutation testing of the deciding set, one module at a time."
    )
    parser.add_argument(
        "modules", nargs="*", help="modules (paths from the project root); default: all"
    )
    parser.add_argument("--tests", nargs="+", help="the tests to run (default: the module's own)")
    parser.add_argument("--jobs", type=int, default=1, help="mutants tested at once (default 1)")
    parser.add_argument("--ref", help="take the project from this git revision")
    parser.add_argument("--only", nargs="+", default=[], help="mutant name globs to run")
    parser.add_argument("--work", type=Path, help="work directory (kept; default: a temporary one)")
    parser.add_argument("--survivors", action="store_true", help="print each survivor's diff")
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    parser.add_argument(
        "--resume",
        type=Path,
        help="test again only the mutants this --json file's run did not kill",
    )
    parser.add_argument("--verbose", action="store_true", help="show mutmut's output")
    parser.add_argument("--list", action="store_true", help="list the deciding set and exit")
    args = parser.parse_args(argv)

    if args.list:
        for module, tests in DECIDING_SET.items():
            print(module)
            for test in tests:
                print(f"    {test}")
        return 0
    modules = args.modules or list(DECIDING_SET)
    for module in modules:
        if not (ROOT / module).is_file() or not module.endswith(".py"):
            parser.error(f"no such module: {module} (a .py path from the project root)")
        if not args.tests and module not in DECIDING_SET:
            parser.error(f"{module} is not in the deciding set: name its tests with --tests")
    equivalents = parse_equivalents((ROOT / "docs" / "mutation.md").read_text())
    previous: dict[str, dict[str, object]] = {}
    if args.resume:
        previous = {entry["module"]: entry for entry in json.loads(args.resume.read_text())}
        missing = [module for module in modules if module not in previous]
        if missing:
            parser.error(f"{args.resume} has no run of {', '.join(missing)}")
        if args.only:
            parser.error("--resume chooses the mutants itself: drop --only")

    results: list[ModuleResult] = []
    base = args.work or Path(tempfile.mkdtemp(prefix="clearance-mutation-"))
    for module in modules:
        work = base / module.replace("/", "_").removesuffix(".py")
        if work.exists():
            shutil.rmtree(work)
        tests = args.tests or DECIDING_SET[module]
        only = _unkilled(previous[module]) if module in previous else args.only
        print(f"{module}: {len(tests)} test paths, in {work}", flush=True)
        if module in previous and not only:
            print(f"{module}: every mutant was killed in {args.resume}", flush=True)
            result = ModuleResult(module, source_sha256=str(previous[module]["source_sha256"]))
            result = resumed(previous[module], result)
            results.append(result)
            continue
        run_module(
            module,
            tests,
            work=work,
            jobs=args.jobs,
            ref=args.ref,
            only=only,
            verbose=args.verbose,
        )
        result = collect(work, module, equivalents, only=only)
        if module in previous:
            result = resumed(previous[module], result)
        results.append(result)
        print(_table([result]), flush=True)
        if args.survivors:
            for name in result.survived + result.no_tests:
                status = "survived" if name in result.survived else "no tests"
                print(f"\n# {name}: {status}\n{result.diffs[name]}")
    print()
    print(_table(results))
    if args.json:
        args.json.write_text(
            json.dumps(
                [
                    {
                        "module": r.module,
                        "mutants": r.total,
                        "killed": r.killed,
                        "timeout": r.timeout,
                        "survived": r.survived,
                        "equivalent": r.equivalent,
                        "no_tests": r.no_tests,
                        "not_checked": r.not_checked,
                        "score": round(r.score, 1),
                        "source_sha256": r.source_sha256,
                        "diffs": {name: r.diffs[name] for name in r.survived + r.no_tests},
                    }
                    for r in results
                ],
                indent=2,
            )
        )
    if args.work is None:
        shutil.rmtree(base, ignore_errors=True)
    return 1 if any(r.survived or r.no_tests or r.not_checked for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
