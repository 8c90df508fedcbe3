"""The ``number`` fact: one number however it is written, refused when policies cannot hold it."""

from __future__ import annotations

import math

import pytest

from clearance.facts import FactError, NumberFact
from clearance.facts.numbers import canonical_number


@pytest.mark.parametrize(
    ("value", "kind"), [(True, "bool"), (False, "bool"), ("5", "str"), (None, "NoneType")]
)
def test_only_numbers_are_numbers(value: object, kind: str) -> None:
    with pytest.raises(FactError) as caught:
        canonical_number(value)
    assert str(caught.value) == f"expected a number, got {kind}"


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_a_number_that_is_not_finite_is_refused(value: float) -> None:
    with pytest.raises(FactError) as caught:
        canonical_number(value)
    assert str(caught.value) == "the number is not finite"


def test_a_fraction_stays_a_float_and_a_whole_number_becomes_an_int() -> None:
    assert canonical_number(2.5) == 2.5 and type(canonical_number(2.5)) is float
    assert canonical_number(666.0) == 666 and type(canonical_number(666.0)) is int


@pytest.mark.parametrize("value", [0.1, 2.5, 0.0001, -1234.5678, 922337203685477.5])
def test_a_fraction_decimal_can_hold_is_its_shortest_spelling(value: float) -> None:
    # 0.1 is not exactly 1/10 in binary; the fact is the number as written (its repr), which
    # Cedar's decimal holds exactly, not the binary float's 55-digit expansion.
    canonical = NumberFact().canonicalize(value)
    assert canonical.value == value
    assert canonical.fact == {"value": value, "integer": False}


@pytest.mark.parametrize("value", [0.00001, 1.23456, -0.00005])
def test_more_than_four_decimal_places_are_refused(value: float) -> None:
    with pytest.raises(FactError) as caught:
        NumberFact().canonicalize(value)
    assert str(caught.value) == f"{value!r} has more than 4 decimal places"


@pytest.mark.parametrize("value", [922337203685478, -(10**15), 1e300])
def test_a_number_outside_decimals_range_is_refused(value: float) -> None:
    with pytest.raises(FactError) as caught:
        NumberFact().canonicalize(value)
    assert str(caught.value) == (
        f"{canonical_number(value):.6g} is outside the range policies compare (±9.2e14)"
    )


def test_the_largest_whole_number_decimal_holds_is_a_number() -> None:
    assert NumberFact().canonicalize(922337203685477).fact == {
        "value": 922337203685477,
        "integer": True,
    }


def test_repr() -> None:
    assert repr(NumberFact()) == "NumberFact()"
