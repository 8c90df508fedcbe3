"""README.md runs as written: every Python block, every shell command, every output shown.

Each block of the README is claimed by a test below (:data:`CLAIMED`); a block no test
claims fails :func:`test_every_block_is_claimed_by_a_test`. What runs how:

- Python blocks run as written (the walkthrough's files are written to a directory and run
  there as a user would, in subprocesses);
- shell commands run as written, in a temporary directory, through ``bash``: the
  walkthrough's policy commands and the ask store's (``clearance approvers add``, ``asks
  list``, ``asks approve``), and the ``pip install`` lines as ``pip install --dry-run``
  (which builds the checkout and resolves every extra named, installing nothing; slow:
  CI's slow stage, tests/conftest.py SLOW);
- the two commands at the top run in a copy of the checkout, in fresh virtual environments
  (slow: CI's slow stage), the second up to collecting the suite (running the suite is
  what CI does with it);
- the commands that serve until stopped (``clearance gateway``, ``clearance inbox``) are
  checked as the installed script parses them, with every option shown; the inbox's own
  tests run it for real (tests/inbox);
- the outputs shown (``console`` blocks) are compared with what the commands print, ids and
  correlation ids aside.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest
from console_script import command

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
CHECKOUT = "/path/to/clearance"
"""How the README names the reader's checkout."""


class Block(NamedTuple):
    section: str
    lang: str
    line: int
    text: str


_FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def blocks() -> list[Block]:
    text = README.read_text(encoding="utf-8")
    found = []
    for m in _FENCE.finditer(text):
        headings = re.findall(r"^## (.+)$", text[: m.start()], re.MULTILINE)
        line = text.count("\n", 0, m.start()) + 2
        found.append(Block(headings[-1] if headings else "", m.group(1), line, m.group(2)))
    return found


def block(section: str, lang: str, index: int = 0) -> Block:
    """The ``index``-th ``lang`` block of ``section``."""
    return [b for b in blocks() if b.section == section and b.lang == lang][index]


OWN = "Your tool under your own Cedar policy"
CHECKED = "What is checked is what runs"
FRAMEWORK = "With an agent framework that runs its tools"
BROWSER = "Approving in the browser"

CLAIMED = {
    ("", "sh"): 1,
    ("In twenty lines", "python"): 1,
    ("Install into your project", "sh"): 1,
    (OWN, "python"): 2,
    (OWN, "cedar"): 1,
    (OWN, "json"): 1,
    (OWN, "sh"): 2,
    (OWN, "console"): 2,
    (CHECKED, "python"): 1,
    (CHECKED, "console"): 1,
    (FRAMEWORK, "python"): 1,
    (BROWSER, "sh"): 1,
}
"""How many blocks of each section and language the tests below run."""


def test_every_block_is_claimed_by_a_test() -> None:
    counts: dict[tuple[str, str], int] = {}
    for b in blocks():
        counts[(b.section, b.lang)] = counts.get((b.section, b.lang), 0) + 1
    assert counts == CLAIMED, "a README block no test runs (or a test of a block that left)"


# --- helpers ---------------------------------------------------------------------------------


def _env(tmp_path: Path) -> dict[str, str]:
    """The environment of a user's shell: the installed ``clearance``, no ``CLEARANCE_*``
    of the test run, approver keys in a config directory of the test's own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLEARANCE")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    env["PATH"] = f"{Path(command()[0]).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env.pop("COLUMNS", None)
    return env


def _sh(line: str, cwd: Path, *, stdin: str = "", timeout: float = 120) -> str:
    """One README command line, run by bash as written (its comment too); its stdout."""
    done = subprocess.run(
        ["bash", "-c", line],
        cwd=cwd,
        env=_env(cwd),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _lines(b: Block) -> list[str]:
    """The command lines of a shell block (no blank lines)."""
    return [line for line in b.text.splitlines() if line.strip()]


def _run_python(b: Block) -> str:
    """Run a Python block as a script would (``__main__``); what it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(b.text, f"README.md:{b.line}", "exec"), {"__name__": "__main__"})
    return out.getvalue()


def _same_output(shown: str, printed: str) -> None:
    """``printed`` is what the README shows, but for ids and correlation ids."""

    def plain(text: str) -> str:
        text = re.sub(r"correlation id [0-9a-f]+", "correlation id ID", text)
        return re.sub(r"ask_[0-9a-f]+", "ask_ID", text).strip()

    assert plain(printed) == plain(shown)


# --- the two commands at the top -------------------------------------------------------------


def test_the_top_commands_are_the_two_the_readme_promises() -> None:
    first, second = _lines(block("", "sh"))
    assert first.endswith("pip install -e . && clearance demo")
    assert second.endswith("pip install -e '.[test]' && python -m pytest -q -n auto")
    # the paragraph under them: the slow stage and how to run it
    text = README.read_text(encoding="utf-8")
    assert "`python -m pytest -q -n auto -m slow`" in text
    assert "Python 3.11 or newer on Linux or macOS" in text


@pytest.mark.timeout(1800)  # two fresh installs from the package index, then collection
def test_the_top_commands_run_in_a_fresh_checkout(tmp_path: Path) -> None:
    """Both commands, as a newcomer runs them, in a copy of the checkout: the demo runs,
    and the suite installs and collects without an error (CI runs it)."""
    first, second = _lines(block("", "sh"))
    checkout = tmp_path / "clearance"
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, (f.decode() for f in files)):
        source, target = ROOT / name, checkout / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():  # policies -> clearance/packs
            target.symlink_to(os.readlink(source))
        elif source.is_file():
            shutil.copy2(source, target)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("CLEARANCE") and k not in ("PYTHONPATH", "VIRTUAL_ENV")
    }
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(sys.prefix)
    )

    def run(line: str) -> str:
        done = subprocess.run(
            ["bash", "-c", line], cwd=checkout, env=env, capture_output=True, text=True,
            timeout=900,
        )  # fmt: skip
        assert done.returncode == 0, f"{line}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        return done.stdout

    demo = run(first)
    assert "c7  denied   by shell-stay-in-workspace, shell-no-chaining" in demo
    collected = run(second + " --collect-only -p no:cacheprovider")
    found = re.search(r"(\d+)/(\d+) tests collected \((\d+) deselected\)", collected)
    assert found and int(found.group(1)) > 2000 and int(found.group(3)) > 0, collected[-2000:]


# --- In twenty lines -------------------------------------------------------------------------


def test_the_twenty_lines_run() -> None:
    printed = _run_python(block("In twenty lines", "python")).splitlines()
    assert printed[0] == "(contents of docs/a.md)"
    assert printed[1].startswith("no rule allows files.read_file")  # default deny
    assert printed[2] == "ok"  # asked, approved once


# --- Install ---------------------------------------------------------------------------------


def _pip_dry_run(line: str, tmp_path: Path) -> None:
    """A ``pip install`` line of the README, the checkout put for its path, as a dry run:
    the checkout builds and every extra named resolves, nothing is installed."""
    words = shlex.split(line, comments=True)
    assert words[:2] == ["pip", "install"], line
    words = [w.replace(CHECKOUT, str(ROOT)) for w in words]
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", *words[2:]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"{line}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    assert "Would install clearance" in done.stdout


def test_the_extras_table_names_every_extra() -> None:
    import tomllib

    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ])  # fmt: skip
    text = README.read_text(encoding="utf-8")
    start = text.index("## Install into your project")
    table = text[start : text.index("\n## ", start + 1)]
    named = set(re.findall(r"^\| (.+?) \|", table, re.MULTILINE)) - {"extra", "---"}
    in_table = {e.strip("` ") for row in named for e in row.split(",")}
    assert in_table == extras


@pytest.mark.timeout(600)
@pytest.mark.parametrize("line", _lines(block("Install into your project", "sh")))
def test_each_install_line_resolves(line: str, tmp_path: Path) -> None:
    _pip_dry_run(line, tmp_path)


# --- Your tool under your own Cedar policy ---------------------------------------------------


def _project(tmp_path: Path) -> Path:
    """The walkthrough's files, where the README puts them."""
    (tmp_path / "policies").mkdir()
    (tmp_path / "tickets.py").write_text(block(OWN, "python", 0).text)
    (tmp_path / "policies" / "tickets.cedar").write_text(block(OWN, "cedar").text)
    (tmp_path / "policies" / "tickets.tests.json").write_text(block(OWN, "json").text)
    (tmp_path / "later.py").write_text(block(OWN, "python", 1).text)
    return tmp_path


def test_the_file_names_are_the_ones_the_text_gives() -> None:
    text = README.read_text(encoding="utf-8")
    for name in ("`tickets.py`", "`policies/tickets.cedar`", "`policies/tickets.tests.json`"):
        assert name in text
    assert "(`later.py`)" in text


def test_the_policy_is_validated_and_tested_as_shown(tmp_path: Path) -> None:
    project = _project(tmp_path)
    printed = "".join(_sh(line, project) for line in _lines(block(OWN, "sh", 0)))
    assert json.loads((project / "tools.json").read_text())["tools"][0]["name"] == "tickets.close"
    _same_output(block(OWN, "console", 0).text, printed)


def test_a_broken_policy_fails_its_test(tmp_path: Path) -> None:
    """The test cases are worth something: a policy that asks less fails them."""
    project = _project(tmp_path)
    cedar = project / "policies" / "tickets.cedar"
    cedar.write_text(cedar.read_text().replace("ticket >= 1000", "ticket >= 5000"))
    _sh(_lines(block(OWN, "sh", 0))[0], project)
    done = subprocess.run(
        ["bash", "-c", _lines(block(OWN, "sh", 0))[2]],
        cwd=project,
        env=_env(project),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and "others ask a person" in done.stdout


def test_a_person_answers_the_ask(tmp_path: Path) -> None:
    project = _project(tmp_path)
    shown = block(OWN, "console", 1).text.splitlines()
    assert shown[0] == "$ python tickets.py"
    printed = _sh("python tickets.py", project, stdin="o\n")
    # input() from a pipe does not echo the answer, as a terminal does
    printed = printed.replace("[d]eny? ", "[d]eny? o\n")
    _same_output("\n".join(shown[1:]), printed)
    # the journal the README points to: the three calls
    journal = _sh("clearance journal --db clearance.db --json", project)
    rows = json.loads(journal)
    assert [(r["decision"], r["status"]) for r in rows] == [
        ("allow", "ok"),
        ("ask", "ok"),
        ("deny", "denied"),
    ]


def test_the_commands_the_walkthrough_names_in_its_text(tmp_path: Path) -> None:
    """``clearance policy schema``, ``clearance journal`` and ``clearance inbox``, named in
    the text of the walkthrough, run as written (the inbox, a server, as parsed)."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index(f"## {OWN}") : text.index("\n## ", text.index(f"## {OWN}") + 1)]
    named = re.findall(r"`(clearance [^`]+)`", section.replace("\n", " "))
    project = _project(tmp_path)
    _sh(_lines(block(OWN, "sh", 0))[0], project)
    schema = _sh("clearance policy schema --tools tools.json", project)
    assert 'action "tickets.close"' in schema and "ticket: Long" in schema
    _sh("python tickets.py", project, stdin="o\n")
    journal = _sh("clearance journal --db clearance.db", project).splitlines()
    assert len(journal) == 4 and all("tickets.close" in row for row in journal[1:])
    assert "clearance policy schema --tools tools.json" in named
    assert "clearance journal --db clearance.db" in named
    inbox = next(n for n in named if n.startswith("clearance inbox"))
    done = subprocess.run(
        [*command(), *shlex.split(inbox)[1:], "--help"],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and "--user" in done.stdout and "--db" in done.stdout


def test_a_person_who_answers_no_closes_nothing(tmp_path: Path) -> None:
    printed = _sh("python tickets.py", _project(tmp_path), stdin="d\n")
    assert "#4242: denied" in printed and "closed ticket 4242" not in printed


def test_an_ask_waits_in_the_store_for_a_person(tmp_path: Path) -> None:
    """The sh block of "When nobody is there to answer", line by line: each does what its
    comment says (the ask id shown is the one the first run printed)."""
    project = _project(tmp_path)
    lines = _lines(block(OWN, "sh", 1))
    shown_id = re.search(r"ask_[0-9a-f]+", lines[0])
    assert shown_id is not None
    first = _sh(lines[0], project)
    found = re.fullmatch(r"waiting for a person: ask (ask_[0-9a-f]+)\n", first)
    assert found, first
    ask_id = found.group(1)
    assert "approver alice added" in _sh(lines[1], project)
    assert ask_id in _sh(lines[2], project)
    approve = lines[3].replace(shown_id.group(0), ask_id)
    assert f"allow_once {ask_id} by alice" in _sh(approve, project)
    assert _sh(lines[4], project) == "closed ticket 4242\n"
    again = _sh(lines[5], project)
    assert again.startswith("waiting for a person: ask ask_") and ask_id not in again
    for line, out in ((lines[0], first), (lines[4], "closed ticket 4242\n")):
        assert line.split("# ")[1].split(" ask_")[0] in out


def test_an_answer_without_a_key_is_no_answer(tmp_path: Path) -> None:
    """Without ``clearance approvers add alice`` the approve command answers nothing."""
    project = _project(tmp_path)
    lines = _lines(block(OWN, "sh", 1))
    ask_id = _sh(lines[0], project).split()[-1]
    shown_id = re.search(r"ask_[0-9a-f]+", lines[3])
    assert shown_id is not None
    done = subprocess.run(
        ["bash", "-c", lines[3].replace(shown_id.group(0), ask_id)],
        cwd=project,
        env=_env(project),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert _sh(lines[0], project).startswith("waiting for a person")


# --- What is checked is what runs ------------------------------------------------------------


def test_what_is_checked_runs_and_prints_what_is_shown() -> None:
    printed = _run_python(block(CHECKED, "python"))
    _same_output(block(CHECKED, "console").text, printed)


# --- With an agent framework -----------------------------------------------------------------


def test_the_host_that_runs_its_tools() -> None:
    printed = _run_python(block(FRAMEWORK, "python")).splitlines()
    assert printed[0] == "c1 ok wrote docs/a.md"
    assert printed[1].startswith("c2 denied no rule allows files.write_file")


# --- Approving in the browser ----------------------------------------------------------------


def _clearance_commands() -> list[tuple[str, list[str]]]:
    """Every ``clearance`` command of the README's shell blocks: (line, arguments)."""
    found = []
    for b in blocks():
        if b.lang != "sh":
            continue
        for line in _lines(b):
            for part in re.split(r"&&|&(?!&)", line.split(" #")[0]):
                words = shlex.split(part)
                if words and words[0] == "clearance":
                    found.append((line, words[1:]))
    return found


RUN_FOR_REAL = ("policy validate", "policy test", "approvers add", "asks list", "asks approve")
"""Commands the tests above run as written; the rest (servers) are checked as parsed."""


def _parsed_only() -> list[list[str]]:
    seen: list[list[str]] = []
    for _, args in _clearance_commands():
        if args not in seen and not " ".join(args).startswith(RUN_FOR_REAL):
            seen.append(args)
    return seen


def test_the_commands_run_for_real_are_in_the_readme() -> None:
    shown = {" ".join(args) for _, args in _clearance_commands()}
    for verb in RUN_FOR_REAL:
        assert any(line.startswith(verb) for line in shown), verb


@pytest.mark.parametrize("args", _parsed_only(), ids=" ".join)
def test_each_clearance_command_parses_with_the_options_shown(
    args: list[str], tmp_path: Path
) -> None:
    done = subprocess.run(
        [*command(), *args, "--help"],
        cwd=tmp_path,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    usage = done.stdout.splitlines()[0].split(" [OPTIONS]")[0]
    verbs = [" ".join(args[:k]) for k in range(1, len(args) + 1)]
    assert usage in [f"Usage: clearance {v}" for v in verbs], usage
    for option in (a for a in args if a.startswith("-")):
        assert re.search(rf"(^|\s){re.escape(option)}\b", done.stdout, re.MULTILINE), option


def test_the_browser_block_adds_the_key_before_the_inbox(tmp_path: Path) -> None:
    lines = _lines(block(BROWSER, "sh"))
    assert lines[0].startswith(f"pip install -e '{CHECKOUT}[mcp]'")
    assert _sh(lines[1], tmp_path).startswith("approver alice added")
    assert "approvers add alice" in lines[1] and "inbox" in lines[3]


@pytest.mark.timeout(600)
def test_the_browser_blocks_install_line_resolves(tmp_path: Path) -> None:
    _pip_dry_run(_lines(block(BROWSER, "sh"))[0], tmp_path)


# --- links -----------------------------------------------------------------------------------


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings."""
    found = set()
    for heading in re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        found.add(slug)
    return found


def test_every_link_of_the_readme_and_the_pages_it_moved_to_leads_somewhere() -> None:
    for page in (README, ROOT / "docs" / "performance.md", ROOT / "docs" / "hosts.md"):
        text = page.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if target.startswith(("http://", "https://")):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            assert linked.exists(), f"{page.name}: {target}"
            if anchor and linked.suffix == ".md":
                assert anchor in _anchors(linked), f"{page.name}: {target}"
