"""R11 what is checked is what runs, for the ``command`` fact and the shell tool.

1. Equivalent spellings of one argv (each word randomly quoted with ``''``, ``""`` or
   backslashes, words separated by random runs of spaces, tabs and newlines) have one
   canonical value and one fact, or are refused with one reason; the canonical value
   splits back into exactly the argv, and canonicalizing it again changes nothing.
2. A command whose fact says ``outside_root == False`` never makes ``shell.run``'s real
   subprocess open a file outside the root. Trees of directories, files and symlinks
   (inside, outside, dangling, looping) are built on disk for every example; the programs
   (cat, head, tail, wc, ls, grep with random options) run through the real handler with
   the canonical command, under ``strace`` (every file the process opens, as the kernel
   resolved it) when it is available, and a secret outside the root never appears in
   their output.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st

from clearance import CallContext, CallToolResult, Principal
from clearance.facts.base import Canonical, FactError
from clearance.facts.command import CommandFact
from clearance.toolsets import shell_tools
from clearance.toolsets.confinement import Confinement

UNCONFINED = Confinement(kind="none")

# --- 1. spellings --------------------------------------------------------------------

WORD_ALPHABET = "ab-_=/:.,@~ 'ж\"\\$`;|&*#é!+"
PROGRAMS = ["git", "ls", "cat", "echo", "kubectl", "cargo", "pytest", "grep", "/usr/bin/git"]
WORDS = ["-c", "--output=/x", "--", "-", "diff", "status", "HEAD:../x", "-n", "", "a b", "~"]

words = st.one_of(st.text(alphabet=WORD_ALPHABET, max_size=8), st.sampled_from(WORDS))
argvs = st.builds(
    lambda program, rest: [program, *rest],
    st.sampled_from(PROGRAMS),
    st.lists(words, max_size=6),
)
SEPARATORS = st.text(alphabet=" \t\n", min_size=1, max_size=3)


def quote_chunk(chunk: str, style: str) -> str:
    """``chunk`` in one of shlex's POSIX quoting styles."""
    if style == "single" and "'" not in chunk:
        return f"'{chunk}'"
    if style == "double":
        return '"' + chunk.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if style == "plain" and not any(c in chunk for c in " '\"\\"):
        return chunk
    return "".join("\\" + c for c in chunk)


@st.composite
def spelled(draw: st.DrawFn, word: str) -> str:
    """One random spelling of ``word`` as shlex reads it."""
    if not word:
        return draw(st.sampled_from(["''", '""', "''\"\"", "\"\"''"]))
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(word) - 1)), max_size=3)))
    chunks = [word[i:j] for i, j in zip([0, *cuts], [*cuts, len(word)], strict=True)]
    styles = st.sampled_from(["single", "double", "backslash", "plain"])
    return "".join(quote_chunk(chunk, draw(styles)) for chunk in chunks if chunk)


@st.composite
def spellings(draw: st.DrawFn) -> tuple[list[str], str]:
    """An argv and one command line that shlex splits into it."""
    argv = draw(argvs)
    parts = [draw(spelled(word)) for word in argv]
    line = draw(st.sampled_from(["", " ", "\t"]))
    for i, part in enumerate(parts):
        line += (draw(SEPARATORS) if i else "") + part
    return argv, line + draw(st.sampled_from(["", " ", "\t \n"]))


@pytest.fixture(scope="module")
def kind() -> Iterator[CommandFact]:
    """A kind whose root has links in and out, so that ``outside_root`` varies."""
    with tempfile.TemporaryDirectory() as base:
        root = Path(base, "root")
        (root / "a").mkdir(parents=True)
        (root / "in").symlink_to("a")
        (root / "x").symlink_to(base)
        (root / "b").symlink_to("b")
        yield CommandFact(root)


def outcome(kind: CommandFact, command: str) -> Canonical | str:
    try:
        return kind.canonicalize(command)
    except FactError as exc:
        return exc.reason


@given(spellings())
def test_equivalent_spellings_have_one_canonical_value_and_fact(
    kind: CommandFact, case: tuple[list[str], str]
) -> None:
    argv, line = case
    assert shlex.split(line) == argv  # the spelling is a spelling of argv
    canonical = shlex.join(argv)
    expected = outcome(kind, canonical)
    got = outcome(kind, line)
    assert got == expected
    if isinstance(got, Canonical):
        assert got.value == canonical
        assert shlex.split(got.value) == argv
        assert got.fact["argv"] == canonical
        assert got.fact["program"] == argv[0]
        assert sorted(got.fact["args"]) == sorted(set(argv[1:]))
        assert kind.canonicalize(got.value) == got  # idempotent


@given(st.text(max_size=40))
def test_any_text_is_refused_or_canonical_and_idempotent(kind: CommandFact, text: str) -> None:
    got = outcome(kind, text)
    if isinstance(got, str):
        return
    argv = shlex.split(text)
    assert shlex.split(got.value) == argv
    assert kind.canonicalize(got.value) == got
    # nothing a program could read differently from a person is let through
    assert not any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in got.value)
    got.value.encode("utf-8")


# --- 2. what runs stays inside --------------------------------------------------------

SECRET = "OUTSIDE-SECRET-7f3a"
NAMES = ["a", "b", "link", "f.txt", "sp ace"]
BASELINE = [("", "a", "dir", ""), ("", "f.txt", "file", ""), ("", "esc", "link", "{outside}"),
            ("a", "up", "link", "../../outside/secret.txt"), ("", "in", "link", "a"),
            ("", "loop", "link", "loop"), ("a", "chain", "link", "../esc"),
            ("a", "g.txt", "file", "")]  # fmt: skip
PARENTS = ["", "a", "a/b", "b"]
TARGETS = [".", "..", "../..", "../outside", "../../outside/secret.txt", "a", "../a",
           "f.txt", "a/g.txt", "link", "missing", "{outside}", "{outside}/secret.txt",
           "{root}/a", "loop"]  # fmt: skip
COMPONENTS = ["a", "b", "link", "f.txt", "g.txt", "esc", "up", "in", "loop", "chain",
              "sp ace", ".", "..", "", "outside", "secret.txt", "missing"]  # fmt: skip
OPTIONS = {
    "cat": ["-n", "-A", "-s"],
    "head": ["-n1", "-c5", "-q", "-v"],
    "tail": ["-n1", "-c5", "-q"],
    "wc": ["-l", "-c", "-w"],
    "ls": ["-l", "-a", "-R", "-L", "-RL", "-H", "-d", "-1"],
    "grep": ["-r", "-R", "-n", "-l", "-rl", "-Rn", "-s", "-H"],
}

trees = st.lists(
    st.tuples(
        st.sampled_from(PARENTS),
        st.sampled_from(NAMES),
        st.sampled_from(["dir", "file", "link"]),
        st.sampled_from(TARGETS),
    ),
    max_size=10,
)
# Paths that reach the secret through a link, among others that stay inside.
KNOWN = ["esc/secret.txt", "a/up", "in/up", "a/chain/secret.txt", "esc", "esc/inner", "a",
         "in", "loop", "a/chain/inner/deep.txt", ".", "a/g.txt", "f.txt", "./in/../esc"]  # fmt: skip
paths = st.one_of(
    st.sampled_from(KNOWN),
    st.builds(
        lambda lead, parts: lead + "/".join(parts),
        st.sampled_from(["", "", "", "./", "/", "~/"]),
        st.lists(st.sampled_from(COMPONENTS), min_size=1, max_size=4),
    ),
)


@st.composite
def commands(draw: st.DrawFn) -> list[str]:
    program = draw(st.sampled_from(sorted(OPTIONS)))
    argv = [program, *draw(st.lists(st.sampled_from(OPTIONS[program]), max_size=3))]
    if program == "grep":
        argv.append(draw(st.sampled_from(["SECRET", "-e", "x"])))
        if argv[-1] == "-e":
            argv.append("SECRET")
    argv += draw(st.lists(paths, max_size=3))
    return argv


def _probe_strace() -> str | None:
    strace = shutil.which("strace")
    if strace is None:
        return None
    done = subprocess.run([strace, "-o", os.devnull, "true"], capture_output=True, check=False)
    return strace if done.returncode == 0 else None


STRACE = _probe_strace()
OPENED = re.compile(r"= \d+<(.*)>$")


@contextlib.contextmanager
def workspace(ops: list[tuple[str, str, str, str]]) -> Iterator[tuple[Path, Path, Path]]:
    """``(base, root, outside)`` with ``ops`` applied inside the root, a secret outside,
    and a ``bin`` directory of wrappers that run each program under strace."""
    with tempfile.TemporaryDirectory() as temp:
        base = Path(os.path.realpath(temp))
        root, outside = base / "root", base / "outside"
        root.mkdir()
        outside.mkdir()
        (outside / "secret.txt").write_text(f"SECRET {SECRET}\n")
        (outside / "inner").mkdir()
        (outside / "inner" / "deep.txt").write_text(f"SECRET {SECRET}\n")
        for parent, name, kind, target in BASELINE + ops:
            directory = root / parent
            path = directory / name
            if not directory.is_dir() or directory.is_symlink() or os.path.lexists(path):
                continue
            if kind == "dir":
                path.mkdir()
            elif kind == "file":
                path.write_text("inside SECRET-free\n")
            else:
                path.symlink_to(target.format(outside=outside, root=root))
        yield base, root, outside


def wrappers(base: Path, log: Path) -> dict[str, str]:
    """An environment whose PATH starts with strace wrappers of the programs."""
    bindir = base / "bin"
    bindir.mkdir()
    for program in OPTIONS:
        real = shutil.which(program)
        assert real is not None
        script = bindir / program
        if STRACE is None:
            script.write_text(f'#!/bin/sh\nexec {real} "$@"\n')
        else:
            script.write_text(
                f"#!/bin/sh\nexec {STRACE} -f -y -qq -e trace=open,openat,creat "
                f'-o {log} {real} "$@"\n'
            )
        script.chmod(0o755)
    return {"PATH": f"{bindir}:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(base)}


def opened_paths(log: Path) -> list[str]:
    if not log.exists():
        return []
    found = []
    for line in log.read_text(errors="replace").splitlines():
        match = OPENED.search(line)
        if match:
            found.append(match.group(1))
    return found


def context() -> CallContext:
    return CallContext(
        session_id="s",
        turn_id=None,
        call_id="c",
        qualified_name="shell.run",
        model_alias="shell__run",
        principal=Principal("User", "u"),
    )


@given(trees, commands())
@example([], ["grep", "-R", "SECRET"])
@example([], ["grep", "-rR", "SECRET", "a"])
@example([], ["ls", "-RL"])
@example([], ["ls", "-L", "esc"])
@example([], ["cat", "a/up"])
@example([], ["head", "-c5", "in/up"])
@example([("a", "b", "link", "../../outside/secret.txt")], ["wc", "-l", "a/b"])
def test_a_command_inside_the_root_opens_nothing_outside(
    ops: list[tuple[str, str, str, str]], argv: list[str]
) -> None:
    with workspace(ops) as (base, root, _outside):
        try:
            canon = CommandFact(root).canonicalize(shlex.join(argv))
        except FactError:
            event("refused")
            return  # refused: nothing runs
        if canon.fact["outside_root"]:
            event("outside_root")
            return  # a policy decides; the property is about what the fact calls inside
        event("ran")
        log = base / "strace.log"
        # Unconfined: the fact alone must keep the program in (the kernel is R15's test).
        (tool,) = shell_tools(root, env=wrappers(base, log), timeout=20, confinement=UNCONFINED)
        result = tool.handler({"command": canon.value}, context())
        assert isinstance(result, CallToolResult)
        assert SECRET not in result.text, (argv, result.text)
        escaped = [
            path
            for path in opened_paths(log)
            if path.startswith(f"{base}/") and path != str(root) and not path.startswith(f"{root}/")
        ]
        assert not escaped, (argv, escaped)


@pytest.mark.skipif(STRACE is None, reason="strace is not available")
def test_the_observer_sees_an_escape() -> None:
    """The strace oracle does catch a program that opens a file outside the root."""
    with workspace([]) as (base, root, outside):
        log = base / "strace.log"
        (tool,) = shell_tools(root, env=wrappers(base, log), timeout=20, confinement=UNCONFINED)
        assert CommandFact(root).canonicalize("cat esc/secret.txt").fact["outside_root"]
        result = tool.handler({"command": "cat esc/secret.txt"}, context())
        assert isinstance(result, CallToolResult) and SECRET in result.text
        assert str(outside / "secret.txt") in opened_paths(log)
