import errno
import fcntl
import io
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from clearance import ClearanceError, ConfigError, Principal
from clearance.guardrails import GuardrailContext, PathScope, PathScopeError

CTX = GuardrailContext(
    "files.read_file", "files__read_file", Principal("User", "u"), "s", None, "c", "arguments"
)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """root/ with a file, a subdirectory, symlinks inside and out; outside/ beside it."""
    root = tmp_path / "root"
    (root / "src").mkdir(parents=True)
    (root / "src" / "main.py").write_text("print('hi')\n")
    (root / "notes.txt").write_text("notes\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret\n")
    (root / "inner_link").symlink_to("src")  # stays inside
    (root / "escape").symlink_to(outside)  # absolute, leaves
    (root / "src" / "up").symlink_to("../../outside/secret.txt")  # relative, leaves
    (root / "dangling").symlink_to(outside / "new.txt")  # target does not exist yet
    return root


def check(scope: PathScope, arguments: dict[str, Any]) -> tuple[str, str | None]:
    outcome = scope.check(arguments, CTX)
    return outcome.action, outcome.message


@pytest.mark.parametrize(
    "path",
    ["notes.txt", "src/main.py", "./src//main.py", "src/new/deeper/file.txt", "inner_link/main.py",
     ".", "new.txt", "ünïcödé/файл.txt"],
)  # fmt: skip
def test_paths_inside_the_root_are_allowed(tree: Path, path: str) -> None:
    assert check(PathScope(tree), {"path": path}) == ("allow", None)


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/etc/passwd", "absolute paths are not allowed"),
        ("../outside/secret.txt", "'..' components are not allowed"),
        ("src/../../outside", "'..' components are not allowed"),
        ("src/..", "'..' components are not allowed"),
        ("notes.txt\x00.png", "NUL byte"),
        ("", "empty"),
        ("~/.ssh/id_rsa", "leading '~'"),
        ("escape/secret.txt", "resolves outside the workspace root"),
        ("escape", "resolves outside the workspace root"),
        ("src/up", "resolves outside the workspace root"),
        ("dangling", "resolves outside the workspace root"),
        ("escape/not/yet/there.txt", "resolves outside the workspace root"),
        ("\ud800", "cannot be encoded"),
        ("a/" * 2100, "longer than 4096 bytes"),
    ],
)
def test_refused_paths_block_with_field_and_reason(tree: Path, path: str, reason: str) -> None:
    action, message = check(PathScope(tree), {"path": path})
    assert action == "block"
    assert message is not None
    assert "/path" in message and reason in message


def test_the_value_itself_is_not_echoed_in_the_message(tree: Path) -> None:
    # a path may be sensitive; the message names the field and the reason only
    _, message = check(PathScope(tree), {"path": "/home/alice/medical-records.pdf"})
    assert message is not None and "medical" not in message


def test_every_selected_field_is_checked(tree: Path) -> None:
    scope = PathScope(tree, fields=["/source", "/destination"])
    assert check(scope, {"source": "notes.txt", "destination": "src/notes.txt"})[0] == "allow"
    action, message = check(scope, {"source": "notes.txt", "destination": "escape/x"})
    assert action == "block" and message is not None and "/destination" in message
    action, message = check(scope, {"source": "/etc/shadow", "destination": "x"})
    assert action == "block" and message is not None and "/source" in message


def test_wildcard_fields_check_each_item(tree: Path) -> None:
    scope = PathScope(tree, fields=["/files/*/path"])
    ok = {"files": [{"path": "a.txt"}, {"path": "src/b.txt"}]}
    bad = {"files": [{"path": "a.txt"}, {"path": "../b.txt"}]}
    assert check(scope, ok)[0] == "allow"
    action, message = check(scope, bad)
    assert action == "block" and message is not None and "/files/1/path" in message


def test_a_missing_optional_field_is_not_checked(tree: Path) -> None:
    assert check(PathScope(tree), {"query": "x"})[0] == "allow"


def test_a_non_string_path_is_refused(tree: Path) -> None:
    action, message = check(PathScope(tree), {"path": ["a", "b"]})
    assert action == "block" and message is not None and "must be a path string" in message


def test_a_symlink_created_after_construction_is_seen_at_check_time(tree: Path) -> None:
    scope = PathScope(tree)
    assert check(scope, {"path": "later/secret.txt"})[0] == "allow"
    (tree / "later").symlink_to(tree.parent / "outside")
    assert check(scope, {"path": "later/secret.txt"})[0] == "block"


def test_symlink_chains_and_loops(tree: Path) -> None:
    (tree / "a").symlink_to("b")
    (tree / "b").symlink_to("src")
    (tree / "loop1").symlink_to("loop2")
    (tree / "loop2").symlink_to("loop1")
    (tree / "c").symlink_to("d")
    (tree / "d").symlink_to("escape")
    scope = PathScope(tree)
    assert scope.allows("a/main.py")
    assert scope.resolve("a/main.py") == tree / "src" / "main.py"
    assert not scope.allows("c/secret.txt")
    # A loop is refused outright (issue 12, item 7): kept literally, its '..' parts would
    # be followed by open() once another process flips one of its links.
    assert not scope.allows("loop1/x")
    assert not scope.allows("loop1/../../outside")
    with pytest.raises(OSError):
        scope.open("loop1/x")
    with pytest.raises(PathScopeError) as info:
        scope.resolve("loop1/x")
    assert info.value.path == "loop1/x" and info.value.reason


def test_root_that_is_a_symlink_is_resolved_once(tree: Path, tmp_path: Path) -> None:
    link = tmp_path / "root_link"
    link.symlink_to(tree)
    scope = PathScope(link)
    assert scope.root == tree
    assert scope.resolve("notes.txt") == tree / "notes.txt"


def test_root_must_be_an_existing_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not an existing directory"):
        PathScope(tmp_path / "missing")
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError):
        PathScope(tmp_path / "file")


def test_a_root_prefix_is_not_the_root(tmp_path: Path) -> None:
    # /x/work must not contain /x/workshop
    (tmp_path / "work").mkdir()
    (tmp_path / "workshop").mkdir()
    (tmp_path / "work" / "shop").symlink_to(tmp_path / "workshop")
    assert not PathScope(tmp_path / "work").allows("shop")


def test_resolve_returns_the_real_path_or_raises(tree: Path) -> None:
    scope = PathScope(tree)
    assert scope.resolve("inner_link/main.py") == tree / "src" / "main.py"
    assert scope.resolve("brand/new.txt") == tree / "brand" / "new.txt"
    assert scope.relative("inner_link") == "src"
    assert scope.relative(".") == "."
    with pytest.raises(PathScopeError) as info:
        scope.resolve("escape/secret.txt")
    assert info.value.path == "escape/secret.txt"
    assert "outside the workspace root" in info.value.reason
    assert isinstance(info.value, ClearanceError) and isinstance(info.value, PermissionError)


def test_path_scope_error_pickles() -> None:
    import pickle

    error = pickle.loads(pickle.dumps(PathScopeError("a/b", "why")))
    assert (error.path, error.reason, str(error)) == ("a/b", "why", "path 'a/b' is refused: why")


# --- open: the use-time half -------------------------------------------------------------


def test_open_reads_and_writes_inside_the_root(tree: Path) -> None:
    scope = PathScope(tree)
    with scope.open("src/main.py") as f:
        assert f.read() == "print('hi')\n"
    with scope.open("inner_link/main.py", "rb") as f:
        assert f.read() == b"print('hi')\n"
    with scope.open("made/up/dirs/out.txt", "w", encoding="utf-8", make_parents=True) as f:
        f.write("héllo")
    assert (tree / "made" / "up" / "dirs" / "out.txt").read_text(encoding="utf-8") == "héllo"
    with scope.open("made/up/dirs/out.txt", "a") as f:
        f.write("!")
    assert (tree / "made/up/dirs/out.txt").read_text(encoding="utf-8") == "héllo!"
    with scope.open("fresh.txt", "x") as f:
        f.write("new")
    with pytest.raises(FileExistsError):
        scope.open("fresh.txt", "x")
    with scope.open("fresh.txt", "r+") as f:
        assert f.read() == "new"


def test_open_without_make_parents_does_not_create_directories(tree: Path) -> None:
    with pytest.raises(FileNotFoundError):
        PathScope(tree).open("nope/file.txt", "w")
    assert not (tree / "nope").exists()


def test_open_refuses_escapes_and_non_files(tree: Path) -> None:
    scope = PathScope(tree)
    for path in ("escape/secret.txt", "src/up", "../outside/secret.txt", "/etc/passwd"):
        with pytest.raises(PathScopeError):
            scope.open(path)
    with pytest.raises(PathScopeError):
        scope.open("dangling", "w")
    assert not (tree.parent / "outside" / "new.txt").exists()
    with pytest.raises(IsADirectoryError):
        scope.open("src")
    with pytest.raises(IsADirectoryError):
        scope.open(".")
    with pytest.raises(FileNotFoundError):
        scope.open("missing.txt")
    with pytest.raises(ValueError, match="invalid mode"):
        scope.open("notes.txt", "rw")


def test_open_does_not_hang_on_a_fifo(tree: Path) -> None:
    os.mkfifo(tree / "pipe")
    scope = PathScope(tree)
    with pytest.raises(PathScopeError, match="not a regular file"):
        scope.open("pipe")
    with pytest.raises(PathScopeError, match="not a regular file"):
        scope.open("pipe", "w")


def test_open_refuses_a_directory_swapped_for_a_symlink_after_the_check(tree: Path) -> None:
    """The check passes; then the directory on the path is replaced with a symlink to the
    outside before the tool opens it. open() resolves again and refuses."""
    scope = PathScope(tree)
    (tree / "work").mkdir()
    (tree / "work" / "secret.txt").write_text("inside\n")
    assert scope.check({"path": "work/secret.txt"}, CTX).action == "allow"

    (tree / "work" / "secret.txt").unlink()
    (tree / "work").rmdir()
    (tree / "work").symlink_to(tree.parent / "outside")  # the swap

    with pytest.raises(PathScopeError, match="outside the workspace root"):
        scope.open("work/secret.txt")


def swap_after_resolving(
    scope: PathScope, monkeypatch: pytest.MonkeyPatch, swap: Callable[[], None]
) -> None:
    """Make the swap happen inside open(), after it resolved the path and before it opens
    the components: the window no check can close, only O_NOFOLLOW."""
    resolved = scope._resolved

    def resolve_then_swap(path: str) -> str:
        result = resolved(path)
        swap()
        return result

    monkeypatch.setattr(scope, "_resolved", resolve_then_swap)


@pytest.mark.parametrize("mode", ["r", "w", "a", "r+"])
def test_open_refuses_a_file_swapped_for_a_symlink_inside_the_window(
    tree: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    secret = tree.parent / "outside" / "secret.txt"

    def swap() -> None:
        (tree / "notes.txt").unlink()
        (tree / "notes.txt").symlink_to(secret)

    scope = PathScope(tree)
    swap_after_resolving(scope, monkeypatch, swap)
    with pytest.raises(PathScopeError, match=r"'notes\.txt' is a symlink") as info:
        scope.open("notes.txt", mode)
    assert info.value.path == "notes.txt"
    assert secret.read_text() == "top secret\n"  # neither read nor truncated


def test_open_refuses_a_parent_swapped_for_a_symlink_inside_the_window(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = tree.parent / "outside"
    (outside / "main.py").write_text("outside\n")

    def swap() -> None:
        (tree / "src").rename(tree / "src_old")
        (tree / "src").symlink_to(outside)

    scope = PathScope(tree)
    swap_after_resolving(scope, monkeypatch, swap)
    with pytest.raises(PathScopeError, match="'src' is a symlink") as info:
        scope.open("src/main.py")
    assert info.value.path == "src/main.py"


def test_open_dir_refuses_a_symlink_inside_the_window(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def swap() -> None:
        (tree / "src").rename(tree / "src_old")
        (tree / "src").symlink_to(tree.parent / "outside")

    scope = PathScope(tree)
    swap_after_resolving(scope, monkeypatch, swap)
    with pytest.raises(PathScopeError, match="'src' is a symlink"), scope.open_dir("src"):
        pass


def test_open_dir_and_open_parent(tree: Path) -> None:
    scope = PathScope(tree)
    with scope.open_dir("src") as fd:
        assert sorted(os.listdir(fd)) == ["main.py", "up"]
    with scope.open_dir("inner_link") as fd:  # an inside link is resolved first
        assert "main.py" in os.listdir(fd)
    with pytest.raises(PathScopeError):
        with scope.open_dir("escape"):
            pass
    with scope.open_dir("x/y", create=True) as fd:
        assert os.listdir(fd) == []
    assert (tree / "x" / "y").is_dir()
    with scope.open_parent("src/up") as (fd, name):
        # the link itself, not what it points to
        assert name == "up" and os.readlink(name, dir_fd=fd) == "../../outside/secret.txt"
    with pytest.raises(PathScopeError, match="workspace root itself"):
        with scope.open_parent("./"):
            pass
    with pytest.raises(PathScopeError):
        with scope.open_parent("escape/secret.txt"):
            pass


def test_guardrail_options_are_validated(tree: Path) -> None:
    with pytest.raises(ValueError):
        PathScope(tree, fields=["path"])  # not a JSON pointer
    with pytest.raises(ValueError):
        PathScope(tree, tools=[])
    scope = PathScope(tree, tools="files.*", advisory=True, name="workspace")
    assert scope.applies_to("files.read_file") and not scope.applies_to("shell.run")
    assert scope.advisory and scope.name == "workspace" and scope.stage == "arguments"


@pytest.mark.anyio
async def test_run_returns_the_outcome(tree: Path) -> None:
    outcome = await PathScope(tree).run({"path": "../x"}, CTX)
    assert outcome.action == "block"


# --- the rules in their own words, and the open helpers' contract ---------------------------


def test_by_default_a_path_scope_applies_to_every_tool_and_is_enforced(tree: Path) -> None:
    scope = PathScope(tree)
    assert scope.applies_to("files.read_file") and scope.applies_to("shell.run")
    assert scope.advisory is False
    assert scope.timeout == 5.0
    assert PathScope(tree, timeout=0.5).timeout == 0.5
    assert check(scope, {"path": "../x"})[0] == "block"


def test_the_file_system_root_as_a_root_contains_every_path(tmp_path: Path) -> None:
    scope = PathScope("/")
    assert scope.allows("tmp") and scope.allows(str(tmp_path).lstrip("/"))
    assert scope.relative(str(tmp_path).lstrip("/")) == str(tmp_path.resolve()).lstrip("/")


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("", "the path is empty"),
        ("a\x00b", "it contains a NUL byte"),
        (
            "/etc/passwd",
            "absolute paths are not allowed; give a path relative to the workspace root",
        ),
        ("~", "a leading '~' is not allowed (it may be expanded to a home directory)"),
        ("~/x", "a leading '~' is not allowed (it may be expanded to a home directory)"),
        ("a/../b", "'..' components are not allowed"),
        ("a\ud800b", "it cannot be encoded as a file name"),
        ("a" * 4097, "it is longer than 4096 bytes"),
        ("é" * 2049, "it is longer than 4096 bytes"),  # 4,098 bytes in UTF-8
        ("escape/secret.txt", "it resolves outside the workspace root (through a symlink)"),
    ],
)
def test_each_refusal_gives_its_reason(tree: Path, path: str, reason: str) -> None:
    scope = PathScope(tree)
    with pytest.raises(PathScopeError) as info:
        scope.resolve(path)
    assert (info.value.path, info.value.reason) == (path, reason)
    assert check(scope, {"path": path}) == ("block", f"argument /path refused: {reason}")
    with pytest.raises(PathScopeError) as info:
        scope.open(path)
    assert (info.value.path, info.value.reason) == (path, reason)


def test_a_path_of_4096_bytes_is_not_too_long(tree: Path) -> None:
    scope = PathScope(tree)
    for path in ("a" * 4096, "é" * 2048):
        try:
            scope.resolve(path)
        except PathScopeError as exc:  # refused for another reason, if any
            assert "longer than" not in exc.reason


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("../notes.txt", "'..' components are not allowed"),
        (
            "/etc/passwd",
            "absolute paths are not allowed; give a path relative to the workspace root",
        ),
        ("~/x", "a leading '~' is not allowed (it may be expanded to a home directory)"),
        ("a\x00b", "it contains a NUL byte"),
        ("a\ud800b", "it cannot be encoded as a file name"),
        ("a" * 4097, "it is longer than 4096 bytes"),
    ],
)
def test_a_canonical_path_is_checked_before_it_is_opened_as_given(
    tree: Path, path: str, reason: str
) -> None:
    scope = PathScope(tree)
    for opener, asked in (
        (lambda: scope.open(path, follow_symlinks=False), path),
        (lambda: scope.open_dir(path, follow_symlinks=False).__enter__(), path),
        (lambda: scope.open_parent(path + "/x", follow_symlinks=False).__enter__(), path + "/x"),
    ):
        with pytest.raises(PathScopeError) as info:
            opener()
        assert (info.value.path, info.value.reason) == (asked, reason)


def test_opened_as_given_a_path_is_walked_one_component_at_a_time(tree: Path) -> None:
    scope = PathScope(tree)
    (tree / "my dir").mkdir()
    (tree / "my dir" / "a b.txt").write_text("spaced\n")
    with scope.open("my dir/a b.txt", follow_symlinks=False) as f:
        assert f.read() == "spaced\n"
    with scope.open("src//main.py", follow_symlinks=False) as f:  # empty components skipped
        assert f.read() == "print('hi')\n"
    # A link inside the root is not followed either, even to a file inside it.
    for path in ("inner_link/main.py", "escape/secret.txt"):
        with pytest.raises(PathScopeError) as info:
            scope.open(path, follow_symlinks=False)
        assert info.value.path == path
        assert "is a symlink" in info.value.reason or "outside" in info.value.reason


def test_errors_name_the_path_asked_for(tree: Path) -> None:
    scope = PathScope(tree)
    with pytest.raises(PathScopeError) as info:
        with scope.open_parent("escape/secret.txt"):
            pass
    assert (info.value.path, info.value.reason) == (
        "escape/secret.txt",
        "it resolves outside the workspace root (through a symlink)",
    )
    with pytest.raises(IsADirectoryError) as directory:
        scope.open("src")
    assert (directory.value.errno, directory.value.strerror, directory.value.filename) == (
        errno.EISDIR,
        "is a directory",
        "src",
    )
    for root, follow in ((".", True), ("./", True), (".", False), ("./.", False)):
        with pytest.raises(IsADirectoryError) as directory:
            scope.open(root, follow_symlinks=follow)
        assert (directory.value.errno, directory.value.strerror, directory.value.filename) == (
            errno.EISDIR,
            "the workspace root is a directory",
            root,
        )


@pytest.mark.parametrize(
    ("fields", "arguments", "message"),
    [
        (["/path"], {"path": 5}, "argument /path must be a path string, got int"),
        ([""], {"path": "a"}, "argument (the arguments) must be a path string, got dict"),
    ],
)
def test_a_value_that_is_not_a_string_is_refused_naming_its_type(
    tree: Path, fields: list[str], arguments: dict[str, Any], message: str
) -> None:
    assert check(PathScope(tree, fields=fields), arguments) == ("block", message)


def test_open_modes_do_what_open_does(tree: Path) -> None:
    scope = PathScope(tree)
    path = "notes.txt"
    with scope.open(path, "a") as f:
        f.write("more\n")
    assert (tree / path).read_text() == "notes\nmore\n"
    with scope.open("new-by-append.txt", "a") as f:  # append creates
        f.write("x")
    with scope.open(path, "r+") as f:  # r+ reads and writes, without truncating
        assert f.read() == "notes\nmore\n"
        f.seek(0)
        f.write("N")
    assert (tree / path).read_text() == "Notes\nmore\n"
    with scope.open(path, "w+") as f:  # w+ truncates, then reads back
        f.write("fresh")
        f.seek(0)
        assert f.read() == "fresh"
    with scope.open(path, "a+") as f:
        f.seek(0)
        assert f.read() == "fresh"
    with scope.open(path, "rb") as f:
        assert f.read() == b"fresh"
    with scope.open(path, "rt") as f:
        assert f.read() == "fresh"
    with pytest.raises(FileExistsError):
        scope.open(path, "x")
    with scope.open("made.txt", "x") as f:
        f.write("x")
    with pytest.raises(io.UnsupportedOperation):
        with scope.open(path, "w") as f:
            f.read()
    with pytest.raises(io.UnsupportedOperation):
        with scope.open(path, "r") as f:
            f.write("x")


@pytest.mark.parametrize("mode", ["", "q", "rw", "rr", "r++", "rbt", "wbt", "wX", "w++", "wtb"])
def test_an_invalid_mode_is_refused_before_the_file_is_touched(tree: Path, mode: str) -> None:
    scope = PathScope(tree)
    with pytest.raises(ValueError) as info:
        scope.open("notes.txt", mode)
    assert str(info.value) == f"invalid mode: {mode!r}"
    assert (tree / "notes.txt").read_text() == "notes\n"  # not truncated


def test_a_created_file_gets_the_usual_permissions(tree: Path) -> None:
    scope = PathScope(tree)
    old = os.umask(0o022)
    try:
        with scope.open("created.txt", "w") as f:
            f.write("x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tree / "created.txt").stat().st_mode) == 0o644


def test_make_parents_creates_directories_only_to_write(tree: Path) -> None:
    scope = PathScope(tree)
    with pytest.raises(FileNotFoundError):
        scope.open("missing/deeper/a.txt", "r", make_parents=True)
    assert not (tree / "missing").exists()
    with scope.open("missing/deeper/a.txt", "w", make_parents=True) as f:
        f.write("x")
    assert (tree / "missing" / "deeper" / "a.txt").read_text() == "x"


def test_open_passes_encoding_errors_and_newline_to_the_file(tree: Path) -> None:
    scope = PathScope(tree)
    with scope.open("utf16.txt", "w", encoding="utf-16", newline="") as f:
        f.write("é\r\n")
    assert (tree / "utf16.txt").read_bytes().decode("utf-16") == "é\r\n"
    with scope.open("utf16.txt", "r", encoding="utf-16", newline="") as f:
        assert f.read() == "é\r\n"
    (tree / "bad.txt").write_bytes(b"a\xffb")
    with scope.open("bad.txt", "r", encoding="utf-8", errors="replace") as f:
        assert f.read() == "a\ufffdb"
    # A refusal by open() surfaces as itself, whether it comes before or after open()
    # took the descriptor (which is closed once, never twice).
    descriptors = len(os.listdir("/proc/self/fd"))
    with pytest.raises(LookupError):
        scope.open("bad.txt", "r", encoding="no-such-codec")
    with pytest.raises(ValueError, match="binary mode doesn't take an encoding argument"):
        scope.open("bad.txt", "rb", encoding="utf-8")
    assert len(os.listdir("/proc/self/fd")) == descriptors  # none left open
    with scope.open("bad.txt", "rb") as f:
        assert f.name == "bad.txt" and f.read() == b"a\xffb"


def test_an_existing_link_is_not_created_over(tree: Path) -> None:
    scope = PathScope(tree)
    with pytest.raises(FileExistsError):
        scope.open("inner_link", "x", follow_symlinks=False)


@pytest.mark.parametrize("mode", ["r", "w"])
def test_a_fifo_is_not_a_regular_file(tree: Path, mode: str) -> None:
    os.mkfifo(tree / "pipe")
    with pytest.raises(PathScopeError) as info:
        PathScope(tree).open("pipe", mode)
    assert (info.value.path, info.value.reason) == ("pipe", "it is not a regular file")


@pytest.mark.parametrize(
    ("mode", "access"),
    [
        ("w", os.O_WRONLY),
        ("a", os.O_WRONLY),
        ("x", os.O_WRONLY),
        ("w+", os.O_RDWR),
        ("r", os.O_RDONLY),
        ("r+", os.O_RDWR),
    ],
)
def test_a_file_is_opened_with_no_more_access_than_its_mode_asks(
    tree: Path, mode: str, access: int
) -> None:
    scope = PathScope(tree)
    name = "fresh.txt" if mode == "x" else "notes.txt"
    with scope.open(name, mode) as f:
        assert fcntl.fcntl(f.fileno(), fcntl.F_GETFL) & os.O_ACCMODE == access
