"""Writing policy text that quotes untrusted values, and checking it says what was meant.

Generated policies (``clearance suggest``) quote what calls carried: argument values and
names, tool names, principals, call ids in comments. Any of it may have been chosen by a
model. Here each kind of place in the text has one writer that escapes for it:

- :func:`cedar_string` / :func:`cedar_like`: a Cedar string literal or ``like`` pattern;
  quotes, backslashes and every control, bidi or invisible character escaped (``\\u{..}``),
  so the policy reads the same to Cedar and to a reviewer;
- :func:`toml_string`: a TOML basic string, escaped the same way;
- :func:`comment`: a one-line ``//`` or ``#`` comment; no line end survives, so a comment
  cannot end early and start a policy;
- :func:`cedar_entity`: ``Type::"id"`` for an entity whose type is a Cedar name.

Escaping is not trusted alone: :func:`check_cedar` parses generated Cedar with the Cedar
engine and compares every policy with the one intended (effect, ``@id``, principal, action,
resource, whether it has a condition), and :func:`check_local` parses generated local rules
back through TOML and the rule parser. Either refuses with a :class:`PolicyError`.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from clearance._text import is_printable, printable
from clearance.errors import PolicyError, RuleError
from clearance.policy.local import RuleKind, parse_rule
from clearance.types import Principal

__all__ = [
    "IntendedPolicy",
    "cedar_attribute",
    "cedar_entity",
    "cedar_like",
    "cedar_string",
    "check_cedar",
    "check_local",
    "comment",
    "has_name",
    "is_entity_type",
    "split_entity",
    "toml_string",
]

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CEDAR_RESERVED = frozenset(
    {"true", "false", "if", "then", "else", "in", "is", "like", "has", "__cedar"}
)
"""Words Cedar does not take as an attribute name after a dot."""
_ENTITY_TYPE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)*$")
"""A Cedar entity type name (``User``, ``MyApp::User``)."""
_CEDAR_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t", "\0": "\\0"}


def cedar_string(text: str) -> str:
    """A Cedar string literal holding ``text``: quotes and backslashes escaped, and every
    character :func:`~clearance._text.printable` would escape (controls, bidi, invisible)
    written as ``\\u{...}``. ``text`` must hold no lone surrogate (Cedar cannot)."""
    out = []
    for ch in text:
        escape = _CEDAR_ESCAPES.get(ch)
        if escape is not None:
            out.append(escape)
        elif is_printable(ch):
            out.append(ch)
        else:
            out.append(f"\\u{{{ord(ch):x}}}")
    return '"' + "".join(out) + '"'


def cedar_like(text: str) -> str:
    """The inside of a ``like`` pattern matching ``text`` literally."""
    return cedar_string(text)[1:-1].replace("*", "\\*")


def cedar_attribute(name: str) -> str:
    """How to read attribute ``name`` of a record: ``.name``, or ``["na me"]``."""
    return f".{name}" if _plain(name) else f"[{cedar_string(name)}]"


def has_name(name: str) -> str:
    """The right-hand side of ``has`` for attribute ``name``."""
    return name if _plain(name) else cedar_string(name)


def _plain(name: str) -> bool:
    return _IDENT.match(name) is not None and name not in _CEDAR_RESERVED


def toml_string(text: str) -> str:
    """A TOML basic string holding ``text``, escaped like :func:`cedar_string`."""
    out = []
    for ch in text:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif is_printable(ch):
            out.append(ch)
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def comment(mark: str, text: str) -> str:
    """A one-line comment (``mark`` is ``//`` or ``#``) saying ``text``, with every line
    end and control character escaped and ``*/`` broken up."""
    return f"{mark} " + printable(text).replace("*/", "*\\/")


def is_entity_type(name: str) -> bool:
    """Whether ``name`` is a Cedar entity type name (``User``, ``MyApp::User``)."""
    return _ENTITY_TYPE.match(name) is not None


def split_entity(text: str) -> tuple[str, str]:
    """``'User::"alice"'`` as ``("User", "alice")``.

    Unambiguous because the type is a Cedar name (no quote): the first ``::"`` ends it.

    Raises:
        ValueError: the type is not a Cedar name, or the text is not ``Type::"id"``.
    """
    kind, sep, rest = text.partition('::"')
    if not sep or not rest.endswith('"') or not is_entity_type(kind):
        raise ValueError(f"the principal type of {printable(text)} is not a Cedar name")
    try:
        # ``str(Principal)`` escapes an id holding a quote or a backslash (JSON).
        principal = Principal.parse(text)
    except ValueError:
        return kind, rest[:-1]
    return principal.type, principal.id


def cedar_entity(text: str) -> str:
    """The Cedar entity ``Type::"id"`` for ``text`` (see :func:`split_entity`), the id
    escaped."""
    kind, ident = split_entity(text)
    return f"{kind}::{cedar_string(ident)}"


@dataclass(frozen=True, slots=True)
class IntendedPolicy:
    """What one generated ``permit`` was written to say."""

    policy_id: str
    """Its ``@id``."""
    principal: tuple[str, str]
    """``principal ==`` this entity (type, id)."""
    action: str
    """``action == Action::"<action>"``."""
    conditioned: bool
    """Whether it has one ``when`` clause (else none); the resource is unconstrained."""
    ask: str | None = None
    """Its ``@ask`` text, if it has one (``@id`` and ``@ask`` are its only annotations)."""


def check_cedar(text: str, intended: Sequence[IntendedPolicy]) -> None:
    """Parse ``text`` with the Cedar engine and compare each policy, in order, with the
    one intended.

    Raises:
        PolicyError: the text does not parse, holds another number of policies, or a
            policy differs in effect, annotations, principal, action, resource or
            conditions from the one intended.
    """
    # cedarpy loads only when Cedar is used (as in clearance.policy).
    from clearance.policy.cedar import CedarEngine

    policies = CedarEngine(text).policies if text else ()
    if len(policies) != len(intended):
        raise PolicyError(
            f"the generated policies parse to {len(policies)} policies, not "
            f"{len(intended)}: refusing them"
        )
    for info, want in zip(policies, intended, strict=True):
        same = (
            info.effect == "permit"
            and info.kind == "static"
            and dict(info.annotations)
            == ({"id": want.policy_id} | ({"ask": want.ask} if want.ask is not None else {}))
            and info.principal.op == "=="
            and [(e.type, e.id) for e in info.principal.entities] == [want.principal]
            and info.action.op == "=="
            and [(e.type, e.id) for e in info.action.entities] == [("Action", want.action)]
            and info.resource.op == "any"
            and info.conditions == (1 if want.conditioned else 0)
        )
        if not same:
            kind, ident = want.principal
            raise PolicyError(
                f"generated policy {want.policy_id} does not parse to what it was written "
                f"to say (permit {printable(kind)}::{printable(ident)} to call "
                f"{printable(want.action)}): refusing it",
                policy_id=want.policy_id,
            )


def check_local(block: str, rules: Mapping[str, Sequence[str]], tools: set[str]) -> None:
    """Parse one TOML block of rule lists (``allow = [...]``, ``ask = [...]``) and each of
    its rules back: the block must hold exactly ``rules`` (kind → rules), each naming one of
    ``tools`` exactly (no glob).

    Raises:
        PolicyError: anything differs, or does not parse.
    """
    try:
        parsed = tomllib.loads(block)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"the generated rules do not parse as TOML: {exc}") from None
    if parsed != {kind: list(texts) for kind, texts in rules.items()}:
        raise PolicyError("the generated rules do not parse back to themselves: refusing them")
    for kind, rule in ((k, r) for k, texts in rules.items() for r in texts):
        if kind not in ("allow", "ask"):
            raise PolicyError(f"a generated rule list is {printable(kind)}: refusing it")
        try:
            tool = parse_rule(cast(RuleKind, kind), rule).tool_glob
        except RuleError as exc:
            raise PolicyError(f"a generated rule does not parse: {exc}") from None
        if tool not in tools:
            raise PolicyError(
                f"the generated rule {printable(rule)} does not name the tool it was "
                "written for: refusing it"
            )
