"""``clearance demo`` and ``clearance run SCRIPT``: scripted agent sessions on the terminal.

Both drive a :class:`~clearance.ScriptedProvider` script through a real harness (tools,
guardrails, evaluator, journal, grant store) and print each call as it happens::

    c2  call     files.write_file {"path": "src/greet.py", "content": "..."}
    c2  asked    ask-before-write: The agent wants to write a file in the workspace.
    c2  answer   allow_once (auto-answered: stdin is not a terminal)
    c2  allowed  after approval (allow_once)
    c2  ok       wrote 120 bytes to src/greet.py

Asks are answered on the terminal (allow once / for the session / always / deny, or ``v``
to see every argument in full) when stdin is one, and automatically otherwise;
``--approve`` chooses explicitly. An ask is shown with the fields that decide what the call
does first and in full (:func:`clearance.harness.ask_display.ask_lines`).

Everything the model chose (call ids, tool arguments, results, its text) is printed with
control and invisible characters escaped (:func:`clearance._text.printable`).
"""

from __future__ import annotations

import getpass
import json
import logging
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.to_thread
import click

from clearance._text import json_text, printable
from clearance.cli.main import EXIT_USAGE, cli, fail, print_json, print_table
from clearance.config import (
    Config,
    EvaluatorConfig,
    FilesToolsConfig,
    GuardrailConfig,
    JournalConfig,
    ShellToolsConfig,
    ToolsConfig,
    build_evaluator,
    build_harness,
    build_registry,
    find_config,
    open_journal,
    pack_path,
    resolve_config,
)
from clearance.errors import ClearanceError, ConfigError
from clearance.harness.approvals import PermissionAsk, PermissionDecision
from clearance.harness.ask_display import ask_lines, deciding_fields
from clearance.harness.journal import Journal, JournalEvent
from clearance.harness.providers import ProviderTurn, RunResult, ScriptedProvider
from clearance.harness.tools import Tool, ToolRegistry
from clearance.policy.base import Principal

__all__ = [
    "DEMO_PRINCIPAL",
    "LABEL_COLOURS",
    "config_option",
    "default_principal",
    "demo",
    "demo_config",
    "load_cli_config",
    "principal_option",
    "run",
]

log = logging.getLogger("clearance")

Approve = Literal["ask", "allow", "deny"]
DEMO_PRINCIPAL = Principal("User", "alice")
"""Who the demo session acts for."""

LABEL_COLOURS = {
    "allowed": "green",
    "ok": "green",
    "asked": "yellow",
    "answer": "cyan",
    "denied": "red",
    "blocked": "red",
    "invalid": "red",
    "failed": "red",
    "error": "magenta",
}


# --- options shared by the verbs --------------------------------------------------------------


def config_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--config FILE``: the configuration (default: ./clearance.toml, else built-in)."""
    return click.option(
        "--config",
        "config_path",
        metavar="FILE",
        default=None,
        help="The clearance.toml to use (default: ./clearance.toml if present, else the "
        "built-in default: the coding Cedar pack over files and shell tools in the "
        "current directory).",
    )(fn)


def default_principal() -> Principal:
    """``User::"<login name>"``: who a command-line session acts for by default."""
    try:
        name = getpass.getuser()
    except (KeyError, OSError):  # no login name (some containers)
        name = "user"
    return Principal("User", name or "user")


def _parse_principal(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    if value is None:
        return None
    try:
        return Principal.parse(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def principal_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--principal 'User::"alice"'``."""
    return click.option(
        "--principal",
        metavar="ENTITY",
        default=None,
        callback=_parse_principal,
        help="Who the session acts for, as a Cedar entity: 'User::\"alice\"' "
        '(default: User::"<your login name>").',
    )(fn)


def load_cli_config(path: str | None) -> Config:
    """The configuration for a command: ``--config``, else ./clearance.toml, else built-in.

    Raises:
        ConfigError: the file is missing or wrong, or nested too deeply to read (the CLI
            prints it and exits 2).
    """
    try:
        return resolve_config(path)
    except RecursionError:
        where = path if path is not None else find_config()
        raise ConfigError("nested too deeply to read", path=str(where)) from None


def styled(label: str, width: int = 8) -> str:
    """A status word, padded, coloured on a terminal (click strips styles elsewhere)."""
    colour = LABEL_COLOURS.get(label)
    padded = label.ljust(width)
    return click.style(padded, fg=colour, bold=label in ("denied", "blocked")) if colour else padded


def _brief(value: Any, deciding: Sequence[str] = (), limit: int = 120) -> str:
    """Arguments on one line for the live log: the deciding fields first, long strings
    shortened, the whole cut at ``limit`` (an ask shows every deciding field in full on
    the lines after it)."""

    def shorten(v: Any) -> Any:
        if isinstance(v, str):
            return v if len(v) <= 48 else v[:45] + "..."
        if isinstance(v, dict):
            return {k: shorten(x) for k, x in v.items()}
        if isinstance(v, list):
            return [shorten(x) for x in v]
        return v

    if isinstance(value, dict):
        first = {k: value[k] for k in deciding if k in value}
        value = {**first, **value}
    try:
        text = json_text(shorten(value), default=str)
    except RecursionError:  # the pipeline refuses such arguments; the log says so
        return "(nested too deeply to show)"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _first_line(text: str, limit: int = 100) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    first = printable(lines[0].strip())
    more = f" (+{len(lines) - 1} lines)" if len(lines) > 1 else ""
    if len(first) > limit:
        first = first[: limit - 3] + "..."
    return first + more


def _ask_text(
    arguments: Any, deciding: Sequence[str], *, indent: int, full: bool = False
) -> list[str]:
    """An ask's arguments as lines indented by ``indent`` (see :func:`ask_lines`), elided
    to the terminal's width (100 columns when it has none) unless ``full``."""
    if not isinstance(arguments, Mapping):
        return [" " * indent + "(arguments withheld)"]
    width = max(60, shutil.get_terminal_size((100, 24)).columns - indent)
    lines = ask_lines(arguments, deciding, width=width, elide_values=not full)
    return [" " * indent + line for line in lines]


# --- printing calls as they happen ------------------------------------------------------------


class _Printer:
    """Turns journal events into the live call lines (one place formats them)."""

    def __init__(self, echo: Callable[[str], None] | None, width: int = 4) -> None:
        self.echo = echo
        self.width = width
        """Call ids are right-aligned to this width."""
        self.headed: set[str] = set()
        self.decided: dict[str, dict[str, Any]] = {}
        """call id → its ``call_decided`` data, for the summary."""
        self.notes: dict[str, str] = {}
        """ask id → how it was answered (``auto-answered: ...``), set by the answerer."""
        self.asks: dict[str, str] = {}
        self.tools: Mapping[str, Tool] = {}
        """qualified name → tool, for the deciding fields of each call."""
        self.last_ask: str | None = None
        """The ask id whose arguments are the last lines printed, if any: its prompt
        follows them directly and need not show them again."""
        self.lock = threading.RLock()
        """Held while a block of lines is printed (an ask and its arguments), so that the
        prompt, in its own thread, and the live log never interleave inside one."""

    def bind(self, registry: ToolRegistry) -> None:
        self.tools = {t.qualified_name: t for t in registry}

    def deciding(
        self, qualified_name: str, arguments: Any, named: Iterable[Any] = ()
    ) -> tuple[str, ...]:
        """The fields that decide what a call of this tool does: those the ask ``named``,
        then the tool's (see :func:`deciding_fields`), then those its arguments' names
        suggest."""
        tool = self.tools.get(qualified_name)
        found = [n for n in named if isinstance(n, str)]
        found += deciding_fields(tool) if tool is not None else ()
        if isinstance(arguments, Mapping):
            found += deciding_fields(_Arguments(arguments))
        return tuple(dict.fromkeys(found))

    @property
    def indent(self) -> int:
        """Where the text of a call line starts (``call id  label    text``)."""
        return self.width + 11

    def line(self, call_id: str, label: str, text: str) -> None:
        """``call id  label  text``, the id and the text printed through :func:`printable`."""
        if self.echo is not None:
            cid = printable(call_id)
            with self.lock:
                self.last_ask = None
                self.echo(f"{cid:>{self.width}}  {styled(label)} {printable(text)}".rstrip())

    def raw(self, text: str) -> None:
        """A line already made printable."""
        if self.echo is not None:
            with self.lock:
                self.last_ask = None
                self.echo(text)

    def header(self, call_id: str, data: Mapping[str, Any]) -> None:
        if call_id in self.headed:
            return
        self.headed.add(call_id)
        name = str(data.get("qualified_name") or data.get("tool") or "?")
        args = data.get("arguments")
        brief = _brief(args, self.deciding(name, args)) if args is not None else "(withheld)"
        self.line(call_id, "call", f"{name} {brief}")

    def __call__(self, event: JournalEvent) -> None:
        with self.lock:
            self._print(event)

    def _print(self, event: JournalEvent) -> None:
        cid, data = event.call_id, event.data
        if cid is None:
            return
        if event.type == "permission_asked":
            self.header(cid, data)
            policies = ", ".join(data.get("policies") or ())
            reason = data.get("reason") or "approval required"
            self.line(cid, "asked", f"{policies}: {reason}" if policies else reason)
            self.asks[cid] = str(data.get("ask_id"))
            # What the person (or the rule answering for them) approves: every deciding
            # field whole, then the rest.
            name = str(data.get("qualified_name") or "")
            arguments = data.get("arguments")
            deciding = self.deciding(name, arguments, data.get("deciding") or ())
            for text in _ask_text(arguments, deciding, indent=self.indent):
                self.raw(text)
            self.last_ask = str(data.get("ask_id"))
        elif event.type == "permission_decided":
            note = self.notes.get(str(data.get("ask_id")), "")
            how = data.get("how")
            if not note and how not in (None, "callback"):
                note = f" ({how})"
            self.line(cid, "answer", f"{data.get('answer')}{note}")
        elif event.type == "call_decided":
            self.decided[cid] = data
            self.header(cid, data)
            self.line(cid, *_decision_text(data))
        elif event.type == "tool_finished":
            status = str(data.get("status"))
            self.line(cid, status, _result_text(data))


def _decision_text(data: Mapping[str, Any]) -> tuple[str, str]:
    """The label and text of a ``call_decided`` record."""
    outcome = data.get("outcome")
    reasons = ", ".join(data.get("reasons") or ())
    message = data.get("message") or ""
    ask = data.get("ask") or {}
    if outcome == "dispatched":
        if data.get("decision") == "ask":
            if ask.get("answer") == "grant":
                return "allowed", f"by grant {ask.get('grant')} ({reasons})"
            return "allowed", f"after approval ({ask.get('answer')})"
        return "allowed", f"by {reasons}" if reasons else ""
    if outcome == "denied":
        if data.get("stage") == "ask":
            return "denied", message or "the approval was denied"
        if reasons and message.startswith(f"forbidden by {reasons}"):
            return "denied", f"by {reasons}"
        return "denied", f"by {reasons}: {message}" if reasons else message
    if outcome == "blocked" and message.startswith("blocked "):
        message = message[len("blocked ") :]
    return str(outcome), message


def _result_text(data: Mapping[str, Any]) -> str:
    result = data.get("result")
    if isinstance(result, Mapping):
        texts = [
            str(b.get("text", ""))
            for b in result.get("content") or ()
            if isinstance(b, Mapping) and b.get("type") == "text"
        ]
        summary = _first_line("\n".join(texts))
        if summary:
            return summary
    return str(data.get("message") or "")


@dataclass(frozen=True)
class _Arguments:
    """Arguments alone, for :func:`deciding_fields` (which reads ``.arguments``)."""

    arguments: Mapping[str, Any]


class _EchoJournal:
    """A journal that hands every recorded event to the printer, then returns it.

    Printing here, right after each record is committed, keeps the lines in the order the
    pipeline took its steps (asks before their prompts, decisions before results).
    """

    def __init__(self, inner: Journal, printer: _Printer) -> None:
        self.inner = inner
        self.printer = printer

    async def append(self, event: JournalEvent) -> JournalEvent:
        recorded = await self.inner.append(event)
        try:
            self.printer(recorded)
        except BrokenPipeError:  # output closed (piped into head): keep running, quietly
            self.printer.echo = None
        except Exception as exc:  # printing must never change how a call ends
            log.warning("cannot print a %s record: %r", recorded.type, exc)
        return recorded

    async def aclose(self) -> None:
        await self.inner.aclose()

    def events(self, *, session_id: str | None = None, call_id: str | None = None) -> Any:
        return self.inner.events(session_id=session_id, call_id=call_id)


class _EchoProvider:
    """Shows what the scripted model says, turn by turn."""

    def __init__(self, provider: ScriptedProvider, echo: Callable[[str], None] | None) -> None:
        self.provider = provider
        self.echo = echo

    def check(self, tool_names: Any) -> None:
        self.provider.check(tool_names)

    def next_turn(self, conversation: list[dict[str, Any]]) -> ProviderTurn:
        turn = self.provider.next_turn(conversation)
        if self.echo is not None and turn.text and turn.tool_calls:
            self.echo(click.style("agent", dim=True) + f"  {printable(turn.text)}")
        return turn


# --- answering asks ---------------------------------------------------------------------------

_PROMPT_CHOICES = {
    "o": "allow_once",
    "once": "allow_once",
    "allow_once": "allow_once",
    "s": "allow_session",
    "session": "allow_session",
    "allow_session": "allow_session",
    "a": "allow_always",
    "always": "allow_always",
    "allow_always": "allow_always",
    "d": "deny",
    "deny": "deny",
    "n": "deny",
    "no": "deny",
}
_VIEW = ("v", "view")
"""Answers that show every argument in full, then ask again."""


class _PromptAnswerer:
    """Asks the person at the terminal; one prompt at a time.

    Answers are read from stdin even when it is not a terminal (``--approve ask`` with a
    pipe), which is how scripts and tests answer; the end of input denies. Before the
    question the ask's arguments are shown (deciding fields first and whole) unless the
    live log just showed them on the same stream; ``v`` shows every argument whole.
    """

    def __init__(self, printer: _Printer, *, err: bool) -> None:
        self.printer = printer
        self.err = err
        self.lock = anyio.Lock()
        self.who = default_principal().id

    def _read(
        self, text: str, default: str, *, before: Callable[[], None] | None = None
    ) -> str | None:
        """Print ``before`` (if any) and the question as one block, then read an answer."""
        with self.printer.lock:
            if before is not None:
                before()
            click.echo(f"{text} [{default}]: ", nl=False, err=self.err)
        try:
            raw = click.prompt(
                "", default=default, show_default=False, prompt_suffix="", err=self.err
            )
        except click.Abort:  # end of input: nobody to answer
            click.echo("", err=self.err)
            return None
        if not sys.stdin.isatty():  # show what was read, as a terminal would
            click.echo(printable(raw), err=self.err)
        return str(raw).strip().lower()

    def _show(self, ask: PermissionAsk, *, full: bool) -> None:
        deciding = self.printer.deciding(ask.qualified_name, ask.arguments, ask.deciding)
        with self.printer.lock:
            for line in _ask_text(ask.arguments, deciding, indent=self.printer.indent, full=full):
                click.echo(line, err=self.err)

    def _introduce(self, ask: PermissionAsk, cid: str) -> None:
        """Show the ask right before its question, unless the live log on this stream
        has just shown it (other calls' lines may have come between, or the log may be
        elsewhere)."""
        if not self.err and self.printer.echo is not None and self.printer.last_ask == ask.ask_id:
            return
        click.echo(
            f"{cid}  {printable(ask.qualified_name)} asks: {printable(ask.reason)}", err=self.err
        )
        self._show(ask, full=False)

    def _prompt(self, ask: PermissionAsk) -> PermissionDecision:
        cid = f"{printable(ask.call_id):>{self.printer.width}}"
        introduce: Callable[[], None] | None = partial(self._introduce, ask, cid)
        while True:
            raw = self._read(
                f"{cid}  allow it [o]nce, for the [s]ession, [a]lways, [d]eny, or [v]iew every argument?",
                "d",
                before=introduce,
            )
            introduce = None
            if raw is None:
                return PermissionDecision("deny", message="no answer (end of input)")
            if raw in _VIEW:
                self._show(ask, full=True)
                continue
            answer = _PROMPT_CHOICES.get(raw)
            if answer is not None:
                break
            click.echo("      answer o, s, a, d or v", err=self.err)
        if answer == "deny" or answer == "allow_once" or len(ask.suggestions) < 2:
            return PermissionDecision(answer, decided_by=self.who)  # type: ignore[arg-type]
        choices = "; ".join(
            f"[{n}] {printable(scope.description)}" for n, scope in enumerate(ask.suggestions, 1)
        )
        while True:
            raw = self._read(f"{cid}  the grant covers {choices}", "1")
            if raw is None:
                return PermissionDecision("deny", message="no answer (end of input)")
            if raw.isdigit() and 1 <= int(raw) <= len(ask.suggestions):
                scope = ask.suggestions[int(raw) - 1]
                return PermissionDecision(answer, scope=scope, decided_by=self.who)  # type: ignore[arg-type]
            click.echo(f"      answer a number from 1 to {len(ask.suggestions)}", err=self.err)

    async def __call__(self, ask: PermissionAsk) -> PermissionDecision:
        async with self.lock:
            decision = await anyio.to_thread.run_sync(self._prompt, ask, abandon_on_cancel=True)
        self.printer.notes[ask.ask_id] = " (answered on the terminal)"
        return decision


@dataclass
class _AutoAnswerer:
    """Answers every ask without a person, by a fixed rule."""

    printer: _Printer
    decide: Callable[[PermissionAsk], str]
    why: str

    def __call__(self, ask: PermissionAsk) -> str:
        answer = self.decide(ask)
        self.printer.notes[ask.ask_id] = f" (auto-answered: {self.why})"
        return answer


def _answerer(
    approve: Approve | None,
    printer: _Printer,
    *,
    fallback: Callable[[PermissionAsk], str],
    fallback_why: str,
    err: bool,
) -> Callable[[PermissionAsk], Any]:
    if approve is None:
        approve = "ask" if sys.stdin.isatty() else None
    if approve == "ask":
        # Prompts go where a person sees them: stderr when stdout is JSON or redirected.
        return _PromptAnswerer(printer, err=err or not sys.stdout.isatty())
    if approve == "allow":
        return _AutoAnswerer(printer, lambda ask: "allow_once", "--approve allow")
    if approve == "deny":
        return _AutoAnswerer(printer, lambda ask: "deny", "--approve deny")
    return _AutoAnswerer(printer, fallback, fallback_why)


# --- driving a session ------------------------------------------------------------------------


@dataclass
class _Session:
    result: RunResult
    session_id: str
    decided: dict[str, dict[str, Any]]
    arguments: dict[str, Any]
    journal: list[JournalEvent] = field(default_factory=list)


async def _drive(
    config: Config,
    provider: ScriptedProvider,
    *,
    principal: Principal,
    printer: _Printer,
    answerer: Callable[[PermissionAsk], Any],
    prompt: str,
    echo: Callable[[str], None] | None,
) -> _Session:
    registry = build_registry(config)
    printer.bind(registry)
    # An unknown tool is bad input (exit 2), not a call the model gets an error for; check
    # before anything is opened or written.
    provider.check([name for t in registry for name in (t.qualified_name, t.model_alias)])
    evaluator = build_evaluator(config)
    inner = open_journal(config.journal.path)
    try:
        harness = build_harness(
            config, registry=registry, evaluator=evaluator, journal=_EchoJournal(inner, printer)
        )
    except BaseException:
        await inner.aclose()
        raise
    async with harness:
        session = await harness.create_session(principal=principal, on_permission_ask=answerer)
        run = session.run(prompt, provider=_EchoProvider(provider, echo))
        result = await run.result()
        session_id = session.id
        await session.aclose()
        events = list(inner.events(session_id=session_id))
    arguments = {c.id: c.arguments for turn in provider.turns for c in turn.tool_calls}
    return _Session(result, session_id, dict(printer.decided), arguments, events)


def _id_width(provider: ScriptedProvider) -> int:
    return max([4, *(len(printable(c.id)) for turn in provider.turns for c in turn.tool_calls)])


def _call_rows(s: _Session) -> list[dict[str, Any]]:
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


def _print_calls_table(rows: Sequence[Mapping[str, Any]]) -> None:
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


_JOURNAL_HEADERS = ("time", "principal", "tool", "decision", "policies", "status", "duration")
"""The columns of ``clearance journal``, which the demo's journal table repeats."""


def _print_journal(events: Sequence[JournalEvent]) -> None:
    """The journal as ``clearance journal`` shows it: one row per call."""
    from clearance.tuning import calls_from_events

    print_table(_JOURNAL_HEADERS, [row.cells() for row in calls_from_events(events)])


def _run_sync(fn: Callable[[], Any]) -> Any:
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


# --- clearance run ----------------------------------------------------------------------------


@cli.command("run")
@click.argument("script", metavar="SCRIPT")
@config_option
@click.option(
    "--approve",
    type=click.Choice(["ask", "allow", "deny"]),
    default=None,
    help="How asks are answered: 'ask' prompts on the terminal (the default when stdin is "
    "one; answers are read from stdin otherwise), 'allow' answers allow_once, 'deny' "
    "denies. Default without a terminal: [approvals] non_interactive (deny).",
)
@principal_option
@click.option("--json", "as_json", is_flag=True, help="Print the calls and outcomes as JSON.")
def run(
    script: str,
    config_path: str | None,
    approve: Approve | None,
    principal: Principal | None,
    as_json: bool,
) -> None:
    """Run a scripted agent session (a ScriptedProvider JSON script) under the policy.

    Every tool call in SCRIPT goes through the configured pipeline: schema check,
    guardrails, evaluator, asks, then the real tool. Calls are printed as they happen,
    then a table of outcomes (or one JSON document with --json). A denied call is an
    outcome, not an error: the command exits 0 when the script ran, 2 when the script,
    the configuration or the policies are wrong.

    \b
    Script format:
      {"prompt": "...", "turns": [
         {"tool_calls": [{"id": "c1", "name": "files__read_file",
                          "args": {"path": "README.md"}}]},
         {"text": "Done."}]}
    """
    config = load_cli_config(config_path)
    provider = ScriptedProvider.from_file(script)
    raw_prompt = _script_prompt(script)
    principal = principal or default_principal()
    echo = None if as_json else click.echo
    printer = _Printer(echo, _id_width(provider))
    fallback = config.approvals.non_interactive
    answerer = _answerer(
        approve,
        printer,
        fallback=lambda ask: fallback,
        fallback_why=f"no terminal; [approvals] non_interactive = {fallback}",
        err=as_json,
    )

    s: _Session = _run_sync(
        partial(
            _drive,
            config,
            provider,
            principal=principal,
            printer=printer,
            answerer=answerer,
            prompt=raw_prompt,
            echo=echo,
        )
    )
    rows = _call_rows(s)
    if as_json:
        print_json(
            {
                "session_id": s.session_id,
                "principal": str(principal),
                "journal": str(config.journal.path),
                "calls": rows,
                "text": s.result.text,
            }
        )
        return
    click.echo()
    _print_calls_table(rows)
    if s.result.text:
        click.echo()
        click.echo(printable(s.result.text, newlines=True))


def _script_prompt(path: str) -> str:
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    prompt = raw.get("prompt") if isinstance(raw, dict) else None
    return prompt if isinstance(prompt, str) else ""


# --- clearance demo ---------------------------------------------------------------------------

DEMO_DEFAULT_WHY = "stdin is not a terminal; workspace writes are allowed once, the rest denied"


def _demo_default(ask: PermissionAsk) -> str:
    """The demo's answer without a terminal: ``allow_once`` for the file tools (their paths
    were already confined to the workspace by the ``PathScope`` guardrail), ``deny`` for
    everything else."""
    return "allow_once" if ask.qualified_name.startswith("files.") else "deny"


def _demo_asset(name: str) -> Any:
    return json.loads(resources.files("clearance.demo").joinpath(name).read_text("utf-8"))


def _seed(workspace: Path) -> None:
    files: dict[str, str] = _demo_asset("workspace.json")["files"]
    for rel, text in files.items():
        target = workspace / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def demo_config(workspace: Path, db: Path) -> Config:
    """The demo's configuration: the coding Cedar pack over the files and shell tools in
    ``workspace``, a ``PathScope`` guardrail, journal and grants in ``db``."""
    return Config(
        evaluator=EvaluatorConfig("cedar", policies=pack_path("coding")),
        guardrails=(
            GuardrailConfig(
                "path_scope",
                "arguments",
                tools=("files.*",),
                fields=("/path", "/source", "/destination"),
                name="workspace",
            ),
        ),
        journal=JournalConfig(db),
        tools=ToolsConfig(
            files=FilesToolsConfig(workspace),
            shell=ShellToolsConfig(workspace, allowed_programs=("git", "ls", "pytest")),
        ),
        base_dir=workspace,
    )


@cli.command("demo")
@click.option(
    "--db",
    metavar="PATH",
    default=None,
    help="The SQLite file for the journal and grants (default: a temporary one, deleted "
    "afterwards).",
)
@click.option(
    "--approve",
    type=click.Choice(["ask", "allow", "deny"]),
    default=None,
    help="How asks are answered: 'ask' prompts (default on a terminal), 'allow' answers "
    "allow_once, 'deny' denies. Without a terminal the default allows writes in the "
    "workspace once and denies everything else.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the calls and the journal as JSON.")
def demo(db: str | None, approve: Approve | None, as_json: bool) -> None:
    """Watch a scripted coding agent work under the starter Cedar policies.

    The agent works in a temporary workspace seeded with a small project, through the
    bundled files tools and shell.run. Reads are allowed, a path leaving the workspace is
    refused before any policy sees it (it cannot be canonicalized inside the workspace), a
    chained shell command is denied by the policy shell-no-chaining, and writing a file
    asks first. On a terminal you answer the ask
    (allow once / for the session / always / deny); otherwise it is auto-answered:
    allow_once for the files tools (the guardrail has already confined their paths to
    the workspace), deny for anything else. Every step goes to an SQLite journal, shown
    at the end.
    """
    script = _demo_asset("script.json")
    provider = ScriptedProvider.from_dict(script)
    echo = None if as_json else click.echo
    printer = _Printer(echo, _id_width(provider))
    answerer = _answerer(
        approve, printer, fallback=_demo_default, fallback_why=DEMO_DEFAULT_WHY, err=as_json
    )
    with tempfile.TemporaryDirectory(prefix="clearance-demo-") as tmp_name:
        tmp = Path(tmp_name)
        workspace = tmp / "workspace"
        workspace.mkdir()
        _seed(workspace)
        db_path = Path(db).resolve() if db else tmp / "clearance.db"
        if db and not db_path.parent.is_dir():
            fail(f"--db: the directory {str(db_path.parent)!r} does not exist", EXIT_USAGE)
        config = demo_config(workspace, db_path)
        if echo is not None:
            echo(click.style("clearance demo", bold=True) + ": a scripted coding agent")
            echo(f"  workspace  {printable(workspace)} (temporary)")
            echo("  policies   the coding Cedar pack (clearance/packs/coding)")
            echo(f"  journal    {printable(db_path)}" + ("" if db else " (temporary)"))
            echo(f"  principal  {printable(DEMO_PRINCIPAL)}")
            echo(f"  task       {printable(script.get('prompt', ''))}")
            echo("")

        s: _Session = _run_sync(
            partial(
                _drive,
                config,
                provider,
                principal=DEMO_PRINCIPAL,
                printer=printer,
                answerer=answerer,
                prompt=str(script.get("prompt", "")),
                echo=echo,
            )
        )
        rows = _call_rows(s)
        if as_json:
            print_json(
                {
                    "session_id": s.session_id,
                    "principal": str(DEMO_PRINCIPAL),
                    "journal_path": str(db_path) if db else None,
                    "calls": rows,
                    "text": s.result.text,
                    "journal": [e.to_json() for e in s.journal],
                }
            )
            return
        click.echo()
        click.echo(click.style("agent", dim=True) + f"  {printable(s.result.text, newlines=True)}")
        click.echo()
        where = printable(db_path) if db else "the temporary journal"
        click.echo(
            click.style("journal", bold=True)
            + f": {len(s.journal)} records in {where}, one row per call"
            + (f" (clearance journal --db {printable(db)})" if db else "")
        )
        _print_journal(s.journal)
        click.echo()
        click.echo(f"Next: clearance policy test {printable(pack_path('coding'))}")
        click.echo(
            "      runs the pack's decision tests; clearance run SCRIPT runs your own script."
        )
