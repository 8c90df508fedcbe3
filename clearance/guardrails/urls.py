"""``UrlAllowlist``: every URL in the selected arguments must go to an allowed scheme and host."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import SplitResult, urlsplit

from clearance import _pointer
from clearance.guardrails._refusal import RefusalAction, first_refusal, refusal_action
from clearance.guardrails.base import ArgumentGuardrail, GuardrailContext, GuardrailOutcome

__all__ = ["UrlAllowlist"]

# URLs inside free text are found from their colon: "://" anywhere, the colon of a
# scheme that runs or embeds content without an authority part (javascript:, data: ...)
# when something follows it ("File: notes.txt" in prose is not a URL), and the colon of a
# special scheme (http, https, ws, wss, ftp) followed by a slash, a backslash or a host
# character: WHATWG parsers (browsers, fetch) read "https:/evil.com", "https:evil.com"
# and "https:\\evil.com" as "https://evil.com/". The regex opens with the literal ":" so
# that the engine can skip quickly to candidates; a pattern that opened with the scheme's
# character class would be tried at every letter.
_URL_COLON = re.compile(
    r":(?://"
    r"|(?:(?<=javascript:)|(?<=vbscript:)|(?<=data:)|(?<=file:)|(?<=blob:))(?=\S)"
    r"|(?:(?<=http:)|(?<=https:)|(?<=ws:)|(?<=wss:)|(?<=ftp:))(?=[\w/\\@\[%-]))",
    re.IGNORECASE,
)
# A special-scheme URL without "//" after its colon ("https:/evil.com", "https:evil.com";
# backslashes are refused before this applies): WHATWG parsers skip any slashes there and
# read what follows as the authority.
_SPECIAL_WITHOUT_SLASHES = re.compile(r"(https?|wss?|ftp):/?(?!/)", re.IGNORECASE)
# A whole value that, once WHATWG's leading and trailing C0 controls and spaces are
# stripped and its tabs and newlines removed, is a scheme-relative URL ("//evil.com/x"; a
# browser also reads "/\\evil.com" and "\\/evil.com" so): slashes, then an authority
# without spaces or controls, ended by a slash, backslash, "?", "#" or the end. A "// a
# comment" has a space where the host would be, so it is not one.
_SCHEME_RELATIVE = re.compile(r"(?:/[/\\]|\\/)[/\\]*[^/\\?#\x00-\x20\x7f\s]+(?=[/\\?#]|\Z)")
_C0_AND_SPACE = "".join(map(chr, range(0x21)))
_TAB_AND_NEWLINE = str.maketrans("", "", "\t\n\r")
_SCHEME_TAIL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*\Z")
_URL_REST = re.compile(r"[^\s<>\"'`]*")
_TRAILING = ".,;:!?)]}>'\""
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443, "ftp": 21}
_CONTROL = re.compile(r"[\x00-\x20\x7f]")
_DOTS = re.compile("[\u002e\u3002\uff0e\uff61]")


class UrlAllowlist(ArgumentGuardrail):
    """Refuse URLs whose scheme, host or port is not allowed.

    Every URL found in the selected fields is parsed with :mod:`urllib.parse`; its scheme
    must be in ``schemes`` and its host must match one of ``hosts``. Host names are
    lower-cased and IDNA-encoded before comparison, so a look-alike of ``example.com``
    spelled with Cyrillic letters (``"\\u0435\\u0445\\u0430mple.com"``) becomes
    ``xn--...`` and does not match ``example.com``; a host that
    changes under IDNA normalization (full-width letters, invisible characters) is refused
    as ambiguous, since clients disagree on how to map it. Also refused: any user-info
    (``https://allowed.com@evil.com`` goes to ``evil.com``; with ``allow_userinfo=True`` the
    host is still checked), backslashes (browsers read them as ``/``), control characters,
    ``%`` in the host, an empty host, and a port that is neither the scheme's default nor
    in ``ports``.

    Host patterns: ``"api.example.com"`` matches exactly that host (a trailing dot is
    ignored); ``"*.github.com"`` matches any subdomain of ``github.com`` but neither
    ``github.com`` itself nor ``evilgithub.com``; ``"*"`` matches every host.

    URLs are found as ``scheme://...`` anywhere in a string, ``javascript:``, ``data:``,
    ``file:``, ``vbscript:`` and ``blob:`` URLs anywhere, ``http:``, ``https:``, ``ws:``,
    ``wss:`` and ``ftp:`` followed by a slash, a backslash or a host character anywhere
    (browsers read ``https:/evil.com`` and ``https:evil.com`` as ``https://evil.com/``; so
    does this guardrail), and a whole value that is a scheme-relative URL (``//evil.com``,
    also after leading spaces or control characters), which is refused since its scheme
    cannot be known. With ``require_url=True`` each selected string must itself be one
    absolute URL (for a ``/url`` argument, so that ``evil.com`` cannot slip through as
    "not a URL").

    Example::

        UrlAllowlist(schemes=("https",), hosts=("api.example.com", "*.github.com"),
                     tools="http.*", fields=["/url"], require_url=True)

    The block message names the field and the scheme or host, never user-info or query.

    Args:
        schemes: allowed schemes (compared lower-case).
        hosts: allowed host patterns, as above.
        ports: explicit ports allowed besides each scheme's default.
        allow_userinfo: accept ``user:pass@`` in URLs (the host is checked either way).
        require_url: each selected string must be exactly one absolute URL.
        action: ``"block"`` (default) or ``"ask"`` a person about a URL that is not allowed.
        tools: glob(s) over qualified tool names this guardrail applies to.
        fields: JSON pointers to inspect; ``None`` inspects every string in the arguments.
        advisory: record the outcome but never enforce it.
        name: the name used in records.
        timeout: seconds the check may take.
    """

    def __init__(
        self,
        *,
        schemes: Iterable[str] = ("https",),
        hosts: Iterable[str] = (),
        ports: Iterable[int] = (),
        allow_userinfo: bool = False,
        require_url: bool = False,
        action: RefusalAction = "block",
        tools: str | Iterable[str] = "*",
        fields: Iterable[str] | None = None,
        advisory: bool = False,
        name: str | None = None,
        timeout: float | None = 5.0,
    ) -> None:
        super().__init__(tools=tools, fields=fields, advisory=advisory, name=name, timeout=timeout)
        if isinstance(schemes, str) or isinstance(hosts, str):
            raise ValueError("schemes and hosts take a list of strings, not one string")
        action = refusal_action(action)
        self.schemes = frozenset(s.lower().rstrip(":/") for s in schemes)
        self.ports = frozenset(int(p) for p in ports)
        self.allow_userinfo = allow_userinfo
        self.require_url = require_url
        self.action = action
        self._any_host = False
        exact: set[str] = set()
        suffixes: list[str] = []
        for pattern in hosts:
            if pattern == "*":
                self._any_host = True
            elif pattern.startswith("*."):
                suffixes.append("." + _normalize_pattern(pattern[2:]))
            elif "*" in pattern:
                raise ValueError(f"host pattern {pattern!r}: '*' may only be a leading '*.' label")
            else:
                exact.add(_normalize_pattern(pattern))
        self._exact = frozenset(exact)
        self._suffixes = tuple(suffixes)

    def host_allowed(self, host: str) -> bool:
        """True if the normalized ``host`` matches an allowed pattern."""
        return self._any_host or host in self._exact or host.endswith(self._suffixes)

    def check(self, value: Any, ctx: GuardrailContext) -> GuardrailOutcome:
        """Block (or ask) if any URL in the selected fields is not allowed."""
        messages = (
            f"{self.name}: URL in {pointer or '/'}: {problem}"
            for base, selected in self.selected(value)
            for pointer, text in _pointer.iter_strings(selected, base)
            if (problem := self.problem(text)) is not None
        )
        return first_refusal(messages, self.action)

    def problem(self, text: str) -> str | None:
        """Why some URL in ``text`` is not allowed, or None if every URL is."""
        if self.require_url:
            return self._url_problem(text, whole=True)
        relative = _SCHEME_RELATIVE.match(text.strip(_C0_AND_SPACE).translate(_TAB_AND_NEWLINE))
        if relative is not None or (text.startswith("//") and not _CONTROL.search(text)):
            # A scheme-relative URL: its scheme would be the page's, so it cannot be
            # checked, and it is refused ("scheme missing") whatever its host.
            return self._url_problem(text if relative is None else relative.group(), whole=True)
        for url in _urls_in(text):
            problem = self._url_problem(url, whole=False)
            if problem is not None:
                return problem
        return None

    def _url_problem(self, url: str, *, whole: bool) -> str | None:
        if "\\" in url:
            return "backslashes are not allowed in URLs"
        if _CONTROL.search(url):
            return "whitespace or control characters are not allowed in a URL"
        if not whole and (special := _SPECIAL_WITHOUT_SLASHES.match(url)) is not None:
            url = f"{special.group(1)}://{url[special.end() :]}"
        try:
            parts = urlsplit(url)
        except ValueError:
            return "the URL is malformed"
        if not parts.scheme:
            return "not an absolute URL (scheme missing)" if whole else None
        scheme = parts.scheme.lower()
        if scheme not in self.schemes:
            return f"scheme {scheme!r} is not allowed"
        return self._authority_problem(parts, scheme)

    def _authority_problem(self, parts: SplitResult, scheme: str) -> str | None:
        netloc = parts.netloc
        if "@" in netloc and not self.allow_userinfo:
            return "user-info ('user@' or 'user:password@') is not allowed in URLs"
        host = netloc.rpartition("@")[2]
        if host.startswith("["):
            host = host[1 : host.find("]")] if "]" in host else ""
        else:
            host = host.partition(":")[0]
        if not host:
            return "the URL has no host"
        if "%" in host:
            return "percent-encoding is not allowed in the host"
        normalized = _normalize_host(host)
        if normalized is None:
            return "the host name is not a valid or unambiguous IDNA name"
        if not self.host_allowed(normalized):
            return f"host {normalized!r} is not allowed"
        try:
            port = parts.port
        except ValueError:
            return "the port is not a valid number"
        if port is not None and port not in self.ports and port != _DEFAULT_PORTS.get(scheme):
            return f"port {port} is not allowed"
        return None


def _urls_in(text: str) -> Iterator[str]:
    """Every URL in free text, from its scheme to the first space, quote or angle
    bracket, without trailing punctuation.

    A URL that holds another one ("https://a.example/?next=https://b.example/") ends
    where the inner one's scheme starts: both are checked, and no character is part of
    two yielded URLs, so that a long run of URLs costs linear time. (What is cut off the
    outer URL is in the inner one; the outer's scheme and host come before the cut.)
    """
    pending: tuple[int, int] | None = None  # the span of the URL found last
    run_end = -1  # where the run of URL characters around the last colon ends
    for match in _URL_COLON.finditer(text):
        colon = match.start()
        scheme = _SCHEME_TAIL.search(text, max(0, colon - 64), colon)
        if scheme is None:
            continue  # "://" after no scheme at all: nothing a client would fetch
        if colon >= run_end:
            # every colon inside one run of URL characters has the same end: find it once
            rest = _URL_REST.match(text, colon)
            run_end = rest.end() if rest is not None else colon
        start = scheme.start()
        if pending is not None:
            yield text[pending[0] : min(pending[1], start)].rstrip(_TRAILING)
        pending = (start, run_end)
    if pending is not None:
        yield text[pending[0] : pending[1]].rstrip(_TRAILING)


def _normalize_pattern(host: str) -> str:
    normalized = _normalize_host(host)
    if normalized is None:
        raise ValueError(f"host pattern {host!r} is not a valid host name")
    return normalized


def _normalize_host(host: str) -> str | None:
    """The lower-case ASCII (punycode) form of ``host``, or None if it is invalid or
    ambiguous (changes under IDNA's mapping, which clients apply differently)."""
    host = _DOTS.sub(".", host.lower())
    if host.endswith("."):
        host = host[:-1]
    if ":" in host:  # an IPv6 literal: compared as written
        return host if re.fullmatch(r"[0-9a-f:.]+", host) else None
    if host.isascii():
        labels = host.split(".")
        ok = all(0 < len(label) <= 63 for label in labels)
        return host if ok else None
    try:
        encoded = host.encode("idna").decode("ascii")
        if encoded.encode("ascii").decode("idna") != host:
            return None
    except UnicodeError:
        return None
    return encoded
