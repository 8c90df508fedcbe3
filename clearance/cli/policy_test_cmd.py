"""``clearance policy test DIR``: run the decision tests (``*.tests.json``) in DIR."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from clearance._text import printable
from clearance.cli._options import config_option, load_cli_config
from clearance.cli._render import print_json
from clearance.cli.main import EXIT_FAILED, fail_too_deep
from clearance.cli.policy_cmd import policy, policy_directory
from clearance.config import build_registry

if TYPE_CHECKING:
    from clearance.policy.testing import CaseResult

__all__ = ["test_command"]

_PROGRESS_THRESHOLD = 200
"""Show progress on a terminal when there are at least this many decision tests."""


@policy.command("test")
@click.argument("directory", metavar="DIR")
@config_option
@click.option("-v", "--verbose", is_flag=True, help="List passing cases too.")
@click.option("--json", "as_json", is_flag=True, help="Print every case's result as JSON.")
def test_command(directory: str, config_path: str | None, verbose: bool, as_json: bool) -> None:
    """Run the decision tests (*.tests.json) in DIR against the policies in DIR.

    Each case names a principal, a tool, its arguments and the expected decision (allow,
    deny or ask), optionally the deciding policies. Failures show the actual decision
    and reasons. The last line is "N passed, N failed". Exits 1 when any case fails, 2
    when the tests or the policies cannot be loaded.
    """
    from clearance.policy.testing import load_decision_tests, run_decision_tests

    path = policy_directory(directory)
    config = load_cli_config(config_path)
    registry = build_registry(config)
    try:
        tests = load_decision_tests(path)
    except RecursionError:
        fail_too_deep(f"a decision test file (*.tests.json) in {directory}")
    progress = not as_json and sys.stderr.isatty() and len(tests) >= _PROGRESS_THRESHOLD

    def show(done: int, total: int) -> None:
        # A counter on the terminal, redrawn every 1% (or at the end).
        if done == total or done % max(1, total // 100) == 0:
            click.echo(f"\rrunning decision tests: {done}/{total}", err=True, nl=False)

    report = run_decision_tests(path, registry=registry, progress=show if progress else None)
    if progress:
        click.echo("\r\033[K", err=True, nl=False)
    counts = report.counts
    if as_json:
        print_json(report.to_json())
    else:
        for result in report.results:
            if result.passed and not verbose:
                continue
            label = "pass" if result.passed else "FAIL"
            colour = "green" if result.passed else "red"
            name = printable(f"{Path(result.test.path).name}: {result.test.name}")
            click.echo(click.style(label, fg=colour, bold=not result.passed) + f"  {name}")
            if not result.passed:
                click.echo(f"      {printable(_expected_actual(result))}")
                # The problem's "expected ..." parts are said above; the rest adds to it.
                for part in (result.problem or "").split("; "):
                    if part and not part.startswith("expected "):
                        click.echo(f"      {printable(part)}")
                for error in result.errors:
                    click.echo(f"      error: {printable(error)}")
        click.echo(f"{counts['passed']} passed, {counts['failed']} failed")
    if counts["failed"]:
        sys.exit(EXIT_FAILED)


def _expected_actual(result: CaseResult) -> str:
    """``expected allow by read-freely, got ask by ask-before-write``."""
    expected: str = result.test.expect
    if result.test.policies is not None:
        expected += " by " + (", ".join(result.test.policies) or "no policy")
    actual = str(result.actual)
    if result.reasons:
        actual += " by " + ", ".join(result.reasons)
    return f"expected {expected}, got {actual}"
