import re
from typing import Any

import pytest

from clearance import Principal
from clearance.guardrails import (
    SECRET_KINDS,
    ArgumentGuardrail,
    ArgumentSecretScanner,
    GuardrailContext,
    ResultGuardrail,
    SecretScanner,
)

RESULT = GuardrailContext(
    "web.fetch", "web__fetch", Principal("User", "u"), "s", None, "c", "result"
)
ARGS = GuardrailContext(
    "web.fetch", "web__fetch", Principal("User", "u"), "s", None, "c", "arguments"
)

# Realistic-looking but fake credentials, one per kind (built by concatenation so that
# this file itself does not trip secret scanners).
SECRETS = {
    "aws_access_key_id": "AKIA" + "IOSFODNN7EXAMPLE",
    "github_token": "ghp_" + "16C7e42F292c6912E7710c838347Ae178B4a",
    "slack_token": "xoxb-" + "263594206564-2343594206574-FGqddMF8t08v8N7Oq4i57vs1",
    "slack_webhook": "https://hooks.slack.com/services/" + "T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
    "stripe_key": "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "google_api_key": "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
    "anthropic_api_key": "sk-ant-" + "api03-Xk2m9Qp4Lr7Tz1Vb8Nc5Hd3Jf6Gs0Wa",
    "openai_api_key": "sk-proj-" + "Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56",
    "jwt": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
    + "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
    + "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    "private_key": "-----BEGIN RSA " + "PRIVATE KEY-----\nMIIEowIBAAKCAQEAx4Zk\n"
    "-----END RSA " + "PRIVATE KEY-----",
}  # fmt: skip


@pytest.mark.parametrize(("kind", "secret"), sorted(SECRETS.items()))
def test_each_kind_is_found_and_blocked_without_echoing_it(kind: str, secret: str) -> None:
    scanner = SecretScanner()
    result = {"content": [{"type": "text", "text": f"here it is: {secret} ok"}], "is_error": False}
    outcome = scanner.check(result, RESULT)
    assert outcome.action == "block"
    assert outcome.message is not None
    assert kind in outcome.message and "/content/0/text" in outcome.message
    assert secret not in outcome.message
    assert not any(part in outcome.message for part in re.findall(r"[A-Za-z0-9]{8,}", secret))


@pytest.mark.parametrize(("kind", "secret"), sorted(SECRETS.items()))
def test_redact_replaces_just_the_secret(kind: str, secret: str) -> None:
    scanner = SecretScanner(action="redact")
    result: dict[str, Any] = {
        "content": [{"type": "text", "text": f"before {secret} after"}],
        "is_error": False,
    }
    outcome = scanner.check(result, RESULT)
    assert outcome.action == "replace"
    assert outcome.value["content"][0]["text"] == f"before [REDACTED:{kind}] after"
    assert result["content"][0]["text"] == f"before {secret} after"  # input untouched
    assert scanner.check(outcome.value, RESULT).action == "allow"  # idempotent


@pytest.mark.parametrize(
    ("text", "kind", "redacted"),
    [
        (
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "aws_secret_access_key",
            "aws_secret_access_key = [REDACTED:aws_secret_access_key]",
        ),
        (
            'AWS_SECRET_KEY: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"',
            "aws_secret_access_key",
            'AWS_SECRET_KEY: "[REDACTED:aws_secret_access_key]"',
        ),
        (
            "postgres://admin:s3cretP4ss@db.internal:5432/app",
            "url_password",
            "postgres://admin:[REDACTED:url_password]@db.internal:5432/app",
        ),
        (
            "https://user:p@ss@host/x",  # the password runs to the last @, as parsers read it
            "url_password",
            "https://user:[REDACTED:url_password]@host/x",
        ),
        ('{"password": "Tr0ub4dor&3"}', "secret_assignment", '{"password": "[REDACTED:secret_assignment]"}'),
        ("DB_PASSWORD=changeme123", "secret_assignment", "DB_PASSWORD=[REDACTED:secret_assignment]"),
        ("token: 9f86d081884c7d659a2f", "secret_assignment", "token: [REDACTED:secret_assignment]"),
        ("client_secret='Zx9!kLm2#Qp'", "secret_assignment", "client_secret='[REDACTED:secret_assignment]'"),
        ("api_key => 'a8F3kd92LmQ0'", "secret_assignment", "api_key => '[REDACTED:secret_assignment]'"),
        (
            "Authorization: Bearer abcDEF123456ghiJKL789",
            "bearer_token",
            "Authorization: Bearer [REDACTED:bearer_token]",
        ),
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n(truncated)",
            "private_key",
            "[REDACTED:private_key]",
        ),
    ],
)  # fmt: skip
def test_assignments_urls_and_blocks(text: str, kind: str, redacted: str) -> None:
    scanner = SecretScanner(action="redact")
    assert [f.kind for f in scanner.scan(text)] == [kind]
    assert scanner.redact_text(text) == redacted
    assert scanner.redact_text(redacted) == redacted


@pytest.mark.parametrize(
    "text",
    [
        "password = get_password_from_vault()",  # an identifier, not a secret
        "token: production-service",  # a word
        "password: ********",  # a placeholder
        'password = "${DB_PASSWORD}"',
        "postgres://user:${PGPASSWORD}@db/app",
        "sk-learn-is-a-nickname-for-scikit",
        "the keyboard has keys; task: ask the desk",
        "AKIAIOSFODNN7EXAMPLEXYZ",  # too long to be an access key id
        "xAKIAIOSFODNN7EXAMPLE",  # glued to a word
        "https://example.com/path?x=1",
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
        "secret = short1",  # below min_length
        "",
    ],
)
def test_ordinary_text_is_not_flagged(text: str) -> None:
    assert SecretScanner().scan(text) == []


def test_every_string_is_scanned_including_structured_content_and_keys() -> None:
    token = SECRETS["github_token"]
    result = {
        "content": [{"type": "text", "text": "fine"}],
        "structured_content": {"items": [{"note": "ok"}, {"note": f"token {token}"}]},
        "is_error": False,
    }
    outcome = SecretScanner().check(result, RESULT)
    assert outcome.action == "block"
    assert outcome.message is not None and "/structured_content/items/1/note" in outcome.message

    in_key = {"content": [], "structured_content": {token: 1}, "is_error": False}
    outcome = SecretScanner(action="redact").check(in_key, RESULT)
    # a key cannot be rewritten: even in redact mode it blocks, naming where
    assert outcome.action == "block"
    assert outcome.message is not None and "a key of /structured_content" in outcome.message
    assert token not in outcome.message
    assert SecretScanner().findings(in_key)[0].pointer == "/structured_content"

    # nor may the pointer of anything beneath such a key spell it out
    nested = {"structured_content": {token: {"note": SECRETS["jwt"]}}}
    outcome = SecretScanner().check(nested, RESULT)
    assert outcome.message is not None and token not in outcome.message
    assert "jwt in /structured_content" in outcome.message


def test_image_data_is_not_scanned_in_results() -> None:
    block = {"type": "image", "data": "AKIAIOSFODNN7EXAMPLE", "mimeType": "image/png"}
    result = {"content": [block], "is_error": False}
    assert SecretScanner().check(result, RESULT).action == "allow"
    # but in arguments such a shape is just data the model wrote
    assert SecretScanner.for_arguments().check({"x": block}, ARGS).action == "block"


def test_only_base64_data_of_result_content_blocks_is_skipped() -> None:
    token = SECRETS["github_token"]
    scanner = SecretScanner(action="redact")
    # structured content is read by the model: an image-shaped dict there is scanned
    for kind in ("image", "audio"):
        shaped = {"type": kind, "data": f"token: {token}", "mimeType": "image/png"}
        result = {"content": [], "structured_content": shaped, "is_error": False}
        outcome = scanner.check(result, RESULT)
        assert outcome.action == "replace", kind
        assert outcome.value["structured_content"]["data"] == "token: [REDACTED:github_token]"
        # nested deeper, or in a list that is not the envelope's content, likewise
        deeper = {"content": [], "structured_content": {"content": [shaped]}}
        assert scanner.check(deeper, RESULT).action == "replace", kind
        # a content block whose data is not valid base64 is text after all
        block = {"type": kind, "data": token, "mimeType": "image/png"}
        outcome = scanner.check({"content": [block], "is_error": False}, RESULT)
        assert outcome.action == "replace", kind
        assert outcome.value["content"][0]["data"] == "[REDACTED:github_token]"
    # selected by a field pointer, a content block is still recognised as one
    block = {"type": "image", "data": "AKIAIOSFODNN7EXAMPLE", "mimeType": "image/png"}
    result = {"content": [block], "is_error": False}
    assert SecretScanner(fields=["/content/0"]).check(result, RESULT).action == "allow"


def test_withhold_redacts_whole_fields_by_pointer() -> None:
    result = {
        "content": [{"type": "text", "text": "fine"}, {"type": "text", "text": SECRETS["jwt"]}],
        "is_error": False,
    }
    outcome = SecretScanner(action="withhold").check(result, RESULT)
    assert outcome.action == "redact"
    assert outcome.pointers == ("/content/1/text",)


def test_fields_limit_what_is_scanned() -> None:
    scanner = SecretScanner.for_arguments(fields=["/body"])
    secret = SECRETS["stripe_key"]
    assert scanner.check({"body": "hi", "header": secret}, ARGS).action == "allow"
    assert scanner.check({"body": f"x {secret}", "header": "hi"}, ARGS).action == "block"
    # overlapping field pointers scan a string once
    twice = SecretScanner.for_arguments(fields=["/body", "/*"], action="redact")
    outcome = twice.check({"body": f"x {secret}"}, ARGS)
    assert outcome.value == {"body": "x [REDACTED:stripe_key]"}


def test_argument_redaction_rewrites_the_arguments() -> None:
    scanner = SecretScanner.for_arguments(action="redact")
    arguments = {"url": "https://api.example.com", "headers": {"Authorization": "Bearer x"},
                 "body": f"key={SECRETS['aws_access_key_id']}"}  # fmt: skip
    outcome = scanner.check(arguments, ARGS)
    assert outcome.action == "replace"
    assert outcome.value == {**arguments, "body": "key=[REDACTED:aws_access_key_id]"}


def test_overlaps_go_to_the_most_specific_kind() -> None:
    found = SecretScanner().scan(f"token = {SECRETS['github_token']}")
    assert [f.kind for f in found] == ["github_token"]
    found = SecretScanner().scan(SECRETS["anthropic_api_key"])
    assert [f.kind for f in found] == ["anthropic_api_key"]


def test_kinds_and_patterns_options() -> None:
    only_jwt = SecretScanner(kinds={"jwt"})
    assert only_jwt.kinds == ("jwt",)
    assert only_jwt.scan(SECRETS["github_token"]) == []
    with pytest.raises(ValueError, match="unknown secret kinds"):
        SecretScanner(kinds={"nope"})
    custom = SecretScanner(patterns={"ticket": r"TICKET-(?P<value>\d{6})"}, action="redact")
    assert custom.redact_text("see TICKET-123456.") == "see TICKET-[REDACTED:ticket]."
    with pytest.raises(ValueError, match="pattern kind"):
        SecretScanner(patterns={"bad kind": "x"})
    with pytest.raises(ValueError, match="action"):
        SecretScanner(action="drop")  # type: ignore[arg-type]
    assert set(SECRET_KINDS) >= {"aws_access_key_id", "github_token", "jwt", "private_key"}


def test_min_entropy_is_configurable() -> None:
    text = "password=Zx9kLm2Q"  # 8 distinct characters: 3 bits each
    assert SecretScanner().scan(text) != []
    assert SecretScanner(min_entropy=3.5).scan(text) == []


def test_block_message_lists_at_most_a_few_places() -> None:
    result = {
        "content": [{"type": "text", "text": SECRETS["jwt"]} for _ in range(8)],
        "is_error": False,
    }
    outcome = SecretScanner().check(result, RESULT)
    assert outcome.message is not None and "and 3 more" in outcome.message


def test_both_stages_are_the_same_scanner() -> None:
    assert isinstance(SecretScanner(), ResultGuardrail)
    scanner = SecretScanner.for_arguments(tools="http.*", action="redact")
    assert isinstance(scanner, ArgumentSecretScanner) and isinstance(scanner, ArgumentGuardrail)
    assert scanner.applies_to("http.get") and not scanner.applies_to("files.read_file")
    assert isinstance(ArgumentSecretScanner.for_results(), SecretScanner)


def test_non_ascii_text_that_changes_length_when_lowered() -> None:
    # "İ".lower() is two characters: offsets from the lower-cased text would be off
    text = "İİİ password=Zx9kLm2Qp7 İİİ"
    assert SecretScanner().redact_text(text) == "İİİ password=[REDACTED:secret_assignment] İİİ"


@pytest.mark.anyio
async def test_run_in_both_stages() -> None:
    result = {"content": [{"type": "text", "text": SECRETS["jwt"]}], "is_error": False}
    assert (await SecretScanner().run(result, RESULT)).action == "block"
    assert (await SecretScanner.for_arguments().run({"a": "b"}, ARGS)).action == "allow"


@pytest.mark.parametrize("word", ["password", "token", "secret", "apikey"])
def test_long_runs_of_trigger_words_scan_in_linear_time(word: str) -> None:
    import time

    from clearance.guardrails import SecretScanner

    scanner = SecretScanner()
    text = word * (100_000 // len(word))
    started = time.perf_counter()
    scanner.scan(text)
    assert time.perf_counter() - started < 2.0  # was 30-50 s before the runs were bounded
    assert scanner.scan('DB_PASSWORD = "hunter2Xy9!"')  # still found
