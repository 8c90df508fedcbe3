"""Globs that match in time linear in the value's length, whatever the glob.

The local evaluator's rules (``files.*(path=src/**/*.py)``) are globs; a value is an
argument the model wrote, so it may be long and built to make a matcher work hard.
``*BEGIN*PRIVATE*KEY*`` compiled to a backtracking regex took 5 s on a 19 KB argument.
:class:`Glob` picks, per glob, an engine that cannot do that:

- no wildcard: string equality;
- a shape whose backtracking is provably linear (one ``*``/``**``, or the two-run shapes
  of :func:`_linear_in_re` such as ``src/**/*.py``): Python's ``re``, the fastest on short
  values;
- anything else: RE2 (``google-re2``), an automaton that reads each character once.

Syntax (path-aware, as documented in :mod:`clearance.policy.local`): ``*`` and ``?`` do not
cross ``/``, ``**`` does, ``**/`` also matches no directory at all, ``[abc]``, ``[a-z]``,
``[!abc]`` (or ``[^abc]``) are classes, every other character is literal. With
``path_aware=False`` (tool names), ``*`` and ``?`` match any character. Both engines get the
same regex: members of classes and literals are written as ``\\xHH`` escapes that Python
and RE2 read alike, so a glob means the same thing whichever engine runs it (a property
test checks it against the original translation).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import re2  # type: ignore[import-untyped]

__all__ = ["Glob"]

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.dot_nl = True  # '.' in '**' crosses newlines, as re.DOTALL does
_RE2_OPTIONS.log_errors = False  # a bad glob is reported as a RuleError, not on stderr


class Glob:
    """A compiled glob that matches whole values in time linear in their length.

    A glob without wildcards is compared as a string. Other globs compile to a regex, run
    by Python's ``re`` when its backtracking is provably linear (see :func:`_linear_in_re`)
    and by RE2 otherwise: RE2 is an automaton that reads each character once, whatever the
    pattern. RE2 reads UTF-8; values are encoded with ``surrogatepass`` so that a lone
    surrogate is one character there too. Before RE2 runs, the glob's literal parts are
    looked for with ``str`` methods (a value that lacks one cannot match), so most values a
    rule does not match are turned away at the cost of a substring search.
    """

    __slots__ = ("_head", "_middle", "_re2", "_tail", "fullmatch", "text")

    def __init__(self, text: str, *, path_aware: bool = True) -> None:
        self.text = text
        tokens = _tokens(text, path_aware=path_aware)
        parts = _literal_parts(tokens)
        self._head = parts[0] or ""
        self._tail = parts[-1] or ""
        self._middle = tuple(p for p in parts[1:-1] if p)
        self._re2: Any = None
        # Whether the glob matches all of a value (truthy or falsy). The fast paths are
        # bound straight to C methods: no Python frame per match.
        self.fullmatch: Callable[[str], object]
        if parts == [text]:
            self.fullmatch = text.__eq__
        elif _linear_in_re(tokens):
            self.fullmatch = re.compile("".join(p for _, p in tokens), re.DOTALL).fullmatch
        else:
            regex = "".join(p for _, p in tokens).encode("utf-8", "surrogatepass")
            try:
                self._re2 = re2.compile(regex, _RE2_OPTIONS)
            except re2.error as exc:
                raise ValueError(f"too complex to match ({exc})") from None
            self.fullmatch = self._re2_fullmatch

    def _re2_fullmatch(self, value: str) -> bool:
        head, tail = self._head, self._tail
        if (
            not value.startswith(head)
            or not value.endswith(tail)
            or len(value) < len(head) + len(tail)
        ):
            return False
        for part in self._middle:
            if part not in value:
                return False
        return self._re2.fullmatch(value.encode("utf-8", "surrogatepass")) is not None


# Token kinds: a literal character ("/" kept apart), a one-character wildcard or class, and
# the variable-width runs: "segment" ([^/]*), "any" (.*) and "dirs" ((?:.*/)?, from '**/').
_RUNS = frozenset({"segment", "any", "dirs"})


def _tokens(glob: str, *, path_aware: bool) -> list[tuple[str, str]]:
    """``glob`` as ``(kind, regex piece)`` tokens (see ``_RUNS``).

    Raises:
        ValueError: an unclosed ``[``, an empty class, a reversed range or a stray ``]``.
    """
    star, one = (("segment", "[^/]*"), "[^/]") if path_aware else (("any", ".*"), ".")
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(glob):
        c = glob[i]
        if c == "*":
            if path_aware and glob.startswith("**/", i):
                out.append(("dirs", "(?:.*/)?"))  # '**/' also matches no directory: '**/.env'
                i += 3
                continue
            if glob.startswith("**", i):
                out.append(("any", ".*"))
                i += 2
                continue
            out.append(star)
        elif c == "?":
            out.append(("one", one))
        elif c == "[":
            end = glob.find("]", i + 1)
            if end == -1:
                raise ValueError(f"unclosed '[' at position {i}")
            out.append(("one", _class(glob[i + 1 : end], i)))
            i = end
        elif c == "]":
            raise ValueError(f"unmatched ']' at position {i}")
        else:
            out.append(("/" if c == "/" else "char", _escape(c)))
        i += 1
    return out


def _literal_parts(tokens: list[tuple[str, str]]) -> list[str | None]:
    """Each run of literal characters as a string, each wildcard or class as ``None``."""
    parts: list[str | None] = []
    chars: list[str] = []
    for kind, piece in tokens:
        if kind in ("char", "/"):
            chars.append(_unescape(piece))
            continue
        if chars:
            parts.append("".join(chars))
            chars.clear()
        parts.append(None)
    if chars:
        parts.append("".join(chars))
    return parts or [""]


def _linear_in_re(tokens: list[tuple[str, str]]) -> bool:
    """Whether Python's backtracking ``re`` matches these tokens in linear time.

    Anchored at both ends, a pattern with one variable-width run gives it back one
    character at a time and tries the fixed-width rest at each position: O(n x m). Two
    runs nest that search (O(n^2), and worse with more), except in one shape: the runs
    are parted by a literal ``/`` (or the first is ``**/``, which ends in one) and one
    of them is a ``[^/]*`` run, which cannot cross a ``/``. Then either the first run is
    ``[^/]*`` and only the positions next to the end of its segment get past the ``/``
    (a few choices, each followed by one linear search), or the second is, and each time
    the first run gets past the ``/`` the second starts in a new segment, which it scans
    to its end at most: all those scans together read the value a few times over. That
    shape is ``src/**/*.py`` and ``**/*.key``, the common two-run globs.
    """
    runs = [i for i, (kind, _) in enumerate(tokens) if kind in _RUNS]
    if len(runs) <= 1:
        return True
    if len(runs) > 2:
        return False
    first, second = runs
    parted = tokens[first][0] == "dirs" or any(
        kind == "/" for kind, _ in tokens[first + 1 : second]
    )
    return parted and "segment" in (tokens[first][0], tokens[second][0])


def _class(body: str, position: int) -> str:
    """A glob class body (``abc``, ``a-z``, ``!abc``) as a regex class that Python's ``re``
    and RE2 read alike: every member is escaped, so nothing in it is special to either."""
    negate = body[:1] in ("!", "^")
    if negate:
        body = body[1:]
    if not body:
        raise ValueError(f"empty character class at position {position}")
    members: list[str] = []
    i = 0
    while i < len(body):
        if i + 2 < len(body) and body[i + 1] == "-":
            low, high = body[i], body[i + 2]
            if low > high:
                raise ValueError(f"reversed range {low}-{high} at position {position}")
            members.append(f"{_escape(low)}-{_escape(high)}")
            i += 3
        else:
            members.append(_escape(body[i]))
            i += 1
    return "[" + ("^" if negate else "") + "".join(members) + "]"


def _escape(c: str) -> str:
    """One literal character in a syntax both engines share (``\\xHH`` for ASCII
    punctuation and controls, the character itself otherwise)."""
    if c.isascii() and not (c.isalnum() or c == "_"):
        return f"\\x{ord(c):02x}"
    return c


def _unescape(piece: str) -> str:
    """The character an ``_escape`` piece stands for."""
    return chr(int(piece[2:], 16)) if piece.startswith("\\x") else piece
