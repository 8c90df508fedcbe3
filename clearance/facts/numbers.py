"""The ``number`` fact: a number compared as a number, whatever its spelling.

JSON has one number type, and JSON Schema's ``integer`` accepts ``666.0``: the texts
``666``, ``666.0`` and ``6.66e2`` are one value. ``NumberFact()`` makes them one argument
value (an integral number becomes an ``int``, so the handler gets ``666``) and one fact::

    value     666        the canonical number (a Cedar ``decimal`` in policies)
    integer   true       whether it is a whole number

Cedar's ``decimal`` is exact to four decimal places within about ±9.2e14; a number it
cannot hold exactly is refused rather than rounded (rounding ``100.00001`` down would let
it pass a ``lessThanOrEqual(decimal("100.0"))`` limit).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from clearance.facts.base import Canonical, FactError

__all__ = ["NumberFact", "canonical_number"]

_LIMIT = Decimal("922337203685477.5807")
_ATTRIBUTES: Mapping[str, str] = {"value": "decimal", "integer": "Bool"}


def canonical_number(value: Any) -> int | float:
    """``value`` as its canonical number: an ``int`` when it is whole, else a ``float``.

    Raises:
        FactError: not a number (booleans are not numbers), or not finite.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FactError(f"expected a number, got {type(value).__name__}")
    if isinstance(value, int):
        return int(value)
    if not math.isfinite(value):
        raise FactError("the number is not finite")
    if value.is_integer():
        return int(value)
    return float(value)


class NumberFact:
    """A number argument (see the module docstring)."""

    __slots__ = ()

    @property
    def name(self) -> str:
        return "number"

    @property
    def attributes(self) -> Mapping[str, str]:
        return _ATTRIBUTES

    @property
    def json_types(self) -> frozenset[str]:
        return frozenset({"number", "integer"})

    def canonicalize(self, value: Any) -> Canonical:
        number = canonical_number(value)
        exact = Decimal(number) if isinstance(number, int) else Decimal(repr(number))
        if abs(exact) > _LIMIT:
            raise FactError(f"{number:.6g} is outside the range policies compare (±9.2e14)")
        if isinstance(number, float) and exact.as_tuple().exponent < -4:  # type: ignore[operator]
            raise FactError(f"{number!r} has more than 4 decimal places")
        return Canonical(number, {"value": number, "integer": isinstance(number, int)})

    def __repr__(self) -> str:
        return "NumberFact()"
