"""Authority evaluators: who may call which tool with which arguments."""

from typing import TYPE_CHECKING

from clearance.policy.base import (
    AllOf,
    AuthorityEvaluator,
    AuthzRequest,
    Effect,
    Evaluator,
    Principal,
    SessionInfo,
    ToolInfo,
    Verdict,
    as_evaluator,
    evaluate,
)
from clearance.policy.local import LocalEvaluator
from clearance.policy.noop import NoopEvaluator

if TYPE_CHECKING:
    from clearance.policy.authzen import AuthZenEvaluator
    from clearance.policy.cedar import CedarEngine, CedarEvaluator

__all__ = [
    "AllOf",
    "AuthZenEvaluator",
    "AuthorityEvaluator",
    "AuthzRequest",
    "CedarEngine",
    "CedarEvaluator",
    "Effect",
    "Evaluator",
    "LocalEvaluator",
    "NoopEvaluator",
    "Principal",
    "SessionInfo",
    "ToolInfo",
    "Verdict",
    "as_evaluator",
    "evaluate",
]


def __getattr__(name: str) -> object:
    # Cedar loads cedarpy; import it only when asked for.
    if name in ("CedarEvaluator", "CedarEngine"):
        from clearance.policy import cedar

        return getattr(cedar, name)
    if name == "AuthZenEvaluator":
        # The AuthZEN client loads ssl and (when built) h11: only when asked for.
        from clearance.policy import authzen

        return authzen.AuthZenEvaluator
    raise AttributeError(f"module 'clearance.policy' has no attribute {name!r}")
