"""Policy coverage of decision tests: which policies and rules no case exercises.

A policy (a Cedar ``@id``, a local rule ``allow:files.*``) is *exercised* when it is among
the deciding policies (``Verdict.reasons``) of at least one case: a permit that allowed or
asked, a forbid that denied, a local rule that matched. A policy that never decides a case
is untested: a typo in its condition, or a condition that can never hold, would go unseen,
as a line no test runs would (``opa test --coverage``, Cerbos' test coverage).

A permit that some case satisfies but a forbid overrides is not exercised by that case:
nothing shows that it would allow what it should. Give it a case of its own.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from clearance.policy.base import AuthorityEvaluator
from clearance.policy.local import LocalEvaluator

__all__ = ["PolicyCoverage", "policy_coverage", "policy_locations"]


@dataclass(frozen=True, slots=True)
class PolicyCoverage:
    """Which of an evaluator's policies the decision tests exercise."""

    policies: tuple[str, ...]
    """Every policy or rule id the evaluator holds, in its order."""
    exercised: tuple[str, ...]
    """Those among the deciding policies of at least one case."""
    unexercised: tuple[str, ...]
    """Those no case exercises: untested policies."""
    locations: Mapping[str, str] = field(default_factory=dict)
    """Policy id → ``file:line`` where it is written, when known."""

    @property
    def percent(self) -> float:
        """Exercised policies as a percentage of all (100 when there are none)."""
        if not self.policies:
            return 100.0
        return 100.0 * len(self.exercised) / len(self.policies)

    def to_json(self) -> dict[str, Any]:
        return {
            "policies": len(self.policies),
            "exercised": len(self.exercised),
            "percent": round(self.percent, 2),
            "unexercised": [
                {"policy": p, "location": self.locations.get(p)} for p in self.unexercised
            ],
        }


def policy_coverage(
    ids: Iterable[str], decided: Iterable[Iterable[str]], locations: Mapping[str, str]
) -> PolicyCoverage:
    """The coverage of the policies ``ids`` by cases whose deciding policies are
    ``decided`` (one iterable of reasons per case)."""
    policies = tuple(dict.fromkeys(ids))
    seen = {reason for reasons in decided for reason in reasons}
    return PolicyCoverage(
        policies,
        tuple(p for p in policies if p in seen),
        tuple(p for p in policies if p not in seen),
        dict(locations),
    )


def policy_locations(evaluator: AuthorityEvaluator) -> dict[str, str]:
    """Where each policy of ``evaluator`` is written (``file:line``), for the evaluators
    that know: Cedar policies (their file and first line) and local rules (their rules
    file and line). Empty for any other evaluator."""
    if isinstance(evaluator, LocalEvaluator):
        return {
            rule.id: f"{evaluator.path or '<rules>'}:{rule.line}"
            for rule in evaluator.rules
            if rule.line is not None
        }
    # A CedarEvaluator exists only when its module was imported: looking it up there keeps
    # cedarpy unloaded for the other evaluators.
    cedar = sys.modules.get("clearance.policy.cedar.evaluator")
    cedar_type = getattr(cedar, "CedarEvaluator", None)
    if cedar_type is not None and isinstance(evaluator, cedar_type):
        return {
            info.label: info.location
            for info in evaluator.engine.policies
            if info.kind != "template"
        }
    return {}
