"""Issue 28, rule R13: an agent with a shell in its workspace answers its own ask.

Before: the gateway's pending result told the model ``clearance asks approve ID --db ...``,
the CLI authenticated nobody and took any ``--by``: the agent approved its own
``bank.transfer`` and the journal said ``by=alice via=cli``.

Here the agent is what a shell in its workspace can do: run ``clearance`` (and Python)
with its own ``HOME`` and config directory, and, at worst, read and write the ask store's
SQLite file (it knows the path). The person's approver key is in their config directory,
outside the workspace. Every route the agent has must leave the call unauthorized, and
the person's own answer must still work and be journaled as theirs.
"""

from __future__ import annotations

import json
import os
import shlex
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from clearance import Harness, MemoryJournal, Principal, Tool, ToolRegistry
from clearance.harness.approvers import Approvers
from clearance.harness.ask_store_sqlite import SqliteAskStore
from clearance.harness.grants import arguments_hash
from clearance.harness.grants_sqlite import SqliteGrantStore
from clearance.policy import LocalEvaluator, NoopEvaluator
from clearance.toolsets import register_shell
from clearance.toolsets.confinement import landlock_abi

pytestmark = pytest.mark.anyio

ALICE = Principal("User", "alice")
PAY_MALLORY = {"iban": "DE00 MALLORY", "amount": 9000}
PAY_RENT = {"iban": "DE00 LANDLORD", "amount": 900}
RESUME = "agent:bank.transfer"


@dataclass
class World:
    db: Path
    person: Path
    """The person's config directory (XDG_CONFIG_HOME), outside the workspace."""
    workspace: Path
    journal: MemoryJournal
    ran: list[dict[str, Any]]

    def env(self, config_home: Path, home: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CLEARANCE")}
        env.update(HOME=str(home), XDG_CONFIG_HOME=str(config_home))
        return env

    def agent(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``clearance ARGS`` as the agent's shell runs it: in the workspace, its own HOME."""
        return self._run(args, self.env(self.workspace / ".config", self.workspace))

    def person_says(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``clearance ARGS`` in the person's own terminal."""
        return self._run(args, self.env(self.person, self.person.parent))

    def _run(self, args: tuple[str, ...], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "clearance", *args],
            cwd=self.workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )

    def row(self, ask_id: str) -> tuple[str, dict[str, Any]]:
        with sqlite3.connect(self.db) as db:
            status, body = db.execute(
                "SELECT status, body FROM asks WHERE ask_id = ?", (ask_id,)
            ).fetchone()
        return status, json.loads(body)

    def write_row(self, ask_id: str, status: str, body: dict[str, Any], **columns: str) -> None:
        """What the agent's shell does to the store file: any row, any value."""
        sets = ", ".join(f"{c} = ?" for c in ("status", "body", *columns))
        with sqlite3.connect(self.db) as db:
            db.execute(
                f"UPDATE asks SET {sets} WHERE ask_id = ?",
                (status, json.dumps(body), *columns.values(), ask_id),
            )

    def allowed_decisions(self) -> list[dict[str, Any]]:
        return [
            dict(e.data)
            for e in self.journal.events()
            if e.type == "permission_decided" and e.data["answer"] not in ("deny", "pending")
        ]


@pytest.fixture
def world(tmp_path: Path) -> World:
    person = tmp_path / "person" / ".config"
    Approvers(person / "clearance").add("alice")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    state = tmp_path / "state"
    state.mkdir()
    return World(state / "clearance.db", person, workspace, MemoryJournal(), [])


@asynccontextmanager
async def host(world: World) -> AsyncIterator[Any]:
    """The host: a session whose ``bank.transfer`` asks, over the SQLite store, with the
    person's keyring."""

    def transfer(arguments: dict[str, Any], ctx: Any) -> str:
        world.ran.append(dict(arguments))
        return "paid"

    registry = ToolRegistry()
    schema = {
        "type": "object",
        "properties": {"iban": {"type": "string"}, "amount": {"type": "integer"}},
        "required": ["iban", "amount"],
        "additionalProperties": False,
    }
    registry.register("bank", [Tool("transfer", transfer, input_schema=schema)])
    asks = SqliteAskStore(world.db, approvers=Approvers(world.person / "clearance"))
    grants = SqliteGrantStore(world.db)
    try:
        async with Harness(
            registry,
            evaluator=LocalEvaluator(ask=["bank.transfer"]),
            ask_store=asks,
            grant_store=grants,
            journal=world.journal,
        ) as harness:
            yield await harness.create_session(principal=ALICE)
    finally:
        asks.close()
        grants.close()


_CALLS = iter(range(1_000_000))


async def attempt(session: Any, arguments: dict[str, Any]) -> Any:
    """The agent's call of ``bank.transfer`` (a new request each time, found again by its
    arguments, as through the gateway)."""
    return await session.authorize(
        "bank.transfer", arguments, call_id=f"c{next(_CALLS)}", resume_key=RESUME
    )


async def test_the_cli_without_the_persons_key_answers_nothing(world: World) -> None:
    async with host(world) as session:
        paused = await attempt(session, PAY_MALLORY)
        assert paused.pending and paused.ask_id
        for argv in (
            ("asks", "approve", paused.ask_id, "--db", str(world.db)),
            ("asks", "approve", paused.ask_id, "--db", str(world.db), "--by", "alice"),
            ("asks", "approve", paused.ask_id, "--db", str(world.db), "--approver", "alice"),
        ):
            done = world.agent(*argv)
            assert done.returncode == 2 and "nothing answered" in done.stderr, done
        assert world.row(paused.ask_id)[0] == "pending"

        # A keyring of its own: the CLI it runs believes it; the host does not.
        assert world.agent("approvers", "add", "alice").returncode == 0
        done = world.agent("asks", "approve", paused.ask_id, "--db", str(world.db), "--by", "alice")
        assert done.returncode == 0, done.stderr
        again = await attempt(session, PAY_MALLORY)
        assert not again.allowed and again.pending and again.ask_id != paused.ask_id
        status, body = world.row(paused.ask_id)
        assert (status, body["closed_why"]) == ("closed", "unverified answer")
    assert world.ran == [] and world.allowed_decisions() == []


async def test_an_answer_written_into_the_store_is_no_answer(world: World) -> None:
    async with host(world) as session:
        paused = await attempt(session, PAY_MALLORY)
        assert paused.ask_id
        _, body = world.row(paused.ask_id)
        decision = {
            "decision": "allow_always",
            "scope": None,
            "message": None,
            "expires_in": None,
            "decided_by": "alice",
            "via": "cli",
        }
        for seal in (None, {"approver": "alice", "mac": "00" * 32}, {"approver": "@host"}):
            world.write_row(
                paused.ask_id,
                "answered",
                {**body, "status": "answered", "decision": decision, "seal": seal,
                 "answered_by": "alice", "via": "cli"},
            )  # fmt: skip
            tried = await attempt(session, PAY_MALLORY)
            assert not tried.allowed, seal
            # The forged answer was closed: the call is asked anew.
            assert world.row(paused.ask_id)[0] == "closed"
            assert tried.ask_id != paused.ask_id
            paused = tried
            _, body = world.row(paused.ask_id)
    assert world.ran == [] and world.allowed_decisions() == []


async def test_a_real_answer_cannot_be_moved_to_another_call_or_replayed(world: World) -> None:
    async with host(world) as session:
        rent = await attempt(session, PAY_RENT)
        mallory = await attempt(session, PAY_MALLORY)
        assert rent.ask_id and mallory.ask_id
        # The person approves the rent, once.
        said = world.person_says("asks", "approve", rent.ask_id, "--db", str(world.db))
        assert said.returncode == 0, said.stderr
        _, approved = world.row(rent.ask_id)
        assert approved["seal"]["approver"] == "alice"

        # Its seal copied onto Mallory's ask: no answer.
        _, theirs = world.row(mallory.ask_id)
        copied = {k: approved[k] for k in ("decision", "seal", "answered_by", "via", "answered_at")}
        world.write_row(mallory.ask_id, "answered", {**theirs, **copied, "status": "answered"})
        assert not (await attempt(session, PAY_MALLORY)).allowed

        # The rent's row re-pointed at Mallory's call (the index columns the store finds
        # a call by): the seal covers the call, so no answer for Mallory.
        world.write_row(
            rent.ask_id,
            "answered",
            approved,
            arguments_hash=arguments_hash(PAY_MALLORY),
        )
        assert not (await attempt(session, PAY_MALLORY)).allowed
        world.write_row(rent.ask_id, "answered", approved, arguments_hash=arguments_hash(PAY_RENT))

        # The rent goes through once; its row set back to answered does not pay it twice.
        paid = await attempt(session, PAY_RENT)
        assert paid.allowed and paid.answered_by == "alice"
        await session.run_authorized(paid.call_id)
        world.write_row(rent.ask_id, "answered", approved)
        replayed = await attempt(session, PAY_RENT)
        assert not replayed.allowed and replayed.pending
    assert world.ran == [PAY_RENT]
    (decided,) = world.allowed_decisions()
    assert (decided["by"], decided["via"]) == ("alice", "cli")


async def test_the_person_answers_as_themselves_only(world: World) -> None:
    Approvers(world.person / "clearance").add("bob")
    async with host(world) as session:
        paused = await attempt(session, PAY_RENT)
        assert paused.ask_id
        # alice cannot sign as bob without bob's key choosing (--by picks the key).
        said = world.person_says("asks", "approve", paused.ask_id, "--db", str(world.db))
        assert said.returncode == 2 and "several approvers" in said.stderr
        said = world.person_says(
            "asks", "approve", paused.ask_id, "--db", str(world.db), "--by", "carol"
        )
        assert said.returncode == 2 and "no approver key for 'carol'" in said.stderr
        said = world.person_says(
            "asks", "approve", paused.ask_id, "--db", str(world.db), "--by", "bob"
        )
        assert said.returncode == 0, said.stderr
        allowed = await attempt(session, PAY_RENT)
        assert allowed.allowed and allowed.answered_by == "bob"
    (decided,) = world.allowed_decisions()
    assert (decided["by"], decided["via"]) == ("bob", "cli")


@pytest.mark.skipif(landlock_abi() < 1, reason="the kernel offers no Landlock")
async def test_the_bundled_shell_tool_reaches_no_key_and_no_store(world: World) -> None:
    """The agent's own shell tool (``shell.run``, confined under Landlock, rule R15) with
    the worst policy there is (the noop evaluator allows every command): it can neither
    read the person's key, nor run ``clearance asks approve`` with it, nor write the store."""
    key = world.person / "clearance" / "approvers" / "alice.key"
    agent = ToolRegistry()
    register_shell(agent, world.workspace, allowed_programs=None)
    async with host(world) as session:
        paused = await attempt(session, PAY_MALLORY)
        assert paused.ask_id
        forge = (
            f"import sqlite3; db = sqlite3.connect({str(world.db)!r}); "
            "db.execute(\"UPDATE asks SET status = 'answered'\"); db.commit()"
        )
        commands = [
            f"cat {shlex.quote(str(key))}",
            shlex.join([sys.executable, "-c", forge]),
            # pointed at the person's own config directory
            shlex.join(
                [
                    "env",
                    f"XDG_CONFIG_HOME={world.person}",
                    sys.executable,
                    "-m",
                    "clearance",
                    "asks",
                    "approve",
                    paused.ask_id,
                    "--db",
                    str(world.db),
                    "--by",
                    "alice",
                ]
            ),
        ]
        async with Harness(agent, evaluator=NoopEvaluator()) as shell_host:
            shell = await shell_host.create_session(principal=ALICE)
            for n, command in enumerate(commands):
                done = await shell.call_tool("shell__run", {"command": command}, call_id=f"s{n}")
                result = done.result.structured_content if done.result is not None else None
                # It ran (confined) or was refused; either way nothing came of it.
                if isinstance(result, dict):
                    assert result["exit_code"] != 0, (command, result)
                    assert key.read_text().strip() not in str(result)
        assert world.row(paused.ask_id)[0] == "pending"
        assert (await attempt(session, PAY_MALLORY)).pending
    assert world.ran == [] and world.allowed_decisions() == []
