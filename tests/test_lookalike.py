"""clearance._lookalike: values that read as one thing and are another."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clearance._lookalike import lookalike

CYRILLIC_A = "\u0430"


@pytest.mark.parametrize(
    ("text", "scripts", "canonical"),
    [
        # One Cyrillic letter in a Latin host.
        (f"ceo@corp.ex{CYRILLIC_A}mple.com", ("Cyrillic", "Latin"), "ceo@corp.xn--exmple-4nf.com"),
        # The same host already in punycode (what an email or url fact gives): decoded.
        ("ceo@corp.xn--exmple-4nf.com", ("Cyrillic", "Latin"), "ceo@corp.xn--exmple-4nf.com"),
        # "apple" wholly in Cyrillic look-alikes, beside a Latin ".com".
        ("\u0430\u0440\u0440\u04cf\u0435.com", ("Cyrillic", "Latin"), "xn--80ak6aa92e.com"),
        ("https://xn--80ak6aa92e.com/", ("Cyrillic", "Latin"), "https://xn--80ak6aa92e.com/"),
        # A Greek omicron in a path.
        ("reports/q3-f\u03bfrecast.pdf", ("Greek", "Latin"), "reports/q3-f\\u03bfrecast.pdf"),
    ],
)
def test_mixed_scripts_are_marked_with_the_canonical_form(
    text: str, scripts: tuple[str, ...], canonical: str
) -> None:
    found = lookalike(text)
    assert found is not None
    assert found.scripts == scripts
    assert found.canonical == canonical
    assert canonical in found.note and " and ".join(scripts) in found.note


def test_compatibility_letters_are_marked() -> None:
    fullwidth = "https://\uff45xample.com/x"
    found = lookalike(fullwidth)
    assert found is not None and found.compatibility and found.scripts == ()
    assert found.canonical == "https://example.com/x"
    bold = "\U0001d41e\U0001d431\U0001d41a\U0001d426\U0001d429\U0001d425\U0001d41e.com"
    assert lookalike(bold) is not None


@pytest.mark.parametrize(
    "text",
    [
        "plain ascii",
        "caf\u00e9 cr\u00e8me",  # Latin with accents: one script
        "\u0418\u0432\u0430\u043d",  # a Russian name
        "\u6771\u4eac\u30bf\u30ef\u30fc",  # Han with katakana
        "ivan@\u043f\u0440\u0438\u043c\u0435\u0440.\u0440\u0444",  # a Cyrillic domain
        "https://xn--e1afmkfd.xn--p1ai/",  # the same, in punycode
        "xn--not-valid-punycode-\u00e9",  # left as it is when it does not decode
    ],
)
def test_single_script_values_are_not_marked(text: str) -> None:
    assert lookalike(text) is None


@given(st.text(alphabet=st.characters(max_codepoint=127)))
def test_ascii_without_punycode_is_never_marked(text: str) -> None:
    if "xn--" not in text.lower():
        assert lookalike(text) is None


@given(st.text())
def test_any_text_gets_an_answer_and_an_ascii_canonical_form(text: str) -> None:
    found = lookalike(text)
    if found is not None:
        assert found.canonical.isascii()
        assert found.scripts or found.compatibility
