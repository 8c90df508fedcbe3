"""R1 fail closed, for a remote PDP: whatever a PDP that misbehaves does (hang, reset,
close, a status that is not 200, a body that is not a Decision, an allow in the wrong
clothes), the call is denied, the handler never runs, and ``call_decided`` names the PDP and
the cause. The same answers given as a batch (``evaluations``) deny every call in it.

Every answer drawn here would allow if it were read leniently: a status that is not 200
around ``{"decision": true}``, ``true`` under the wrong content type, a second member
named ``decision``, ``"true"`` as a string, a true decision with an error in its context,
an evaluations list one short or one long. A control example (a well-formed allow) runs the
handler, so that "it did not run" can be told apart from "nothing can run".
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from authzen_support import RawPdp, http_response
from hypothesis import given, settings
from hypothesis import strategies as st

from clearance import Harness, MemoryJournal, Principal, Tool, ToolRegistry
from clearance.policy.authzen import AuthZenEvaluator
from clearance.policy.base import AuthzRequest
from clearance.types import SessionInfo, ToolInfo

pytestmark = pytest.mark.anyio

ALLOW = b'{"decision": true}'
SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}

statuses = st.sampled_from([201, 202, 204, 301, 302, 400, 401, 403, 404, 429, 500, 502, 503])


def _allows(body: bytes) -> bool:
    try:
        value = json.loads(body)
    except ValueError:
        return False
    return isinstance(value, dict) and value.get("decision") is True


garbage = st.binary(max_size=64).filter(lambda b: not _allows(b))


@st.composite
def json_not_a_decision(draw: st.DrawFn) -> bytes:
    """A JSON body that holds no boolean ``decision`` (any JSON value around it)."""
    leaf = st.none() | st.booleans() | st.integers() | st.text(max_size=5)
    value = draw(
        st.recursive(
            leaf,
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(st.text(max_size=5), inner, max_size=3)
            ),
            max_leaves=6,
        )
    )
    if isinstance(value, dict):
        value["decision"] = draw(
            st.sampled_from(["true", 1, 1.0, [True], {"v": True}, None, "yes"])
        )
    return json.dumps(value).encode()


def _allow_in_disguise(body: bytes) -> Any:
    return st.sampled_from(
        [
            http_response(200, body, content_type="text/plain"),
            http_response(200, body, content_type="application/jsonx"),
            http_response(200, b'{"decision": true, "decision": false}'),
            http_response(200, b'{"decision": false, "decision": true}'),
            http_response(200, b'{"decision": true, "context": {"error": "store down"}}'),
            http_response(200, b'{"decision": true, "context": ["ok"]}'),
            http_response(200, b'{"decision": true, "context": {"r": "\\udfff"}}'),
            http_response(200, body, headers=(("Content-Encoding", "br"),)),
            http_response(200, body, headers=(("X-Request-ID", "someone-else"),)),
            http_response(200, body)[:-1],
        ]
    )


answers = st.one_of(
    st.sampled_from(["hang", "reset", "close"]),
    statuses.map(lambda s: http_response(s, ALLOW, reason="X")),
    garbage.map(lambda b: http_response(200, b)),
    json_not_a_decision().map(lambda b: http_response(200, b)),
    _allow_in_disguise(ALLOW),
    garbage.map(lambda b: (b, "close")),
)


def _host(url: str) -> tuple[Harness, list[Any], MemoryJournal, AuthZenEvaluator]:
    ran: list[Any] = []

    def write(arguments: Any, ctx: Any) -> str:
        ran.append(arguments)
        return "ok"

    registry = ToolRegistry()
    registry.register("notes", [Tool("write", write, input_schema=SCHEMA)])
    evaluator = AuthZenEvaluator(url, token="t" * 20, timeout=0.3)
    journal = MemoryJournal()
    return Harness(registry, evaluator=evaluator, journal=journal), ran, journal, evaluator


@settings(max_examples=40)
@given(answer=answers, path=st.text(max_size=10))
async def test_r1_a_misbehaving_pdp_denies_and_runs_nothing(answer: Any, path: str) -> None:
    with RawPdp(answer) as pdp:
        harness, ran, journal, evaluator = _host(pdp.url)
        async with evaluator, harness:
            session = await harness.create_session(principal=Principal("User", "alice"))
            outcome = await session.call_tool("notes.write", {"path": path}, call_id="c1")
    assert outcome.status == "denied", (answer, outcome)
    assert ran == []
    (record,) = [e.data for e in journal.events(call_id="c1") if e.type == "call_decided"]
    verdict = record["verdict"]
    assert verdict["effect"] == "deny"
    assert verdict["errors"] and verdict["errors"][0].startswith(f"authzen {pdp.url}: ")
    assert not [e for e in journal.events(call_id="c1") if e.type == "tool_started"]
    assert len(pdp.requests) <= 1


async def test_r1_the_control_a_well_formed_allow_runs() -> None:
    with RawPdp(http_response(200, ALLOW)) as pdp:
        harness, ran, _, evaluator = _host(pdp.url)
        async with evaluator, harness:
            session = await harness.create_session(principal=Principal("User", "alice"))
            outcome = await session.call_tool("notes.write", {"path": "x"}, call_id="c1")
    assert outcome.status == "ok" and ran == [{"path": "x"}]


@st.composite
def batch_answers(draw: st.DrawFn) -> bytes:
    size = draw(st.integers(min_value=2, max_value=5))
    wrong = draw(st.sampled_from(["short", "long", "bad-member", "no-list", "status"]))
    decisions: Any = [{"decision": True}] * size
    if wrong == "short":
        decisions = decisions[: draw(st.integers(min_value=0, max_value=size - 1))]
    elif wrong == "long":
        decisions = decisions + [{"decision": True}] * draw(st.integers(1, 3))
    elif wrong == "bad-member":
        decisions = list(decisions)
        decisions[draw(st.integers(0, size - 1))] = {"decision": "true"}
    body: Any = {"evaluations": decisions} if wrong != "no-list" else {"decision": True}
    status = 500 if wrong == "status" else 200
    return json.dumps({"size": size, "answer": http_response(status, body).decode()}).encode()


@settings(max_examples=30)
@given(drawn=batch_answers())
async def test_r1_a_batch_answer_that_does_not_fit_denies_every_call(drawn: bytes) -> None:
    case = json.loads(drawn)
    with RawPdp(case["answer"].encode()) as pdp:
        evaluator = AuthZenEvaluator(pdp.url, token="t" * 20, timeout=0.3)
        requests = [
            AuthzRequest(
                Principal("User", "alice"),
                ToolInfo("notes.write", "notes", "write", False),
                {"path": str(i)},
                SessionInfo("s"),
            )
            for i in range(case["size"])
        ]
        async with evaluator:
            verdicts = await evaluator.evaluate_many(requests)
    assert [v.effect for v in verdicts] == ["deny"] * case["size"]
    assert all(v.errors[0].startswith(f"authzen {pdp.url}: ") for v in verdicts)
