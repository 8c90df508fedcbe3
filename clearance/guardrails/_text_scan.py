"""The guardrail half of ``SecretScanner`` and ``PiiRedactor``: what to scan, what to do.

:class:`TextScanGuardrail` walks the selected fields of the arguments or the result
(values and object keys; never the base64 data of an image or audio block), runs its
:class:`~clearance.guardrails._detectors.ScanPlan` over each string, and then blocks
(naming kinds and JSON pointers, never the text found), rewrites the spans to
``[REDACTED:<kind>]`` (``replace``), or withholds whole fields (``redact``).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Collection, Iterable, Mapping
from typing import Any, Literal

from clearance import _pointer
from clearance.guardrails._detectors import Detector, Finding, ScanPlan, custom_detectors, rewrite
from clearance.guardrails.base import Guardrail, GuardrailContext, GuardrailOutcome

__all__ = ["ScanAction", "TextScanGuardrail"]

ScanAction = Literal["block", "redact", "withhold"]
_ACTIONS = ("block", "redact", "withhold")
_MAX_LISTED = 5


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
        self._plan = ScanPlan(
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
