"""The words of a command line: how it splits into an argv, and the words refused.

What :class:`~clearance.facts.command.CommandFact` refuses before reading any word's
meaning: a command that does not split (unbalanced quotes), is empty or too long, a word
with a character a program would read differently from a person or a policy, and an
``@file`` word for a program that reads more arguments from that file.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence

from clearance.facts.base import FactError

__all__ = [
    "ARGUMENT_FILE_PROGRAMS",
    "MAX_COMMAND_LENGTH",
    "check_words",
    "refuse_argument_files",
    "split_command",
]

MAX_COMMAND_LENGTH = 65_536
"""Characters a command line may have (the bundled shell tool's schema allows 8,192)."""

# Invisible or reordering characters: bidi controls, zero-width characters, line and
# paragraph separators, fillers that render as nothing, and the tag characters that can
# smuggle invisible ASCII text past a person reading the command.
_BIDI_AND_INVISIBLE = re.compile(
    "[\u00ad\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f"
    "\u3164\ufeff\uffa0\ufff9-\ufffb\U000e0000-\U000e007f]"
)
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def split_command(command: str, *, max_length: int = MAX_COMMAND_LENGTH) -> list[str]:
    """The argv ``command`` runs as: :func:`shlex.split`, then :func:`check_words`.

    Raises:
        FactError: the command is not a string, too long, empty, has unbalanced quotes or
            a trailing escape, or a word holds a character :func:`check_words` refuses.
    """
    if not isinstance(command, str):
        raise FactError(f"a command must be a string, not {type(command).__name__}")
    if len(command) > max_length:
        raise FactError(f"the command is longer than {max_length} characters")
    try:
        argv = shlex.split(command)
    except ValueError as exc:  # "No closing quotation", "No escaped character"
        raise FactError(f"the command cannot be split into words: {exc}") from None
    if not argv:
        raise FactError("the command is empty")
    check_words(argv)
    return argv


def check_words(argv: Sequence[str]) -> None:
    """Refuse words a program would read differently from a person or a policy.

    Refused: a control character (C0 with TAB and newline, DEL, C1, NUL), an invisible
    formatting character (bidi controls, zero-width characters, line and paragraph
    separators) or a lone surrogate (not encodable as UTF-8: it would reach the program as
    raw bytes). Whitespace *between* words is fine; it is not part of any word.

    Raises:
        FactError: naming the first such character (as ``U+XXXX``) and the word's position.
    """
    for position, word in enumerate(argv):
        if not isinstance(word, str):
            raise FactError(f"word {position} is not a string")
        found = _CONTROL.search(word) or _BIDI_AND_INVISIBLE.search(word)
        if found is None:
            continue
        char = found.group()
        if "\ud800" <= char <= "\udfff":
            what = "a lone surrogate (not valid UTF-8)"
        elif _CONTROL.match(char):
            what = "a control character"
        else:
            what = "an invisible formatting character"
        raise FactError(f"word {position} contains {what} (U+{ord(char):04X})")


ARGUMENT_FILE_PROGRAMS = frozenset({"pytest", "py.test"})
"""Programs that read more arguments from ``@file`` (argparse's ``fromfile_prefix_chars``),
anywhere on the command line: what they run is not the argv a policy sees."""


def refuse_argument_files(argv: Sequence[str]) -> None:
    """Refuse an ``@file`` word for a program that would read its arguments from it.

    Raises:
        FactError: naming the word's position.
    """
    if argv and os.path.basename(argv[0]) in ARGUMENT_FILE_PROGRAMS:
        for position, word in enumerate(argv[1:], 1):
            if word.startswith("@"):
                raise FactError(
                    f"word {position}: {argv[0]} would read more arguments from the file "
                    f"{word[1:]!r}, which no policy sees"
                )
