"""What the text-scanning guardrails look for, and how they find it fast.

A scanner (``SecretScanner``, ``PiiRedactor``) is a list of :class:`Detector` s. Each finds
spans of one *kind* in a string; a :class:`ScanPlan` runs a list of them over one string at
once, sharing the searches for their start literals, and settles overlapping spans by
detector order (the more specific detector comes first). Text inside a ``[REDACTED...]``
marker is never found again, so redacting twice changes nothing.

This module knows strings only; walking a document and turning findings into an outcome
is :mod:`clearance.guardrails._text_scan`'s part.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

__all__ = ["Detector", "Finding", "ScanPlan", "custom_detectors", "entropy", "rewrite"]

# A marker this package wrote; never scanned again, so redaction is idempotent.
_MARKER = re.compile(r"\[REDACTED(?::[A-Za-z0-9_.-]+)?\]")
_MARKER_HINT = "[REDACTED"
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
    requires: tuple[str, ...] = ()
    """Literals every match contains (compared as ``starts`` are): a text missing one
    cannot hold a match, and the regex is not tried on it at all (an ``@`` for a password
    in a URL, whose ``://`` start is in every URL)."""

    @property
    def ignore_case(self) -> bool:
        return bool(self.regex.flags & re.IGNORECASE)

    def find(self, text: str) -> Iterator[tuple[int, int]]:
        """``(start, end)`` of each finding in ``text``."""
        for start, end, _ in ScanPlan([self]).spans(text):
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


class ScanPlan:
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
        self.requires = tuple(
            tuple(r.lower() for r in d.requires) if d.ignore_case else d.requires
            for d in self.detectors
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
        requires = self.requires
        for i, positions in hits.items():
            if requires[i] and not _holds(text, lowered, detectors[i], requires[i]):
                continue
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
            if requires[i] and not _holds(text, lowered, detector, requires[i]):
                continue
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


def _holds(text: str, lowered: str | None, detector: Detector, literals: tuple[str, ...]) -> bool:
    """Whether the text holds every literal a match of ``detector`` needs."""
    if detector.ignore_case:
        haystack = lowered if lowered is not None and len(lowered) == len(text) else text.lower()
        return all(literal in haystack for literal in literals)
    return all(literal in text for literal in literals)


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
