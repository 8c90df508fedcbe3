"""What the process toolset's tests share: a registry of the real tools, a session's calls,
and the scripts they run."""

from __future__ import annotations

import re
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from clearance import CallContext, Principal, ToolRegistry
from clearance.harness.outcomes import CallOutcome
from clearance.harness.session import Session
from clearance.toolsets import register_process
from clearance.toolsets.confinement import Confinement, landlock_abi
from clearance.toolsets.process import ProcessLimits

PY = sys.executable
CORRELATION = re.compile(r" \(correlation id [0-9a-f]+\)")
LANDLOCK = landlock_abi() >= 1

ECHO = "import sys\nprint('ready', flush=True)\nfor line in sys.stdin:\n    print('got', line.strip(), flush=True)\n"
"""Prints ``ready``, then echoes each line of its input."""


def python(code: str) -> str:
    return shlex.join([PY, "-c", code])


def script(work: Path, name: str, code: str) -> str:
    """A script in the workspace (commands may not hold a newline), as a command."""
    (work / name).write_text(code)
    return shlex.join([PY, name])


def confinement() -> Confinement:
    return Confinement() if LANDLOCK else Confinement(kind="none")


def registry(work: Path, **limits: Any) -> ToolRegistry:
    reg = ToolRegistry()
    register_process(
        reg,
        work,
        limits=ProcessLimits(**{"grace": 0.5, **limits}),
        confinement=confinement(),
    )
    return reg


def same_words(one: str, other: str) -> bool:
    """Whether two outcome texts say the same but for their correlation ids."""
    return CORRELATION.sub("", one) == CORRELATION.sub("", other)


def content(outcome: CallOutcome) -> dict[str, Any]:
    assert outcome.result is not None, outcome
    found = outcome.result.structured_content
    assert isinstance(found, dict), outcome
    return found


class Calls:
    """One session's process calls, each with a fresh call id."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.n = 0

    async def __call__(self, tool: str, **arguments: Any) -> CallOutcome:
        self.n += 1
        return await self.session.call_tool(
            f"process__{tool}", arguments, call_id=f"{self.session.id}-{self.n}"
        )

    async def start(self, command: str) -> dict[str, Any]:
        outcome = await self("start", command=command)
        assert outcome.status == "ok", outcome.text
        return content(outcome)

    async def read_until(self, process_id: str, text: str, within: float = 10) -> str:
        seen = ""
        deadline = time.monotonic() + within
        while text not in seen and time.monotonic() < deadline:
            seen += content(await self("read", id=process_id, wait=1))["output"]
        return seen


def context(session_id: str) -> CallContext:
    """The context a handler is called with in ``session_id`` (handlers called directly)."""
    return CallContext(
        session_id=session_id,
        turn_id=None,
        call_id="c",
        qualified_name="process.start",
        model_alias="process__start",
        principal=Principal("User", "alice"),
    )
