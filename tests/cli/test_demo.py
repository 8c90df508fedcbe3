"""``clearance demo``: the README's first command, run as a user would (no terminal)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from clearance.harness.journal_sqlite import read_sqlite


def test_demo_shows_allowed_denied_and_asked_calls_then_the_journal(cli: Any) -> None:
    r = cli("demo")
    assert r.code == 0, r.err
    out = r.out
    assert "\x1b[" not in out  # no colour when stdout is not a terminal
    # allowed, by the pack's @id
    assert re.search(r"c1  allowed +by read-freely", out)
    assert re.search(r"c6  allowed +by shell-allowlist", out)
    # denied by a forbid, named by its @id
    assert re.search(r"c7  denied +by shell-stay-in-workspace, shell-no-chaining", out)
    # refused before the evaluator: the path cannot be canonicalized inside the workspace
    assert re.search(r"c4  blocked +refused: argument /path \(path\): it resolves outside", out)
    # asked, auto-answered without a terminal, then run
    assert re.search(r"c5  asked +ask-before-write: The agent wants to write a file", out)
    assert re.search(r"c5  answer +allow_once \(auto-answered: stdin is not a terminal", out)
    assert re.search(r"c5  allowed +after approval \(allow_once\)", out)
    assert re.search(r"c5  ok +wrote \d+ bytes to src/greet.py", out)
    # the journal read back from SQLite, one row per call as `clearance journal` shows it
    assert re.search(
        r"^journal: \d+ records in the temporary journal, one row per call$", out, re.M
    )
    table = out[out.index("\ntime ") + 1 :].splitlines()
    assert re.match(r"time +principal +tool +decision +policies +status +duration$", table[0])
    rows = [line.split()[3:7] for line in table[1:8]]
    assert rows == [
        ["files.list_dir", "allow", "read-freely", "ok"],
        ["files.read_file", "allow", "read-freely", "ok"],
        ["files.search", "allow", "read-freely", "ok"],
        ["files.read_file", "-", "-", "blocked"],
        ["files.write_file", "ask", "ask-before-write", "ok"],
        ["shell.run", "allow", "shell-allowlist", "ok"],
        ["shell.run", "deny", "shell-stay-in-workspace,shell-no-chaining", "denied"],
    ]


def test_demo_json_with_a_kept_database(cli: Any, tmp_path: Path) -> None:
    r = cli("demo", "--json", "--approve", "deny", "--db", "demo.db")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    calls = {c["call_id"]: c for c in doc["calls"]}
    assert calls["c1"]["status"] == "ok" and calls["c1"]["reasons"] == ["read-freely"]
    assert calls["c4"]["status"] == "blocked" and calls["c4"]["stage"] == "facts"
    # --approve deny: the write is asked and denied, so nothing is written
    assert calls["c5"]["decision"] == "ask" and calls["c5"]["answer"] == "deny"
    assert calls["c5"]["status"] == "denied"
    assert calls["c7"]["status"] == "denied"
    assert set(calls["c7"]["reasons"]) == {"shell-no-chaining", "shell-stay-in-workspace"}
    # the journal is in the file given with --db, the same records as printed
    stored = read_sqlite(tmp_path / "demo.db")
    assert [e.seq for e in stored] == [e["seq"] for e in doc["journal"]]
    assert [e.type for e in stored].count("call_decided") == len(calls)


def test_demo_rejects_a_db_in_a_missing_directory(cli: Any) -> None:
    r = cli("demo", "--db", "no/such/dir/x.db")
    assert r.code == 2
    assert r.err.startswith("error: --db: the directory")
