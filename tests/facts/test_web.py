"""The ``url`` and ``email`` facts: one host, however it is spelled."""

from __future__ import annotations

import pytest

from clearance.facts import EmailFact, FactError, UrlFact
from clearance.facts.web import canonical_host, known_suffix, registrable_domain


def url(text: str, **options: str) -> dict[str, object]:
    return dict(UrlFact(**options).canonicalize(text).fact)


@pytest.mark.parametrize(
    "spelling",
    [
        "https://example.com/",
        "HTTPS://EXAMPLE.COM",
        "https://example.com.",
        "https://example.com:443/",
        "https://%65xample.com/",
        "https://\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45.com/",  # fullwidth
        "https://example\u3002com/",  # ideographic full stop
        "https:example.com",
        "https:\\\\example.com\\",
        "  https://example.com/  ",
    ],
)
def test_spellings_of_one_host(spelling: str) -> None:
    canon = UrlFact().canonicalize(spelling)
    assert canon.value == "https://example.com/"
    assert canon.fact["host"] == "example.com"
    assert canon.fact["domain"] == "example.com"
    assert canon.fact["port"] == 443


@pytest.mark.parametrize(
    ("text", "host"),
    [
        ("http://good.com@evil.com/", "evil.com"),
        ("http://evil.com\\@good.com/", "evil.com"),
        ("http://evil.com#@good.com/", "evil.com"),
        ("http://evil.com?@good.com/", "evil.com"),
        ("http://user:pw@evil.com:8080/", "evil.com"),
        ("http://2130706433/", "127.0.0.1"),
        ("http://0x7f.1/", "127.0.0.1"),
        ("http://0177.0.0.1/", "127.0.0.1"),
        ("http://127.1/", "127.0.0.1"),
        ("http://[0:0:0:0:0:0:0:1]/", "::1"),
        ("http://münchen.de/", "xn--mnchen-3ya.de"),
    ],
)
def test_host_as_a_browser_reads_it(text: str, host: str) -> None:
    assert url(text)["host"] == host


def test_record() -> None:
    assert url("https://www.Example.co.uk:8443/a/./b/../c?q=1#top") == {
        "url": "https://www.example.co.uk:8443/a/c?q=1#top",
        "scheme": "https",
        "host": "www.example.co.uk",
        "domain": "example.co.uk",
        "port": 8443,
        "path": "/a/c",
        "query": "q=1",
        "has_query": True,
        "userinfo": False,
    }
    assert url("https://a.b.github.io/")["domain"] == "b.github.io"
    assert url("https://x.com/%2e%2e/%2E/y")["path"] == "/y"
    assert url("https://x.com/?")["has_query"] is True
    assert url("https://u@x.com/")["userinfo"] is True


@pytest.mark.parametrize(
    "text",
    ["example.com", "//example.com", "/path", "http://ex ample.com", "http://a\tb.com",
     "http://a\nb.com", "http://[::1/", "http://x.com:99999/", "http://x.com:8o/",
     "http://a..b/", "http://1.2.3.4.5/", "http://256.1.1.1.1/", "http://09.1/", ""],
)  # fmt: skip
def test_refused_urls(text: str) -> None:
    with pytest.raises(FactError):
        UrlFact().canonicalize(text)


def test_default_scheme() -> None:
    assert UrlFact(default_scheme="https").canonicalize("Example.com/x").value == (
        "https://example.com/x"
    )
    with pytest.raises(FactError):
        UrlFact(default_scheme="https").canonicalize("//evil.com/")


def test_url_is_idempotent() -> None:
    kind = UrlFact()
    for text in ("HTTP://A.com:80/x/../y?a b", "https://ü.de/ä?ö#ß", "mailto:X@Y.com"):
        try:
            once = kind.canonicalize(text).value
        except FactError:
            continue
        assert kind.canonicalize(once).value == once


@pytest.mark.parametrize(
    "spelling",
    [
        "bob@example.com",
        "BOB@EXAMPLE.COM",
        " bob@example.com.",
        "Bob@\uff25\uff38\uff21\uff2d\uff30\uff2c\uff25.com",
    ],
)
def test_one_address(spelling: str) -> None:
    canon = EmailFact().canonicalize(spelling)
    assert canon.value == "bob@example.com"
    assert canon.fact == {
        "address": "bob@example.com",
        "local": "bob",
        "domain": "example.com",
        "registrable": "example.com",
    }


@pytest.mark.parametrize(
    "text",
    ["a@b.com, c@d.com", "a@b.com;c@d.com", "Bob <b@x.com>", "a@b@c.com", "ab.com", "@x.com",
     "a@", "a b@x.com", "a@[1.2.3.4]", "a@127.0.0.1", "a\n@x.com", ".a@x.com", "a..b@x.com",
     '"a@b"@x.com', "a@x.com\r\nBcc: e@vil.com"],
)  # fmt: skip
def test_refused_addresses(text: str) -> None:
    with pytest.raises(FactError):
        EmailFact().canonicalize(text)


def test_registrable_domain() -> None:
    assert registrable_domain("mail.corp.example.co.uk") == "example.co.uk"
    assert registrable_domain("10.0.0.1") == "10.0.0.1"


def test_an_ipv4_mapped_ipv6_address_is_its_ipv4_address() -> None:
    assert url("http://[::ffff:127.0.0.1]:8080/")["host"] == "127.0.0.1"
    assert url("http://[::FFFF:7f00:1]/")["host"] == "127.0.0.1"
    assert url("http://[::1]/")["host"] == "::1"


# --- the rules the mutation run (benchmarks/mutation.py) showed unchecked (issue 20) --------


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "the URL is empty"),
        ("   ", "the URL is empty"),
        ("https://example.com/a b", "the URL contains whitespace or a control character"),
        ("https://example.com/\x7f", "the URL contains whitespace or a control character"),
        ("\thttps://example.com/", "the URL contains whitespace or a control character"),
        ("https://example.com/\n", "the URL contains whitespace or a control character"),
        ("example.com", "the URL is not absolute (it has no scheme like https://)"),
        ("http://x.com:65536/", "the port is not a number from 0 to 65535"),
        ("http://x.com:\uff18\uff10/", "the port is not a number from 0 to 65535"),  # fullwidth 80
        ("http://1.2.3.4.5/", "the host looks like an IPv4 address with too many parts"),
        ("http://1.a.3.4/", "the host mixes an IPv4 address with names"),
        ("http://1.2.3.256/", "the IPv4 address is out of range"),
        ("http://09.1/", "the host has an invalid octal IPv4 part"),
        ("http://[::1]x/", "unexpected text after the IPv6 address"),
        ("http://[::1]]/", "unexpected text after the IPv6 address"),
        ("http://]@[::1/", "the IPv6 address is missing its ']'"),
        ("http://%ff.com/", "the host's percent-escapes are not UTF-8"),
        ("http:///x", "the host is empty"),
        ("http://user@/", "the host is empty"),
        ("http://a:b:80/", "the host contains a character hosts cannot have"),
        ("http://" + "a" * 64 + ".com/", "the host is not a valid international domain name"),
    ],
)
def test_a_refused_url_is_refused_in_words_that_say_why(text: str, problem: str) -> None:
    with pytest.raises(FactError) as caught:
        UrlFact().canonicalize(text)
    assert str(caught.value) == problem


def test_a_url_that_is_not_a_string_is_refused_by_its_type() -> None:
    with pytest.raises(FactError) as caught:
        UrlFact().canonicalize(5)
    assert str(caught.value) == "a URL must be a string, not int"


def test_a_url_that_cannot_be_parsed_says_so() -> None:
    with pytest.raises(FactError) as caught:
        UrlFact().canonicalize("http://[::1/")
    assert str(caught.value) == "the URL cannot be parsed (Invalid IPv6 URL)"


@pytest.mark.parametrize("text", ["//evil.com/", "/x", "\\\\evil.com\\", "\\x"])
def test_with_a_default_scheme_a_url_starting_with_a_slash_is_still_not_absolute(
    text: str,
) -> None:
    with pytest.raises(FactError) as caught:
        UrlFact(default_scheme="https").canonicalize(text)
    assert str(caught.value) == "the URL is not absolute (it has no scheme like https://)"


def test_a_canonical_host_is_refused_in_words_that_say_why() -> None:
    for raw, problem in [
        ("[::1", "the IPv6 address is missing its ']'"),
        ("[::g]", "the IPv6 address is not valid"),
        ("", "the host is empty"),
    ]:
        with pytest.raises(FactError) as caught:
            canonical_host(raw)
        assert str(caught.value) == problem


def test_the_longest_url_is_16384_characters() -> None:
    longest = "https://example.com/" + "a" * (16_384 - len("https://example.com/"))
    assert UrlFact().canonicalize(longest).value == longest
    with pytest.raises(FactError) as caught:
        UrlFact().canonicalize(longest + "a")
    assert str(caught.value) == "the URL is longer than 16384 characters"


def test_ports_run_from_0_to_65535_and_the_default_one_is_dropped() -> None:
    assert url("http://x.com:65535/")["port"] == 65535
    assert UrlFact().canonicalize("http://x.com:0/").value == "http://x.com:0/"
    assert UrlFact().canonicalize("http://x.com:080/").value == "http://x.com/"
    assert UrlFact().canonicalize("http://[::1]:8080/").value == "http://[::1]:8080/"
    assert url("http://[::1]:8080/")["port"] == 8080


@pytest.mark.parametrize(
    "text",
    ["http://a<b.com/", "http://a^b.com/", "http://a|b.com/", "http://evil.com%40good.com/",
     "http://a%2fb.com/", "http://a%20b.com/", "http://a%5cb.com/", "http://a%3fb.com/"],
)  # fmt: skip
def test_a_host_with_a_character_hosts_cannot_have_is_refused(text: str) -> None:
    # Percent-decoded first: "evil.com%40good.com" is not one host a policy could name.
    with pytest.raises(FactError) as caught:
        UrlFact().canonicalize(text)
    assert str(caught.value) == "the host contains a character hosts cannot have"


@pytest.mark.parametrize(
    ("text", "host"),
    [
        ("http://255.255.255.255/", "255.255.255.255"),
        ("http://0xffffffff/", "255.255.255.255"),
        ("http://192.168.0x1.2/", "192.168.1.2"),
        ("http://10.1.257/", "10.1.1.1"),  # the last part fills the bytes left
        ("http://10.65535/", "10.0.255.255"),
        ("http://0x.0x.0x.0x/", "0.0.0.0"),  # "0x" alone is zero
        ("http://0/", "0.0.0.0"),
        ("http://0xg1/", "0xg1"),  # not a hexadecimal number: a name
        ("http://1.0xg1/", "1.0xg1"),
    ],
)
def test_ipv4_in_any_numeric_form_is_one_address(text: str, host: str) -> None:
    assert url(text)["host"] == host


@pytest.mark.parametrize(
    "text",
    ["http://256.1.1.1/", "http://1.256.1.1/", "http://1.2.256.1/", "http://1.2.3.256/",
     "http://1.2.65536/", "http://1.16777216/", "http://4294967296/", "http://0x100000000/"],
)  # fmt: skip
def test_an_ipv4_address_out_of_range_is_refused(text: str) -> None:
    with pytest.raises(FactError) as caught:
        UrlFact().canonicalize(text)
    assert str(caught.value) == "the IPv4 address is out of range"


@pytest.mark.parametrize("dotdot", ["..", ".%2e", ".%2E", "%2e.", "%2E.", "%2e%2e", "%2E%2e"])
def test_every_spelling_of_dot_dot_steps_up(dotdot: str) -> None:
    assert url(f"https://x.com/a/b/{dotdot}/c")["path"] == "/a/c"
    assert url(f"https://x.com/a/b/{dotdot}")["path"] == "/a/"


@pytest.mark.parametrize(
    ("path", "canonical"),
    [("/a/.", "/a/"), ("/a/%2e", "/a/"), ("/a/b/..", "/a/"), ("/a/./b", "/a/b"),
     ("/.", "/"), ("/..", "/"), ("/../a", "/a"), ("/a/b/../../..", "/")],
)  # fmt: skip
def test_a_final_dot_segment_leaves_a_directory(path: str, canonical: str) -> None:
    assert url(f"https://x.com{path}")["path"] == canonical
    assert UrlFact().canonicalize(f"https://x.com{path}").value == f"https://x.com{canonical}"


def test_percent_escapes_are_written_in_upper_case() -> None:
    canon = UrlFact().canonicalize("https://x.com/a%2fb%aF?q=%3d%3D#%7e")
    assert canon.value == "https://x.com/a%2Fb%AF?q=%3D%3D#%7e"
    assert (canon.fact["path"], canon.fact["query"]) == ("/a%2Fb%AF", "q=%3D%3D")


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("https:/example.com", "https://example.com/"),  # one slash, as a browser reads it
        ("https:/Xavier.example/", "https://xavier.example/"),
        ("https:///x.com/", None),  # three: the host is empty (refused, not guessed)
        ("https://example.com/X  ", "https://example.com/X"),
        ("HTTP://user:pw@Evil.com:8080/", "http://user:pw@evil.com:8080/"),
        ("http://[::1]/", "http://[::1]/"),
        ("http://[::FFFF:7f00:1]/", "http://127.0.0.1/"),
        ("https://example.com/#", "https://example.com/#"),  # an empty fragment is kept
        ("https://example.com/#a?b", "https://example.com/#a?b"),
    ],
)
def test_the_canonical_url(text: str, canonical: str | None) -> None:
    if canonical is None:
        with pytest.raises(FactError):
            UrlFact().canonicalize(text)
    else:
        assert UrlFact().canonicalize(text).value == canonical
        assert UrlFact().canonicalize(canonical).value == canonical


@pytest.mark.parametrize("fragment", ["#a?b", "#a?b#c", "#?"])
def test_a_question_mark_in_the_fragment_is_not_a_query(fragment: str) -> None:
    record = url(f"https://example.com/{fragment}")
    assert (record["has_query"], record["query"]) == (False, "")
    assert url(f"https://example.com/?{fragment}")["has_query"] is True


def test_the_record_of_a_url_without_a_host() -> None:
    # Schemes other than http(s), ws(s) and ftp are kept as written, with no host a policy
    # could match: what follows the scheme is the query.
    assert url("MAILTO:bob@example.com") == {
        "url": "mailto:bob@example.com",
        "scheme": "mailto",
        "host": "",
        "domain": "",
        "port": 0,
        "path": "",
        "query": "bob@example.com",
        "has_query": True,
        "userinfo": False,
    }
    assert url("about:")["has_query"] is False


def test_a_public_suffix_or_an_unlisted_name_is_its_own_domain() -> None:
    assert url("http://com/")["domain"] == "com"
    assert url("http://co.uk/")["domain"] == "co.uk"
    assert url("http://localhost:8080/")["domain"] == "localhost"
    assert registrable_domain("co.uk") == "co.uk"
    assert registrable_domain("") == ""
    assert registrable_domain("::1") == "::1"


def test_a_known_suffix_is_one_the_public_suffix_list_names() -> None:
    assert known_suffix("example.com") is True
    assert known_suffix("www.example.co.uk") is True
    assert known_suffix("notes.txt") is False
    assert known_suffix("localhost") is False
    assert known_suffix("10.0.0.1") is True  # an IP address is a host
    assert known_suffix("::1") is True


def test_the_default_scheme() -> None:
    kind = UrlFact(default_scheme="HTTPS")
    assert kind.default_scheme == "https"
    assert kind.canonicalize("example.com/x").value == "https://example.com/x"
    assert UrlFact().default_scheme is None
    assert repr(kind) == "UrlFact(default_scheme='https')"
    assert repr(UrlFact()) == "UrlFact()"
    assert repr(EmailFact()) == "EmailFact()"


@pytest.mark.parametrize("scheme", ["", "1http", "ht tp", "https:", "https://evil.example/?"])
def test_a_default_scheme_must_be_a_scheme(scheme: str) -> None:
    with pytest.raises(ValueError) as caught:
        UrlFact(default_scheme=scheme)
    assert str(caught.value) == f"{scheme!r} is not a URL scheme"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("bob@example.com\n", "the address contains a control character"),
        ("\tbob@example.com", "the address contains a control character"),
        ("a@b@c.com", "give one bare address like name@example.com"),
        ("Bob <b@x.com>", "give one bare address like name@example.com"),
        ("a" * 65 + "@x.com", "give one bare address like name@example.com"),
        ("bob.@x.com", "the part before '@' has a misplaced '.'"),
        (".bob@x.com", "the part before '@' has a misplaced '.'"),
        ("b..ob@x.com", "the part before '@' has a misplaced '.'"),
        ("a@[1.2.3.4]", "address literals (name@[1.2.3.4]) are not accepted"),
        ("a@[::1]", "address literals (name@[1.2.3.4]) are not accepted"),
        ("a@127.0.0.1", "address literals (name@1.2.3.4) are not accepted"),
        ("a@0x7f.1", "address literals (name@1.2.3.4) are not accepted"),
    ],
)
def test_a_refused_address_is_refused_in_words_that_say_why(text: str, problem: str) -> None:
    with pytest.raises(FactError) as caught:
        EmailFact().canonicalize(text)
    assert str(caught.value) == problem


def test_an_address_that_is_not_a_string_is_refused_by_its_type() -> None:
    with pytest.raises(FactError) as caught:
        EmailFact().canonicalize(["a@b.com"])
    assert str(caught.value) == "an e-mail address must be a string, not list"


def test_the_part_before_the_at_sign_is_at_most_64_characters() -> None:
    local = "a" * 64
    assert EmailFact().canonicalize(f"{local}@x.com").value == f"{local}@x.com"


def test_only_spaces_around_an_address_are_dropped() -> None:
    assert EmailFact().canonicalize("  Xavier@Example.com  ").value == "xavier@example.com"
    assert EmailFact().canonicalize("bobX@example.comX").value == "bobx@example.comx"
