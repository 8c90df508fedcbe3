"""The working state of one call as it moves through the pipeline, and the handle through
which ``Session.aclose`` cancels it (rule R7: every call ends exactly once).
"""

from __future__ import annotations

import itertools
import secrets
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

    from clearance.harness.cancellation import CallHandle
    from clearance.harness.grants import Grant
    from clearance.harness.session import Session
    from clearance.harness.tools import Tool
    from clearance.harness.view import CallView
    from clearance.policy.base import Verdict
    from clearance.provenance import Provenance

__all__ = ["CallState", "copy_json", "elapsed_us", "new_correlation_id", "tool_names"]


def tool_names(tool: Tool) -> dict[str, Any]:
    """A tool's names as records carry them."""
    return {
        "tool": tool.model_alias,
        "qualified_name": tool.qualified_name,
        "model_alias": tool.model_alias,
    }


class CallState:
    """Working state of one call while it moves through the stages.

    A plain class: the fields that start the same for every call are class attributes
    (read through until a stage sets them), so that making a call's state costs the few
    fields that differ, not all of them (this is built once per call).
    """

    tool: Tool | None = None
    dry: bool = False
    """Decide only: no journal, no call-id bookkeeping, no asks, no dispatch."""
    decided_written: bool = False
    started_at: float = 0.0
    """When the handler got its slot (for the duration in tool_finished)."""
    dispatch_arguments: Any = None
    """The handler's own copy of the final arguments (see ``_decide``)."""
    admitted: bool = False
    started_written: bool = False
    facts: dict[str, Any] | None = None
    """The canonical facts of the declared arguments (R11), once computed."""
    verdict: Verdict | None = None
    """The evaluator's allow or ask, once evaluated."""
    guard_asks: tuple[tuple[str, str], ...] = ()
    """``(guardrail, reason)`` of each argument guardrail that asked."""
    grant: Grant | None = None
    """The grant that answered the ask, or the one its answer created."""
    host: bool = False
    """The host runs the tool (``authorize``), not clearance."""
    wait: bool | None = None
    """For ``authorize``: wait for an ask's answer (True), come back pending (False), or
    wait only when someone here can answer (None)."""
    authorized_at: float = 0.0
    """When ``authorize`` allowed the call (``time.monotonic()``): it expires
    ``authorization_ttl`` seconds later (rule R12)."""
    pending: bool = False
    """The call's ask waits in the store: ``authorize`` comes back pending."""
    pending_recorded: bool = False
    """Its pending was journaled already: this is the same call tried again while its
    ask still waits (no second ``call_decided``; see ``Approval._ask``)."""
    resume_key: str | None = None
    """What a stored ask of this call is found again by, with its principal, tool and
    canonical arguments (default: the call id)."""
    running: CallHandle | None = None
    """The handle ``Session.aclose`` cancels the call through (None when deciding only)."""
    ledger: Provenance | None = None
    """The values the call is described against (:mod:`clearance.provenance`): a ledger
    given to ``decide``; None means the session's own."""
    provenance: Mapping[str, Any] | None = None
    """Where each argument came from, as the evaluator saw it (once evaluated)."""
    trace: Any = None
    """The call's span and its clock (:mod:`clearance.harness.telemetry`) while it is
    traced; None when telemetry is off."""
    view: CallView | None = None
    """The one view of the call every surface renders (:mod:`clearance.harness.view`),
    once its final arguments are known (after the argument guardrails)."""

    def __init__(
        self,
        session: Session,
        call_id: str,
        turn_id: str | None,
        name: str,
        arguments: Any,
        correlation_id: str,
        t0: float,
    ) -> None:
        self.session = session
        self.call_id = call_id
        self.turn_id = turn_id
        self.name = name
        self.arguments = arguments
        self.correlation_id = correlation_id
        self.t0 = t0
        self.names: dict[str, Any] = {"tool": name, "qualified_name": None, "model_alias": None}
        """The tool's names for records (``tool``, ``qualified_name``, ``model_alias``);
        once resolved, shared by every call of the tool: unpack it, never change it."""
        self.withheld: set[str] = set()
        """JSON pointers of the arguments whose values are withheld (R8)."""
        self.secrets: set[str] = set()
        """The values scrubbed from every record and message: the withheld values, and
        what an argument guardrail's rewrite removed."""
        self.withheld_values: set[str] = set()
        """The withheld values themselves (R8: at the withheld pointers), which the
        call's view withholds wherever they occur (see :meth:`withhold`)."""
        self.record: dict[str, Any] = {}
        """The ``call_decided`` record, filled in stage by stage."""
        self.timing: dict[str, int] = {}
        """Microseconds per stage."""

    def withhold(self, values: set[str]) -> None:
        """Withhold ``values`` (found at a withheld pointer): from the view, and from every
        record and message."""
        self.withheld_values.update(values)
        self.secrets.update(values)

    def handler_arguments(self) -> dict[str, Any]:
        """A fresh copy of the arguments the handler runs with (validated, canonical,
        authorized): a caller may change it without changing the call."""
        copied: dict[str, Any] = copy_json(self.dispatch_arguments)
        return copied

    def identity(self) -> dict[str, Any]:
        """The tool's names for records: a fresh dict each time (records own their data)."""
        return dict(self.names)


_SCALARS = frozenset({str, int, float, bool, type(None)})


def copy_json(value: Any) -> Any:
    """A deep copy of a JSON value (dicts, lists, scalars): several times faster than
    ``copy.deepcopy``, which matters on every call."""
    if type(value) is dict:
        if _SCALARS.issuperset(map(type, value.values())):
            return value.copy()  # nothing inside to copy: one C call
        return {k: copy_json(v) for k, v in value.items()}
    if type(value) is list:
        return [copy_json(v) for v in value]
    return value


def elapsed_us(start: float) -> int:
    return int((time.perf_counter() - start) * 1_000_000)


_CORRELATION_PREFIX = secrets.token_hex(3)
_correlation_counter = itertools.count(1)


def new_correlation_id() -> str:
    """A short id unique within the process (random prefix + counter): it joins what the
    model sees to the diagnostics and the journal; it is not a secret."""
    return f"{_CORRELATION_PREFIX}{next(_correlation_counter):06x}"
