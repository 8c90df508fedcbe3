"""Proving things about Cedar policy sets with an SMT solver (``clearance[analysis]``).

``clearance policy analyze`` asks, over every request the generated schema allows, whether
a policy can ever apply, whether a permit is wholly shadowed by forbids, and, between two
sets, whether the new one allows, asks or denies anything differently from the old. Each
answer with a request is confirmed by Cedar before it is shown (``_checks``); the encoding
of Cedar into z3 is in ``_encode`` (the subset it covers, and what it refuses), the request
space in ``_world``, symbolic values in ``_values``.

z3 (``z3-solver``) is an optional dependency: importing this package without it raises
:class:`~clearance.errors.MissingExtraError` with the command that installs it.
"""

from __future__ import annotations

from clearance.errors import MissingExtraError as _MissingExtraError

try:
    import z3  # noqa: F401
except ImportError:
    raise _MissingExtraError("analysis", "policy analysis (clearance policy analyze)") from None

from clearance.policy.cedar.analysis._checks import (
    Analysis,
    Finding,
    FindingKind,
    analyze_directory,
    compare_directories,
    decide,
)
from clearance.policy.cedar.analysis._world import Request

__all__ = [
    "Analysis",
    "Finding",
    "FindingKind",
    "Request",
    "analyze_directory",
    "compare_directories",
    "decide",
]
