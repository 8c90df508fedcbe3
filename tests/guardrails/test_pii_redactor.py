import pytest

from clearance import Principal
from clearance.guardrails import (
    PII_KINDS,
    ArgumentPiiRedactor,
    GuardrailContext,
    PiiRedactor,
    ResultGuardrail,
)
from clearance.guardrails.pii import iban_valid, luhn_valid

RESULT = GuardrailContext("crm.get", "crm__get", Principal("User", "u"), "s", None, "c", "result")
ARGS = GuardrailContext(
    "mail.send", "mail__send", Principal("User", "u"), "s", None, "c", "arguments"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mail bob.smith+news@example.co.uk now", "mail [REDACTED:email] now"),
        ("<alice@corp.example>", "<[REDACTED:email]>"),
        ("call +1 (555) 123-4567 today", "call [REDACTED:phone] today"),
        ("call +44 20 7946 0958", "call [REDACTED:phone]"),
        ("+4915112345678", "[REDACTED:phone]"),
        ("(555) 123-4567", "[REDACTED:phone]"),
        ("555-123-4567", "[REDACTED:phone]"),
        ("555.123.4567", "[REDACTED:phone]"),
        ("020 7946 0958", "[REDACTED:phone]"),
        ("tel: 06 12 34 56 78.", "tel: [REDACTED:phone]."),
        ("card 4111 1111 1111 1111 exp", "card [REDACTED:card_number] exp"),
        ("card 4111-1111-1111-1111", "card [REDACTED:card_number]"),
        ("amex 378282246310005", "amex [REDACTED:card_number]"),
        ("iban GB82 WEST 1234 5698 7654 32.", "iban [REDACTED:iban]."),
        ("DE89370400440532013000", "[REDACTED:iban]"),
    ],
)
def test_personal_data_is_redacted(text: str, expected: str) -> None:
    redactor = PiiRedactor()
    assert redactor.redact_text(text) == expected
    assert redactor.redact_text(expected) == expected  # idempotent


@pytest.mark.parametrize(
    "text",
    [
        "created at 1700000000123",  # a millisecond timestamp (13 digits, passes no issuer test)
        "epoch 1700000000 and id 12345678901234567890",
        "2024-01-15 12:30:45",
        "version 1.2.3 at 192.168.100.200",
        "4111 1111 1111 1112",  # fails Luhn
        "GB82 WEST 1234 5698 7654 33",  # fails mod-97
        "XX82 WEST 1234 5698 7654 32",  # unknown country
        "user@localhost",  # no top-level domain
        "order #5551234567",  # a bare run of digits is not a phone number
        "see @mention and a@b",
        "",
    ],
)
def test_lookalikes_are_left_alone(text: str) -> None:
    assert PiiRedactor().scan(text) == []


def test_checksums() -> None:
    assert luhn_valid("4111 1111 1111 1111") and not luhn_valid("4111 1111 1111 1112")
    assert not luhn_valid("")
    assert iban_valid("GB82WEST12345698765432") and iban_valid("gb82 west 1234 5698 7654 32")
    assert not iban_valid("GB82WEST1234569876543")  # wrong length for GB


def test_results_are_rewritten_in_place() -> None:
    result = {
        "content": [{"type": "text", "text": "Contact: jane@example.org, +1 415 555 0100"}],
        "structured_content": {"email": "jane@example.org", "count": 3},
        "is_error": False,
    }
    outcome = PiiRedactor().check(result, RESULT)
    assert outcome.action == "replace"
    assert outcome.value == {
        "content": [{"type": "text", "text": "Contact: [REDACTED:email], [REDACTED:phone]"}],
        "structured_content": {"email": "[REDACTED:email]", "count": 3},
        "is_error": False,
    }
    assert PiiRedactor().check(outcome.value, RESULT).action == "allow"


def test_image_shaped_structured_content_is_scanned() -> None:
    shaped = {"type": "image", "data": "mail alice@corp.example", "mimeType": "image/png"}
    result = {"content": [], "structured_content": shaped, "is_error": False}
    outcome = PiiRedactor().check(result, RESULT)
    assert outcome.action == "replace"
    assert outcome.value["structured_content"]["data"] == "mail [REDACTED:email]"
    # the base64 data of an image content block is not scanned
    block = {"type": "image", "data": "YWxpY2VAY29ycC5leGFtcGxl", "mimeType": "image/png"}
    assert PiiRedactor().check({"content": [block]}, RESULT).action == "allow"


def test_result_actions_withhold_and_block() -> None:
    result = {"content": [{"type": "text", "text": "jane@example.org"}], "is_error": False}
    withheld = PiiRedactor(action="withhold").check(result, RESULT)
    assert withheld.action == "redact" and withheld.pointers == ("/content/0/text",)
    blocked = PiiRedactor(action="block").check(result, RESULT)
    assert blocked.action == "block"
    assert blocked.message is not None
    assert "email in /content/0/text" in blocked.message and "jane" not in blocked.message


def test_arguments_default_to_withholding_whole_fields() -> None:
    """A mail tool needs the real address: the default for arguments withholds the
    fields from records and asks (redact(pointers)) and leaves the arguments alone."""
    redactor = PiiRedactor.for_arguments(fields=["/to", "/body"])
    assert isinstance(redactor, ArgumentPiiRedactor) and redactor.action == "withhold"
    arguments = {"to": "jane@example.org", "subject": "hi", "body": "call me at 555-123-4567"}
    outcome = redactor.check(arguments, ARGS)
    assert outcome.action == "redact"
    assert outcome.pointers == ("/to", "/body")
    # or mask the substrings, which the tool then receives
    masked = PiiRedactor.for_arguments(action="redact").check(arguments, ARGS)
    assert masked.action == "replace"
    assert masked.value["body"] == "call me at [REDACTED:phone]"


def test_kinds_option() -> None:
    emails_only = PiiRedactor(kinds={"email"})
    assert emails_only.kinds == ("email",)
    assert emails_only.redact_text("a@example.com 555-123-4567") == "[REDACTED:email] 555-123-4567"
    assert set(PII_KINDS) == {"email", "phone", "card_number", "iban"}
    with pytest.raises(ValueError, match="unknown PII kinds"):
        PiiRedactor(kinds={"ssn"})
    ssn = PiiRedactor(patterns={"ssn": r"\b\d{3}-\d{2}-\d{4}\b"})
    assert ssn.redact_text("ssn 123-45-6789") == "ssn [REDACTED:ssn]"


def test_stage_classes() -> None:
    assert isinstance(PiiRedactor(), ResultGuardrail)
    assert PiiRedactor().action == "redact"
    assert isinstance(ArgumentPiiRedactor.for_results(), PiiRedactor)


def test_digit_runs_after_a_plus_scan_in_linear_time() -> None:
    import time

    from clearance.guardrails import PiiRedactor

    redactor = PiiRedactor()
    text = ("x +1" + "1" * 40 + "x ") * 2200  # about 100 KB
    started = time.perf_counter()
    redactor.scan(text)
    assert time.perf_counter() - started < 1.0  # was about 4 s with backtracking
    kinds = {f.kind for f in redactor.scan("call +1 555 123 4567 or +44 (20) 7946 0958")}
    assert kinds == {"phone"}
