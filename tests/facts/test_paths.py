"""The ``path`` fact: resolved once under the root, with real files and symlinks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clearance.facts import FactError, PathFact, resolve_relative


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
