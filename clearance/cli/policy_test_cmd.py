"""``clearance policy test DIR``: run the decision tests (``*.tests.json``) in DIR.

Like ``opa test`` and Cerbos' ``compile`` tests: ``--filter`` runs the cases whose name
matches, ``--junit`` writes a report CI systems read, ``--verbose`` shows the deciding
policies (with where they are written) and the stage of each case, and ``--coverage``
lists every policy or local rule that no case exercises (``--coverage-threshold`` fails
the run below a percentage).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from clearance._text import printable
from clearance.cli._options import config_option
from clearance.cli._render import ProgressLine, print_json, style
from clearance.cli._tools import command_tools, tools_note, tools_option
from clearance.cli.main import EXIT_FAILED, fail, fail_too_deep
from clearance.cli.policy_cmd import policy, policy_directory

if TYPE_CHECKING:
    from clearance.policy.testing import CaseResult, DecisionReport, DecisionTest, PolicyCoverage

__all__ = ["test_command"]

_PROGRESS_THRESHOLD = 200
"""Show progress on a terminal when there are at least this many decision tests."""


def _selector(pattern: str | None) -> Any:
    """The ``select`` of ``run_decision_tests`` for ``--filter`` (``None``: every case)."""
    if pattern is None:
        return None
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        fail(f"--filter {pattern!r} is not a regular expression: {exc}")

    def select(case: DecisionTest) -> bool:
        return regex.search(case.name) is not None or regex.search(case.label) is not None

    return select


@policy.command("test")
@click.argument("directory", metavar="DIR")
@config_option
@tools_option
@click.option(
    "--rules",
    "rules_path",
    metavar="FILE",
    default=None,
    help="Test the local allow/ask/deny rules in FILE (TOML) instead of DIR's Cedar policies.",
)
@click.option(
    "--filter",
    "pattern",
    metavar="PATTERN",
    default=None,
    help="Run only the cases whose name (or 'file.tests.json: name') matches this regular "
    "expression.",
)
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="List passing cases too, and show the stage and the deciding policies (with "
    "where they are written) of each case.",
)
@click.option(
    "--coverage",
    is_flag=True,
    help="List every policy or rule that no case exercises (is among a case's deciding "
    "policies), with the percentage exercised.",
)
@click.option(
    "--coverage-threshold",
    type=click.FloatRange(0, 100),
    metavar="N",
    default=None,
    help="Exit 1 when less than N% of the policies are exercised (implies --coverage).",
)
@click.option(
    "--junit",
    "junit_path",
    metavar="FILE",
    default=None,
    help="Also write the results as JUnit XML to FILE (for CI systems).",
)
@click.option("--json", "as_json", is_flag=True, help="Print every case's result as JSON.")
def test_command(
    directory: str,
    config_path: str | None,
    tools_path: str | None,
    rules_path: str | None,
    pattern: str | None,
    verbose: bool,
    coverage: bool,
    coverage_threshold: float | None,
    junit_path: str | None,
    as_json: bool,
) -> None:
    """Run the decision tests (*.tests.json) in DIR against the policies in DIR.

    Each case names a principal, a tool (qualified name or model alias), its arguments
    and the expected decision (allow, deny, ask, invalid or blocked), optionally the
    deciding policies. Failures show the actual decision and reasons. The last line is
    "N passed, N failed". Exits 1 when any case fails or the coverage is below
    --coverage-threshold, 2 when the tests or the policies cannot be loaded.
    """
    from clearance.policy.testing import load_decision_tests, run_decision_tests

    path = policy_directory(directory)
    tools = command_tools(config_path, tools_path)
    tools_note(tools)
    registry = tools.registry
    select = _selector(pattern)
    try:
        tests = load_decision_tests(path)
    except RecursionError:
        fail_too_deep(f"a decision test file (*.tests.json) in {directory}")
    if select is not None and tests and not any(select(t) for t in tests):
        fail(f"--filter {pattern!r} matches none of the {len(tests)} decision tests in {directory}")
    evaluator = _evaluator(rules_path)
    progress = ProgressLine(
        enabled=not as_json and sys.stderr.isatty() and len(tests) >= _PROGRESS_THRESHOLD
    )

    def show(done: int, total: int) -> None:
        progress.show(f"running decision tests: {done}/{total}", force=done == total)

    report = run_decision_tests(path, evaluator, registry=registry, progress=show, select=select)
    progress.clear()
    if junit_path is not None:
        _write(junit_path, report.to_junit_xml())
    wanted = coverage or coverage_threshold is not None
    covered = report.coverage() if wanted else None
    if wanted and covered is None:
        fail("the evaluator cannot list its policies: no coverage to report")
    counts = report.counts
    if as_json:
        print_json(report.to_json())
    else:
        _print_results(report, verbose=verbose)
        if covered is not None:
            _print_coverage(covered)
        click.echo(f"{counts['passed']} passed, {counts['failed']} failed")
    below = (
        covered is not None
        and coverage_threshold is not None
        and covered.percent < coverage_threshold
    )
    if below and covered is not None:
        click.echo(
            f"coverage {covered.percent:.1f}% is below the threshold of {coverage_threshold:g}%",
            err=True,
        )
    if counts["failed"] or below:
        sys.exit(EXIT_FAILED)


def _evaluator(rules_path: str | None) -> Any:
    """``--rules``' local evaluator, or ``None`` (the Cedar policies in DIR)."""
    if rules_path is None:
        return None
    if not Path(rules_path).is_file():
        fail(f"{rules_path}: no such file")
    from clearance.policy.local import LocalEvaluator

    return LocalEvaluator.from_file(rules_path)


def _write(path: str, text: str) -> None:
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        fail(f"cannot write {path!r}: {exc.strerror}")


def _print_results(report: DecisionReport, *, verbose: bool) -> None:
    for result in report.results:
        if result.passed and not verbose:
            continue
        label = "pass" if result.passed else "FAIL"
        colour = "green" if result.passed else "red"
        name = printable(result.test.label)
        if result.passed:
            click.echo(style(label, fg=colour) + f"  {name}  ({printable(_actual(result))})")
            continue
        click.echo(style(label, fg=colour, bold=True) + f"  {name}")
        click.echo(f"      {printable(_expected_actual(result))}")
        # The problem's "expected ..." parts are said above; the rest adds to it.
        for part in (result.problem or "").split("; "):
            if part and not part.startswith("expected "):
                click.echo(f"      {printable(part)}")
        for error in result.errors:
            click.echo(f"      error: {printable(error)}")
        if verbose:
            for line in _decided_by(result, report.locations):
                click.echo(f"      {printable(line)}")


def _decided_by(result: CaseResult, locations: Mapping[str, str]) -> list[str]:
    """The stage that decided a case and its deciding policies, each with where it is
    written."""
    stage: str = result.stage or "none (the case could not be decided)"
    if result.stage == "evaluator" and result.evaluator:
        stage += f" ({result.evaluator})"
    lines = [f"stage: {stage}"]
    if result.stage == "evaluator":
        if not result.reasons:
            lines.append("deciding policies: none (no policy applies: denied by default)")
        for reason in result.reasons:
            where = locations.get(reason)
            lines.append(f"deciding policy: {reason}" + (f" ({where})" if where else ""))
    return lines


def _print_coverage(covered: PolicyCoverage) -> None:
    click.echo(
        f"coverage: {len(covered.exercised)}/{len(covered.policies)} policies exercised "
        f"({covered.percent:.1f}%)"
    )
    for policy_id in covered.unexercised:
        where = covered.locations.get(policy_id)
        click.echo(printable(f"  not exercised: {policy_id}" + (f" ({where})" if where else "")))


def _actual(result: CaseResult) -> str:
    """``allow by read-freely``."""
    actual = str(result.actual)
    if result.reasons:
        actual += " by " + ", ".join(result.reasons)
    return actual


def _expected_actual(result: CaseResult) -> str:
    """``expected allow by read-freely, got ask by ask-before-write``."""
    expected: str = result.test.expect
    if result.test.policies is not None:
        expected += " by " + (", ".join(result.test.policies) or "no policy")
    return f"expected {expected}, got {_actual(result)}"
