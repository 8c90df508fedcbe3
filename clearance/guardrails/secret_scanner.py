"""Secret scanning: find credentials in a tool's result or arguments; block or redact them.

One scanning engine, two stages (the package's naming rule): :class:`ResultSecretScanner`
reads what a tool returned, before the model and the journal see it;
:class:`ArgumentSecretScanner` reads what the model is about to send out. Both take the same
options and run the same code; only the stage differs, because the pipeline tells the two
stages apart by class. ``SecretScanner`` is the documented alias of the result stage.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from clearance.guardrails._detectors import Detector, entropy
from clearance.guardrails._text_scan import ScanAction, TextScanGuardrail
from clearance.guardrails.base import ArgumentGuardrail, ResultGuardrail

__all__ = ["SECRET_KINDS", "ArgumentSecretScanner", "ResultSecretScanner", "SecretScanner"]

_PLACEHOLDER = re.compile(r"^(?:\$\{?\w+\}?|<[^>]*>|%\(\w+\)s|\{\{.*\}\}|\*+|x+|X+)$")


def _random_looking(token: str) -> bool:
    # Real keys mix letters and digits; "sk-learn-tutorial-for-beginners" does not.
    return any(c.isdigit() for c in token) and any(c.isalpha() for c in token)


def _not_placeholder(value: str) -> bool:
    return not _PLACEHOLDER.match(value)


def _assignment_value(min_entropy: float, min_length: int) -> Any:
    def validate(value: str) -> bool:
        if len(value) < min_length or _PLACEHOLDER.match(value):
            return False
        classes = sum(
            (
                any(c.islower() for c in value),
                any(c.isupper() for c in value),
                any(c.isdigit() for c in value),
                any(not c.isalnum() for c in value),
            )
        )
        # Words and identifiers (production-service, get_password_from_vault) have
        # entropy too; passwords and keys almost always carry a digit or three classes.
        has_digit = any(c.isdigit() for c in value)
        return (classes >= 3 or (has_digit and classes >= 2)) and entropy(value) >= min_entropy

    return validate


# Where a secret-sounding name can start; "key" stands for api_key, access-key,
# privatekey ..., whose prefix the regex checks by looking behind.
_ASSIGNMENT_STARTS = ("pass", "secret", "token", "key")

# Speed matters here: a result guardrail reads every result. Every detector declares the
# literal its matches start with (``starts``); the scanner searches each literal once
# (literals with a common first character together, case-insensitive ones in the
# lower-cased text) and tries a detector's regex only where its literal occurs. Letting
# the regex engine scan instead costs ten times more as soon as a pattern opens with a
# look-behind or ignores case: it then tries every position of the text.


def _detectors(min_entropy: float, min_length: int) -> list[Detector]:
    """The built-in detectors, most specific first (earlier ones win overlaps)."""
    return [
        Detector(
            "private_key",
            re.compile(
                r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
                # an unterminated block (a truncated read) is still key material
                r"(?:.*?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|.*)",
                re.DOTALL,
            ),
            starts=("-----BEGIN",),
        ),
        Detector(
            "aws_access_key_id",
            re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
            starts=("AKIA", "ASIA", "ABIA", "ACCA"),
        ),
        Detector(
            "aws_secret_access_key",
            re.compile(
                r"(?i)(?:(?<=aws)|(?<=aws_))secret_?(?:access_?)?key[\"']?\s*(?:=>|:=|[:=])\s*"
                r"[\"']?(?P<value>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"
            ),
            starts=("secret",),
            groups=("value",),
        ),
        Detector(
            "github_token",
            re.compile(
                r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9_]{22,244})"
                r"(?![A-Za-z0-9_])"
            ),
            starts=("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        ),
        Detector(
            "slack_token",
            re.compile(r"(?<![A-Za-z0-9])xox[abposre]-[A-Za-z0-9-]{10,}"),
            starts=("xox",),
        ),
        Detector(
            "slack_webhook",
            re.compile(r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_-]{20,}"),
            starts=("://",),  # shares the url_password search
            offset=len("https"),
            requires=("https://hooks.slack.com/",),
        ),
        Detector(
            "stripe_key",
            re.compile(r"(?<![A-Za-z0-9])[sr]k_(?:live|test)_[A-Za-z0-9]{16,}"),
            # "k_live_" is rarer than "s" or "r"
            starts=("k_live_", "k_test_"),
            offset=1,
        ),
        Detector(
            "google_api_key",
            re.compile(r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])"),
            starts=("AIza",),
        ),
        Detector(
            "anthropic_api_key",
            re.compile(r"(?<![A-Za-z0-9_-])sk-ant-[A-Za-z0-9_-]{20,}"),
            starts=("sk-",),
        ),
        Detector(
            "openai_api_key",
            re.compile(r"(?<![A-Za-z0-9_-])sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
            starts=("sk-",),
            validate=_random_looking,
        ),
        Detector(
            "jwt",
            re.compile(
                r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"
            ),
            starts=("eyJ",),
        ),
        Detector(
            "url_password",
            # From "://" on; the password runs to the last "@" of the authority, as URL
            # parsers read it.
            re.compile(r"://[^\s:/?#\[\]]*:(?P<value>[^\s/?#]+)@"),
            starts=("://",),
            groups=("value",),
            requires=("@",),
            validate=_not_placeholder,
        ),
        Detector(
            "bearer_token",
            re.compile(r"(?i)(?<![a-z0-9_])bearer\s+(?P<value>[A-Za-z0-9._~+/-]{16,}=*)"),
            starts=("bearer",),
            groups=("value",),
            validate=_assignment_value(min_entropy, min_length),
        ),
        Detector(
            "secret_assignment",
            re.compile(
                r"(?i)(?:pass(?:word|wd|phrase)|secret|token|"
                r"(?:(?<=api)|(?<=api[_-])|(?<=access)|(?<=access[_-])|(?<=private)|"
                r"(?<=private[_-]))key)"
                # Bounded runs: unbounded ones made a long run of "token" quadratic.
                r"[A-Za-z0-9_.-]{0,64}[\"']?\s{0,16}(?:=>|:=|[:=])\s{0,16}"
                r"(?:\"(?P<dq>[^\"\n]{1,512})\"|'(?P<sq>[^'\n]{1,512})'|"
                r"(?P<bare>[^\s\"'`,;&]{1,512}))"
            ),
            starts=_ASSIGNMENT_STARTS,
            groups=("dq", "sq", "bare"),
            validate=_assignment_value(min_entropy, min_length),
        ),
    ]


# Matches wherever any built-in detector could (a superset): short strings that it
# does not match are skipped without running every detector.
_GATE = re.compile(
    r"-----BEGIN|A(?:KIA|SIA|BIA|CCA|Iza)|gh[pousr]_|github_pat_|xox|hooks\.slack\.com|[sr]k_"
    r"|sk-|eyJ|://|(?i:secret|bearer|pass|token|key)"
)
_MIN_LENGTH = 6  # "://:p@" is the shortest thing a built-in detector finds

SECRET_KINDS: tuple[str, ...] = tuple(d.kind for d in _detectors(3.0, 8))
"""Every kind the built-in detectors report."""


class _SecretScanning(TextScanGuardrail):
    """The options and detectors shared by both stages; see :class:`ResultSecretScanner`."""

    _label = "possible secrets"
    _kinds_label = "secret"

    def __init__(
        self,
        *,
        tools: str | Iterable[str] = "*",
        fields: Iterable[str] | None = None,
        action: ScanAction = "block",
        kinds: Collection[str] | None = None,
        patterns: Mapping[str, str | re.Pattern[str]] | None = None,
        min_entropy: float = 3.0,
        min_length: int = 8,
        advisory: bool = False,
        name: str | None = None,
        timeout: float | None = 5.0,
    ) -> None:
        super().__init__(
            _detectors(min_entropy, min_length),
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
    def for_arguments(cls, **options: Any) -> ArgumentSecretScanner:
        """The same scanner as an argument guardrail (same keyword options)."""
        return ArgumentSecretScanner(**options)

    @classmethod
    def for_results(cls, **options: Any) -> ResultSecretScanner:
        """The same scanner as a result guardrail (same keyword options)."""
        return ResultSecretScanner(**options)


class ResultSecretScanner(_SecretScanning, ResultGuardrail):
    """Find credentials in what a tool returned; block the result or redact them.

    Finds AWS access key ids and secret keys, GitHub tokens (``ghp_``, ``gho_``,
    ``github_pat_`` ...), Slack tokens and webhooks, Stripe secret keys, Google API keys,
    OpenAI- and Anthropic-style keys (``sk-...``, ``sk-ant-...``), JWTs, PEM private key
    blocks (also unterminated ones), passwords in URLs (``scheme://user:pass@host``),
    bearer tokens, and values assigned to secret-sounding names (``password=...``,
    ``"token": "..."``, ``DB_SECRET: ...``, ``api_key => ...``) that look random: at
    least ``min_length`` characters, Shannon entropy of at least ``min_entropy`` bits per
    character, and a digit or three character classes (so ``get_password()`` and
    ``token: production-service`` pass, and placeholders like ``${DB_PASSWORD}`` too).

    Actions:

    - ``"block"`` (default): the call ends; the message names each kind and the JSON
      pointer where it was found, never the secret itself.
    - ``"redact"``: only the secret substring becomes ``[REDACTED:<kind>]`` (through
      ``GuardrailOutcome.replace``); the rest of the text stays. Running it again changes
      nothing (markers are never matched).
    - ``"withhold"``: the whole strings that contain a secret are withheld
      (``GuardrailOutcome.redact(pointers)``): from the model and records for a result;
      from records and asks only for arguments (the tool still gets them).

    A secret inside an object key cannot be rewritten, so it always blocks.

    Example::

        harness = Harness(registry,
                          result_guardrails=[ResultSecretScanner(action="redact")],
                          argument_guardrails=[ArgumentSecretScanner(tools="http.*")])

        SecretScanner(action="redact").redact_text("id=AKIAIOSFODNN7EXAMPLE")
        # 'id=[REDACTED:aws_access_key_id]'
        SecretScanner().scan("id=AKIAIOSFODNN7EXAMPLE")
        # [Finding(kind='aws_access_key_id', pointer='', start=3, end=23, in_key=False)]

    Args:
        tools: glob(s) over qualified tool names this guardrail applies to.
        fields: JSON pointers to scan; ``None`` scans every string (image data excepted).
        action: ``"block"``, ``"redact"`` or ``"withhold"``, as above.
        kinds: only look for these kinds (see ``SECRET_KINDS``); default all.
        patterns: extra ``{kind: regex}`` detectors, tried before the built-in ones (they
            win where findings overlap); a group named ``value`` narrows what is redacted.
        min_entropy: bits per character a value assigned to a secret-sounding name (or a
            bearer token) must reach to count.
        min_length: characters such a value must have to count.
        advisory: record the outcome but never enforce it.
        name: the name used in records.
        timeout: seconds the check may take.

    ``SecretScanner`` is the same class (the name it had first).
    """

    family = "SecretScanner"


class ArgumentSecretScanner(_SecretScanning, ArgumentGuardrail):
    """The secret scanner as an argument guardrail: stop secrets leaving in arguments.

    The options are :class:`ResultSecretScanner`'s; ``SecretScanner.for_arguments(...)``
    builds one too. With ``action="redact"`` the tool receives the redacted text.

    Example::

        ArgumentSecretScanner(tools=["http.*", "mail.*"], fields=["/body"])
    """

    family = "SecretScanner"


SecretScanner = ResultSecretScanner
"""The result stage's first name, kept: ``SecretScanner()`` reads results."""
