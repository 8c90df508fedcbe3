"""The ``command`` fact: the argv a command line runs as, without a shell (rule R11).

``CommandFact(root)`` reads a command line the way the bundled ``shell.run`` runs it:
split with :func:`shlex.split` (POSIX rules, no shell: pipes, ``;``, ``$VAR`` and globs
are plain characters), the first word is the program. The canonical value is the argv
joined back with :func:`shlex.join`, so every spelling of one argv is one value::

    git diff --out''put=/x        git\\tdiff\\t--output=/x        git diff "--output=/x"

are all ``git diff --output=/x``, with one fact, and ``shlex.split`` of the canonical value
gives back exactly the argv the handler runs.

The fact record (``context.facts.command`` in Cedar)::

    program         "git"              argv[0], exactly as it will be executed
    subcommand      "diff"             the first non-option word after the global options,
                                       for the programs in SUBCOMMAND_PROGRAMS; "" otherwise
    argv            "git diff --stat"  the canonical command line
    args            {"diff", "--stat", "HEAD"}   every word after the program
    options         {"--stat"}         option names (text before "="): the words starting
                                       with "-" after the subcommand (after the program when
                                       it has no subcommands), up to a "--"
    global_options  {"--no-pager"}     option names before the subcommand
    operands        {"HEAD"}           the other words after the subcommand, and every word
                                       after "--"
    outside_root    false              whether any word may name a path outside the root
    paths           {"src/app.py"}     the entries of the root the words name, resolved
                                       through symlinks (words naming nothing are left out)
    resolved        "git diff src/app.py"   the command line with those words replaced by
                                       their canonical paths (what a rule on file names
                                       should read: ``head settings.txt`` with
                                       ``settings.txt -> .env`` is ``head .env``)

A policy for a coding agent that may look at diffs::

    permit (principal, action == Action::"shell.run", resource)
    when {
      context.facts.command.program == "git" &&
      context.facts.command.subcommand == "diff" &&
      context.facts.command.global_options.isEmpty() &&
      ["--stat", "--cached", "--name-only"].containsAll(context.facts.command.options) &&
      !context.facts.command.outside_root
    };

**Allowlist options; never deny specific ones.** The fact reports option names as they are
written, and programs accept more spellings than any denylist can name: git's
parse-options and GNU ``getopt_long`` take any unambiguous prefix of a long option
(``git grep --open-files-in=CMD`` runs ``CMD``; ``git diff --outp=FILE`` is tried as
``--output``), short options cluster and take attached values (``-O/tmp/f``,
``-vO/tmp/f``), an option's value may be the next word (``--output /x``, reported as an
operand), and git reads options after operands (``git diff HEAD --output=x``). A policy
that says "these options and no others" (``[...].containsAll(options)``) is beaten by none
of these; a policy that says "not ``--output``" is beaten by all of them. The bundled shell
tool also makes git refuse abbreviated options, but other programs do not.

``outside_root`` is true when any word, or any part of one after ``=``, ``:``, ``,`` or
``@`` (``--output=/x``, ``HEAD:../x``, ``file:///etc``), or before one of them, or the
value that may be attached to a short option (``-f/etc/passwd``), is absolute, starts with
``~``, has a ``..`` segment, or (when the kind has a root) is a relative path that resolves
through symlinks in the root to somewhere outside it (or into a loop). It errs on the side
of true: ``HEAD~1..main`` is inside, ``--since=../x`` is outside. For the bundled programs
it also looks past the words: ``grep -R`` and ``ls -L`` follow symlinks found below the
directories they are given (outside_root is true when one of those leads out), and
``wc --files0-from=F`` opens the files named *in* ``F`` (always true). Other programs'
indirections (options that read file names from a file, recursive link following, code
that a test runner imports) are not known to the kind: allowlist options. What a path may
name later (a symlink created after the check) is not known either: the shell tool is not
a sandbox.

Refused (:class:`FactError`): unbalanced quotes, an empty command, a command longer than
``MAX_COMMAND_LENGTH`` characters, a control character (C0 including TAB and newline
*inside* a word, DEL, C1), an invisible formatting character (bidi controls, zero-width
characters) or a line/paragraph separator inside a word, a lone surrogate; for git, every
global option that is not in ``GIT_GLOBAL_OPTIONS`` (``-c``, ``--config-env``, ``-C``,
``--exec-path``, ``--git-dir``, ``--work-tree``, ``--namespace``, ``--bare``,
``--help``...: they change what runs or where); for the other programs in
``SUBCOMMAND_PROGRAMS``, a global option the kind does not know (it cannot tell whether it
takes the next word as its value, and so which word is the subcommand).
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from clearance.facts.base import Canonical, FactError
from clearance.facts.paths import resolve_relative

__all__ = [
    "GIT_GLOBAL_OPTIONS",
    "MAX_COMMAND_LENGTH",
    "SUBCOMMAND_PROGRAMS",
    "CommandFact",
    "GlobalOptions",
    "ParsedCommand",
    "check_words",
    "parse_argv",
    "refuse_argument_files",
    "resolve_words",
    "split_command",
]

MAX_COMMAND_LENGTH = 65_536
"""Characters a command line may have (the bundled shell tool's schema allows 8,192)."""

_MAX_PATH_CHECKS = 1024
"""Distinct words or parts of words resolved through the file system for one command."""
_MAX_COMPONENTS = 16_384
"""Path components resolved for one command, over all its words (each costs an lstat)."""
_NAME_MAX = 255
_PATH_MAX = 4096

_ATTRIBUTES: Mapping[str, str] = {
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


@dataclass(frozen=True, slots=True)
class GlobalOptions:
    """The global options (before the subcommand) of a program with subcommands."""

    flags: frozenset[str] = frozenset()
    """Options that take no value."""
    valued: frozenset[str] = frozenset()
    """Options that take a value, as ``--name=value`` or in the next word."""
    only_flags: bool = False
    """Refuse every global option that is not in ``flags`` (git)."""


GIT_GLOBAL_OPTIONS = frozenset(
    {
        "--no-pager",
        "-P",
        "--no-optional-locks",
        "--literal-pathspecs",
        "--glob-pathspecs",
        "--noglob-pathspecs",
        "--icase-pathspecs",
        "--no-replace-objects",
        "--version",
        "-v",
        "-h",
    }
)
"""The git global options a command may use. Every other one is refused: ``-c``,
``--config-env``, ``-C``, ``--exec-path``, ``--git-dir``, ``--work-tree``,
``--namespace``, ``--super-prefix``, ``--bare``, ``--list-cmds`` change which program runs
or which repository and files it reads; ``-p``/``--paginate`` run a pager; ``--help``
with a command runs the man page viewer that the repository's config names."""


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_PIP = GlobalOptions(
    flags=_words(
        "-h --help -V --version -v --verbose -q --quiet --isolated --no-input --no-cache-dir "
        "--disable-pip-version-check --no-color --require-virtualenv"
    ),
    valued=_words(
        "--python --log --proxy --retries --timeout --exists-action --trusted-host --cert "
        "--client-cert --cache-dir"
    ),
)

SUBCOMMAND_PROGRAMS: Mapping[str, GlobalOptions] = {
    "git": GlobalOptions(flags=GIT_GLOBAL_OPTIONS, only_flags=True),
    "pip": _PIP,
    "pip3": _PIP,
    "npm": GlobalOptions(
        flags=_words("-g --global -s --silent --json -y --yes -v --version -h --help -d"),
        valued=_words("--prefix -C --workspace -w --registry --loglevel"),
    ),
    "cargo": GlobalOptions(
        flags=_words(
            "-v -vv --verbose -q --quiet --frozen --locked --offline -V --version --list -h --help"
        ),
        valued=_words("--color --config -Z -C"),
    ),
    "go": GlobalOptions(valued=_words("-C")),
    "uv": GlobalOptions(
        flags=_words(
            "-q --quiet -v --verbose --offline --no-cache -n --native-tls --no-config "
            "--no-progress --preview --isolated -V --version -h --help"
        ),
        valued=_words("--directory --project --cache-dir --config-file --color"),
    ),
    "docker": GlobalOptions(
        flags=_words("-D --debug --tls --tlsverify -v --version -h --help"),
        valued=_words(
            "--config -c --context -H --host -l --log-level --tlscacert --tlscert --tlskey"
        ),
    ),
    "kubectl": GlobalOptions(
        flags=_words("-h --help --insecure-skip-tls-verify --warnings-as-errors"),
        valued=_words(
            "-n --namespace --context --kubeconfig --cluster --user -s --server --as --token "
            "--request-timeout -v"
        ),
    ),
}
"""Programs whose second word is a subcommand (matched on the program's base name, so
``/usr/bin/git`` is git), with the global options the kind knows for each. ``cargo``
also takes ``+toolchain`` before its subcommand (a global option here)."""

# Separators within a word after which (or before which) a path may start: option values
# (--output=/x), revisions (HEAD:path), URLs and lists (file:///x, a,b), @file arguments.
_SEPARATORS = "=:,@"
_SPLIT_SEPARATORS = re.compile(r"[=:,@]")
_SPLIT_SEGMENTS = re.compile(r"[/=:,@]")
# Invisible or reordering characters: bidi controls, zero-width characters, line and
# paragraph separators, fillers that render as nothing, and the tag characters that can
# smuggle invisible ASCII text past a person reading the command.
_BIDI_AND_INVISIBLE = re.compile(
    "[\u00ad\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f"
    "\u3164\ufeff\uffa0\ufff9-\ufffb\U000e0000-\U000e007f]"
)
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class ParsedCommand:
    """An argv, read as its program reads it (see the module docstring)."""

    argv: tuple[str, ...]
    program: str
    subcommand: str
    subcommand_index: int | None
    """Where the subcommand is in ``argv`` (None when there is none)."""
    global_options: tuple[str, ...]
    options: tuple[str, ...]
    operands: tuple[str, ...]

    @property
    def base_name(self) -> str:
        """The program's base name (``git`` for ``/usr/bin/git``)."""
        return posixpath.basename(self.program)


def split_command(command: str, *, max_length: int = MAX_COMMAND_LENGTH) -> list[str]:
    """The argv ``command`` runs as: :func:`shlex.split`, then :func:`check_words`.

    Raises:
        FactError: the command is not a string, too long, empty, has unbalanced quotes or
            a trailing escape, or a word holds a character :func:`check_words` refuses.
    """
    if not isinstance(command, str):
        raise FactError(f"a command must be a string, not {type(command).__name__}")
    if len(command) > max_length:
        raise FactError(f"the command is longer than {max_length} characters")
    try:
        argv = shlex.split(command)
    except ValueError as exc:  # "No closing quotation", "No escaped character"
        raise FactError(f"the command cannot be split into words: {exc}") from None
    if not argv:
        raise FactError("the command is empty")
    check_words(argv)
    return argv


def check_words(argv: Sequence[str]) -> None:
    """Refuse words a program would read differently from a person or a policy.

    Refused: a control character (C0 with TAB and newline, DEL, C1, NUL), an invisible
    formatting character (bidi controls, zero-width characters, line and paragraph
    separators) or a lone surrogate (not encodable as UTF-8: it would reach the program as
    raw bytes). Whitespace *between* words is fine; it is not part of any word.

    Raises:
        FactError: naming the first such character (as ``U+XXXX``) and the word's position.
    """
    for position, word in enumerate(argv):
        if not isinstance(word, str):
            raise FactError(f"word {position} is not a string")
        found = _CONTROL.search(word) or _BIDI_AND_INVISIBLE.search(word)
        if found is None:
            continue
        char = found.group()
        if "\ud800" <= char <= "\udfff":
            what = "a lone surrogate (not valid UTF-8)"
        elif _CONTROL.match(char):
            what = "a control character"
        else:
            what = "an invisible formatting character"
        raise FactError(f"word {position} contains {what} (U+{ord(char):04X})")


ARGUMENT_FILE_PROGRAMS = frozenset({"pytest", "py.test"})
"""Programs that read more arguments from ``@file`` (argparse's ``fromfile_prefix_chars``),
anywhere on the command line: what they run is not the argv a policy sees."""


def refuse_argument_files(argv: Sequence[str]) -> None:
    """Refuse an ``@file`` word for a program that would read its arguments from it.

    Raises:
        FactError: naming the word's position.
    """
    if argv and os.path.basename(argv[0]) in ARGUMENT_FILE_PROGRAMS:
        for position, word in enumerate(argv[1:], 1):
            if word.startswith("@"):
                raise FactError(
                    f"word {position}: {argv[0]} would read more arguments from the file "
                    f"{word[1:]!r}, which no policy sees"
                )


def parse_argv(argv: Sequence[str]) -> ParsedCommand:
    """Read ``argv`` into program, subcommand, options and operands.

    Raises:
        FactError: ``argv`` is empty; git is given a global option not in
            :data:`GIT_GLOBAL_OPTIONS`; another program in :data:`SUBCOMMAND_PROGRAMS` is
            given a global option the kind does not know, or one without its value.
    """
    if not argv:
        raise FactError("the command is empty")
    words = tuple(argv)
    program = words[0]
    name = posixpath.basename(program)
    spec = SUBCOMMAND_PROGRAMS.get(name)
    global_options: list[str] = []
    subcommand, subcommand_index, start = "", None, 1
    if spec is not None:
        index = _read_global_options(name, spec, words, global_options)
        if index < len(words):
            subcommand, subcommand_index = words[index], index
        start = index + 1
    options: list[str] = []
    operands: list[str] = []
    after_dashdash = False
    for word in words[start:]:
        if after_dashdash:
            operands.append(word)
        elif word == "--":
            after_dashdash = True
        elif word.startswith("-") and word != "-":
            options.append(word.partition("=")[0])
        else:
            operands.append(word)
    return ParsedCommand(
        argv=words,
        program=program,
        subcommand=subcommand,
        subcommand_index=subcommand_index,
        global_options=tuple(global_options),
        options=tuple(options),
        operands=tuple(operands),
    )


def _read_global_options(
    name: str, spec: GlobalOptions, words: tuple[str, ...], found: list[str]
) -> int:
    """Collect the global options into ``found``; return the subcommand's index."""
    index = 1
    while index < len(words):
        word = words[index]
        if name == "cargo" and word.startswith("+"):
            found.append(word)  # a rustup toolchain: cargo +nightly build
            index += 1
            continue
        if not word.startswith("-"):
            break
        option, has_value, _ = word.partition("=")
        if spec.only_flags:
            if word not in spec.flags:
                raise FactError(
                    f"{name}: the global option {word!r} is not allowed "
                    "(it can change which program runs or which files are read); "
                    f"allowed: {', '.join(sorted(spec.flags))}"
                )
        elif word in spec.flags:
            pass
        elif option in spec.valued:
            if not has_value:
                if index + 1 >= len(words):
                    raise FactError(f"{name}: the global option {word!r} needs a value")
                index += 1  # the value is the next word
        else:
            raise FactError(
                f"{name}: unknown global option {option!r} before the subcommand (it is not "
                "known whether it takes the next word as its value); put it after the "
                "subcommand or leave it out"
            )
        found.append(option)
        index += 1
    return index


class CommandFact:
    """A command line run without a shell (see the module docstring).

    Args:
        root: the directory the command runs in; relative paths in its words are resolved
            under it (symlinks followed) for ``outside_root``. Without a root, only the
            lexical checks (absolute, ``~``, ``..``) apply.
        max_length: characters a command may have.

    Raises:
        FactError: ``root`` is given but is not an existing directory.
    """

    __slots__ = ("_max_length", "_root")

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        max_length: int = MAX_COMMAND_LENGTH,
    ) -> None:
        if root is None:
            self._root: str | None = None
        else:
            real = os.path.realpath(os.fspath(root))
            if not os.path.isdir(real):
                raise FactError(f"the root {os.fspath(root)!r} is not an existing directory")
            self._root = real
        if max_length <= 0:
            raise ValueError("max_length must be positive")
        self._max_length = max_length

    @property
    def name(self) -> str:
        return "command"

    @property
    def attributes(self) -> Mapping[str, str]:
        return _ATTRIBUTES

    @property
    def json_types(self) -> frozenset[str]:
        return frozenset({"string"})

    @property
    def root(self) -> str | None:
        """The root, fully resolved (None when there is none)."""
        return self._root

    def canonicalize(self, value: Any) -> Canonical:
        argv = split_command(value, max_length=self._max_length)
        refuse_argument_files(argv)
        parsed = parse_argv(argv)
        canonical = shlex.join(argv)
        fact = {
            "program": parsed.program,
            "subcommand": parsed.subcommand,
            "argv": canonical,
            "args": _as_set(argv[1:]),
            "options": _as_set(parsed.options),
            "global_options": _as_set(parsed.global_options),
            "operands": _as_set(parsed.operands),
            "outside_root": outside_root(argv, self._root),
        }
        paths, resolved = resolve_words(argv, self._root)
        fact["paths"] = _as_set(paths)
        fact["resolved"] = shlex.join(resolved)
        return Canonical(canonical, fact)

    def __repr__(self) -> str:
        return f"CommandFact({self._root!r})"


def _as_set(words: Sequence[str]) -> list[str]:
    """A ``Set<String>`` attribute: sorted, without duplicates (so equal sets compare
    equal as lists too)."""
    return sorted(set(words))


def resolve_words(argv: Sequence[str], root: str | None) -> tuple[list[str], list[str]]:
    """The entries of the root that the words name, resolved: ``(paths, resolved argv)``.

    A word (or the value of a ``--option=value`` word) that names an existing entry of the
    root, through any symlinks inside it, is that entry's canonical path in ``paths``, and
    is replaced by it in the resolved argv: ``head settings.txt`` with
    ``settings.txt -> .env`` resolves to ``head .env``, so that a rule about ``.env`` sees
    it. Words that leave the root are ``outside_root``'s business and stay as written.
    """
    if root is None:
        return [], list(argv)
    paths: list[str] = []
    resolved = [argv[0]] if argv else []
    for word in argv[1:]:
        prefix, value = "", word
        if word.startswith("-"):
            name, eq, rest = word.partition("=")
            if not eq:
                resolved.append(word)
                continue
            prefix, value = name + eq, rest
        canonical = _existing_entry(root, value)
        if canonical is None:
            resolved.append(word)
            continue
        paths.append(canonical)
        resolved.append(prefix + canonical)
    return paths, resolved


def _existing_entry(root: str, value: str) -> str | None:
    """The canonical path of ``value`` when it names an existing entry of the root."""
    if not value or _lexically_outside(value) or "\x00" in value:
        return None
    if not os.path.lexists(os.path.join(root, value)):
        return None
    try:
        return resolve_relative(root, value)
    except FactError:
        return None


def outside_root(argv: Sequence[str], root: str | None) -> bool:
    """Whether any word of ``argv`` may name a path outside ``root`` (see the module
    docstring). ``root`` must be absolute and symlink-free, or None for lexical checks only.

    Time is bounded: only parts of words whose first component is an entry of the root are
    resolved, at most 1,024 of them with 16,384 path components in all.

    Raises:
        FactError: more than that would have to be resolved.
    """
    if any(_lexically_outside(word) for word in argv):
        return True
    if root is None:
        return False
    try:
        entries = {_fold(name) for name in os.listdir(root)}
    except OSError:
        return True  # the root cannot be read: nothing can be said
    checked: set[str] = set()
    components = 0
    for word in argv:
        for start, end in _candidates(word):
            slash = word.find("/", start, min(end, start + _NAME_MAX + 1))
            head = word[start : slash if slash != -1 else end]
            if len(head) > _NAME_MAX:
                continue  # no entry has so long a name
            if head != "." and _fold(head) not in entries:
                continue  # nothing of that name in the root: it cannot be a symlink there
            candidate = word[start:end]
            if candidate in checked:
                continue
            checked.add(candidate)
            components += candidate.count("/") + 1
            if len(checked) > _MAX_PATH_CHECKS or components > _MAX_COMPONENTS:
                raise FactError(
                    f"the command names more paths than can be checked (at most "
                    f"{_MAX_PATH_CHECKS} paths of {_MAX_COMPONENTS} components in all)"
                )
            if _escapes(root, candidate):
                return True
    return _beyond_the_words(argv, root)


_FOLLOW_LINKS_BELOW: Mapping[str, tuple[str, str]] = {
    "grep": ("R", "--dereference-recursive"),
    "ls": ("L", "--dereference"),
}
"""Options with which a bundled program follows symlinks it finds *below* the directories
its words name (short letter, long name): ``grep -R``, ``ls -L`` (and ``ls -RL``)."""
_NAMES_FROM_A_FILE: Mapping[str, str] = {"wc": "--files0-from"}
"""Options with which a bundled program reads the names of the files to open from a file."""
_MAX_WALK = 20_000
"""Entries looked at below the named directories for ``grep -R`` and ``ls -L``."""


def _beyond_the_words(argv: Sequence[str], root: str) -> bool:
    """Whether a bundled program would reach past what its words name: it reads file names
    from a file (the fact cannot know them), or follows a symlink below a named directory
    that leads out of the root (or whether that could not be checked in time)."""
    name = posixpath.basename(argv[0])
    if name in ARGUMENT_FILE_PROGRAMS:
        return _pytest_reaches_out(argv, root)
    follow = _FOLLOW_LINKS_BELOW.get(name)
    from_file = _NAMES_FROM_A_FILE.get(name)
    if follow is None and from_file is None:
        return False
    operands: list[str] = []
    follows = False
    options_end = False
    for word in argv[1:]:
        if options_end or word == "-" or not word.startswith("-"):
            operands.append(word)
        elif word == "--":
            options_end = True
        elif word.startswith("--"):
            option = word.partition("=")[0]
            # getopt_long takes any unambiguous prefix: --files0 is --files0-from
            if from_file is not None and len(option) > 2 and from_file.startswith(option):
                return True
            follows = follows or (follow is not None and follow[1].startswith(option))
        elif follow is not None and follow[0] in word:
            follows = True  # a cluster (-rnR, -lL); an attached value may hold it too
    if not follows:
        return False
    if not operands or (name == "grep" and len(operands) < 2):
        operands.append(".")  # grep -R PATTERN searches the working directory
    return _links_lead_out(root, operands)


_PYTEST_SKIPPED = frozenset({".git", "node_modules", ".venv", "venv", ".tox", "__pycache__"})
"""Directories the walk for pytest leaves out (pytest's own ``norecursedirs`` defaults)."""


def _pytest_reaches_out(argv: Sequence[str], root: str) -> bool:
    """pytest follows every symlink it meets while collecting (test files, directories,
    ``conftest.py``), below its path operands or the whole workspace: whether one leads
    out of the root. Node ids (``tests/test_a.py::test_b``) name their file; the values of
    ``-k``/``-m`` that happen to name no directory are skipped by the walk."""
    operands: list[str] = []
    options_end = False
    for word in argv[1:]:
        if options_end or not word.startswith("-"):
            operands.append(word.split("::", 1)[0])
        elif word == "--":
            options_end = True
    # conftest.py files are collected from the root down to each operand: walk the root.
    return _links_lead_out(root, [".", *operands], skip=_PYTEST_SKIPPED)


def _links_lead_out(
    root: str, operands: Sequence[str], *, skip: frozenset[str] = frozenset()
) -> bool:
    """Whether a symlink below one of the ``operands`` that are directories in the root
    resolves outside it (or into a loop), following links to directories inside it as the
    program would; True when there are too many entries to look at."""
    pending: list[str] = []
    for operand in operands:
        try:
            start = resolve_relative(root, operand)
        except FactError:
            return True
        pending.append(start)
    seen: set[str] = set()
    entries = 0
    while pending:
        relative = pending.pop()
        if relative in seen:
            continue
        seen.add(relative)
        top = root if relative == "." else f"{root}/{relative}"
        try:
            with os.scandir(top) as listing:
                children = list(listing)
        except OSError:
            continue  # not a directory (or unreadable: the program cannot read it either)
        entries += len(children)
        if entries > _MAX_WALK:
            return True
        for child in children:
            if child.name in skip:
                continue
            inner = child.name if relative == "." else f"{relative}/{child.name}"
            if child.is_symlink():
                try:
                    target = resolve_relative(root, inner)
                except FactError:
                    return True
                if os.path.isdir(root if target == "." else f"{root}/{target}"):
                    pending.append(target)
            elif child.is_dir(follow_symlinks=False):
                pending.append(inner)
    return False


def _is_short_option(word: str) -> bool:
    return len(word) > 2 and word[0] == "-" and word[1] != "-"


def _lexically_outside(word: str) -> bool:
    """Absolute, ``~`` or ``..`` anywhere a path may start or be a segment."""
    if word.startswith(("/", "~")):
        return True
    for match in _SPLIT_SEPARATORS.finditer(word):
        if word.startswith(("/", "~"), match.end()):
            return True
    if ".." in word and ".." in _SPLIT_SEGMENTS.split(word):
        return True
    if _is_short_option(word):
        # -f/etc/passwd, -vf~/x, -f..: the value attached to a short option may start at
        # any letter of the cluster.
        if "/" in word[2:] or "~" in word[2:]:
            return True
        if _SPLIT_SEGMENTS.split(word, maxsplit=1)[0].endswith(".."):
            return True
    return False


def _candidates(word: str) -> Iterator[tuple[int, int]]:
    """Where in ``word`` a relative path may be, as ``(start, end)``: the word, every
    part before or after a separator and between two, and for a short option cluster
    every value that may be attached to it."""
    yield 0, len(word)
    cuts = [m.start() for m in _SPLIT_SEPARATORS.finditer(word)]
    if cuts:
        bounds = [-1, *cuts, len(word)]
        for i in range(1, len(bounds)):
            yield 0, bounds[i]  # a prefix before a separator
            yield bounds[i - 1] + 1, len(word)  # a suffix after one
            yield bounds[i - 1] + 1, bounds[i]  # a field between two
    if _is_short_option(word):
        slash = word.find("/")
        end = slash if slash != -1 else len(word)
        # only a name of at most NAME_MAX characters can be an entry of the root
        for start in range(max(2, end - _NAME_MAX), end):
            yield start, len(word)


def _fold(name: str) -> str:
    # Case and normalization folded, so that a case-insensitive or normalizing file system
    # cannot make a differently spelled word reach an entry.
    return unicodedata.normalize("NFC", name).casefold()


def _escapes(root: str, candidate: str) -> bool:
    if not candidate or len(os.fsencode(candidate)) > _PATH_MAX:
        return bool(candidate)
    try:
        resolve_relative(root, candidate)
    except (FactError, OSError):
        return True  # leaves the root, loops, or cannot be read
    return False
