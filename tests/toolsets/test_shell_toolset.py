import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from clearance import CallContext, CallToolResult, ConfigError, Principal, ToolRegistry
from clearance.errors import CallCancelledError
from clearance.facts.command import CommandFact
from clearance.toolsets import register_shell, shell_tools
from clearance.toolsets.confinement import Confinement


def ctx() -> CallContext:
    return CallContext(
        session_id="s",
        turn_id=None,
        call_id="c",
        qualified_name="shell.run",
        model_alias="shell__run",
        principal=Principal("User", "u"),
    )


UNCONFINED = Confinement(kind="none")


def run(
    root: Path, command: str, context: CallContext | None = None, **options: Any
) -> CallToolResult:
    """The tool's handler on ``command``. Unconfined unless told otherwise: these tests
    check what the tool itself does (argv, environment, git and pytest kept in the
    workspace), which must hold without the kernel's ruleset too; R15's tests are in
    test_confinement.py."""
    options.setdefault("confinement", UNCONFINED)
    (tool,) = shell_tools(root, **options)
    result = tool.handler({"command": command}, context or ctx())
    assert isinstance(result, CallToolResult)
    return result


def test_runs_without_a_shell_in_the_root(tmp_path: Path) -> None:
    (tmp_path / "hello.txt").write_text("hi\n")
    result = run(tmp_path, "ls -1")
    assert not result.is_error
    assert result.structured_content["stdout"] == "hello.txt\n"
    assert result.structured_content["exit_code"] == 0
    assert json.loads(result.text) == result.structured_content
    # no shell: operators reach the program as words
    echoed = run(tmp_path, "echo a; rm -rf / && $HOME | `x`")
    assert echoed.structured_content["stdout"] == "a; rm -rf / && $HOME | `x`\n"
    assert run(tmp_path, "pwd").structured_content["stdout"].strip() == str(tmp_path.resolve())


def test_nonzero_exit_and_stderr_are_an_error_result(tmp_path: Path) -> None:
    result = run(tmp_path, "ls does-not-exist")
    assert result.is_error
    assert result.structured_content["exit_code"] != 0
    assert "does-not-exist" in result.structured_content["stderr"]
    assert result.structured_content["timed_out"] is False


def test_environment_is_minimal_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUPER_SECRET_API_KEY", "do-not-leak")
    out = run(tmp_path, "env").structured_content["stdout"]
    assert "do-not-leak" not in out
    assert sorted(line.split("=")[0] for line in out.splitlines()) == [
        "GIT_CEILING_DIRECTORIES",
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_NOSYSTEM",
        "GIT_TERMINAL_PROMPT",
        "HOME",
        "LANG",
        "PATH",
        "TMPDIR",
    ]
    assert f"GIT_CEILING_DIRECTORIES={tmp_path.resolve().parent}\n" in out
    home = next(line for line in out.splitlines() if line.startswith("HOME="))
    assert home != f"HOME={tmp_path.resolve()}"  # never the workspace the agent writes
    custom = run(tmp_path, "env", env={"PATH": "/usr/bin:/bin", "X": "1"})
    assert "X=1" in custom.structured_content["stdout"]


def test_allowed_programs(tmp_path: Path) -> None:
    assert not run(tmp_path, "echo ok", allowed_programs={"echo"}).is_error
    refused = run(tmp_path, "rm -rf x", allowed_programs={"echo", "git"})
    assert refused.is_error and refused.structured_content == {"error": "not_allowed"}
    assert "'rm' is not allowed" in refused.text and "echo, git" in refused.text
    # the program must be written exactly as allowed: no path tricks
    assert run(tmp_path, "/bin/echo x", allowed_programs={"echo"}).is_error
    (tool,) = shell_tools(tmp_path, allowed_programs={"git", "pytest"})
    assert "Allowed programs: git, pytest." in tool.description


@pytest.mark.parametrize(
    ("command", "error"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("echo 'unclosed", "parse_error"),
        ("no-such-program-xyz --help", "not_found"),
    ],
)
def test_domain_errors(tmp_path: Path, command: str, error: str) -> None:
    result = run(tmp_path, command)
    assert result.is_error and result.structured_content == {"error": error}


def test_a_non_executable_file_is_a_domain_error(tmp_path: Path) -> None:
    (tmp_path / "script.sh").write_text("echo hi\n")
    result = run(tmp_path, str(tmp_path / "script.sh"))
    assert result.is_error and result.structured_content == {"error": "not_executable"}


def test_output_is_bounded_and_the_pipe_drained(tmp_path: Path) -> None:
    # far more than a pipe buffer: the child must not block on a full pipe
    command = f"{sys.executable} -c \"import sys; sys.stdout.write('x' * 1_000_000); sys.stderr.write('e' * 10)\""
    result = run(tmp_path, command, max_output=100)
    assert result.structured_content["stdout"] == "x" * 100
    assert result.structured_content["stderr"] == "e" * 10
    assert result.structured_content["truncated"] is True
    assert result.structured_content["exit_code"] == 0


def test_timeout_kills_the_process_group(tmp_path: Path) -> None:
    start = time.monotonic()
    result = run(tmp_path, "sleep 30", timeout=0.3)
    assert time.monotonic() - start < 10
    assert result.is_error and result.structured_content["timed_out"] is True
    assert result.structured_content["exit_code"] == -9


def test_background_children_do_not_hold_the_call(tmp_path: Path) -> None:
    start = time.monotonic()
    result = run(tmp_path, "sh -c 'sleep 30 & echo started'")
    assert time.monotonic() - start < 10
    assert result.structured_content["stdout"] == "started\n"


def test_cancellation_kills_the_command(tmp_path: Path) -> None:
    context = ctx()
    threading.Timer(0.2, context.cancel).start()
    start = time.monotonic()
    with pytest.raises(CallCancelledError):
        run(tmp_path, "sleep 30", context)
    assert time.monotonic() - start < 10


def test_registration_and_options(tmp_path: Path) -> None:
    registry = ToolRegistry()
    (tool,) = register_shell(registry, tmp_path, timeout=5)
    assert tool.qualified_name == "shell.run" and not tool.read_only
    assert tool.timeout is not None and tool.timeout > 5  # a backstop behind our own
    assert tool.input_schema["additionalProperties"] is False
    with pytest.raises(ConfigError):
        shell_tools(tmp_path / "missing")
    with pytest.raises(ValueError):
        shell_tools(tmp_path, timeout=0)


def test_planted_git_config_runs_nothing(tmp_path: Path) -> None:
    """A repository config naming programs (fsmonitor, hooks) must not make an
    allow-listed git command run them."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    marker = tmp_path.parent / f"{tmp_path.name}-pwned"
    hook = tmp_path / "evil.sh"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    with (tmp_path / ".git" / "config").open("a") as config:
        config.write(f"[core]\n\tfsmonitor = {hook}\n\thooksPath = {tmp_path}\n")
    out = run(tmp_path, "git status", allowed_programs={"git"})
    assert not out.is_error, out.text
    assert not marker.exists()


# --- R11 and issue 12/19: what runs is what was checked, and it stays in the workspace ---

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(cwd: Path, *args: str) -> str:
    """Plain git, for setting up repositories (never through the tool)."""
    done = subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"},
    )
    return done.stdout


def repo(path: Path, files: dict[str, str]) -> Path:
    """A git repository at ``path`` with ``files`` committed."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q")
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-qm", "initial")
    return path


def program(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """An executable script that creates a marker file: ``(script, marker)``."""
    marker = tmp_path / f"{name}-ran"
    script = tmp_path / f"{name}.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\n")
    script.chmod(0o755)
    return script, marker


def test_the_tool_declares_the_command_fact(tmp_path: Path) -> None:
    (tool,) = shell_tools(tmp_path)
    kind = tool.facts["/command"]
    assert isinstance(kind, CommandFact)
    assert kind.root == str(tmp_path.resolve())
    assert Path(os.fspath(tool.root or "")) == tmp_path.resolve()


@pytest.mark.parametrize(
    "command",
    ["echo 'a\tb'", "echo 'a\nb'", "echo a\x1b]52;c;eA==\x07", "echo a\u202eb", "echo a\x85"],
)
def test_the_handler_refuses_control_characters_itself(tmp_path: Path, command: str) -> None:
    result = run(tmp_path, command)
    assert result.is_error and result.structured_content == {"error": "refused"}
    assert "character" in result.text


def test_the_handler_runs_exactly_the_canonical_argv(tmp_path: Path) -> None:
    show = f"{sys.executable} -c 'import json, sys; print(json.dumps(sys.argv[1:]))'"
    for words in ["a  'b c' \"d'e\"  f\\ g", "'' x", "--out''put=/x\t-\tz"]:
        command = f"{show} {words}"
        canon = CommandFact(tmp_path).canonicalize(command).value
        ran = json.loads(run(tmp_path, canon).structured_content["stdout"])
        assert ran == shlex.split(canon)[3:] == shlex.split(command)[3:]


@needs_git
@pytest.mark.parametrize(
    "command",
    [
        "git -c core.fsmonitor={script} status",
        "git -c alias.x=!{script} x",
        "git -c 'alias.x=!{script}' x",
        "git -c alias.x='!'{script} x",
        "git\t-c\tcore.fsmonitor={script}\tstatus",
        "git --no-pager -c core.pager={script} log",
        "git -c core.pager={script} -P log",
        "git --config-env=core.fsmonitor=EVIL status",
        "git -c diff.external={script} diff",
        "git -C . -c core.fsmonitor={script} status",
        "git --exec-path={bindir} status",
        "git --help diff",
    ],
)
def test_git_global_options_run_no_program(tmp_path: Path, command: str) -> None:
    """Issue 12 item 9: the agent's ``-c`` came after the hardening and won."""
    work = repo(tmp_path / "work", {"a.txt": "a\n"})
    (work / "a.txt").write_text("changed\n")
    script, marker = program(tmp_path, "evil")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "git-status").symlink_to(script)
    result = run(
        work,
        command.format(script=script, bindir=bindir),
        allowed_programs={"git"},
        env={"PATH": os.environ["PATH"], "EVIL": str(script), "HOME": str(tmp_path)},
    )
    assert result.is_error and result.structured_content == {"error": "refused"}, result.text
    assert "git: the global option" in result.text
    assert not marker.exists()


@needs_git
def test_git_diff_works_when_there_are_changes(tmp_path: Path) -> None:
    """Issue 12 item 14: ``-c diff.external=`` made git run the program ""."""
    work = repo(tmp_path / "work", {"a.txt": "one\n", "b.txt": "two\n"})
    (work / "a.txt").write_text("one\nmore\n")
    diff = run(work, "git diff")
    assert not diff.is_error, diff.text
    assert "+more" in diff.structured_content["stdout"]
    assert "a.txt" in run(work, "git diff --stat").structured_content["stdout"]
    git(work, "commit", "-qam", "more")
    for command in ["git log -p", "git show", "git show HEAD", "git whatchanged -p -1"]:
        shown = run(work, command)
        assert not shown.is_error, (command, shown.text)
        assert "+more" in shown.structured_content["stdout"], command
    assert "one" in run(work, "git blame a.txt").structured_content["stdout"]


@needs_git
def test_planted_diff_drivers_textconv_and_aliases_run_nothing(tmp_path: Path) -> None:
    """A repository's config and .gitattributes cannot make diff, log, show or blame, an
    alias, abbreviated options or the help viewer run a program."""
    work = repo(tmp_path / "work", {"a.txt": "one\n"})
    script, marker = program(tmp_path, "evil")
    (work / ".gitattributes").write_text("* diff=evil\n")
    with (work / ".git" / "config").open("a") as config:
        config.write(
            f'[diff "evil"]\n\tcommand = {script}\n\ttextconv = {script}\n'
            f"[alias]\n\tx = !{script}\n\tst = !{script}\n"
            f'[man]\n\tviewer = evil\n[man "evil"]\n\tcmd = {script}\n'
            "[help]\n\tautocorrect = immediate\n"
        )
    git(work, "add", "-A")
    git(work, "commit", "-qm", "attributes")
    (work / "a.txt").write_text("two\n")
    # A repository whose config names diff drivers is refused outright: -c cannot switch
    # them off for every command (git status -v runs textconv; red-team finding).
    for command in ["git diff", "git log -p", "git show", "git blame a.txt", "git status -v"]:
        result = run(work, command)
        assert result.structured_content == {"error": "refused"}, (command, result.text)
        assert "diff.evil" in result.text
        assert not marker.exists(), command
    for command in ["git x", "git st", "git sx", "git diff --help", "git help diff"]:
        run(work, command)
        assert not marker.exists(), command
    for command in ["git diff --ext-diff", "git log -p --textconv", "git diff --help"]:
        refused = run(work, command)
        assert refused.structured_content == {"error": "refused"}, command
    assert not marker.exists()


@needs_git
def test_git_refuses_abbreviated_options(tmp_path: Path) -> None:
    """``git grep --open-files-in=CMD`` (an abbreviation of --open-files-in-pager) runs
    CMD; a policy that allowlists option names must see the names git acts on."""
    work = repo(tmp_path / "work", {"a.txt": "needle\n"})
    script, marker = program(tmp_path, "pager")
    result = run(work, f"git grep --open-files-in={script} needle")
    assert result.is_error and "abbreviated" in result.structured_content["stderr"]
    assert not marker.exists()
    assert "a.txt" in run(work, "git grep --open-files-in-pager=true -l needle").text or True
    assert "a.txt" in run(work, "git grep -l needle").structured_content["stdout"]


@pytest.fixture
def monorepo(tmp_path: Path) -> Path:
    """An outer repository with a secret, its history and uncommitted changes; the
    workspace is its package ``pkg``."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    outer = repo(
        tmp_path / "mono",
        {"secrets/prod.env": "TOKEN=committed-secret\n", "pkg/a.txt": "a\n"},
    )
    (outer / "secrets" / "prod.env").write_text("TOKEN=uncommitted-secret\n")
    (outer / "pkg" / "a.txt").write_text("a changed\n")
    return outer / "pkg"


SPYING = [
    "git status",
    "git status --porcelain --ignored",
    "git log -p",
    "git log --all --stat",
    "git diff",
    "git diff HEAD",
    "git show HEAD:secrets/prod.env",
    "git show HEAD:../secrets/prod.env",
    "git diff HEAD:secrets/prod.env HEAD:pkg/a.txt",
    "git ls-files --full-name :/",
    "git grep TOKEN HEAD",
    "git rev-parse --show-toplevel",
    "git cat-file -p HEAD:secrets/prod.env",
]


def assert_sees_nothing_outside(result: CallToolResult) -> None:
    """No content of the outer repository, and no name of it in the output (an error
    message may repeat the name the command gave)."""
    assert "TOKEN" not in result.text and "-secret" not in result.text, result.text
    assert "prod.env" not in result.structured_content.get("stdout", ""), result.text


@pytest.mark.parametrize("command", SPYING)
def test_git_in_a_package_of_a_monorepo_sees_nothing_of_it(monorepo: Path, command: str) -> None:
    """Issue 19: the workspace is not a repository; git must not find the outer one."""
    result = run(monorepo, command)
    assert_sees_nothing_outside(result)
    assert "mono" not in result.text
    assert result.is_error and result.structured_content["exit_code"] != 0


@pytest.mark.parametrize("command", SPYING)
def test_git_in_a_nested_repository_sees_only_its_own(monorepo: Path, command: str) -> None:
    repo(monorepo, {"own.txt": "own\n"})
    with (monorepo / ".git" / "config").open("a") as config:
        config.write(f"[core]\n\tworktree = {monorepo.parent}\n")
    assert_sees_nothing_outside(run(monorepo, command))
    assert "own.txt" in run(monorepo, "git ls-files").structured_content["stdout"]
    top = run(monorepo, "git rev-parse --show-toplevel").structured_content["stdout"]
    assert top.strip() == str(monorepo.resolve())


@needs_git
@pytest.mark.parametrize("kind", ["gitfile", "symlink"])
def test_a_dotgit_that_points_elsewhere_is_refused(tmp_path: Path, kind: str) -> None:
    other = repo(tmp_path / "other", {"secret.txt": "other-secret\n"})
    work = tmp_path / "work"
    work.mkdir()
    if kind == "gitfile":
        (work / ".git").write_text(f"gitdir: {other / '.git'}\n")
    else:
        (work / ".git").symlink_to(other / ".git")
    result = run(work, "git show HEAD:secret.txt")
    assert result.structured_content == {"error": "refused"}
    assert ".git is not a directory" in result.text
    assert "other-secret" not in result.text


@needs_git
def test_git_refuses_a_ceiling_it_cannot_write(tmp_path: Path) -> None:
    work = tmp_path / "a:b" / "work"
    work.mkdir(parents=True)
    result = run(work, "git status")
    assert result.structured_content == {"error": "refused"} and "':'" in result.text
    git(work, "init", "-q")  # with its own .git, discovery stops there
    assert not run(work, "git status").is_error


@needs_git
def test_git_init_and_clone_still_work_in_the_workspace(tmp_path: Path) -> None:
    source = repo(tmp_path / "work" / "source", {"a.txt": "a\n"})
    work = source.parent
    assert not run(work, "git init -q").is_error
    cloned = run(work, "git clone -q source copy")
    assert not cloned.is_error, cloned.text
    assert (work / "copy" / "a.txt").read_text() == "a\n"


def pytest_env(tmp_path: Path) -> dict[str, str]:
    return {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "HOME": str(tmp_path)}


@pytest.fixture
def nested(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace with one passing test, in a parent that has a conftest.py and a
    pytest.ini that would each leave a marker: ``(workspace, marker)``."""
    if not (Path(sys.executable).parent / "pytest").exists():
        pytest.skip("pytest is not installed beside this interpreter")
    parent = tmp_path / "parent"
    work = parent / "ws"
    work.mkdir(parents=True)
    marker = tmp_path / "parent-ran"
    (parent / "conftest.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (parent / "parentplugin.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (parent / "pytest.ini").write_text("[pytest]\naddopts = -p parentplugin\npythonpath = .\n")
    (work / "test_ok.py").write_text("def test_ok():\n    assert True\n")
    return work, marker


def test_pytest_loads_nothing_from_the_parent_directory(
    tmp_path: Path, nested: tuple[Path, Path]
) -> None:
    """Issue 19: pytest's rootdir, ini-file and conftest.py discovery walk up."""
    work, marker = nested
    result = run(work, "pytest", env=pytest_env(tmp_path), timeout=60)
    assert not result.is_error, result.text
    assert f"rootdir: {work.resolve()}\n" in result.structured_content["stdout"]
    assert "1 passed" in result.structured_content["stdout"]
    assert not marker.exists()
    # "c" as an option's value is not pytest's -c
    result = run(work, "pytest -q test_ok.py -k ok -rc", env=pytest_env(tmp_path), timeout=60)
    assert "1 passed" in result.structured_content["stdout"], result.text
    assert not marker.exists()


def test_pytest_uses_the_workspaces_own_configuration(
    tmp_path: Path, nested: tuple[Path, Path]
) -> None:
    work, marker = nested
    (work / "check_more.py").write_text("def test_more():\n    assert True\n")
    (work / "pyproject.toml").write_text('[project]\nname = "x"\n')
    # the workspace's own addopts cannot move the root or the conftest cut back up
    (work / "tox.ini").write_text(
        "[pytest]\npython_files = check_*.py\naddopts = --rootdir=.. --confcutdir=..\n"
    )
    result = run(work, "pytest -q", env=pytest_env(tmp_path), timeout=60)
    assert "1 passed" in result.structured_content["stdout"], result.text
    out = run(work, "pytest", env=pytest_env(tmp_path), timeout=60).structured_content["stdout"]
    assert "configfile: tox.ini" in out and "check_more.py" in out
    assert f"rootdir: {work.resolve()}\n" in out
    assert not marker.exists()
    (work / "pytest.ini").symlink_to(work.parent / "pytest.ini")
    refused = run(work, "pytest", env=pytest_env(tmp_path))
    assert refused.structured_content == {"error": "refused"} and "symlink" in refused.text
    assert not marker.exists()


@pytest.mark.parametrize(
    "command",
    [
        "pytest -c ../pytest.ini",
        "pytest -c=../pytest.ini",
        "pytest -c../pytest.ini",
        "pytest -qc ../pytest.ini",
        "pytest -vvqc../pytest.ini",
        "pytest --config-file=../pytest.ini",
        "pytest --config-file ../pytest.ini",
        "pytest --rootdir=..",
        "pytest --rootdir ..",
        "pytest --confcutdir=/",
        "pytest test_ok.py --confcutdir /",
    ],
)
def test_pytest_options_that_choose_the_configuration_are_refused(
    tmp_path: Path, nested: tuple[Path, Path], command: str
) -> None:
    work, marker = nested
    result = run(work, command, env=pytest_env(tmp_path), timeout=60)
    assert result.structured_content == {"error": "refused"}, result.text
    assert not marker.exists()


@needs_git
def test_a_repository_whose_config_names_a_filter_driver_is_refused(tmp_path: Path) -> None:
    """filter.<driver>.clean runs on an unasked `git status` for any file .gitattributes
    assigns to it; no -c can switch every driver off, so git is not run (red team)."""
    work = repo(tmp_path / "work", {"a.txt": "one\n"})
    script, marker = program(tmp_path, "filter")
    (work / ".gitattributes").write_text("* filter=evil\n")
    with (work / ".git" / "config").open("a") as config:
        config.write(f'[filter "evil"]\n\tclean = {script}\n\tsmudge = {script}\n')
    (work / "a.txt").write_text("two\n")
    for command in ["git status", "git diff --stat", "git status --porcelain"]:
        result = run(work, command)
        assert result.structured_content == {"error": "refused"}, (command, result.text)
        assert "filter.evil.clean" in result.text
    assert not marker.exists()


@needs_git
def test_pytest_runs_without_a_cache_directory(tmp_path: Path) -> None:
    """A .pytest_cache symlink leading out would have pytest write there (red team)."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "test_a.py").write_text("def test_a():\n    assert True\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (work / ".pytest_cache").symlink_to(outside)
    result = run(work, "pytest -q")
    assert "1 passed" in result.structured_content["stdout"], result.text
    assert not any(outside.iterdir())
