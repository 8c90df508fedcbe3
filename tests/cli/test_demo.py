"""``clearance demo``: the README's first command, run as a user would (no terminal)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from console_script import command

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
    table = out[out.index("\ncall ") + 1 :].splitlines()
    assert re.match(r"call +tool +decision +status +duration +policies$", table[0])
    rows = [line.split()[:4] + line.split()[-1:] for line in table[1:8]]
    assert rows == [
        ["c1", "files.list_dir", "allow", "ok", "read-freely"],
        ["c2", "files.read_file", "allow", "ok", "read-freely"],
        ["c3", "files.search", "allow", "ok", "read-freely"],
        ["c4", "files.read_file", "deny", "blocked", "/path"],
        ["c5", "files.write_file", "ask", "ok", "ask-before-write"],
        ["c6", "shell.run", "allow", "ok", "shell-allowlist"],
        ["c7", "shell.run", "deny", "denied", "shell-stay-in-workspace,"],
    ]
    assert table[8].split() == ["shell-no-chaining"]


def _demo(columns: str | None, tmp_path: Path) -> str:
    """``clearance demo`` as a user runs it, stdout a pipe, with ``COLUMNS`` (or none)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLEARANCE")}
    env.pop("COLUMNS", None)
    if columns is not None:
        env["COLUMNS"] = columns
    done = subprocess.run(
        [*command(), "demo"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("columns", ["80", None], ids=["COLUMNS=80", "no terminal"])
def test_demo_fits_in_80_columns(columns: str | None, tmp_path: Path) -> None:
    out = _demo(columns, tmp_path)
    long = [line for line in out.splitlines() if len(line) > 80]
    assert not long, long
    assert "c7  denied   by shell-stay-in-workspace, shell-no-chaining" in out
    # the journal table's policies column wraps under itself
    assert re.search(r"^c7 .* shell-stay-in-workspace,\n {40,}shell-no-chaining$", out, re.M)


def test_demo_wider_terminal_keeps_lines_whole(tmp_path: Path) -> None:
    out = _demo("200", tmp_path)
    assert re.search(r"c4  blocked  refused: .* outside the workspace root$", out, re.M)
    assert re.search(r"^c7 .* shell-stay-in-workspace,shell-no-chaining$", out, re.M)


def test_demo_blocked_row_names_its_decision_and_what_decided(tmp_path: Path) -> None:
    out = _demo("80", tmp_path)
    (row,) = [line for line in out.splitlines() if line.startswith("c4 ")]
    assert row.split() == [
        "c4",
        "files.read_file",
        "deny",
        "blocked",
        *row.split()[4:6],
        "facts",
        "/path",
    ]
    assert "-" not in row.split()


def test_demo_keeps_each_calls_lines_together(tmp_path: Path) -> None:
    """c1 and c2 run side by side (both read-only): the lines of one come whole, then
    the other's; every call's lines (and their continuation lines) are one block."""
    out = _demo("80", tmp_path)
    live = out[out.index("\nagent ") : out.index("\njournal:")].splitlines()
    owner: list[str] = []
    for line in live:
        found = re.match(r"^ *(c\d+)  ", line)
        if found:
            owner.append(found.group(1))
        elif line.startswith(" ") and owner:
            owner.append(owner[-1])  # a continuation line: its call's
    blocks = [cid for n, cid in enumerate(owner) if n == 0 or owner[n - 1] != cid]
    assert blocks == ["c1", "c2", "c3", "c4", "c5", "c6", "c7"], owner
    for cid in ("c1", "c2", "c3", "c6"):
        labels = [line.split()[1] for line in live if line.startswith(f"  {cid}  ")]
        assert labels == ["call", "allowed", "ok"], (cid, labels)


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


def test_without_landlock_the_demo_runs_unconfined_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # macOS, or Linux without Landlock: a newcomer's first command still runs (its script
    # is fixed), and says in words that its commands are not confined.
    from click.testing import CliRunner

    from clearance.cli import cli
    from clearance.toolsets import _landlock

    monkeypatch.setattr(_landlock, "abi", lambda: 0)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["demo", "--approve", "deny", "--json"])
    assert result.exit_code == 0, result.output
    assert "run unconfined" in result.stderr
    assert json.loads(result.stdout)["calls"]
