"""Rule R12 at run time (issue 28): an allowed authorization is checked again when the call
comes to run. One whose grant was revoked meanwhile (in this process or another sharing the
store), or that was not used within ``authorization_ttl``, runs nothing; it is withdrawn
(``authorization_withdrawn``), and the call may be decided again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clearance import (
    CallContext,
    Harness,
    MemoryJournal,
    NotAuthorizedError,
    Principal,
    SqliteGrantStore,
    StaleAuthorizationError,
    Tool,
    ToolRegistry,
)
from clearance.harness.journal import parse_event
from clearance.policy import LocalEvaluator
from clearance.tuning import calls_from_events

pytestmark = pytest.mark.anyio

ALICE = Principal("User", "alice")
PROD = {"env": "prod"}


class Deploys:
    def __init__(self) -> None:
        self.ran: list[dict[str, Any]] = []

    def registry(self) -> ToolRegistry:
        def deploy(arguments: dict[str, Any], ctx: CallContext) -> str:
            self.ran.append(dict(arguments))
            return f"deployed {arguments['env']}"

        reg = ToolRegistry()
        reg.register(
            "app",
            [
                Tool(
                    "deploy",
                    deploy,
                    input_schema={
                        "type": "object",
                        "properties": {"env": {"type": "string"}},
                        "required": ["env"],
                        "additionalProperties": False,
                    },
                ),
                Tool("status", deploy, read_only=True),
            ],
        )
        return reg


def harness(deploys: Deploys, **options: Any) -> Harness:
    return Harness(
        deploys.registry(),
        evaluator=LocalEvaluator(allow=["app.status"], ask=["app.deploy"]),
        **options,
    )


async def granted(h: Harness, call_id: str = "c1") -> Any:
    """A session whose ``allow_always`` answer to a first deploy made a grant, and the
    authorization of a second deploy that the grant allows."""
    session = await h.create_session(principal=ALICE, on_permission_ask=lambda a: "allow_always")
    first = await session.authorize("app__deploy", PROD, call_id="c0")
    assert first.allowed
    session.on_permission_ask = None
    auth = await session.authorize("app__deploy", PROD, call_id=call_id, wait=False)
    assert auth.allowed and auth.grant is not None
    return session, auth


def withdrawn(journal: MemoryJournal, call_id: str) -> list[dict[str, Any]]:
    found = [e for e in journal.events(call_id=call_id) if e.type == "authorization_withdrawn"]
    for e in found:
        parse_event(e)  # the documented form
    return [e.data for e in found]


async def test_a_grant_revoked_before_the_run_runs_nothing() -> None:
    deploys, journal = Deploys(), MemoryJournal()
    async with harness(deploys, journal=journal) as h:
        session, auth = await granted(h)
        assert session.holds("c1")
        assert h.grants.revoke(auth.grant)
        assert not session.holds("c1")
        with pytest.raises(StaleAuthorizationError) as raised:
            async with session.execution("c1"):
                raise AssertionError("the body ran on a revoked grant")
        assert raised.value.reason == "revoked" and raised.value.call_id == "c1"
        assert isinstance(raised.value, NotAuthorizedError)
        [record] = withdrawn(journal, "c1")
        assert record["reason"] == "revoked" and record["grant"] == auth.grant
        assert record["qualified_name"] == "app.deploy"
        # `clearance journal` shows it withdrawn, not authorized (it never ran).
        rows = {r.call_id: r for r in calls_from_events(journal.events())}
        assert rows["c1"].status == "withdrawn (revoked)"
        kinds = [e.type for e in journal.events(call_id="c1")]
        assert "tool_started" not in kinds and "tool_finished" not in kinds
        # Its call id is free: decided again, the deploy is asked about again.
        again = await session.authorize("app__deploy", PROD, call_id="c1", wait=False)
        assert again.pending


async def test_run_authorized_on_a_revoked_grant_is_denied() -> None:
    deploys, journal = Deploys(), MemoryJournal()
    async with harness(deploys, journal=journal) as h:
        session, auth = await granted(h)
        h.grants.revoke(auth.grant)
        outcome = await session.run_authorized("c1")
        assert outcome.status == "denied" and "no longer covers" in (outcome.message or "")
        assert deploys.ran == []
        assert withdrawn(journal, "c1")[0]["reason"] == "revoked"
        with pytest.raises(NotAuthorizedError):  # withdrawn: nothing left to run
            await session.run_authorized("c1")


async def test_a_revocation_in_another_process_counts(tmp_path: Path) -> None:
    deploys = Deploys()
    async with harness(deploys, grant_store=SqliteGrantStore(tmp_path / "grants.db")) as h:
        session, auth = await granted(h)
        SqliteGrantStore(tmp_path / "grants.db").revoke(auth.grant)  # another process
        with pytest.raises(StaleAuthorizationError):
            async with session.execution("c1"):
                raise AssertionError("ran")
        assert deploys.ran == []


async def test_another_grant_that_covers_the_call_still_allows_it() -> None:
    """The run is checked by a fresh lookup: a revoked grant authorizes nothing, another
    grant that covers the call does."""
    deploys = Deploys()
    async with harness(deploys) as h:
        session, _ = await granted(h)
        [grant] = h.grants.list()
        h.grants.revoke(grant.grant_id)
        h.grants.add(type(grant)("g_other", grant.principal, grant.tool, grant.scope, "always"))
        outcome = await session.run_authorized("c1")
        assert outcome.status == "ok" and deploys.ran == [PROD]


async def test_an_unreadable_grant_store_counts_as_revoked() -> None:
    deploys = Deploys()
    async with harness(deploys) as h:
        session, _ = await granted(h)

        def broken(*args: Any) -> Any:
            raise OSError("the store is gone")

        h.grants.find = broken  # type: ignore[method-assign,assignment]
        outcome = await session.run_authorized("c1")
        assert outcome.status == "denied" and deploys.ran == []


@pytest.mark.parametrize("how", ["execution", "run_authorized"])
async def test_an_authorization_not_used_in_time_expires(how: str) -> None:
    deploys, journal = Deploys(), MemoryJournal()
    async with harness(deploys, journal=journal, authorization_ttl=1e-9) as h:
        session = await h.create_session(principal=ALICE)
        auth = await session.authorize("app__status", {}, call_id="s1")
        assert auth.allowed and auth.grant is None
        assert not session.holds("s1")
        if how == "execution":
            with pytest.raises(StaleAuthorizationError) as raised:
                async with session.execution("s1"):
                    raise AssertionError("ran")
            assert raised.value.reason == "expired"
            assert "expired" in raised.value.message
        else:
            outcome = await session.run_authorized("s1")
            assert outcome.status == "denied" and "expired" in (outcome.message or "")
        assert deploys.ran == []
        assert withdrawn(journal, "s1")[0]["reason"] == "expired"


async def test_an_authorization_used_in_time_runs() -> None:
    deploys = Deploys()
    async with harness(deploys) as h:
        assert h.authorization_ttl == 300.0
        session = await h.create_session(principal=ALICE)
        await session.authorize("app__status", {}, call_id="s1")
        assert session.holds("s1")
        async with session.execution("s1") as run:
            run.result("fine")
        assert run.outcome is not None and run.outcome.status == "ok"
        assert not session.holds("s1")  # used


async def test_record_result_reports_a_run_that_happened_whatever_the_grant() -> None:
    """``record_result`` is told of a run that already happened: it is recorded (R7), not
    refused; a host that can check before running uses ``execution``."""
    deploys, journal = Deploys(), MemoryJournal()
    async with harness(deploys, journal=journal) as h:
        session, auth = await granted(h)
        h.grants.revoke(auth.grant)
        outcome = await session.record_result("c1", "deployed prod")
        assert outcome.status == "ok"
        assert [e.type for e in journal.events(call_id="c1")][-2:] == [
            "tool_started",
            "tool_finished",
        ]


async def test_withdraw_frees_the_call_id() -> None:
    deploys, journal = Deploys(), MemoryJournal()
    async with harness(deploys, journal=journal) as h:
        session = await h.create_session(principal=ALICE)
        await session.authorize("app__status", {}, call_id="s1")
        await session.withdraw("s1")
        assert withdrawn(journal, "s1")[0]["reason"] == "withdrawn"
        with pytest.raises(NotAuthorizedError):
            await session.withdraw("s1")
        with pytest.raises(NotAuthorizedError):
            async with session.execution("s1"):
                raise AssertionError("ran")
        again = await session.authorize("app__status", {}, call_id="s1")
        assert again.allowed


def test_the_bound_must_be_positive() -> None:
    with pytest.raises(ValueError, match="authorization_ttl"):
        harness(Deploys(), authorization_ttl=0)
