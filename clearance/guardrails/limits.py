"""Size limits and regex patterns: simple bounds on argument or result values.

Each check comes in both stages (the package's naming rule): :class:`ArgumentSizeLimit` /
:class:`ResultSizeLimit` and :class:`ArgumentPattern` / :class:`ResultPattern`, with the
same options. ``SizeLimit`` and ``Pattern`` are the documented aliases of the argument stage.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from clearance import _pointer
from clearance.guardrails._refusal import RefusalAction, first_refusal, refusal_action
from clearance.guardrails.base import (
    ArgumentGuardrail,
    Guardrail,
    GuardrailContext,
    GuardrailOutcome,
    ResultGuardrail,
)

__all__ = [
    "ArgumentPattern",
    "ArgumentSizeLimit",
    "Pattern",
    "ResultPattern",
    "ResultSizeLimit",
    "SizeLimit",
    "json_size",
]


def json_size(value: Any) -> int:
    """Bytes of ``value`` as compact UTF-8 JSON (a string counts with its quotes)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return len(text.encode("utf-8", "surrogatepass"))


class _SizeLimiting(Guardrail):
    def __init__(
        self,
        max_bytes: int,
        *,
        tools: str | Iterable[str] = "*",
        fields: Iterable[str] | None = None,
        advisory: bool = False,
        name: str | None = None,
        timeout: float | None = 5.0,
    ) -> None:
        super().__init__(tools=tools, fields=fields, advisory=advisory, name=name, timeout=timeout)
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
            raise ValueError(f"max_bytes must be a non-negative integer, not {max_bytes!r}")
        self.max_bytes = max_bytes

    def check(self, value: Any, ctx: GuardrailContext) -> GuardrailOutcome:
        """Block when a selected value serializes to more than ``max_bytes``."""
        for pointer, selected in self.selected(value):
            size = json_size(selected)
            if size > self.max_bytes:
                what = "the arguments" if self.stage == "arguments" else "the result"
                where = f"the value at {pointer}" if pointer else what
                return GuardrailOutcome.block(
                    f"{self.name}: the size of {where} is {size:,} bytes as JSON; the "
                    f"limit is {self.max_bytes:,}"
                )
        return GuardrailOutcome.allow()

    @classmethod
    def for_arguments(cls, max_bytes: int, **options: Any) -> ArgumentSizeLimit:
        """The limit as an argument guardrail (same options)."""
        return ArgumentSizeLimit(max_bytes, **options)

    @classmethod
    def for_results(cls, max_bytes: int, **options: Any) -> ResultSizeLimit:
        """The limit as a result guardrail (same options)."""
        return ResultSizeLimit(max_bytes, **options)


class ArgumentSizeLimit(_SizeLimiting, ArgumentGuardrail):
    """Block a call whose arguments (or selected fields) are too large.

    Size is the compact UTF-8 JSON serialization of each selected value, or of the whole
    arguments when ``fields`` is ``None``. For results use :class:`ResultSizeLimit`.

    Example::

        ArgumentSizeLimit(64_000, tools="files.write_file", fields=["/content"])
        ResultSizeLimit(200_000)   # what a tool may hand back to the model

    Args:
        max_bytes: the largest allowed size in bytes.
        tools: glob(s) over qualified tool names this guardrail applies to.
        fields: JSON pointers to measure (each separately); ``None`` measures everything.
        advisory: record the outcome but never enforce it.
        name: the name used in records.
        timeout: seconds the check may take.

    ``SizeLimit`` is the same class (the name it had first).
    """

    family = "SizeLimit"


class ResultSizeLimit(_SizeLimiting, ResultGuardrail):
    """The size limit as a result guardrail: withhold a result that is too large.

    The options are :class:`ArgumentSizeLimit`'s; ``SizeLimit.for_results(...)`` builds
    one too.

    Example: ``ResultSizeLimit(100_000, fields=["/content"])``.
    """

    family = "SizeLimit"


SizeLimit = ArgumentSizeLimit
"""The argument stage's first name, kept: ``SizeLimit(...)`` reads arguments."""


Regex = str | re.Pattern[str]


class _PatternMatching(Guardrail):
    def __init__(
        self,
        *,
        deny: Iterable[Regex] = (),
        allow: Iterable[Regex] | None = None,
        action: RefusalAction = "block",
        tools: str | Iterable[str] = "*",
        fields: Iterable[str] | None = None,
        advisory: bool = False,
        name: str | None = None,
        timeout: float | None = 5.0,
    ) -> None:
        super().__init__(tools=tools, fields=fields, advisory=advisory, name=name, timeout=timeout)
        if isinstance(deny, str | re.Pattern) or isinstance(allow, str | re.Pattern):
            raise ValueError("deny and allow take a list of patterns, not one pattern")
        self.deny = tuple(re.compile(p) for p in deny)
        self.allow = None if allow is None else tuple(re.compile(p) for p in allow)
        if not self.deny and self.allow is None:
            raise ValueError("Pattern needs deny or allow patterns")
        action = refusal_action(action)
        if action == "ask" and self.stage == "result":
            raise ValueError("a result guardrail cannot ask; use action='block'")
        self.action = action

    def check(self, value: Any, ctx: GuardrailContext) -> GuardrailOutcome:
        """Block (or ask) when a value matches a deny pattern or no allow pattern."""
        messages = (
            f"{self.name}: the value at {pointer or '/'} {problem}"
            for base, selected in self.selected(value)
            for pointer, text in _leaves(selected, base)
            if (problem := self.problem(text)) is not None
        )
        return first_refusal(messages, self.action)

    def problem(self, text: str) -> str | None:
        """Why ``text`` is refused (naming the pattern, not the text), or None."""
        for regex in self.deny:
            if regex.search(text):
                return f"matches the deny pattern {regex.pattern!r}"
        if self.allow is not None and not any(regex.fullmatch(text) for regex in self.allow):
            return "matches none of the allow patterns"
        return None

    @classmethod
    def for_arguments(cls, **options: Any) -> ArgumentPattern:
        """The check as an argument guardrail (same options)."""
        return ArgumentPattern(**options)

    @classmethod
    def for_results(cls, **options: Any) -> ResultPattern:
        """The check as a result guardrail (same options; ``action`` must be ``"block"``)."""
        return ResultPattern(**options)


def _leaves(node: Any, here: str) -> Iterator[tuple[str, str]]:
    """Every scalar under ``node`` as text: strings as they are, others as JSON."""
    if isinstance(node, dict):
        for key, item in node.items():
            yield from _leaves(item, f"{here}/{_pointer.escape(str(key))}")
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from _leaves(item, f"{here}/{i}")
    elif isinstance(node, str):
        yield here, node
    else:
        yield here, json.dumps(node)


class ArgumentPattern(_PatternMatching, ArgumentGuardrail):
    """Regex allow/deny lists over argument values.

    Each string in the selected fields (numbers and booleans as their JSON text) must match
    none of ``deny`` (searched anywhere in the value) and, when ``allow`` is given, at
    least one of ``allow``, which must match the *whole* value: an unanchored allow
    pattern would let ``rm -rf / ; git status`` through as "contains git status".

    Example::

        ArgumentPattern(tools="shell.run", fields=["/command"],
                allow=[r"git (status|diff|log)( .*)?", r"pytest( .*)?"],
                deny=[r"[;&|`$<>]"])

    The message names the field and the pattern, never the value.

    Args:
        deny: patterns no value may contain (``re.search``).
        allow: patterns of which each value must match one entirely (``re.fullmatch``);
            ``None`` means no allow list.
        action: ``"block"`` (default) or ``"ask"`` a person instead.
        tools: glob(s) over qualified tool names this guardrail applies to.
        fields: JSON pointers to inspect; ``None`` inspects every value.
        advisory: record the outcome but never enforce it.
        name: the name used in records.
        timeout: seconds the check may take.

    ``Pattern`` is the same class (the name it had first).
    """

    family = "Pattern"


class ResultPattern(_PatternMatching, ResultGuardrail):
    """The pattern check as a result guardrail: withhold a result with a refused value.

    The options are :class:`ArgumentPattern`'s, except that ``action`` must be
    ``"block"`` (a result cannot be asked about); ``Pattern.for_results(...)`` builds
    one too.

    Example: ``ResultPattern(deny=[r"(?i)internal use only"])``.
    """

    family = "Pattern"


Pattern = ArgumentPattern
"""The argument stage's first name, kept: ``Pattern(...)`` reads arguments."""
