"""What an authority evaluator sees and what it answers.

An evaluator receives an :class:`AuthzRequest` (who calls which tool with which final,
validated arguments, in which session) and returns a :class:`Verdict`: ``allow``, ``deny``
or ``ask``, with the ids of the rules or policies that decided and any evaluation errors.
A decision is a value, never an exception; an evaluator that raises is treated by the
pipeline as a failed evaluation and the call is denied (rule R1).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from clearance.harness.tools import ToolRegistry

__all__ = [
    "AllOf",
    "AuthorityEvaluator",
    "AuthzRequest",
    "Effect",
    "Principal",
    "SessionInfo",
    "ToolInfo",
    "Verdict",
    "evaluate",
]

Effect = Literal["allow", "deny", "ask"]


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a session acts for: a Cedar-style entity ``Type::"id"``.

    ``Principal("User", "alice", attrs={"team": "infra"}, parents=[("Team", "infra")])``
    """

    type: str
    """Entity type, e.g. ``"User"`` or ``"Agent"``."""
    id: str
    """Entity id, e.g. ``"alice"``."""
    attrs: Mapping[str, Any] = field(default_factory=dict)
    """Attributes policies may read (``principal.team``)."""
    parents: Sequence[tuple[str, str]] = ()
    """Parent entities as ``(type, id)`` pairs, for Cedar ``in`` checks."""

    def __str__(self) -> str:
        return f'{self.type}::"{self.id}"'

    def __hash__(self) -> int:
        return hash((self.type, self.id))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Principal):
            return NotImplemented
        return (self.type, self.id) == (other.type, other.id)

    @classmethod
    def from_json(cls, value: Any) -> Principal:
        """A principal from ``'User::"alice"'`` text or ``{"type", "id", "attrs",
        "parents"}`` (parents as ``[["Team", "infra"]]`` pairs or ``'Team::"infra"'`` text).

        Raises:
            ValueError: the value has neither form.
        """
        if isinstance(value, str):
            return cls.parse(value)
        if isinstance(value, Mapping):
            kind, ident = value.get("type"), value.get("id")
            if not isinstance(kind, str) or not isinstance(ident, str):
                raise ValueError("'principal' needs a string 'type' and 'id'")
            attrs = value.get("attrs", {})
            if not isinstance(attrs, Mapping):
                raise ValueError("'principal.attrs' must be an object")
            parents = value.get("parents", [])
            pairs: list[tuple[str, str]] = []
            for parent in parents if isinstance(parents, list) else [None]:
                if (
                    isinstance(parent, list)
                    and len(parent) == 2
                    and all(isinstance(p, str) for p in parent)
                ):
                    pairs.append((parent[0], parent[1]))
                elif isinstance(parent, str):
                    p = cls.parse(parent)
                    pairs.append((p.type, p.id))
                else:
                    raise ValueError(
                        '\'principal.parents\' must be a list like [["Team", "infra"]]'
                    )
            return cls(kind, ident, dict(attrs), tuple(pairs))
        raise ValueError('\'principal\' must be like "User::\\"alice\\"" or {"type", "id"}')

    @classmethod
    def parse(cls, text: str) -> Principal:
        """Parse ``'User::"alice"'`` (or ``User::alice``) into a principal."""
        kind, sep, ident = text.partition("::")
        if not sep or not kind or not ident:
            raise ValueError(f'principal must look like User::"alice", got {text!r}')
        return cls(kind, ident.strip('"'))


@dataclass(frozen=True, slots=True)
class ToolInfo:
    """The tool being called, as evaluators see it."""

    qualified_name: str
    namespace: str
    name: str
    read_only: bool
    annotations: Mapping[str, Any] = field(default_factory=dict)
    source: str = "callback"
    """``"callback"`` for Python handlers, ``"mcp"`` for tools from an MCP server."""
    server: str | None = None
    """The MCP server's registration name, for MCP tools."""


@dataclass(frozen=True, slots=True)
class SessionInfo:
    id: str
    turn_id: str | None = None


@dataclass(frozen=True, slots=True)
class AuthzRequest:
    """One authorization question: may ``principal`` call ``tool`` with ``arguments``?"""

    principal: Principal
    tool: ToolInfo
    arguments: Mapping[str, Any]
    """The final, validated arguments: exactly what the handler will receive."""
    session: SessionInfo
    context: Mapping[str, Any] = field(default_factory=dict)
    """Extra context supplied by the application."""
    facts: Mapping[str, Any] = field(default_factory=dict)
    """The canonical facts of the arguments the tool declares facts for, by argument name
    (see :mod:`clearance.facts`); the arguments already hold the canonical values."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """An evaluator's answer."""

    effect: Effect
    reasons: tuple[str, ...] = ()
    """Ids of the rules or policies that determined the effect."""
    errors: tuple[str, ...] = ()
    """Evaluation errors (an erroring policy is skipped and recorded here, as in Cedar)."""
    message: str | None = None
    """A human-readable explanation (the ``@ask`` reason, a deny message)."""
    evaluator: str = ""
    """Which evaluator answered."""
    annotations: Mapping[str, str] = field(default_factory=dict)
    """Names for the ids in ``reasons`` (Cedar ``@id``), where they differ."""

    def __post_init__(self) -> None:
        # A verdict is checked where it is made: an effect spelled any other way
        # ("Deny", "permit") must never be read as anything but an error.
        if self.effect not in ("allow", "deny", "ask"):
            raise ValueError(f"a verdict's effect is 'allow', 'deny' or 'ask', not {self.effect!r}")
        if not isinstance(self.reasons, tuple) or not all(isinstance(r, str) for r in self.reasons):
            raise TypeError("Verdict.reasons must be a tuple of strings")
        if not isinstance(self.errors, tuple) or not all(isinstance(e, str) for e in self.errors):
            raise TypeError("Verdict.errors must be a tuple of strings")
        if self.message is not None and not isinstance(self.message, str):
            raise TypeError("Verdict.message must be a string or None")
        if not isinstance(self.annotations, Mapping):
            raise TypeError("Verdict.annotations must be a mapping")

    @classmethod
    def allow(cls, *reasons: str, evaluator: str = "", message: str | None = None) -> Verdict:
        return cls("allow", tuple(reasons), evaluator=evaluator, message=message)

    @classmethod
    def deny(cls, *reasons: str, evaluator: str = "", message: str | None = None) -> Verdict:
        return cls("deny", tuple(reasons), evaluator=evaluator, message=message)

    @classmethod
    def ask(cls, *reasons: str, evaluator: str = "", message: str | None = None) -> Verdict:
        return cls("ask", tuple(reasons), evaluator=evaluator, message=message)


@runtime_checkable
class AuthorityEvaluator(Protocol):
    """Decides whether a tool call may run.

    ``evaluate`` may be sync or async. An evaluator may also define ``bind(registry)``,
    called once when the harness freezes its registry (before the first session), to check
    its rules against the registered tools; an error there stops the session from being
    created rather than letting a rule be silently dead.
    """

    def evaluate(self, request: AuthzRequest) -> Verdict | Awaitable[Verdict]: ...


def bind(evaluator: AuthorityEvaluator, registry: ToolRegistry) -> None:
    """Call ``evaluator.bind(registry)`` when the evaluator defines it."""
    hook = getattr(evaluator, "bind", None)
    if hook is not None:
        hook(registry)


async def evaluate(evaluator: AuthorityEvaluator, request: AuthzRequest) -> Verdict:
    """Run a sync or async evaluator and check that it answered a ``Verdict``."""
    verdict: Any = evaluator.evaluate(request)
    if inspect.isawaitable(verdict):
        verdict = await verdict
    if not isinstance(verdict, Verdict) or verdict.effect not in ("allow", "deny", "ask"):
        raise TypeError(f"{type(evaluator).__name__}.evaluate returned {verdict!r}, not a Verdict")
    return verdict


def combine(verdicts: Sequence[Verdict], *, evaluator: str = "") -> Verdict:
    """Deny if any denies, ask if any asks, else allow; reasons of the deciding effect."""
    for effect in ("deny", "ask", "allow"):
        deciding = [v for v in verdicts if v.effect == effect]
        if deciding:
            break
    errors = tuple(e for v in verdicts for e in v.errors)
    annotations: dict[str, str] = {}
    for v in deciding:
        annotations.update(v.annotations)
    messages = [v.message for v in deciding if v.message]
    return Verdict(
        deciding[0].effect if deciding else "deny",
        tuple(r for v in deciding for r in v.reasons),
        errors,
        "; ".join(messages) or None,
        evaluator or "+".join(v.evaluator for v in deciding),
        annotations,
    )


class AllOf:
    """Combine evaluators: deny if any denies, ask if any asks, else allow (rule R3).

    Every evaluator is consulted (so each one's errors and reasons are recorded); an
    evaluator that raises makes the whole evaluation fail, which the pipeline enforces as
    deny.
    """

    def __init__(self, *evaluators: AuthorityEvaluator) -> None:
        if not evaluators:
            raise ValueError("AllOf needs at least one evaluator")
        self.evaluators = evaluators

    @property
    def name(self) -> str:
        return "all_of(" + ", ".join(_name(e) for e in self.evaluators) + ")"

    def bind(self, registry: ToolRegistry) -> None:
        for e in self.evaluators:
            bind(e, registry)

    async def evaluate(self, request: AuthzRequest) -> Verdict:
        verdicts = [await evaluate(e, request) for e in self.evaluators]
        return combine(verdicts)


def _name(evaluator: object) -> str:
    return str(getattr(evaluator, "name", type(evaluator).__name__))
