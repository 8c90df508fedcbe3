"""``clearance replay`` and ``clearance suggest``: measure and tune policies on recorded calls.

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
names its line number).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal, TextIO

import click

from clearance._text import json_text, printable
from clearance.cli.main import EXIT_FAILED, cli, fail, fail_too_deep, print_json, print_table
from clearance.errors import ClearanceError
from clearance.harness.journal import read_journal
from clearance.tuning import (
    STAGES,
    CorpusError,
    Flip,
    HarnessSpec,
    ReplayReport,
    allowed_calls,
    calls_from_events,
    corpus_record,
    replay,
    suggest,
)

__all__ = ["read_calls_source", "replay_command", "suggest_command"]


def _config_options(fn: Any) -> Any:
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


def _exists(value: str | None, what: str) -> None:
    if value is not None and not Path(value).exists():
        fail(f"{value}: no such {what}")


# --- replay ----------------------------------------------------------------------------------


@cli.command("replay")
@click.argument("corpus", metavar="CORPUS")
@_config_options
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
        _exists(value, what)
    if corpus != "-" and not Path(corpus).is_file():
        fail(f"{corpus}: no such file")
    spec = HarnessSpec(config=config_path, policies=policies, rules=rules, tools=tools_path)
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
    try:
        report = replay(
            source,
            spec,
            baseline=base,
            jobs=jobs,
            skip_bad=skip_bad,
            max_flips=max_flips,
            on_flip=write_flip if flips_file is not None else None,
        )
    except CorpusError as exc:
        fail(f"{exc} (use --skip-bad to skip such lines)")
    except (ClearanceError, OSError) as exc:
        fail(str(exc))
    except RecursionError:
        # Corpus lines say so themselves (a CorpusError); this is a file the spec reads.
        fail_too_deep(tools_path, config_path, policies, rules, baseline)
    finally:
        if flips_file is not None:
            flips_file.close()
    if as_json:
        print_json(report.to_json())
    else:
        _print_report(report)
    if strict:
        agree, total = report.agreement
        loosening = sum(1 for f in report.flip_list if f.loosens)
        if agree < total or loosening:
            sys.exit(EXIT_FAILED)


def _stdin_lines() -> Iterator[str]:
    yield from sys.stdin


def _pct(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.1f}%)" if whole else "-"


def _print_report(r: ReplayReport) -> None:
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


# --- suggest ---------------------------------------------------------------------------------


def read_calls_source(path: str) -> tuple[list[str], str]:
    """The corpus lines of ``path``: a journal (SQLite database or JSON-lines journal) is
    exported as ``clearance journal export`` would; a corpus is read as is. Returns the
    lines and ``"journal"`` or ``"corpus"``.

    Raises:
        ClearanceError: a journal cannot be read.
        OSError: the file cannot be read.
    """
    with open(path, "rb") as handle:
        head = handle.read(16)
    if head.startswith(b"SQLite format 3"):
        return _journal_lines(path), "journal"
    with open(path, encoding="utf-8") as text:
        lines = text.readlines()
    first = next((line for line in lines if line.strip()), "")
    try:
        raw = json.loads(first) if first else None
    except (json.JSONDecodeError, RecursionError):
        raw = None  # read as a corpus: the line's own error names it
    if isinstance(raw, dict) and "type" in raw and "seq" in raw and "tool" not in raw:
        return _journal_lines(path), "journal"
    return lines, "corpus"


def _journal_lines(path: str) -> list[str]:
    rows = calls_from_events(read_journal(path, types=("call_decided", "tool_finished")))
    return [json.dumps(corpus_record(row), ensure_ascii=False) for row in rows]


@cli.command("suggest")
@click.argument("source", metavar="JOURNAL_OR_CORPUS")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["cedar", "local"]),
    default="cedar",
    show_default=True,
    help="Write the suggestions as Cedar policies or as local allow rules.",
)
@_config_options
@click.option(
    "--enum-limit",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="Arguments with at most this many distinct values are listed exactly.",
)
@click.option("--skip-bad", is_flag=True, help="Skip lines that do not parse.")
@click.option("--json", "as_json", is_flag=True, help="Print the suggestions as JSON.")
def suggest_command(
    source: str,
    fmt: Literal["cedar", "local"],
    config_path: str | None,
    tools_path: str | None,
    enum_limit: int,
    skip_bad: bool,
    as_json: bool,
) -> None:
    """Suggest allow policies from the calls that were allowed: a journal (every call
    decided allow, or asked and approved) or a corpus (lines with "expected": "allow").

    Per principal and tool, argument values are generalized into the narrowest useful
    patterns: path prefixes (like "src/*"), URL hosts, exact lists of enum-like values,
    number ranges. Each suggestion lists the calls it covers; the suggestions are then
    replayed on those calls to show that they allow what was allowed (exit 1 if not).
    Review them before use: they describe what happened, not what should.
    """
    for value, what in ((config_path, "file"), (tools_path, "file"), (source, "file")):
        _exists(value, what)
    try:
        lines, kind = read_calls_source(source)
        calls, left_out = allowed_calls(lines, path=source, skip_bad=skip_bad)
    except CorpusError as exc:
        fail(f"{exc} (use --skip-bad to skip such lines)")
    except (ClearanceError, OSError, UnicodeDecodeError) as exc:
        fail(f"{source}: {exc}")
    if not calls:
        fail(f"{source}: no allowed calls with arguments to learn from")
    spec = HarnessSpec(config=config_path, tools=tools_path)
    try:
        registry = spec.build_registry()
    except ClearanceError as exc:
        fail(str(exc))
    except RecursionError:
        fail_too_deep(tools_path, config_path)
    suggestions = suggest(calls, registry, format=fmt, enum_limit=enum_limit)
    try:
        # Both renderings parse their text back and refuse one that says anything else.
        text = suggestions.to_cedar() if fmt == "cedar" else suggestions.to_local_toml()
    except ClearanceError as exc:
        fail(str(exc), EXIT_FAILED)
    left_alone = {line for line, _, _ in suggestions.skipped}
    corpus = [
        json.dumps(
            {
                "principal": _principal_json(c.principal),
                "tool": c.tool,
                "arguments": c.arguments,
                "expected": "allow",
                "id": c.name,
            },
            ensure_ascii=False,
        )
        for c in calls
        if c.line not in left_alone
    ]
    cedar_log = logging.getLogger("clearance.policy.cedar")
    level = cedar_log.level
    cedar_log.setLevel(logging.ERROR)  # "no policy can permit tool X" is expected here
    try:
        check = replay(
            corpus,
            HarnessSpec(config=config_path, tools=tools_path, evaluator=suggestions.evaluator(fmt)),
        )
    except ClearanceError as exc:
        fail(f"the suggested policies do not load: {exc}")
    finally:
        cedar_log.setLevel(level)
    allowed = check.outcomes.get("allow", 0)
    not_allowed = [f"{o} {n}" for o, n in check.outcomes.items() if o != "allow" and n]
    if as_json:
        print_json(
            {
                **suggestions.to_json(),
                "source": source,
                "source_kind": kind,
                "left_out": left_out,
                "format": fmt,
                "policies": text,
                "replay": {
                    "calls": check.calls,
                    "allowed": allowed,
                    "outcomes": dict(check.outcomes),
                },
            }
        )
    else:
        mark = "//" if fmt == "cedar" else "#"
        click.echo(
            f"{mark} {len(suggestions.suggestions)} suggestion(s) from {len(calls)} allowed call(s) "
            f"in {printable(source)} ({kind}; {left_out} line(s) not allowed or withheld)"
        )
        # The generated text escapes what it quotes; printing it through printable as well
        # keeps the terminal safe should a rendering ever miss a character.
        for line, name, why in suggestions.skipped:
            click.echo(printable(f"{mark} left out line {line} ({name}): {why}"))
        click.echo(printable(text.rstrip("\n"), newlines=True))
        click.echo("")
        click.echo(
            f"{mark} replayed the {check.calls} source call(s): {allowed} allowed"
            + (printable(f", {', '.join(not_allowed)}") if not_allowed else "")
        )
    if allowed < check.calls:
        sys.exit(EXIT_FAILED)


def _principal_json(principal: Any) -> Any:
    if not principal.attrs and not principal.parents:
        return str(principal)
    value: Mapping[str, Any] = {
        "type": principal.type,
        "id": principal.id,
        "attrs": dict(principal.attrs),
        "parents": [list(p) for p in principal.parents],
    }
    return value
