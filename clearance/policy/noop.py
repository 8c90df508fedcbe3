"""The evaluator that allows everything, for development and benchmarks only."""

from __future__ import annotations

from clearance.policy.base import AuthzRequest, Evaluator, Verdict

__all__ = ["NoopEvaluator"]

_ALLOW = Verdict("allow", ("noop",), evaluator="noop")


class NoopEvaluator(Evaluator):
    """Allows every call. Rule R4: this is the only evaluator that does, and only when chosen
    explicitly; a harness logs a warning when it starts with it."""

    name = "noop"
    allows_everything = True

    def policy_ids(self) -> tuple[str, ...]:
        """No ids: its one reason, ``noop``, names no policy."""
        return ()

    def evaluate(self, request: AuthzRequest) -> Verdict:
        return _ALLOW
