"""``clearance replay``: measure policies on recorded calls (``clearance suggest``, in
:mod:`clearance.cli.suggest_cmd`, goes the other way).

::

    clearance replay CORPUS [--config FILE] [--policies DIR | --rules FILE] [--tools FILE]
                            [--baseline DIR_OR_FILE] [--jobs N] [--skip-bad] [--json]
    clearance suggest JOURNAL_OR_CORPUS [--format cedar|local] [--config FILE] [--tools FILE]
                            [--json]

Tools come from the configuration (``--config``, else ./clearance.toml, else the built-in
default: the bundled ``files`` and ``shell`` tools) plus, with ``--tools FILE``, tool
declarations (name, input schema, read_only) for tools the configuration does not provide,
such as an application's own or an MCP server's; with ``--tools`` and no configuration file,
only the declared tools. Nothing is ever run. Exit codes: 0 ok,
1 a check failed (``--strict`` found a disagreement or a loosening flip; a suggestion does
not allow a call it came from), 2 bad usage or input (a corpus line that does not parse
names its line number), 130 a replay stopped by Ctrl-C (after printing the report of what
was decided until then).

On a terminal, ``replay`` redraws one progress line on stderr (calls read, calls per
second, the time left). The first Ctrl-C stops it within a few calls, in every worker, and
prints the partial report; a second one aborts at once.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

import click

from clearance._text import json_text, printable
from clearance.cli._render import ProgressLine
from clearance.cli._tools import command_tools_file
from clearance.cli.main import EXIT_FAILED, cli, fail, fail_too_deep, print_json, print_table
from clearance.errors import ClearanceError
from clearance.tuning import (
    STAGES,
    CorpusError,
    Flip,
    GroupFinding,
    HarnessSpec,
    ReplayProgress,
    ReplayReport,
    replay,
)

__all__ = ["EXIT_INTERRUPTED", "config_options", "replay_command", "require_existing"]

EXIT_INTERRUPTED = 130
"""A replay stopped by Ctrl-C (128 + SIGINT, as shells report it): the report is partial."""
_FINDINGS_SHOWN = 20
"""Benign groups not fully allowed (and attacks not stopped) listed in the text report."""


def config_options(fn: Any) -> Any:
    """``--tools FILE`` and ``--config FILE``, as ``replay`` and ``suggest`` take them."""
    fn = click.option(
        "--tools",
        "tools_path",
        metavar="FILE",
        default=None,
        help="A JSON list of tool declarations (name, input_schema, read_only) to register "
        "beside the configured toolsets; they are never run.",
    )(fn)
    return click.option(
        "--config",
        "config_path",
        metavar="FILE",
        default=None,
        help="The clearance.toml whose tools, evaluator and argument guardrails to use "
        "(default: ./clearance.toml if present, else the built-in default).",
    )(fn)


def require_existing(value: str | None, what: str) -> None:
    """Exit 2 naming ``value`` when it is given and no such file or directory exists."""
    if value is not None and not Path(value).exists():
        fail(f"{value}: no such {what}")


# --- replay ----------------------------------------------------------------------------------


@cli.command("replay")
@click.argument("corpus", metavar="CORPUS")
@config_options
@click.option(
    "--policies",
    metavar="DIR",
    default=None,
    help="Decide with the Cedar policies in DIR (or a TOML rules file) instead of the "
    "configured evaluator.",
)
@click.option(
    "--rules",
    metavar="FILE",
    default=None,
    help="Decide with the local allow/ask/deny rules in FILE instead.",
)
@click.option(
    "--baseline",
    metavar="DIR",
    default=None,
    help="A second policy set (Cedar directory or TOML rules file) deciding the same calls: "
    "every call whose decision flips is listed, deny-to-allow first.",
)
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Worker processes; each builds its own harness.",
)
@click.option("--skip-bad", is_flag=True, help="Count and skip lines that do not parse.")
@click.option(
    "--max-flips",
    type=click.IntRange(min=0),
    default=50,
    show_default=True,
    help="Flips to list (all are counted; --flips writes all).",
)
@click.option(
    "--flips",
    "flips_path",
    metavar="FILE",
    default=None,
    help="Write every flip to FILE as JSON lines, in corpus order.",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Exit 1 when a call disagrees with its 'expected' or a flip loosens the baseline.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def replay_command(
    corpus: str,
    config_path: str | None,
    tools_path: str | None,
    policies: str | None,
    rules: str | None,
    baseline: str | None,
    jobs: int,
    skip_bad: bool,
    max_flips: int,
    flips_path: str | None,
    strict: bool,
    as_json: bool,
) -> None:
    """Decide every call of CORPUS (JSON lines; "-" reads standard input) with the real
    pipeline stages and report: decisions, agreement with each call's "expected", the
    confusion table, utility (benign groups fully allowed) and security (attack groups
    stopped), how often each policy decided and which never did, evaluation errors, p50/p99
    decision time per stage and, with --baseline, every call whose decision flips.

    \b
    A corpus line:
      {"principal": "User::\\"alice\\"", "tool": "files.read_file",
       "arguments": {"path": "README.md"}, "expected": "allow",
       "label": "benign", "group": "task-1", "id": "c1"}
    `clearance journal export --format jsonl` writes this format.
    """
    if policies is not None and rules is not None:
        fail("give --policies or --rules, not both")
    for value, what in (
        (config_path, "file"),
        (tools_path, "file"),
        (policies, "file or directory"),
        (rules, "file"),
        (baseline, "file or directory"),
    ):
        require_existing(value, what)
    if corpus != "-" and not Path(corpus).is_file():
        fail(f"{corpus}: no such file")
    # With [[mcp_servers]] and no --tools: a snapshot of the servers' tools.
    tools_file = command_tools_file(config_path, tools_path)
    spec = HarnessSpec(config=config_path, policies=policies, rules=rules, tools=tools_file)
    base = spec.with_policies(baseline) if baseline is not None else None
    flips_file: TextIO | None = None
    if flips_path is not None:
        try:
            flips_file = open(flips_path, "w", encoding="utf-8")
        except OSError as exc:
            fail(f"cannot write {flips_path!r}: {exc.strerror}")

    def write_flip(flip: Flip) -> None:
        assert flips_file is not None
        flips_file.write(json_text(flip.to_json()) + "\n")

    source: Any = corpus if corpus != "-" else _stdin_lines()
    line = ProgressLine()
    try:
        with _stop_on_ctrl_c(line) as stop:
            report = replay(
                source,
                spec,
                baseline=base,
                jobs=jobs,
                skip_bad=skip_bad,
                max_flips=max_flips,
                on_flip=write_flip if flips_file is not None else None,
                progress=_shower(line, stop) if line.enabled else None,
                stop=stop.is_set,
            )
    except CorpusError as exc:
        fail(f"{exc} (use --skip-bad to skip such lines)")
    except (ClearanceError, OSError) as exc:
        fail(str(exc))
    except RecursionError:
        # Corpus lines say so themselves (a CorpusError); this is a file the spec reads.
        fail_too_deep(tools_path, config_path, policies, rules, baseline)
    finally:
        line.clear()
        if flips_file is not None:
            flips_file.close()
    if as_json:
        print_json(report.to_json())
    else:
        _print_report(report)
    if report.interrupted:
        sys.exit(EXIT_INTERRUPTED)
    if strict:
        agree, total = report.agreement
        loosening = sum(1 for f in report.flip_list if f.loosens)
        if agree < total or loosening:
            sys.exit(EXIT_FAILED)


def _stdin_lines() -> Iterator[str]:
    yield from sys.stdin


@contextmanager
def _stop_on_ctrl_c(line: ProgressLine) -> Iterator[threading.Event]:
    """Inside the block, the first Ctrl-C sets the event the replay polls (it stops within
    a few calls and returns its partial report); the second raises KeyboardInterrupt as
    usual. The previous handler is back afterwards."""
    stop = threading.Event()

    def on_sigint(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        line.show("stopping: finishing the calls in progress (Ctrl-C again to abort)", force=True)

    if threading.current_thread() is not threading.main_thread():  # embedded: no signals
        yield stop
        return
    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, previous)


def _shower(line: ProgressLine, stop: threading.Event) -> Callable[[ReplayProgress], None]:
    """Draws each progress report, until a stop is asked (the line then says so)."""

    def show(progress: ReplayProgress) -> None:
        if not stop.is_set():
            line.show(_progress_text(progress))

    return show


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def _progress_text(p: ReplayProgress) -> str:
    """``replaying: 12,345/100,000 calls (12%), 10,512 calls/s, 8 s left``."""
    done = f"{p.lines:,}" + (f"/{p.total:,}" if p.total is not None else "") + " calls"
    if p.fraction is not None:
        done += f" ({100 * p.fraction:.0f}%)"
    text = f"replaying: {done}, {p.rate:,.0f} calls/s"
    if p.eta is not None:
        text += f", {_duration(p.eta)} left"
    return text


def _pct(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.1f}%)" if whole else "-"


def _print_report(r: ReplayReport) -> None:
    if r.interrupted:
        click.echo(
            f"interrupted (Ctrl-C) after {r.lines:,} line(s): this report covers only the "
            "calls decided until then"
        )
    extra = []
    if r.bad_lines:
        extra.append(f"{r.bad_lines} bad line(s) skipped")
    if r.withheld:
        extra.append(f"{r.withheld} with withheld arguments not decided")
    click.echo(
        f"replayed {r.calls} call(s) in {r.elapsed:.2f} s "
        f"({r.calls_per_second:,.0f} calls/s, {r.jobs} job(s))"
        + (f"; {', '.join(extra)}" if extra else "")
    )
    for number, error in r.bad_samples[:5]:
        click.echo(f"  skipped line {number}: {printable(error)}")
    click.echo("")
    click.echo("decisions  " + printable("  ".join(f"{o} {n}" for o, n in r.outcomes.items())))
    if r.baseline_outcomes is not None:
        click.echo(
            "baseline   " + printable("  ".join(f"{o} {n}" for o, n in r.baseline_outcomes.items()))
        )
    agree, total = r.agreement
    if total:
        click.echo(f"agreement  {_pct(agree, total)} of the calls with 'expected'")
        click.echo("")
        headers = ["expected \\ actual", *r.outcomes.keys()]
        print_table(headers, [[e, *row.values()] for e, row in r.confusion.items()])
    if r.benign_groups or r.attack_groups:
        click.echo("")
        if r.benign_groups:
            line = (
                f"utility    {_pct(r.utility_groups, r.benign_groups)} benign groups fully allowed"
            )
            if r.baseline_utility_groups is not None:
                line += f" (baseline {r.baseline_utility_groups})"
            click.echo(line)
        if r.attack_groups:
            line = f"security   {_pct(r.security_groups, r.attack_groups)} attack groups stopped"
            if r.baseline_security_groups is not None:
                line += f" (baseline {r.baseline_security_groups})"
            click.echo(line)
        _print_findings(
            "benign groups not fully allowed (the first call that was not):",
            r.benign_not_allowed,
            r.benign_groups - r.utility_groups,
        )
        _print_findings(
            "attack groups not stopped (the policies that allowed them):",
            r.attacks_not_stopped,
            r.attack_groups - r.security_groups,
        )
    click.echo("")
    if r.hits:
        print_table(["policy", "calls decided"], list(r.hits.items()))
    if r.never_hit:
        click.echo(
            f"never decided a call ({len(r.never_hit)}): " + printable(", ".join(r.never_hit))
        )
    if r.guardrail_hits:
        click.echo("")
        print_table(["guardrail:action", "calls"], list(r.guardrail_hits.items()))
    if r.error_calls:
        click.echo("")
        click.echo(f"evaluation errors in {r.error_calls} call(s):")
        for message, count in list(r.errors.items())[:10]:
            click.echo(f"  {count:>6}  {printable(message)}")
    click.echo("")
    print_table(
        ["stage", "p50 us", "p99 us", "max us"],
        [
            [s, r.latency_us[s]["p50"], r.latency_us[s]["p99"], r.latency_us[s]["max"]]
            for s in STAGES
        ],
    )
    if r.baseline_outcomes is not None:
        click.echo("")
        kinds = printable(", ".join(f"{k} {n}" for k, n in r.flip_kinds.items()))
        click.echo(f"flips      {r.flips}" + (f" ({kinds})" if kinds else ""))
        if r.flip_list:
            print_table(
                ["line", "id", "principal", "tool", "baseline", "now", "policies now"],
                [
                    [
                        f.line,
                        f.id or "-",
                        f.principal,
                        f.tool,
                        f.baseline,
                        f.outcome,
                        ",".join(f.reasons) or "-",
                    ]
                    for f in r.flip_list
                ],
            )
            if r.flips > len(r.flip_list):
                click.echo(f"... and {r.flips - len(r.flip_list)} more (--flips FILE lists all)")


def _print_findings(title: str, findings: Sequence[GroupFinding], count: int) -> None:
    """The groups a policy set failed (``count`` of them, ``findings`` kept), one line each
    with its call and the deciding policies."""
    if not findings:
        return
    click.echo("")
    click.echo(title)
    shown = findings[:_FINDINGS_SHOWN]
    for finding in shown:
        first = finding.calls[0]
        where = f"line {first.line}" + (f", {first.id}" if first.id else "")
        if finding.label == "benign":
            by = ", ".join(first.reasons) or first.message or "no policy"
            text = f"{finding.group}: {first.tool} {first.outcome} by {by} ({where})"
        else:
            tools = ", ".join(dict.fromkeys(c.tool for c in finding.calls))
            by = ", ".join(finding.policies) or "no policy"
            text = f"{finding.group}: {tools} allowed by {by} ({where})"
        click.echo("  " + printable(text))
    more = count - len(shown)
    if more > 0:
        listed = len(findings) - len(shown)
        note = "--json lists them" if listed >= more else f"--json lists {listed:,} of them"
        click.echo(f"  ... and {more:,} more ({note})")
