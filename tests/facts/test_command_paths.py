"""Where a command's words lead (``outside_root``, ``resolve_words``): the limits and
the rules of the bundled programs that reach past their words, each at its edge."""

from __future__ import annotations

from pathlib import Path

import pytest

from clearance.facts.base import FactError
from clearance.facts.command import CommandFact, outside_root, resolve_words


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A root (``ws``) beside a secret, with a directory ``sub`` and a link ``out`` to
    the directory that holds both."""
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (tmp_path / "secret.txt").write_text("secret\n")
    (ws / "out").symlink_to(tmp_path)
    return ws


def outside(command: str, root: Path) -> bool:
    return bool(CommandFact(root).canonicalize(command).fact["outside_root"])


def test_an_entry_with_the_longest_name_is_followed(root: Path) -> None:
    """A name of 255 bytes (NAME_MAX) can be an entry of the root: a link by that name
    that leads out is seen, alone, with a path under it, and after a separator."""
    name = "n" * 255
    (root / name).symlink_to(root.parent)
    assert outside(f"cat {name}", root)
    assert outside(f"cat {name}/secret.txt", root)
    assert outside(f"git show HEAD:{name}/secret.txt", root)
    assert outside(f"grep -f{name} x", root)  # a value attached to a short option
    # one byte longer names no entry
    assert not outside(f"cat {name}n/secret.txt", root)


def test_at_most_1024_paths_are_resolved(root: Path) -> None:
    words = [f"sub/{i}" for i in range(1024)]
    assert outside_root(["cat", *words], str(root)) is False
    with pytest.raises(FactError) as info:
        outside_root(["cat", *words, "sub/x"], str(root))
    assert info.value.reason == (
        "the command names more paths than can be checked (at most 1024 paths of 16384 "
        "components in all)"
    )
    # one word repeated is resolved once
    assert outside_root(["cat", *words, *words], str(root)) is False


def test_at_most_16384_components_are_resolved(root: Path) -> None:
    # 16 words of 1,024 components each: exactly the limit
    words = ["sub/" + "x/" * 1022 + str(i) for i in range(16)]
    assert all(word.count("/") + 1 == 1024 for word in words)
    assert outside_root(["cat", *words], str(root)) is False
    with pytest.raises(FactError, match="more paths than can be checked"):
        outside_root(["cat", *words, "sub/y"], str(root))


def test_a_path_longer_than_4096_bytes_is_outside(root: Path) -> None:
    """The OS refuses a path past PATH_MAX: what a program would then open is not known."""
    at_limit = "sub/" + "x/" * 2045 + "yy"
    assert len(at_limit.encode()) == 4096
    assert outside_root(["cat", at_limit], str(root)) is False
    assert outside_root(["cat", at_limit + "y"], str(root)) is True
    # counted in bytes, not characters
    wide = "sub/" + "x/" * 2045 + "\u00e9"
    assert len(wide) == 4095 and len(wide.encode()) == 4096
    assert outside_root(["cat", wide], str(root)) is False
    assert outside_root(["cat", wide + "y"], str(root)) is True


@pytest.mark.parametrize("command", ["grep -f~ x", "grep -f/ x", "grep -vf~/x x", "tar -Cx/.. y"])
def test_a_value_attached_to_a_short_option_is_read_as_a_path(command: str) -> None:
    assert CommandFact().canonicalize(command).fact["outside_root"] is True


@pytest.mark.parametrize(
    "command", ["grep -e x", "ls -l", "ls -", "echo -x.", "echo -x...y", "git log -1"]
)
def test_short_options_without_a_path_are_inside(command: str) -> None:
    assert CommandFact().canonicalize(command).fact["outside_root"] is False


@pytest.mark.parametrize(
    "command", ["wc -- --files0-from=list", "ls -- -L", "ls -l -- -L .", "grep -- -R ."]
)
def test_options_after_dashdash_are_file_names(root: Path, command: str) -> None:
    """After "--", "-L" and "--files0-from=..." are names of files (the root holds a link
    out: following links below "." would reach it)."""
    assert outside(command, root) is False
    assert outside(command.replace("-- ", ""), root) is True


def test_what_grep_and_ls_walk(root: Path) -> None:
    """grep -R and ls -L follow links below the directories they are given (the working
    directory when grep has only its pattern, or ls nothing)."""
    (root / "sub" / "deep").mkdir()
    (root / "sub" / "deep" / "away").symlink_to(root.parent)
    (root / "out").unlink()
    (root / "other").mkdir()
    assert outside("grep -R x sub", root)
    assert outside("grep -R x", root)  # only a pattern: the working directory
    assert outside("grep -R x -", root) is False  # standard input: nothing is walked
    assert not outside("grep -R x other", root)
    assert outside("grep -R x other sub", root)
    assert outside("ls -L", root)
    assert not outside("ls -L other", root)
    assert outside("ls -L other sub/deep", root)
    assert not outside("ls -L - other", root)
    # a directory linked inside the root is walked too, once
    (root / "other" / "to-sub").symlink_to("../sub")
    (root / "other" / "again").symlink_to("../sub")
    assert outside("ls -L other", root)


def test_a_walk_looks_at_no_more_than_20000_entries(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "many").mkdir(parents=True)
    for i in range(19_999):
        (ws / "many" / str(i)).touch()
    kind = CommandFact(ws)
    # the root's one entry and the 19,999 below it: exactly the limit
    assert kind.canonicalize("ls -L").fact["outside_root"] is False
    (ws / "many" / "one-more").touch()
    assert kind.canonicalize("ls -L").fact["outside_root"] is True
    assert kind.canonicalize("ls -l").fact["outside_root"] is False  # nothing walked


@pytest.mark.parametrize(
    "skipped", [".git", "node_modules", ".venv", "venv", ".tox", "__pycache__"]
)
def test_pytest_collects_nothing_below_the_directories_it_skips(
    tmp_path: Path, skipped: str
) -> None:
    ws = tmp_path / "ws"
    (ws / skipped).mkdir(parents=True)
    (ws / skipped / "away").symlink_to(tmp_path)
    kind = CommandFact(ws)
    assert kind.canonicalize("pytest -q").fact["outside_root"] is False
    (ws / "tests").mkdir()
    (ws / "tests" / "away").symlink_to(tmp_path)
    assert kind.canonicalize("pytest -q").fact["outside_root"] is True


def test_pytest_operands_and_options(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "a").mkdir(parents=True)
    (ws / "b").mkdir()
    (tmp_path / "b-away").mkdir()
    (ws / "b" / "away").symlink_to("../../b-away")
    kind = CommandFact(ws)
    # the whole workspace is walked for conftest.py files, whatever the operands
    for command in ("pytest a", "pytest -- a", "pytest a::test_x", "pytest -k a"):
        assert kind.canonicalize(command).fact["outside_root"] is True, command


def test_resolve_words_names_the_entries_the_words_name(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("x")
    (tmp_path / "alias").symlink_to("src/app.py")
    (tmp_path / "away").symlink_to("/")
    root = str(tmp_path)
    paths, resolved = resolve_words(
        ["alias", "alias", "-v", "--x=", "--out=alias", "--", "-alias", "away", "/etc", "gone"],
        root,
    )
    # the program is not a path; options without "=" and words leading out stay
    assert resolved == [
        "alias", "src/app.py", "-v", "--x=", "--out=src/app.py", "--", "-alias", "away",
        "/etc", "gone",
    ]  # fmt: skip
    assert paths == ["src/app.py", "src/app.py"]
    assert resolve_words(["cat", "alias"], None) == ([], ["cat", "alias"])
    assert resolve_words([], root) == ([], [])
    assert resolve_words(["cat", "a\x00b", "./"], root) == (["."], ["cat", "a\x00b", "."])


def test_the_root_itself_can_be_a_word(tmp_path: Path) -> None:
    got = CommandFact(tmp_path).canonicalize("ls . ./ --dir=.").fact
    assert got["paths"] == ["."]
    assert got["resolved"] == "ls . . --dir=."
    assert got["outside_root"] is False


def test_pytest_collects_what_follows_dashdash_and_no_option(tmp_path: Path) -> None:
    """A path given to pytest is collected even below a directory the walk skips; a word
    starting with '-' is a path only after '--' (before, argparse reads an option)."""
    ws = tmp_path / "ws"
    (ws / "--d" / ".venv").mkdir(parents=True)
    (ws / "--d" / ".venv" / "away").symlink_to(tmp_path)
    (ws / "tests").mkdir()
    kind = CommandFact(ws)
    for command in ("pytest -q", "pytest --d/.venv", "pytest -q --d/.venv", "pytest tests"):
        assert kind.canonicalize(command).fact["outside_root"] is False, command
    for command in ("pytest -- --d/.venv", "pytest -q -- --d/.venv", "pytest -- tests --d/.venv"):
        assert kind.canonicalize(command).fact["outside_root"] is True, command


def test_a_pytest_node_id_names_what_precedes_its_first_double_colon(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".tox" / "pkg").mkdir(parents=True)
    (ws / ".tox" / "pkg" / "away").symlink_to(tmp_path)
    kind = CommandFact(ws)
    assert kind.canonicalize("pytest -q").fact["outside_root"] is False  # .tox is skipped
    for command in ("pytest .tox/pkg", "pytest .tox/pkg::T", "pytest .tox/pkg::T::t"):
        assert kind.canonicalize(command).fact["outside_root"] is True, command


def test_a_directory_is_walked_once(tmp_path: Path) -> None:
    """A link back to a directory already walked (a loop that stays inside) is not
    outside; a directory reached by its name and through a link counts its entries once."""
    ws = tmp_path / "ws"
    (ws / "a").mkdir(parents=True)
    (ws / "a" / "up").symlink_to("..")
    (ws / "a" / "self").symlink_to(".")
    kind = CommandFact(ws)
    assert kind.canonicalize("ls -L").fact["outside_root"] is False
    assert kind.canonicalize("grep -R x a").fact["outside_root"] is False
    (ws / "big").mkdir()
    for i in range(10_000):
        (ws / "big" / str(i)).touch()
    (ws / "ln").symlink_to("big")
    # 2 + 3 + 10,000 entries: under the 20,000 looked at
    assert kind.canonicalize("ls -L").fact["outside_root"] is False


def test_a_word_outside_by_its_spelling_is_not_resolved(tmp_path: Path) -> None:
    """Words that are outside lexically stay as written, for outside_root to decide, even
    when they would resolve inside (a rule reads them as the program gets them)."""
    (tmp_path / "sub").mkdir()
    root = str(tmp_path)
    assert resolve_words(["cat", "sub/..", "--x=sub/../sub", root], root) == (
        [],
        ["cat", "sub/..", "--x=sub/../sub", root],
    )
    got = CommandFact(tmp_path).canonicalize("cat sub/..").fact
    assert got["paths"] == [] and got["resolved"] == "cat sub/.." and got["outside_root"]


def test_an_option_value_is_all_that_follows_the_first_equals_sign(tmp_path: Path) -> None:
    (tmp_path / "k=v").write_text("x")
    (tmp_path / "v").write_text("x")
    (tmp_path / "alias").symlink_to("k=v")
    assert resolve_words(["tool", "--set=k=v", "--set=alias"], str(tmp_path)) == (
        ["k=v", "k=v"],
        ["tool", "--set=k=v", "--set=k=v"],
    )


def test_a_word_is_cut_only_at_its_separators(tmp_path: Path) -> None:
    """Each part of a word before, after or between '=', ':', ',' and '@' may be a path;
    no other part of it is (``about`` does not name ``out``)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    for name in ("out", "t", "k:v"):
        (ws / name).symlink_to(tmp_path)
    kind = CommandFact(ws)
    for command in (
        "echo out,x",
        "echo x@out",
        "echo x:k:v",
        "echo k:v",
        "echo a=t:b",
        "echo a:out:b",  # between two separators
        "echo x/y:out",  # a '/' before the part does not end its first name
        "echo out:x/y",  # nor one after it
    ):
        assert kind.canonicalize(command).fact["outside_root"] is True, command
    for command in ("echo about:x", "echo x:at", "echo k:vw", "echo tt=x"):
        assert kind.canonicalize(command).fact["outside_root"] is False, command


def test_only_the_bundled_options_that_follow_links_are_followed(root: Path) -> None:
    """Long options other than --dereference(-recursive) and --files0-from (or their
    prefixes) do not make ls, grep or wc reach past their words."""
    (root / "out").unlink()
    (root / "sub" / "away").symlink_to(root.parent)
    for command in (
        "ls --all sub",
        "ls --color=never sub",
        "grep --count x sub",
        "grep -r --include=*.py x sub",
        "wc --lines sub/f",
        "wc --=list",  # no option name at all
        "wc -- --files0-from=list",
    ):
        assert outside(command, root) is False, command
    for command in ("ls --deref sub", "grep --dereference-r x sub", "wc --files0=l"):
        assert outside(command, root) is True, command


@pytest.mark.parametrize(
    "operand", ["''", "n/" * 2100 + "x"], ids=["empty", "longer-than-4096-bytes"]
)
def test_a_directory_to_walk_that_cannot_be_resolved_is_outside(root: Path, operand: str) -> None:
    """Fail closed: what grep -R or ls -L would walk below it is not known."""
    (root / "out").unlink()
    assert outside(f"ls -L {operand}", root) is True
    assert outside(f"grep -R x {operand}", root) is True
    assert outside(f"ls -l {operand}", root) is False  # nothing is walked


def test_a_value_attached_to_a_short_option_may_start_at_any_letter(root: Path) -> None:
    """-fout is -f with the value 'out', -vfout is -v -f 'out'; a long option has no
    attached value but after '='."""
    for command in ("grep -fout x", "grep -vfout x", "grep -vnfout x", "grep -/out x"):
        assert outside(command, root) is True, command
    for command in (
        "git log --format=%h/%s",
        "git log --out",
        "grep -vfou x",
        "echo -x",
        "grep -out x",  # -o with 'ut' (or -o -u -t): never 'out'
        "grep -/ x",
    ):
        assert outside(command, root) is False, command
