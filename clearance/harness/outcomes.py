"""What the pipeline answers: how a call ended, what it would decide, and whether a host may
run a call itself.

- :class:`CallOutcome`: how a call run by clearance (``session.call_tool``) or recorded by a
  host (``session.record_result``) ended, as the application and the model see it;
- :class:`Decision`: what the pipeline would do with a call, without running, asking or
  journaling anything (``Harness.decide``, ``clearance policy explain``, replay);
- :class:`Authorization`: whether a host that runs its own tools may run a call
  (``session.authorize``), and with which canonical arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from clearance.harness.tools import CallToolResult

__all__ = ["Authorization", "AuthorizationStatus", "CallOutcome", "Decision", "OutcomeStatus"]

OutcomeStatus = Literal[
    "ok", "error", "failed", "cancelled", "timeout", "denied", "blocked", "invalid", "overloaded"
]
"""How a call ended: ``ok``/``error`` (the handler ran; ``error`` is a domain error it
reported), ``failed`` (it raised), ``cancelled``, ``timeout``; or, for a call that never
ran, ``denied`` (evaluator or ask), ``blocked`` (guardrail or fact), ``invalid`` (unknown
tool, reused call id, bad arguments) or ``overloaded``."""


@dataclass(slots=True)
class CallOutcome:
    """How a call ended, as the application and the model see it.

    ``status`` is ``ok`` or ``error`` (the handler ran; ``error`` is a domain error it
    reported), ``failed`` (it raised), ``cancelled``, ``timeout``, or, for calls that never
    ran, ``denied`` (evaluator or ask), ``blocked`` (guardrail), ``invalid`` (unknown tool,
    reused call id, bad arguments) or ``overloaded``.
    """

    call_id: str
    tool: str
    """The tool's model alias (the name as given when the tool is unknown)."""
    qualified_name: str | None
    model_alias: str | None
    status: OutcomeStatus
    result: CallToolResult | None = None
    """What the handler returned, after result guardrails (None when it did not run)."""
    message: str | None = None
    correlation_id: str = ""
    decision: str | None = None
    """The authorization decision: ``allow``, ``deny``, ``ask`` (then answered) or ``error``."""
    reasons: tuple[str, ...] = ()
    grant: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def is_error(self) -> bool:
        return self.status != "ok"

    @property
    def text(self) -> str:
        """What a text-only model sees."""
        if self.result is not None and self.status in ("ok", "error"):
            return self.result.text
        return self.message or self.status

    def to_model(self) -> dict[str, Any]:
        """The result as MCP-style content for a model API."""
        if self.result is not None and self.status in ("ok", "error"):
            body = self.result.to_json()
            body["is_error"] = self.status != "ok"
            return body
        return {
            "content": [{"type": "text", "text": self.text}],
            "structured_content": None,
            "is_error": True,
        }


@dataclass(slots=True)
class Decision:
    """What the pipeline would do with a call, without running it (``Harness.decide``).

    ``outcome`` is ``allow``, ``ask``, ``deny``, ``error`` (the evaluator failed: enforced
    as deny), ``blocked`` (a guardrail or a fact) or ``invalid`` (unknown tool, bad
    arguments). ``stage`` names the stage that decided.
    """

    outcome: Literal["allow", "ask", "deny", "error", "blocked", "invalid"]
    stage: str
    reasons: tuple[str, ...] = ()
    message: str | None = None
    verdict: dict[str, Any] | None = None
    guardrails: list[dict[str, Any]] = field(default_factory=list)
    schema: dict[str, Any] | None = None
    timing_us: dict[str, int] = field(default_factory=dict)
    arguments: dict[str, Any] | None = None
    qualified_name: str | None = None
    shadow: dict[str, Any] | None = None
    facts: dict[str, Any] | None = None
    """The canonical facts the evaluator saw (withheld arguments' facts left out)."""
    provenance: dict[str, Any] | None = None
    """Where each argument came from, as the evaluator saw it (:mod:`clearance.provenance`;
    a withheld argument's record without its ``tool_values``); None when the call ended
    before the evaluator."""

    def to_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "stage": self.stage,
            "reasons": list(self.reasons),
            "message": self.message,
            "verdict": self.verdict,
            "guardrails": self.guardrails,
            "schema": self.schema,
            "timing_us": self.timing_us,
            "arguments": self.arguments,
            "qualified_name": self.qualified_name,
            "shadow": self.shadow,
            "facts": self.facts,
            "provenance": self.provenance,
        }


AuthorizationStatus = Literal["allowed", "denied", "pending"]


@dataclass(slots=True)
class Authorization:
    """Whether a host that runs its own tools may run one call (``session.authorize``).

    - ``allowed``: run the tool with :attr:`arguments` (the final, canonical arguments:
      not the ones the model sent), then report with ``session.record_result`` (or run it
      inside ``session.execution``), which journals the run and applies result guardrails;
    - ``denied``: do not run it; show the model :attr:`message`;
    - ``pending``: an approval is open (:attr:`ask_id`); the host may pause and call
      ``authorize`` again with the same call id once it is answered (from this process or
      another: ``clearance asks approve``, an inbox, a framework's approval API).
    """

    status: AuthorizationStatus
    call_id: str
    tool: str
    """The tool's model alias (the name as given when the tool is unknown)."""
    qualified_name: str | None
    arguments: dict[str, Any] | None = None
    """For ``allowed``: exactly what the tool must run with (validated, canonical, after
    guardrail rewrites). ``None`` otherwise."""
    message: str | None = None
    """For ``denied`` and ``pending``: what the model may be shown."""
    decision: str | None = None
    """The authorization decision: ``allow``, ``deny``, ``ask`` or ``error``."""
    reasons: tuple[str, ...] = ()
    correlation_id: str = ""
    grant: str | None = None
    ask_id: str | None = None
    """For ``pending`` (and an allow or deny that came from an answered ask): the ask."""
    answered_by: str | None = None
    """Who answered the ask, when one was answered."""
    outcome: CallOutcome | None = None
    """For ``denied``: the outcome to give the model (its ``to_model()`` is the content)."""

    @property
    def allowed(self) -> bool:
        return self.status == "allowed"

    @property
    def pending(self) -> bool:
        return self.status == "pending"
