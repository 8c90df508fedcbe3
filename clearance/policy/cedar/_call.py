"""The one call into Cedar for a decision, direct when that is shown to agree.

``cedarpy.is_authorized`` wraps the Rust call in a batch of one, copies the request and
builds result objects, about a third of a decision's cost. :class:`CedarCall` calls the Rust
entry point under it directly instead, the same way the wrapper calls it, once a first
decision has shown that both paths answer alike; otherwise (another cedarpy, a different
answer, an internal API that changed shape) every decision goes through the public
function. The R10 property (``tests/properties/test_r10_same_decision_at_any_scale.py``)
compares the engine with the public function on every run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any

import cedarpy

__all__ = ["Answer", "CedarCall", "cedar_call"]

Answer = tuple[bool, list[str], list[str]]
"""``(allowed, determining policy ids, error messages)``."""

# The context's JSON text, as json.dumps writes it, from an encoder built once:
# json.dumps builds one per call, which costs more than the encoding itself. Without
# json's check for circular references (the C encoder then fails with RecursionError,
# and the call falls back to cedarpy.is_authorized, as for any failure of this path).
_encode_chunks = (
    c_make_encoder(
        None,
        json.JSONEncoder().default,
        encode_basestring_ascii,
        None,
        ": ",
        ", ",
        False,
        False,
        True,
    )
    if c_make_encoder is not None
    else None
)


def _context_json(context: Any) -> str:
    if _encode_chunks is None:  # pragma: no cover - CPython always has the C encoder
        return json.dumps(context)
    return "".join(_encode_chunks(context, 0))


_DECODER = json.JSONDecoder()
_ALLOW = '{"decision":"Allow","correlation_id":null,"diagnostics":'
_DENY = '{"decision":"Deny","correlation_id":null,"diagnostics":'


def _read_answer(raw: str) -> Answer:
    """One answer of cedarpy's batch call: the decision and the diagnostics, read without
    the metrics that follow them (most of the text, a third of a decision's Python cost).

    Raises:
        ValueError: the answer is not laid out as expected (then the whole text is read).
    """
    if raw.startswith(_ALLOW):
        allowed, start = True, len(_ALLOW)
    elif raw.startswith(_DENY):
        allowed, start = False, len(_DENY)
    else:
        return _read_whole(raw)
    diagnostics, end = _DECODER.raw_decode(raw, start)
    if raw[end : end + 1] not in (",", "}") or type(diagnostics) is not dict:
        return _read_whole(raw)
    reasons = diagnostics.get("reason", [])
    errors = diagnostics.get("errors", [])
    if type(reasons) is not list or type(errors) is not list:
        return _read_whole(raw)
    return allowed, reasons, errors


def _read_whole(raw: str) -> Answer:
    answer = json.loads(raw)
    diagnostics = answer.get("diagnostics") or {}
    return (
        answer["decision"] == "Allow",
        diagnostics.get("reason", []),
        diagnostics.get("errors", []),
    )


class CedarCall:
    """Decides requests with Cedar, through ``internal`` when it agrees with the public call.

    Args:
        internal: cedarpy's batch entry point (``cedarpy._internal.is_authorized_batch``),
            or ``None`` to always use ``cedarpy.is_authorized``.
    """

    def __init__(self, internal: Callable[..., Any] | None) -> None:
        self.internal = internal
        self.direct: bool | None = None
        """Whether the direct path agrees with ``cedarpy.is_authorized``: ``None`` until the
        first decision checked it, ``False`` once it disagreed or failed (never retried)."""

    def authorize(
        self, request: dict[str, Any], policies: Any, entities: Any, schema: Any
    ) -> Answer:
        """One Cedar decision on handles: ``(allowed, reasons, errors)``."""
        if self.direct is not False and self.internal is not None:
            try:
                fast = self._direct(request, policies, entities, schema)
            except Exception:  # an internal API that changed shape: stop using it
                self.direct = False
            else:
                if self.direct is None:
                    public = cedarpy.is_authorized(request, policies, entities, schema)
                    slow = (public.allowed, public.diagnostics.reasons, public.diagnostics.errors)
                    self.direct = fast == slow
                    return slow
                return fast
        result = cedarpy.is_authorized(request, policies, entities, schema)
        return result.allowed, result.diagnostics.reasons, result.diagnostics.errors

    def _direct(self, request: dict[str, Any], policies: Any, entities: Any, schema: Any) -> Answer:
        assert self.internal is not None
        context = request.get("context")
        call = {**request, "context": _context_json(context)} if context is not None else request
        return _read_answer(self.internal([call], policies, entities._inner, schema, False)[0])


cedar_call = CedarCall(getattr(getattr(cedarpy, "_internal", None), "is_authorized_batch", None))
"""The process's call into Cedar, shared by every engine (the check runs once)."""
