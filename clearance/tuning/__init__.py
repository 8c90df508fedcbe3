"""Tuning policies on recorded calls: replay, flips, and suggested policies.

This layer sits above :mod:`clearance.config` (it builds harnesses from a configuration)
and below :mod:`clearance.cli`. ``docs/replay.md`` is the guide.

- :func:`replay` / :func:`replay_async`: decide every call of a corpus with
  :meth:`~clearance.Harness.decide` and measure the outcome in a :class:`ReplayReport`;
  with a baseline, every call whose decision flips is a :class:`Flip`.
- :class:`HarnessSpec`: the harness the command line replays with (a configuration, other
  policies, declared tools), picklable for ``jobs > 1``; :func:`load_tool_declarations` and
  :func:`register_tool_declarations` declare tools that are never run, and
  :func:`tool_declarations` writes them for registered tools (``clearance tools export``).
- The corpus format: :class:`CorpusCall` (with its :class:`ConversationEntry` list),
  :func:`parse_corpus_line`, :func:`read_corpus`, :func:`open_corpus` (plain or compressed
  files), :class:`CorpusError`; :func:`calls_from_events` and :func:`corpus_record` turn a journal
  into corpus lines (``clearance journal export``).
- :func:`suggest`: allow rules generalized from allowed calls (:func:`allowed_calls`), as a
  :class:`SuggestionSet` rendered to Cedar or local rules and checked by parsing them back.

Where things are: ``_corpus`` (the format), ``_journal_calls`` (journal → rows → corpus
lines), ``_declarations`` and ``_harness_spec`` (what decides), ``_decide``, ``_runner`` and
``_parallel`` (running a replay, ``jobs``), ``_progress`` (how far it is, stopping it),
``_tally``, ``_flips``, ``_groups`` and ``_report`` (what is counted and reported),
``_patterns``, ``_policy_forms``, ``_policy_text``, ``_suggestions`` and ``_suggest``
(suggestions).
"""

from typing import TYPE_CHECKING

from clearance import _lazy

if TYPE_CHECKING:
    from clearance.tuning._corpus import (
        ConversationEntry,
        CorpusCall,
        CorpusError,
        Expected,
        Label,
        open_corpus,
        parse_corpus_line,
        read_corpus,
    )
    from clearance.tuning._declarations import (
        load_tool_declarations,
        register_tool_declarations,
        tool_declarations,
    )
    from clearance.tuning._flips import Flip
    from clearance.tuning._groups import GroupCall, GroupFinding
    from clearance.tuning._harness_spec import HarnessFactory, HarnessSpec
    from clearance.tuning._journal_calls import (
        CallFolder,
        CallRow,
        calls_from_events,
        corpus_record,
    )
    from clearance.tuning._patterns import ArgumentConstraint, ConstraintKind
    from clearance.tuning._progress import ReplayProgress
    from clearance.tuning._report import ReplayReport, policy_ids
    from clearance.tuning._runner import replay, replay_async
    from clearance.tuning._suggest import allowed_calls, is_allowed_record, suggest
    from clearance.tuning._suggestions import PrincipalRules, Suggestion, SuggestionSet
    from clearance.tuning._tally import OUTCOMES, STAGES

__all__ = [
    "OUTCOMES",
    "STAGES",
    "CallFolder",
    "CallRow",
    "ConversationEntry",
    "CorpusCall",
    "CorpusError",
    "Expected",
    "Flip",
    "GroupCall",
    "GroupFinding",
    "HarnessFactory",
    "HarnessSpec",
    "Label",
    "ArgumentConstraint",
    "ConstraintKind",
    "PrincipalRules",
    "ReplayProgress",
    "ReplayReport",
    "Suggestion",
    "SuggestionSet",
    "allowed_calls",
    "calls_from_events",
    "corpus_record",
    "is_allowed_record",
    "load_tool_declarations",
    "open_corpus",
    "parse_corpus_line",
    "policy_ids",
    "read_corpus",
    "register_tool_declarations",
    "replay",
    "replay_async",
    "suggest",
    "tool_declarations",
]

# Imported when first read: ``clearance journal`` needs only the journal's rows, not the
# replay runner, the configuration and Cedar (issue 34).
__getattr__, __dir__ = _lazy.lazy_attributes(
    __name__,
    {
        "clearance.tuning._corpus": (
            "ConversationEntry",
            "CorpusCall",
            "CorpusError",
            "Expected",
            "Label",
            "open_corpus",
            "parse_corpus_line",
            "read_corpus",
        ),
        "clearance.tuning._declarations": (
            "load_tool_declarations",
            "register_tool_declarations",
            "tool_declarations",
        ),
        "clearance.tuning._flips": ("Flip",),
        "clearance.tuning._groups": ("GroupCall", "GroupFinding"),
        "clearance.tuning._harness_spec": ("HarnessFactory", "HarnessSpec"),
        "clearance.tuning._journal_calls": (
            "CallFolder",
            "CallRow",
            "calls_from_events",
            "corpus_record",
        ),
        "clearance.tuning._patterns": ("ArgumentConstraint", "ConstraintKind"),
        "clearance.tuning._progress": ("ReplayProgress",),
        "clearance.tuning._report": ("ReplayReport", "policy_ids"),
        "clearance.tuning._runner": ("replay", "replay_async"),
        "clearance.tuning._suggest": ("allowed_calls", "is_allowed_record", "suggest"),
        "clearance.tuning._suggestions": ("PrincipalRules", "Suggestion", "SuggestionSet"),
        "clearance.tuning._tally": ("OUTCOMES", "STAGES"),
    },
)
