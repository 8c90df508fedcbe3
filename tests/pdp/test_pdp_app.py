"""The PDP's ASGI application in process (httpx's ASGI transport): its routes, every
refusal, how a request becomes a call, evaluations with defaults and semantics, and how
each clearance outcome is answered."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from clearance import Harness, Tool, ToolRegistry
from clearance.harness.journal import MemoryJournal
from clearance.pdp import AuthZenPdp
from clearance.policy import LocalEvaluator
from clearance.policy.base import AuthzRequest, Evaluator, Verdict

pytestmark = pytest.mark.anyio

TOKEN = "pdp-token-" + "y" * 22
AUTH = {"authorization": f"Bearer {TOKEN}"}
BASE = "https://pdp.example.com"
SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}},
    "required": ["path"],
    "additionalProperties": False,
}
TODO_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "properties": {"type": "object", "properties": {"ownerID": {"type": "string"}}},
    },
    "required": ["id"],
}


class Failing(Evaluator):
    def evaluate(self, request: AuthzRequest) -> Verdict:
        raise RuntimeError("the policy store is gone")


def registry() -> ToolRegistry:
    reg = ToolRegistry()
    reg.register("notes", [Tool("write", lambda a, c: "", input_schema=SCHEMA)])
    reg.register("todo", [Tool("can_update_todo", lambda a, c: "", input_schema=TODO_SCHEMA)])
    reg.register("broken", [Tool("call", lambda a, c: "", input_schema={"type": "object"})])
    return reg


def app(evaluator: Any = None, **options: Any) -> AuthZenPdp:
    evaluator = evaluator or LocalEvaluator(
        allow=["notes.write(path=a*)", "todo.can_update_todo(id=t*)"],
        ask=["notes.write(path=b*)"],
        deny=["notes.write(path=*.env)"],
    )
    harness = Harness(registry(), evaluator=evaluator, journal=MemoryJournal())
    return AuthZenPdp(harness, token=TOKEN, base_url=BASE, **options)


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app())
    async with httpx.AsyncClient(transport=transport, base_url="http://pdp") as c:
        yield c


def call(path: str = "a.txt", **extra: Any) -> dict[str, Any]:
    return {
        "subject": {"type": "User", "id": "alice"},
        "action": {"name": "notes.write"},
        "resource": {"type": "tool", "id": "notes.write"},
        "context": {"arguments": {"path": path}},
        "options": {"decision_context": True},
        **extra,
    }


async def evaluate(client: httpx.AsyncClient, body: Any, path: str = "evaluation") -> Any:
    answer = await client.post(f"/access/v1/{path}", json=body, headers=AUTH)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["cache-control"] == "no-store"
    return answer.json()


# --- routes and refusals ---------------------------------------------------------------------


async def test_the_metadata_names_this_pdp_and_its_endpoints(client: httpx.AsyncClient) -> None:
    answer = await client.get("/.well-known/authzen-configuration")
    assert answer.status_code == 200
    assert answer.json() == {
        "policy_decision_point": BASE,
        "access_evaluation_endpoint": BASE + "/access/v1/evaluation",
        "access_evaluations_endpoint": BASE + "/access/v1/evaluations",
    }


async def test_a_tenant_path_moves_the_metadata_after_the_well_known_part() -> None:
    tenant = app()
    tenant.base_url = "https://pdp.example.com/tenant1"
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=tenant), base_url="http://p"
    ) as c:
        assert (await c.get("/.well-known/authzen-configuration/tenant1")).status_code == 200
        assert (await c.get("/.well-known/authzen-configuration")).status_code == 404


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"authorization": "Bearer wrong-token-of-some-length"},
        {"authorization": TOKEN},
        {"authorization": f"Basic {TOKEN}"},
        {"authorization": f"Bearer {TOKEN} "},
        {"authorization": f"bearer {TOKEN}x"},
    ],
)
async def test_no_or_another_token_is_401_and_decides_nothing(
    headers: dict[str, str],
) -> None:
    decided: list[AuthzRequest] = []

    class Recording(Evaluator):
        def evaluate(self, request: AuthzRequest) -> Verdict:
            decided.append(request)
            return Verdict.allow("p")

    transport = httpx.ASGITransport(app=app(Recording()))
    async with httpx.AsyncClient(transport=transport, base_url="http://pdp") as c:
        for path in ("evaluation", "evaluations"):
            answer = await c.post(f"/access/v1/{path}", json=call(), headers=headers)
            assert answer.status_code == 401
            assert answer.headers["www-authenticate"] == 'Bearer realm="clearance"'
            assert answer.headers["content-type"].startswith("text/plain")
    assert decided == []


async def test_two_authorization_headers_are_refused(client: httpx.AsyncClient) -> None:
    answer = await client.post(
        "/access/v1/evaluation",
        content=b"{}",
        headers=[
            ("authorization", f"Bearer {TOKEN}"),
            ("authorization", "Bearer other"),
            ("content-type", "application/json"),
        ],
    )
    assert answer.status_code == 400 and "more than once" in answer.text


@pytest.mark.parametrize(
    ("content", "headers", "status", "words"),
    [
        (b'{"a": 1}', {"content-type": "text/plain"}, 415, "application/json"),
        (b'{"a": 1}', {}, 415, "application/json"),
        (b"not json", {"content-type": "application/json"}, 400, "not I-JSON"),
        (b'{"subject": 1, "subject": 2}', {"content-type": "application/json"}, 400, "twice"),
        (b"[]", {"content-type": "application/json"}, 400, "must be a JSON object"),
        (b'{"x": NaN}', {"content-type": "application/json; charset=utf-8"}, 400, "NaN"),
        (b"[" * 50_000 + b"]" * 50_000, {"content-type": "application/json"}, 400, "nested"),
    ],
)
async def test_a_body_that_is_not_a_request_is_refused(
    client: httpx.AsyncClient, content: bytes, headers: dict[str, str], status: int, words: str
) -> None:
    answer = await client.post(
        "/access/v1/evaluation", content=content, headers={**AUTH, **headers}
    )
    assert answer.status_code == status
    assert words in answer.text


async def test_a_body_over_the_limit_is_413() -> None:
    small = app(max_body=1000)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=small), base_url="http://p"
    ) as c:
        answer = await c.post("/access/v1/evaluation", json=call("a" * 2000), headers=AUTH)
    assert answer.status_code == 413


async def test_other_paths_and_methods(client: httpx.AsyncClient) -> None:
    assert (await client.get("/access/v1/evaluation", headers=AUTH)).status_code == 405
    assert (await client.post("/.well-known/authzen-configuration")).status_code == 405
    assert (
        await client.post("/access/v1/search/subject", json={}, headers=AUTH)
    ).status_code == 404
    assert (await client.get("/")).status_code == 404


async def test_the_request_id_is_echoed_on_every_answer(client: httpx.AsyncClient) -> None:
    ok = await client.post(
        "/access/v1/evaluation", json=call(), headers={**AUTH, "x-request-id": "abc-123"}
    )
    assert ok.headers["x-request-id"] == "abc-123"
    refused = await client.post(
        "/access/v1/evaluation", json=call(), headers={"x-request-id": "r2"}
    )
    assert refused.status_code == 401 and refused.headers["x-request-id"] == "r2"
    bad = await client.post(
        "/access/v1/evaluation", json=call(), headers={**AUTH, "x-request-id": "x" * 300}
    )
    assert bad.status_code == 400 and "x-request-id" not in bad.headers


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (
            {"action": {"name": "notes.write"}, "resource": {"type": "tool", "id": "x"}},
            "subject is required",
        ),
        ({**call(), "subject": {"type": "User"}}, "subject.id must be a non-empty string"),
        ({**call(), "subject": {"type": "", "id": "a"}}, "subject.type"),
        ({**call(), "subject": {"type": "User", "id": 7}}, "subject.id"),
        ({**call(), "action": {}}, "action.name"),
        ({**call(), "action": "notes.write"}, "action must be a JSON object"),
        ({**call(), "resource": {"type": "todo"}}, "resource.id"),
        ({**call(), "context": []}, "context must be a JSON object"),
        ({**call(), "context": {"arguments": [1]}}, "context.arguments must be a JSON object"),
        ({**call(), "subject": {"type": "U", "id": "a", "properties": 1}}, "subject.properties"),
    ],
)
async def test_a_request_missing_or_mistyping_a_key_is_400(
    client: httpx.AsyncClient, body: dict[str, Any], words: str
) -> None:
    answer = await client.post("/access/v1/evaluation", json=body, headers=AUTH)
    assert answer.status_code == 400
    assert words in answer.text


# --- deciding -------------------------------------------------------------------------------


async def test_each_outcome_is_answered_as_the_table_says(client: httpx.AsyncClient) -> None:
    assert await evaluate(client, call("a.txt")) == {
        "decision": True,
        "context": {"reasons": ["allow:notes.write(path=a*)"]},
    }
    assert await evaluate(client, call("b.txt")) == {
        "decision": False,
        "context": {
            "reasons": ["ask:notes.write(path=b*)"],
            "reason": "approval_required",
            "ask": "approval required by ask:notes.write(path=b*)",
        },
    }
    denied = await evaluate(client, call("a.env"))
    assert denied["decision"] is False and denied["context"]["reason"] == "denied"
    assert denied["context"]["reasons"] == ["deny:notes.write(path=*.env)"]
    invalid = await evaluate(client, {**call(), "context": {"arguments": {"path": 3}}})
    assert invalid["decision"] is False
    assert invalid["context"]["reason"] == "invalid_arguments"
    unknown = await evaluate(
        client,
        {**call(), "action": {"name": "no.tool"}, "resource": {"type": "tool", "id": "no.tool"}},
    )
    assert unknown["context"]["reason"] == "unknown_tool"
    assert unknown["context"]["error"]["status"] == 404


async def test_without_asking_the_context_a_decision_is_bare_but_for_errors(
    client: httpx.AsyncClient,
) -> None:
    bare = {k: v for k, v in call("a.txt").items() if k != "options"}
    assert await evaluate(client, bare) == {"decision": True}
    assert await evaluate(client, {**bare, "context": {"arguments": {"path": "b"}}}) == {
        "decision": False  # an ask, to a PEP that cannot ask: a denial
    }
    unknown = {
        **bare,
        "resource": {"type": "tool", "id": "no.tool"},
        "action": {"name": "tools/call"},
    }
    answer = await evaluate(client, unknown)
    assert answer["decision"] is False and answer["context"]["error"]["status"] == 404
    assert set(answer["context"]) == {"error"}
    batch = {**bare, "evaluations": [{}, {"context": {"arguments": {"path": "zz"}}}]}
    assert await evaluate(client, batch, "evaluations") == {
        "evaluations": [{"decision": True}, {"decision": False}]
    }
    bad = await client.post(
        "/access/v1/evaluation", json={**bare, "options": {"decision_context": 1}}, headers=AUTH
    )
    assert bad.status_code == 400 and "decision_context" in bad.text


async def test_an_evaluator_that_fails_is_an_evaluation_error() -> None:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app(Failing())), base_url="http://p"
    ) as c:
        answer = await evaluate(c, call())
    assert answer["decision"] is False
    assert answer["context"]["reason"] == "evaluation_error"
    assert answer["context"]["error"]["status"] == 500


async def test_the_coaz_mcp_default_mapping_names_the_tool_in_the_resource(
    client: httpx.AsyncClient,
) -> None:
    coaz = {**call(), "action": {"name": "tools/call"}}
    assert (await evaluate(client, coaz))["decision"] is True
    other = {**call(), "action": {"name": "files.delete"}}
    answer = await evaluate(client, other)
    assert answer["decision"] is False and answer["context"]["reason"] == "invalid_request"


async def test_another_resource_type_names_type_dot_action_with_its_properties(
    client: httpx.AsyncClient,
) -> None:
    body = {
        "subject": {"type": "User", "id": "alice"},
        "action": {"name": "can_update_todo"},
        "resource": {"type": "todo", "id": "t-1", "properties": {"ownerID": "alice"}},
    }
    assert (await evaluate(client, body))["decision"] is True
    body["resource"] = {"type": "todo", "id": "x-1"}
    assert (await evaluate(client, body))["decision"] is False


async def test_subject_properties_are_attributes_and_parents(client: httpx.AsyncClient) -> None:
    seen: list[AuthzRequest] = []

    class Recording(Evaluator):
        def evaluate(self, request: AuthzRequest) -> Verdict:
            seen.append(request)
            return Verdict.allow("p")

    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app(Recording())), base_url="http://p"
    ) as c:
        parents = [{"type": "Team", "id": "infra"}]
        await evaluate(
            c,
            {
                **call(),
                "subject": {
                    "type": "User",
                    "id": "alice",
                    "properties": {"level": 3, "parents": parents},
                },
            },
        )
        await evaluate(
            c,
            {**call(), "subject": {"type": "User", "id": "bob", "properties": {"parents": ["x"]}}},
        )
    alice, bob = (r.principal for r in seen)
    assert dict(alice.attrs) == {"level": 3} and tuple(alice.parents) == (("Team", "infra"),)
    assert dict(bob.attrs) == {"parents": ["x"]} and tuple(bob.parents) == ()
    # Provenance is never taken from the request: the fail-safe ledger says "tool".
    assert dict(seen[0].provenance["path"])["user"] is False
    assert dict(seen[0].provenance["path"])["tool"] is True


# --- evaluations ------------------------------------------------------------------------------


async def test_evaluations_take_the_top_level_keys_as_defaults(client: httpx.AsyncClient) -> None:
    body = {
        "subject": {"type": "User", "id": "alice"},
        "action": {"name": "notes.write"},
        "resource": {"type": "tool", "id": "notes.write"},
        "evaluations": [
            {"context": {"arguments": {"path": "a1"}}},
            {"context": {"arguments": {"path": "zz"}}},
            {
                "action": {"name": "can_update_todo"},
                "resource": {"type": "todo", "id": "t9"},
            },
        ],
    }
    answer = await evaluate(client, body, "evaluations")
    assert [d["decision"] for d in answer["evaluations"]] == [True, False, True]


async def test_an_empty_top_level_resource_is_only_a_default(client: httpx.AsyncClient) -> None:
    # The interop scenario sends "resource": {} beside evaluations that each name one.
    body = {
        "subject": {"type": "User", "id": "alice"},
        "action": {"name": "can_update_todo"},
        "resource": {},
        "context": {},
        "evaluations": [
            {"resource": {"type": "todo", "id": "t1"}},
            {"resource": {"type": "todo", "id": "x"}},
        ],
    }
    answer = await evaluate(client, body, "evaluations")
    assert [d["decision"] for d in answer["evaluations"]] == [True, False]


async def test_without_evaluations_the_batch_endpoint_answers_one_decision(
    client: httpx.AsyncClient,
) -> None:
    assert (await evaluate(client, call(), "evaluations"))["decision"] is True
    assert (await evaluate(client, {**call(), "evaluations": []}, "evaluations"))[
        "decision"
    ] is True


@pytest.mark.parametrize(
    ("semantic", "expected"),
    [
        ("execute_all", [True, False, True, False]),
        ("deny_on_first_deny", [True, False]),
        ("permit_on_first_permit", [True]),
    ],
)
async def test_the_three_semantics(
    client: httpx.AsyncClient, semantic: str, expected: list[bool]
) -> None:
    body = {
        **call(),
        "options": {"evaluations_semantic": semantic},
        "evaluations": [{"context": {"arguments": {"path": p}}} for p in ("a1", "z2", "a3", "z4")],
    }
    answer = await evaluate(client, body, "evaluations")
    assert [d["decision"] for d in answer["evaluations"]] == expected


async def test_permit_on_first_permit_goes_on_past_denials(client: httpx.AsyncClient) -> None:
    body = {
        **call(),
        "options": {"evaluations_semantic": "permit_on_first_permit"},
        "evaluations": [{"context": {"arguments": {"path": p}}} for p in ("z1", "z2", "a3", "a4")],
    }
    answer = await evaluate(client, body, "evaluations")
    assert [d["decision"] for d in answer["evaluations"]] == [False, False, True]


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({**call(), "evaluations": {}}, "evaluations must be a JSON array"),
        ({**call(), "evaluations": [1]}, "evaluations[0] must be a JSON object"),
        (
            {"evaluations": [{"resource": {"type": "tool", "id": "x"}}]},
            "evaluations[0]: subject is required",
        ),
        (
            {**call(), "options": {"evaluations_semantic": "any"}, "evaluations": [{}]},
            "evaluations_semantic",
        ),
        ({**call(), "options": [], "evaluations": [{}]}, "options must be a JSON object"),
        ({**call(), "evaluations": [{}] * 6}, "at most 5 evaluations"),
    ],
)
async def test_a_malformed_evaluations_request_is_400(body: dict[str, Any], words: str) -> None:
    limited = app(max_evaluations=5)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=limited), base_url="http://p"
    ) as c:
        answer = await c.post("/access/v1/evaluations", json=body, headers=AUTH)
    assert answer.status_code == 400
    assert words in answer.text


def test_a_short_token_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 16"):
        AuthZenPdp(Harness(registry(), evaluator=LocalEvaluator()), token="short")
    assert TOKEN not in repr(app())
