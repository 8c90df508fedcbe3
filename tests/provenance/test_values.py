"""The values provenance tracks: one exact key per value, whatever its spelling."""

from __future__ import annotations

import pytest

from clearance.provenance.values import (
    clean_text,
    inside_values,
    literal,
    literal_keys,
    number_key,
    text_keys,
    whole_keys,
)


def keys(text: str) -> set[str]:
    return set(text_keys(clean_text(text)))


@pytest.mark.parametrize(
    "spelling",
    [
        "https://www.example.com/a",
        "HTTPS://WWW.EXAMPLE.COM/a",
        "http://www.example.com:80/a",
        "https://www.example.com./a",
        "www.example.com/a",
        "https://www.example.com/./a",
        "https://www.example.com/a#part",
        "\uff57\uff57\uff57.example.com/a",  # fullwidth letters
        "ww\u200bw.example.com/a",  # a zero-width space inside
    ],
)
def test_one_url_however_spelled(spelling: str) -> None:
    assert "u:www.example.com/a" in keys(f"see {spelling} today")
    assert "h:www.example.com" in keys(f"see {spelling} today")


def test_a_query_is_part_of_the_url() -> None:
    found = keys("https://www.example.com/a?secret=1")
    assert "u:www.example.com/a?secret=1" in found
    assert "u:www.example.com/a" not in found


def test_hosts_are_exact_not_registrable_domains() -> None:
    found = keys("docs.google.com")
    assert "h:docs.google.com" in found
    assert "h:sites.google.com" not in found
    assert "h:google.com" not in found


@pytest.mark.parametrize("suffix", ["example", "internal", "corp", "lan", "test"])
def test_a_www_name_is_a_link_whatever_its_suffix(suffix: str) -> None:
    # Issue 28: "www.pay-me.internal/login" was no link (its suffix is in no public list),
    # so a pack's scan for links in what the model read missed it.
    found = keys(f"log in at www.pay-me.{suffix}/login today")
    assert f"h:www.pay-me.{suffix}" in found
    assert f"u:www.pay-me.{suffix}/login" in found
    assert (f"www.pay-me.{suffix}", f"h:www.pay-me.{suffix}") in set(
        inside_values(f"see www.pay-me.{suffix}")
    )


def test_file_names_are_not_hosts() -> None:
    assert not any(k.startswith(("h:", "u:")) for k in keys("open notes.txt and v1.2.3"))


@pytest.mark.parametrize("spelling", ["Bob@Example.COM", "bob@example.com", "BOB@EXAMPLE.COM."])
def test_one_address_however_spelled(spelling: str) -> None:
    assert "e:bob@example.com" in keys(f"mail {spelling}")


def test_an_address_is_not_a_longer_one() -> None:
    assert "e:bob@x.com" not in keys("alice.bob@x.com")


@pytest.mark.parametrize(
    "spelling",
    [
        "GB29NWBK60161331926819",
        "gb29nwbk60161331926819",
        "GB29 NWBK 6016 1331 9268 19",
        "gb29 nwbk 6016 1331 9268 19",
    ],
)
def test_one_iban_however_spelled(spelling: str) -> None:
    assert "i:GB29NWBK60161331926819" in keys(f"pay {spelling} today")
    assert whole_keys(spelling) == ("i:GB29NWBK60161331926819",)


def test_a_spaced_iban_stops_before_words() -> None:
    found = [v for v, _ in inside_values("to DE89 3704 0044 0532 0130 00 with thanks")]
    assert found == ["DE89370400440532013000"]


@pytest.mark.parametrize(
    ("text", "key"),
    [("100", "n:100"), ("100.0", "n:100"), ("100.50", "n:100.5"), ("1,250.50", "n:1250.5")],
)
def test_numbers_are_numbers(text: str, key: str) -> None:
    assert key in keys(f"pay {text} EUR")


def test_number_keys() -> None:
    assert number_key(100) == number_key(100.0) == "n:100"
    assert number_key(0.1) == "n:0.1"
    assert number_key(True) is None
    assert number_key(float("nan")) is None


def test_the_digits_of_ids_and_urls_are_not_numbers() -> None:
    found = keys("pay GB29 NWBK 6016 1331 9268 19 via https://x.com:8443/a/77")
    assert not {"n:6016", "n:1331", "n:8443", "n:77"} & found


def test_literals_fold_case_and_spaces() -> None:
    assert literal("  Pizza\n  PARTY ") == "pizza party"
    assert literal("Stra\u00dfe") == literal("STRASSE")


def test_result_literals() -> None:
    found = set(literal_keys("subject: Pizza party\n- recipient: 'CH93 0076'\nsee file_x-2.txt."))
    assert {"l:pizza party", "l:ch93 0076", "l:file_x-2.txt"} <= found


def test_whole_keys() -> None:
    assert whole_keys("www.example.com") == ("u:www.example.com/", "h:www.example.com")
    assert whole_keys("https://x.com/a") == ("u:x.com/a",)
    assert whole_keys("Bob@Example.com") == ("e:bob@example.com",)
    assert whole_keys("100.00") == ("n:100",)
    assert whole_keys("hello there") == ()
    assert whole_keys("") == ()


def test_inside_values() -> None:
    found = dict(inside_values(clean_text("see https://EVIL.com/x?d=1, www.good.org, mail A@B.io")))
    assert found == {
        "evil.com": "h:evil.com",
        "www.good.org": "h:www.good.org",
        "a@b.io": "e:a@b.io",
    }


def test_dates_in_words_and_iso() -> None:
    text = clean_text(
        "on January 2nd 2025, for the 14th of November, April 25th 2024, May 1st, 2024 "
        "and 1st of May 2024; due 2024-06-30."
    )
    found = set(text_keys(text))
    assert {
        "d:2025-01-02",
        "d:--11-14",
        "d:2024-04-25",
        "d:2024-05-01",
        "d:2024-06-30",
    } <= found
    assert "d:--04-25" not in found  # a year named with it: the full date only
    assert whole_keys("2024-05-01 09:00") == ("d:2024-05-01", "d:--05-01")
    assert whole_keys("May 1st, 2024") == ("d:2024-05-01", "d:--05-01")
    assert whole_keys("2024-02-30") == ()
