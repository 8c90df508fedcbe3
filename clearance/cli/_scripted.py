"""Driving a scripted agent session through a real harness, for ``clearance run`` and
``clearance demo``: the tools, guardrails, evaluator, journal and grant store the
configuration names, the live log as it runs, and the outcome table after."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from clearance._text import printable
from clearance.cli._live import EchoJournal, EchoProvider, LivePrinter
from clearance.cli._render import print_table
from clearance.cli._tools import start_servers
from clearance.config import (
    Config,
    build_evaluator,
    build_harness,
    build_registry,
    load_mcp_servers,
    open_journal,
)
from clearance.errors import ClearanceError
from clearance.harness.approvals import PermissionAsk
from clearance.harness.journal import JournalEvent
from clearance.harness.providers import RunResult, ScriptedProvider
from clearance.types import Principal

__all__ = [
    "ScriptedRun",
    "call_rows",
    "drive",
    "id_width",
    "print_calls_table",
    "run_sync",
]


@dataclass
class ScriptedRun:
    """What a scripted session did: its result, and the journal's view of each call."""

    result: RunResult
    session_id: str
    decided: dict[str, dict[str, Any]]
    arguments: dict[str, Any]
    journal: list[JournalEvent] = field(default_factory=list)


async def drive(
    config: Config,
    provider: ScriptedProvider,
    *,
    principal: Principal,
    printer: LivePrinter,
    answerer: Callable[[PermissionAsk], Any],
    prompt: str,
    echo: Callable[[str], None] | None,
) -> ScriptedRun:
    """Run ``provider``'s script in a harness built from ``config``, printing each step
    through ``printer`` and answering asks with ``answerer``.

    Raises:
        ScriptError: the script names a tool that is not registered (checked before
            anything is opened or written).
        ConfigError: a part of the configuration cannot be built.
    """
    registry = build_registry(config)
    printer.bind(registry)
    # The configuration's [[mcp_servers]], as every other command reads them: started in
    # the harness below, their tools join the registry before the session opens.
    servers = load_mcp_servers(config.path) if config.path is not None else ()

    def check_script() -> None:
        # An unknown tool is bad input (exit 2), not a call the model gets an error for.
        provider.check([name for t in registry for name in (t.qualified_name, t.model_alias)])

    if not servers:
        check_script()  # before anything is opened or written
    evaluator = build_evaluator(config)
    inner = open_journal(config.journal.path)
    try:
        harness = build_harness(
            config, registry=registry, evaluator=evaluator, journal=EchoJournal(inner, printer)
        )
    except BaseException:
        await inner.aclose()
        raise
    async with harness:
        if servers:
            await start_servers(harness, servers)
            printer.bind(harness.registry)
            check_script()  # before the session: nothing is journaled yet
        session = await harness.create_session(principal=principal, on_permission_ask=answerer)
        says = printer.say if echo is not None else None
        run = session.run(prompt, provider=EchoProvider(provider, says))
        try:
            result = await run.result()
        finally:
            printer.flush()
        session_id = session.id
        await session.aclose()
        printer.flush()
        events = list(inner.events(session_id=session_id))
    arguments = {c.id: c.arguments for turn in provider.turns for c in turn.tool_calls}
    return ScriptedRun(result, session_id, dict(printer.decided), arguments, events)


def id_width(provider: ScriptedProvider) -> int:
    """The width of the call-id column: the longest id of the script (at least 4)."""
    return max([4, *(len(printable(c.id)) for turn in provider.turns for c in turn.tool_calls)])


def call_rows(s: ScriptedRun) -> list[dict[str, Any]]:
    """One row per call: the table's columns, and what ``--json`` prints."""
    rows = []
    for outcome in s.result.calls:
        decided = s.decided.get(outcome.call_id, {})
        ask = decided.get("ask") or {}
        rows.append(
            {
                "call_id": outcome.call_id,
                "tool": outcome.qualified_name or outcome.tool,
                "arguments": decided.get("arguments", s.arguments.get(outcome.call_id)),
                "decision": outcome.decision,
                "answer": ask.get("answer"),
                "status": outcome.status,
                "stage": decided.get("stage"),
                "reasons": list(outcome.reasons),
                "grant": outcome.grant,
                "message": outcome.message,
                "result": outcome.result.text if outcome.result is not None else None,
            }
        )
    return rows


def print_calls_table(rows: Sequence[Mapping[str, Any]]) -> None:
    """The outcome table printed after the live log."""
    print_table(
        ["CALL", "TOOL", "DECISION", "ANSWER", "STATUS", "POLICIES"],
        [
            [
                r["call_id"],
                r["tool"],
                r["decision"] or "-",
                r["answer"] or "-",
                r["status"],
                ", ".join(r["reasons"]) or "-",
            ]
            for r in rows
        ],
    )


def run_sync(fn: Callable[[], Any]) -> Any:
    """Run an async entry point; surface a lone ClearanceError from a task group."""
    try:
        return anyio.run(fn)
    except BaseExceptionGroup as group:
        errors = group.subgroup(lambda e: isinstance(e, ClearanceError))
        if (
            errors is not None
            and len(errors.exceptions) == 1
            and not isinstance(errors.exceptions[0], BaseExceptionGroup)
        ):
            raise errors.exceptions[0] from None
        raise
