"""The ``url`` and ``email`` facts: one host, however it is spelled."""

from __future__ import annotations

import pytest

from clearance.facts import EmailFact, FactError, UrlFact
from clearance.facts.web import registrable_domain


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
