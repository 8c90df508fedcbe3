"""Look-alike text: a value that reads as one thing and is another.

A person approving a call reads its deciding values (a recipient, a URL, a path). A value
that mixes letters of scripts that share shapes (``ceo@corp.example.com`` whose ``a`` is
Cyrillic U+0430), that is spelled with compatibility letters (fullwidth or mathematical
bold Latin), or whose punycode host decodes to such a mix (``xn--exmple-4nf.com``), reads
as a familiar name and is not it. :func:`lookalike` finds such values and gives the note
every approval surface shows beside them: which scripts are mixed and the value's
canonical form (hosts in IDNA ASCII, every other non-ASCII character as a ``\\uXXXX``
escape), so that the difference can be seen.

Marked:

- a word (a run of letters and digits) mixing letters of two or more of the scripts whose
  letters look like each other (:data:`CONFUSABLE_SCRIPTS`: Latin, Cyrillic, Greek,
  Armenian, Cherokee...), as written or with its punycode labels decoded;
- a word written wholly in look-alikes of Latin letters from another script
  (:data:`LATIN_LOOKALIKES`: "apple" in Cyrillic letters) in a value with Latin letters
  elsewhere (its ``.com``), as browsers refuse to show such a host in Unicode;
- a letter or digit whose compatibility form (NFKC) is a different ASCII character.

Not marked: a value in one script (a Russian or a Japanese name), a value whose words each
keep to one script (a Cyrillic domain under a Cyrillic top-level domain, behind a Latin
``https``: its words have letters no Latin one looks like), or scripts that share no
shapes (Japanese kana with Han). The tests (``tests/test_lookalike.py``) hold examples of
each.
"""

from __future__ import annotations

import codecs
import re
import unicodedata
from dataclasses import dataclass

__all__ = ["CONFUSABLE_SCRIPTS", "Lookalike", "lookalike"]

CONFUSABLE_SCRIPTS = frozenset(
    {"LATIN", "CYRILLIC", "GREEK", "ARMENIAN", "CHEROKEE", "COPTIC", "GEORGIAN", "LISU"}
)
"""Scripts with letters shaped like letters of another script in this set."""

LATIN_LOOKALIKES = frozenset(
    "\u0430\u0435\u043e\u0440\u0441\u0443\u0445\u0455\u0456\u0458\u0501\u051b"  # Cyrillic
    "\u051d\u04bb\u04cf\u050d\u044c\u0432\u043a\u043c\u043d\u0442\u0410\u0412"
    "\u0415\u041a\u041c\u041d\u041e\u0420\u0421\u0422\u0425\u0405\u0406\u0408"
    "\u03bf\u03b9\u03bd\u03c1\u03ba\u03b1\u03c5\u03c4\u0391\u0392\u0395\u0396"  # Greek
    "\u0397\u0399\u039a\u039c\u039d\u039f\u03a1\u03a4\u03a5\u03a7"
    "\u0585\u057d\u0570\u0578\u0581\u0566"  # Armenian
)
"""Letters of other scripts that look like a Latin letter (after Chrome's IDN policy)."""

_WORD = re.compile(r"[^\W_]+")
_PUNYCODE = re.compile(r"(?i)(?<![\w-])xn--[a-z0-9-]+")
_HOST = r"[^\s@/:?#\[\]\"'<>\\]+\.[^\s@/:?#\[\]\"'<>\\]+"
_WHERE_HOSTS_ARE = re.compile(
    rf"(?P<email>^[^@\s]+@)(?P<ehost>{_HOST})$"  # an address: its domain
    rf"|(?P<url>^[A-Za-z][A-Za-z0-9+.-]*://(?:[^@/?#]*@)?)(?P<uhost>{_HOST})"  # a URL's host
    rf"|^(?P<bare>{_HOST})$"  # a host alone
)
_SCRIPT_NAMES = {"MATHEMATICAL": None, "FULLWIDTH": None, "CIRCLED": None}


@dataclass(frozen=True, slots=True)
class Lookalike:
    """Why a value may read as something it is not."""

    scripts: tuple[str, ...]
    """The scripts whose letters the value mixes (title case, sorted), or ``()``."""
    compatibility: bool
    """Whether it is spelled with compatibility letters (fullwidth, mathematical...)."""
    canonical: str
    """The value with hosts in IDNA ASCII and other non-ASCII characters escaped."""
    decoded: str | None = None
    """For a value with punycode labels: them decoded, non-ASCII characters escaped."""

    @property
    def note(self) -> str:
        """One line for a person: what is mixed, and the canonical form."""
        what = []
        if self.scripts:
            what.append("mixes " + " and ".join(self.scripts) + " letters")
        if self.compatibility:
            what.append("uses look-alike compatibility letters")
        note = f"look-alike: {' and '.join(what)}; canonical form {self.canonical}"
        if self.decoded is not None:
            note += f" (its punycode reads {self.decoded})"
        return note


def _script(ch: str) -> str | None:
    name = unicodedata.name(ch, "")
    if not name:
        return None
    word = name.split(" ", 1)[0]
    if word in _SCRIPT_NAMES:
        return None  # a compatibility letter: see _compatibility
    return word


def _scripts(word: str) -> set[str]:
    """The confusable scripts of the letters of ``word``."""
    found = set()
    for ch in word:
        if ch.isalpha():
            script = _script(ch)
            if script in CONFUSABLE_SCRIPTS:
                found.add(script)
    return found


def _decoded(text: str) -> str:
    """``text`` with each punycode label decoded (left as it is when it is not valid)."""

    def decode(match: re.Match[str]) -> str:
        label = match.group(0)
        try:
            return codecs.decode(label[4:].encode("ascii"), "punycode")
        except (UnicodeError, ValueError):
            return label

    return _PUNYCODE.sub(decode, text)


def _compatibility(text: str) -> bool:
    for ch in text:
        if ch.isascii() or not ch.isalnum():
            continue
        folded = unicodedata.normalize("NFKC", ch)
        if folded != ch and folded.isascii():
            return True
    return False


def _ascii_host(host: str) -> str | None:
    labels = []
    for label in host.split("."):
        if label.isascii():
            labels.append(label)
            continue
        try:
            labels.append(label.encode("idna").decode("ascii"))
        except UnicodeError:
            return None
    return ".".join(labels)


def _canonical(text: str) -> str:
    """``text`` with its host (an address's domain, a URL's host, or the value itself when
    it is a host) in IDNA ASCII, and every other non-ASCII character escaped."""
    match = _WHERE_HOSTS_ARE.match(text)
    if match is not None:
        name = next(g for g in ("ehost", "uhost", "bare") if match.group(g) is not None)
        start, end = match.span(name)
        host = _ascii_host(text[start:end])
        if host is not None:
            text = text[:start] + host + text[end:]
    return _escaped(text)


def _escaped(text: str) -> str:
    return "".join(ch if ch.isascii() else _escape(ch) for ch in text)


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def lookalike(text: str) -> Lookalike | None:
    """Why ``text`` may read as something it is not (see the module docstring), or None.

    Args:
        text: a value a person is about to approve.
    """
    if text.isascii() and "xn--" not in text.lower():
        return None  # the common case: plain ASCII, no punycode
    compatibility = _compatibility(text)
    decoded = _decoded(text)
    words = [_scripts(word) for word in _WORD.findall(decoded)]
    mixed: set[str] = set()
    for word, scripts in zip(_WORD.findall(decoded), words, strict=True):
        if len(scripts) >= 2:
            mixed |= scripts
        elif scripts and scripts != {"LATIN"} and set(word) <= LATIN_LOOKALIKES:
            if any("LATIN" in other for other in words):
                mixed |= scripts | {"LATIN"}
    if not (mixed or compatibility):
        return None
    return Lookalike(
        scripts=tuple(sorted(s.title() for s in mixed)),
        compatibility=compatibility,
        canonical=_canonical(text),
        decoded=_escaped(decoded) if decoded != text else None,
    )
