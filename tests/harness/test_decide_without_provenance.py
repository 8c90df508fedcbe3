"""``decide(with_provenance=False)`` (issue 18, for replay): the same decision, without the
explanation's provenance records; the records a policy reads are still computed for it."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from clearance import Harness, Principal, Tool, ToolRegistry
from clearance.policy import LocalEvaluator
from clearance.policy.cedar import CedarEvaluator
from clearance.provenance import Provenance

pytestmark = pytest.mark.anyio

ATTACKER = "CH9300762011623852957"
USERS = "GB29NWBK60161331926819"
SEND = {
    "type": "object",
    "properties": {
        "recipient": {"type": "string"},
        "amount": {"type": "number"},
        "note": {"type": "string"},
    },
    "required": ["recipient", "amount"],
    "additionalProperties": False,
}
POLICIES = """
@id("all") permit (principal, action, resource);
@id("recipient-from-tool") forbid (principal, action == Action::"bank.send_money", resource)
when { context.provenance.recipient.tool && !context.provenance.recipient.user };
"""


async def send(arguments: dict[str, Any], ctx: Any) -> str:
    return "sent"


def registry() -> ToolRegistry:
    registry = ToolRegistry()
    registry.register(
        "bank",
        [Tool("send_money", send, input_schema=SEND), Tool("read_statement", send, read_only=True)],
    )
    return registry


CONVERSATION = [
    {"role": "user", "content": f"pay {USERS}"},
    {"role": "tool", "tool": "bank.read_statement", "call_id": "c1", "content": ATTACKER},
]
CALLS: list[dict[str, Any]] = [
    {"recipient": ATTACKER, "amount": 3},
    {"recipient": USERS, "amount": 3},
    {"recipient": USERS, "amount": "three"},  # invalid: ends before the evaluator
    {"recipient": "someone-else", "amount": 1, "note": f"for {USERS}"},
]


def evaluators() -> list[Any]:
    return [
        CedarEvaluator(policies=POLICIES),
        LocalEvaluator(allow=["bank.*"], deny=["bank.send_money(recipient.from=tool)"]),
        LocalEvaluator(allow=["bank.*"]),  # reads no provenance
    ]


@pytest.mark.parametrize("which", range(3))
async def test_the_same_decision_without_the_records(which: int) -> None:
    async with Harness(registry(), evaluator=evaluators()[which]) as harness:
        alice = Principal("User", "alice")
        outcomes = []
        for arguments in CALLS:
            decisions = []
            for with_provenance in (True, False):
                decision = await harness.decide(
                    principal=alice,
                    tool="bank.send_money",
                    arguments=arguments,
                    provenance=Provenance.from_conversation(CONVERSATION),
                    with_provenance=with_provenance,
                )
                decisions.append(decision)
            full, bare = decisions
            assert bare.provenance is None
            if full.stage != "schema":
                assert full.provenance is not None and set(full.provenance) == set(arguments)
            for f in dataclasses.fields(full):
                if f.name not in ("provenance", "timing_us"):
                    assert getattr(full, f.name) == getattr(bare, f.name), f.name
            outcomes.append(bare.outcome)
    # The policies that read provenance still decide on it: the attacker's number is refused.
    assert outcomes == (
        ["deny", "allow", "invalid", "allow"]
        if which < 2
        else ["allow", "allow", "invalid", "allow"]
    )
