"""``clearance policy analyze`` and the impossible-policy warnings of ``policy validate``,
run as the real command on planted mistakes: each is found, with the exit code CI needs."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CODING = ROOT / "clearance" / "packs" / "coding"

PLANTED = """\
@id("read")
permit (principal, action in Action::"read_only", resource);

@id("never")
permit (principal, action == Action::"files.write_file", resource) when { false };

@id("never-unless")
forbid (principal, action == Action::"files.write_file", resource) unless { true };

@id("two-names")
permit (principal, action == Action::"files.write_file", resource)
when { context.facts.path.name == "UTC" && context.facts.path.name == "Europe/Paris" };

@id("python-files")
permit (principal, action == Action::"files.write_file", resource)
when { context.facts.path.extension == "py" };

@id("no-python")
forbid (principal, action == Action::"files.write_file", resource)
when { context.facts.path.extension == "py" || context.facts.path.segments.contains(".git") };
"""


def _dir(root: Path, name: str, text: str) -> Path:
    directory = root / name
    directory.mkdir()
    (directory / "policies.cedar").write_text(text)
    return directory


def _coding_with(root: Path, name: str, old: str, new: str) -> Path:
    """A copy of the coding pack with ``old`` replaced by ``new`` (which must be there)."""
    directory = root / name
    shutil.copytree(CODING, directory)
    path = directory / "coding.cedar"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    return directory


def test_analyze_finds_each_planted_mistake(cli: Any, tmp_path: Path) -> None:
    directory = _dir(tmp_path, "planted", PLANTED)
    done = cli("policy", "analyze", str(directory))
    assert done.code == 0, done.err  # warnings only: nothing loosened
    where = str(directory / "policies.cedar")
    lines = done.out.splitlines()
    assert f"{where}:4: warning: permit never can never apply" in done.out
    assert f"{where}:7: warning: forbid never-unless can never apply" in done.out
    assert f"{where}:10: warning: permit two-names can never apply" in done.out
    shadow = next(i for i, line in enumerate(lines) if "python-files never allows" in line)
    assert lines[shadow].startswith(f"{where}:14: warning: ")
    assert lines[shadow].endswith("denied by no-python")
    # The example is a request Cedar decides that way: the path's extension is "py".
    assert '"extension": "py"' in lines[shadow + 1]
    assert "calls files.write_file" in lines[shadow + 1]
    assert "read" not in " ".join(lines[:-1]).split("warning:")[0]
    assert lines[-1].startswith(f"6 policies in {directory} over ")
    assert "3 can never apply, 1 shadowed" in lines[-1]

    denied = cli("policy", "analyze", str(directory), "--deny-warnings")
    assert denied.code == 1
    data = json.loads(cli("policy", "analyze", str(directory), "--json").out)
    assert data["applies"] == {
        "read": True,
        "never": False,
        "never-unless": False,
        "two-names": False,
        "python-files": True,
        "no-python": True,
    }
    (shadowed,) = [f for f in data["findings"] if f["kind"] == "shadowed"]
    assert shadowed["shadowed_by"] == ["no-python"]
    assert shadowed["request"]["context"]["facts"]["path"]["extension"] == "py"


def test_the_bundled_pack_has_no_warnings(cli: Any) -> None:
    done = cli("policy", "analyze", str(CODING), "--deny-warnings")
    assert done.code == 0, done.out + done.err
    assert "0 can never apply, 0 shadowed" in done.out


def test_a_loosening_fails_with_a_request_that_shows_it(cli: Any, tmp_path: Path) -> None:
    # The proposal lets `cat` run with any option (operator precedence: && binds tighter).
    proposed = _coding_with(
        tmp_path,
        "proposed",
        '(context.facts.command.program == "ls" &&',
        '(context.facts.command.program == "cat" || context.facts.command.program == "ls" &&',
    )
    done = cli("policy", "analyze", str(proposed), "--against", str(CODING))
    assert done.code == 1, done.out + done.err
    lines = done.out.splitlines()
    # the command rules govern shell.run and process.start alike: both loosen
    found = [i for i, line in enumerate(lines) if line.startswith("loosens")]
    assert sorted(lines[i].split(": ")[1] for i in found) == ["process.start", "shell.run"]
    assert all('"program": "cat"' in lines[i + 1] for i in found)
    assert "2 loosening(s), 0 tightening(s)" in lines[-1]

    data = json.loads(
        cli("policy", "analyze", str(proposed), "--against", str(CODING), "--json").out
    )
    assert len(data["changes"]) == 2
    for change in data["changes"]:
        assert change["kind"] == "loosens" and change["change"] == "deny->allow"
        command = change["request"]["context"]["facts"]["command"]
        assert command["program"] == "cat" and not command["outside_root"]


def test_an_ask_becoming_an_allow_is_a_loosening(cli: Any, tmp_path: Path) -> None:
    proposed = _coding_with(
        tmp_path,
        "proposed",
        '@ask("The agent wants to edit a file in the workspace.")\n',
        "",
    )
    done = cli("policy", "analyze", str(proposed), "--against", str(CODING))
    assert done.code == 1
    assert "loosens (ask->allow): files.edit: " in done.out


def test_a_tightening_is_reported_and_passes(cli: Any, tmp_path: Path) -> None:
    proposed = _coding_with(
        tmp_path,
        "proposed",
        '@id("ask-before-write")\n',
        '@id("no-keys")\nforbid (principal, action == Action::"files.read_file", resource)\n'
        'when { context.facts.path.name like "*.pem" };\n\n'
        '@id("pytest-asks")\n@ask("pytest")\npermit (principal, action == Action::"shell.run",'
        ' resource) when { context.facts.command.program == "ls" &&'
        " context.facts.command.options.isEmpty() };\n\n"
        '@id("ask-before-write")\n',
    )
    done = cli("policy", "analyze", str(proposed), "--against", str(CODING), "--json")
    assert done.code == 0, done.err
    changes = {c["change"]: c for c in json.loads(done.out)["changes"]}
    # `ls` without options is still allowed (an allow beats an ask); no other change.
    assert set(changes) == {"allow->deny"}
    denied = changes["allow->deny"]
    assert denied["kind"] == "tightens"
    assert denied["request"]["tool"] == "files.read_file"
    assert denied["request"]["context"]["facts"]["path"]["name"].endswith(".pem")


def test_the_same_set_changes_nothing(cli: Any) -> None:
    done = cli("policy", "analyze", str(CODING), "--against", str(CODING))
    assert done.code == 0
    assert "0 loosening(s), 0 tightening(s)" in done.out


def test_a_construct_outside_the_subset_is_refused_with_its_place(cli: Any, tmp_path: Path) -> None:
    directory = _dir(
        tmp_path,
        "ext",
        '@id("read")\npermit (principal, action in Action::"read_only", resource);\n\n'
        '@id("local-only")\nforbid (principal, action == Action::"files.read_file", resource)\n'
        'when { ip("127.0.0.1").isLoopback() };\n',
    )
    done = cli("policy", "analyze", str(directory))
    assert done.code == 2
    assert str(directory / "policies.cedar") + ":4" in done.err
    assert "local-only" in done.err and "outside what the analysis encodes" in done.err
    # validate still passes, and says what it could not check.
    checked = cli("policy", "validate", str(directory))
    assert checked.code == 0, checked.out + checked.err
    assert "not checked for policies that can never apply" in checked.err


def test_validate_warns_of_impossible_policies(cli: Any, tmp_path: Path) -> None:
    directory = _dir(tmp_path, "planted", PLANTED)
    done = cli("policy", "validate", str(directory))
    assert done.code == 0, done.err
    where = str(directory / "policies.cedar")
    warnings = [line for line in done.out.splitlines() if "warning:" in line]
    assert [w.split(": warning")[0] for w in warnings] == [f"{where}:{n}" for n in (4, 7, 10)]
    assert "ok: 6 policies" in done.out
    denied = cli("policy", "validate", str(directory), "--deny-warnings")
    assert denied.code == 1
    assert "3 warning(s)" in denied.out and "ok:" not in denied.out


@pytest.mark.parametrize("args", [["analyze", "nope"], ["analyze", ".", "--against", "nope"]])
def test_bad_directories(cli: Any, args: list[str]) -> None:
    done = cli("policy", *args)
    assert done.code == 2
    assert "nope: no such directory" in done.err


DOC = ROOT / "docs" / "cedar.md"


def _timeless(text: str) -> list[str]:
    return [re.sub(r" \(\d+\.\d\d s\)$", "", line) for line in text.splitlines()]


def test_the_section_of_docs_cedar_md_runs_as_written(cli: Any, tmp_path: Path) -> None:
    doc = DOC.read_text()
    section = doc.split("## Proving policies: clearance policy analyze", 1)[1].split("\n## ")[0]
    (cedar,) = re.findall(r"```cedar\n(.*?)```", section, re.S)
    consoles = re.findall(r"```console\n(.*?)```", section, re.S)
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "coding.cedar").write_text(cedar)
    proposed = _coding_with_text(cedar)
    (tmp_path / "proposed").mkdir()
    (tmp_path / "proposed" / "coding.cedar").write_text(proposed)
    for console in consoles:
        lines = console.splitlines()
        command, shown = lines[0], lines[1:]
        if shown[-2:] == ["$ echo $?", "1"]:
            shown, code = shown[:-2], 1
        else:
            code = 0
        words = shlex.split(command[2:])
        done = cli(*words[1:])
        assert done.code == code, done.err
        assert _timeless(done.out) == _timeless("\n".join(shown)), done.out


def _coding_with_text(cedar: str) -> str:
    """The doc's proposal: a forbid on `*.pem` reads, and `-R` for `ls`."""
    assert '["-l", "-a"]' in cedar
    text = cedar.replace('["-l", "-a"]', '["-l", "-a", "-R"]')
    read = 'permit (principal, action in Action::"read_only", resource);\n'
    return text.replace(
        read,
        read + '\n@id("no-keys")\nforbid (principal, action == Action::"files.read_file", '
        'resource)\nwhen { context.facts.path.extension == "pem" };\n',
    )


def _without_z3(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The command in a Python where ``import z3`` fails (the extra not installed)."""
    code = "import sys; sys.modules['z3'] = None; from clearance.cli.main import main; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_without_the_extra_a_one_line_install_hint(tmp_path: Path) -> None:
    directory = _dir(tmp_path, "planted", PLANTED)
    done = _without_z3(tmp_path, "policy", "analyze", str(directory))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith("pip install 'clearance[analysis]'")
    assert len(done.stderr.strip().splitlines()) == 1
    # validate still validates, and says it did not look for impossible policies.
    checked = _without_z3(tmp_path, "policy", "validate", str(directory))
    assert checked.returncode == 0, checked.stderr
    assert "ok: 6 policies" in checked.stdout and "warning" not in checked.stdout
    assert "not checked for policies that can never apply" in checked.stderr
    assert "pip install 'clearance[analysis]'" in checked.stderr
    denied = _without_z3(tmp_path, "policy", "validate", str(directory), "--deny-warnings")
    assert denied.returncode == 2
    assert "pip install 'clearance[analysis]'" in denied.stderr
