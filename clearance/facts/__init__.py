"""Canonical facts: each argument a tool interprets, in the one form that runs (rule R11).

Tools declare how arguments are interpreted, ``Tool(..., root=ws, facts={"/path":
"path"})``; the pipeline canonicalizes them right after schema validation, and
guardrails, evaluators (``context.facts.<argument>`` in Cedar), grants, asks, the journal
and the handler all see the canonical value. See :mod:`clearance.facts.base` for the
protocol, and each kind's module for what it canonicalizes and refuses.
"""

from clearance.facts.base import (
    ATTRIBUTE_TYPES,
    Canonical,
    CustomFact,
    FactError,
    FactKind,
    SessionFact,
)
from clearance.facts.declared import DeclaredFact, apply_facts, declare_facts
from clearance.facts.numbers import NumberFact
from clearance.facts.paths import PathFact, resolve_relative
from clearance.facts.web import EmailFact, UrlFact

__all__ = [
    "ATTRIBUTE_TYPES",
    "Canonical",
    "CustomFact",
    "DeclaredFact",
    "EmailFact",
    "FactError",
    "FactKind",
    "NumberFact",
    "PathFact",
    "SessionFact",
    "UrlFact",
    "apply_facts",
    "declare_facts",
    "resolve_relative",
]
