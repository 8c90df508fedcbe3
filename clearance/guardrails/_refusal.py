"""How the allow/deny-list guardrails refuse: block, or ask a person.

``Pattern`` and ``UrlAllowlist`` take ``action="block"`` (the default) or ``"ask"``; both
settle their option and their outcome here, so that the two read and behave alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from clearance.guardrails.base import GuardrailOutcome

__all__ = ["RefusalAction", "first_refusal", "refusal_action"]

RefusalAction = Literal["block", "ask"]


def refusal_action(action: RefusalAction) -> RefusalAction:
    """``action`` if it is ``"block"`` or ``"ask"``.

    Raises:
        ValueError: it is anything else.
    """
    if action not in ("block", "ask"):
        raise ValueError(f"action must be 'block' or 'ask', not {action!r}")
    return action


def first_refusal(messages: Iterable[str], action: RefusalAction) -> GuardrailOutcome:
    """Block, or ask when ``action`` is ``"ask"``, with the first of ``messages``; allow
    when there is none.

    ``messages`` is consumed lazily: only the first one is ever produced, so a check can
    pass a generator over every field and stop at the first problem.
    """
    for message in messages:
        if action == "ask":
            return GuardrailOutcome.ask(message)
        return GuardrailOutcome.block(message)
    return GuardrailOutcome.allow()
