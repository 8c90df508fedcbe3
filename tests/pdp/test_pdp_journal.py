"""Issue 37: ``clearance pdp`` journals each evaluation as a call decision, naming its caller,
and decides with the provenance its caller sends (``context.provenance``, as
``AuthZenEvaluator`` sends it with ``send_provenance``).

The journal is a real SQLite file; the PDP a real ``clearance pdp`` process, or the ASGI
application in process (httpx's ASGI transport) where a journal is closed under it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from authzen_support import start_pdp

from clearance import Harness, Principal, Tool, ToolRegistry
from clearance.harness.journal import MemoryJournal, SqliteJournal
from clearance.pdp import AuthZenPdp, PdpStarted, serve_pdp
from clearance.policy import AuthZenEvaluator
from clearance.policy.base import AuthzRequest, Evaluator, Verdict
from clearance.provenance import ORIGIN_ATTRIBUTES

pytestmark = pytest.mark.anyio

INTEROP = Path(__file__).parent / "interop"
TOKEN = "pdp-token-" + "j" * 22
AUTH = {"authorization": f"Bearer {TOKEN}"}
SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}},
    "required": ["path"],
    "additionalProperties": False,
}
RICK = "CiRmZDA2MTRkMy1jMzlhLTQ3ODEtYjdiZC04Yjk2ZjVhNTEwMGQSBWxvY2Fs"
BETH = "CiRmZDM2MTRkMy1jMzlhLTQ3ODEtYjdiZC04Yjk2ZjVhNTEwMGQSBWxvY2Fs"


def _record(user: bool) -> dict[str, Any]:
    return {
        "sources": ["user"] if user else ["tool:web.fetch"],
        "user": user,
        "tool": not user,
        "made_up": False,
        "untrusted_values": False,
        "made_up_values": False,
        "tool_values": [],
    }


class UsersPathsOnly(Evaluator):
    """Allows ``notes.write`` only of a path the user gave (reads the provenance)."""

    def evaluate(self, request: AuthzRequest) -> Verdict:
        origin = request.provenance.get("path")
        if origin is not None and origin["user"]:
            return Verdict("allow", ("users-path",))
        return Verdict("deny", ("not-the-users-path",))


def registry() -> ToolRegistry:
    reg = ToolRegistry()
    reg.register("notes", [Tool("write", lambda a, c: "written", input_schema=SCHEMA)])
    return reg


def _route(method: str, subject: str, route: str) -> dict[str, Any]:
    return {
        "subject": {"type": "identity", "id": subject},
        "action": {"name": method},
        "resource": {"type": "route", "id": route},
    }


def _config(tmp_path: Path) -> tuple[Path, Path]:
    """A configuration deciding the API gateway scenario, journaling to a file of its own:
    ``(config, journal)``."""
    journal = tmp_path / "journal.db"
    config = tmp_path / "clearance.toml"
    policies = json.dumps(str(INTEROP / "gateway" / "policies"))
    config.write_text(
        f'[evaluator]\nkind = "cedar"\npolicies = {policies}\n'
        f"[journal]\npath = {json.dumps(str(journal))}\n"
    )
    return config, journal


def test_every_evaluation_is_journaled_naming_its_caller(tmp_path: Path) -> None:
    config, journal = _config(tmp_path)
    running = start_pdp(
        "--config", str(config), "--tools", str(INTEROP / "gateway" / "tools.json"), cwd=tmp_path
    )
    try:
        headers = {"Authorization": f"Bearer {running.token}"}
        with httpx.Client(base_url=running.url, headers=headers, timeout=30) as client:
            one = client.post("/access/v1/evaluation", json=_route("POST", RICK, "/todos"))
            two = client.post("/access/v1/evaluation", json=_route("POST", BETH, "/todos"))
            batch = client.post(
                "/access/v1/evaluations",
                json={
                    "subject": {"type": "identity", "id": BETH},
                    "evaluations": [
                        {"action": {"name": "GET"}, "resource": {"type": "route", "id": "/todos"}},
                        {"action": {"name": "PATCH"}, "resource": {"type": "route", "id": "/x"}},
                    ],
                },
            )
            unauthorized = httpx.post(
                f"{running.url}/access/v1/evaluation", json=_route("GET", RICK, "/todos")
            )
        assert [one.json(), two.json()] == [{"decision": True}, {"decision": False}]
        answers = batch.json()["evaluations"]
        assert answers[0] == {"decision": True}
        assert answers[1]["decision"] is False and answers[1]["context"]["error"]["status"] == 404
        assert unauthorized.status_code == 401
    finally:
        running.stop()
    events = list(SqliteJournal(journal).events())
    decided = [e for e in events if e.type == "call_decided"]
    # One record per evaluation, none for the refused request.
    assert len(decided) == 4
    assert all(e.data["outcome"] == "answered" for e in decided)
    caller = {"token": "CLEARANCE_PDP_TOKEN", "address": "127.0.0.1"}
    assert all(e.data["caller"] == caller for e in decided)
    rows = [
        (e.data["principal"], e.data["qualified_name"], e.data["decision"], e.data["reasons"])
        for e in decided
    ]
    assert rows[:3] == [
        (f'identity::"{RICK}"', "route.-p-o-s-t", "allow", ["create-todos"]),
        (f'identity::"{BETH}"', "route.-p-o-s-t", "deny", []),
        (f'identity::"{BETH}"', "route.-g-e-t", "allow", ["read-todos"]),
    ]
    assert decided[0].data["arguments"] == {"id": "/todos"}
    assert decided[3].data["stage"] == "resolve"  # PATCH: no such tool, on record too
    # Each principal's decisions are in a session of its own, opened on the record.
    created = {e.session_id: e.data["principal"] for e in events if e.type == "session_created"}
    assert {created[e.session_id] for e in decided} == {
        f'identity::"{RICK}"',
        f'identity::"{BETH}"',
    }
    assert len({e.call_id for e in decided}) == 4


def test_no_journal_journals_nothing(tmp_path: Path) -> None:
    config, journal = _config(tmp_path)
    running = start_pdp(
        "--config",
        str(config),
        "--tools",
        str(INTEROP / "gateway" / "tools.json"),
        "--no-journal",
        cwd=tmp_path,
    )
    try:
        headers = {"Authorization": f"Bearer {running.token}"}
        answer = httpx.post(
            f"{running.url}/access/v1/evaluation",
            json=_route("GET", RICK, "/todos"),
            headers=headers,
            timeout=30,
        )
        assert answer.json() == {"decision": True}
    finally:
        running.stop()
    assert not journal.exists()


async def test_an_evaluation_that_cannot_be_journaled_is_not_allowed(tmp_path: Path) -> None:
    journal = SqliteJournal(tmp_path / "journal.db")
    harness = Harness(registry(), evaluator=UsersPathsOnly(), journal=journal)
    app = AuthZenPdp(harness, token=TOKEN)
    request = {
        "subject": {"type": "User", "id": "alice"},
        "action": {"name": "notes.write"},
        "resource": {"type": "tool", "id": "notes.write"},
        "context": {"arguments": {"path": "a.md"}, "provenance": {"path": _record(True)}},
    }
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://pdp") as client:
        first = await client.post("/access/v1/evaluation", json=request, headers=AUTH)
        assert first.json() == {"decision": True}
        await journal.aclose()  # the journal is gone: nothing may be allowed unrecorded
        second = await client.post("/access/v1/evaluation", json=request, headers=AUTH)
    answer = second.json()
    assert answer["decision"] is False
    assert answer["context"]["error"]["status"] == 500


@pytest.fixture
async def pdp() -> AsyncIterator[tuple[httpx.AsyncClient, MemoryJournal]]:
    journal = MemoryJournal()
    harness = Harness(registry(), evaluator=UsersPathsOnly(), journal=journal)
    app = AuthZenPdp(harness, token=TOKEN)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://pdp") as client:
        yield client, journal


def _write(path: str, provenance: Any = None) -> dict[str, Any]:
    context: dict[str, Any] = {"arguments": {"path": path}}
    if provenance is not None:
        context["provenance"] = provenance
    return {
        "subject": {"type": "User", "id": "alice"},
        "action": {"name": "notes.write"},
        "resource": {"type": "tool", "id": "notes.write"},
        "context": context,
        "options": {"decision_context": True},
    }


async def test_the_callers_provenance_decides(
    pdp: tuple[httpx.AsyncClient, MemoryJournal],
) -> None:
    client, journal = pdp
    post = client.post
    users = await post(
        "/access/v1/evaluation", json=_write("a.md", {"path": _record(True)}), headers=AUTH
    )
    tools = await post(
        "/access/v1/evaluation", json=_write("a.md", {"path": _record(False)}), headers=AUTH
    )
    none = await post("/access/v1/evaluation", json=_write("a.md"), headers=AUTH)
    assert users.json()["decision"] is True
    assert tools.json()["decision"] is False
    # Without a record the argument counts as from a tool (never the user's).
    assert none.json()["decision"] is False
    decided = [e.data for e in journal.events() if e.type == "call_decided"]
    assert [d["provenance"]["path"]["user"] for d in decided] == [True, False, False]
    assert decided[2]["provenance"]["path"]["sources"] == ["tool:*"]


@pytest.mark.parametrize(
    ("provenance", "message"),
    [
        ([], "context.provenance must be a JSON object"),
        ({"other": _record(True)}, "context.provenance.other: the call has no argument 'other'"),
        ({"path": {"user": True}}, "context.provenance.path must be an object with exactly"),
        ({"path": {**_record(True), "user": "yes"}}, "context.provenance.path.user must be true"),
        ({"path": {**_record(True), "sources": "user"}}, "path.sources must be an array of str"),
        ({"path": {**_record(True), "extra": 1}}, "must be an object with exactly"),
    ],
)
async def test_malformed_provenance_is_refused(
    pdp: tuple[httpx.AsyncClient, MemoryJournal], provenance: Any, message: str
) -> None:
    client, journal = pdp
    answer = await client.post(
        "/access/v1/evaluation", json=_write("a.md", provenance), headers=AUTH
    )
    assert answer.status_code == 400
    assert message in answer.text
    assert not [e for e in journal.events() if e.type == "call_decided"]  # nothing decided


async def test_an_enforcement_point_sending_provenance_is_decided_by_it() -> None:
    """``AuthZenEvaluator(send_provenance=True)`` over real HTTP: a path the user wrote is
    allowed by the PDP's provenance policy, the same path from nowhere is not."""
    pdp_harness = Harness(registry(), evaluator=UsersPathsOnly(), journal=MemoryJournal())
    app = AuthZenPdp(pdp_harness, token=TOKEN)
    seen: list[PdpStarted] = []
    started = anyio.Event()

    def ready(info: PdpStarted) -> None:
        seen.append(info)
        started.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve_pdp(app, port=0, ready=ready))
        await started.wait()
        evaluator = AuthZenEvaluator(seen[0].url, token=TOKEN, send_provenance=True)
        async with evaluator, Harness(registry(), evaluator=evaluator) as harness:
            session = await harness.create_session(principal=Principal("User", "alice"))
            session.add_message("user", "please write notes/today.md")
            told = await session.call_tool("notes__write", {"path": "notes/today.md"})
            made_up = await session.call_tool("notes__write", {"path": "notes/other.md"})
        tg.cancel_scope.cancel()
    assert told.ok, told
    assert made_up.status == "denied"
    decided = [e.data for e in pdp_harness.journal.events() if e.type == "call_decided"]
    assert [d["decision"] for d in decided] == ["allow", "deny"]
    assert set(decided[0]["provenance"]["path"]) == set(ORIGIN_ATTRIBUTES)


async def test_the_journaling_sessions_are_bounded() -> None:
    """One session per caller and principal, at most ``max_sessions`` open: the least
    recently used is closed (on the record) when another is needed."""
    journal = MemoryJournal()
    harness = Harness(registry(), evaluator=UsersPathsOnly(), journal=journal)
    app = AuthZenPdp(harness, token=TOKEN, max_sessions=2)
    transport = httpx.ASGITransport(app=app)

    def as_user(name: str) -> dict[str, Any]:
        return {**_write("a.md", {"path": _record(True)}), "subject": {"type": "User", "id": name}}

    async with httpx.AsyncClient(transport=transport, base_url="http://pdp") as client:
        for name in ("ann", "bob", "ann", "cid", "ann"):
            answer = await client.post("/access/v1/evaluation", json=as_user(name), headers=AUTH)
            assert answer.json()["decision"] is True
    events = list(journal.events())
    created = {e.session_id: e.data["principal"] for e in events if e.type == "session_created"}
    closed = [created[e.session_id] for e in events if e.type == "session_closed"]
    # bob's was the least recently used when cid came; ann's stayed open throughout.
    assert sorted(created.values()) == ['User::"ann"', 'User::"bob"', 'User::"cid"']
    assert closed == ['User::"bob"']
    assert len(harness.sessions) == 2
