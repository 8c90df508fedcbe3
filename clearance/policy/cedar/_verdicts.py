"""Cedar's answer as a :class:`~clearance.policy.base.Verdict`.

* Allow, and every satisfied permit carries ``@ask("why")`` → ``ask`` with the reasons;
* Allow with any satisfied permit without ``@ask`` → ``allow``;
* Deny → ``deny``: the satisfied forbids as reasons, or none and "no policy permits ...";
* Allow while a ``forbid`` erred (Cedar skips an erroring policy) → ``deny``, the erring
  forbids as reasons: a forbid that cannot be evaluated (an overflow, a missing
  attribute) must not let the call through (rule R1, fail closed). An erring permit is
  skipped, as in Cedar: it can only take an allow away.

Reasons name policies by their ``@id`` (Cedar's positional id when there is none); errors
name the erroring policy the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from clearance.policy.base import Verdict
from clearance.policy.cedar._values import CedarResponse, PolicyInfo
from clearance.types import Principal

__all__ = ["EVALUATOR_NAME", "VerdictMap", "deny"]

EVALUATOR_NAME = "cedar"
"""``CedarEvaluator.name``: what ``Verdict.evaluator`` says."""
_CACHE_SIZE = 8192


def deny(message: str, version: str | None = None) -> Verdict:
    """A deny that no policy decided: the call could not be put to Cedar."""
    return Verdict("deny", message=message, evaluator=EVALUATOR_NAME, policy_version=version)


class VerdictMap:
    """Maps one policy set's answers to verdicts; answers without errors are cached (they
    repeat)."""

    def __init__(self, infos: tuple[PolicyInfo, ...], version: str | None = None) -> None:
        self.version = version
        """The digest of the policy set (``Verdict.policy_version``)."""
        self._labels: Mapping[str, str] = {i.id: i.label for i in infos}
        self._ask: Mapping[str, str] = {
            i.id: i.annotations["ask"] for i in infos if "ask" in i.annotations
        }
        self._forbids = frozenset(i.id for i in infos if i.effect == "forbid")
        self._cache: dict[tuple[Any, ...], Verdict] = {}

    def verdict(self, response: CedarResponse, principal: Principal, tool: str) -> Verdict:
        """The verdict for ``response`` to ``principal`` calling ``tool`` (a qualified name)."""
        if response.errors:
            return self._make(response, principal, tool)
        if response.reasons:
            key: tuple[Any, ...] = (response.decision, response.reasons)
        else:
            # The message names the principal and the tool.
            key = (response.decision, tool, principal.type, principal.id)
        cache = self._cache
        verdict = cache.get(key)
        if verdict is None:
            verdict = self._make(response, principal, tool)
            if len(cache) >= _CACHE_SIZE:
                cache.clear()
            cache[key] = verdict
        return verdict

    def _make(self, response: CedarResponse, principal: Principal, tool: str) -> Verdict:
        labels = self._labels
        errors = tuple(
            f"{labels.get(e.policy_id, e.policy_id)}: {e.message}" if e.policy_id else e.message
            for e in response.errors
        )
        reasons = tuple(labels.get(r, r) for r in response.reasons)
        names = MappingProxyType(
            {labels[r]: r for r in response.reasons if r in labels and labels[r] != r}
        )
        erred = [e for e in response.errors if e.policy_id in self._forbids]
        if response.decision == "allow" and erred:
            failed = tuple(
                dict.fromkeys(labels.get(e.policy_id, e.policy_id) for e in erred if e.policy_id)
            )
            message = (
                f"forbid {', '.join(failed)} could not be evaluated; a forbid that fails "
                "denies the call"
            )
            return Verdict(
                "deny", failed, errors, message, EVALUATOR_NAME, MappingProxyType({}), self.version
            )
        if response.decision == "allow":
            asks = [self._ask[r] for r in response.reasons if r in self._ask]
            if len(asks) == len(response.reasons):
                why = "; ".join(dict.fromkeys(a for a in asks if a)) or (
                    "approval required by " + ", ".join(reasons)
                )
                return Verdict("ask", reasons, errors, why, EVALUATOR_NAME, names, self.version)
            return Verdict("allow", reasons, errors, None, EVALUATOR_NAME, names, self.version)
        if reasons:
            message = f"forbidden by {', '.join(reasons)}"
        elif any(e.policy_id is None for e in response.errors):
            message = "Cedar could not evaluate the request: " + "; ".join(
                e.message for e in response.errors if e.policy_id is None
            )
        else:
            message = f"no policy permits {principal} to call {tool}"
        return Verdict("deny", reasons, errors, message, EVALUATOR_NAME, names, self.version)
