"""The naming rule of the built-ins (see the clearance.guardrails docstring).

A built-in of both stages is ``Argument<Name>`` / ``Result<Name>`` with the same options;
``<Name>.for_arguments`` / ``.for_results`` build them from either; both are named
``<Name>`` in records; the bare names kept from before are aliases of one stage.
"""

import inspect
import json
from typing import Any

import pytest
from support import ALICE, harness

import clearance.guardrails as guardrails
from clearance import MemoryJournal, Tool, ToolRegistry
from clearance.guardrails import ArgumentGuardrail, Guardrail, ResultGuardrail
from clearance.policy import NoopEvaluator

# (family, the stage its bare name is an alias of, the options one needs to build it)
FAMILIES: list[tuple[str, str, dict[str, Any]]] = [
    ("SecretScanner", "Result", {}),
    ("PiiRedactor", "Result", {}),
    ("SizeLimit", "Argument", {"max_bytes": 10}),
    ("Pattern", "Argument", {"deny": ["x"]}),
]
ONE_STAGE = {"PathScope": ArgumentGuardrail, "UrlAllowlist": ArgumentGuardrail}
BASES = {"Guardrail", "ArgumentGuardrail", "ResultGuardrail"}


def _built_ins() -> dict[str, type]:
    return {
        name: value
        for name in guardrails.__all__
        if isinstance(value := getattr(guardrails, name), type)
        and issubclass(value, Guardrail)
        and name not in BASES
    }


@pytest.mark.parametrize(("family", "alias_stage", "options"), FAMILIES)
def test_two_stage_built_ins_follow_the_rule(
    family: str, alias_stage: str, options: dict[str, Any]
) -> None:
    arguments = getattr(guardrails, f"Argument{family}")
    result = getattr(guardrails, f"Result{family}")
    assert issubclass(arguments, ArgumentGuardrail) and not issubclass(arguments, ResultGuardrail)
    assert issubclass(result, ResultGuardrail) and not issubclass(result, ArgumentGuardrail)
    assert getattr(guardrails, family) is getattr(guardrails, f"{alias_stage}{family}")
    for cls in (arguments, result, getattr(guardrails, family)):
        assert type(cls.for_arguments(**options)) is arguments
        assert type(cls.for_results(**options)) is result
    # Same options in both stages: a user switching stage changes the class name only.
    assert inspect.signature(arguments) == inspect.signature(result)
    # Both are named after the family in records; an explicit name wins.
    assert arguments(**options).name == result(**options).name == family
    assert arguments(**options, name="mine").name == "mine"


def test_a_subclass_of_a_built_in_is_named_after_itself() -> None:
    class TicketScanner(guardrails.ArgumentSecretScanner):
        pass

    assert TicketScanner().name == "TicketScanner"


def test_every_exported_built_in_is_named_by_the_rule() -> None:
    built_ins = _built_ins()
    families = {family for family, _, _ in FAMILIES}
    for name, cls in built_ins.items():
        if name in families:
            continue  # an alias, checked above
        if name in ONE_STAGE:
            assert issubclass(cls, ONE_STAGE[name])
            assert f"Argument{name}" not in built_ins and f"Result{name}" not in built_ins
            continue
        base: type[Guardrail]
        if name.startswith("Argument"):
            family, base, other = name[len("Argument") :], ArgumentGuardrail, "Result"
        else:
            assert name.startswith("Result"), f"{name} breaks the naming rule"
            family, base, other = name[len("Result") :], ResultGuardrail, "Argument"
        assert issubclass(cls, base), name
        assert f"{other}{family}" in built_ins, f"{name} has no {other.lower()} variant"
        assert family in families, f"{family} is missing from FAMILIES in this test"


def test_stage_aliases_are_documented() -> None:
    package_doc = guardrails.__doc__ or ""
    for family, stage, _ in FAMILIES:
        assert f"``{family}``" in package_doc
        cls = getattr(guardrails, f"{stage}{family}")
        assert f"``{family}`` is the same class" in (cls.__doc__ or ""), cls


@pytest.mark.anyio
async def test_records_name_both_stages_after_the_family() -> None:
    """Through a real harness and journal: the argument variant is recorded as
    ``SecretScanner``, and both variants act in their own stage."""
    token = "ghp_" + "16C7e42F292c6912E7710c838347Ae178B4a"  # fake, built by concatenation
    registry = ToolRegistry()
    schema = {"type": "object", "properties": {"body": {"type": "string"}}}
    registry.register(
        "mail", [Tool("send", lambda a, c: f"sent {a['body']} with {token}", input_schema=schema)]
    )
    journal = MemoryJournal()
    async with harness(
        registry,
        evaluator=NoopEvaluator(),
        journal=journal,
        argument_guardrails=[guardrails.ArgumentSecretScanner(action="redact")],
        result_guardrails=[guardrails.ResultSecretScanner(action="redact")],
    ) as h:
        session = await h.create_session(principal=ALICE)
        out = await session.call_tool("mail__send", {"body": "key AKIAIOSFODNN7EXAMPLE"})
    assert out.status == "ok"
    assert out.text == "sent key [REDACTED:aws_access_key_id] with [REDACTED:github_token]"
    records = [e.to_json() for e in journal.events()]
    decided = next(r for r in records if r["type"] == "call_decided")
    assert [g["name"] for g in decided["data"]["guardrails"]] == ["SecretScanner"]
    assert decided["data"]["guardrails"][0]["action"] == "replace"
    assert "AKIAIOSFODNN7EXAMPLE" not in json.dumps(records) and token not in json.dumps(records)
