import time

import pytest

from clearance import Principal
from clearance.guardrails import GuardrailContext, UrlAllowlist

CTX = GuardrailContext("http.get", "http__get", Principal("User", "u"), "s", None, "c", "arguments")


def allowlist(**options: object) -> UrlAllowlist:
    options.setdefault("hosts", ("api.example.com", "*.github.com"))
    return UrlAllowlist(**options)  # type: ignore[arg-type]


def verdict(guard: UrlAllowlist, value: object) -> tuple[str, str | None]:
    outcome = guard.check({"url": value}, CTX)
    return outcome.action, outcome.message


@pytest.mark.parametrize(
    "url",
    [
        "https://api.example.com/v1/items?q=1",
        "https://API.Example.COM/v1",
        "https://api.example.com./v1",  # trailing dot: the same host
        "https://api.example.com:443/v1",  # the scheme's default port
        "https://raw.github.com/x",
        "https://a.b.github.com/x",
        "see https://api.example.com/docs, then https://gist.github.com/1.",
        "(https://api.example.com)",
        "no url here at all",
        "File: notes.txt; Data: 3 rows",  # prose, not URLs
    ],
)
def test_allowed(url: str) -> None:
    assert verdict(allowlist(), url) == ("allow", None)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://evil.com/x", "host 'evil.com' is not allowed"),
        ("https://evilgithub.com/", "host 'evilgithub.com' is not allowed"),
        ("https://github.com/", "host 'github.com' is not allowed"),  # *. means subdomains
        ("https://api.example.com.evil.com/", "not allowed"),
        ("http://api.example.com/", "scheme 'http' is not allowed"),
        ("ftp://api.example.com/", "scheme 'ftp' is not allowed"),
        ("javascript:alert(1)", "scheme 'javascript' is not allowed"),
        ("data:text/html,<script>", "scheme 'data' is not allowed"),
        ("file:///etc/passwd", "scheme 'file' is not allowed"),
        ("https://api.example.com@evil.com/", "user-info"),
        ("https://user:pw@api.example.com/", "user-info"),
        ("https://api.example.com\\@evil.com/", "backslashes"),
        ("https://api.example.com:8443/", "port 8443 is not allowed"),
        ("https://api.example.com:99999/", "port is not a valid number"),
        ("https://api.example%2ecom/", "percent-encoding"),
        ("https:///evil.com/", "no host"),
        ("https://[::1/", "malformed"),
        ("//evil.com/x", "scheme missing"),
        ("https://evil.com#@api.example.com", "host 'evil.com' is not allowed"),
        ("https://evil.com?@api.example.com", "host 'evil.com' is not allowed"),
        ("text first https://evil.com/ then more", "host 'evil.com'"),
        ("https://api..example.com/", "not a valid or unambiguous IDNA name"),
        ("see1https://evil.com/", "scheme 'see1https' is not allowed"),
        ("1https://evil.com/", "host 'evil.com'"),  # a scheme cannot start with a digit
        ("xjavascript:alert(1)", "scheme 'xjavascript' is not allowed"),
    ],
)
def test_refused(url: str, reason: str) -> None:
    action, message = verdict(allowlist(), url)
    assert action == "block"
    assert message is not None and reason in message and "/url" in message


def test_idna_lookalikes_do_not_match() -> None:
    guard = UrlAllowlist(hosts=["example.com"])
    cyrillic = "https://\u0435\u0445\u0430mple.com/"  # Cyrillic ie, ha and a
    action, message = verdict(guard, cyrillic)
    assert action == "block"
    assert message is not None and "xn--" in message  # compared as punycode
    assert verdict(guard, "https://example.com/")[0] == "allow"
    # full-width letters map to "example.com" under IDNA; clients disagree, so refuse
    action, message = verdict(guard, "https://\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45.com/")
    assert action == "block" and message is not None and "ambiguous" in message
    # a zero-width space vanishes under IDNA mapping: refuse as ambiguous too
    assert verdict(guard, "https://exa\u200bmple.com/")[0] == "block"


def test_unicode_patterns_match_their_punycode() -> None:
    guard = UrlAllowlist(hosts=["bücher.example"])
    assert verdict(guard, "https://bücher.example/")[0] == "allow"
    assert verdict(guard, "https://xn--bcher-kva.example/")[0] == "allow"
    assert verdict(guard, "https://bucher.example/")[0] == "block"


def test_userinfo_can_be_allowed_but_the_host_still_counts() -> None:
    guard = allowlist(allow_userinfo=True)
    assert verdict(guard, "https://user@api.example.com/")[0] == "allow"
    action, message = verdict(guard, "https://api.example.com@evil.com/")
    assert action == "block" and message is not None and "evil.com" in message
    # the message never repeats user-info (it may hold a password)
    _, message = verdict(allowlist(), "https://bob:hunter2@evil.com/")
    assert message is not None and "hunter2" not in message


def test_ports_option_and_schemes() -> None:
    guard = allowlist(ports=[8443], schemes=["https", "wss"])
    assert verdict(guard, "https://api.example.com:8443/")[0] == "allow"
    assert verdict(guard, "wss://api.example.com/socket")[0] == "allow"
    assert verdict(guard, "wss://api.example.com:443/")[0] == "allow"  # default for wss
    assert verdict(guard, "https://api.example.com:80/")[0] == "block"


def test_require_url_refuses_values_that_are_not_urls() -> None:
    guard = allowlist(require_url=True)
    assert verdict(guard, "https://api.example.com/x")[0] == "allow"
    for value in ("api.example.com/x", "evil.com", " https://api.example.com/", ""):
        assert verdict(guard, value)[0] == "block", value
    # without it, text without a URL passes
    assert verdict(allowlist(), "evil.com")[0] == "allow"


def test_any_host_and_fields() -> None:
    guard = UrlAllowlist(hosts=["*"], fields=["/url"])
    assert verdict(guard, "https://anything.example/")[0] == "allow"
    assert verdict(guard, "http://anything.example/")[0] == "block"
    assert guard.check({"url": "https://x.example", "note": "http://y"}, CTX).action == "allow"
    nested = allowlist(fields=["/requests/*/url"])
    arguments = {"requests": [{"url": "https://api.example.com"}, {"url": "https://evil.com"}]}
    outcome = nested.check(arguments, CTX)
    assert outcome.action == "block" and outcome.message is not None
    assert "/requests/1/url" in outcome.message


def test_ask_instead_of_block() -> None:
    outcome = allowlist(action="ask").check({"url": "https://new.example/"}, CTX)
    assert outcome.action == "ask"
    assert outcome.message is not None and "new.example" in outcome.message


def test_options_are_validated() -> None:
    with pytest.raises(ValueError, match="leading"):
        UrlAllowlist(hosts=["api.*.com"])
    with pytest.raises(ValueError, match="list of strings"):
        UrlAllowlist(hosts="api.example.com")
    with pytest.raises(ValueError, match="not a valid host name"):
        UrlAllowlist(hosts=["a..b"])
    with pytest.raises(ValueError, match="action"):
        UrlAllowlist(hosts=["x.com"], action="allow")  # type: ignore[arg-type]
    assert UrlAllowlist(hosts=["*.GitHub.com."]).host_allowed("api.github.com")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        # WHATWG parsers (browsers, fetch) read all of these as https://evil.com/
        ("https:/evil.com", "host 'evil.com' is not allowed"),
        ("https:evil.com", "host 'evil.com' is not allowed"),
        ("see https:/evil.com now", "host 'evil.com' is not allowed"),
        ("see HTTPS:EVIL.com now", "host 'evil.com' is not allowed"),
        ("https:/\\evil.com", "backslashes"),
        ("fetch https:\\\\evil.com", "backslashes"),
        ("https:@evil.com", "user-info"),
        # a scheme-relative URL, after the C0 controls and spaces browsers strip
        (" //evil.com", "scheme missing"),
        ("\t//evil.com", "scheme missing"),
        ("\x00\n //evil.com/x?q=a b\n", "scheme missing"),
        ("//evil.com/ and then some words", "scheme missing"),
        ("/\\evil.com", "backslashes"),
    ],
)
def test_whatwg_readings_are_checked(text: str, reason: str) -> None:
    action, message = verdict(allowlist(schemes=["https", "http"]), text)
    assert action == "block"
    assert message is not None and reason in message


def test_special_schemes_without_slashes_go_to_their_host() -> None:
    guard = allowlist(schemes=["https", "http"])
    assert verdict(guard, "https:/api.example.com/v1")[0] == "allow"
    assert verdict(guard, "see https:raw.github.com/x")[0] == "allow"
    action, message = verdict(guard, "wss:api.example.com")
    assert action == "block" and message is not None and "scheme 'wss'" in message
    # neither prose nor code comments are URLs
    for text in ("Protocols: http:, https:, ftp.", "// TODO: fix this", "  // note\nx = 1"):
        assert verdict(guard, text) == ("allow", None), text


def test_an_inner_url_is_still_checked() -> None:
    guard = allowlist()
    action, message = verdict(guard, "https://api.example.com/go?to=https://evil.com/")
    assert action == "block" and message is not None and "evil.com" in message
    action, message = verdict(guard, "https://api.example.com/go?to=https:evil.com")
    assert action == "block" and message is not None and "evil.com" in message
    assert verdict(guard, "https://api.example.com/go?to=https://raw.github.com/")[0] == "allow"


def test_many_urls_in_one_string_take_linear_time() -> None:
    guard = allowlist()
    text = "https://api.example.com/" * (100_000 // 24)
    started = time.perf_counter()
    assert guard.problem(text) is None
    assert time.perf_counter() - started < 1.0  # about 0.05 s; quadratic took seconds
    # each of them is still checked
    assert guard.problem(text + "https://evil.com/" + text) == "host 'evil.com' is not allowed"
