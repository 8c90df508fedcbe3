"""The live log of a scripted session: one line per step of each call, as it happens::

    c2  call     files.write_file {"path": "src/greet.py", "content": "..."}
    c2  asked    ask-before-write: The agent wants to write a file in the workspace.
    c2  answer   allow_once (auto-answered: stdin is not a terminal)
    c2  allowed  after approval (allow_once)
    c2  ok       wrote 120 bytes to src/greet.py

:class:`EchoJournal` hands each journal record to the :class:`LivePrinter` right after it
is committed, which keeps the lines in the order the pipeline took its steps. Calls that
run side by side (read-only ones) keep their lines together: the lines of the earliest call
still running are printed as they come, a later call's lines wait until the calls before it
have ended (an ask is printed at once: a person may have to answer it). Lines fit the
terminal's width (80 columns when there is no terminal): a call's arguments and result are
cut to one line, decisions and answers wrap under their text. An ask is
shown with the fields that decide what the call does first and in full
(:func:`clearance.harness.ask_display.ask_lines`). Everything the model chose is printed
with control and invisible characters escaped (:func:`clearance._text.printable`).
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from clearance._text import json_text, printable
from clearance.cli._render import style, styled, wrap_cell
from clearance.harness.ask_display import ask_lines, deciding_fields
from clearance.harness.journal import Journal, JournalEvent
from clearance.harness.providers import ProviderTurn, ScriptedProvider
from clearance.harness.tools import Tool, ToolRegistry

__all__ = ["EchoJournal", "EchoProvider", "LivePrinter", "ask_text", "terminal_columns"]

_log = logging.getLogger("clearance")


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
    """The first non-blank line of ``text``, with how many follow, in ``limit`` characters."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    first = printable(lines[0].strip())
    more = f" (+{len(lines) - 1} lines)" if len(lines) > 1 else ""
    room = max(12, limit - len(more))
    if len(first) > room:
        first = first[: room - 3] + "..."
    return first + more


def terminal_columns() -> int:
    """The terminal's width: ``COLUMNS``, else the terminal's, else 80 (a pipe, a file)."""
    return shutil.get_terminal_size((80, 24)).columns


def _cut(text: str, room: int) -> str:
    return text if len(text) <= room else text[: max(0, room - 3)] + "..."


def ask_text(
    arguments: Any,
    deciding: Sequence[str],
    *,
    indent: int,
    full: bool = False,
    notes: Mapping[str, str] | None = None,
) -> list[str]:
    """An ask's arguments as lines indented by ``indent`` (see :func:`ask_lines`), elided
    to the terminal's width (80 columns when it has none) unless ``full``."""
    if not isinstance(arguments, Mapping):
        return [" " * indent + "(arguments withheld)"]
    width = max(60, terminal_columns() - indent)
    lines = ask_lines(arguments, deciding, width=width, elide_values=not full, notes=notes)
    return [" " * indent + line for line in lines]


class LivePrinter:
    """Turns journal events into the live call lines (one place formats them).

    Lines are grouped by call: those of the earliest call that has not ended are printed
    at once, a later call's are held until every call before it has ended, then printed
    together. A call whose ask arrives is printed from then on as its lines come (the
    person answering must see the ask). :meth:`flush` prints whatever is held.
    """

    def __init__(
        self, echo: Callable[[str], None] | None, width: int = 4, columns: int | None = None
    ) -> None:
        self.echo = echo
        self.width = width
        """Call ids are right-aligned to this width."""
        self.columns = columns if columns is not None else terminal_columns()
        """The width lines are fitted to."""
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
        self._order: list[str] = []
        """Calls with lines printed or held, that have not ended, earliest first."""
        self._held: dict[str, list[str]] = {}
        """call id → its lines not printed yet."""
        self._released: set[str] = set()
        """Calls printed as their lines come, wherever they are in the order (asked)."""
        self._ended: set[str] = set()
        """Calls in the order that have ended behind one still running."""

    def bind(self, registry: ToolRegistry) -> None:
        self.tools = {t.qualified_name: t for t in registry}

    def deciding(
        self, qualified_name: str, arguments: Any, named: Iterable[Any] = ()
    ) -> tuple[str, ...]:
        """The fields that decide what a call of this tool does: those the ask ``named``
        (its view's); for an ask that names none, the tool's, or every argument (see
        :func:`deciding_fields`). Never guessed from names."""
        found = tuple(n for n in named if isinstance(n, str))
        if found:
            return found
        if isinstance(arguments, Mapping):
            return deciding_fields(_Arguments(arguments))
        tool = self.tools.get(qualified_name)
        return deciding_fields(tool) if tool is not None else ()

    @property
    def indent(self) -> int:
        """Where the text of a call line starts (``call id  label    text``)."""
        return self.width + 11

    def room(self, label: str = "") -> int:
        """The columns left for the text of a call line with ``label`` (at least 20)."""
        return max(20, self.columns - self.indent - max(0, len(label) - 8))

    def line(self, call_id: str, label: str, text: str, *, cut: bool = False) -> None:
        """``call id  label  text``, the id and the text printed through :func:`printable`;
        a text longer than the room left is wrapped under itself, or ``cut`` to one line."""
        if self.echo is None:
            return
        cid = printable(call_id)
        body, room = printable(text), self.room(label)
        parts = [_cut(body, room)] if cut else wrap_cell(body, room)
        pad = " " * (self.indent + max(0, len(label) - 8))
        with self.lock:
            self._emit(call_id, f"{cid:>{self.width}}  {styled(label)} {parts[0]}".rstrip())
            for part in parts[1:]:
                self._emit(call_id, pad + part)

    def say(self, text: str) -> None:
        """What the agent says (already printable; its lines kept), wrapped to the width,
        after everything held is printed."""
        if self.echo is None:
            return
        room = max(20, self.columns - 7)
        parts = [p for line in (text.splitlines() or [""]) for p in wrap_cell(line, room)]
        with self.lock:
            self.flush()
            self._echo(style("agent", dim=True) + f"  {parts[0]}".rstrip())
            for part in parts[1:]:
                self._echo((" " * 7 + part).rstrip())

    def flush(self) -> None:
        """Print every held line, call by call."""
        with self.lock:
            for cid in self._order:
                for text in self._held.pop(cid, ()):
                    self._echo(text)
            self._order.clear()
            self._released.clear()
            self._ended.clear()

    def _echo(self, text: str) -> None:
        if self.echo is not None:
            self.last_ask = None
            self.echo(text)

    def _emit(self, call_id: str, text: str) -> None:
        """Print a line of ``call_id`` now, or hold it behind the calls before it."""
        if call_id not in self._order:
            self._order.append(call_id)
        if call_id == self._order[0] or call_id in self._released:
            self._echo(text)
        else:
            self._held.setdefault(call_id, []).append(text)

    def _release(self, call_id: str) -> None:
        """Print ``call_id``'s held lines now, and its next lines as they come."""
        if call_id not in self._order:
            self._order.append(call_id)
        if call_id == self._order[0]:
            return
        self._released.add(call_id)
        for text in self._held.pop(call_id, ()):
            self._echo(text)

    def _end(self, call_id: str) -> None:
        """``call_id`` has ended: when it was the earliest, print the held lines of the
        calls after it, up to the first that is still running."""
        if call_id not in self._order:
            return
        self._ended.add(call_id)
        while self._order and self._order[0] in self._ended:
            done = self._order.pop(0)
            self._ended.discard(done)
            self._released.discard(done)
            if self._order:
                for text in self._held.pop(self._order[0], ()):
                    self._echo(text)

    def header(self, call_id: str, data: Mapping[str, Any]) -> None:
        if call_id in self.headed:
            return
        self.headed.add(call_id)
        name = str(data.get("qualified_name") or data.get("tool") or "?")
        args = data.get("arguments")
        limit = max(20, self.room("call") - len(printable(name)) - 1)
        brief = _brief(args, self.deciding(name, args), limit) if args is not None else "(withheld)"
        self.line(call_id, "call", f"{name} {brief}", cut=True)

    def __call__(self, event: JournalEvent) -> None:
        with self.lock:
            self._print(event)

    def _print(self, event: JournalEvent) -> None:
        cid, data = event.call_id, event.data
        if cid is None:
            return
        if event.type == "permission_asked":
            self._release(cid)
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
            notes = data.get("notes")
            notes = notes if isinstance(notes, Mapping) else None
            if self.echo is not None:
                for text in ask_text(arguments, deciding, indent=self.indent, notes=notes):
                    self._emit(cid, text)
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
            if data.get("outcome") != "dispatched":
                self._end(cid)
        elif event.type == "tool_finished":
            status = str(data.get("status"))
            self.line(cid, status, _result_text(data, self.room(status)), cut=True)
            self._end(cid)


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


def _result_text(data: Mapping[str, Any], limit: int = 100) -> str:
    result = data.get("result")
    if isinstance(result, Mapping):
        texts = [
            str(b.get("text", ""))
            for b in result.get("content") or ()
            if isinstance(b, Mapping) and b.get("type") == "text"
        ]
        summary = _first_line("\n".join(texts), limit)
        if summary:
            return summary
    return str(data.get("message") or "")


@dataclass(frozen=True)
class _Arguments:
    """Arguments alone, for :func:`deciding_fields` (which reads ``.arguments``)."""

    arguments: Mapping[str, Any]


class EchoJournal:
    """A journal that hands every recorded event to the printer, then returns it.

    Printing here, right after each record is committed, keeps the lines in the order the
    pipeline took its steps (asks before their prompts, decisions before results).
    """

    def __init__(self, inner: Journal, printer: LivePrinter) -> None:
        self.inner = inner
        self.printer = printer

    async def append(self, event: JournalEvent) -> JournalEvent:
        recorded = await self.inner.append(event)
        try:
            self.printer(recorded)
        except BrokenPipeError:  # output closed (piped into head): keep running, quietly
            self.printer.echo = None
        except Exception as exc:  # printing must never change how a call ends
            _log.warning("cannot print a %s record: %r", recorded.type, exc)
        return recorded

    async def aclose(self) -> None:
        await self.inner.aclose()

    def events(self, *, session_id: str | None = None, call_id: str | None = None) -> Any:
        return self.inner.events(session_id=session_id, call_id=call_id)


class EchoProvider:
    """Shows what the scripted model says, turn by turn."""

    def __init__(self, provider: ScriptedProvider, echo: Callable[[str], None] | None) -> None:
        self.provider = provider
        self.echo = echo
        """Takes the text alone (:meth:`LivePrinter.say`)."""

    def check(self, tool_names: Any) -> None:
        self.provider.check(tool_names)

    def next_turn(self, conversation: list[dict[str, Any]]) -> ProviderTurn:
        turn = self.provider.next_turn(conversation)
        if self.echo is not None and turn.text and turn.tool_calls:
            self.echo(printable(turn.text))
        return turn
