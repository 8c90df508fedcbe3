"""Provenance: where each argument of a call came from (issue 16).

A session records the values that enter it: the user's and the system's messages
(``session.add_message``, ``session.run(prompt)``) and every tool result the pipeline
returns. For each top-level argument of a call, the pipeline derives where its value came
from: the user (a user message, or a source the pack's trust list names), a tool result
(``tool:<qualified name>``), or nowhere (the model made it up). Policies read it as
``context.provenance.<argument>`` (Cedar), ``<argument>.from`` / ``<argument>.values_from``
(local rules), ``ctx.provenance`` (guardrails); ``explain`` and the journal's
``call_decided`` show it.

Values are canonical facts (:mod:`clearance.facts`: addresses, URLs and hosts, IBAN-like
ids, numbers) and literal strings, matched exactly (:mod:`clearance.provenance.values`);
:mod:`clearance.provenance.ledger` keeps them, bounded, failing safe;
:mod:`clearance.provenance.trust` reads a pack's trust list. See docs/provenance.md.
"""

from clearance.provenance.ledger import (
    ORIGIN_ATTRIBUTES,
    Provenance,
    ReportedProvenance,
    origin_label,
    values_label,
)
from clearance.provenance.trust import TRUST_FILE, TrustList

__all__ = [
    "ORIGIN_ATTRIBUTES",
    "TRUST_FILE",
    "Provenance",
    "ReportedProvenance",
    "TrustList",
    "origin_label",
    "values_label",
]
