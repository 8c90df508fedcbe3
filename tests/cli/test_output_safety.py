"""Nothing a model or a server chose reaches the operator's terminal raw (issue 19).

Every command runs as a real subprocess on a workspace, journal, corpus and policy tests
full of text an agent could choose: escape sequences that write the clipboard (OSC 52),
erase and move lines, clear the screen, C1 controls, bidi overrides and isolates and
zero-width characters. The bytes each command writes to stdout and stderr must hold none
of them; JSON output must still be exact JSON holding the hostile text unchanged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from pty_support import on_a_terminal, strip_styles

EVIL = (
    "\x1b]52;c;cGF3bmVk\x07"  # OSC 52: write the clipboard
    "\x1b[2K\x1b[1A\x1b[2J"  # erase the line, move up, clear the screen
    "\x9b31m"  # C1 CSI
    "\u202etxt.exe\u202c"  # right-to-left override
    "\u2066hidden\u2069\u200b\ufeff"  # isolate, zero-width space, BOM
    "\x7f\x08\r"  # DEL, backspace, carriage return
    "fake status: all clear"
)
"""One string with every kind of character that acts on a terminal or hides text."""


def bad_characters(text: str) -> list[str]:
    """The characters in ``text`` a terminal must never receive from clearance."""
    found = []
    for ch in text:
        code = ord(ch)
        if ch == "\n":
            continue
        if (
            code < 0x20
            or 0x7F <= code <= 0x9F
            or unicodedata.category(ch) in ("Cf", "Zl", "Zp", "Cs")
        ):
            found.append(f"U+{code:04X}")
    return found


def run(cwd: Path, *args: str, input: bytes | None = None) -> tuple[int, str, str]:
    """The real command in a subprocess; stdout and stderr as decoded (strict UTF-8)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLEARANCE")}
    proc = subprocess.run(
        [sys.executable, "-m", "clearance", *args],
        cwd=cwd,
        input=input,
        stdin=subprocess.DEVNULL if input is None else None,
        capture_output=True,
        timeout=120,
        env=env,
    )
    return proc.returncode, proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8")


def assert_clean(code: int, out: str, err: str) -> None:
    assert "Traceback" not in err, err
    assert not bad_characters(out), (bad_characters(out), out)
    assert not bad_characters(err), (bad_characters(err), err)


PRINCIPAL = 'User::"' + EVIL.replace('"', "") + '"'


def script() -> dict[str, Any]:
    return {
        "prompt": "Do things " + EVIL,
        "turns": [
            {
                "text": "Agent says " + EVIL,
                "tool_calls": [
                    {"id": "r1" + EVIL, "name": "files__read_file", "args": {"path": "notes.txt"}}
                ],
            },
            {
                "tool_calls": [
                    {
                        "id": "w1",
                        "name": "files__write_file",
                        "args": {"path": "out/a.txt", "content": EVIL},
                    },
                    {"id": "r2", "name": "files__read_file", "args": {"path": EVIL}},
                    {"id": "s1", "name": "shell__run", "args": {"command": "ls " + EVIL}},
                    {"id": "s2", "name": "shell__run", "args": {"command": "ls; " + EVIL}},
                ]
            },
            {"text": "Finished " + EVIL + "\nsecond line " + EVIL},
        ],
    }


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace after one hostile ``clearance run``; ``journal`` names its journal."""
    root = tmp_path_factory.mktemp("hostile")
    (root / "notes.txt").write_text(EVIL + "\nmore " + EVIL + "\n", encoding="utf-8")
    (root / "script.json").write_text(json.dumps(script()), encoding="utf-8")
    code, out, err = run(
        root, "run", "script.json", "--json", "--approve", "allow", "--principal", PRINCIPAL
    )
    assert code == 0, err
    (root / "journal").write_text(json.loads(out)["journal"], encoding="utf-8")
    return root


def journal_of(workspace: Path) -> str:
    return (workspace / "journal").read_text(encoding="utf-8")


def test_run_prints_hostile_calls_escaped(workspace: Path) -> None:
    code, out, err = run(
        workspace, "run", "script.json", "--approve", "allow", "--principal", PRINCIPAL
    )
    assert code == 0, err
    assert_clean(code, out, err)
    # What was escaped is still there to read, spelled out.
    assert "\\x1b]52;c;cGF3bmVk\\x07" in out
    assert "\\u202etxt.exe" in out
    assert "r1\\x1b]52" in out  # the call id


def test_run_prompt_escapes_what_it_shows(workspace: Path) -> None:
    code, out, err = run(
        workspace,
        "run",
        "script.json",
        "--approve",
        "ask",
        "--principal",
        PRINCIPAL,
        input=("o\n" + EVIL + "\nd\n").encode(),
    )
    assert code == 0, err
    assert_clean(code, out, err)
    assert "allow it [o]nce" in out + err


def test_run_json_is_exact_and_escaped(workspace: Path) -> None:
    code, out, err = run(
        workspace, "run", "script.json", "--json", "--approve", "deny", "--principal", PRINCIPAL
    )
    assert code == 0, err
    assert_clean(code, out, err)
    doc = json.loads(out)
    assert doc["principal"] == PRINCIPAL
    calls = {c["call_id"]: c for c in doc["calls"]}
    assert calls["r1" + EVIL]["result"].startswith(EVIL)
    assert doc["text"] == "Finished " + EVIL + "\nsecond line " + EVIL


@pytest.mark.parametrize(
    "args",
    [
        ["journal"],
        ["journal", "--json"],
        ["journal", "export"],
        ["journal", "--session", EVIL],
        ["grants", "list"],
    ],
    ids=["table", "json", "export", "no-match", "grants"],
)
def test_journal_views_escape_hostile_records(workspace: Path, args: list[str]) -> None:
    db = journal_of(workspace)
    args = [*args[:1], "--db", db, *args[1:]] if args[0] == "journal" else [*args, "--db", db]
    code, out, err = run(workspace, *args)
    assert code in (0, 2), err
    assert_clean(code, out, err)
    if args[-1] == "--json":
        rows = json.loads(out)
        assert any(r["call_id"] == "r1" + EVIL for r in rows)
        assert any(r["principal"] == PRINCIPAL for r in rows)
    if args == ["journal", "--db", db]:
        assert "\\x1b]52" in out


def test_demo_prints_nothing_raw(tmp_path: Path) -> None:
    code, out, err = run(tmp_path, "demo")
    assert code == 0, err
    assert_clean(code, out, err)


def test_replay_and_suggest_escape_hostile_corpus(workspace: Path, tmp_path: Path) -> None:
    db = journal_of(workspace)
    code, out, err = run(
        workspace, "journal", "--db", db, "export", "-o", str(tmp_path / "corpus.jsonl")
    )
    assert code == 0, err
    hostile = {
        "principal": PRINCIPAL,
        "tool": "files.read_file",
        "arguments": {"path": "src/" + EVIL},
        "expected": "allow",
        "id": "x" + EVIL,
        "group": EVIL,
    }
    with (tmp_path / "corpus.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps(hostile) + "\n")
        f.write(json.dumps({**hostile, "tool": "files." + EVIL}) + "\n")
        f.write("not json " + EVIL + "\n")
    baseline = tmp_path / "baseline"
    baseline.mkdir()
    (baseline / "all.cedar").write_text(
        '@id("everything")\npermit (principal, action, resource);\n', encoding="utf-8"
    )
    corpus = str(tmp_path / "corpus.jsonl")
    for args in (
        ["replay", corpus, "--skip-bad", "--baseline", str(baseline)],
        ["replay", corpus, "--skip-bad", "--json"],
        ["replay", corpus],
        ["suggest", corpus, "--skip-bad"],
        ["suggest", corpus, "--skip-bad", "--format", "local"],
        ["suggest", corpus, "--skip-bad", "--json"],
        ["suggest", db],
    ):
        code, out, err = run(workspace, *args)
        assert code in (0, 1, 2), (args, err)
        assert_clean(code, out, err)


def test_policy_commands_escape_hostile_text(workspace: Path, tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "p.cedar").write_text(
        '@id("read")\npermit (principal, action == Action::"files.read_file", resource);\n',
        encoding="utf-8",
    )
    (policies / "p.tests.json").write_text(
        json.dumps(
            [
                {
                    "name": "case " + EVIL,
                    "principal": PRINCIPAL,
                    "tool": "files.read_file",
                    "arguments": {"path": EVIL},
                    "expect": "deny",
                }
            ]
        ),
        encoding="utf-8",
    )
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "b.cedar").write_text(
        '@id("x'
        + EVIL.replace('"', "")
        + '")\npermit (principal, action, resource) when { '
        + EVIL
        + " };\n",
        encoding="utf-8",
    )
    for args in (
        ["policy", "test", str(policies)],
        ["policy", "test", str(policies), "--json"],
        ["policy", "validate", str(bad)],
        ["policy", "validate", str(bad), "--json"],
        ["policy", "format", str(bad)],
        [
            "policy",
            "explain",
            "--tool",
            "files.read_file",
            "--args",
            json.dumps({"path": EVIL}),
            "--principal",
            PRINCIPAL,
        ],
        ["policy", "explain", "--tool", "files.read_file", "--args", json.dumps({"path": 1})],
        ["policy", "explain", "--tool", "files." + EVIL],
    ):
        code, out, err = run(workspace, *args)
        assert code in (0, 1, 2), (args, err)
        assert_clean(code, out, err)


def test_suggest_cannot_be_made_to_print_an_unscoped_policy(tmp_path: Path) -> None:
    from clearance.policy.cedar import CedarEngine

    lines = [
        {
            "principal": 'User::"alice"',
            "tool": "files.read_file",
            "arguments": {"path": "README.md"},
            "expected": "allow",
            "id": "c1\npermit (principal, action, resource);\n//",
        },
        {
            "principal": {"type": "User", "id": 'x", action, resource);\npermit (principal'},
            "tool": "files.read_file",
            "arguments": {"path": "docs/a.md"},
            "expected": "allow",
            "id": "c2",
        },
        {
            "principal": 'User::"alice"',
            "tool": "files.*",
            "arguments": {"path": "x"},
            "expected": "allow",
            "id": "c3",
        },
    ]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    code, out, err = run(tmp_path, "suggest", str(corpus))
    assert code == 0, err
    assert_clean(code, out, err)
    assert "permit (principal, action, resource);" not in out.splitlines()
    assert "left out line 3 (c3): the tool is not a tool name" in out
    code, out, err = run(tmp_path, "suggest", str(corpus), "--json")
    assert code == 0, err
    doc = json.loads(out)
    policies = CedarEngine(doc["policies"]).policies
    assert len(policies) == 2
    assert all(p.principal.op == "==" and p.action.op == "==" for p in policies)
    assert doc["replay"]["calls"] == doc["replay"]["allowed"] == 2


def test_on_a_real_terminal_only_colours_are_escape_sequences(workspace: Path) -> None:
    # On a terminal click keeps its styles; every other escape must still be spelled out.
    shown = on_a_terminal(
        workspace, ["run", "script.json", "--principal", PRINCIPAL], [b"o\n", b"d\n"]
    )
    assert "\x1b[" in shown  # styles are there: this is the terminal path
    assert not bad_characters(strip_styles(shown)), strip_styles(shown)
    assert "\\x1b]52;c;cGF3bmVk\\x07" in shown


@pytest.mark.parametrize("as_json", [False, True])
def test_journal_follow_escapes_hostile_records(workspace: Path, as_json: bool) -> None:
    import selectors
    import signal
    import time

    env = {k: v for k, v in os.environ.items() if not k.startswith("CLEARANCE")}
    args = ["journal", "--db", journal_of(workspace), "--follow", "--interval", "0.05"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "clearance", *args, *(["--json"] if as_json else [])],
        cwd=workspace,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    # It never ends by itself: wait until it has printed the hostile record (it flushes
    # each one), then stop it. A fixed sleep raced the CLI's own import on a loaded machine.
    assert proc.stdout is not None
    seen = b""
    markers = (b"\\x1b]52", b"\\u001b]52")
    deadline = time.monotonic() + 60
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            while not any(m in seen for m in markers) and time.monotonic() < deadline:
                if selector.select(timeout=0.5):
                    chunk = os.read(proc.stdout.fileno(), 65536)
                    if not chunk:
                        break
                    seen += chunk
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    text, errors = (seen + out).decode("utf-8"), err.decode("utf-8")
    assert_clean(proc.returncode, text, errors)
    assert "\\x1b]52" in text or "\\u001b]52" in text


def test_log_records_reach_stderr_escaped(tmp_path: Path) -> None:
    # Warnings quote what servers and models chose (a tool name, a request id); the
    # command's log handler escapes them as everything else it prints.
    code = (
        "import logging, sys\n"
        "from clearance.cli import main\n"
        "try:\n"
        "    main(['--version'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "logging.getLogger('clearance.mcp.sources').warning('skipped %s', sys.argv[1])\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLEARANCE")}
    proc = subprocess.run(
        [sys.executable, "-c", code, EVIL], capture_output=True, timeout=60, env=env, cwd=tmp_path
    )
    err = proc.stderr.decode("utf-8")
    assert "skipped " in err
    assert_clean(proc.returncode, proc.stdout.decode("utf-8"), err)
