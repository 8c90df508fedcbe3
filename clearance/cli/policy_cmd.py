"""``clearance policy``: schema, validate, format, test and explain Cedar policies.

The Cedar schema is generated from the tools, so every verb that needs one builds the
registry from the configuration (``--config``, ./clearance.toml, or the built-in default:
the bundled ``files`` and ``shell`` tools). Exit codes: 0 ok, 1 a check failed (policies
do not validate, a decision test fails, files need formatting), 2 bad usage or input.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import click

from clearance._text import printable
from clearance.cli.main import EXIT_FAILED, cli, fail, fail_too_deep, print_json
from clearance.cli.run_cmd import (
    LABEL_COLOURS,
    config_option,
    default_principal,
    load_cli_config,
    principal_option,
)
from clearance.config import Config, build_evaluator, build_guardrails, build_registry
from clearance.errors import ConfigError, PolicyError
from clearance.harness.journal import MemoryJournal
from clearance.harness.tools import ToolRegistry
from clearance.policy.base import AuthorityEvaluator, Principal

if TYPE_CHECKING:
    from clearance.policy.testing import CaseResult

__all__ = ["explain_call", "policy"]

_PROGRESS_THRESHOLD = 200
"""Show progress on a terminal when there are at least this many decision tests."""


@cli.group("policy")
def policy() -> None:
    """Write, check and understand Cedar policies for your tools.

    \b
      clearance policy schema             the Cedar schema generated from the tools
      clearance policy validate DIR       check policies against that schema
      clearance policy format DIR         format .cedar files (--check: only report)
      clearance policy test DIR           run the *.tests.json decision tests
      clearance policy explain --tool T   decide one call and say why
    """


def _policies_dir(config: Config, policies: str | None) -> Path | None:
    if policies is not None:
        return Path(policies)
    if config.evaluator.kind == "cedar":
        return config.evaluator.policies
    return None


def _directory(value: str) -> Path:
    path = Path(value)
    if not path.is_dir():
        fail(f"{value}: not a directory" if path.exists() else f"{value}: no such directory")
    return path


# --- schema ----------------------------------------------------------------------------------


@policy.command("schema")
@config_option
@click.option(
    "--policies",
    metavar="DIR",
    default=None,
    help="A policy directory whose schema.json declares principal and entity types "
    "(default: the configured Cedar directory, if any).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["cedar", "json"]),
    default="cedar",
    show_default=True,
    help="Cedar schema syntax or Cedar's JSON schema format.",
)
def schema_command(config_path: str | None, policies: str | None, fmt: str) -> None:
    """Print the Cedar schema generated from the configured tools.

    One action per tool (Action::"files.read_file") in the groups Action::"ns:files",
    Action::"read_only" or Action::"mutating", and Action::"call_tool"; the tool's
    arguments typed as context.input. Policies are validated against exactly this schema.
    The schema is printed even when the policies do not validate.
    """
    from clearance.policy.cedar import CedarEvaluator, schema_to_text

    config = load_cli_config(config_path)
    registry = build_registry(config)
    directory = _policies_dir(config, policies)
    if policies is not None:
        _directory(policies)
    fragment = _schema_declarations(directory) if directory is not None else None
    # An evaluator without policies yields the schema without validating any policy, so
    # the schema can be read while the policies are still being fixed.
    evaluator = CedarEvaluator("", schema=fragment)
    _bind_quietly(evaluator, registry)
    schema = evaluator.schema
    if fmt == "json":
        print_json(schema)
    else:
        # Attribute names come from tool schemas (an MCP server's, say): nothing in them
        # may act on the terminal.
        click.echo(printable(schema_to_text(schema).rstrip("\n"), newlines=True))


def _schema_declarations(directory: Path) -> Mapping[str, Any] | None:
    path = directory / "schema.json"
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read: {exc}", path=str(path)) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not JSON: {exc.msg}", path=str(path), line=exc.lineno) from None
    except RecursionError:
        raise ConfigError("nested too deeply to read", path=str(path)) from None
    if not isinstance(value, Mapping):
        raise ConfigError("the schema declarations must be a JSON object", path=str(path))
    return value


def _bind_quietly(evaluator: Any, registry: ToolRegistry) -> None:
    """Bind without the "no policy can permit ..." warning (expected with no policies)."""
    import logging

    logger = logging.getLogger("clearance.policy.cedar")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        evaluator.bind(registry)
    finally:
        logger.setLevel(level)


# --- validate --------------------------------------------------------------------------------


def _problem_line(problem: Mapping[str, Any]) -> str:
    where = str(problem.get("path") or "<policies>")
    if problem.get("line"):
        where += f":{problem['line']}"
    pid = problem.get("policy_id")
    line = f"{where}: " + (f"policy {pid}: " if pid else "") + str(problem.get("message"))
    return printable(line, newlines=True)


@policy.command("validate")
@click.argument("directory", metavar="DIR")
@config_option
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def validate_command(directory: str, config_path: str | None, as_json: bool) -> None:
    """Check every .cedar file in DIR against the schema of the configured tools.

    Reports each problem with file:line and the policy's @id: syntax errors, unknown
    attributes, actions, tools or namespaces, type errors. Exits 1 when any policy is
    invalid, 2 when DIR cannot be read.
    """
    from clearance.policy.cedar import CedarEvaluator

    path = _directory(directory)
    config = load_cli_config(config_path)
    registry = build_registry(config)
    problems: list[Mapping[str, Any]] = []
    count = 0
    ungoverned: tuple[str, ...] = ()
    try:
        evaluator = CedarEvaluator.from_directory(path)
        count = len([p for p in evaluator.engine.policies if p.kind != "template"])
        _bind_quietly(evaluator, registry)
        ungoverned = evaluator.ungoverned
    except PolicyError as exc:
        problems = list(exc.problems) or [
            {"path": exc.path, "line": exc.line, "policy_id": exc.policy_id, "message": exc.message}
        ]
    if as_json:
        print_json(
            {
                "valid": not problems,
                "directory": str(path),
                "policies": count,
                "tools": len(registry),
                "problems": [dict(p) for p in problems],
                "ungoverned": list(ungoverned),
            }
        )
    elif problems:
        for problem in problems:
            click.echo(_problem_line(problem), err=True)
        click.echo(f"{len(problems)} problem(s) in {printable(path)}", err=True)
    else:
        click.echo(
            f"ok: {count} policies in {printable(path)} validate against the schema of "
            f"{len(registry)} tools"
        )
        if ungoverned:
            click.echo(
                "note: no policy can permit these tools, so every call of them is denied: "
                + printable(", ".join(ungoverned))
            )
    if problems:
        sys.exit(EXIT_FAILED)


# --- format ----------------------------------------------------------------------------------


def _format_cedar(text: str) -> str:
    """Cedar's formatter; refuses a result that does not parse to the same policies.

    Raises:
        ValueError: the text does not parse, or formatting would change its meaning.
    """
    from clearance.policy.cedar import format_policies

    return format_policies(text)


@policy.command("format")
@click.argument("directory", metavar="DIR")
@click.option("--check", is_flag=True, help="Change nothing; exit 1 if any file needs formatting.")
def format_command(directory: str, check: bool) -> None:
    """Format every .cedar file under DIR in place, the Cedar way (comments kept).

    With --check nothing is written: the files that would change are listed and the
    command exits 1 if there are any. A file that does not parse is an error (exit 2).
    """
    path = _directory(directory)
    files = sorted(p for p in path.rglob("*.cedar") if p.is_file())
    if not files:
        fail(f"{directory}: no .cedar files")
    changed: list[Path] = []
    for file in files:
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            fail(f"{file}: cannot read: {exc}")
        try:
            formatted = _format_cedar(text)
        except ValueError as exc:
            fail(f"{file}: {exc}")
        if formatted != text:
            changed.append(file)
            if not check:
                file.write_text(formatted, encoding="utf-8")
    verb = "would reformat" if check else "reformatted"
    for file in changed:
        click.echo(f"{verb} {printable(file)}")
    unchanged = len(files) - len(changed)
    click.echo(f"{len(changed)} file(s) {verb}, {unchanged} file(s) already formatted")
    if check and changed:
        sys.exit(EXIT_FAILED)


# --- test ------------------------------------------------------------------------------------


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

    path = _directory(directory)
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


# --- explain ---------------------------------------------------------------------------------


async def explain_call(
    registry: ToolRegistry,
    evaluator: AuthorityEvaluator,
    tool: str,
    arguments: Any,
    principal: Principal,
    *,
    argument_guardrails: Iterable[Any] = (),
    max_argument_bytes: int = 1 << 20,
) -> dict[str, Any]:
    """Decide one call with the real pipeline stages (schema, argument guardrails,
    evaluator) through ``Harness.decide``: nothing runs, nobody is asked, nothing is
    journaled, and grants are not consulted.

    Args:
        registry: the tools (their schemas and flags are what matters).
        evaluator: the authority evaluator, bound to ``registry`` or bindable to it.
        tool: the qualified name or model alias.
        arguments: the call's arguments.
        principal: who calls.
        argument_guardrails: the argument guardrails to run, in order.
        max_argument_bytes: the harness's argument size limit.

    Returns:
        ``decision`` (``allow``, ``deny``, ``ask``, ``blocked``, ``invalid`` or ``error``),
        ``stage`` (``schema``, ``guardrail`` or ``evaluator``) and the explanation as
        ``record`` (the shape of a ``call_decided`` record).
    """
    from clearance.harness.session import Harness

    harness = Harness(
        registry,
        evaluator=evaluator,
        argument_guardrails=argument_guardrails,
        journal=MemoryJournal(),
        max_argument_bytes=max_argument_bytes,
    )
    async with harness:
        decided = await harness.decide(principal=principal, tool=tool, arguments=arguments)
    verdict = decided.verdict or {}
    stage = decided.stage
    if stage == "ask":
        stage = "evaluator" if verdict.get("effect") == "ask" else "guardrail"
    elif stage in ("resolve", "call_id"):
        stage = "schema"
    record = {
        "qualified_name": decided.qualified_name,
        "verdict": decided.verdict,
        "guardrails": decided.guardrails,
        "schema": decided.schema,
        "message": decided.message,
        "ask": {"reason": decided.message} if decided.outcome == "ask" else None,
        "timing_us": decided.timing_us,
    }
    return {"decision": decided.outcome, "stage": stage, "record": record}


def _parse_args(ctx: click.Context, param: click.Parameter, value: str) -> Any:
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise click.BadParameter("nested too deeply to read") from None
    if not isinstance(parsed, dict):
        raise click.BadParameter('must be a JSON object like \'{"path": "README.md"}\'')
    return parsed


@policy.command("explain")
@click.option(
    "--tool", required=True, metavar="NAME", help="The tool: files.write_file (or its alias)."
)
@click.option(
    "--args",
    "arguments",
    default="{}",
    callback=_parse_args,
    metavar="JSON",
    help="The call's arguments as a JSON object (default: {}).",
)
@principal_option
@config_option
@click.option(
    "--policies",
    metavar="DIR",
    default=None,
    help="Decide with the Cedar policies in DIR instead of the configured evaluator.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the explanation as JSON.")
def explain_command(
    tool: str,
    arguments: dict[str, Any],
    principal: Principal | None,
    config_path: str | None,
    policies: str | None,
    as_json: bool,
) -> None:
    """Decide one call and say why: the decision, the deciding policies by @id, any
    evaluation errors, and which stage decided (schema, guardrail or evaluator).

    The call goes through the same stages as a real one (argument schema, the
    configured argument guardrails, the evaluator) but nothing runs and nobody is asked:
    a call that needs approval is reported as "ask". Grants are not consulted.

    \b
    Example:
      clearance policy explain --tool files.write_file \\
          --args '{"path": "src/app.py", "content": "x"}' --principal 'User::"alice"'
    """
    from clearance.policy.cedar import CedarEvaluator

    config = load_cli_config(config_path)
    registry = build_registry(config)
    if registry.find(tool) is None:
        known = ", ".join(sorted(t.qualified_name for t in registry)) or "none"
        fail(f"unknown tool {tool!r} (registered: {known})")
    evaluator: AuthorityEvaluator = (
        CedarEvaluator.from_directory(_directory(policies))
        if policies is not None
        else build_evaluator(config)
    )
    argument_guardrails, _ = build_guardrails(config)
    who = principal or default_principal()

    async def main() -> dict[str, Any]:
        return await explain_call(
            registry,
            evaluator,
            tool,
            arguments,
            who,
            argument_guardrails=argument_guardrails,
            max_argument_bytes=config.limits.max_argument_bytes,
        )

    result = anyio.run(main)
    record = result["record"]
    verdict = record.get("verdict") or {}
    guards = record.get("guardrails") or []
    explanation = {
        "tool": record.get("qualified_name") or tool,
        "principal": str(who),
        "arguments": arguments,
        "decision": result["decision"],
        "stage": result["stage"],
        "policies": list(verdict.get("reasons") or ()),
        "message": _explain_message(result["decision"], record),
        "errors": list(verdict.get("errors") or ()),
        "evaluator": verdict.get("evaluator"),
        "schema": record.get("schema"),
        "guardrails": guards,
    }
    if as_json:
        print_json(explanation)
        return
    _print_explanation(explanation)


def _explain_message(decision: str, record: Mapping[str, Any]) -> str | None:
    verdict = record.get("verdict") or {}
    if decision == "ask":
        return (record.get("ask") or {}).get("reason") or verdict.get("message")
    if decision in ("deny", "error"):
        return verdict.get("message") or record.get("message")
    if decision in ("blocked", "invalid"):
        return str(record.get("message") or "")
    return verdict.get("message")


def _print_explanation(e: Mapping[str, Any]) -> None:
    colour = {"allow": "allowed", "ask": "asked"}.get(e["decision"], "denied")
    decision = click.style(printable(e["decision"]), fg=LABEL_COLOURS[colour], bold=True)
    rows: list[tuple[str, str]] = [
        ("stage", str(e["stage"]) + (f" ({e['evaluator']})" if e["stage"] == "evaluator" else "")),
        ("policies", ", ".join(e["policies"]) or "-"),
    ]
    if e["message"]:
        rows.append(("message", str(e["message"])))
    rows.append(("errors", "; ".join(e["errors"]) or "-"))
    schema = e.get("schema") or {}
    rows.append(("schema", "valid" if schema.get("valid") else f"invalid: {schema.get('error')}"))
    click.echo(f"{'decision':<11}{decision}")
    for key, value in rows:
        click.echo(f"{key:<11}{printable(value)}")
    if e["guardrails"]:
        click.echo("guardrails")
        print_rows = [
            [
                f"  {g.get('name')}",
                str(g.get("action")) + (" (advisory)" if g.get("advisory") else ""),
                g.get("message") or "",
            ]
            for g in e["guardrails"]
        ]
        _plain_rows(print_rows)


def _plain_rows(rows: list[list[str]]) -> None:
    rows = [[printable(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
