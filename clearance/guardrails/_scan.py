"""Shared machinery of the text-scanning guardrails (``SecretScanner``, ``PiiRedactor``).

A scanner is a list of :class:`Detector` s. Each finds spans of one *kind* in a string;
overlapping spans are settled by detector order (the more specific detector comes first).
The guardrail then blocks (naming kinds and JSON pointers, never the text), rewrites the
spans to ``[REDACTED:<kind>]`` (``replace``), or withholds whole fields (``redact``).
"""

from __future__ import annotations

import copy
import math
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from clearance import _pointer
from clearance.guardrails.base import Guardrail, GuardrailContext, GuardrailOutcome

__all__ = ["Detector", "Finding", "ScanAction"]

ScanAction = Literal["block", "redact", "withhold"]
_ACTIONS = ("block", "redact", "withhold")

# A marker this package wrote; never scanned again, so redaction is idempotent.
_MARKER = re.compile(r"\[REDACTED(?::[A-Za-z0-9_.-]+)?\]")
_MARKER_HINT = "[REDACTED"
_MAX_LISTED = 5
_GATE_BELOW = 256
# The words of the result envelope and content blocks: in every result, and nothing the
# built-in detectors could find, so not worth running the gate on each time.
_PLAIN = frozenset(
    {"content", "structured_content", "is_error", "type", "text", "image", "audio",
     "resource", "resource_link", "mimeType", "data", "uri", "name", "title"}
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Finding:
    """Where a scanner found something. It carries offsets, never the text found."""

    kind: str
    """What was found, e.g. ``"github_token"`` or ``"email"``."""
    pointer: str
    """The JSON pointer of the string it is in (``""`` for :meth:`scan` on plain text)."""
    start: int
    """Offset of the first character found in that string."""
    end: int
    """Offset just past the last character found."""
    in_key: bool = False
    """True when it was found in an object key rather than a value."""


@dataclass(frozen=True, slots=True)
class Detector:
    """One kind of thing to find.

    Example: ``Detector("ticket", re.compile(r"TICKET-\\d{6}"), starts=("TICKET-",))``.
    """

    kind: str
    """The name reported in findings and written into ``[REDACTED:<kind>]``."""
    regex: re.Pattern[str]
    """What to find."""
    starts: tuple[str, ...] = ()
    """Literals every match starts with (compared case-insensitively if ``regex`` ignores
    case). When given, the regex is tried only where one of them occurs: far cheaper than
    letting the regex engine scan, which tries every position as soon as a pattern opens
    with a look-behind or ignores case. Detectors of one scanner share these searches.
    Without ``starts`` the regex scans the whole text."""
    offset: int = 0
    """How many characters before its literal in ``starts`` a match begins (to search
    for a rarer literal than the match's first characters)."""
    groups: tuple[str, ...] = ()
    """Named groups holding the part to report and redact (the first that matched);
    empty means the whole match."""
    validate: Callable[[str], bool] | None = None
    """Further check on the found text (a checksum, an entropy threshold)."""

    @property
    def ignore_case(self) -> bool:
        return bool(self.regex.flags & re.IGNORECASE)

    def find(self, text: str) -> Iterator[tuple[int, int]]:
        """``(start, end)`` of each finding in ``text``."""
        for start, end, _ in _Plan([self]).spans(text):
            yield start, end

    def scan(self, text: str, lowered: str | None) -> Iterator[tuple[int, int]]:
        """Findings of a detector without ``starts`` (a regex scan of the whole text);
        subclasses with a faster or smarter search override it."""
        for match in self.regex.finditer(text):
            span = self.accept(match, text)
            if span is not None:
                yield span

    def accept(self, match: re.Match[str], text: str) -> tuple[int, int] | None:
        """The span to report for ``match``, or None if validation rejects it."""
        start, end = match.span()
        for group in self.groups:
            if match.group(group) is not None:
                start, end = match.span(group)
                break
        if end <= start:
            return None
        if self.validate is not None and not self.validate(text[start:end]):
            return None
        return start, end


_Table = tuple[tuple[re.Pattern[str], dict[str, tuple[int, ...]]], ...]


class _Plan:
    """How a list of detectors scans a string.

    Start literals are searched once each, shared by the detectors that declare them,
    with literals that begin with the same character searched together in one regex
    (the regex engine's literal-prefix search beats ``str.find`` on short needles).
    Detectors without start literals scan the text with their own regex.
    """

    def __init__(
        self,
        detectors: Iterable[Detector],
        *,
        gate: re.Pattern[str] | None = None,
        min_length: int = 1,
    ) -> None:
        self.detectors = tuple(detectors)
        self.gate = gate
        self.min_length = min_length
        exact: dict[str, list[int]] = {}
        folded: dict[str, list[int]] = {}
        free: list[int] = []
        lowering = any(d.ignore_case and d.starts for d in self.detectors)
        for i, detector in enumerate(self.detectors):
            if not detector.starts:
                free.append(i)
                continue
            for literal in detector.starts:
                if detector.ignore_case:
                    folded.setdefault(literal.lower(), []).append(i)
                elif lowering and literal == literal.lower():
                    # Searched in the lower-cased text too, where it joins the literals
                    # with its first character in one pass; the case-sensitive regex
                    # then drops the hits whose case differs.
                    folded.setdefault(literal, []).append(i)
                else:
                    exact.setdefault(literal, []).append(i)
        self.exact = _table(exact)
        self.folded = _table(folded)
        self.free = tuple(free)
        # Plain detectors run inline (no generator per detector: a few hundred
        # nanoseconds each, which adds up over a dozen detectors and many strings).
        self.inline = tuple(
            type(self.detectors[i]).scan is Detector.scan for i in range(len(self.detectors))
        )
        self.needs_lower = bool(folded)

    def spans(self, text: str) -> list[tuple[int, int, str]]:
        """Non-overlapping ``(start, end, kind)`` spans in ``text``, sorted by start.

        Earlier detectors win overlaps. Text inside a ``[REDACTED...]`` marker is never
        found again, which makes redaction idempotent.
        """
        if len(text) < self.min_length:
            return []
        # Short strings (keys, paths, names) are most of the strings in a call and each
        # pass has a fixed cost: one combined regex rules most of them out at once.
        if (
            self.gate is not None
            and len(text) < _GATE_BELOW
            and (text in _PLAIN or not self.gate.search(text))
        ):
            return []
        detectors = self.detectors
        lowered = text.lower() if self.needs_lower else None
        hits: dict[int, list[int]] = {}
        _collect(text, self.exact, hits)
        free = self.free
        if self.folded:
            assert lowered is not None
            if len(lowered) == len(text):
                _collect(lowered, self.folded, hits)
            else:
                # lower() changed the length (some non-ASCII text): offsets would not
                # line up, so these detectors scan the plain text with their regex.
                free += tuple(
                    sorted({i for _, notify in self.folded for ix in notify.values() for i in ix})
                )
        candidates: list[tuple[int, int, int]] = []
        for i, positions in hits.items():
            detector = detectors[i]
            if len(detector.starts) > 1:
                positions = sorted(set(positions))
            end = 0
            offset = detector.offset
            for hit in positions:
                pos = hit - offset
                if pos < end:  # inside this detector's previous match, as finditer skips
                    continue
                match = detector.regex.match(text, pos)
                if match is not None:
                    end = match.end()
                    span = detector.accept(match, text)
                    if span is not None:
                        candidates.append((i, *span))
        inline = self.inline
        for i in free:
            detector = detectors[i]
            if not inline[i]:
                candidates.extend((i, s, e) for s, e in detector.scan(text, lowered))
                continue
            match = detector.regex.search(text)
            while match is not None:
                span = detector.accept(match, text)
                if span is not None:
                    candidates.append((i, *span))
                match = detector.regex.search(text, max(match.end(), match.start() + 1))
        if not candidates:
            return []
        candidates.sort()
        taken: list[tuple[int, int]] = []
        if _MARKER_HINT in text:
            taken = [m.span() for m in _MARKER.finditer(text)]
        found: list[tuple[int, int, str]] = []
        for i, start, end in candidates:
            if not any(start < e and s < end for s, e in taken):
                taken.append((start, end))
                found.append((start, end, detectors[i].kind))
        found.sort()
        return found


def _table(literals: dict[str, list[int]]) -> _Table:
    """Group start literals by first character into one alternation each; for every
    literal the regex can report, the detectors to notify (also those of any literal it
    begins with, since the alternation reports only the longest)."""
    groups: dict[str, list[str]] = {}
    for literal in literals:
        groups.setdefault(literal[:1], []).append(literal)
    table = []
    for members in groups.values():
        members.sort(key=len, reverse=True)
        regex = re.compile("|".join(re.escape(m) for m in members))
        notify = {
            m: tuple(sorted({i for p in members if m.startswith(p) for i in literals[p]}))
            for m in members
        }
        table.append((regex, notify))
    return tuple(table)


def _collect(haystack: str, table: _Table, hits: dict[int, list[int]]) -> None:
    for regex, notify in table:
        for match in regex.finditer(haystack):
            position = match.start()
            for index in notify[match.group()]:
                hits.setdefault(index, []).append(position)


def rewrite(text: str, found: list[tuple[int, int, str]]) -> str:
    """``text`` with every span replaced by ``[REDACTED:<kind>]``."""
    pieces: list[str] = []
    last = 0
    for start, end, kind in found:
        pieces.append(text[last:start])
        pieces.append(f"[REDACTED:{kind}]")
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


def entropy(text: str) -> float:
    """Shannon entropy of ``text`` in bits per character."""
    if not text:
        return 0.0
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values())


def custom_detectors(patterns: Mapping[str, str | re.Pattern[str]] | None) -> list[Detector]:
    """Detectors for user-given ``{kind: regex}``; a group named ``value`` narrows the span."""
    out: list[Detector] = []
    for kind, pattern in (patterns or {}).items():
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", kind):
            raise ValueError(f"pattern kind {kind!r} must be [A-Za-z0-9_.-]+")
        regex = re.compile(pattern) if isinstance(pattern, str) else pattern
        groups = ("value",) if "value" in regex.groupindex else ()
        out.append(Detector(kind, regex, groups=groups))
    return out


class TextScanGuardrail(Guardrail):
    """Base of the scanning guardrails; works in either stage (see the subclasses).

    Subclasses pass their built-in detectors, the options and their default action; the
    stage comes from the ``ArgumentGuardrail`` or ``ResultGuardrail`` it is combined with.
    """

    _label = "sensitive text"
    _kinds_label = "text"
    """Names the kinds in the error for an unknown one ("unknown <_kinds_label> kinds")."""

    def __init__(
        self,
        builtin: list[Detector],
        *,
        kinds: Collection[str] | None,
        patterns: Mapping[str, str | re.Pattern[str]] | None,
        action: ScanAction,
        gate: re.Pattern[str] | None,
        min_length: int,
        tools: str | Iterable[str],
        fields: Iterable[str] | None,
        advisory: bool,
        name: str | None,
        timeout: float | None,
    ) -> None:
        """``gate`` and ``min_length`` describe what ``builtin`` can find; with custom
        ``patterns`` neither applies (a user's pattern may match anything)."""
        detectors = builtin
        if kinds is not None:
            known = tuple(d.kind for d in builtin)
            unknown = set(kinds) - set(known)
            if unknown:
                raise ValueError(
                    f"unknown {self._kinds_label} kinds {sorted(unknown)}; "
                    f"known: {', '.join(known)}"
                )
            detectors = [d for d in builtin if d.kind in kinds]
        custom = custom_detectors(patterns)
        super().__init__(tools=tools, fields=fields, advisory=advisory, name=name, timeout=timeout)
        if action not in _ACTIONS:
            raise ValueError(f"action must be one of {', '.join(_ACTIONS)}, not {action!r}")
        self.action: ScanAction = action
        self._plan = _Plan(
            [*custom, *detectors],  # the user's own patterns are the more specific
            gate=None if custom else gate,
            min_length=1 if custom else min_length,
        )
        self.detectors = self._plan.detectors

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds this scanner looks for, in priority order."""
        return tuple(dict.fromkeys(d.kind for d in self.detectors))

    def scan(self, text: str) -> list[Finding]:
        """Everything found in one string (pointer ``""``)."""
        return [Finding(kind, "", s, e) for s, e, kind in self._plan.spans(text)]

    def redact_text(self, text: str) -> str:
        """``text`` with everything found replaced by ``[REDACTED:<kind>]``."""
        return rewrite(text, self._plan.spans(text))

    def findings(self, value: Any) -> list[Finding]:
        """Everything found in the selected fields of ``value``, in document order.

        A finding in an object key points at the object holding the key (the key's own
        pointer would repeat what was found).
        """
        out: list[Finding] = []
        for pointer, text, in_key in self._texts(value):
            where = _parent(pointer) if in_key else pointer
            out.extend(Finding(kind, where, s, e, in_key) for s, e, kind in self._plan.spans(text))
        return out

    def check(self, value: Any, ctx: GuardrailContext) -> GuardrailOutcome:
        """Block, rewrite (``redact``) or withhold what the detectors find."""
        changes: dict[str, str] = {}
        findings: list[tuple[str, str, bool]] = []  # (kind, pointer, in_key)
        for pointer, text, in_key in self._texts(value):
            found = self._plan.spans(text)
            if not found:
                continue
            findings.extend((kind, pointer, in_key) for _, _, kind in found)
            if not in_key:
                changes[pointer] = rewrite(text, found) if self.action == "redact" else text
        if not findings:
            return GuardrailOutcome.allow()
        # A key cannot be rewritten or withheld without changing the document's shape.
        if self.action == "block" or any(in_key for _, _, in_key in findings):
            return GuardrailOutcome.block(self._message(findings))
        if self.action == "withhold":
            return GuardrailOutcome.redact(changes)
        return GuardrailOutcome.replace(_apply(value, changes))

    def _message(self, findings: list[tuple[str, str, bool]]) -> str:
        # A pointer through a flagged key would spell the key out: show such places by
        # the object that holds the key instead.
        flagged = sorted({pointer for _, pointer, in_key in findings if in_key}, key=len)

        def shown(pointer: str) -> str:
            for key_pointer in flagged:
                if pointer == key_pointer or pointer.startswith(key_pointer + "/"):
                    return _parent(key_pointer) or "/"
            return pointer or "/"

        seen = list(dict.fromkeys((kind, shown(p), in_key) for kind, p, in_key in findings))
        listed = [
            f"{kind} in {'a key of ' if in_key else ''}{pointer}"
            for kind, pointer, in_key in seen[:_MAX_LISTED]
        ]
        more = f" and {len(seen) - _MAX_LISTED} more" if len(seen) > _MAX_LISTED else ""
        return f"{self.name}: {self._label} found: {'; '.join(listed)}{more}"

    def _texts(self, value: Any) -> list[tuple[str, str, bool]]:
        """``(pointer, text, in_key)`` for every string in the selected fields."""
        result = self.stage == "result"
        if self.fields is None:
            out: list[tuple[str, str, bool]] = []
            _walk(value, "", result, out)
            return out
        collected: dict[tuple[str, bool], str] = {}
        for base, selected in self.selected(value):
            part: list[tuple[str, str, bool]] = []
            _walk(selected, base, result, part)
            for pointer, text, in_key in part:
                # two field pointers may select the same string: scan it once
                collected.setdefault((pointer, in_key), text)
        return [(pointer, text, in_key) for (pointer, in_key), text in collected.items()]


_BINARY_BLOCKS = frozenset({"image", "audio"})
# A content block of the result envelope, the only place whose "data" may be skipped.
_CONTENT_BLOCK = re.compile(r"/content/[0-9]+")
_BASE64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")
_CONTAINERS = (dict, list)


def _parent(pointer: str) -> str:
    return pointer.rpartition("/")[0]


def _walk(node: Any, here: str, result: bool, out: list[tuple[str, str, bool]]) -> None:
    """Append ``(pointer, text, in_key)`` for every string and key under ``node`` (a key
    comes with its own pointer, the one its value has)."""
    if isinstance(node, str):
        out.append((here, node, False))
    elif isinstance(node, dict):
        # Base64 pixels of an image or audio content block are not text anyone reads;
        # scanning them costs a lot and only finds noise. Only a content block of the
        # result envelope qualifies, and only with valid base64: the same shape anywhere
        # else (structured content, which the model reads as text) is scanned.
        skip_data = (
            result
            and node.get("type") in _BINARY_BLOCKS
            and _CONTENT_BLOCK.fullmatch(here) is not None
            and isinstance(data := node.get("data"), str)
            and _BASE64.fullmatch(data) is not None
        )
        for key, item in node.items():
            token = str(key)
            if "~" in token or "/" in token:
                token = _pointer.escape(token)
            child = f"{here}/{token}"
            if isinstance(key, str):
                out.append((child, key, True))
            if skip_data and key == "data":
                continue
            if isinstance(item, str):
                out.append((child, item, False))
            elif isinstance(item, _CONTAINERS):
                _walk(item, child, result, out)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            if isinstance(item, str):
                out.append((f"{here}/{i}", item, False))
            elif isinstance(item, _CONTAINERS):
                _walk(item, f"{here}/{i}", result, out)


def _apply(document: Any, changes: Mapping[str, Any]) -> Any:
    """A copy of ``document`` with the value at each concrete pointer replaced."""
    if "" in changes:
        return changes[""]
    result = copy.deepcopy(document)
    for pointer, value in changes.items():
        # set_value copies the whole document per call; one copy is enough here.
        tokens = _pointer.parse(pointer)
        parent: Any = result
        for token in tokens[:-1]:
            parent = parent[int(token)] if isinstance(parent, list) else parent[token]
        if isinstance(parent, list):
            parent[int(tokens[-1])] = value
        else:
            parent[tokens[-1]] = value
    return result
