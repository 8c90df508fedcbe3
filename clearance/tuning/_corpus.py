"""The replay corpus: one tool call per JSON line, parsed and checked.

A line (``docs/replay.md`` has the full format)::

    {"principal": "User::\\"alice\\"", "tool": "files.read_file", "arguments": {"path": "a"},
     "expected": "allow", "label": "benign", "group": "task-3", "id": "c1",
     "conversation": [{"role": "user", "content": "Read a"},
                      {"role": "tool", "tool": "files.list", "call_id": "c0", "content": ["a"]}]}

A line carries the whole conversation that preceded its call (the user's and system
messages and the tool results, in order), so every line decides alone: ``replay(jobs=N)``
may deal any line to any worker.

A corpus file whose name ends in ``.gz``, ``.xz`` or ``.bz2`` is read decompressed
(:func:`open_corpus`): lines that each carry their conversation repeat it, and compress
well.

A line that is not a call is a :class:`CorpusError` naming its line number (and file):
nothing about it is guessed.
"""

from __future__ import annotations

import bz2
import gzip
import json
import json.scanner
import lzma
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TextIO

from clearance.errors import ClearanceError
from clearance.types import Principal

__all__ = [
    "ConversationEntry",
    "CorpusCall",
    "CorpusError",
    "Expected",
    "Label",
    "numbered_lines",
    "open_corpus",
    "parse_corpus_line",
    "read_corpus",
]

Expected = Literal["allow", "ask", "deny", "blocked", "invalid"]
Label = Literal["benign", "attack"]
Role = Literal["user", "system", "tool"]

_EXPECTED = {
    "allow": "allow",
    "ask": "ask",
    "deny": "deny",
    "error": "deny",  # an evaluator error is enforced as a denial (R1)
    "blocked": "blocked",
    "invalid": "invalid",
}
_LABELS = ("benign", "attack")
_ROLES = ("user", "system", "tool")
_ENTRY_KEYS = {"user": {"role", "content"}, "system": {"role", "content"}}
_TOOL_KEYS = {"role", "tool", "call_id", "content", "arguments"}
_PRINCIPAL_CACHE = 4096

# json.loads without its per-call checks and whitespace regexes: the scanner reads one
# value from the line's first character; a line it does not read exactly (leading
# whitespace, trailing data, a BOM, an error) goes through json.loads, which raises the
# error that line gets. A replay parses every line: reading its JSON is about a tenth of
# a line's work, and this overhead about half of that (callgrind: 4.6% of a line).
_scan_value = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]
_LINE_ENDS = ("", "\n", "\r\n")


class CorpusError(ClearanceError):
    """A corpus line is not a valid call.

    Attributes:
        line: the 1-based line number.
        path: the corpus file, when it came from one.
        reason: what is wrong with the line.
    """

    def __init__(self, reason: str, *, line: int, path: str | None = None) -> None:
        where = f"{path}:{line}" if path else f"line {line}"
        super().__init__(f"{where}: {reason}")
        self.reason = reason
        self.line = line
        self.path = path


@dataclass(frozen=True, slots=True)
class ConversationEntry:
    """One message of the conversation that preceded a corpus call."""

    role: Role
    """``user`` or ``system`` (a message), or ``tool`` (a tool's result)."""
    content: Any
    """A message's text; a tool result's value (text or any JSON value)."""
    tool: str | None = None
    """For a result: the qualified name of the tool that returned it."""
    call_id: str | None = None
    """For a result: the id of the call that returned it (``None`` when not given)."""
    arguments: Mapping[str, Any] | None = None
    """For a result: the arguments of the call that returned it (``None`` when not
    given; a trust list's ``pointed_calls`` reads them)."""


@dataclass(frozen=True, slots=True)
class CorpusCall:
    """One corpus line, parsed."""

    line: int
    """The 1-based line number in the corpus."""
    principal: Principal
    tool: str
    """The qualified tool name (a model alias works too)."""
    arguments: dict[str, Any] | None
    """``None`` when the source withheld them (a journal export of a sensitive call):
    such a call is counted as withheld and not decided."""
    expected: Expected | None = None
    label: Label | None = None
    group: str | None = None
    id: str | None = None
    context: Mapping[str, Any] | None = None
    """Extra application context passed to the evaluator."""
    conversation: tuple[ConversationEntry, ...] | None = None
    """What the session had seen before this call, in order; ``None`` when the line
    carries none (then every argument's provenance is unknown: found nowhere)."""

    @property
    def name(self) -> str:
        """The call's ``id``, else ``line N``."""
        return self.id if self.id is not None else f"line {self.line}"


# A corpus names few principals many times: parsing each once keeps replay fast.
_principals: dict[str, Principal] = {}


def _parse_principal(value: Any) -> Principal:
    if isinstance(value, str):
        found = _principals.get(value)
        if found is None:
            found = Principal.parse(value)
            if len(_principals) >= _PRINCIPAL_CACHE:
                _principals.clear()
            _principals[value] = found
        return found
    return Principal.from_json(value)


def parse_corpus_line(text: str, line: int, *, path: str | None = None) -> CorpusCall | None:
    """Parse one corpus line; ``None`` for a blank line.

    Keys other than ``principal``, ``tool``, ``arguments``, ``expected``, ``label``,
    ``group``, ``id``, ``context`` and ``conversation`` are ignored (a journal export
    carries more).

    Raises:
        CorpusError: the line is not JSON or a field is missing or of the wrong kind.
    """
    if not text or text.isspace():
        return None
    try:
        raw = _loads(text)
    except json.JSONDecodeError as exc:
        raise CorpusError(
            f"not JSON: {exc.msg} (column {exc.colno})", line=line, path=path
        ) from None
    except RecursionError:
        raise CorpusError("not JSON: nested too deeply", line=line, path=path) from None
    if not isinstance(raw, dict):
        raise CorpusError(
            f"a corpus line must be a JSON object, not {type(raw).__name__}", line=line, path=path
        )

    def bad(message: str) -> CorpusError:
        return CorpusError(message, line=line, path=path)

    if "principal" not in raw:
        raise bad('missing \'principal\' (like "User::\\"alice\\"")')
    try:
        principal = _parse_principal(raw["principal"])
    except ValueError as exc:
        raise bad(str(exc)) from None
    tool = raw.get("tool")
    if not isinstance(tool, str) or not tool:
        raise bad("'tool' must be a non-empty string (the qualified name, like files.read_file)")
    if "arguments" not in raw:
        raise bad("missing 'arguments' (a JSON object; null when withheld)")
    arguments = raw["arguments"]
    if arguments is not None and not isinstance(arguments, dict):
        raise bad(f"'arguments' must be a JSON object or null, not {type(arguments).__name__}")
    expected: Any = raw.get("expected")
    if expected is not None:
        if expected not in _EXPECTED:
            raise bad(f"'expected' must be allow, deny, ask, blocked or invalid, not {expected!r}")
        expected = _EXPECTED[expected]
    label = raw.get("label")
    if label is not None and label not in _LABELS:
        raise bad(f"'label' must be benign or attack, not {label!r}")
    group = raw.get("group")
    if group is not None:
        if isinstance(group, bool) or not isinstance(group, str | int):
            raise bad("'group' must be a string")
        group = str(group)
    ident = raw.get("id")
    if ident is not None:
        if isinstance(ident, bool) or not isinstance(ident, str | int):
            raise bad("'id' must be a string")
        ident = str(ident)
    context = raw.get("context")
    if context is not None and not isinstance(context, dict):
        raise bad("'context' must be a JSON object")
    conversation = raw.get("conversation")
    if conversation is not None:
        conversation = _conversation(conversation, bad)
    return CorpusCall(
        line, principal, tool, arguments, expected, label, group, ident, context, conversation
    )


def _loads(text: str) -> Any:
    """``json.loads(text)``, without its overhead for a line that is one JSON value."""
    try:
        value, end = _scan_value(text, 0)
    except (StopIteration, ValueError):
        return json.loads(text)  # raises the error json.loads gives this line
    if text[end:] in _LINE_ENDS:
        return value
    return json.loads(text)


def _conversation(raw: Any, bad: Callable[[str], CorpusError]) -> tuple[ConversationEntry, ...]:
    """A line's ``conversation``: a list of messages and tool results, each checked."""
    if not isinstance(raw, list):
        raise bad(f"'conversation' must be a JSON array, not {type(raw).__name__}")
    entries = []
    for index, item in enumerate(raw):
        where = f"'conversation'[{index}]"
        if not isinstance(item, dict):
            raise bad(f"{where} must be a JSON object, not {type(item).__name__}")
        role = item.get("role")
        if role not in _ROLES:
            raise bad(f"{where}: 'role' must be user, system or tool, not {role!r}")
        if "content" not in item:
            raise bad(f"{where}: missing 'content'")
        content = item["content"]
        allowed = _TOOL_KEYS if role == "tool" else _ENTRY_KEYS[role]
        unknown = sorted(set(item) - allowed)
        if unknown:
            raise bad(f"{where}: unknown key {unknown[0]!r} for a {role} entry")
        if role != "tool":
            if not isinstance(content, str):
                raise bad(f"{where}: a {role} message's 'content' must be a string")
            entries.append(ConversationEntry(role, content))
            continue
        tool = item.get("tool")
        if not isinstance(tool, str) or not tool:
            raise bad(f"{where}: a tool result needs 'tool' (the qualified name)")
        call_id = item.get("call_id")
        if call_id is not None and (not isinstance(call_id, str) or not call_id):
            raise bad(f"{where}: 'call_id' must be a non-empty string")
        arguments = item.get("arguments")
        if arguments is not None and not isinstance(arguments, dict):
            raise bad(f"{where}: 'arguments' must be a JSON object")
        entries.append(ConversationEntry("tool", content, tool, call_id, arguments))
    return tuple(entries)


_OPENERS: dict[str, Callable[..., Any]] = {".gz": gzip.open, ".xz": lzma.open, ".bz2": bz2.open}


def open_corpus(path: str | os.PathLike[str], *, binary: bool = False) -> Any:
    """A corpus file opened for reading: UTF-8 text (bytes with ``binary``), decompressed
    when its name ends in ``.gz``, ``.xz`` or ``.bz2``."""
    opener = _OPENERS.get(os.path.splitext(os.fspath(path))[1].lower())
    if opener is None:
        return open(path, "rb") if binary else open(path, encoding="utf-8")
    return opener(path, "rb") if binary else opener(path, "rt", encoding="utf-8")


def numbered_lines(
    source: str | os.PathLike[str] | Iterable[str] | TextIO,
) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` for each line of a file (a path; see :func:`open_corpus`) or
    of an iterable of lines, numbered from 1."""
    if isinstance(source, str | os.PathLike):
        with open_corpus(source) as handle:
            yield from enumerate(handle, 1)
    else:
        yield from enumerate(source, 1)


def read_corpus(
    source: str | os.PathLike[str] | Iterable[str],
    *,
    skip_bad: bool = False,
    on_bad: Callable[[CorpusError], None] | None = None,
) -> Iterator[CorpusCall]:
    """The calls of a corpus file (or of an iterable of lines), lazily.

    Args:
        source: a path, or lines.
        skip_bad: skip lines that do not parse (reporting each to ``on_bad``) instead of
            raising.
        on_bad: called with the error of each skipped line.

    Raises:
        CorpusError: a line does not parse and ``skip_bad`` is false.
    """
    path = str(source) if isinstance(source, str | os.PathLike) else None
    for number, text in numbered_lines(source):
        try:
            call = parse_corpus_line(text, number, path=path)
        except CorpusError as exc:
            if not skip_bad:
                raise
            if on_bad is not None:
                on_bad(exc)
            continue
        if call is not None:
            yield call
