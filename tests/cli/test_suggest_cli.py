"""``clearance suggest`` never loosens (issue 15), through the real console script: calls that
were asked and approved in a real journal keep an ask, and near-identical exact rules
(commit messages ``x``, ``y``, ``m``) come out as one rule with its scope written out."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
from support import Recorder, coding_registry

from clearance import Harness, Principal
from clearance.harness.journal_sqlite import SqliteJournal
from clearance.policy import LocalEvaluator


def clearance(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "clearance", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _record_journal(path: Path) -> None:
    """Reads allowed by the rules; writes asked, approved under docs/ and denied elsewhere."""

    async def record() -> None:
        evaluator = LocalEvaluator(allow=["files.read_file"], ask=["files.write_file"])
        async with Harness(
            coding_registry(Recorder()), evaluator=evaluator, journal=SqliteJournal(path)
        ) as harness:
            session = await harness.create_session(
                principal=Principal("User", "alice"),
                on_permission_ask=lambda ask: (
                    "allow_once" if ask.arguments["path"].startswith("docs/") else "deny"
                ),
            )
            for read in ("src/a/x.py", "src/b/y.py"):
                await session.call_tool("files.read_file", {"path": read})
            for write in ("docs/a/1.md", "docs/b/2.md", "etc/passwd"):
                await session.call_tool("files.write_file", {"path": write, "content": "x"})

    anyio.run(record)


def test_asked_and_approved_calls_keep_an_ask(tmp_path: Path) -> None:
    _record_journal(tmp_path / "journal.db")
    done = clearance("suggest", "journal.db", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "// 1 of them keep an ask: their calls were asked before they were approved" in out
    assert out.count('@ask("asked and approved in the recorded calls")') == 1
    ask_policy = out.split('@ask("asked and approved in the recorded calls")', 1)[1]
    assert ask_policy.lstrip().startswith(
        'permit (principal == User::"alice", action == Action::"files.write_file", resource)'
    )
    assert "etc/passwd" not in out  # denied: nothing learned from it
    assert out.rstrip().endswith(
        "// replayed the 4 source call(s): 2 allowed, 2 asked; every one as recorded"
    )

    local = clearance("suggest", "journal.db", "--format", "local", cwd=tmp_path)
    assert local.returncode == 0, local.stdout + local.stderr
    assert 'ask = [\n  "files.write_file(path=docs/**, content=x)",\n]' in local.stdout

    js = json.loads(clearance("suggest", "journal.db", "--json", cwd=tmp_path).stdout)
    by_tool = {s["tool"]: s for s in js["suggestions"]}
    assert by_tool["files.write_file"]["ask"] is True
    assert by_tool["files.read_file"]["ask"] is False
    assert js["replay"]["asked"] == 2 and js["replay"]["as_recorded"] == 4


def test_near_identical_rules_merge_with_their_scope(tmp_path: Path) -> None:
    tools = [
        {
            "name": "git.commit",
            "input_schema": {
                "type": "object",
                "properties": {"repo": {"type": "string"}, "message": {"type": "string"}},
                "required": ["repo", "message"],
            },
        }
    ]
    (tmp_path / "tools.json").write_text(json.dumps(tools))

    def line(arguments: dict[str, Any]) -> str:
        return json.dumps(
            {
                "principal": 'User::"alice"',
                "tool": "git.commit",
                "arguments": arguments,
                "expected": "allow",
            }
        )

    messages = ["x", "y", "m"]
    corpus = [line({"repo": "/srv/app", "message": m}) for m in messages]
    (tmp_path / "corpus.jsonl").write_text("\n".join(corpus) + "\n")
    done = clearance("suggest", "corpus.jsonl", "--tools", "tools.json", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "// 1 suggestion(s) from 3 allowed call(s)" in out
    assert out.count("@id(") == 1
    assert '// scope: repo: "/srv/app"; message: one of "x", "y", "m"' in out
    assert "// note: message: 3 rules that differed only here merged into one" in out
    assert "every one as recorded" in out
