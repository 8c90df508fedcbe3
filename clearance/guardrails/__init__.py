"""Guardrails: checks that look inside a call's arguments or result.

The contract (:class:`GuardrailOutcome`, :class:`ArgumentGuardrail`,
:class:`ResultGuardrail`) is in :mod:`clearance.guardrails.base`. Built-ins:

- :class:`PathScope`: paths stay inside a root (rule R9); also opens files safely.
- :class:`SecretScanner`: credentials in results (``.for_arguments()`` for arguments).
- :class:`PiiRedactor`: e-mail, phone, card numbers, IBANs (``.for_arguments()`` too).
- :class:`UrlAllowlist`: URLs go only to allowed schemes, hosts and ports.
- :class:`SizeLimit`: serialized size bounds (``.for_results()`` for results).
- :class:`Pattern`: regex allow/deny lists on fields (``.for_results()`` too).
"""

from clearance.guardrails._scan import Finding
from clearance.guardrails.base import (
    ArgumentGuardrail,
    Guardrail,
    GuardrailContext,
    GuardrailOutcome,
    ResultGuardrail,
)
from clearance.guardrails.limits import Pattern, ResultPattern, ResultSizeLimit, SizeLimit
from clearance.guardrails.paths import PathScope, PathScopeError
from clearance.guardrails.pii import PII_KINDS, ArgumentPiiRedactor, PiiRedactor
from clearance.guardrails.secret_scanner import (
    SECRET_KINDS,
    ArgumentSecretScanner,
    SecretScanner,
)
from clearance.guardrails.urls import UrlAllowlist

__all__ = [
    "PII_KINDS",
    "SECRET_KINDS",
    "ArgumentGuardrail",
    "ArgumentPiiRedactor",
    "ArgumentSecretScanner",
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
    "ResultSizeLimit",
    "SecretScanner",
    "SizeLimit",
    "UrlAllowlist",
]
