"""``CustomFact``: a fact kind made from a function (docs/facts.md, "Declaring facts")."""

from __future__ import annotations

import functools

import pytest

from clearance.facts import Canonical, CustomFact, FactError


def ticket(value: str) -> str:
    if not value.strip():
        raise ValueError("a ticket needs a number")
    return value.strip().upper()


def test_the_functions_result_is_the_value_and_the_fact() -> None:
    assert CustomFact(ticket).canonicalize("  ab-12 ") == Canonical("AB-12", {"value": "AB-12"})


def test_a_canonical_the_function_returns_is_taken_as_it_is() -> None:
    made = Canonical("x", {"value": "x", "length": 1})
    assert CustomFact(lambda value: made).canonicalize("X") is made


def test_a_value_error_refuses_the_value_with_its_message() -> None:
    with pytest.raises(FactError) as caught:
        CustomFact(ticket).canonicalize("  ")
    assert str(caught.value) == "a ticket needs a number"
    # The refusal names what was wrong and nothing else: not the function's traceback.
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_a_value_error_without_a_message_names_the_kind() -> None:
    def refuse(value: str) -> str:
        raise ValueError

    with pytest.raises(FactError) as caught:
        CustomFact(refuse, name="ticket").canonicalize("x")
    assert str(caught.value) == "not a valid ticket"


def test_a_fact_error_passes_through_unchanged() -> None:
    error = FactError("no such ticket")

    def refuse(value: str) -> str:
        raise error

    with pytest.raises(FactError) as caught:
        CustomFact(refuse).canonicalize("x")
    assert caught.value is error


def test_any_other_exception_is_not_a_refusal_but_an_error() -> None:
    # The pipeline fails closed on it (R1): a bug in a canonicalizer is not a verdict.
    with pytest.raises(AttributeError):
        CustomFact(ticket).canonicalize(12)


def test_the_name_is_the_functions_unless_given() -> None:
    assert CustomFact(ticket).name == "ticket"
    assert CustomFact(ticket, name="jira").name == "jira"
    assert CustomFact(functools.partial(ticket)).name == "custom"
    assert repr(CustomFact(ticket, name="jira")) == "CustomFact(jira)"


def test_the_record_and_json_types_default_to_one_string() -> None:
    kind = CustomFact(ticket)
    assert kind.attributes == {"value": "String"}
    assert kind.json_types == frozenset({"string"})


def test_declared_attributes_and_json_types_are_kept() -> None:
    attributes = {"value": "Long", "even": "Bool"}
    kind = CustomFact(int, attributes=attributes, json_types={"integer"})
    attributes["odd"] = "Bool"  # the kind keeps its own copy
    assert kind.attributes == {"value": "Long", "even": "Bool"}
    assert kind.json_types == frozenset({"integer"})


def test_an_unknown_attribute_type_is_refused_by_name() -> None:
    with pytest.raises(ValueError) as caught:
        CustomFact(ticket, attributes={"a": "Text", "b": "Long", "c": "Float"})
    assert str(caught.value) == "unknown fact attribute type(s): Float, Text"


def test_the_canonicalizer_must_be_callable() -> None:
    with pytest.raises(TypeError) as caught:
        CustomFact("upper")  # type: ignore[arg-type]
    assert str(caught.value) == "CustomFact needs a callable"
