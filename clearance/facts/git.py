"""The ``git_ref`` fact: a git revision named by the agent (a branch, a tag, a commit, a
relative form such as ``HEAD~2``), checked to be read by git as a revision and nothing else.

``GitRefFact()`` keeps the value as written when it is a plain revision: letters, digits and
``. _ / @ ^ ~ { } + -``, not starting with ``-`` (git would read an option) or ``/``, with no
``..`` (a range, or a path step), ``//``, ``:`` (``REV:path`` names a file's content), a
trailing ``/``, ``.`` or ``.lock``; at most 200 characters. Anything else is refused.

The fact record (``context.facts.<argument>`` in Cedar)::

    ref         "main"
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from clearance.facts.base import Canonical, FactError

__all__ = ["GitRefFact"]

_REF = re.compile(r"[A-Za-z0-9_@][A-Za-z0-9._/@^~{}+-]{0,199}")


class GitRefFact:
    """A git revision argument (see the module docstring)."""

    __slots__ = ()

    @property
    def name(self) -> str:
        return "git_ref"

    @property
    def attributes(self) -> Mapping[str, str]:
        return {"ref": "String"}

    @property
    def json_types(self) -> frozenset[str]:
        return frozenset({"string"})

    def canonicalize(self, value: Any) -> Canonical:
        if not isinstance(value, str):
            raise FactError(f"a git revision must be a string, not {type(value).__name__}")
        if _REF.fullmatch(value) is None:
            raise FactError(
                "a git revision is letters, digits and . _ / @ ^ ~ { } + - only, and does "
                "not start with '-'"
            )
        if ".." in value or "//" in value or value.endswith(("/", ".", ".lock")):
            raise FactError(
                "a git revision may not hold '..' or '//', nor end with '/', '.' or '.lock'"
            )
        return Canonical(value, {"ref": value})

    def __repr__(self) -> str:
        return "GitRefFact()"
