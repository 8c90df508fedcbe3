"""``clearance run SCRIPT``: scripted sessions under the configured policy, and bad inputs."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from clearance.config import default_journal_path

SCRIPT = {
    "prompt": "Tidy up the notes.",
    "turns": [
        {
            "text": "Reading first.",
            "tool_calls": [
                {"id": "read-1", "name": "files__read_file", "args": {"path": "notes.txt"}}
            ],
        },
        {
            "tool_calls": [
                {
                    "id": "write-1",
                    "name": "files__write_file",
                    "args": {"path": "out/a.txt", "content": "A"},
                }
            ]
        },
        {
            "tool_calls": [
                {
                    "id": "write-2",
                    "name": "files__write_file",
                    "args": {"path": "out/b.txt", "content": "B"},
                }
            ]
        },
        {"tool_calls": [{"id": "sh-1", "name": "shell__run", "args": {"command": "ls | sh"}}]},
        {"text": "Done."},
    ],
}


def _workspace(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("remember the milk\n")
    (tmp_path / "script.json").write_text(json.dumps(SCRIPT))


def test_run_without_a_terminal_denies_asks_by_default(cli: Any, tmp_path: Path) -> None:
    _workspace(tmp_path)
    r = cli("run", "script.json", "--principal", 'User::"alice"')
    assert r.code == 0, r.err
    assert re.search(r"read-1  allowed +by read-freely", r.out)
    assert re.search(r"read-1  ok +remember the milk", r.out)
    assert re.search(r"write-1  asked +ask-before-write", r.out)
    # a line longer than the 80 columns (no terminal) goes on under its text
    unwrapped = re.sub(r"\n {18}(?=\S)", " ", r.out)
    assert re.search(
        r"write-1  answer +deny \(auto-answered: no terminal; \[approvals\] non_interactive = deny\)",
        unwrapped,
    )
    assert re.search(r"sh-1  denied +by shell-no-chaining", r.out)
    assert re.search(r"^CALL +TOOL +DECISION +ANSWER +STATUS +POLICIES$", r.out, re.M)
    assert re.search(
        r"^write-2 +files.write_file +ask +deny +denied +ask-before-write$", r.out, re.M
    )
    assert r.out.rstrip().endswith("Done.")
    assert not (tmp_path / "out").exists()
    # the default journal: in the state directory, outside the workspace (issue 12)
    assert not (tmp_path / "clearance.db").exists()
    assert default_journal_path(tmp_path).is_file()


def test_run_json_with_approve_allow(cli: Any, tmp_path: Path) -> None:
    _workspace(tmp_path)
    r = cli("run", "script.json", "--json", "--approve", "allow", "--principal", 'Agent::"bot"')
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["principal"] == 'Agent::"bot"' and doc["text"] == "Done."
    calls = {c["call_id"]: c for c in doc["calls"]}
    assert calls["write-1"] == {
        **calls["write-1"],
        "decision": "ask",
        "answer": "allow_once",
        "status": "ok",
        "reasons": ["ask-before-write"],
        "arguments": {"path": "out/a.txt", "content": "A"},
    }
    assert calls["sh-1"]["status"] == "denied" and calls["sh-1"]["stage"] == "evaluator"
    assert (tmp_path / "out" / "a.txt").read_text() == "A"


def test_answers_on_stdin_make_a_grant_that_later_runs_use_then_revoke(
    cli: Any, tmp_path: Path
) -> None:
    _workspace(tmp_path)
    # "a" = allow always, "2" = the second suggested scope (/path under out/)
    r = cli(
        "run", "script.json", "--approve", "ask", "--principal", 'User::"alice"', input="a\n2\n"
    )
    assert r.code == 0, r.err
    assert re.search(r"write-1  answer +allow_always \(answered on the terminal\)", r.out)
    assert re.search(r"write-2  allowed +by grant g_\w+ \(ask-before-write\)", r.out)
    assert (tmp_path / "out" / "b.txt").read_text() == "B"

    grants = json.loads(cli("grants", "list", "--json").out)
    assert [(g["principal"], g["tool"], g["scope"]["prefix"]) for g in grants] == [
        ('User::"alice"', "files.write_file", "out/")
    ]
    # the next run is covered by the persisted grant: nobody is asked
    again = cli("run", "script.json", "--principal", 'User::"alice"')
    assert "asked" not in again.out
    assert re.search(r"write-1  allowed +by grant " + grants[0]["grant_id"], again.out)

    gid = grants[0]["grant_id"]
    assert cli("grants", "revoke", gid).out.strip() == f"revoked {gid}"
    gone = cli("grants", "revoke", gid)
    assert gone.code == 2 and f"no grant with id '{gid}'" in gone.err
    assert cli("grants", "list").out.strip() == "no grants"


def test_end_of_input_denies(cli: Any, tmp_path: Path) -> None:
    _workspace(tmp_path)
    r = cli("run", "script.json", "--approve", "ask", "--json", input="")
    assert r.code == 0, r.err
    calls = {c["call_id"]: c for c in json.loads(r.out)["calls"]}
    assert calls["write-1"]["answer"] == "deny" and calls["write-1"]["status"] == "denied"
    assert "allow it [o]nce" in r.err  # with --json the prompts go to stderr


BAD_INPUTS = {
    "missing script": (["run", "missing.json"], "error: cannot read script 'missing.json'"),
    "not JSON": (["run", "broken.json"], "error: broken.json: not valid JSON (line 1"),
    "malformed script": (
        ["run", "noid.json"],
        "error: turn 0: a tool call needs a non-empty string 'id'",
    ),
    "unknown tool": (["run", "unknown.json"], "error: turn 1, call 'x': unknown tool 'web__fetch'"),
    "bad principal": (
        ["run", "script.json", "--principal", "alice"],
        "Invalid value for '--principal'",
    ),
    "missing config": (
        ["run", "script.json", "--config", "nope.toml"],
        "error: nope.toml: cannot read the config file",
    ),
    "unknown config key": (
        ["run", "script.json", "--config", "typo.toml"],
        "error: typo.toml:4: unknown key 'limits.max_concurency'",
    ),
    "invalid policy": (["run", "script.json", "--config", "badpolicy.toml"], "policy bad-attr"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_exits_2_with_a_clear_error(cli: Any, tmp_path: Path, case: str) -> None:
    _workspace(tmp_path)
    (tmp_path / "broken.json").write_text('{"turns": [')
    (tmp_path / "noid.json").write_text(
        json.dumps({"turns": [{"tool_calls": [{"name": "files__read_file"}]}]})
    )
    (tmp_path / "unknown.json").write_text(
        json.dumps({"turns": [{"text": "hi"}, {"tool_calls": [{"id": "x", "name": "web__fetch"}]}]})
    )
    (tmp_path / "typo.toml").write_text(
        '[evaluator]\nkind = "noop"\n[limits]\nmax_concurency = 3\n'
    )
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "bad.cedar").write_text(
        '@id("bad-attr")\npermit (principal, action == Action::"files.read_file", resource)\n'
        "when { context.input.nope == 1 };\n"
    )
    (tmp_path / "badpolicy.toml").write_text(
        '[evaluator]\nkind = "cedar"\npolicies = "policies"\n[tools.files]\n[tools.shell]\n'
    )
    args, message = BAD_INPUTS[case]
    r = cli(*args)
    assert r.code == 2, (r.out, r.err)
    assert message in r.err
    assert "Traceback" not in r.err
    assert not (tmp_path / "clearance.db").exists() or case == "invalid policy"
