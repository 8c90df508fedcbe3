"""Which arguments of a tool decide what a call does: one definition, computed once per tool.

A person approving a call must see these whole (never redacted, never elided), a grant
wider than the exact call must constrain every one of them, and the ask, its display, the
inbox, the ask store and the journal name them (DESIGN: "One view of a call").

- A tool that declares facts (``Tool.facts``): the declared arguments. Its other arguments
  (a file's ``content``, a message's ``body``) do not decide: a grant on a path covers any
  content.
- A tool that declares none (every MCP tool behind the gateway, most app tools): **every
  argument**, since nothing says which do not. Names are never guessed from how they read
  (``to``, ``url``): a guess that misses a field leaves it free.

A directory prefix (``GrantScope.prefixes_of``) can constrain a path field only, so a scope
wider than the exact call is offered only when every deciding field is a path field: the
declared ``path`` facts; for a tool without facts, the arguments named like paths, and
only when its schema allows no other argument (``additionalProperties: false``), since an
argument the asked call did not carry would otherwise be free under the grant.

A declared :class:`~clearance.facts.base.SessionFact` (a process id: it names something the
session holds) is **pinned**: no scope but the exact call is offered for its tool, since
"any arguments" would cover whatever the session holds later (a write to another
command's process), and the person asked reads what it names beside it (a note).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from clearance.facts.base import SessionFact
from clearance.facts.declared import DeclaredFact

__all__ = ["ANY_ARGUMENT", "NO_DECIDING", "Deciding", "deciding_of"]

ANY_ARGUMENT = "*"
"""In :attr:`Deciding.others`: arguments the schema does not name may come, and decide."""

_PATHISH = frozenset(
    ("path", "source", "destination", "dest", "src", "file", "dir", "directory", "root")
)


@dataclass(frozen=True, slots=True)
class Deciding:
    """The deciding arguments of one tool (see the module docstring)."""

    declared: bool
    """Whether they are the tool's declared facts (else: every argument)."""
    fields: tuple[str, ...]
    """Declared: the fact arguments, in declaration order. Else the schema's properties."""
    paths: tuple[str, ...]
    """The deciding fields a directory prefix may constrain."""
    others: tuple[str, ...]
    """Every other deciding field a grant scope would have to constrain (with
    :data:`ANY_ARGUMENT` when arguments the schema does not name may come)."""
    pinned: tuple[tuple[str, SessionFact], ...] = ()
    """The fields naming something of the session, with their kinds: only an exact scope
    constrains them, and each kind describes its fact to a person."""

    def of_call(self, arguments: Mapping[str, Any]) -> tuple[str, ...]:
        """The deciding argument names of one call: the declared ones, or all it carries."""
        if self.declared:
            return self.fields
        return tuple(name for name in arguments if isinstance(name, str))


def deciding_of(declared: Sequence[DeclaredFact], schema: Mapping[str, Any]) -> Deciding:
    """The deciding arguments of a tool with these declared facts and input schema."""
    if declared:
        fields = tuple(dict.fromkeys(f.field for f in declared))
        paths = tuple(
            dict.fromkeys(f.field for f in declared if not f.many and f.kind.name == "path")
        )
        pinned = tuple((f.field, f.kind) for f in declared if isinstance(f.kind, SessionFact))
        return Deciding(True, fields, paths, tuple(f for f in fields if f not in paths), pinned)
    properties = schema.get("properties")
    names = tuple(properties) if isinstance(properties, Mapping) else ()
    closed = schema.get("additionalProperties") is False and not schema.get("patternProperties")
    guessed = tuple(n for n in names if n.lower() in _PATHISH)
    paths = guessed if closed and names and len(guessed) == len(names) else ()
    others = tuple(n for n in names if n not in paths)
    if not closed:
        others += (ANY_ARGUMENT,)
    return Deciding(False, names, paths, others)


NO_DECIDING = Deciding(False, (), (), (ANY_ARGUMENT,))
"""The deciding arguments of a tool not yet registered: every argument."""
