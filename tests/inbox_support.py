"""What the inbox tests share: a host whose asks wait in a real SQLite ask store, hostile
store text, and the token a person's link carries (sent as a bearer header, as the page's
script does)."""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from clearance import Harness, Principal, Tool, ToolRegistry
from clearance.harness.ask_store import StoredAsk
from clearance.harness.ask_store_sqlite import SqliteAskStore
from clearance.harness.grants import GrantScope
from clearance.harness.grants_sqlite import SqliteGrantStore
from clearance.harness.journal import MemoryJournal
from clearance.policy import LocalEvaluator

ALICE = Principal("User", "alice")
WRITE_SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
    "required": ["path", "content"],
    "additionalProperties": False,
}

HOSTILE = (
    "<script>window.__pwned = 1</script>"
    '"><img src=x onerror="window.__pwned = 2">'
    "' onmouseover='window.__pwned = 3"
    "\u202etxt.exe\u2066 \x1b[2J &amp; </textarea></pre>"
)
"""Text a model could choose: markup, attribute breakouts, bidi and control characters."""


class Host:
    """A host: tools that record their runs, asks in a SQLite store shared by file."""

    def __init__(self, db: Path, workspace: Path) -> None:
        self.db = db
        self.ran: list[dict[str, Any]] = []
        self.journal = MemoryJournal()
        registry = ToolRegistry()
        registry.register(
            "notes",
            [
                Tool(
                    "write",
                    self._write,
                    input_schema=WRITE_SCHEMA,
                    root=str(workspace),
                    facts={"/path": "path"},
                )
            ],
        )
        self.asks = SqliteAskStore(db)
        self.harness = Harness(
            registry,
            evaluator=LocalEvaluator(ask=["notes.write"]),
            ask_store=self.asks,
            grant_store=SqliteGrantStore(db),
            journal=self.journal,
        )

    def _write(self, arguments: dict[str, Any], ctx: Any) -> str:
        self.ran.append(dict(arguments))
        return "written"

    def records(self, kind: str, call_id: str | None = None) -> list[dict[str, Any]]:
        return [dict(e.data) for e in self.journal.events(call_id=call_id) if e.type == kind]


def hostile_ask(ask_id: str = "ask_hostile") -> StoredAsk:
    """An ask with hostile text in every field the inbox shows."""
    return StoredAsk(
        ask_id=ask_id,
        principal=f'User::"{HOSTILE}"',
        tool=f"notes.{HOSTILE}",
        call_id=HOSTILE,
        session_id=HOSTILE,
        arguments_hash="h",
        arguments={"path": HOSTILE, HOSTILE: HOSTILE, "content": HOSTILE * 20},
        reason=HOSTILE,
        policies=(HOSTILE, "ask:notes.write"),
        suggestions=(
            GrantScope.exact({"path": HOSTILE}),
            GrantScope.prefix_of(f"/{HOSTILE}", "notes/"),
            GrantScope.tool(),
        ),
        deciding=("path", HOSTILE),
        facts={"path": {"path": HOSTILE}, HOSTILE: [HOSTILE]},
    )


def token_of(link: str) -> str:
    """The token a person's link carries after ``#``."""
    fragment = link.partition("#")[2]
    assert fragment.startswith("token="), link
    return fragment.removeprefix("token=")


def bearer(token: str) -> dict[str, str]:
    """The header the inbox page sends with every request."""
    return {"authorization": f"Bearer {token}"}


def cli_env() -> dict[str, str]:
    """The environment of a ``clearance`` subprocess: this one, without CLEARANCE_*."""
    return {k: v for k, v in os.environ.items() if not k.startswith("CLEARANCE")}


@dataclass
class Running:
    """A ``clearance inbox`` process and what it printed."""

    process: subprocess.Popen[str]
    url: str
    links: dict[str, str]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.communicate(timeout=10)


_LINK = re.compile(r"^  (?P<user>[^:]+): (?P<link>http://127\.0\.0\.1:\d+/#token=\S+)$")


def start_inbox(*args: str, cwd: Path, timeout: float = 30) -> Running:
    """Start ``clearance inbox ARGS`` and read what it prints until it listens."""
    process = subprocess.Popen(
        [sys.executable, "-m", "clearance", "inbox", *args],
        cwd=cwd,
        env=cli_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:  # a thread: a pipe's buffered lines are invisible to select()
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
        lines.put("")

    threading.Thread(target=read, daemon=True).start()
    url, links = "", {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            continue
        if not line:
            break
        if line.startswith("clearance inbox on "):
            url = line.split()[3]
        elif found := _LINK.match(line.rstrip("\n")):
            links[found["user"]] = found["link"]
        elif line.startswith("Stop with Ctrl-C"):
            return Running(process, url, links)
    process.kill()
    _, err = process.communicate(timeout=10)
    raise AssertionError(f"clearance inbox did not start: {err}")


@asynccontextmanager
async def serving(inbox: Any) -> AsyncIterator[Any]:
    """``inbox.serve`` on a free port in this process (its watcher running) until the
    block ends: what it started on (``InboxStarted``: the address and each link)."""
    started: list[Any] = []
    listening = anyio.Event()

    def ready(at: Any) -> None:
        started.append(at)
        listening.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: inbox.serve(port=0, ready=ready))
        with anyio.fail_after(10):
            await listening.wait()
        yield started[0]
        tg.cancel_scope.cancel()
