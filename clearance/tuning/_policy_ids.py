"""Which policies an evaluator holds, so that a replay can name those that never decided."""

from __future__ import annotations

from typing import Any

from clearance.policy.base import AllOf
from clearance.policy.local import LocalEvaluator
from clearance.policy.noop import NoopEvaluator

__all__ = ["policy_ids"]


def policy_ids(evaluator: Any) -> tuple[str, ...] | None:
    """The ids of every policy or rule an evaluator holds, as they appear in
    ``Verdict.reasons``; ``None`` when it cannot say.

    Knows :class:`~clearance.policy.LocalEvaluator` (``allow:files.*``),
    :class:`~clearance.policy.CedarEvaluator` (each policy's ``@id``, else Cedar's id;
    templates excluded), :class:`~clearance.policy.AllOf` (the union) and
    :class:`~clearance.policy.NoopEvaluator` (none). Any other evaluator may define a
    ``policy_ids`` attribute or method.
    """
    if isinstance(evaluator, LocalEvaluator):
        return tuple(dict.fromkeys(rule.id for rule in evaluator.rules))
    if isinstance(evaluator, NoopEvaluator):
        return ()
    if isinstance(evaluator, AllOf):
        out: dict[str, None] = {}
        for inner in evaluator.evaluators:
            ids = policy_ids(inner)
            if ids is None:
                return None
            out.update(dict.fromkeys(ids))
        return tuple(out)
    hook = getattr(evaluator, "policy_ids", None)
    if hook is not None:
        value = hook() if callable(hook) else hook
        return tuple(str(v) for v in value)
    engine = getattr(evaluator, "engine", None)
    infos = getattr(engine, "policies", None)
    if infos is not None:
        return tuple(dict.fromkeys(str(i.label) for i in infos if i.kind != "template"))
    return None
