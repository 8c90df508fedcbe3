"""The policy commands see the tools of the configured MCP servers (a real mcp-server-time
started and stopped by the real console script), and `clearance tools export` snapshots
them for `--tools FILE`, which needs no server at all."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from clearance.config import pack_path

TIME_SERVER = Path(sys.executable).parent / "mcp-server-time"
UPSTREAM = Path(__file__).resolve().parent.parent / "mcp" / "upstream_server.py"

POLICY = """\
@id("time-read")
permit (principal, action == Action::"time.get_current_time", resource)
when { context.input.timezone like "Europe/*" };
"""

TESTS = {
    "tests": [
        {
            "name": "europe is fine",
            "principal": 'User::"alice"',
            "tool": "time.get_current_time",
            "arguments": {"timezone": "Europe/Paris"},
            "expect": "allow",
            "policies": ["time-read"],
        },
        {
            "name": "elsewhere is not",
            "principal": 'User::"alice"',
            "tool": "time__get_current_time",
            "arguments": {"timezone": "Asia/Tokyo"},
            "expect": "deny",
        },
    ]
}


def _config(directory: Path, program: str | Path = TIME_SERVER, extra: str = "") -> Path:
    config = directory / "clearance.toml"
    config.write_text(
        '[evaluator]\nkind = "cedar"\npolicies = "policies"\n\n'
        f'[[mcp_servers]]\nname = "time"\nprogram = "{program}"\n'
        'read_only = ["get_current_time"]\n' + extra
    )
    return config


def _policies(directory: Path) -> Path:
    policies = directory / "policies"
    policies.mkdir()
    (policies / "time.cedar").write_text(POLICY)
    (policies / "time.tests.json").write_text(json.dumps(TESTS))
    return policies


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """./clearance.toml with one MCP server (mcp-server-time) and policies for its tools."""
    assert TIME_SERVER.exists(), "pip install mcp-server-time (the test extra)"
    _config(tmp_path)
    _policies(tmp_path)
    return tmp_path


def test_policy_commands_learn_the_tools_of_the_configured_servers(cli: Any, project: Path) -> None:
    schema = cli("policy", "schema")
    assert schema.code == 0, schema.err
    assert 'action "time.get_current_time" in [Action::"call_tool", Action::"read_only"' in (
        schema.out
    )
    assert "type time__get_current_timeInput = {\n  timezone: String\n};" in schema.out
    # the implicit ./clearance.toml is named, with its tool count
    assert "clearance: using ./clearance.toml: 2 tools (time 2)" in schema.err

    validate = cli("policy", "validate", "policies")
    assert validate.code == 0, validate.out + validate.err
    assert validate.out.startswith(
        "ok: 1 policies in policies validate against the schema of 2 tools from ./clearance.toml"
    )

    test = cli("policy", "test", "policies")
    assert test.code == 0, test.out + test.err
    assert test.out.splitlines()[-1] == "2 passed, 0 failed"

    explain = cli(
        "policy", "explain", "--tool", "time__get_current_time",
        "--args", '{"timezone": "Europe/Oslo"}', "--json",
    )  # fmt: skip
    assert explain.code == 0, explain.err
    assert json.loads(explain.out)["policies"] == ["time-read"]


def test_servers_are_stopped_once_their_tools_are_listed(cli: Any, tmp_path: Path) -> None:
    log, pids = tmp_path / "up.log", tmp_path / "up.pids"
    (tmp_path / "clearance.toml").write_text(
        '[evaluator]\nkind = "local"\nallow = ["up.echo"]\n\n'
        f'[[mcp_servers]]\nname = "up"\nprogram = "{sys.executable}"\nargs = ["{UPSTREAM}"]\n'
        f'env = {{ UPSTREAM_LOG = "{log}", UPSTREAM_PIDS = "{pids}" }}\n'
    )
    listed = cli("tools", "list", "--json")
    assert listed.code == 0, listed.err
    assert {t["name"] for t in json.loads(listed.out)["tools"]} >= {"up.echo", "up.write_note"}
    (pid,) = (int(p) for p in pids.read_text().split())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # gone: started to list its tools, then stopped
    assert not log.exists()  # and nothing was called


def test_an_exported_snapshot_needs_no_server(cli: Any, project: Path, tmp_path: Path) -> None:
    export = cli("tools", "export")
    assert export.code == 0, export.err
    assert "exported 2 tools (time 2) from ./clearance.toml" in export.err
    snapshot = json.loads(export.out)
    assert snapshot["version"] == 1
    by_name = {t["name"]: t for t in snapshot["tools"]}
    current = by_name["time.get_current_time"]
    assert current["read_only"] is True and by_name["time.convert_time"]["read_only"] is False
    assert (current["source"], current["server"]) == ("mcp", "time")
    assert current["input_schema"]["required"] == ["timezone"]
    assert current["annotations"]["readOnlyHint"] is True

    # CI: the configuration names a server that cannot start; with --tools it is not started
    ci = tmp_path / "ci"
    ci.mkdir()
    (ci / "tools.json").write_text(export.out)
    _config(ci, program="/nonexistent/mcp-server-time")
    _policies(ci)
    started = cli("policy", "validate", "policies", cwd=ci)
    assert started.code == 2 and "/nonexistent/mcp-server-time" in started.err

    for args in (
        ["policy", "validate", "policies"],
        ["policy", "test", "policies"],
        ["policy", "schema"],
        ["policy", "explain", "--tool", "time.get_current_time", "--args", '{"timezone": "UTC"}'],
        ["tools", "list"],
    ):
        r = cli(*args, "--tools", "tools.json", cwd=ci)
        assert r.code == 0, (args, r.out, r.err)
        assert "time.get_current_time" in r.out or "passed" in r.out or "ok:" in r.out, args
        assert "using ./clearance.toml and tools.json: 2 tools (time 2)" in r.err or (
            args[0] == "tools"
        ), (args, r.err)

    # the same decision with the snapshot as with the server
    args = ["policy", "explain", "--tool", "time.get_current_time", "--json"]
    for zone in ("Europe/Rome", "America/Lima"):
        live = cli(*args, "--args", json.dumps({"timezone": zone}))
        offline = cli(
            *args, "--args", json.dumps({"timezone": zone}), "--tools", "tools.json", cwd=ci
        )
        assert json.loads(live.out)["decision"] == json.loads(offline.out)["decision"]
        assert json.loads(live.out)["policies"] == json.loads(offline.out)["policies"]


def test_replay_reads_the_snapshot(cli: Any, project: Path, tmp_path: Path) -> None:
    (tmp_path / "tools.json").write_text(cli("tools", "export").out)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copytree(project / "policies", elsewhere / "policies")
    shutil.copy(tmp_path / "tools.json", elsewhere / "tools.json")
    corpus = elsewhere / "calls.jsonl"
    corpus.write_text(
        json.dumps(
            {
                "principal": 'User::"alice"',
                "tool": "time.get_current_time",
                "arguments": {"timezone": "Europe/Paris"},
                "expected": "allow",
            }
        )
        + "\n"
    )
    r = cli(
        "replay", "calls.jsonl", "--tools", "tools.json", "--policies", "policies", "--json",
        cwd=elsewhere,
    )  # fmt: skip
    assert r.code == 0, r.err
    assert json.loads(r.out)["outcomes"]["allow"] == 1
    # The built-in default (no configuration file) guards the files tools it registers;
    # with declared tools only, its guardrail is left out, not warned about.
    assert "guardrail" not in r.err


def test_snapshots_carry_declared_facts(cli: Any, tmp_path: Path) -> None:
    """The bundled tools' facts (kind and root) survive the snapshot: the coding pack's
    decision tests pass the same from it, in another directory, without a configuration."""
    here = tmp_path / "workspace"
    here.mkdir()
    export = cli("tools", "export", "-o", "tools.json", cwd=here)
    assert export.code == 0, export.err
    assert "from the built-in default to tools.json" in export.err
    snapshot = json.loads((here / "tools.json").read_text())
    by_name = {t["name"]: t for t in snapshot["tools"]}
    assert by_name["files.read_file"]["facts"] == {"/path": {"kind": "path", "root": "."}}
    assert by_name["files.move_file"]["facts"]["/source"] == {"kind": "path_entry", "root": "."}
    assert by_name["shell.run"]["facts"] == {"/command": {"kind": "command", "root": "."}}
    # a process id names a process of a running session: declared as its kind, no table
    assert by_name["process.write"]["facts"] == {"/id": {"kind": "process"}}

    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(here / "tools.json", other / "tools.json")
    coding = str(pack_path("coding"))
    from_snapshot = cli("policy", "test", coding, "--tools", "tools.json", "--json", cwd=other)
    from_config = cli("policy", "test", coding, "--json", cwd=here)
    assert from_config.code == 0 and from_snapshot.code == 0, from_snapshot.out
    snap, conf = json.loads(from_snapshot.out), json.loads(from_config.out)
    assert (snap["passed"], snap["failed"]) == (conf["passed"], conf["failed"]) != (0, 0)
    assert [r["actual"] for r in snap["results"]] == [r["actual"] for r in conf["results"]]
    # a path leaving the (snapshot's) root is refused before any policy: the fact applies
    leave = cli(
        "policy", "explain", "--tool", "files.read_file", "--args", '{"path": "../x"}',
        "--tools", "tools.json", "--json", cwd=other,
    )  # fmt: skip
    refused = json.loads(leave.out)
    assert (refused["decision"], refused["stage"]) == ("blocked", "facts")
    assert "resolves outside the workspace root" in refused["message"]


def test_bad_tools_files_are_bad_input(cli: Any, tmp_path: Path) -> None:
    _policies(tmp_path)
    cases = {
        "missing.json": "missing.json: no such file",
        "[1]": "tools[0]: 'name' must be a qualified name",
        '[{"name": "a.b", "readonly": true}]': "tools[0] (a.b): unknown key(s) 'readonly'",
        '[{"name": "a.b", "facts": {"/p": "magic"}}]': "unknown kind 'magic'",
        '{"version": 2, "tools": []}': "version 2 is not supported",
        '[{"name": "a.b", "input_schema": {"type": "object", "properties": {"p": '
        '{"type": "string"}}}, "facts": {"/p": {"kind": "path", "root": "nowhere"}}}]': (
            "fact /p: the root"
        ),
    }
    for text, message in cases.items():
        if text != "missing.json":
            (tmp_path / "tools.json").write_text(text)
        name = "missing.json" if text == "missing.json" else "tools.json"
        r = cli("policy", "validate", "policies", "--tools", name)
        assert r.code == 2, (text, r.out, r.err)
        assert message in r.err, (text, r.err)


def test_replay_and_suggest_learn_the_tools_of_the_configured_servers(
    cli: Any, project: Path
) -> None:
    call = {
        "principal": 'User::"alice"',
        "tool": "time.get_current_time",
        "arguments": {"timezone": "Europe/Paris"},
        "expected": "allow",
    }
    (project / "calls.jsonl").write_text(json.dumps(call) + "\n")
    replayed = cli("replay", "calls.jsonl", "--json")
    assert replayed.code == 0, replayed.err
    assert json.loads(replayed.out)["outcomes"]["allow"] == 1
    assert "clearance: using ./clearance.toml: 2 tools (time 2)" in replayed.err

    suggested = cli("suggest", "calls.jsonl", "--json")
    assert suggested.code == 0, suggested.err
    assert "time.get_current_time" in json.loads(suggested.out)["policies"]
    assert "clearance: using ./clearance.toml: 2 tools (time 2)" in suggested.err


def test_run_starts_the_configured_servers_and_decides_their_calls(cli: Any, project: Path) -> None:
    # `clearance run` reads [[mcp_servers]] as every other command does (it used to say
    # the script named an unknown tool): the policy allows Europe and denies the rest.
    script = {
        "turns": [
            {
                "tool_calls": [
                    {
                        "id": "c1",
                        "name": "time__get_current_time",
                        "args": {"timezone": "Europe/Paris"},
                    },
                    {
                        "id": "c2",
                        "name": "time__get_current_time",
                        "args": {"timezone": "Asia/Tokyo"},
                    },
                ]
            },
            {"text": "Done."},
        ]
    }
    (project / "script.json").write_text(json.dumps(script))
    r = cli("run", "script.json", "--json", cwd=project)
    assert r.code == 0, r.err
    calls = {c["call_id"]: c for c in json.loads(r.out)["calls"]}
    assert (calls["c1"]["decision"], calls["c1"]["status"]) == ("allow", "ok"), calls["c1"]
    assert calls["c1"]["reasons"] == ["time-read"]
    assert calls["c2"]["decision"] == "deny"
    # A script naming a tool no server or toolset has is still bad input.
    (project / "script.json").write_text(
        json.dumps(script).replace('"time__get_current_time"', '"time__no_such_tool"', 1)
    )
    bad = cli("run", "script.json", cwd=project)
    assert bad.code == 2 and "time__no_such_tool" in bad.err
