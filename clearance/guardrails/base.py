"""Guardrails: checks that look inside a call's arguments or result.

A guardrail returns a :class:`GuardrailOutcome` (a value, never an exception):

- ``allow()``: nothing to say;
- ``replace(value)``: the arguments (or result) become ``value``; replaced arguments are
  validated against the tool's schema again and feed the next guardrail;
- ``redact(pointers)``: the values at these JSON pointers are withheld from the journal,
  asks and error messages (for a result, also from the model); for arguments the tool
  still receives the real value;
- ``block(message)``: the call ends, the handler does not run (or its result is withheld);
- ``ask(reason)``: arguments only: a person or the app must approve the call.

An argument guardrail sees the arguments as a dict. A result guardrail sees the
normalized result as ``{"content": [...], "structured_content": ..., "is_error": bool}``.
A guardrail that raises or times out blocks the call (rule R1) unless it is ``advisory``:
advisory outcomes are recorded, never enforced.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, ClassVar, Literal

from clearance import _pointer
from clearance.provenance import Provenance
from clearance.types import Principal

__all__ = [
    "ArgumentGuardrail",
    "Guardrail",
    "GuardrailContext",
    "GuardrailOutcome",
    "ResultGuardrail",
]

GuardrailAction = Literal["allow", "replace", "redact", "block", "ask"]


@dataclass(frozen=True, slots=True)
class GuardrailOutcome:
    """What a guardrail decided. Build one with the class methods."""

    action: GuardrailAction
    value: Any = None
    pointers: tuple[str, ...] = ()
    message: str | None = None

    @classmethod
    def allow(cls) -> GuardrailOutcome:
        return _ALLOW

    @classmethod
    def replace(cls, value: Any) -> GuardrailOutcome:
        return cls("replace", value=value)

    @classmethod
    def redact(cls, pointers: Iterable[str]) -> GuardrailOutcome:
        pointers = tuple(pointers)
        for p in pointers:
            _pointer.parse(p)
        return cls("redact", pointers=pointers)

    @classmethod
    def block(cls, message: str) -> GuardrailOutcome:
        return cls("block", message=message)

    @classmethod
    def ask(cls, reason: str) -> GuardrailOutcome:
        return cls("ask", message=reason)


_ALLOW = GuardrailOutcome("allow")


@dataclass(frozen=True, slots=True)
class GuardrailContext:
    """Which call a guardrail is looking at."""

    qualified_name: str
    model_alias: str
    principal: Principal
    session_id: str
    turn_id: str | None
    call_id: str
    stage: Literal["arguments", "result"]
    provenance: Provenance | None = None
    """The session's ledger of values (:mod:`clearance.provenance`): where a value came
    from is ``ctx.provenance.origin(value)`` (``user``, ``tool``, ``made_up``...). None
    when the guardrail runs outside a session."""


CheckFunction = Callable[[Any, GuardrailContext], "GuardrailOutcome | Awaitable[GuardrailOutcome]"]


class Guardrail:
    """Base of argument and result guardrails.

    Subclass and override :meth:`check`, or wrap a function:
    ``ArgumentGuardrail(no_rm, tools="shell.*", fields=["/command"])``.

    Args:
        check: a sync or async ``(value, ctx) -> GuardrailOutcome``; omit when subclassing.
        tools: glob(s) over qualified tool names this guardrail applies to.
        fields: JSON pointers of the fields it inspects (``*`` matches any key or index);
            ``None`` means the whole value.
        advisory: record the outcome but never enforce it.
        name: the name used in records (defaults to the class or function name).
        timeout: seconds the check may take; longer blocks the call (R1).
    """

    stage: ClassVar[Literal["arguments", "result"]]
    family: ClassVar[str | None] = None
    """The name the stage variants of one built-in share (``"SecretScanner"`` for both
    ``ArgumentSecretScanner`` and ``ResultSecretScanner``): their default :attr:`name`.
    Read from the class itself only, so a subclass is named after itself."""

    def __init__(
        self,
        check: CheckFunction | None = None,
        *,
        tools: str | Iterable[str] = "*",
        fields: Iterable[str] | None = None,
        advisory: bool = False,
        name: str | None = None,
        timeout: float | None = 5.0,
    ) -> None:
        self._check = check
        self.tools = (tools,) if isinstance(tools, str) else tuple(tools)
        if not self.tools:
            raise ValueError("a guardrail needs at least one tool glob")
        self.fields = None if fields is None else tuple(fields)
        self._selectors: _Selectors | None = None
        for pointer in self.fields or ():
            _pointer.parse(pointer)
        self.advisory = advisory
        cls = type(self)
        default = getattr(check, "__name__", None) if check else vars(cls).get("family")
        self.name = name or default or cls.__name__
        if timeout is not None and timeout <= 0:
            raise ValueError("timeout must be positive")
        self.timeout = timeout

    def applies_to(self, qualified_name: str) -> bool:
        return any(fnmatchcase(qualified_name, glob) for glob in self.tools)

    def selected(self, value: Any) -> Iterator[tuple[str, Any]]:
        """The ``(pointer, value)`` pairs this guardrail inspects in ``value``."""
        fields = self.fields
        if fields is None:
            yield "", value
            return
        # The pointers are parsed once (again only if ``fields`` is replaced); a pointer
        # to one key of the arguments object, the common case, is a dict lookup.
        selectors = getattr(self, "_selectors", None)
        if selectors is None or selectors[0] is not fields:
            selectors = self._selectors = (fields, tuple(_selector(p) for p in fields))
        for tokens, key, concrete in selectors[1]:
            if key is not None and type(value) is dict:
                if key in value:
                    yield concrete, value[key]
                continue
            yield from _pointer.find_parsed(value, tokens)

    def check(
        self, value: Any, ctx: GuardrailContext
    ) -> GuardrailOutcome | Awaitable[GuardrailOutcome]:
        if self._check is None:
            raise NotImplementedError(f"{type(self).__name__} must override check()")
        return self._check(value, ctx)

    async def run(self, value: Any, ctx: GuardrailContext) -> GuardrailOutcome:
        """Run :meth:`check` (sync or async) and check that it returned an outcome."""
        outcome: Any = self.check(value, ctx)
        if inspect.isawaitable(outcome):
            outcome = await outcome
        return self.settle(outcome)

    def settle(self, outcome: Any) -> GuardrailOutcome:
        """Check that what :meth:`check` returned is an outcome this stage allows.

        Raises:
            TypeError: it is not a ``GuardrailOutcome``, or it asks at the result stage.
        """
        if not isinstance(outcome, GuardrailOutcome):
            raise TypeError(f"guardrail {self.name!r} returned {outcome!r}, not a GuardrailOutcome")
        if outcome.action == "ask" and self.stage == "result":
            raise TypeError(f"result guardrail {self.name!r} returned ask(); only block or redact")
        return outcome

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} tools={list(self.tools)}>"


_Selector = tuple[tuple[str, ...], str | None, str]
"""A parsed pointer: its tokens, the key when it names one key of an object (one token,
not ``*``), and the pointer to that key as :func:`_pointer.find` writes it."""
_Selectors = tuple[tuple[str, ...], tuple[_Selector, ...]]
"""The ``fields`` they were parsed from, and each parsed."""


def _selector(pointer: str) -> _Selector:
    tokens = _pointer.parse(pointer)
    if len(tokens) == 1 and tokens[0] != "*":
        return tokens, tokens[0], "/" + _pointer.escape(tokens[0])
    return tokens, None, ""


class ArgumentGuardrail(Guardrail):
    """Inspects a call's validated arguments before the evaluator sees them."""

    stage = "arguments"


class ResultGuardrail(Guardrail):
    """Inspects what a tool returned before the model and the journal see it."""

    stage = "result"
