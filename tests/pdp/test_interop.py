"""The OpenID AuthZEN working group's interop scenarios against a real ``clearance pdp``:
the Todo scenario and the API gateway scenario.

The requests and expected decisions are the working group's own (``interop/``, unchanged:
see its README); they are sent over HTTP to ``clearance pdp`` deciding with each scenario's
policy written in Cedar (``interop/todo/``, ``interop/gateway/``), and compared as the
working group's runners compare them. The gateway scenario's actions are HTTP methods on
routes (``GET`` on ``route``): they name the tools ``route.-g-e-t`` and so on (the
reversible spelling of ``clearance.pdp.tool_part``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from authzen_support import RunningPdp, start_pdp

INTEROP = Path(__file__).parent / "interop"
FILES = ("decisions-authorization-api-1_0-01.json", "decisions-authorization-api-1_0-02.json")
GATEWAY = "decisions-api-gateway.json"


def _cases() -> list[Any]:
    cases = []
    for name in FILES:
        data = json.loads((INTEROP / name).read_text(encoding="utf-8"))
        for endpoint in ("evaluation", "evaluations"):
            for index, case in enumerate(data.get(endpoint, [])):
                cases.append(pytest.param(endpoint, case, id=f"{name[-7:-5]}-{endpoint}-{index}"))
    return cases


@pytest.fixture(scope="module")
def todo_pdp() -> Iterator[RunningPdp]:
    running = start_pdp(
        "--config", "todo/clearance.toml", "--tools", "todo/tools.json", cwd=INTEROP
    )
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def client(todo_pdp: RunningPdp) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {todo_pdp.token}"}
    with httpx.Client(base_url=todo_pdp.url, headers=headers, timeout=30) as c:
        yield c


@pytest.fixture(scope="module")
def gateway_client() -> Iterator[httpx.Client]:
    running = start_pdp(
        "--config", "gateway/clearance.toml", "--tools", "gateway/tools.json", cwd=INTEROP
    )
    headers = {"Authorization": f"Bearer {running.token}"}
    try:
        with httpx.Client(base_url=running.url, headers=headers, timeout=30) as c:
            yield c
    finally:
        running.stop()


def _gateway_cases() -> list[Any]:
    data = json.loads((INTEROP / GATEWAY).read_text(encoding="utf-8"))
    return [pytest.param(case, id=f"gateway-{i}") for i, case in enumerate(data["evaluation"])]


def test_the_scenario_files_are_the_working_groups() -> None:
    readme = (INTEROP / "README.md").read_text(encoding="utf-8")
    for name in FILES:
        digest = hashlib.sha256((INTEROP / name).read_bytes()).hexdigest()
        assert f"{digest}  {name}" in readme, name
    counts = [{k: len(v) for k, v in json.loads((INTEROP / n).read_text()).items()} for n in FILES]
    assert counts == [{"evaluation": 40}, {"evaluation": 40, "evaluations": 3}]
    digest = hashlib.sha256((INTEROP / GATEWAY).read_bytes()).hexdigest()
    assert f"{digest}  {GATEWAY}" in readme
    gateway = json.loads((INTEROP / GATEWAY).read_text())
    assert {k: len(v) for k, v in gateway.items()} == {"evaluation": 25}
    # Both answers occur: a PDP that answers one way throughout fails the scenario.
    assert {case["expected"] for case in gateway["evaluation"]} == {True, False}


@pytest.mark.parametrize(("endpoint", "case"), _cases())
def test_the_interop_decision(client: httpx.Client, endpoint: str, case: dict[str, Any]) -> None:
    answer = client.post(f"/access/v1/{endpoint}", json=case["request"])
    assert answer.status_code == 200, answer.text
    data = answer.json()
    # As interop/authzen-todo-backend/test/runner.ts compares.
    got = data.get("decision") or False if endpoint == "evaluation" else data.get("evaluations")
    assert json.dumps(got) == json.dumps(case["expected"]), (case["request"], data)


def test_the_scenario_needs_the_token(client: httpx.Client, todo_pdp: RunningPdp) -> None:
    request = json.loads((INTEROP / FILES[1]).read_text())["evaluation"][0]["request"]
    answer = httpx.post(f"{todo_pdp.url}/access/v1/evaluation", json=request, timeout=30)
    assert answer.status_code == 401


@pytest.mark.parametrize("case", _gateway_cases())
def test_the_api_gateway_decision(gateway_client: httpx.Client, case: dict[str, Any]) -> None:
    answer = gateway_client.post("/access/v1/evaluation", json=case["request"])
    assert answer.status_code == 200, answer.text
    # As interop/authzen-api-gateways/test-harness/test/runner.ts compares.
    got = answer.json().get("decision") or False
    assert json.dumps(got) == json.dumps(case["expected"]), (case["request"], answer.json())


def test_an_api_gateway_request_names_its_tool_reversibly(gateway_client: httpx.Client) -> None:
    """What the gateway scenario asks is the tool ``route.-g-e-t`` with the route as its
    argument, and a method no tool is declared for is an unknown tool, answered false."""
    request = json.loads((INTEROP / GATEWAY).read_text())["evaluation"][0]["request"]
    request = {**request, "options": {"decision_context": True}}
    answer = gateway_client.post("/access/v1/evaluation", json=request).json()
    assert answer["decision"] is True and answer["context"]["reasons"] == ["read-users"]
    patch = {**request, "action": {"name": "PATCH"}}
    refused = gateway_client.post("/access/v1/evaluation", json=patch).json()
    assert refused["decision"] is False
    assert refused["context"]["reason"] == "unknown_tool"
    assert "route.-p-a-t-c-h" in refused["context"]["message"]
