"""Builders shared by the tests: registries with handlers that record what they saw."""

from __future__ import annotations

from typing import Any

from clearance import CallContext, Harness, Principal, Tool, ToolRegistry
from clearance.harness.approvers import Approvers, Credential
from clearance.harness.journal import MemoryJournal

ALICE = Principal("User", "alice")
BOB = Principal("User", "bob")

PATH_SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}},
    "required": ["path"],
    "additionalProperties": False,
}
WRITE_SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
    "required": ["path", "content"],
    "additionalProperties": False,
}
COMMAND_SCHEMA = {
    "type": "object",
    "properties": {"command": {"type": "string"}},
    "required": ["command"],
    "additionalProperties": False,
}


class Recorder:
    """Handlers that append (qualified name, arguments) to ``calls`` when they run."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def handler(self, qualified: str) -> Any:
        async def run(arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
            self.calls.append((qualified, arguments))
            return {"ran": qualified}

        return run

    def names(self) -> list[str]:
        return [q for q, _ in self.calls]


def coding_registry(recorder: Recorder, *, root: Any = None) -> ToolRegistry:
    """``files.read_file``, ``files.write_file``, ``files.list_dir`` and ``shell.run``.

    Without ``root`` the tools declare no facts, so every argument of a call decides it
    (a grant wider than the exact call is never offered for ``write_file``: its
    ``content`` would be free). With ``root`` their ``path`` is a declared path fact under
    it: the path alone decides, and a directory prefix can be granted."""
    facts = {"/path": "path"} if root is not None else {}
    registry = ToolRegistry()
    registry.register(
        "files",
        [
            Tool(
                "read_file",
                recorder.handler("files.read_file"),
                input_schema=PATH_SCHEMA,
                read_only=True,
                root=root,
                facts=facts,
            ),
            Tool(
                "write_file",
                recorder.handler("files.write_file"),
                input_schema=WRITE_SCHEMA,
                root=root,
                facts=facts,
            ),
            Tool(
                "list_dir",
                recorder.handler("files.list_dir"),
                input_schema=PATH_SCHEMA,
                read_only=True,
                root=root,
                facts=facts,
            ),
        ],
    )
    registry.register(
        "shell", [Tool("run", recorder.handler("shell.run"), input_schema=COMMAND_SCHEMA)]
    )
    return registry


TOOLS = ["files.read_file", "files.write_file", "files.list_dir", "shell.run"]


def harness(registry: ToolRegistry, **options: Any) -> Harness:
    options.setdefault("journal", MemoryJournal())
    return Harness(registry, **options)


def approver(name: str) -> Credential:
    """The credential of the approver ``name`` in the tests' approver directory (the one
    the CLI processes the tests start use too), registered on first use."""
    keyring = Approvers.default()
    found = keyring.credential(name)
    return found if found is not None else keyring.add(name)


async def cli_answer(
    db: Any, ask_id: str, *, answer: str = "allow_once", approver_name: str = "carol"
) -> str:
    """Answer ``ask_id`` in the ask store ``db`` from another process, as a person does:
    the real ``clearance asks approve`` (or ``deny``) in a subprocess, sealed with the
    approver's key (registered first). Returns what it printed.

    Raises:
        AssertionError: the command failed.
    """
    import os
    import sys

    import anyio

    approver(approver_name)
    args = ["deny", ask_id] if answer == "deny" else ["approve", ask_id, "--answer", answer]
    args += ["--db", str(db), "--approver", approver_name]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLEARANCE")}
    done = await anyio.run_process(
        [sys.executable, "-m", "clearance", "asks", *args],
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()
