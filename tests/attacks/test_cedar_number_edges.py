"""Attacks on Cedar rules over numbers: an error in a ``forbid`` lets the call through.

Cedar skips a policy whose condition errors, and clearance follows Cedar: a ``permit`` that
holds then allows the call, with the error only recorded. For a ``forbid`` that is fail-open:
a model that makes the forbid's arithmetic overflow 64-bit ``Long`` (Cedar errors on
overflow, it does not wrap) walks past it. Integer arguments reach Cedar as ``Long`` in
``context.input``, up to 2**63-1, so the model chooses the overflow. Rule R1 says an
evaluator failure ends the call denied; here the failure of the very rule meant to deny is
an allow.
"""

from __future__ import annotations

from typing import Any

import pytest

from clearance import CallContext, Harness, MemoryJournal, Principal, Tool, ToolRegistry
from clearance.policy import CedarEvaluator

pytestmark = pytest.mark.anyio

ALICE = Principal("User", "alice")

POLICIES = """
@id("orders")
permit (principal, action == Action::"shop.order", resource);

@id("order-limit")
forbid (principal, action == Action::"shop.order", resource)
when { context.input.quantity * context.input.unit_price > 10000 };
"""


def registry(ran: list[dict[str, Any]]) -> ToolRegistry:
    def order(arguments: dict[str, Any], ctx: CallContext) -> str:
        ran.append(arguments)
        return "ordered"

    reg = ToolRegistry()
    reg.register(
        "shop",
        [
            Tool(
                "order",
                order,
                input_schema={
                    "type": "object",
                    "properties": {
                        "quantity": {"type": "integer", "minimum": 1},
                        "unit_price": {"type": "integer", "minimum": 1},
                    },
                    "required": ["quantity", "unit_price"],
                    "additionalProperties": False,
                },
            )
        ],
    )
    return reg


async def test_an_overflowing_forbid_does_not_let_the_call_run() -> None:
    ran: list[dict[str, Any]] = []
    evaluator = CedarEvaluator(policies=POLICIES)
    async with Harness(registry(ran), evaluator=evaluator, journal=MemoryJournal()) as h:
        session = await h.create_session(principal=ALICE)
        small = await session.call_tool("shop__order", {"quantity": 1000, "unit_price": 1000})
        assert small.status == "denied" and small.reasons == ("order-limit",)  # the rule works
        # 2**62 * 4 overflows a 64-bit Long: the forbid errors and is skipped.
        huge = await session.call_tool("shop__order", {"quantity": 2**62, "unit_price": 4})
    assert ran == [], f"an order of 2**62 items ran: {huge.status}, {huge.decision}"
