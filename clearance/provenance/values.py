"""The values provenance tracks, found in text and JSON, each as one exact canonical key.

A value is a canonical fact (:mod:`clearance.facts`) or a literal string. Each is one key,
its kind first, so that two spellings of one value are one key and two different values
never are (the matching is exact, never fuzzy)::

    e:bob@example.com          an e-mail address (EmailFact: lower case)
    h:www.example.com          a host (canonical_host: lower-case ASCII, IPs normalized)
    u:www.example.com/a?q=1    a URL (UrlFact; http(s) and ws(s) without their scheme,
                               so http://x/a and https://x/a are one page; no fragment)
    i:GB29NWBK60161331926819   an IBAN-like account id (upper case, no spaces)
    n:100                      a number (100, 100.0 and 1,000 vs 1000: NumberFact's value)
    l:pizza party              a literal string (NFKC, case-folded, spaces collapsed)

Text is read after NFKC normalization with format characters (zero-width, bidi controls)
removed, so that ``evil.com`` in fullwidth letters and ``ev\\u200bil.com`` are ``evil.com``. URLs are found
with a scheme (``https://...``) or without one (``www.example.com/x``, ``example.com``: a
name whose last label is a known public suffix, or that starts ``www.`` whatever its suffix:
``www.pay.internal``); e-mail addresses, IBAN-like ids (two
letters, two digits, 10 to 30 letters or digits, optionally in groups of four) and numbers
(``1,250.50`` is 1250.5) anywhere in text.

*Inside values* are the identifying values found in an argument's text: hosts (of URLs and
bare names), e-mail addresses and IBAN-like ids. Numbers and words are not: they occur
everywhere and identify nothing.
"""

from __future__ import annotations

import datetime
import json
import re
import unicodedata
from collections.abc import Iterator
from decimal import Decimal, InvalidOperation
from typing import Any

from clearance.errors import FactError
from clearance.facts.web import EmailFact, UrlFact, known_suffix

__all__ = [
    "MIN_LITERAL",
    "clean_text",
    "date_keys",
    "field_values",
    "inside_values",
    "literal",
    "names_in",
    "number_key",
    "read_string",
    "text_keys",
    "values_in",
    "whole_keys",
]

MIN_LITERAL = 3
"""Literal strings shorter than this (after normalization) are not values."""
MAX_LITERAL = 512
"""Longer lines and string leaves of a result are not kept as literals (their values are)."""
MIN_TOKEN = 6
"""Identifier-like words (with a digit or one of ``/ _ . - @``) of at least this length are
kept as literals of a result."""

_EMAIL = EmailFact()
_URL = UrlFact()
_WEB_SCHEMES = frozenset({"http", "https", "ws", "wss"})

_FORMAT = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f"
    "\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0]"
)
_SPACES = re.compile(r"\s+")
_TRAILING = ".,;:!?)]}>'\"*"

_SCHEME_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]{0,20}://[^\s<>\"'`]+")
_LABEL = r"[^\W_](?:[\w\-]{0,61}[^\W_])?"
_TOP = r"(?=[\w\-]*[^\W\d_])[^\W_](?:[\w\-]{0,61}[^\W_])?"  # a last label has a letter
_BARE = re.compile(
    rf"(?<![\w@.\-/:%+])(?:(?:{_LABEL}\.)+{_TOP}|[0-9]{{1,3}}(?:\.[0-9]{{1,3}}){{3}})"
    r"(?![\w\-])(?::[0-9]{1,5})?(?:[/?][^\s<>\"'`]*)?"
)
# The first character of an address is no quote: 'a@b.com' in text is a@b.com.
_EMAIL_TEXT = re.compile(rf"(?<![\w.+\-%'])[\w.+\-%][\w.+\-%']*@(?:{_LABEL}\.)+{_LABEL}")
_IBAN = re.compile(
    r"(?<![^\W_])[A-Za-z]{2}[0-9]{2}"
    r"(?:[A-Za-z0-9]{10,30}|(?: [A-Za-z0-9]{4}){2,7}(?: [A-Za-z0-9]{1,3})?)(?![^\W_])"
)
_NUMBER = re.compile(
    r"(?<![\w.,])(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]{1,20})(?:\.[0-9]{1,12})?(?![\w])"
)
_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sept", "sep"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        1,
    )
    for name in names
}
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_WORD_DATE = re.compile(
    rf"(?i)\b(?:({_MONTH})\.?\s+([0-9]{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+([0-9]{{4}})\b)?"
    rf"|([0-9]{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH})\b\.?(?:,?\s+([0-9]{{4}})\b)?)"
)
_ISO_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})(?:[T ][0-9:.]+Z?)?")
_TOKEN_CHARS = frozenset("0123456789/_.@-")
_DIGIT = re.compile(r"[0-9]").search
_WORD = re.compile(r"[^\W\d_]+").fullmatch
_MARKS = re.compile(r"[@./:]").search
_SPACE = re.compile(r"\s").search
_IBAN_TOKEN = re.compile(r"[A-Za-z]{2}[0-9]{2}[A-Za-z0-9]{10,30}")
_HYPHEN_IBAN = re.compile(r"[A-Za-z]{2}[0-9]{2}(?:-[A-Za-z0-9]{1,4}){3,8}")
"""An IBAN-like id written in groups joined by hyphens (``GB33-BUKB-2020-1555-5555-55``)."""
_MARKUP = re.compile(r"[|<>]|\]\(").search
_MARKUP_SPLIT = re.compile(r"[|<>\[\]()]+")
_CURRENCY = "$€£¥"
_QUOTED = re.compile(
    r"(?<!\w)(['\"`\u2018\u201c])([^'\"`\u2018\u2019\u201c\u201d\n]{1,200}?)['\"`\u2019\u201d](?!\w)"
)
_ENCLOSING = "\"'()[]{}<>`*\u2018\u2019\u201c\u201d"
_VALUE_MARKS = frozenset("0123456789/_.@-:#!$%&*+=?")


def clean_text(text: str) -> str:
    """``text`` as values are found in it: NFKC, without format characters."""
    if not text.isascii():
        text = unicodedata.normalize("NFKC", _FORMAT.sub("", text))
    return text


def literal(text: str) -> str:
    """The literal form of a string: NFKC, case-folded, whitespace runs as one space."""
    text = clean_text(text).casefold()
    if " " in text or "\n" in text or "\t" in text or not text.isprintable():
        # One space between words, none around (isprintable: other whitespace).
        if "  " in text or not text.isprintable() or text[:1] == " " or text[-1:] == " ":
            text = " ".join(text.split())
    return text


def number_key(value: int | float | Decimal) -> str | None:
    """The key of a number (``n:100`` for 100, 100.0 and Decimal("100.00")); None when it
    is not finite."""
    if isinstance(value, bool):
        return None
    if isinstance(value, Decimal):
        if not value.is_finite():
            return None
        if value == value.to_integral_value():
            return f"n:{int(value)}"
        return f"n:{float(value)!r}"
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return None
        if value.is_integer():
            return f"n:{int(value)}"
        return f"n:{value!r}"
    return f"n:{value}"


def _url_keys(url: str, *, bare: bool, any_suffix: bool = False) -> tuple[str, ...]:
    """The keys of one URL (``u:`` and its ``h:``); () when it is not a URL. A bare name
    is one when its suffix is a public one, or (``any_suffix``) when it starts ``www.``."""
    text = url.rstrip(_TRAILING)
    if bare:
        text = "https://" + text
    try:
        canon = _URL.canonicalize(text)
    except FactError:
        return ()
    fact = canon.fact
    host = fact["host"]
    if not host:
        return (f"u:{canon.value}",)
    if bare and not known_suffix(host) and not (any_suffix and host.startswith("www.")):
        return ()
    if fact["scheme"] in _WEB_SCHEMES:
        key = str(canon.value).split("://", 1)[1].split("#", 1)[0]
    else:
        key = str(canon.value).split("#", 1)[0]
    return (f"u:{key}", f"h:{host}")


def _iban(text: str) -> str | None:
    """The key of an IBAN-like id, or None. The spaced form is groups of four (the last
    may be shorter) after a first group of four; a group of letters only counts when a
    group with a digit follows it (``GB29 NWBK 6016...``), so ``DE89 3704 0044 0532 0130
    00 with`` stops before ``with``."""
    if " " not in text:
        if not 14 <= len(text) <= 34 or not text.isascii():
            return None
        return f"i:{text.upper()}"
    groups = text.split(" ")
    kept = [groups[0]]
    if len(groups[0]) == 4:
        for k, group in enumerate(groups[1:], 1):
            if not any(c.isdigit() for c in group) and not (
                len(group) == 4 and k + 1 < len(groups) and any(c.isdigit() for c in groups[k + 1])
            ):
                break
            kept.append(group)
            if len(group) < 4:
                break
    compact = "".join(kept)
    if not 14 <= len(compact) <= 34 or not compact.isascii():
        return None
    return f"i:{compact.upper()}"


def _iban_prefixes(text: str) -> Iterator[str]:
    """Every key a run of IBAN-like groups may stand for, group by group (``DE89 3704 0044
    0532 0130 00 with`` may be ``...3000`` or ``...3000WITH``): text a ledger records is
    indexed under each, so that the id is found whatever words follow it."""
    groups = text.split(" ")
    compact = groups[0]
    if 14 <= len(compact) <= 34 and compact.isascii():
        yield f"i:{compact.upper()}"
    if len(compact) != 4:
        return
    for group in groups[1:]:
        compact += group
        if 14 <= len(compact) <= 34 and compact.isascii():
            yield f"i:{compact.upper()}"
        if len(group) < 4:
            return


def _number_text(text: str) -> str | None:
    try:
        return number_key(Decimal(text.replace(",", "")))
    except InvalidOperation:  # pragma: no cover - the pattern only finds numbers
        return None


def _date_key(year: str | None, month: int, day: str) -> str | None:
    """``d:2024-05-01`` (or ``d:--05-01`` without a year) for a real date, else None."""
    try:
        datetime.date(int(year) if year else 2000, month, int(day))  # 2000: a leap year
    except ValueError:
        return None
    return f"d:{year}-{month:02d}-{int(day):02d}" if year else f"d:--{month:02d}-{int(day):02d}"


def date_keys(text: str) -> Iterator[str]:
    """The dates written in words in ``text`` (``May 1st, 2024``, ``1st of May 2024``,
    ``14th of November``): ``d:2024-05-01``, or ``d:--11-14`` without a year. Found
    around each word that names a month (a pattern over the whole text is several times
    slower than this walk)."""
    words = text.split()
    for index, word in enumerate(words):
        if len(word) > 10 or not word[:1].isalpha():
            continue
        if word.rstrip(".,;:").lower() not in _MONTHS:
            continue
        start = max(0, index - 2)
        before = " ".join(words[start:index])
        at = len(before) + 1 if before else 0  # where this month's word starts
        window = " ".join(words[start : index + 3])
        for match in _WORD_DATE.finditer(window):
            if not match.start() <= at < match.end():
                continue  # another month's date, read around its own word
            month_a, day_a, year_a, day_b, month_b, year_b = match.groups()
            month = _MONTHS[(month_a or month_b).lower()]
            key = _date_key(year_a or year_b, month, day_a or day_b)
            if key is not None:
                yield key


def _whole_date(text: str) -> tuple[str, ...]:
    """The keys of a string that is one date (``2024-05-01``, ``2024-05-01 09:00``,
    ``May 1st, 2024``): the date and its month-day, so that a day the user named without
    a year matches it."""
    match = _ISO_DATE.fullmatch(text)
    if match is not None:
        key = _date_key(match.group(1), int(match.group(2)), match.group(3))
    else:
        words = _WORD_DATE.fullmatch(text)
        if words is None:
            return ()
        month_a, day_a, year_a, day_b, month_b, year_b = words.groups()
        key = _date_key(year_a or year_b, _MONTHS[(month_a or month_b).lower()], day_a or day_b)
    if key is None:
        return ()
    return (key, "d:--" + key[-5:]) if not key.startswith("d:--") else (key,)


_STRIP = "\"'()[]{}<>,;!?*`|"
_PARTS = re.compile(r"[/?=&#]+")
_CACHE_LIMIT = 8192
_token_cache: dict[str, tuple[tuple[str, str], ...]] = {}


def _token_values(token: str) -> tuple[tuple[str, str], ...]:
    """The canonical facts in one whitespace-free token, as ``(shown, key)``; memoized
    (tokens repeat: field names, amounts, hosts), the memo bounded."""
    found = _token_cache.get(token)
    if found is None:
        found = tuple(_classify(token))
        if len(_token_cache) >= _CACHE_LIMIT:
            _token_cache.clear()
        _token_cache[token] = found
    return found


def _classify(token: str) -> Iterator[tuple[str, str]]:
    # Quotes, brackets and a sentence's punctuation around a value, in any order
    # ("www.x.com).", "'a@b.com'.") are not part of it.
    text = token.strip(_STRIP + ".:")
    if len(text) < 1:
        return
    if _MARKUP(text) is not None:
        # A link in markup shows its text and hides its target: Slack's
        # <https://host|text>, Markdown's [text](host/path). Each part is read.
        for part in _MARKUP_SPLIT.split(text):
            if part:
                yield from _token_values(part)
        return
    if "-" in text and _HYPHEN_IBAN.fullmatch(text):
        compact = text.replace("-", "")
        if 14 <= len(compact) <= 34:
            yield compact.upper(), f"i:{compact.upper()}"
            return
    if "://" in text:
        match = _SCHEME_URL.search(text)
        if match is None:
            return
        keys = _url_keys(match.group(0), bare=False)
        for key in keys:
            yield key[2:], key
        # A host named in the URL's path or query (?next=evil.com) is a host it names.
        rest = match.group(0).split("://", 1)[1]
        for part in _PARTS.split(rest)[1:]:
            if "." in part and _BARE.fullmatch(part):
                for key in _url_keys(part, bare=True):
                    if key[0] == "h":
                        yield key[2:], key
        return
    if "@" in text:
        match = _EMAIL_TEXT.search(text)
        if match is not None:
            try:
                address = _EMAIL.canonicalize(match.group(0)).value
            except FactError:
                return
            yield address, "e:" + address
        return
    if _IBAN_TOKEN.fullmatch(text):
        key = f"i:{text.upper()}"
        yield key[2:], key
        return
    if ":" in text:
        parts = [part for part in text.split(":") if part]
        if all(part.isdigit() for part in parts):
            return  # a time (12:00): no number she gave, no id
        for part in parts:
            yield from _token_values(part)
        return
    if ("." in text or "/" in text) and _BARE.fullmatch(text):
        keys = _url_keys(text, bare=True)
        if not keys and "/" not in text and "." in text:
            # A sentence's dot with no space after it ("www.x.com.They"): the name up
            # to the label no suffix list knows, when that is a host.
            head, _, last = text.rpartition(".")
            if last.isalpha() and "." in head:
                keys = _url_keys(head, bare=True)
        if not keys and text[:4].lower() == "www.":
            # A name that says it is a web host is a link whatever its suffix
            # (``www.pay.internal``, ``www.x.example``: suffixes no public list knows).
            keys = _url_keys(text, bare=True, any_suffix=True)
        if keys:
            for key in keys:
                yield key[2:], key
            return
    if _DIGIT(text) is not None:
        if len(text) >= 10 and text[4] == "-":
            iso = _ISO_DATE.fullmatch(text)
            if iso is not None:
                date = _date_key(iso.group(1), int(iso.group(2)), iso.group(3))
                if date is not None:
                    yield date[2:], date
        # A number is the whole token as written (a currency sign or a percent aside):
        # not the digits of a date, a time's minutes or an id ("15" is not in 2024-05-15).
        core = text.lstrip(_CURRENCY).rstrip("%")
        if _NUMBER.fullmatch(core):
            number = _number_text(core)
            if number is not None:
                yield number[2:], number


def _spaced_iban(tokens: list[str], index: int) -> tuple[list[str], int]:
    """The groups of a spaced IBAN-like id starting at ``tokens[index]`` (a two-letter,
    two-digit group) and the index after them; ``[]`` when there is none."""
    groups = [tokens[index]]
    j = index + 1
    while j < len(tokens) and len(groups) < 9:
        raw = tokens[j]
        group = raw.rstrip(".,;:)")
        if not group or len(group) > 4 or not group.isascii() or not group.isalnum():
            break
        groups.append(group)
        j += 1
        if len(group) < 4 or group != raw:
            break
    if len(groups) < 4 or sum(map(len, groups)) < 14:
        return [], index
    return groups, j


def _is_country_group(token: str) -> bool:
    return len(token) == 4 and token.isascii() and token[:2].isalpha() and token[2:].isdigit()


def _scan(text: str, *, inside: bool) -> Iterator[tuple[str, str]]:
    """Every canonical fact in ``text`` (already :func:`clean_text`) as ``(shown, key)``.
    A spaced IBAN-like id gives every group-prefix (a ledger records all a run may stand
    for) or, for ``inside`` values, the one :func:`_iban` reads; ``inside`` also skips
    what cannot hold a host, an address or an id (numbers, words)."""
    tokens = text.split()
    cache = _token_cache
    skip_to = 0
    for index, token in enumerate(tokens):
        if index < skip_to:
            continue
        if len(token) == 4 and _is_country_group(token):
            groups, after = _spaced_iban(tokens, index)
            if groups:
                if not inside:
                    for key in _iban_prefixes(" ".join(groups)):
                        yield key[2:], key
                else:
                    read = _iban(" ".join(groups))
                    if read is not None:
                        yield read[2:], read
                skip_to = after
                continue
        if inside and len(token) < 14 and _MARKS(token) is None:
            continue  # no '@', '.', '/' or ':', and too short for an id
        found = cache.get(token)
        if found is None:
            if token.isalpha():
                continue
            found = _token_values(token)
        if found:
            yield from found


def text_keys(text: str) -> Iterator[str]:
    """Every canonical fact found in ``text`` (already :func:`clean_text`), as keys."""
    for _, key in _scan(text, inside=False):
        yield key
    yield from date_keys(text)


def literal_keys(text: str) -> Iterator[str]:
    """The literals of a result's text: the whole text, each line, the value part of each
    ``name: value`` line, and identifier-like words, as ``l:`` keys."""
    whole = literal(text)
    if MIN_LITERAL <= len(whole) <= MAX_LITERAL:
        yield "l:" + whole
    if "\n" in text or "\r" in text:
        for raw in text.splitlines():
            line = literal(raw)
            if line.startswith("- "):
                line = line[2:]
            if MIN_LITERAL <= len(line) <= MAX_LITERAL:
                yield "l:" + line
                _, sep, value = line.partition(": ")
                if sep:
                    value = value.strip().rstrip(",").strip("'\"")
                    if MIN_LITERAL <= len(value):
                        yield "l:" + value
    if "'" in text or '"' in text or "`" in text or "\u2018" in text or "\u201c" in text:
        # A quoted span is a value as written ("Post 'Secret key is 1a7b3d.' to..."):
        # copied whole out of the middle of prose, it is still the result's.
        for match in _QUOTED.finditer(text):
            quoted = literal(match.group(2))
            if MIN_LITERAL <= len(quoted) <= MAX_LITERAL:
                yield "l:" + quoted
    if len(whole) >= MIN_TOKEN:
        for word in whole.split(" "):
            if len(word) >= MIN_TOKEN and not word.isalpha():
                word = word.strip(_TRAILING + "([{<")
                if len(word) >= MIN_TOKEN and not _TOKEN_CHARS.isdisjoint(word):
                    yield "l:" + word


def whole_keys(value: str) -> tuple[str, ...]:
    """The canonical fact keys of a string that IS one value as a whole (an argument
    ``"Bob@Example.com"``, ``"www.example.com"``, ``"GB29 NWBK 6016 1331 9268 19"``,
    ``"100.00"``); () when it is none."""
    text = clean_text(value).strip()
    if not text or len(text) > 16_384:
        return ()
    digits = _DIGIT(text) is not None
    if digits and " " not in text and _IBAN_TOKEN.fullmatch(text):
        return (f"i:{text.upper()}",)
    if digits and "-" in text and _HYPHEN_IBAN.fullmatch(text):
        compact = text.replace("-", "")
        if 14 <= len(compact) <= 34:
            return (f"i:{compact.upper()}",)
    if "." in text or "/" in text or ":" in text:
        if "://" in text:
            if _SCHEME_URL.fullmatch(text):
                keys = _url_keys(text, bare=False)
                return keys if _bare_host(text, keys) else keys[:1]
        elif _BARE.fullmatch(text) is not None:
            keys = _url_keys(text, bare=True)
            if keys:
                return keys if _bare_host(text, keys) else keys[:1]
    if "@" in text:
        if _EMAIL_TEXT.fullmatch(text):
            try:
                return ("e:" + _EMAIL.canonicalize(text).value,)
            except FactError:
                return ()
        return ()
    if not digits:
        return ()
    if len(text) >= 8:
        dates = _whole_date(text)
        if dates:
            return dates
    if _IBAN.fullmatch(text):
        key = _iban(text)
        return (key,) if key is not None and len(key) - 2 == len(text.replace(" ", "")) else ()
    if _NUMBER.fullmatch(text):
        key = _number_text(text)
        return (key,) if key is not None else ()
    return ()


def _bare_host(text: str, keys: tuple[str, ...]) -> bool:
    """Whether a URL names only its host (nothing after it but ``/``): then the URL and the
    host are one value, and its ``h:`` key counts for the whole string too."""
    return len(keys) == 2 and keys[0][2:] == keys[1][2:] + "/"


def inside_values(text: str) -> Iterator[tuple[str, str]]:
    """The identifying values inside ``text`` (already :func:`clean_text`): ``(shown, key)``
    for each host (of a URL or a bare name), e-mail address and IBAN-like id."""
    for shown, key in _scan(text, inside=True):
        if key[0] in "hei":
            yield shown, key


def json_strings_and_numbers(value: Any, limit: int) -> tuple[list[str], list[str], bool]:
    """The string leaves and number keys of a JSON value, reading at most ``limit``
    characters of strings; whether everything was read."""
    strings: list[str] = []
    numbers: list[str] = []
    stack = [value]
    budget = limit
    complete = True
    while stack:
        item = stack.pop()
        if type(item) is str:
            if len(item) > budget:
                strings.append(item[:budget])
                complete = False
                break
            budget -= len(item)
            strings.append(item)
        elif isinstance(item, dict):
            # Keys are text the model reads too ({"john@x.com": "rw"}).
            stack.extend(item.values())
            stack.extend(k for k in item if isinstance(k, str))
        elif isinstance(item, list | tuple):
            stack.extend(item)
        elif isinstance(item, int | float | Decimal) and not isinstance(item, bool):
            key = number_key(item)
            if key is not None:
                numbers.append(key)
        elif isinstance(item, str):
            stack.append(str(item))
    return strings, numbers, complete


_reading_cache: dict[str, tuple[str, tuple[str, ...], tuple[tuple[str, str], ...]]] = {}


def read_string(value: str) -> tuple[str, tuple[str, ...], tuple[tuple[str, str], ...]]:
    """What an argument string is as values: its literal (``l:`` key without the
    prefix), its whole-value keys (:func:`whole_keys`) and the identifying values inside
    it (:func:`inside_values`). Memoized per string (an argument often repeats), bounded."""
    found = _reading_cache.get(value)
    if found is None:
        cleaned = value if value.isascii() else clean_text(value)
        if _WORD(cleaned):  # one plain word: no fact in it, whole or inside
            found = (cleaned.casefold(), (), ())
        elif _SPACE(cleaned) is None:  # one token (an id, an address, a URL, a number)
            inside: tuple[tuple[str, str], ...] = ()
            if len(cleaned) >= 14 or _MARKS(cleaned) is not None:
                inside = tuple(v for v in _token_values(cleaned) if v[1][0] in "hei")
            found = (cleaned.casefold(), whole_keys(cleaned), inside)
        else:
            found = (literal(cleaned), whole_keys(cleaned), tuple(inside_values(cleaned)))
        if len(value) <= 4096:
            if len(_reading_cache) >= 1024:
                _reading_cache.clear()
            _reading_cache[value] = found
    return found


def field_values(value: Any, field: str, limit: int) -> tuple[list[str], list[str]]:
    """The strings and number keys a structured result holds under ``field``: the value
    of the key ``field`` of the result object, or of each object of a result list (at
    most ``limit`` characters of strings). Nothing deeper, and never a line of text: a
    value an attacker writes (a subject, a note) can hold ``recipient: ...`` or a nested
    object, but not a key of the result's own records."""
    records = [value] if isinstance(value, dict) else value if isinstance(value, list) else []
    # The harness records a result as [its text, its structured content]: a structured
    # list of records is one level down.
    records = [r for item in records for r in (item if isinstance(item, list) else [item])]
    strings: list[str] = []
    numbers: list[str] = []
    budget = limit
    for record in records:
        if isinstance(record, dict) and field in record and budget > 0:
            found, found_numbers, _ = json_strings_and_numbers(record[field], budget)
            strings.extend(found)
            numbers.extend(found_numbers)
            budget -= sum(map(len, found))
    return strings, numbers


_NAME_WORD = re.compile(r"[^\W\d_]+(?:['\u2019-][^\W\d_]+)*").fullmatch
_OPENING = "\"'([{<"
_CLOSING_MARKS = ".,;:!?\"')]}>*"
_SENTENCE_ENDS = frozenset(".!?:;")


def names_in(text: str) -> list[str]:
    """The names a text gives: each word of letters written with a capital where a
    sentence does not put one (not its first word, nor the first after a word ending in
    ``. ! ? : ;`` or after a line break), and each run of such words (``Dora Smith``).
    "The" opening a sentence is no name; "Dora" in "invite Dora to Slack" is; a token
    with a digit, an ``@`` or a dot inside (an id, an address, a host) is no word. Case is
    how a writer marks a proper noun; it is not proof of one ("Slack" is a name here
    too)."""
    names: list[str] = []

    def end_run(run: list[str]) -> None:
        if len(run) > 1:
            names.append(" ".join(run))

    for line in text.splitlines():
        opens = True  # a line's first word opens a sentence
        run: list[str] = []
        joins = False  # the last token was a bare name: a name next to it extends it
        for token in line.split():
            word = token.lstrip(_OPENING).rstrip(_CLOSING_MARKS)
            bare = word == token
            if word[-2:] in ("'s", "\u2019s"):  # a possessive: the name is before it
                word, bare = word[:-2], False
            named = not opens and bool(word) and word[0].isupper() and _NAME_WORD(word) is not None
            if named:
                if not (run and joins and token[:1] not in _OPENING):
                    end_run(run)
                    run = []
                run.append(word)
                names.append(word)
            else:
                end_run(run)
                run = []
            joins = named and bare
            opens = token.rstrip("\"')]}>*")[-1:] in _SENTENCE_ENDS
        end_run(run)
    return names


def values_in(text: str) -> list[str]:
    """The values a text gives as written: each quoted span (``'1j1l-2k3j'``, ``"Pizza
    party"``) and each token that is no plain word (it holds a digit or a mark: an id, a
    code, a password such as ``Summer2024!``), without the quotes, brackets and sentence
    punctuation around it. A common word of a sentence ("password", "update") is none: a
    value she gave is one she wrote as a value."""
    found = [m.group(2).strip() for m in _QUOTED.finditer(text)]
    for token in text.split():
        word = token.strip(_ENCLOSING).rstrip(".,;:").strip(_ENCLOSING)
        bare = word.rstrip(_TRAILING)  # without a sentence's "?" or "!" after it
        if bare and not _VALUE_MARKS.isdisjoint(bare) and not _NUMBER.fullmatch(bare):
            found.append(word)  # as written: "Summer2024!" keeps its mark
            found.append(bare)
    return list(dict.fromkeys(v for v in found if v))


def pointed_candidates(value: Any) -> tuple[list[dict[str, Any]], list[Any]]:
    """A result's records (the result object, or the objects of a result list, one level
    down in the harness's ``[text, structured content]``) and the rest of it. A text that
    is the JSON of a structured part (the harness's rendering of a handler's JSON value) is
    that part again, not more."""
    items = value if isinstance(value, list) else [value]
    parts: list[Any] = []
    for item in items:
        parts.extend(item if isinstance(item, list) else [item])
    structured = [item for item in items if not isinstance(item, str)]
    records: list[dict[str, Any]] = []
    rest: list[Any] = []
    for part in parts:
        if isinstance(part, dict):
            records.append(part)
        elif isinstance(part, str) and structured and _renders(part, structured):
            continue
        else:
            rest.append(part)
    return records, rest


def _renders(text: str, structured: list[Any]) -> bool:
    try:
        parsed = json.loads(text)
    except ValueError:
        return False
    return any(parsed == part for part in structured)
