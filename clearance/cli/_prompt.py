"""Answering asks from the command line: a person at the terminal, or a fixed rule.

:class:`PromptAnswerer` asks the person (allow once / for the session / always / deny, or
``v`` to see every argument in full), one prompt at a time; :class:`AutoAnswerer` answers
without a person. Each records how it answered on the :class:`~clearance.cli._live.LivePrinter`,
which prints it after the answer.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio
import anyio.to_thread
import click

from clearance._text import printable
from clearance.cli._live import LivePrinter, ask_text
from clearance.cli._options import Approve, default_principal
from clearance.harness.approvals import PermissionAsk, PermissionDecision

__all__ = ["AutoAnswerer", "PromptAnswerer", "choose_answerer"]

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


class PromptAnswerer:
    """Asks the person at the terminal; one prompt at a time.

    Answers are read from stdin even when it is not a terminal (``--approve ask`` with a
    pipe), which is how scripts and tests answer; the end of input denies. Before the
    question the ask's arguments are shown (deciding fields first and whole) unless the
    live log just showed them on the same stream; ``v`` shows every argument whole.
    """

    def __init__(self, printer: LivePrinter, *, err: bool) -> None:
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
            # The question is now the last thing shown: the next ask is introduced again
            # (the live log's "asked" block of another call is no longer right above it).
            self.printer.last_ask = None
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
            lines = ask_text(
                ask.arguments, deciding, indent=self.printer.indent, full=full, notes=ask.notes
            )
            for line in lines:
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
class AutoAnswerer:
    """Answers every ask without a person, by a fixed rule."""

    printer: LivePrinter
    decide: Callable[[PermissionAsk], str]
    why: str

    def __call__(self, ask: PermissionAsk) -> str:
        answer = self.decide(ask)
        self.printer.notes[ask.ask_id] = f" (auto-answered: {self.why})"
        return answer


def choose_answerer(
    approve: Approve | None,
    printer: LivePrinter,
    *,
    fallback: Callable[[PermissionAsk], str],
    fallback_why: str,
    err: bool,
) -> Callable[[PermissionAsk], Any]:
    """The ``on_permission_ask`` of a command-line session.

    ``approve`` (``--approve``): ``ask`` prompts, ``allow`` answers ``allow_once``,
    ``deny`` denies; ``None`` prompts when stdin is a terminal and answers with
    ``fallback`` (shown as ``fallback_why``) otherwise. Prompts go to stderr when ``err``
    or when stdout is not a terminal.
    """
    if approve is None:
        approve = "ask" if sys.stdin.isatty() else None
    if approve == "ask":
        # Prompts go where a person sees them: stderr when stdout is JSON or redirected.
        return PromptAnswerer(printer, err=err or not sys.stdout.isatty())
    if approve == "allow":
        return AutoAnswerer(printer, lambda ask: "allow_once", "--approve allow")
    if approve == "deny":
        return AutoAnswerer(printer, lambda ask: "deny", "--approve deny")
    return AutoAnswerer(printer, fallback, fallback_why)
