"""clearance as a library: the coding Cedar pack over the bundled file and shell tools."""

import tempfile

import anyio

from clearance import Harness, Principal, ToolRegistry
from clearance.config import pack_path
from clearance.policy.cedar import CedarEvaluator
from clearance.toolsets.files import files_guardrail, register_files
from clearance.toolsets.shell import register_shell

CALLS = [
    ("files__write_file", {"path": "notes.md", "content": "hello"}),  # asked, allowed once
    ("files__read_file", {"path": "notes.md"}),  # allowed by read-freely
    ("files__read_file", {"path": "../etc/passwd"}),  # blocked by the PathScope guardrail
    ("shell__run", {"command": "ls; rm -rf ~"}),  # denied by shell-no-chaining
]


async def main(workspace: str) -> None:
    registry = ToolRegistry()
    register_files(registry, workspace)  # files.read_file, files.write_file, ...
    register_shell(registry, workspace, allowed_programs=["git", "ls"])  # shell.run
    evaluator = CedarEvaluator.from_directory(pack_path("coding"))
    guards = [files_guardrail(workspace)]
    async with Harness(registry, evaluator=evaluator, argument_guardrails=guards) as harness:
        session = await harness.create_session(
            principal=Principal("User", "alice"), on_permission_ask=lambda ask: "allow_once"
        )
        for name, args in CALLS:
            outcome = await session.call_tool(name, args)
            print(f"{name:18} {outcome.status:8} {', '.join(outcome.reasons)}")


with tempfile.TemporaryDirectory() as tmp:
    anyio.run(main, tmp)
