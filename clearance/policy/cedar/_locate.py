"""Where in its source a Cedar problem is, and the code frame that shows it.

cedarpy reports a syntax error as a message alone (``unexpected token `<```), without the
position Cedar's own command line shows, and a validation error names the policy but not
the expression. This module finds the position from the policy's text:

* ``unexpected token `X``` : the first ``X`` at which the policy's text, cut just after it
  and closed (open brackets closed, ``;`` added), fails with the same message (found by
  bisection over the ``X`` s). Cutting alone is not enough: Cedar's parser recovers from an
  error and then reports the end of input instead;
* ``unexpected end of input``: just after the last token;
* ``invalid token``: the first unterminated string or character Cedar has no token for;
* any other message (an invalid variable, method or condition keyword, a bad ``like``
  pattern, a name in a validation error): the name it quotes, searched in the text.

Only the error path pays for this (a few parses of one policy's prefixes). Positions are
1-based lines and columns, columns counted in characters.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

__all__ = [
    "Position",
    "SourceLines",
    "code_frame",
    "name_span",
    "position_in",
    "syntax_span",
]

# Cedar's tokens, near enough to find where one starts: string literals (with escapes, not
# ended when unterminated), comments, identifiers, numbers, two-character operators, and
# any other single character.
_TOKEN = re.compile(
    r'"(?:[^"\\]|\\.)*"?|//[^\n]*|[A-Za-z_][A-Za-z0-9_]*|\d+|==|!=|<=|>=|&&|\|\||::|\S',
    re.DOTALL,
)
_CLOSERS = {"(": ")", "[": "]", "{": "}"}
_CEDAR_CHARS = frozenset('()[]{},;.:!<>=+-*%&|?@"_')
_UNEXPECTED = re.compile(r"unexpected token `(.+)`$", re.DOTALL)
_TICKED = re.compile(r"`([^`]+)`")


@dataclass(frozen=True, slots=True)
class Position:
    """A 1-based line and column, and how many characters the problem spans."""

    line: int
    column: int
    width: int = 1


def _tokens(text: str) -> list[re.Match[str]]:
    return [m for m in _TOKEN.finditer(text) if not m.group().startswith("//")]


def _closed(tokens: list[re.Match[str]]) -> str:
    """What closes the brackets still open after ``tokens``, and the ``;`` ending a policy."""
    stack: list[str] = []
    for token in tokens:
        text = token.group()
        if text in _CLOSERS:
            stack.append(_CLOSERS[text])
        elif stack and text == stack[-1]:
            stack.pop()
    return "".join(reversed(stack)) + ";"


def syntax_span(
    text: str, message: str, parse_error: Callable[[str], str | None]
) -> tuple[int, int] | None:
    """The offset and length in ``text`` (one policy) of the syntax error ``message``.

    Args:
        text: the policy's source text.
        message: Cedar's message for it.
        parse_error: parses Cedar text and returns its error message (None when it parses).

    Returns:
        ``(offset, length)``, or None when the message cannot be placed.
    """
    tokens = _tokens(text)
    if not tokens:
        return None
    if message == "unexpected end of input":
        return tokens[-1].end(), 1
    unexpected = _UNEXPECTED.match(message)
    if unexpected is not None:
        wanted = unexpected.group(1)
        candidates = [n for n, t in enumerate(tokens) if t.group() == wanted]

        def fails_there(n: int) -> bool:
            token = tokens[n]
            return parse_error(text[: token.end()] + _closed(tokens[: n + 1])) == message

        # Before the error the text parses as far as it goes, so a cut there fails with
        # some other message; from the error on, every cut fails with this one. The first
        # such candidate is found by bisection (a few parses, however long the policy).
        low, high = 0, len(candidates)
        while low < high:
            middle = (low + high) // 2
            if fails_there(candidates[middle]):
                high = middle
            else:
                low = middle + 1
        if low < len(candidates):
            token = tokens[candidates[low]]
            return token.start(), len(wanted)
        return None
    if message == "invalid token":
        for token in tokens:
            word = token.group()
            if word.startswith('"') and (len(word) == 1 or not _terminated(word)):
                return token.start(), 1
            if len(word) == 1 and not word.isalnum() and word not in _CEDAR_CHARS:
                return token.start(), 1
        return None
    ticked = _TICKED.findall(message)
    names = [ticked[-1]] if ticked else []
    if ": " in message:
        names.append(message.rsplit(": ", 1)[1].strip())
    for name in names:
        span = name_span(text, name)
        if span is not None:
            return span
    return None


def _terminated(word: str) -> bool:
    """Whether a string token ends with an unescaped quote."""
    body = word[1:]
    if not body.endswith('"'):
        return False
    backslashes = len(body[:-1]) - len(body[:-1].rstrip("\\"))
    return backslashes % 2 == 0


def name_span(text: str, name: str, *, start: int = 0) -> tuple[int, int] | None:
    """The offset and length of ``name`` as a whole word in ``text`` (from ``start``)."""
    if not name:
        return None
    edge = r"(?<![A-Za-z0-9_])" if name[0].isalnum() or name[0] == "_" else ""
    tail = r"(?![A-Za-z0-9_])" if name[-1].isalnum() or name[-1] == "_" else ""
    m = re.compile(edge + re.escape(name) + tail).search(text, start)
    return (m.start(), len(name)) if m else None


def position_in(text: str, offset: int, *, line: int, column: int, width: int = 1) -> Position:
    """The position of ``offset`` in ``text``, a policy that starts at ``line``:``column``
    of its file."""
    before = text[:offset]
    newlines = before.count("\n")
    if newlines == 0:
        return Position(line, column + offset, width)
    return Position(line + newlines, offset - before.rfind("\n"), width)


class SourceLines:
    """The lines of each policy source by its path, for code frames."""

    def __init__(self, sources: Mapping[str | None, str]) -> None:
        self._lines = {path: text.split("\n") for path, text in sources.items()}

    def line(self, path: str | None, number: int) -> str | None:
        """The text of line ``number`` (1-based) of ``path``, or None."""
        lines = self._lines.get(path)
        if lines is None or not 1 <= number <= len(lines):
            return None
        return lines[number - 1].rstrip("\r")

    def frame(self, path: str | None, position: Position) -> str | None:
        """The code frame of ``position`` in ``path`` (see :func:`code_frame`)."""
        text = self.line(path, position.line)
        if text is None:
            return None
        before = self.line(path, position.line - 1)
        return code_frame(text, position, before=before)


def code_frame(text: str, position: Position, *, before: str | None = None) -> str:
    """Lines showing ``position`` under a gutter of line numbers, a caret under it::

           4 |   context.input.path like "src/*" &&
           5 |   context.input.offset >< 3
             |                         ^

    ``before`` is the previous line, shown too when it is not blank. Tabs are shown as
    one space each so that the caret stays under its column.
    """
    number = str(position.line)
    gutter = len(number) + 1
    rows = []
    if before is not None and before.strip():
        rows.append(f"{str(position.line - 1).rjust(gutter)} | {before.replace(chr(9), ' ')}")
    rows.append(f"{number.rjust(gutter)} | {text.replace(chr(9), ' ')}")
    width = max(1, min(position.width, len(text) - position.column + 1))
    rows.append(f"{' ' * gutter} | {' ' * (position.column - 1)}{'^' * width}")
    return "\n".join(rows)
