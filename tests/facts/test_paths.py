"""The ``path`` fact: resolved once under the root, with real files and symlinks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clearance.facts import FactError, PathFact, resolve_relative
from clearance.facts.paths import resolve_real


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print()\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    (root / ".env").write_text("SECRET=1\n")
    (tmp_path / "outside.txt").write_text("outside\n")
    return root


def fact(root: Path, path: str, **options: bool) -> dict[str, object]:
    return dict(PathFact(root, **options).canonicalize(path).fact)


def test_spellings_of_one_file_are_one_fact(ws: Path) -> None:
    kind = PathFact(ws)
    spellings = ["src/app.py", "./src/app.py", "src//app.py", "src/./app.py",
                 "src/../src/app.py", f"{ws}/src/app.py", "src/app.py/../app.py"]  # fmt: skip
    values = {kind.canonicalize(s).value for s in spellings if not s.endswith("py/../app.py")}
    assert values == {"src/app.py"}


def test_the_record(ws: Path) -> None:
    record = fact(ws, "src/app.py")
    assert record == {
        "path": "src/app.py",
        "name": "app.py",
        "parent": "src",
        "extension": ".py",
        "segments": ["src", "app.py"],
        "exists": True,
        "type": "file",
        "absolute": f"{ws.resolve()}/src/app.py",
    }
    assert fact(ws, ".")["path"] == "."
    assert fact(ws, "new/file.TXT")["type"] == "missing"
    assert fact(ws, "new/file.TXT")["extension"] == ".txt"


def test_a_symlink_is_the_file_it_names(ws: Path) -> None:
    (ws / "docs").mkdir()
    (ws / "docs" / "notes.md").symlink_to("../.env")
    (ws / "link").symlink_to(".git")
    assert PathFact(ws).canonicalize("docs/notes.md").value == ".env"
    assert PathFact(ws).canonicalize("link/config").value == ".git/config"
    # A file about to be created through a dangling link is the link's target too.
    (ws / "dangling").symlink_to(".git/hooks/pre-commit")
    assert PathFact(ws).canonicalize("dangling").value == ".git/hooks/pre-commit"


def test_dotdot_after_a_symlink_leaves_the_target_not_the_link(ws: Path) -> None:
    (ws / "a" / "b").mkdir(parents=True)
    (ws / "l").symlink_to("a/b")
    # the kernel: l/.. is a (the target's parent), not the root
    assert PathFact(ws).canonicalize("l/../x").value == "a/x"
    assert os.path.realpath(ws / "l/../x") == str((ws / "a/x").resolve())


@pytest.mark.parametrize(
    "path",
    ["../outside.txt", "src/../../outside.txt", "/etc/passwd", "~/x", "~", "a\x00b",
     "a\nb", "a\tb", "x\x85y", "", "a" * 5000],
)  # fmt: skip
def test_refused(ws: Path, path: str) -> None:
    with pytest.raises(FactError):
        PathFact(ws).canonicalize(path)


def test_escapes_through_symlinks_are_refused(ws: Path, tmp_path: Path) -> None:
    (ws / "out").symlink_to(tmp_path)
    (ws / "abs").symlink_to("/etc")
    (ws / "chain1").symlink_to("chain2")
    (ws / "chain2").symlink_to("../outside.txt")
    for path in ("out/outside.txt", "abs/passwd", "chain1", "out"):
        with pytest.raises(FactError, match="outside"):
            PathFact(ws).canonicalize(path)


def test_loops_are_refused(ws: Path) -> None:
    (ws / "loop1").symlink_to("loop2")
    (ws / "loop2").symlink_to("loop1")
    (ws / "self").symlink_to("self/x")
    for path in ("loop1", "loop1/x", "loop1/../../etc", "self"):
        with pytest.raises(FactError, match="loop"):
            PathFact(ws).canonicalize(path)


def test_entry_keeps_the_last_name(ws: Path) -> None:
    (ws / "link").symlink_to(".env")
    (ws / "dirlink").symlink_to(".git")
    entry = PathFact(ws, follow_final=False)
    assert entry.canonicalize("link").value == "link"
    assert entry.canonicalize("link").fact["type"] == "symlink"
    assert entry.canonicalize("dirlink/config").value == ".git/config"
    assert entry.canonicalize("dirlink/").value == ".git"  # a trailing / follows the link
    assert entry.canonicalize("src/..").value == "."


def test_absolute_inside_the_root_becomes_relative(ws: Path) -> None:
    assert PathFact(ws).canonicalize(str(ws.resolve() / ".env")).value == ".env"


def test_root_given_through_a_symlink(ws: Path, tmp_path: Path) -> None:
    (tmp_path / "alias").symlink_to(ws)
    assert PathFact(tmp_path / "alias").canonicalize("src/app.py").value == "src/app.py"
    assert PathFact(tmp_path / "alias").root == str(ws.resolve())


def test_canonical_is_idempotent(ws: Path) -> None:
    (ws / "l").symlink_to("src")
    kind = PathFact(ws)
    once = kind.canonicalize("l/../l/app.py").value
    assert kind.canonicalize(once).value == once


def test_resolve_relative(ws: Path) -> None:
    assert resolve_relative(str(ws.resolve()), "src/./app.py") == "src/app.py"
    with pytest.raises(FactError):
        resolve_relative(str(ws.resolve()), "../x")


def test_root_must_exist(tmp_path: Path) -> None:
    with pytest.raises(FactError):
        PathFact(tmp_path / "missing")


# --- the rules the mutation run (benchmarks/mutation.py) showed unchecked -----------------


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("", "the path is empty"),
        ("a\x00b", "it contains a NUL byte"),
        ("a\x1fb", "it contains a control character"),
        ("a\x7fb", "it contains a control character"),  # DEL
        ("a\x9fb", "it contains a control character"),  # the last C1 control
        ("~x", "a leading '~' is not allowed (it may be expanded to a home directory)"),
        ("a\ud800b", "it cannot be encoded as a file name"),  # a lone surrogate
        ("a" * 4097, "it is longer than 4096 bytes"),
    ],
)
def test_a_refusal_names_what_is_wrong_with_the_path(ws: Path, path: str, problem: str) -> None:
    with pytest.raises(FactError) as caught:
        PathFact(ws).canonicalize(path)
    assert str(caught.value) == problem


def test_a_path_that_is_not_a_string_is_refused_by_its_type(ws: Path) -> None:
    with pytest.raises(FactError) as caught:
        PathFact(ws).canonicalize(["src"])
    assert str(caught.value) == "a path must be a string, not list"


def test_the_first_printable_characters_past_the_controls_are_names(ws: Path) -> None:
    # U+00A0 (no-break space) is the first character after the C1 controls: a name, not one.
    assert PathFact(ws).canonicalize("a\xa0b").value == "a\xa0b"
    assert PathFact(ws).canonicalize("a~b/~c").value == "a~b/~c"  # only a leading ~ is refused


def test_a_path_of_exactly_path_max_bytes_is_a_path(ws: Path) -> None:
    # 4096 bytes under the root ("ws/" adds nothing: the limit is on what the tool was given).
    path = "/".join(["d" * 255] * 15 + ["d" * 254, "x"])
    assert len(path.encode()) == 4096
    assert PathFact(ws).canonicalize(path).value == path


def test_leaving_the_root_is_refused_in_those_words(ws: Path) -> None:
    for refuse in (
        lambda: PathFact(ws).canonicalize("../outside.txt"),
        lambda: resolve_relative(str(ws.resolve()), "../outside.txt"),
    ):
        with pytest.raises(FactError) as caught:
            refuse()
        assert str(caught.value) == "it resolves outside the workspace root"


def test_forty_symlinks_are_followed_and_the_forty_first_is_a_loop(ws: Path) -> None:
    # The kernel's own limit (MAXSYMLINKS): what it opens, the fact resolves; no more.
    for i in range(41):
        (ws / f"l{i}").symlink_to(f"l{i + 1}" if i < 40 else ".env")
    assert PathFact(ws).canonicalize("l1").value == ".env"  # 40 links
    with pytest.raises(FactError) as caught:
        PathFact(ws).canonicalize("l0")  # 41 links
    assert str(caught.value) == "it runs into a symlink loop (or more than 40 symlinks)"
    # Keeping the last name of the 41-link chain follows none of it.
    assert PathFact(ws, follow_final=False).canonicalize("l0").value == "l0"


def test_a_symlink_with_a_control_character_in_its_target_is_refused(ws: Path) -> None:
    (ws / "bad").symlink_to("src\napp.py")
    with pytest.raises(FactError) as caught:
        PathFact(ws).canonicalize("bad")
    assert str(caught.value) == "a symlink on it is malformed: it contains a control character"


def test_a_symlink_to_a_name_starting_with_a_tilde_names_that_entry(ws: Path) -> None:
    # A link's target is read by the kernel, which never expands '~': "sub/l -> ~x" is
    # sub/~x. Only the canonical path must not start with '~' (a tool may expand it).
    (ws / "sub").mkdir()
    (ws / "sub" / "l").symlink_to("~x")
    assert PathFact(ws).canonicalize("sub/l").value == "sub/~x"
    (ws / "top").symlink_to("~home")
    with pytest.raises(FactError) as caught:
        PathFact(ws).canonicalize("top")
    assert str(caught.value) == "it names an entry whose name starts with '~' at the root"


def test_a_symlink_that_cannot_be_read_is_refused(ws: Path) -> None:
    (ws / "locked").mkdir()
    (ws / "locked" / "l").symlink_to("../.env")
    (ws / "locked").chmod(0o300)  # no read: readlink works; no search would fail lstat
    try:
        assert PathFact(ws).canonicalize("locked/l").value == ".env"
    finally:
        (ws / "locked").chmod(0o700)


def test_resolution_follows_the_final_link_unless_told_not_to(ws: Path) -> None:
    root = str(ws.resolve())
    (ws / "link").symlink_to(".env")
    assert resolve_real(root, "link") == f"{root}/.env"
    assert resolve_real(root, "link", follow_final=False) == f"{root}/link"
    assert resolve_relative(root, "link") == ".env"
    assert resolve_relative(root, "link", follow_final=False) == "link"


def test_an_entry_named_absolutely_keeps_its_last_name(ws: Path) -> None:
    (ws / "link").symlink_to(".env")
    (ws / "dirlink").symlink_to("src")
    entry = PathFact(ws, follow_final=False)
    root = str(ws.resolve())
    assert entry.canonicalize(f"{root}/link").value == "link"
    assert entry.canonicalize(f"{root}/dirlink/app.py").value == "src/app.py"
    # A final "." or ".." is not an entry's name: the path resolves fully.
    assert entry.canonicalize("dirlink/.").value == "src"
    assert entry.canonicalize("dirlink/..").value == "."


def test_the_file_system_root_as_the_root(ws: Path) -> None:
    inside = str(ws.resolve() / ".env").lstrip("/")
    assert PathFact("/").canonicalize(inside).value == inside
    assert PathFact("/").canonicalize("/" + inside).fact["absolute"] == "/" + inside
    assert PathFact("/", follow_final=False).canonicalize("etc").value == "etc"
    assert resolve_relative("/", "/etc") == "etc"
    assert PathFact("/").canonicalize("/").value == "."


def test_the_record_of_the_root_and_of_a_top_level_entry(ws: Path) -> None:
    root = str(ws.resolve())
    assert fact(ws, ".") == {
        "path": ".",
        "name": "",
        "parent": "",
        "extension": "",
        "segments": [],
        "exists": True,
        "type": "directory",
        "absolute": root,
    }
    assert fact(ws, ".env") | {"absolute": ""} == {
        "path": ".env",
        "name": ".env",
        "parent": ".",
        "extension": "",  # a leading dot starts a hidden name, not an extension
        "segments": [".env"],
        "exists": True,
        "type": "file",
        "absolute": "",
    }


def test_the_record_of_a_deep_entry(ws: Path) -> None:
    (ws / "a" / "b").mkdir(parents=True)
    (ws / "a" / "b" / "x.tar.GZ").write_text("")
    (ws / "a" / "b" / "noext").write_text("")
    record = fact(ws, "a/b/x.tar.GZ")
    assert (record["parent"], record["name"], record["extension"]) == ("a/b", "x.tar.GZ", ".gz")
    assert record["segments"] == ["a", "b", "x.tar.GZ"]
    assert fact(ws, "a/b/noext")["extension"] == ""
    assert fact(ws, "a/b")["type"] == "directory"
    missing = fact(ws, "a/b/gone")
    assert (missing["exists"], missing["type"]) == (False, "missing")


def test_the_record_of_something_that_is_neither_file_directory_nor_link(ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    record = fact(ws, "pipe")
    assert (record["exists"], record["type"]) == (True, "other")


def test_a_missing_root_is_named(tmp_path: Path) -> None:
    with pytest.raises(FactError) as caught:
        PathFact(tmp_path / "missing")
    assert (
        str(caught.value) == f"the root {str(tmp_path / 'missing')!r} is not an existing directory"
    )


def test_repr(ws: Path) -> None:
    root = str(ws.resolve())
    assert repr(PathFact(ws)) == f"PathFact({root!r})"
    assert repr(PathFact(ws, follow_final=False)) == f"PathFact({root!r}, follow_final=False)"


# --- more rules the mutation run showed unchecked (issue 20) -------------------------------


def test_a_sibling_whose_name_extends_the_roots_is_outside(ws: Path, tmp_path: Path) -> None:
    # "/x/ws-private" starts with the text "/x/ws" but is not under the directory "/x/ws".
    (tmp_path / "ws-private").mkdir()
    (tmp_path / "ws-private" / "key").write_text("secret\n")
    (ws / "peek").symlink_to(tmp_path / "ws-private")
    root = str(ws.resolve())
    for path in ("../ws-private/key", "../ws-private", f"{root}-private/key", "peek/key", "peek"):
        with pytest.raises(FactError, match="outside the workspace root"):
            PathFact(ws).canonicalize(path)
        with pytest.raises(FactError, match="outside the workspace root"):
            resolve_relative(root, path)
        if path != "peek":  # kept by its last name, "peek" is the link inside the root
            with pytest.raises(FactError, match="outside the workspace root"):
                PathFact(ws, follow_final=False).canonicalize(path)
    assert PathFact(ws, follow_final=False).canonicalize("peek").value == "peek"


def test_an_absolute_path_is_read_from_the_file_system_root(ws: Path) -> None:
    # Its first name is kept as written, whatever its letters, after any number of '/'.
    assert PathFact("/").canonicalize("/Xanadu/notes").value == "Xanadu/notes"
    assert PathFact("/").canonicalize("///Xanadu").value == "Xanadu"
    assert PathFact("/", follow_final=False).canonicalize("/Xanadu").value == "Xanadu"


def test_an_absolute_entry_kept_by_its_last_name_is_still_checked_against_the_root(
    ws: Path,
) -> None:
    entry = PathFact(ws, follow_final=False)
    for path in ("/etc", "/.env", "//etc"):
        with pytest.raises(FactError) as caught:
            entry.canonicalize(path)
        assert str(caught.value) == "it resolves outside the workspace root"
    assert PathFact("/", follow_final=False).canonicalize("/etc").value == "etc"


@pytest.mark.parametrize(
    "name",
    ["link ", "link\u3000", "linkX", "XXXX", "link.", "...", "-", "l\u00e9"],
)
def test_an_entry_kept_by_its_last_name_keeps_it_exactly_as_written(ws: Path, name: str) -> None:
    # Trailing spaces, dots and letters are part of a name: stripping any of them would
    # name another entry (here the link's target, .env) than the one the tool acts on.
    (ws / "sub").mkdir()
    (ws / "sub" / name).symlink_to("../.env")
    (ws / name).symlink_to(".env")
    entry = PathFact(ws, follow_final=False)
    assert entry.canonicalize(f"sub/{name}").value == f"sub/{name}"
    assert entry.canonicalize(name).value == name
    assert entry.canonicalize(f"{ws.resolve()}/sub/{name}").value == f"sub/{name}"
    assert entry.canonicalize(f"sub/{name}").fact["type"] == "symlink"
    assert PathFact(ws).canonicalize(f"sub/{name}").value == ".env"


def test_forty_symlinks_in_the_parents_of_a_kept_entry_are_followed(ws: Path) -> None:
    # The kernel's limit counts the links on the way to the entry: 40 resolve, 41 do not.
    for i in range(41):
        (ws / f"l{i}").symlink_to(f"l{i + 1}" if i < 40 else "src")
    entry = PathFact(ws, follow_final=False)
    assert entry.canonicalize("l1/app.py").value == "src/app.py"  # 40 links
    with pytest.raises(FactError, match="symlink loop"):
        entry.canonicalize("l0/app.py")  # 41 links


def test_a_one_letter_name_has_an_extension(ws: Path) -> None:
    assert fact(ws, "a.py")["extension"] == ".py"
    assert fact(ws, "src/b.TXT")["extension"] == ".txt"
    assert fact(ws, "ab.c")["extension"] == ".c"


def test_path_max_counts_bytes_not_characters(ws: Path) -> None:
    # 'é' is two bytes in UTF-8: 16 names of 127 of them, and a last name, make 4096 bytes.
    path = "/".join(["\u00e9" * 127] * 16) + "/" + "d" * 16
    assert len(path.encode()) == 4096
    assert PathFact(ws).canonicalize(path).value == path
    with pytest.raises(FactError) as caught:
        PathFact(ws).canonicalize(path + "d")
    assert str(caught.value) == "it is longer than 4096 bytes"


def test_a_path_that_is_not_a_string_is_refused_by_the_resolver(ws: Path) -> None:
    root = str(ws.resolve())
    for bad, named in ((5, "int"), (None, "NoneType"), (b"src", "bytes")):
        for resolve in (resolve_relative, resolve_real):
            with pytest.raises(FactError) as caught:
                resolve(root, bad)  # type: ignore[arg-type]
            assert str(caught.value) == f"a path must be a string, not {named}"


def test_a_symlink_swapped_for_a_file_while_it_is_read_is_refused(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The race made certain: between the look (lstat: a link) and the read (readlink) the
    # link is replaced by a file; the kernel answers EINVAL and the path is refused.
    (ws / "swapped").symlink_to(".env")
    real_readlink = os.readlink

    def swap_then_read(path: str, *args: object, **kwargs: object) -> str:
        os.unlink(path)
        Path(path).write_text("now a file\n")
        return real_readlink(path)

    monkeypatch.setattr(os, "readlink", swap_then_read)
    with pytest.raises(FactError) as caught:
        PathFact(ws).canonicalize("swapped")
    assert str(caught.value) == "a symlink on it cannot be read (Invalid argument)"
