"""CommandFact: one canonical value and one fact per argv, and every refusal it promises."""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path
from typing import Any

import pytest

from clearance.facts.base import Canonical, FactError, FactKind
from clearance.facts.command import (
    GIT_GLOBAL_OPTIONS,
    MAX_COMMAND_LENGTH,
    CommandFact,
    outside_root,
    parse_argv,
)


def fact(command: str, root: Path | None = None) -> dict[str, Any]:
    return dict(CommandFact(root).canonicalize(command).fact)


def refused(command: str, root: Path | None = None) -> str:
    with pytest.raises(FactError) as info:
        CommandFact(root).canonicalize(command)
    return info.value.reason


def test_is_a_fact_kind_with_the_documented_shape(tmp_path: Path) -> None:
    kind = CommandFact(tmp_path)
    assert isinstance(kind, FactKind)
    assert kind.name == "command"
    assert kind.json_types == frozenset({"string"})
    assert dict(kind.attributes) == {
        "program": "String",
        "subcommand": "String",
        "argv": "String",
        "args": "Set<String>",
        "options": "Set<String>",
        "global_options": "Set<String>",
        "operands": "Set<String>",
        "outside_root": "Bool",
        "paths": "Set<String>",
        "resolved": "String",
    }
    canon = kind.canonicalize("git diff --stat")
    assert isinstance(canon, Canonical)
    assert set(canon.fact) == set(kind.attributes)
    assert kind.root == os.path.realpath(tmp_path)
    with pytest.raises(FactError, match="not an existing directory"):
        CommandFact(tmp_path / "missing")


def test_a_git_diff_fact() -> None:
    assert fact("git --no-pager diff --stat --cached=x HEAD -- src -x") == {
        "program": "git",
        "subcommand": "diff",
        "argv": "git --no-pager diff --stat --cached=x HEAD -- src -x",
        "args": sorted(["--no-pager", "diff", "--stat", "--cached=x", "HEAD", "--", "src", "-x"]),
        "options": ["--cached", "--stat"],
        "global_options": ["--no-pager"],
        "operands": ["-x", "HEAD", "src"],
        "outside_root": False,
        "paths": [],
        "resolved": "git --no-pager diff --stat --cached=x HEAD -- src -x",
    }


@pytest.mark.parametrize(
    "spelling",
    [
        "git diff --output=/x",
        "git diff --out''put=/x",
        'git diff --out""put=/x',
        "git\tdiff\t--output=/x",
        'git diff "--output=/x"',
        "git diff '--output=/x'",
        "git diff --output\\=/x",
        "g\\it diff --output=/\\x",
        "  git   diff\t \t--output='/x'  ",
        "git diff\n--output=/x",
        '\'git\' "diff" --output="/"x',
    ],
)
def test_spellings_of_one_argv_have_one_value_and_one_fact(spelling: str) -> None:
    kind = CommandFact()
    expected = kind.canonicalize("git diff --output=/x")
    got = kind.canonicalize(spelling)
    assert got == expected
    assert got.value == "git diff --output=/x"
    assert got.fact["options"] == ["--output"]
    assert got.fact["outside_root"] is True


def test_the_canonical_value_splits_back_into_the_argv() -> None:
    kind = CommandFact()
    for command in ["echo 'a  b' \"c'd\" e\\ f", "echo '' x", "ls 'ж файл' #x", "echo $HOME `x` ;"]:
        canon = kind.canonicalize(command)
        assert shlex.split(canon.value) == shlex.split(command)
        assert kind.canonicalize(canon.value) == canon  # idempotent
    assert kind.canonicalize("echo '' x").value == "echo '' x"
    # no shell: operators are plain words, comments are not comments
    assert fact("echo a; rm -rf / #c")["args"] == sorted(["a;", "rm", "-rf", "/", "#c"])


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("", "empty"),
        ("   \t\n ", "empty"),
        ("git diff 'unclosed", "cannot be split"),
        ('git diff "unclosed', "cannot be split"),
        ("git diff trailing\\", "cannot be split"),
        ("echo 'a\tb'", "control character (U+0009)"),
        ("echo 'a\nb'", "control character (U+000A)"),
        ("echo 'a\rb'", "control character (U+000D)"),
        ("echo a\x00b", "control character (U+0000)"),
        ("echo a\x1bb", "control character (U+001B)"),
        ("echo a\x0bb", "control character (U+000B)"),
        ("echo a\x7fb", "control character (U+007F)"),
        ("echo a\x85b", "control character (U+0085)"),
        ("echo a\x9bb", "control character (U+009B)"),
        ("echo a\u202eb", "invisible formatting character (U+202E)"),
        ("echo a\u200bb", "invisible formatting character (U+200B)"),
        ("echo a\u2028b", "invisible formatting character (U+2028)"),
        ("echo a\ufeffb", "invisible formatting character (U+FEFF)"),
        ("echo a\U000e0041b", "invisible formatting character (U+E0041)"),
        ("gi\u200dt status", "invisible formatting character (U+200D)"),
        ("echo a\ud800b", "lone surrogate"),
        ("echo a\udcffb", "lone surrogate"),
    ],
)
def test_refused_command_lines(command: str, reason: str) -> None:
    assert reason in refused(command)


def test_visible_unicode_is_kept() -> None:
    got = CommandFact().canonicalize("echo \u2764\ufe0f ж caf\u00e9 \u00a0")
    # a no-break space is not a separator for shlex (nor for the program): it is a word,
    # and the canonical value quotes it so that a person sees it
    assert shlex.split(got.value) == ["echo", "\u2764\ufe0f", "ж", "caf\u00e9", "\u00a0"]
    assert got.value.endswith(" '\u00a0'")


def test_refusals_name_the_word() -> None:
    assert refused("echo ok 'bad\tword'") == "word 2 contains a control character (U+0009)"


def test_non_strings_and_long_commands_are_refused() -> None:
    with pytest.raises(FactError, match="must be a string"):
        CommandFact().canonicalize(["git", "status"])
    with pytest.raises(FactError, match="longer than"):
        CommandFact().canonicalize("echo " + "a" * MAX_COMMAND_LENGTH)
    with pytest.raises(FactError, match="longer than 10"):
        CommandFact(max_length=10).canonicalize("echo 0123456789")


@pytest.mark.parametrize(
    "command",
    [
        "git -c core.fsmonitor=x status",
        "git -c alias.x=!sh x",
        "git -ccore.pager=x log",
        "git --config-env=core.pager=X log",
        "git --config-env core.pager=X log",
        "git -C .. status",
        "git -C/ status",
        "git --exec-path=/tmp status",
        "git --exec-path",
        "git --git-dir=/outer/.git log",
        "git --git-dir /outer/.git log",
        "git --work-tree=/ status",
        "git --namespace=x log",
        "git --super-prefix=x status",
        "git --bare log",
        "git --list-cmds=others",
        "git --help diff",
        "git -p log",
        "git --paginate log",
        "git --no-pager -c x=y log",
        "git -Pc x=y log",
        "git --git-d=/x log",
        "git --no-pager=x log",
        "git -- status",
        "git - status",
        "/usr/bin/git -c x=y status",
        "./git -c x=y status",
    ],
)
def test_git_global_options_that_change_what_runs_are_refused(command: str) -> None:
    assert refused(command).startswith("git: the global option")


@pytest.mark.parametrize("option", sorted(GIT_GLOBAL_OPTIONS))
def test_harmless_git_global_options_are_facts(option: str) -> None:
    got = fact(f"git {option} status")
    assert got["global_options"] == [option]
    assert got["subcommand"] == "status"
    assert got["options"] == []


def test_options_anywhere_after_the_subcommand_and_dashdash() -> None:
    got = fact("git diff HEAD --output=x -- --stat -")
    assert got["options"] == ["--output"]  # git reads options after operands
    assert got["operands"] == ["-", "--stat", "HEAD"]  # after "--": operands
    assert fact("ls -")["operands"] == ["-"]  # "-" alone is an operand (stdin)
    # an option's value in the next word is an operand (the fact cannot know arity)
    assert fact("git diff --output x")["operands"] == ["x"]
    # abbreviations and clusters are reported as written: allowlist, never deny
    assert fact("git diff --outp=/x")["options"] == ["--outp"]
    assert fact("git diff -sO/x")["options"] == ["-sO/x"]
    # unicode lookalikes are not options (git reads them as operands too)
    got = fact("git diff \u2014output=x \u2212\u2212stat")
    assert got["options"] == []
    assert got["operands"] == ["\u2014output=x", "\u2212\u2212stat"]
    assert got["argv"] == "git diff '\u2014output=x' '\u2212\u2212stat'"


def test_programs_without_subcommands() -> None:
    got = fact("grep -rn --include=*.py needle src")
    assert got["subcommand"] == ""
    assert got["global_options"] == []
    assert got["options"] == ["--include", "-rn"]
    assert got["operands"] == ["needle", "src"]
    assert fact("pytest")["args"] == []


@pytest.mark.parametrize(
    ("command", "subcommand", "global_options", "operands"),
    [
        ("git", "", [], []),
        ("git --version", "", ["--version"], []),
        ("/usr/bin/git status", "status", [], []),
        ("git stash show -p", "stash", [], ["show"]),
        ("pip install -r req.txt", "install", [], ["req.txt"]),
        ("pip --isolated -q install x", "install", ["--isolated", "-q"], ["x"]),
        ("pip --cache-dir c install x", "install", ["--cache-dir"], ["x"]),
        ("pip3 --python=py list", "list", ["--python"], []),
        ("npm --prefix sub install", "install", ["--prefix"], []),
        ("cargo +nightly -q build --release", "build", ["+nightly", "-q"], []),
        ("go -C sub test ./...", "test", ["-C"], ["./..."]),
        ("uv --directory sub run pytest", "run", ["--directory"], ["pytest"]),
        ("docker -H unix:///x ps", "ps", ["-H"], []),
        ("kubectl -n get delete pods", "delete", ["-n"], ["pods"]),
        ("kubectl --namespace=get delete pods", "delete", ["--namespace"], ["pods"]),
    ],
)
def test_subcommands(
    command: str, subcommand: str, global_options: list[str], operands: list[str]
) -> None:
    got = fact(command)
    assert got["subcommand"] == subcommand
    assert got["global_options"] == sorted(global_options)
    assert got["operands"] == sorted(operands)


@pytest.mark.parametrize(
    "command",
    ["kubectl --foo get pods", "docker -x ps", "npm --unknown install", "kubectl -n", "pip -"],
)
def test_unknown_global_options_of_other_programs_are_refused(command: str) -> None:
    # "kubectl --foo get delete": is "get" the value of --foo or the subcommand?
    assert refused(command).startswith(command.split()[0] + ":")


@pytest.mark.parametrize(
    "command",
    [
        "cat /etc/passwd",
        "cat ~/.ssh/id_rsa",
        "cat ~root/x",
        "cat ../x",
        "cat a/../../x",
        "cat a/..",
        "ls ..",
        "git diff --output=/x",
        "git diff --output=../x",
        "git diff --output=~/x",
        "git show HEAD:../x",
        "git show HEAD:/x",
        "git clone file:///etc x",
        "grep -f/etc/passwd x",
        "grep -vf/etc/passwd x",
        "grep -f../x x",
        "grep -f.. x",
        "grep -vf~/x x",
        "wc --files0-from=/etc/x",
        "wc @/etc/args",
        "pytest -o cache_dir=a,/x",
        "pytest --junitxml /tmp/x",
        "/bin/cat x",
    ],
)
def test_lexically_outside_the_root(command: str) -> None:
    assert fact(command)["outside_root"] is True


@pytest.mark.parametrize(
    "command",
    [
        "git log HEAD~3..HEAD",
        "git log main...topic",
        "git diff HEAD~1",
        "cat a/b.txt",
        "ls .",
        "ls ./a",
        "grep -rn x src",
        "git log --format=%h:%s",
        "echo a...b",
    ],
)
def test_inside_the_root(command: str) -> None:
    assert fact(command)["outside_root"] is False


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A root with links inside, outside and in a loop, and a file outside."""
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "f.txt").write_text("in\n")
    (tmp_path / "secret.txt").write_text("secret\n")
    (root / "in").symlink_to("sub")
    (root / "out").symlink_to(tmp_path)
    (root / "sub" / "up").symlink_to("../../secret.txt")
    (root / "loop").symlink_to("loop")
    (root / "a:b").symlink_to(tmp_path)
    (root / "chain").symlink_to("in/up")
    return root


@pytest.mark.parametrize(
    "command",
    [
        "cat out/secret.txt",
        "cat out",
        "cat sub/up",
        "cat ./sub/up",
        "cat chain",
        "cat loop",
        "cat loop/x",
        "git diff --output=out/x",
        "git show HEAD:sub/up",
        "grep -fout/secret.txt x",
        "grep -vfout x",
        "grep -vfchain x",
        "cat a:b",
        "wc @chain",
    ],
)
def test_symlinks_leading_out_of_the_root(tree: Path, command: str) -> None:
    assert fact(command, tree)["outside_root"] is True
    # without a root the kind cannot see links (but "/" after a short option is lexical)
    if not command.startswith("grep -fout/"):
        assert fact(command)["outside_root"] is False


@pytest.mark.parametrize(
    "command",
    ["cat in/f.txt", "cat sub/f.txt", "ls in", "cat missing/x", "git show HEAD:in/f.txt", "ls"],
)
def test_symlinks_inside_the_root(tree: Path, command: str) -> None:
    assert fact(command, tree)["outside_root"] is False


def test_paths_are_checked_at_canonicalize_time(tree: Path) -> None:
    kind = CommandFact(tree)
    assert kind.canonicalize("cat new/x").fact["outside_root"] is False
    (tree / "new").symlink_to(tree.parent)
    assert kind.canonicalize("cat new/x").fact["outside_root"] is True


def test_outside_root_without_a_readable_root(tmp_path: Path) -> None:
    assert outside_root(["cat", "x"], str(tmp_path / "gone")) is True


def test_long_inputs_take_linear_time(tree: Path) -> None:
    kind = CommandFact(tree)
    for command in [
        "echo " + "a:" * 30_000,
        "echo " + "in/" * 20_000,
        "echo -" + "v" * 60_000,
        "echo " + "'a'" * 20_000,
        "echo " + " x" * 30_000,
        "echo " + "a=" * 30_000 + "in",
        "echo in/a:" + "b/c:" * 16_000,
        "echo in/a:" + "b/c:" * 500,
    ]:
        start = time.perf_counter()
        try:
            kind.canonicalize(command)
        except FactError as exc:
            assert "more paths than can be checked" in exc.reason
        assert time.perf_counter() - start < 2, command[:20]


def test_too_many_paths_to_check_is_refused(tree: Path) -> None:
    words = " ".join(f"sub/{i}" for i in range(1100))
    with pytest.raises(FactError, match="more paths than can be checked"):
        CommandFact(tree).canonicalize("cat " + words)
    # prefixes of one word: each is resolved, component by component
    with pytest.raises(FactError, match="more paths than can be checked"):
        CommandFact(tree).canonicalize("cat in/a:" + "b/c:" * 1000)
    # the same words without a root are only checked lexically
    assert CommandFact().canonicalize("cat " + words).fact["outside_root"] is False


def test_parse_argv_reports_where_the_subcommand_is() -> None:
    parsed = parse_argv(["git", "--no-pager", "log", "-p"])
    assert parsed.subcommand_index == 2 and parsed.base_name == "git"
    assert parse_argv(["git"]).subcommand_index is None
    assert parse_argv(["ls", "-l"]).subcommand_index is None
    with pytest.raises(FactError):
        parse_argv([])


@pytest.mark.parametrize(
    "command",
    [
        "grep -R secret",
        "grep -R secret .",
        "grep -rnR secret sub",
        "grep --dereference-recursive secret",
        "grep --deref secret",
        "ls -L",
        "ls -RL sub",
        "ls --dereference .",
        "wc --files0-from=list",
        "wc --files0=list",
        "wc --f list",
    ],
)
def test_programs_that_reach_past_their_words(tree: Path, command: str) -> None:
    """grep -R and ls -L follow links found below a named directory; wc --files0-from
    opens the files a file names."""
    assert fact(command, tree)["outside_root"] is True


def test_links_below_a_directory_are_followed_as_the_program_follows_them(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    (root / "b").mkdir()
    (root / "a" / "f.txt").write_text("f\n")
    (root / "a" / "to-b").symlink_to("../b")
    kind = CommandFact(root)
    # every link stays inside: -R and -L are fine
    for command in ["grep -R x", "grep -R x a", "ls -RL a", "grep -r x", "ls -R"]:
        assert kind.canonicalize(command).fact["outside_root"] is False, command
    # a link out, reached only through a link from the named directory to another one
    (root / "b" / "out").symlink_to(tmp_path)
    assert kind.canonicalize("grep -R x a").fact["outside_root"] is True
    # without following, the same commands stay inside (grep -r follows command-line
    # links only; ls -R follows none)
    for command in ["grep -r x a", "ls -R a", "grep -e R x a", "ls -l a"]:
        assert kind.canonicalize(command).fact["outside_root"] is False, command
    assert kind.canonicalize("grep -R x a/f.txt").fact["outside_root"] is False


DIFF_POLICY = """
permit (principal, action == Action::"shell.run", resource)
when {
  context.facts.command.program == "git" &&
  context.facts.command.subcommand == "diff" &&
  context.facts.command.global_options.isEmpty() &&
  ["--stat", "--cached", "--name-only"].containsAll(context.facts.command.options) &&
  !context.facts.command.outside_root
};
"""


@pytest.fixture
def git_workspace(tmp_path: Path) -> Path:
    """A git repository with a file and a link out of it."""
    import shutil
    import subprocess

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    (work / "a.txt").write_text("a\n")
    (work / "link").symlink_to(tmp_path)
    return work


def written(*directories: Path) -> list[Path]:
    return [path for directory in directories for path in directory.glob("pwn*")]


@pytest.mark.anyio
async def test_the_documented_policy_decides_on_the_fact(git_workspace: Path) -> None:
    """The module docstring's policy, through a real harness, Cedar and git: every
    spelling of a forbidden option is denied and runs nothing; allowed spellings run."""
    from clearance import AgentDefinition, Harness, Principal, ToolRegistry
    from clearance.policy import CedarEvaluator
    from clearance.toolsets import register_shell

    work, outside = git_workspace, git_workspace.parent
    registry = ToolRegistry()
    register_shell(registry, work)
    async with Harness(registry, evaluator=CedarEvaluator(policies=DIFF_POLICY)) as harness:
        session = await harness.create_session(
            principal=Principal("User", "u"), agent=AgentDefinition("a", tools=["shell.run"])
        )
        denied = [
            f"git diff --out''put={outside}/pwn1",
            f"git diff '--output={outside}/pwn2'",
            "git diff --outp=pwn3",
            "git diff --stat --output=link/pwn4",
            "git diff HEAD --output pwn5",
            "git diff --no-index /etc/hostname a.txt",
            "git diff --stat link/x",
            "git --no-pager diff",
            "git log",
        ]
        for i, command in enumerate(denied):
            result = await session.call_tool("shell__run", {"command": command}, call_id=f"d{i}")
            assert result.is_error and "no policy permits" in result.text, command
        refused = await session.call_tool("shell__run", {"command": "git -c x=y diff"}, call_id="r")
        assert refused.is_error and "global option '-c'" in refused.text
        for i, command in enumerate(["git diff --stat", "git\tdiff\t'--stat'", 'git "diff"']):
            result = await session.call_tool("shell__run", {"command": command}, call_id=f"a{i}")
            assert not result.is_error, (command, result.text)
    assert not written(outside, work)


@pytest.mark.parametrize("command", ["pytest @args.txt", "pytest -q @a", "py.test -- @x"])
def test_pytest_argument_files_are_refused(command: str) -> None:
    # pytest (argparse) reads more arguments from @file, anywhere: --junitxml=... unseen.
    with pytest.raises(FactError, match="read more arguments"):
        CommandFact().canonicalize(command)


def test_pytest_reaches_out_through_any_link_it_would_collect(tmp_path: Path) -> None:
    """pytest follows symlinks while collecting (test files, directories, conftest.py):
    one leading out of the workspace makes even `pytest -q` reach out (red team)."""
    root = tmp_path / "ws"
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test_a.py").write_text("def test_a(): pass\n")
    (tmp_path / "shared").mkdir()
    kind = CommandFact(root)
    assert kind.canonicalize("pytest -q").fact["outside_root"] is False
    (root / "tests" / "shared").symlink_to("../../shared")
    for command in ("pytest -q", "pytest tests", "pytest -k a", "pytest tests/test_a.py::test_a"):
        assert kind.canonicalize(command).fact["outside_root"] is True, command
    (root / "tests" / "shared").unlink()
    (root / "conftest.py").symlink_to(tmp_path / "shared" / "conftest.py")
    assert kind.canonicalize("pytest tests/test_a.py").fact["outside_root"] is True


def test_words_naming_entries_are_resolved(tmp_path: Path) -> None:
    """A rule on file names reads the resolved command: `head settings.txt` with
    `settings.txt -> .env` is `head .env` (red-team finding)."""
    (tmp_path / ".env").write_text("x")
    (tmp_path / "settings.txt").symlink_to(".env")
    (tmp_path / "src").mkdir()
    got = CommandFact(tmp_path).canonicalize("head settings.txt --file=./src missing").fact
    assert got["paths"] == [".env", "src"]
    assert got["resolved"] == "head .env --file=src missing"


def test_every_public_name_imports_from_the_command_module() -> None:
    """The kind lives in smaller modules (words, argv, paths); users still import every
    public name from ``clearance.facts.command``, and ``__all__`` lists them all."""
    import clearance.facts.command as command

    public = {
        "ARGUMENT_FILE_PROGRAMS",
        "GIT_GLOBAL_OPTIONS",
        "MAX_COMMAND_LENGTH",
        "SUBCOMMAND_PROGRAMS",
        "CommandFact",
        "GlobalOptions",
        "ParsedCommand",
        "check_words",
        "outside_root",
        "parse_argv",
        "refuse_argument_files",
        "resolve_words",
        "split_command",
    }
    assert set(command.__all__) == public
    for name in public:
        assert getattr(command, name) is not None, name
    assert command.parse_argv(["git", "diff"]).subcommand == "diff"
    assert command.SUBCOMMAND_PROGRAMS["git"].flags == GIT_GLOBAL_OPTIONS


def test_max_length_is_a_positive_number_of_characters() -> None:
    assert CommandFact(max_length=1).canonicalize("x").value == "x"
    assert CommandFact(max_length=1).max_length == 1
    assert CommandFact().max_length == MAX_COMMAND_LENGTH
    for bad in (0, -1):
        with pytest.raises(ValueError, match=r"^max_length must be positive$"):
            CommandFact(max_length=bad)


def test_parse_argv_keeps_the_argv_it_read() -> None:
    parsed = parse_argv(["git", "--no-pager", "diff", "--", "-x"])
    assert parsed.argv == ("git", "--no-pager", "diff", "--", "-x")
    assert parsed.operands == ("-x",)
    with pytest.raises(FactError) as info:
        parse_argv([])
    assert info.value.reason == "the command is empty"


@pytest.mark.parametrize(
    ("command", "global_options"),
    [
        ("pip --cache-dir c", ["--cache-dir"]),
        ("kubectl -n default", ["-n"]),
        ("kubectl -n=default", ["-n"]),
        ("docker --config=c -D", ["--config", "-D"]),
    ],
)
def test_a_valued_global_option_may_end_the_command(
    command: str, global_options: list[str]
) -> None:
    """The last word may be a global option's value: there is no subcommand then."""
    got = fact(command)
    assert got["subcommand"] == ""
    assert got["global_options"] == global_options
    assert got["operands"] == [] and got["options"] == []


def test_global_option_refusals_say_why() -> None:
    allowed = ", ".join(sorted(GIT_GLOBAL_OPTIONS))
    assert refused("git -c x=y status") == (
        "git: the global option '-c' is not allowed (it can change which program runs or "
        f"which files are read); allowed: {allowed}"
    )
    assert refused("kubectl --foo=bar get pods") == (
        "kubectl: unknown global option '--foo' before the subcommand (it is not known "
        "whether it takes the next word as its value); put it after the subcommand or leave "
        "it out"
    )
    assert refused("kubectl --namespace") == (
        "kubectl: the global option '--namespace' needs a value"
    )


def test_split_command_refusals_in_their_words() -> None:
    from clearance.facts.command import split_command

    with pytest.raises(FactError) as info:
        split_command(["git", "status"])  # type: ignore[arg-type]
    assert info.value.reason == "a command must be a string, not list"
    with pytest.raises(FactError) as info:
        split_command("echo 'open")
    assert info.value.reason == "the command cannot be split into words: No closing quotation"
    with pytest.raises(FactError) as info:
        split_command(" \t ")
    assert info.value.reason == "the command is empty"
    with pytest.raises(FactError) as info:
        split_command("ls -la", max_length=5)
    assert info.value.reason == "the command is longer than 5 characters"
    # exactly max_length characters is allowed
    assert split_command("ls -l", max_length=5) == ["ls", "-l"]
    assert split_command("x" * MAX_COMMAND_LENGTH) == ["x" * MAX_COMMAND_LENGTH]


def test_check_words_names_what_it_refuses() -> None:
    from clearance.facts.command import check_words

    check_words(["ls", "-l", "caf\u00e9"])  # nothing to refuse
    with pytest.raises(FactError) as info:
        check_words(["ls", 5])  # type: ignore[list-item]
    assert info.value.reason == "word 1 is not a string"
    # the first and the last surrogate, a control and an invisible character after them
    for char in ("\ud800", "\udfff"):
        with pytest.raises(FactError) as info:
            check_words(["ls", "ok", f"a{char}\x01\u200b"])
        assert info.value.reason == (
            f"word 2 contains a lone surrogate (not valid UTF-8) (U+{ord(char):04X})"
        )
    with pytest.raises(FactError) as info:
        check_words(["ls", "a\u200bb\x01"])  # the control character is named first
    assert info.value.reason == "word 1 contains a control character (U+0001)"
    with pytest.raises(FactError) as info:
        check_words(["l\u200es"])
    assert info.value.reason == "word 0 contains an invisible formatting character (U+200E)"


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        (
            "pytest -q @args.txt",
            "word 2: pytest would read more arguments from the file 'args.txt', which no policy sees",
        ),
        (
            "/usr/bin/py.test @a",
            "word 1: /usr/bin/py.test would read more arguments from the file 'a', which no "
            "policy sees",
        ),
        (
            "pytest x @",
            "word 2: pytest would read more arguments from the file '', which no policy sees",
        ),
    ],
)
def test_argument_files_are_refused_naming_the_word(command: str, reason: str) -> None:
    assert refused(command) == reason


def test_other_programs_may_have_words_starting_with_at() -> None:
    from clearance.facts.command import refuse_argument_files

    refuse_argument_files([])  # nothing to read
    refuse_argument_files(["git", "log", "@{u}"])
    refuse_argument_files(["pytest@x", "@y"])
    refuse_argument_files(["pytest", "a@b", "-k", "x@y"])
    assert fact("git log @{u}")["operands"] == ["@{u}"]
