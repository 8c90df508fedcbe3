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

The fact is built from three smaller modules, re-exported here: ``_command_words`` splits
the command and refuses words (:func:`split_command`, :func:`check_words`,
:func:`refuse_argument_files`), ``_command_argv`` reads the argv (:func:`parse_argv` and
the table of programs with subcommands), and ``_command_paths`` says where the words lead
(:func:`outside_root`, :func:`resolve_words`).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from clearance.facts._command_argv import (
    GIT_GLOBAL_OPTIONS,
    SUBCOMMAND_PROGRAMS,
    GlobalOptions,
    ParsedCommand,
    parse_argv,
)
from clearance.facts._command_paths import outside_root, resolve_words
from clearance.facts._command_words import (
    ARGUMENT_FILE_PROGRAMS,
    MAX_COMMAND_LENGTH,
    check_words,
    refuse_argument_files,
    split_command,
)
from clearance.facts.base import Canonical, FactError

__all__ = [
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
]

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

    @property
    def max_length(self) -> int:
        """Characters a command may have."""
        return self._max_length

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
