"""Guardrails: checks that look inside a call's arguments or result.

The contract (:class:`GuardrailOutcome`, :class:`ArgumentGuardrail`,
:class:`ResultGuardrail`) is in :mod:`clearance.guardrails.base`; docs/guardrails.md
tells the whole story.

Naming rule. A guardrail's stage is part of its class, because the pipeline tells the
stages apart by class (``ArgumentGuardrail`` or ``ResultGuardrail``). A built-in that
works in both stages is two classes with the same options, named ``Argument<Name>`` and
``Result<Name>``; ``<Name>.for_arguments(...)`` and ``<Name>.for_results(...)`` build the
same two from either one. Both variants are named ``<Name>`` in records unless given a
``name``. A built-in of one stage only has one bare name. The bare names the two-stage
built-ins had first stay as aliases of the stage each was written for: ``SecretScanner``
and ``PiiRedactor`` are the result stage, ``SizeLimit`` and ``Pattern`` the argument
stage.

Built-ins:

- :class:`PathScope` (arguments): paths stay inside a root (rule R9); also opens files
  safely.
- :class:`UrlAllowlist` (arguments): URLs go only to allowed schemes, hosts and ports.
- :class:`ArgumentSecretScanner` / :class:`ResultSecretScanner` (alias
  ``SecretScanner``: results): credentials.
- :class:`ArgumentPiiRedactor` / :class:`ResultPiiRedactor` (alias ``PiiRedactor``:
  results): e-mail, phone, card numbers, IBANs.
- :class:`ArgumentSizeLimit` / :class:`ResultSizeLimit` (alias ``SizeLimit``: arguments):
  serialized size bounds.
- :class:`ArgumentPattern` / :class:`ResultPattern` (alias ``Pattern``: arguments): regex
  allow/deny lists on fields.
"""

from clearance.guardrails._detectors import Finding
from clearance.guardrails.base import (
    ArgumentGuardrail,
    Guardrail,
    GuardrailContext,
    GuardrailOutcome,
    ResultGuardrail,
)
from clearance.guardrails.limits import (
    ArgumentPattern,
    ArgumentSizeLimit,
    Pattern,
    ResultPattern,
    ResultSizeLimit,
    SizeLimit,
)
from clearance.guardrails.paths import PathScope, PathScopeError
from clearance.guardrails.pii import PII_KINDS, ArgumentPiiRedactor, PiiRedactor, ResultPiiRedactor
from clearance.guardrails.secret_scanner import (
    SECRET_KINDS,
    ArgumentSecretScanner,
    ResultSecretScanner,
    SecretScanner,
)
from clearance.guardrails.urls import UrlAllowlist

__all__ = [
    "PII_KINDS",
    "SECRET_KINDS",
    "ArgumentGuardrail",
    "ArgumentPattern",
    "ArgumentPiiRedactor",
    "ArgumentSecretScanner",
    "ArgumentSizeLimit",
    "Finding",
    "Guardrail",
    "GuardrailContext",
    "GuardrailOutcome",
    "PathScope",
    "PathScopeError",
    "Pattern",
    "PiiRedactor",
    "ResultGuardrail",
    "ResultPattern",
    "ResultPiiRedactor",
    "ResultSecretScanner",
    "ResultSizeLimit",
    "SecretScanner",
    "SizeLimit",
    "UrlAllowlist",
]
