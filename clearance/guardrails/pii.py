"""PII redaction: find personal data (e-mail, phone, card numbers, IBANs) and redact it.

Like the secret scanner, one engine works in both stages: :class:`ResultPiiRedactor`
reads results, :class:`ArgumentPiiRedactor` arguments. ``PiiRedactor`` is the documented
alias of the result stage.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from clearance.guardrails._detectors import Detector
from clearance.guardrails._text_scan import ScanAction, TextScanGuardrail
from clearance.guardrails.base import ArgumentGuardrail, ResultGuardrail

__all__ = [
    "PII_KINDS",
    "ArgumentPiiRedactor",
    "PiiRedactor",
    "ResultPiiRedactor",
    "iban_valid",
    "luhn_valid",
]

# Lengths by country (ISO 13616 registry); an IBAN of another length fails even if its
# checksum happens to work out.
_IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28,
    "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23,
    "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26,
    "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20,
    "LV": 21, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30, "NL": 18,
    "NO": 15, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24,
    "SC": 31, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25, "SV": 28, "TL": 23, "TN": 24,
    "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}  # fmt: skip


def luhn_valid(number: str) -> bool:
    """True if the digits of ``number`` (separators ignored) pass the Luhn checksum."""
    digits = [int(c) for c in number if c.isdigit()]
    if not digits:
        return False
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def iban_valid(text: str) -> bool:
    """True if ``text`` (spaces ignored) is an IBAN with a known length and mod-97 check."""
    iban = text.replace(" ", "").upper()
    if _IBAN_LENGTHS.get(iban[:2]) != len(iban) or not iban.isalnum() or not iban.isascii():
        return False
    rearranged = iban[4:] + iban[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


def _card(text: str) -> bool:
    digits = "".join(c for c in text if c.isdigit())
    # Issuers' numbers start with 2-6; this keeps out 13-digit millisecond timestamps
    # (which start with 1) that would pass Luhn one time in ten.
    return 13 <= len(digits) <= 19 and digits[0] in "23456" and luhn_valid(digits)


_PHONE_GROUP_SEP = re.compile(r"[ .\-]")


def _phone(text: str) -> bool:
    digits = sum(c.isdigit() for c in text)
    if text.startswith("+"):
        # E.164 allows 15 digits, but a longer run that starts like a phone number is
        # more likely a phone number with an extension than anything else.
        return digits >= 8
    if not 9 <= digits <= 12:
        return False
    # the space after "(555)" is not a group separator
    separators = set(_PHONE_GROUP_SEP.findall(text.split(")")[-1].lstrip()))
    if len(separators) > 1:  # "2024-01-15 12": dates and times mix separators
        return False
    if separators == {"."}:
        # 192.168.100.200 and version numbers: a phone has a group of four digits
        return any(len(g) >= 4 for g in text.split("."))
    return True


_EMAIL_LOCAL = re.compile(r"[A-Za-z0-9._%+-]{1,64}\Z")
_EMAIL_LOCAL_CHARS = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._%+-"
)
_EMAIL_DOMAIN = re.compile(
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}(?![A-Za-z0-9-])"
)


@dataclass(frozen=True, slots=True)
class _EmailDetector(Detector):
    """Finds each "@" with ``str.find`` and reads the local part back from it: a pattern
    that starts with the local part's character class would be tried at every position."""

    def scan(self, text: str, lowered: str | None) -> Iterator[tuple[int, int]]:
        at = text.find("@")
        while at != -1:
            local = _EMAIL_LOCAL.search(text, max(0, at - 64), at)
            domain = _EMAIL_DOMAIN.match(text, at + 1)
            if (
                local is not None
                and domain is not None
                and (local.start() == 0 or text[local.start() - 1] not in _EMAIL_LOCAL_CHARS)
            ):
                yield local.start(), domain.end()
                at = text.find("@", domain.end())
            else:
                at = text.find("@", at + 1)


@dataclass(frozen=True, slots=True)
class _CardDetector(Detector):
    """A run of digit groups may hold a card number beside other digits ("4111 1111 1111
    1111 123", a card and its security code; "qty 2 4111 1111 1111 1111"): try the
    stretches between group boundaries, earliest start and longest first, instead of
    only the whole run."""

    def scan(self, text: str, lowered: str | None) -> Iterator[tuple[int, int]]:
        for match in self.regex.finditer(text):
            start, end = match.span()
            separators = [i for i in range(start + 1, end) if text[i] in " -"]
            starts = [start, *(i + 1 for i in separators)]
            stops = [*separators, end]
            done = start
            for first in starts:
                if first < done:
                    continue
                for stop in reversed(stops):
                    if stop <= first:
                        break
                    if self.validate is None or self.validate(text[first:stop]):
                        yield first, stop
                        done = stop
                        break


# Patterns open with a character or class and check what precedes it with a look-behind
# after it: a pattern that opens with a look-behind is tried at every position (slow).
_PHONE_END = r"(?![\w:]|[ .\-][0-9])"


def _detectors() -> list[Detector]:
    return [
        _EmailDetector("email", re.compile("@")),
        Detector(
            "iban",
            re.compile(
                r"[A-Z](?<![A-Za-z0-9][A-Z])[A-Z][0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?"
                r"(?![A-Za-z0-9])"
            ),
            validate=iban_valid,
        ),
        _CardDetector(
            "card_number",
            re.compile(r"[0-9](?<![0-9+\-][0-9])(?:[ -]?[0-9]){12,40}(?![0-9])"),
            validate=_card,
        ),
        Detector(
            # international: +CC then groups, optionally an area code in parentheses
            "phone",
            re.compile(
                # Atomic: with optional separators a long run of digits splits into groups
                # in thousands of ways before (?!\w) fails.
                # A group ends where a word does not go on ("+44 20 0000 0000 0A" is the
                # number before "0A"): else the atomic group keeps the "0" and fails.
                r"\+(?<![\w+]\+)[1-9][0-9]{0,2}"
                r"(?>(?:[ .\-]?(?:\([0-9]{1,4}\)|[0-9]{1,5}(?![^\W0-9]))){1,6})(?!\w)"
            ),
            starts=("+",),
            validate=_phone,
        ),
        Detector(
            # national with an area code in parentheses: (555) 123-4567
            "phone",
            re.compile(
                r"\((?<![\w+:.\-]\()[0-9]{2,4}\) ?[0-9]{2,4}(?:[ .\-][0-9]{2,4}){0,3}" + _PHONE_END
            ),
            starts=("(",),
            validate=_phone,
        ),
        Detector(
            # national, groups with separators: 555-123-4567, 020 7946 0958, 06 12 34 56 78
            "phone",
            re.compile(
                r"[0-9](?<![\w+:.\-][0-9])[0-9]{1,3}[ .\-][0-9]{2,4}(?:[ .\-][0-9]{2,4}){0,3}"
                + _PHONE_END
            ),
            validate=_phone,
        ),
    ]


# Every built-in finding holds an "@" or digits; short strings without them are skipped.
_GATE = re.compile(r"[@0-9]")
_MIN_LENGTH = 6  # a@b.cc

PII_KINDS: tuple[str, ...] = tuple(d.kind for d in _detectors())
"""Every kind the built-in detectors report."""


class _PiiScanning(TextScanGuardrail):
    """Options and detectors shared by both stages; see :class:`ResultPiiRedactor`."""

    _label = "personal data"
    _kinds_label = "PII"

    def __init__(
        self,
        *,
        tools: str | Iterable[str] = "*",
        fields: Iterable[str] | None = None,
        action: ScanAction | None = None,
        kinds: Collection[str] | None = None,
        patterns: Mapping[str, str | re.Pattern[str]] | None = None,
        advisory: bool = False,
        name: str | None = None,
        timeout: float | None = 5.0,
    ) -> None:
        if action is None:
            # A tool that sends mail needs the real address: for arguments the default
            # keeps values from records and asks but hands them to the tool.
            action = "withhold" if self.stage == "arguments" else "redact"
        super().__init__(
            _detectors(),
            kinds=kinds,
            patterns=patterns,
            action=action,
            gate=_GATE,
            min_length=_MIN_LENGTH,
            tools=tools,
            fields=fields,
            advisory=advisory,
            name=name,
            timeout=timeout,
        )

    @classmethod
    def for_arguments(cls, **options: Any) -> ArgumentPiiRedactor:
        """The same redactor as an argument guardrail (same keyword options)."""
        return ArgumentPiiRedactor(**options)

    @classmethod
    def for_results(cls, **options: Any) -> ResultPiiRedactor:
        """The same redactor as a result guardrail (same keyword options)."""
        return ResultPiiRedactor(**options)


class ResultPiiRedactor(_PiiScanning, ResultGuardrail):
    """Redact personal data in what a tool returned.

    Finds e-mail addresses, phone numbers (international ``+CC ...`` and national formats
    with separators such as ``(555) 123-4567``, ``020 7946 0958``, ``06 12 34 56 78``; a
    bare run of digits is not taken for a phone number, so timestamps and ids are left
    alone), payment card numbers (13-19 digits, spaces or dashes allowed, Luhn-checked,
    issuer digit 2-6) and IBANs (country length and mod-97 checked).

    Actions (default ``"redact"``):

    - ``"redact"``: each finding becomes ``[REDACTED:<kind>]`` in the text the model sees
      (``GuardrailOutcome.replace``); idempotent.
    - ``"withhold"``: the whole strings containing personal data are withheld from the
      model and the records (``GuardrailOutcome.redact(pointers)``).
    - ``"block"``: the result is withheld and the call fails, naming kinds and pointers.

    Example::

        harness = Harness(registry, result_guardrails=[ResultPiiRedactor(kinds={"email", "iban"})])

        ResultPiiRedactor().redact_text("mail bob@example.com")  # 'mail [REDACTED:email]'

    Args:
        tools: glob(s) over qualified tool names this guardrail applies to.
        fields: JSON pointers to scan; ``None`` scans every string (image data excepted).
        action: ``"redact"``, ``"withhold"`` or ``"block"``, as above.
        kinds: only look for these kinds (see ``PII_KINDS``); default all.
        patterns: extra ``{kind: regex}`` detectors, tried before the built-in ones (they
            win where findings overlap); a group named ``value`` narrows what is redacted.
        advisory: record the outcome but never enforce it.
        name: the name used in records.
        timeout: seconds the check may take.

    ``PiiRedactor`` is the same class (the name it had first).
    """

    family = "PiiRedactor"


class ArgumentPiiRedactor(_PiiScanning, ArgumentGuardrail):
    """The PII redactor as an argument guardrail (``PiiRedactor.for_arguments(...)``
    builds one too); the options are :class:`ResultPiiRedactor`'s.

    Its default action is ``"withhold"``: the fields holding personal data are kept out of
    the journal and asks (``GuardrailOutcome.redact(pointers)``, whole fields), but the
    tool still receives them, since a tool that sends mail needs the real address. With
    ``action="redact"`` only the substrings are masked (``replace``), and the tool receives
    the masked text; ``"block"`` refuses the call.

    Example::

        ArgumentPiiRedactor(tools="mail.send", fields=["/to", "/body"])
    """

    family = "PiiRedactor"


PiiRedactor = ResultPiiRedactor
"""The result stage's first name, kept: ``PiiRedactor()`` reads results."""
