"""How a program reads its argv: program, subcommand, global options, options, operands.

:func:`parse_argv` and the table of programs with subcommands it reads
(:data:`SUBCOMMAND_PROGRAMS`, with git's allowed global options in
:data:`GIT_GLOBAL_OPTIONS`); see :mod:`clearance.facts.command` for the fact built on it.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from clearance.facts.base import FactError

__all__ = [
    "GIT_GLOBAL_OPTIONS",
    "SUBCOMMAND_PROGRAMS",
    "GlobalOptions",
    "ParsedCommand",
    "parse_argv",
]


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


@dataclass(frozen=True, slots=True)
class ParsedCommand:
    """An argv, read as its program reads it (see :mod:`clearance.facts.command`)."""

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
