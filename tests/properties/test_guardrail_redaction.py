"""Guardrail-level redaction properties (part of R8, no leaks).

- Redaction is idempotent: redacting redacted text changes nothing, and the guardrail
  then allows it.
- A generated secret never survives redaction, and never appears in a block message,
  wherever it sits in the value (a string, deep in a structure, or an object key).
"""

from __future__ import annotations

import json
import math
import string
from collections import Counter
from typing import Any

from hypothesis import assume, example, given
from hypothesis import strategies as st

from clearance import Principal
from clearance.guardrails import GuardrailContext, PiiRedactor, SecretScanner
from clearance.guardrails.pii import luhn_valid

RESULT = GuardrailContext("t.t", "t__t", Principal("User", "u"), "s", None, "c", "result")
ARGS = GuardrailContext("t.t", "t__t", Principal("User", "u"), "s", None, "c", "arguments")

ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits
B64URL = ALNUM + "-_"


def chars(alphabet: str, lo: int, hi: int) -> st.SearchStrategy[str]:
    return st.text(alphabet, min_size=lo, max_size=hi)


def entropy(text: str) -> float:
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values())


def random_looking(lo: int, hi: int) -> st.SearchStrategy[str]:
    """Letters and digits with a digit and a letter, as real keys have."""
    return st.builds(lambda a, d, rest: a + d + rest, st.sampled_from(string.ascii_letters),
                     st.sampled_from(string.digits), chars(ALNUM, lo - 2, hi - 2))  # fmt: skip


def pem(body: str, label: str) -> str:
    return f"-----BEGIN {label}PRIVATE KEY-----\n{body}\n-----END {label}PRIVATE KEY-----"


secrets = st.one_of(
    st.builds(lambda p, s: p + s, st.sampled_from(["AKIA", "ASIA"]), chars(UPPER_DIGITS, 16, 16)),
    st.builds(lambda p, s: p + s, st.sampled_from(["ghp_", "gho_", "ghs_"]), chars(ALNUM, 36, 40)),
    st.builds(lambda s: "github_pat_" + s, chars(ALNUM + "_", 22, 82)),
    st.builds(lambda t, s: f"xox{t}-{s}", st.sampled_from("bpoa"), chars(ALNUM + "-", 10, 40)),
    st.builds(lambda s: "sk_live_" + s, chars(ALNUM, 16, 32)),
    st.builds(lambda s: "AIza" + s, chars(B64URL, 35, 35)),
    st.builds(lambda s: "sk-ant-" + s, chars(B64URL, 20, 60)),
    st.builds(lambda s: "sk-" + s, random_looking(20, 48)),
    st.builds(
        lambda a, b, c: f"eyJ{a}.eyJ{b}.{c}",
        chars(B64URL, 5, 40),
        chars(B64URL, 5, 40),
        chars(B64URL, 0, 40),
    ),
    st.builds(
        pem, chars(ALNUM + "+/=\n", 1, 200), st.sampled_from(["", "RSA ", "EC ", "OPENSSH "])
    ),
)

# Secrets that are found by their context (the name they are assigned to, the URL they
# sit in): (text with the context, the secret inside it).
assignment_values = st.text(ALNUM + "!#%*+-.:@^_~", min_size=8, max_size=40).filter(
    lambda v: entropy(v) >= 3.2 and any(c.isdigit() for c in v) and any(c.isalpha() for c in v)
)
in_context = st.one_of(
    st.builds(
        lambda name, op, v: (f"{name}{op}{v}", v),
        st.sampled_from(["password", "DB_PASSWORD", "api_key", "secret", "token", "passwd"]),
        st.sampled_from(["=", ": ", " = ", "=>"]),
        assignment_values,
    ),
    st.builds(
        lambda name, v: (f'"{name}": "{v}"', v),
        st.sampled_from(["password", "client_secret", "accessKey"]),
        assignment_values,
    ),
    st.builds(
        lambda scheme, user, pw, host: (f"{scheme}://{user}:{pw}@{host}/db", pw),
        st.sampled_from(["postgres", "https", "redis"]),
        chars(ALNUM, 1, 10),
        random_looking(3, 20),
        st.sampled_from(["db.internal", "10.0.0.7:5432"]),
    ),
)

# Text around a secret; kept apart by a space so that it cannot extend the token.
surroundings = st.text(st.characters(codec="utf-8"), max_size=40)


@given(text=st.text(max_size=200))
def test_redaction_is_idempotent_on_any_text(text: str) -> None:
    for redactor in (SecretScanner(), PiiRedactor()):
        once = redactor.redact_text(text)
        assert redactor.redact_text(once) == once


@given(before=surroundings, secret=secrets, after=surroundings)
def test_a_generated_secret_is_blocked_without_being_echoed(
    before: str, secret: str, after: str
) -> None:
    text = f"{before} {secret} {after}"
    for value, ctx in (
        ({"content": [{"type": "text", "text": text}], "is_error": False}, RESULT),
        ({"deep": {"list": [1, {"note": text}]}}, ARGS),
        ({"structured_content": {secret: {"nested": text}}}, RESULT),
    ):
        scanner = SecretScanner.for_results() if ctx is RESULT else SecretScanner.for_arguments()
        outcome = scanner.check(value, ctx)
        assert outcome.action == "block"
        assert outcome.message is not None
        assert secret not in outcome.message
        for line in secret.splitlines():
            if len(line) >= 12:
                assert line not in outcome.message


@given(before=surroundings, secret=secrets, after=surroundings)
def test_a_generated_secret_never_survives_redaction(before: str, secret: str, after: str) -> None:
    text = f"{before} {secret} {after}"
    result = {
        "content": [{"type": "text", "text": text}],
        "structured_content": {"items": [text, {"again": text}]},
        "is_error": False,
    }
    scanner = SecretScanner(action="redact")
    outcome = scanner.check(result, RESULT)
    assert outcome.action == "replace"
    redacted = outcome.value
    assert secret not in json.dumps(redacted, ensure_ascii=False)
    assert scanner.check(redacted, RESULT).action == "allow"
    assert scanner.redact_text(text) == redacted["content"][0]["text"]
    # the surroundings are kept: only the secret was replaced
    assert redacted["content"][0]["text"].startswith(before[: max(0, len(before) - 40)])


@given(before=surroundings, pair=in_context, after=surroundings)
def test_secrets_found_by_context_are_redacted_and_not_echoed(
    before: str, pair: tuple[str, str], after: str
) -> None:
    text, secret = pair
    assume(secret not in before and secret not in after)
    full = f"{before} {text} {after}"
    scanner = SecretScanner(action="redact")
    once = scanner.redact_text(full)
    assert secret not in once
    assert scanner.redact_text(once) == once
    outcome = SecretScanner.for_arguments().check({"body": full}, ARGS)
    assert outcome.action == "block" and outcome.message is not None
    assert secret not in outcome.message


cards = st.builds(
    lambda first, body: next(
        f"{first}{body}{d}" for d in string.digits if luhn_valid(f"{first}{body}{d}")
    ),
    st.sampled_from("3456"),
    chars(string.digits, 14, 14),
)


def iban(bank: str) -> str:
    check = 98 - int("".join(str(int(c, 36)) for c in bank + "DE00")) % 97
    return f"DE{check:02d}{bank}"


pii = st.one_of(
    st.builds(
        lambda u, d: f"{u}@{d}.com",
        chars(string.ascii_lowercase + ".", 1, 12).filter(lambda u: not u.startswith(".")),
        chars(string.ascii_lowercase, 1, 12),
    ),
    cards,
    st.builds(iban, chars(string.digits, 18, 18)),
    st.builds(
        lambda a, b: f"+44 20 {a} {b}", chars(string.digits, 4, 4), chars(string.digits, 4, 4)
    ),
)


@given(before=surroundings, item=pii, after=surroundings)
@example(before="", item="+44 20 0000 0000", after="0A")  # a group that a letter goes on from
def test_personal_data_never_survives_redaction(before: str, item: str, after: str) -> None:
    text = f"{before} {item} {after}"
    redactor = PiiRedactor()
    once = redactor.redact_text(text)
    assert item not in once
    assert redactor.redact_text(once) == once
    outcome = PiiRedactor(action="block").check(
        {"content": [{"type": "text", "text": text}]}, RESULT
    )
    assert outcome.action == "block" and outcome.message is not None
    assert item not in outcome.message


@given(value=st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
))  # fmt: skip
def test_redacting_a_whole_value_twice_equals_once(value: Any) -> None:
    for guard in (
        SecretScanner.for_arguments(action="redact"),
        PiiRedactor.for_arguments(action="redact"),
    ):
        document = {"v": value}
        outcome = guard.check(document, ARGS)
        if outcome.action == "block":
            continue  # found in a key: cannot be rewritten, and blocked instead
        once = outcome.value if outcome.action == "replace" else document
        again = guard.check(once, ARGS)
        assert again.action == "allow"
