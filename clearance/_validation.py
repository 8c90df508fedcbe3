"""Checking arguments against a tool's JSON Schema, with messages safe to show.

One wrapper for every place that validates arguments as the pipeline does: the pipeline
itself and the decision-test runner (``clearance.policy.testing``), so that a case is
refused exactly when a call would be.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from clearance import _pointer
from clearance.types import ArgumentValidator

__all__ = ["schema_problem"]

_MAX_SHOWN = 3
_MAX_MESSAGE = 200


def schema_problem(
    validator: ArgumentValidator,
    arguments: Any,
    *,
    withheld: Iterable[str] = (),
    scrub: Callable[[str], str] | None = None,
) -> str | None:
    """The first few schema violations of ``arguments``, or None when they are valid.

    Safe to show: a violation at or under a withheld pointer names only the place, and
    every message is scrubbed (``scrub``) before it is shortened (a shortened secret would
    no longer match itself).
    """
    if validator.is_valid(arguments):
        return None
    withheld = tuple(withheld)
    parts = []
    for index, err in enumerate(validator.iter_errors(arguments)):
        if index >= _MAX_SHOWN:
            break
        tokens = [str(p) for p in err.instance_path]
        where = "/" + "/".join(tokens)
        if any(_under_pointer(tokens, pointer) for pointer in withheld):
            parts.append(f"{where}: invalid (value withheld)")
            continue
        message = scrub(err.message) if scrub is not None else err.message
        parts.append(f"{where}: {_shorten(message)}")
    return "; ".join(parts) or "does not match the schema"


def _under_pointer(tokens: list[str], pointer: str) -> bool:
    """Whether the instance path ``tokens`` is at, under or above ``pointer`` (``*`` matches
    any token). Above counts too: an error about an object names its withheld members."""
    want = _pointer.parse(pointer)
    return all(w == "*" or w == t for w, t in zip(want, tokens, strict=False))


def _shorten(text: str, limit: int = _MAX_MESSAGE) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
