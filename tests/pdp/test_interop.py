"""The OpenID AuthZEN working group's Todo interop scenario against a real ``clearance pdp``.

The requests and expected decisions are the working group's own (``interop/``, unchanged:
see its README); they are sent over HTTP to ``clearance pdp`` deciding with the scenario's
policy written in Cedar (``interop/todo/``), and compared as the working group's runner
compares them.
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


def test_the_scenario_files_are_the_working_groups() -> None:
    readme = (INTEROP / "README.md").read_text(encoding="utf-8")
    for name in FILES:
        digest = hashlib.sha256((INTEROP / name).read_bytes()).hexdigest()
        assert f"{digest}  {name}" in readme, name
    counts = [{k: len(v) for k, v in json.loads((INTEROP / n).read_text()).items()} for n in FILES]
    assert counts == [{"evaluation": 40}, {"evaluation": 40, "evaluations": 3}]


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
