"""The ``url`` and ``email`` facts: hosts and addresses as a browser or mail server reads them.

A policy that allows ``example.com`` must not be beaten by ``EXAMPLE.com``, ``example.com.``,
``%65xample.com``, the same in fullwidth letters, ``http://good.com@evil.com`` or
``http://evil.com\\@good.com``, and a policy that denies ``127.0.0.1`` must see
``http://2130706433/`` and ``http://0x7f.1/`` as that address. ``UrlFact`` parses a URL the
way the WHATWG URL standard (what browsers and most HTTP clients follow) does for the
special schemes (``http``, ``https``, ``ws``, ``wss``, ``ftp``): backslashes are slashes,
the host is percent-decoded, IDNA-encoded and lower-cased, numeric IPv4 forms are
normalized, the default port is dropped and dot segments (``%2e`` included) are removed. The
handler receives the canonical URL.

URL fact::

    url         "https://example.com/a/b?q=1"
    scheme      "https"
    host        "example.com"       lower-case ASCII (punycode), no trailing dot, IPs normalized
                                    (an IPv4-mapped IPv6 address is its IPv4 address)
    domain      "example.com"       the registrable domain (Public Suffix List, private
                                    suffixes included: "b.github.io"); the host for IPs
    port        443                 explicit or the scheme's default (0 when none)
    path        "/a/b"
    query       "q=1"               without "?"; "" when none
    has_query   true
    userinfo    false               whether credentials were given (user:pass@)

E-mail fact (a bare address only: ``Name <a@b>`` lists, commas and comments are refused,
so that what the policy sees is the one recipient the tool sends to)::

    address     "bob@example.com"   lower-case
    local       "bob"
    domain      "example.com"       lower-case ASCII host
    registrable "example.com"

Refused: control characters and whitespace inside, a relative URL (unless the kind was
given a ``default_scheme``), a host that does not survive IDNA, a port above 65535.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from clearance.facts.base import Canonical, FactError

__all__ = ["EmailFact", "UrlFact", "canonical_host", "known_suffix", "registrable_domain"]

SPECIAL_SCHEMES: Mapping[str, int] = {"http": 80, "https": 443, "ws": 80, "wss": 443, "ftp": 21}
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")
_FORBIDDEN_HOST = frozenset(" \t\n\r#/:<>?@[\\]^|%\x00")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_MAX_URL = 16_384

_URL_ATTRIBUTES: Mapping[str, str] = {
    "url": "String",
    "scheme": "String",
    "host": "String",
    "domain": "String",
    "port": "Long",
    "path": "String",
    "query": "String",
    "has_query": "Bool",
    "userinfo": "Bool",
}
_EMAIL_ATTRIBUTES: Mapping[str, str] = {
    "address": "String",
    "local": "String",
    "domain": "String",
    "registrable": "String",
}


@functools.cache
def _suffixes() -> Any:
    from publicsuffixlist import PublicSuffixList

    return PublicSuffixList()


def registrable_domain(host: str) -> str:
    """The registrable domain of a canonical host (``www.example.co.uk`` →
    ``example.co.uk``); IP addresses and public suffixes are their own domain."""
    if not host or _is_ip(host):
        return host
    found = _suffixes().privatesuffix(host)
    return str(found) if found else host


def known_suffix(host: str) -> bool:
    """Whether a canonical host is an IP address or ends in a suffix the Public Suffix
    List knows (``example.com`` does, ``notes.txt`` does not): text that names a host
    without a scheme is read as one only then."""
    if _is_ip(host):
        return True
    return _suffixes().publicsuffix(host, accept_unknown=False) is not None


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def canonical_host(raw: str) -> str:
    """A host as a browser resolves it: percent-decoded, IDNA (punycode), lower-case, no
    trailing dot; IPv4 in any numeric form as dotted decimal; IPv6 compressed.

    Raises:
        FactError: the host is empty or not a valid host name.
    """
    if raw.startswith("["):
        if not raw.endswith("]"):
            raise FactError("the IPv6 address is missing its ']'")
        try:
            address = ipaddress.IPv6Address(raw[1:-1])
        except ValueError:
            raise FactError("the IPv6 address is not valid") from None
        # [::ffff:127.0.0.1] is 127.0.0.1 to the socket layer: one address, one fact.
        mapped = address.ipv4_mapped
        return str(mapped) if mapped is not None else address.compressed
    try:
        host = unquote(raw, errors="strict") if "%" in raw else raw
    except UnicodeDecodeError:
        raise FactError("the host's percent-escapes are not UTF-8") from None
    if not host:
        raise FactError("the host is empty")
    if _CONTROL.search(host) or any(c in _FORBIDDEN_HOST for c in host):
        raise FactError("the host contains a character hosts cannot have")
    try:
        ascii_host = host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise FactError("the host is not a valid international domain name") from None
    ascii_host = ascii_host.rstrip(".") if ascii_host != "." else ascii_host
    if not ascii_host or ".." in ascii_host:
        raise FactError("the host has an empty label")
    ipv4 = _ipv4(ascii_host)
    return ipv4 if ipv4 is not None else ascii_host


def _ipv4(host: str) -> str | None:
    """The WHATWG IPv4 parser: ``2130706433``, ``0x7f.1``, ``0177.0.0.1`` are
    ``127.0.0.1``. None when the host is not an IPv4 address."""
    parts = host.split(".")
    if not parts[-1] or not _numeric(parts[-1]):
        return None
    if len(parts) > 4:
        raise FactError("the host looks like an IPv4 address with too many parts")
    numbers: list[int] = []
    for part in parts:
        if not _numeric(part):
            raise FactError("the host mixes an IPv4 address with names")
        numbers.append(_parse_ipv4_number(part))
    if any(n > 255 for n in numbers[:-1]) or numbers[-1] >= 256 ** (5 - len(numbers)):
        raise FactError("the IPv4 address is out of range")
    value = numbers[-1]
    for index, number in enumerate(numbers[:-1]):
        value += number * 256 ** (3 - index)
    return str(ipaddress.IPv4Address(value))


def _numeric(part: str) -> bool:
    if part.lower().startswith("0x"):
        return all(c in "0123456789abcdefABCDEF" for c in part[2:])
    return part.isascii() and part.isdigit()


def _parse_ipv4_number(part: str) -> int:
    if part.lower().startswith("0x"):
        return int(part[2:] or "0", 16)
    if len(part) > 1 and part.startswith("0"):
        if any(c in "89" for c in part):
            raise FactError("the host has an invalid octal IPv4 part")
        return int(part, 8)
    return int(part)


def _remove_dot_segments(path: str) -> str:
    output: list[str] = []
    segments = path.split("/")
    for index, segment in enumerate(segments[1:], 1):
        lowered = segment.lower()
        if lowered in (".", "%2e"):
            if index == len(segments) - 1:
                output.append("")
            continue
        if lowered in ("..", ".%2e", "%2e.", "%2e%2e"):
            if output:
                output.pop()
            if index == len(segments) - 1:
                output.append("")
            continue
        output.append(segment)
    return "/" + "/".join(output)


_PATH_SAFE = "/!$&'()*+,;=:@~-._%"
_QUERY_SAFE = "/?!$&'()*+,;=:@~-._%"


def _uppercase_escapes(text: str) -> str:
    return re.sub(r"%[0-9a-fA-F]{2}", lambda m: m.group(0).upper(), text)


class UrlFact:
    """A URL argument (see the module docstring).

    Args:
        default_scheme: a scheme put before a URL given without one (``"https"`` turns
            ``example.com/x`` into ``https://example.com/x``); ``None`` refuses such URLs.
    """

    __slots__ = ("_default_scheme",)

    def __init__(self, *, default_scheme: str | None = None) -> None:
        if default_scheme is not None and not _SCHEME.fullmatch(default_scheme + ":"):
            raise ValueError(f"{default_scheme!r} is not a URL scheme")
        self._default_scheme = default_scheme.lower() if default_scheme else None

    @property
    def name(self) -> str:
        return "url"

    @property
    def default_scheme(self) -> str | None:
        """The scheme put before a URL given without one (None: such URLs are refused)."""
        return self._default_scheme

    @property
    def attributes(self) -> Mapping[str, str]:
        return _URL_ATTRIBUTES

    @property
    def json_types(self) -> frozenset[str]:
        return frozenset({"string"})

    def canonicalize(self, value: Any) -> Canonical:
        if not isinstance(value, str):
            raise FactError(f"a URL must be a string, not {type(value).__name__}")
        text = value.strip(" ")
        if not text:
            raise FactError("the URL is empty")
        if len(text) > _MAX_URL:
            raise FactError(f"the URL is longer than {_MAX_URL} characters")
        if _CONTROL.search(text) or " " in text:
            raise FactError("the URL contains whitespace or a control character")
        if not _SCHEME.match(text):
            if self._default_scheme is None or text.startswith(("/", "\\")):
                raise FactError("the URL is not absolute (it has no scheme like https://)")
            text = f"{self._default_scheme}://{text}"
        scheme = text.split(":", 1)[0].lower()
        text = scheme + text[len(scheme) :]
        if scheme not in SPECIAL_SCHEMES:
            return Canonical(text, self._fact(text, scheme, "", 0, "", text[len(scheme) + 1 :]))
        text = text.replace("\\", "/")
        rest = text[len(scheme) + 1 :]
        if not rest.startswith("//"):
            # WHATWG reads "http:example.com" and "http:/example.com" as "http://example.com".
            rest = "//" + rest.lstrip("/")
        try:
            parts = urlsplit(scheme + ":" + rest)
        except ValueError as exc:
            raise FactError(f"the URL cannot be parsed ({exc})") from None
        netloc = parts.netloc
        userinfo, at, hostport = netloc.rpartition("@")
        host_text, port_text = _split_port(hostport)
        host = canonical_host(host_text)
        default_port = SPECIAL_SCHEMES[scheme]
        if port_text:
            if not port_text.isascii() or not port_text.isdigit() or int(port_text) > 65535:
                raise FactError("the port is not a number from 0 to 65535")
            port = int(port_text)
        else:
            port = default_port
        path = _remove_dot_segments(parts.path or "/")
        path = _uppercase_escapes(quote(path, safe=_PATH_SAFE))
        query = _uppercase_escapes(quote(parts.query, safe=_QUERY_SAFE))
        has_query = "?" in rest.split("#", 1)[0]
        shown_host = f"[{host}]" if ":" in host else host
        url = f"{scheme}://"
        if at:
            url += f"{userinfo}@"
        url += shown_host
        if port != default_port:
            url += f":{port}"
        url += path
        if has_query:
            url += f"?{query}"
        if parts.fragment or text.endswith("#"):
            url += "#" + quote(parts.fragment, safe=_QUERY_SAFE)
        fact = self._fact(url, scheme, host, port, path, query)
        fact["has_query"] = has_query
        fact["userinfo"] = bool(at)
        return Canonical(url, fact)

    @staticmethod
    def _fact(url: str, scheme: str, host: str, port: int, path: str, query: str) -> dict[str, Any]:
        return {
            "url": url,
            "scheme": scheme,
            "host": host,
            "domain": registrable_domain(host),
            "port": port,
            "path": path,
            "query": query,
            "has_query": bool(query),
            "userinfo": False,
        }

    def __repr__(self) -> str:
        extra = f"default_scheme={self._default_scheme!r}" if self._default_scheme else ""
        return f"UrlFact({extra})"


def _split_port(hostport: str) -> tuple[str, str]:
    if hostport.startswith("["):
        end = hostport.find("]")
        if end == -1:
            return hostport, ""
        rest = hostport[end + 1 :]
        if rest and not rest.startswith(":"):
            raise FactError("unexpected text after the IPv6 address")
        return hostport[: end + 1], rest[1:]
    host, colon, port = hostport.rpartition(":")
    return (host, port) if colon else (hostport, "")


_LOCAL_FORBIDDEN = frozenset(' \t"(),:;<>@[\\]')


class EmailFact:
    """An e-mail address argument (see the module docstring)."""

    __slots__ = ()

    @property
    def name(self) -> str:
        return "email"

    @property
    def attributes(self) -> Mapping[str, str]:
        return _EMAIL_ATTRIBUTES

    @property
    def json_types(self) -> frozenset[str]:
        return frozenset({"string"})

    def canonicalize(self, value: Any) -> Canonical:
        if not isinstance(value, str):
            raise FactError(f"an e-mail address must be a string, not {type(value).__name__}")
        text = value.strip(" ")
        if _CONTROL.search(text):
            raise FactError("the address contains a control character")
        if text.count("@") != 1:
            raise FactError("give one bare address like name@example.com")
        local, _, domain_text = text.partition("@")
        if not local or any(c in _LOCAL_FORBIDDEN for c in local) or len(local) > 64:
            raise FactError("give one bare address like name@example.com")
        if local.startswith(".") or local.endswith(".") or ".." in local:
            raise FactError("the part before '@' has a misplaced '.'")
        if domain_text.startswith("["):
            raise FactError("address literals (name@[1.2.3.4]) are not accepted")
        domain = canonical_host(domain_text)
        if _is_ip(domain):
            raise FactError("address literals (name@1.2.3.4) are not accepted")
        local = local.lower()
        address = f"{local}@{domain}"
        return Canonical(
            address,
            {
                "address": address,
                "local": local,
                "domain": domain,
                "registrable": registrable_domain(domain),
            },
        )

    def __repr__(self) -> str:
        return "EmailFact()"
