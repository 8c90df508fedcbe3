"""Deprecated: replay moved to :mod:`clearance.tuning`.

``docs/replay.md`` showed ``from clearance.policy.replay import HarnessSpec, replay``; such
imports keep working and warn (``DeprecationWarning``). Import from :mod:`clearance.tuning`
instead. This module is the one exception to the layers (``clearance.policy`` below
``clearance.tuning``): it only forwards the names below and is removed in a later release.
"""

from __future__ import annotations

import warnings
from typing import Any

import clearance.tuning

__all__: list[str] = []  # nothing new should import from here, not even with *

_MOVED = frozenset(
    {
        "OUTCOMES",
        "STAGES",
        "CorpusCall",
        "CorpusError",
        "Flip",
        "HarnessFactory",
        "HarnessSpec",
        "ReplayReport",
        "load_tool_declarations",
        "parse_corpus_line",
        "policy_ids",
        "read_corpus",
        "register_tool_declarations",
        "replay",
        "replay_async",
    }
)
"""What this module exported before the move."""


def __getattr__(name: str) -> Any:
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"clearance.policy.replay is deprecated: import {name} from clearance.tuning",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(clearance.tuning, name)
