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
from collections.abc import Callable, Iterable, Iterator, Mapping
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

    Example: ``Detector("ticket", re.compile(r"TICKET-\\d{6}"), hints=("ticket-",))``.
    """

    kind: str
    """The name reported in findings and written into ``[REDACTED:<kind>]``."""
    regex: re.Pattern[str]
    """What to find."""
    hints: tuple[str, ...] = ()
    """Lower-case substrings one of which must occur in the text for the regex to run at
    all (a cheap pre-filter); empty means always run."""
    groups: tuple[str, ...] = ()
    """Named groups holding the part to report and redact (the first that matched);
    empty means the whole match."""
    validate: Callable[[str], bool] | None = None
    """Further check on the found text (a checksum, an entropy threshold)."""

    def find(self, text: str) -> Iterator[tuple[int, int]]:
        for match in self.regex.finditer(text):
            start, end = match.span()
            for group in self.groups:
                if match.group(group) is not None:
                    start, end = match.span(group)
                    break
            if end <= start:
                continue
            if self.validate is None or self.validate(text[start:end]):
                yield start, end


def spans(detectors: Iterable[Detector], text: str) -> list[tuple[int, int, str]]:
    """Non-overlapping ``(start, end, kind)`` spans in ``text``, sorted by start.

    Earlier detectors win overlaps. Text inside a ``[REDACTED...]`` marker is never found
    again, which makes redaction idempotent.
    """
    lowered: str | None = None
    taken: list[tuple[int, int, str]] = []
    if _MARKER_HINT in text:
        taken = [(m.start(), m.end(), "") for m in _MARKER.finditer(text)]
    found: list[tuple[int, int, str]] = []
    for detector in detectors:
        if detector.hints:
            if lowered is None:
                lowered = text.lower()
            if not any(hint in lowered for hint in detector.hints):
                continue
        for start, end in detector.find(text):
            if not any(start < e and s < end for s, e, _ in taken):
                taken.append((start, end, detector.kind))
                found.append((start, end, detector.kind))
    found.sort()
    return found


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

    Subclasses pass their detectors and default action; the stage comes from the
    ``ArgumentGuardrail`` or ``ResultGuardrail`` it is combined with.
    """

    _label = "sensitive text"

    def __init__(
        self,
        detectors: Iterable[Detector],
        *,
        action: ScanAction,
        tools: str | Iterable[str],
        fields: Iterable[str] | None,
        advisory: bool,
        name: str | None,
        timeout: float | None,
    ) -> None:
        super().__init__(tools=tools, fields=fields, advisory=advisory, name=name, timeout=timeout)
        if action not in _ACTIONS:
            raise ValueError(f"action must be one of {', '.join(_ACTIONS)}, not {action!r}")
        self.action: ScanAction = action
        self.detectors = tuple(detectors)

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds this scanner looks for, in priority order."""
        return tuple(dict.fromkeys(d.kind for d in self.detectors))

    def scan(self, text: str) -> list[Finding]:
        """Everything found in one string (pointer ``""``)."""
        return [Finding(kind, "", s, e) for s, e, kind in spans(self.detectors, text)]

    def redact_text(self, text: str) -> str:
        """``text`` with everything found replaced by ``[REDACTED:<kind>]``."""
        return rewrite(text, spans(self.detectors, text))

    def findings(self, value: Any) -> list[Finding]:
        """Everything found in the selected fields of ``value``, in document order."""
        out: list[Finding] = []
        for pointer, text, in_key in self._texts(value):
            out.extend(
                Finding(kind, pointer, s, e, in_key) for s, e, kind in spans(self.detectors, text)
            )
        return out

    def check(self, value: Any, ctx: GuardrailContext) -> GuardrailOutcome:
        """Block, rewrite (``redact``) or withhold what the detectors find."""
        changes: dict[str, str] = {}
        findings: list[Finding] = []
        for pointer, text, in_key in self._texts(value):
            found = spans(self.detectors, text)
            if not found:
                continue
            findings.extend(Finding(kind, pointer, s, e, in_key) for s, e, kind in found)
            if not in_key:
                changes[pointer] = rewrite(text, found) if self.action == "redact" else text
        if not findings:
            return GuardrailOutcome.allow()
        # A key cannot be rewritten or withheld without changing the document's shape.
        if self.action == "block" or any(f.in_key for f in findings):
            return GuardrailOutcome.block(self._message(findings))
        if self.action == "withhold":
            return GuardrailOutcome.redact(changes)
        return GuardrailOutcome.replace(_apply(value, changes))

    def _message(self, findings: list[Finding]) -> str:
        seen = list(dict.fromkeys((f.kind, f.pointer or "/", f.in_key) for f in findings))
        listed = [
            f"{kind} in {'a key under ' if in_key else ''}{pointer}"
            for kind, pointer, in_key in seen[:_MAX_LISTED]
        ]
        more = f" and {len(seen) - _MAX_LISTED} more" if len(seen) > _MAX_LISTED else ""
        return f"{self.name}: {self._label} found: {'; '.join(listed)}{more}"

    def _texts(self, value: Any) -> Iterator[tuple[str, str, bool]]:
        """``(pointer, text, in_key)`` for every string in the selected fields."""
        seen: set[str] = set()
        for base, selected in self.selected(value):
            for pointer, text, in_key in _walk(selected, base, self.stage == "result"):
                key = f"{int(in_key)}{pointer}"
                if key not in seen:  # two field pointers may select the same string
                    seen.add(key)
                    yield pointer, text, in_key


_BINARY_BLOCKS = frozenset({"image", "audio"})


def _walk(node: Any, here: str, result: bool) -> Iterator[tuple[str, str, bool]]:
    if isinstance(node, str):
        yield here, node, False
    elif isinstance(node, dict):
        # Base64 pixels of an image block are not text anyone reads; scanning them costs a
        # lot and only finds noise.
        skip_data = result and node.get("type") in _BINARY_BLOCKS
        for key, item in node.items():
            child = f"{here}/{str(key).replace('~', '~0').replace('/', '~1')}"
            if isinstance(key, str):
                yield child, key, True
            if skip_data and key == "data":
                continue
            yield from _walk(item, child, result)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from _walk(item, f"{here}/{i}", result)


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
