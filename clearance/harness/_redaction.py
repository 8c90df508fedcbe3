"""Withheld values (rule R8): what a call's records, asks and messages may show.

A value is withheld when its tool marks the argument ``sensitive`` or an argument guardrail
redacts it. The pipeline collects the withheld values of each call (``values_at``) and
passes every record, message and log line through :func:`scrub` / :func:`scrub_record`
(see :mod:`clearance.harness.scrub` for the encodings recognized); arguments are shown
with withheld values replaced (:func:`visible`), and facts of a withheld argument are not
shown at all (:func:`visible_facts`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from clearance import _pointer
from clearance.harness.scrub import scrub_json, scrub_text

__all__ = [
    "RECORD_NAMES",
    "hidden_arguments",
    "scrub",
    "scrub_record",
    "values_at",
    "visible",
    "visible_facts",
    "visible_provenance",
    "withheld_deciding",
]

RECORD_NAMES = frozenset(
    (
        *("tool", "qualified_name", "model_alias", "principal"),
        *("session_id", "turn_id", "call_id", "correlation_id", "ask_id", "grant"),
        *("status", "outcome", "decision", "answer", "how", "duration_us", "timing_us"),
    )
)
"""Fields of a call's records that clearance fills in (names, ids, statuses, timings):
never scrubbed, so that a short withheld value cannot garble what joins records together."""


def values_at(document: Any, pointers: Iterable[str]) -> set[str]:
    """The strings (and numbers, as text) at ``pointers`` in ``document``."""
    found: set[str] = set()
    for pointer in pointers:
        for _, value in _pointer.find(document, pointer):
            for _, text in _pointer.iter_strings(value):
                if text:
                    found.add(text)
            if isinstance(value, int | float) and not isinstance(value, bool):
                found.add(str(value))
    return found


def scrub(text: str | None, secret_values: set[str]) -> str | None:
    """``text`` without withheld values (see :mod:`clearance.harness.scrub`)."""
    if text is None or not secret_values:
        return text
    return scrub_text(text, secret_values)


def scrub_record(data: dict[str, Any], secret_values: set[str]) -> dict[str, Any]:
    """A call's record without withheld values anywhere in it: arguments, messages,
    results (a tool may echo what it was given), structured content."""
    scrubbed: dict[str, Any] = scrub_json(data, secret_values, keep=RECORD_NAMES)
    return scrubbed


def visible(arguments: Any, withheld: set[str]) -> Any:
    """``arguments`` with the withheld pointers' values replaced by ``[REDACTED]``."""
    return _pointer.redact(arguments, sorted(withheld)) if withheld else arguments


def hidden_arguments(withheld: Iterable[str]) -> set[str]:
    """The top-level argument names a withheld pointer reaches (``"*"`` for all)."""
    return {(_pointer.parse(p) or ("*",))[0] for p in withheld}


def visible_facts(facts: Mapping[str, Any], withheld: set[str]) -> dict[str, Any]:
    """The facts records may show: none of a withheld argument."""
    if not withheld:
        return dict(facts)
    hidden = hidden_arguments(withheld)
    if "*" in hidden:
        return {}
    return {k: v for k, v in facts.items() if k not in hidden}


def visible_provenance(
    provenance: Mapping[str, Mapping[str, Any]], withheld: set[str]
) -> dict[str, Any]:
    """The provenance records may show: a withheld argument's record without the values
    found inside it (``tool_values``); the places and flags name no value. Records are
    made per call (``Described``): without withheld arguments they are shown as they are."""
    if not withheld:
        return dict(provenance)
    hidden = hidden_arguments(withheld)
    shown: dict[str, Any] = {}
    for name, record in provenance.items():
        shown[name] = dict(record)
        if name in hidden or "*" in hidden:
            shown[name].pop("tool_values", None)
    return shown


def withheld_deciding(deciding: Iterable[str], withheld: set[str]) -> list[str]:
    """The deciding arguments a person would be shown only as ``[REDACTED]``."""
    if not withheld:
        return []
    hidden = hidden_arguments(withheld)
    return [name for name in deciding if name in hidden or "*" in hidden]
