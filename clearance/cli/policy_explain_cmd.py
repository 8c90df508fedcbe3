"""``clearance policy explain``: decide one call and say why."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import anyio
import click

from clearance._text import printable
from clearance.cli._options import config_option, default_principal, principal_option
from clearance.cli._render import LABEL_COLOURS, plain_rows, print_json
from clearance.cli._tools import command_tools, tools_note, tools_option
from clearance.cli.main import fail
from clearance.cli.policy_cmd import policy, policy_directory
from clearance.config import build_evaluator, build_guardrails
from clearance.errors import ConfigError
from clearance.harness.journal import MemoryJournal
from clearance.harness.session import Harness
from clearance.harness.tools import ToolRegistry
from clearance.policy.base import AuthorityEvaluator
from clearance.provenance import Provenance, TrustList, origin_label
from clearance.types import Principal

__all__ = ["explain_call", "explain_command"]


async def explain_call(
    registry: ToolRegistry,
    evaluator: AuthorityEvaluator,
    tool: str,
    arguments: Any,
    principal: Principal,
    *,
    argument_guardrails: Iterable[Any] = (),
    max_argument_bytes: int = 1 << 20,
    provenance: Provenance | None = None,
    trust: TrustList | None = None,
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
        provenance: the conversation the call was made in (default: none; every value
            made up).
        trust: the trust list provenance is read under.

    Returns:
        ``decision`` (``allow``, ``deny``, ``ask``, ``blocked``, ``invalid`` or ``error``),
        ``stage`` (``schema``, ``guardrail`` or ``evaluator``) and the explanation as
        ``record`` (the shape of a ``call_decided`` record).
    """
    harness = Harness(
        registry,
        evaluator=evaluator,
        argument_guardrails=argument_guardrails,
        journal=MemoryJournal(),
        max_argument_bytes=max_argument_bytes,
        trust=trust,
    )
    async with harness:
        decided = await harness.decide(
            principal=principal, tool=tool, arguments=arguments, provenance=provenance
        )
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
        "provenance": decided.provenance,
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
@tools_option
@click.option(
    "--policies",
    metavar="DIR",
    default=None,
    help="Decide with the Cedar policies in DIR instead of the configured evaluator.",
)
@click.option(
    "--conversation",
    metavar="FILE",
    default=None,
    type=click.Path(dir_okay=False),
    help="A JSON array of the messages and tool results before the call (as a replay "
    "corpus line's 'conversation'): where each argument came from is read from it.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the explanation as JSON.")
def explain_command(
    tool: str,
    arguments: dict[str, Any],
    principal: Principal | None,
    config_path: str | None,
    tools_path: str | None,
    policies: str | None,
    conversation: str | None,
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

    tools = command_tools(config_path, tools_path)
    tools_note(tools)
    config, registry = tools.config, tools.registry
    if registry.find(tool) is None:
        names = sorted(t.qualified_name for t in registry)
        near = difflib.get_close_matches(tool.replace("__", ".", 1), names, n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        fail(f"unknown tool {tool!r}{hint} (registered: {', '.join(names) or 'none'})")
    evaluator: AuthorityEvaluator = (
        CedarEvaluator.from_directory(policy_directory(policies))
        if policies is not None
        else build_evaluator(config)
    )
    names = [t.qualified_name for t in registry]
    argument_guardrails, _ = build_guardrails(config, tools=names)
    who = principal or default_principal()
    trust_dir = policy_directory(policies) if policies is not None else config.evaluator.policies
    try:
        trust = TrustList.from_directory(trust_dir) if trust_dir is not None else None
    except ConfigError as exc:
        fail(str(exc))
    ledger = _read_conversation(conversation) if conversation is not None else None

    async def main() -> dict[str, Any]:
        return await explain_call(
            registry,
            evaluator,
            tool,
            arguments,
            who,
            argument_guardrails=argument_guardrails,
            max_argument_bytes=config.limits.max_argument_bytes,
            provenance=ledger,
            trust=trust,
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
        "policy_details": _policy_details(evaluator, list(verdict.get("reasons") or ())),
        "policy_version": verdict.get("policy_version"),
        "schema": record.get("schema"),
        "guardrails": guards,
        "provenance": record.get("provenance"),
    }
    if as_json:
        print_json(explanation)
        return
    _print_explanation(explanation)


def _policy_details(evaluator: AuthorityEvaluator, labels: list[str]) -> list[dict[str, Any]]:
    """Each deciding policy with where it is written (file, line) and its annotations,
    for a Cedar evaluator; empty for others (their reasons name rules, not files)."""
    engine = getattr(evaluator, "engine", None)
    policies = getattr(engine, "policies", None)
    if not policies:
        return []
    by_label = {info.label: info for info in policies if info.kind != "template"}
    details = []
    for label in labels:
        info = by_label.get(label)
        if info is None:
            continue
        details.append(
            {
                "id": label,
                "effect": info.effect,
                "path": _shown_path(info.path),
                "line": info.line,
                "annotations": dict(info.annotations),
            }
        )
    return details


def _shown_path(path: str | None) -> str | None:
    """``path`` relative to the working directory when it is under it."""
    if path is None:
        return None
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return path


def _read_conversation(path: str) -> Provenance:
    try:
        with open(path, encoding="utf-8") as handle:
            entries = json.load(handle)
    except OSError as exc:
        fail(f"cannot read the conversation {path}: {exc.strerror}")
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        fail(f"the conversation {path} is not JSON: {exc}")
    if not isinstance(entries, list):
        fail(f"the conversation {path} must be a JSON array of messages and tool results")
    try:
        return Provenance.from_conversation(entries)
    except ValueError as exc:
        fail(f"the conversation {path}: {exc}")


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
    ]
    details = {d["id"]: d for d in e.get("policy_details") or ()}
    for n, label in enumerate(e["policies"] or ["-"]):
        detail = details.get(label)
        where = ""
        if detail is not None:
            where = f"  {detail['effect']}"
            if detail["path"]:
                where += f"  {detail['path']}:{detail['line']}"
            where += "".join(
                f"  @{key}({json.dumps(value, ensure_ascii=False)})"
                for key, value in detail["annotations"].items()
                if key != "id"
            )
        rows.append(("policies" if n == 0 else "", label + where))

    if e["message"]:
        rows.append(("message", str(e["message"])))
    rows.append(("errors", "; ".join(e["errors"]) or "-"))
    schema = e.get("schema") or {}
    rows.append(("schema", "valid" if schema.get("valid") else f"invalid: {schema.get('error')}"))
    click.echo(f"{'decision':<11}{decision}")
    for key, value in rows:
        click.echo(f"{key:<11}{printable(value)}")
    if e.get("provenance"):
        click.echo("provenance")
        plain_rows(
            [
                [f"  {name}", origin_label(record), _origin_detail(record)]
                for name, record in e["provenance"].items()
            ]
        )
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
        plain_rows(print_rows)


def _origin_detail(record: Mapping[str, Any]) -> str:
    """The places an argument was found in, and the inside values not the user's."""
    found = ", ".join(record.get("sources") or ()) or "found nowhere"
    inside = record.get("tool_values") or ()
    if inside:
        found += "; from tools inside: " + ", ".join(inside)
    if record.get("made_up_values"):
        found += "; made-up values inside"
    return found
