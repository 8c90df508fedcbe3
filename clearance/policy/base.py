"""What an authority evaluator sees, what it answers, and what callers may ask of it.

An evaluator receives an :class:`AuthzRequest` (who calls which tool with which final,
validated arguments, in which session) and returns a :class:`Verdict`: ``allow``, ``deny``
or ``ask``, with the ids of the rules or policies that decided and any evaluation errors.
A decision is a value, never an exception; an evaluator that raises is treated by the
pipeline as a failed evaluation and the call is denied (rule R1).

The evaluator contract
----------------------
Required, and all that :class:`AuthorityEvaluator` (a Protocol) asks:
``evaluate(request) -> Verdict``, sync or async.

Optional parts, declared with their defaults by the base class :class:`Evaluator`:

=========================  ===============================  ===================================
name                       type                             default (meaning)
=========================  ===============================  ===================================
``name``                   ``str``                          the class name (``Verdict.evaluator``
                                                            and records name it so)
``allows_everything``      ``bool``                         ``False`` (True only for
                                                            ``NoopEvaluator``: a harness warns)
``bind(catalog)``          ``None``                         does nothing; called once when the
                                                            harness freezes its registry, to
                                                            check rules against the tools
``bound``                  ``bool``                         ``True`` (False: ``bind`` is still
                                                            needed before ``evaluate`` decides)
``bound_tools``            ``tuple[ToolLike, ...] | None``  ``None`` (the evaluator keeps no
                                                            tools)
``policy_ids()``           ``tuple[str, ...] | None``       ``None`` (cannot say); else every
                                                            id ``Verdict.reasons`` can hold
=========================  ===============================  ===================================

The built-in evaluators (``NoopEvaluator``, ``LocalEvaluator``, ``CedarEvaluator``,
``AllOf``) subclass :class:`Evaluator`. An application's evaluator may too, or may be any
object with ``evaluate``: callers that need an optional part call :func:`as_evaluator`
once, which returns an :class:`Evaluator` unchanged and wraps any other evaluator in one
that reads the optional parts above, by these names, off the object when it defines them
(and uses the defaults otherwise). That wrapper is the only place that looks at an
evaluator's attributes; no caller probes with ``getattr``.

:func:`evaluate` is the one helper that settles an evaluator's answer (awaits it if it is
awaitable, checks that it is a :class:`Verdict`); :func:`check_verdict` is its check, for
a caller that has no event loop (the decision-test runner).
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from clearance.provenance import Provenance
from clearance.types import Principal, SessionInfo, ToolCatalog, ToolInfo, ToolLike

__all__ = [
    "AllOf",
    "AuthorityEvaluator",
    "AuthzRequest",
    "Effect",
    "Evaluator",
    "Principal",
    "SessionInfo",
    "ToolInfo",
    "Verdict",
    "as_evaluator",
    "bind",
    "check_verdict",
    "combine",
    "evaluate",
    "provenance_of",
]

Effect = Literal["allow", "deny", "ask"]


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
    provenance: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Where each top-level argument came from, by argument name (see
    :mod:`clearance.provenance`): the user, a tool result, or nowhere. Empty when the
    caller has no session to say it (an argument without a record counts as made up)."""

    @classmethod
    def make(
        cls,
        principal: Principal,
        tool: ToolInfo,
        arguments: Mapping[str, Any],
        session: SessionInfo,
        context: Mapping[str, Any],
        facts: Mapping[str, Any],
        provenance: Mapping[str, Mapping[str, Any]],
    ) -> AuthzRequest:
        """The same request as the constructor, built for the pipeline (once per call):
        every field positional, set through its slot rather than through the frozen
        dataclass's ``object.__setattr__`` per field, which costs half of a request."""
        request = object.__new__(cls)
        _SET_PRINCIPAL(request, principal)
        _SET_TOOL(request, tool)
        _SET_ARGUMENTS(request, arguments)
        _SET_SESSION(request, session)
        _SET_CONTEXT(request, context)
        _SET_FACTS(request, facts)
        _SET_PROVENANCE(request, provenance)
        return request


# The slots of AuthzRequest's fields (tests/harness/test_hot_path.py checks there are no others).
(
    _SET_PRINCIPAL,
    _SET_TOOL,
    _SET_ARGUMENTS,
    _SET_SESSION,
    _SET_CONTEXT,
    _SET_FACTS,
    _SET_PROVENANCE,
) = (
    AuthzRequest.__dict__[name].__set__
    for name in ("principal", "tool", "arguments", "session", "context", "facts", "provenance")
)


_NOTHING_SEEN = Provenance()
"""A ledger that is never written: every value in it is made up."""


def provenance_of(request: AuthzRequest) -> Mapping[str, Mapping[str, Any]]:
    """The provenance records of ``request``'s arguments; when the caller gave none (a
    request built outside a session: a decision test, a custom caller), every argument's
    says it was seen nowhere (made up), so that a policy that reads them is never fed a
    missing record."""
    provenance = request.provenance
    if provenance or not request.arguments:
        return provenance
    return _NOTHING_SEEN.describe(request.arguments)


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
    policy_version: str | None = field(default=None, compare=False)
    """Which version of the policies decided: a digest of the whole policy set in force
    (``sha256:`` and 16 hex digits of its policy files, entities and schema declarations),
    journaled with the decision; ``None`` for an evaluator without versions. Not compared:
    two verdicts are equal when they decide alike, whichever set made them."""

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
        if self.policy_version is not None and not isinstance(self.policy_version, str):
            raise TypeError("Verdict.policy_version must be a string or None")

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
    """Decides whether a tool call may run: the required part of the evaluator contract.

    ``evaluate`` may be sync or async. The optional parts (``name``, ``bind`` ...) are
    declared by :class:`Evaluator`; see the module docstring.
    """

    def evaluate(self, request: AuthzRequest) -> Verdict | Awaitable[Verdict]: ...


class Evaluator(ABC):
    """Base class of evaluators: ``evaluate`` to write, the optional parts with defaults.

    Subclasses override what they have (a class attribute is enough for ``name`` and
    ``allows_everything``). See the module docstring for what each part means.
    """

    allows_everything: bool = False
    """True only for an evaluator that allows every call (a harness warns when it starts)."""

    @property
    def name(self) -> str:
        """What ``Verdict.evaluator`` and the journal call this evaluator."""
        return type(self).__name__

    @property
    def bound(self) -> bool:
        """False while :meth:`bind` is still needed before :meth:`evaluate` can decide."""
        return True

    @property
    def bound_tools(self) -> tuple[ToolLike, ...] | None:
        """The tools of the last :meth:`bind`; ``None`` when the evaluator keeps none."""
        return None

    def bind(self, catalog: ToolCatalog) -> None:
        """Check the rules against the registered tools (called once, when the harness
        freezes its registry). An error here stops the session from being created rather
        than letting a rule be silently dead. The default does nothing."""
        return None

    def policy_ids(self) -> tuple[str, ...] | None:
        """Every rule or policy id this evaluator can give as a reason (as in
        ``Verdict.reasons``); ``None`` when it cannot say (the default)."""
        return None

    @abstractmethod
    def evaluate(self, request: AuthzRequest) -> Verdict | Awaitable[Verdict]:
        """Decide one call: sync, or async (return an awaitable)."""


class _Adapted(Evaluator):
    """An evaluator that does not subclass :class:`Evaluator`, seen through the contract:
    each optional part is the object's own when it defines one by that name, else the
    default."""

    __slots__ = ("inner",)

    def __init__(self, inner: AuthorityEvaluator) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        return str(getattr(self.inner, "name", type(self.inner).__name__))

    @property
    def allows_everything(self) -> bool:  # type: ignore[override]
        return bool(getattr(self.inner, "allows_everything", False))

    @property
    def bound(self) -> bool:
        return bool(getattr(self.inner, "bound", True))

    @property
    def bound_tools(self) -> tuple[ToolLike, ...] | None:
        tools = getattr(self.inner, "bound_tools", None)
        return None if tools is None else tuple(tools)

    def bind(self, catalog: ToolCatalog) -> None:
        hook = getattr(self.inner, "bind", None)
        if hook is not None:
            hook(catalog)

    def policy_ids(self) -> tuple[str, ...] | None:
        hook = getattr(self.inner, "policy_ids", None)
        if hook is None:
            return None
        value = hook() if callable(hook) else hook
        return None if value is None else tuple(str(v) for v in value)

    def evaluate(self, request: AuthzRequest) -> Verdict | Awaitable[Verdict]:
        return self.inner.evaluate(request)


def as_evaluator(evaluator: AuthorityEvaluator) -> Evaluator:
    """``evaluator`` as an :class:`Evaluator`: itself when it is one, else wrapped so that
    its optional parts (or their defaults) can be read without probing.

    Raises:
        TypeError: ``evaluator`` has no callable ``evaluate``.
    """
    if isinstance(evaluator, Evaluator):
        return evaluator
    if not callable(getattr(evaluator, "evaluate", None)):
        raise TypeError(
            f"{type(evaluator).__name__} is not an authority evaluator: it has no evaluate()"
        )
    return _Adapted(evaluator)


def bind(evaluator: AuthorityEvaluator, catalog: ToolCatalog) -> None:
    """Bind ``evaluator`` to the registered tools (a no-op for evaluators that need none)."""
    as_evaluator(evaluator).bind(catalog)


def check_verdict(evaluator: AuthorityEvaluator, value: object) -> Verdict:
    """``value`` when it is a :class:`Verdict`.

    Raises:
        TypeError: ``evaluator`` answered something else (the caller denies, rule R1).
    """
    if not isinstance(value, Verdict) or value.effect not in ("allow", "deny", "ask"):
        raise TypeError(f"{type(evaluator).__name__}.evaluate returned {value!r}, not a Verdict")
    return value


async def evaluate(evaluator: AuthorityEvaluator, request: AuthzRequest) -> Verdict:
    """Run a sync or async evaluator and check that it answered a ``Verdict``: the one
    helper that settles an evaluator's answer.

    Raises:
        TypeError: the evaluator answered something other than a ``Verdict``.
    """
    value: Any = evaluator.evaluate(request)
    if inspect.isawaitable(value):
        value = await value
    return check_verdict(evaluator, value)


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
        "+".join(dict.fromkeys(v.policy_version for v in verdicts if v.policy_version)) or None,
    )


class AllOf(Evaluator):
    """Combine evaluators: deny if any denies, ask if any asks, else allow (rule R3).

    Every evaluator is consulted (so each one's errors and reasons are recorded); an
    evaluator that raises makes the whole evaluation fail, which the pipeline enforces as
    deny.
    """

    def __init__(self, *evaluators: AuthorityEvaluator) -> None:
        if not evaluators:
            raise ValueError("AllOf needs at least one evaluator")
        self.evaluators = evaluators
        self._contracts = tuple(as_evaluator(e) for e in evaluators)

    @property
    def name(self) -> str:
        return "all_of(" + ", ".join(e.name for e in self._contracts) + ")"

    @property
    def bound(self) -> bool:
        return all(e.bound for e in self._contracts)

    def bind(self, catalog: ToolCatalog) -> None:
        for e in self._contracts:
            e.bind(catalog)

    def policy_ids(self) -> tuple[str, ...] | None:
        """The union of every member's ids; ``None`` when one member cannot say."""
        out: dict[str, None] = {}
        for e in self._contracts:
            ids = e.policy_ids()
            if ids is None:
                return None
            out.update(dict.fromkeys(ids))
        return tuple(out)

    async def evaluate(self, request: AuthzRequest) -> Verdict:
        verdicts = [await evaluate(e, request) for e in self.evaluators]
        return combine(verdicts)
