"""The configuration as values: one frozen dataclass per table of ``clearance.toml``.

Nothing here reads a file or builds a part; :mod:`clearance.config._load` fills these from
TOML and :mod:`clearance.config._build` turns them into a harness.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from clearance._secrets import SECRETS
from clearance.config._paths import default_journal_path, pack_path

__all__ = [
    "DEFAULT_SHELL_PROGRAMS",
    "DEFAULT_STAGE",
    "FILE_PATH_FIELDS",
    "GUARDRAIL_KINDS",
    "GitToolsConfig",
    "LandlockConfig",
    "ApprovalsConfig",
    "AuthZenConfig",
    "Config",
    "EvaluatorConfig",
    "FilesToolsConfig",
    "GuardrailConfig",
    "GuardrailStage",
    "JournalConfig",
    "LimitsConfig",
    "NonInteractiveAnswer",
    "ProcessToolsConfig",
    "ShellToolsConfig",
    "ToolsConfig",
    "default_path_scope",
]

DEFAULT_SHELL_PROGRAMS: tuple[str, ...] = (
    "cat",
    "echo",
    "git",
    "grep",
    "head",
    "ls",
    "pwd",
    "pytest",
    "tail",
    "wc",
)
"""Programs ``shell.run`` may start when ``[tools.shell]`` does not list ``allowed_programs``."""

NonInteractiveAnswer = Literal["deny", "allow_once", "allow_session"]
"""What ``clearance run`` may answer to an ask without a person."""

GuardrailStage = Literal["arguments", "result"]
"""Where a guardrail runs: on the arguments (before the evaluator) or on the result."""


@dataclass(frozen=True, slots=True)
class AuthZenConfig:
    """``[evaluator] kind = "authzen"``: the AuthZEN PDP that decides (``docs/authzen.md``;
    each option is :class:`~clearance.policy.AuthZenEvaluator`'s of the same name)."""

    url: str
    """The PDP's URL: ``https://...`` (``http://`` only to this machine)."""
    token_env: str = "CLEARANCE_AUTHZEN_TOKEN"
    """The environment variable the bearer token is read from."""
    timeout: float = 2.0
    """Seconds one decision may take in all; then the call is denied."""
    ask_field: str | None = None
    """The Decision context member that asks a person (``"ask"`` for ``clearance pdp``)."""
    send_arguments: bool = True
    """Send the call's canonical arguments (``context.arguments``)."""
    send_provenance: bool = False
    """Send each argument's provenance record (``context.provenance``)."""
    ca_file: Path | None = None
    """A PEM file of the CAs that sign the PDP's certificate."""
    discovery: bool = False
    """Read the endpoints from the PDP's metadata document."""
    max_connections: int = 16
    """Connections kept open to the PDP at most."""
    batch_size: int = 64
    """Evaluations in one ``evaluations`` request at most (``clearance replay``)."""


@dataclass(frozen=True, slots=True)
class EvaluatorConfig:
    """``[evaluator]``: who decides allow / deny / ask."""

    kind: Literal["cedar", "local", "noop", "authzen"]
    """``"cedar"`` (a directory of ``.cedar`` policies), ``"local"`` (allow/ask/deny rules),
    ``"authzen"`` (a remote AuthZEN PDP) or ``"noop"`` (allow everything; for development
    only)."""
    policies: Path | None = None
    """Cedar: the policy directory (``pack = "coding"`` names a bundled pack instead)."""
    entities: Path | None = None
    """Cedar: an optional entities JSON file (users, groups and their attributes)."""
    shadow: Path | None = None
    """A candidate Cedar policy directory decided beside the live evaluator on every call
    and journaled (``call_decided``'s ``shadow``: its effect, reasons and whether it agrees),
    never enforced: how a change is tried on live traffic before it is rolled out."""
    watch: bool = True
    """Cedar: reload the policy directory when it changes (checked at most once a second
    during decisions; see ``CedarEvaluator.from_directory``); ``watch = false`` loads it
    once. A running gateway also reloads on SIGHUP."""
    rules: Path | None = None
    """Local: a TOML file with ``allow``, ``ask`` and ``deny`` lists."""
    allow: tuple[str, ...] = ()
    """Local: inline allow rules (instead of ``rules``)."""
    ask: tuple[str, ...] = ()
    """Local: inline ask rules."""
    deny: tuple[str, ...] = ()
    """Local: inline deny rules."""
    authzen: AuthZenConfig | None = None
    """AuthZEN: the PDP and how to reach it."""


@dataclass(frozen=True, slots=True)
class GuardrailConfig:
    """One ``[[guardrails]]`` entry."""

    kind: str
    """One of :data:`GUARDRAIL_KINDS`."""
    stage: GuardrailStage
    """``"arguments"`` (before the evaluator) or ``"result"`` (before the model sees it)."""
    tools: tuple[str, ...] = ("*",)
    """Globs over qualified tool names the guardrail applies to."""
    fields: tuple[str, ...] | None = None
    """JSON pointers of the fields it inspects; ``None`` uses the guardrail's default."""
    advisory: bool = False
    """Record the outcome but never enforce it."""
    name: str | None = None
    """The name used in records (default: the kind)."""
    options: Mapping[str, Any] = field(default_factory=dict)
    """Keyword options of the built-in (``root``, ``hosts``, ``max_bytes``, ``deny`` ...)."""
    line: int | None = None
    """Where the entry starts in the file, for error messages."""


@dataclass(frozen=True, slots=True)
class JournalConfig:
    """``[journal]``: where every step of every call is recorded."""

    path: Path
    """The SQLite journal file (default: ``clearance.db`` in the state directory, outside
    the workspace: see :func:`default_journal_path`)."""
    start_log: Path | None = None
    """With ``store = "postgresql://..."``: the local file the PostgreSQL journal writes
    each start to before its handler runs, instead of waiting for the server's commit
    (``PostgresJournal(start_log=...)``: a process crash is survived, the loss of the
    host's disk is not). ``None``: the server commits each start first."""
    messages: bool = False
    """Journal the messages and tool results the host gives each session
    (``Harness(journal_messages=True)``), so that ``clearance journal export`` carries
    the conversation each call's provenance was read from and a replay decides it as it
    was decided live. Off by default: a message is the user's own text."""


@dataclass(frozen=True, slots=True)
class ApprovalsConfig:
    """``[approvals]``: how asks are answered and where grants are kept."""

    ask_timeout: float = 300.0
    """Seconds an ask waits for an answer before it is denied."""
    grants: Path | None = None
    """The SQLite grant store (default: the journal file)."""
    non_interactive: NonInteractiveAnswer = "deny"
    """The answer ``clearance run`` gives to every ask when there is no terminal to ask on
    and ``--approve`` is not given: ``"deny"`` (default), ``"allow_once"`` or
    ``"allow_session"``. ``allow_always`` is never given without a person."""


@dataclass(frozen=True, slots=True)
class LimitsConfig:
    """``[limits]``: harness-wide bounds."""

    max_concurrency: int = 16
    """Handlers running at once."""
    max_queue: int = 256
    """Calls that may wait for a slot; beyond that calls end ``overloaded``."""
    max_argument_bytes: int = 1 << 20
    """The largest serialized arguments accepted."""
    max_session_calls: int = 100_000
    """Call ids one session remembers; past them it refuses new calls (the gateway
    replaces a sessionless client's session before that)."""


@dataclass(frozen=True, slots=True)
class FilesToolsConfig:
    """``[tools.files]``: the bundled workspace file tools."""

    root: Path
    """The workspace directory every path is relative to (and may not leave)."""


@dataclass(frozen=True, slots=True)
class ShellToolsConfig:
    """``[tools.shell]``: the bundled ``shell.run`` tool."""

    root: Path
    """The directory commands run in (default: the files root, else the config's dir)."""
    allowed_programs: tuple[str, ...] = DEFAULT_SHELL_PROGRAMS
    """Program names ``shell.run`` may start (the policy decides on top of this)."""
    timeout: float | None = None
    """Seconds a command may run (``None``: the toolset's default)."""


@dataclass(frozen=True, slots=True)
class GitToolsConfig:
    """``[tools.git]``: the bundled git tools (``git.status`` ... ``git.restore``)."""

    root: Path
    """The workspace whose repository they work in (default: the files root, else the
    config's directory)."""


@dataclass(frozen=True, slots=True)
class ProcessToolsConfig:
    """``[tools.process]``: the bundled long-running process tools (``process.start``,
    ``read``, ``write``, ``stop``). A limit left ``None`` is the toolset's default."""

    root: Path
    """The directory processes run in (default: the files root, else the config's dir)."""
    allowed_programs: tuple[str, ...] | None = None
    """Program names ``process.start`` may start (``None``: any; the policy decides)."""
    max_processes: int | None = None
    """Processes one session may hold at once (default 4)."""
    max_output: int | None = None
    """Bytes of output kept per process, the oldest dropped first (default 1,000,000)."""
    lifetime: float | None = None
    """Seconds a process may run before it is stopped (default 3600)."""
    grace: float | None = None
    """Seconds between terminate and kill when a process is stopped (default 5)."""

    def limits(self) -> dict[str, Any]:
        """The limits that were given, by ``ProcessLimits`` field name."""
        given = {
            "max_processes": self.max_processes,
            "max_output": self.max_output,
            "lifetime": self.lifetime,
            "grace": self.grace,
        }
        return {k: v for k, v in given.items() if v is not None}


@dataclass(frozen=True, slots=True)
class LandlockConfig:
    """``[tools.landlock]``: the kernel ruleset the programs of ``shell.run`` run under
    (rule R15; see ``docs/confinement.md``)."""

    read_paths: tuple[Path, ...] = ()
    """More directories or files outside the workspace a program may read and execute,
    besides the system directories."""
    write_paths: tuple[Path, ...] = ()
    """More directories a program may write, besides the workspace."""
    protected: tuple[str, ...] = SECRETS
    """Glob patterns of the workspace's secrets no bundled tool reads or writes (a pattern
    without ``/`` matches a name in any directory, one with ``/`` the path from the
    workspace): the file tools refuse them, the kernel hides them from programs."""
    connect_ports: tuple[int, ...] = ()
    """TCP ports a program may connect to (every other TCP connect is refused)."""
    bind_ports: tuple[int, ...] = ()
    """TCP ports a program may listen on."""


@dataclass(frozen=True, slots=True)
class ToolsConfig:
    """``[tools]``: which bundled toolsets to register; a missing table leaves it out."""

    files: FilesToolsConfig | None = None
    shell: ShellToolsConfig | None = None
    git: GitToolsConfig | None = None
    process: ProcessToolsConfig | None = None
    confinement: Literal["landlock", "none"] = "landlock"
    """``confinement = "landlock"`` (default): the programs the bundled tools run are
    confined by the kernel, and the tools refuse to start where it cannot; ``"none"``:
    they run unconfined."""
    landlock: LandlockConfig = field(default_factory=LandlockConfig)
    """``[tools.landlock]``: the ruleset's options."""


@dataclass(frozen=True, slots=True)
class Config:
    """A loaded ``clearance.toml`` (or the built-in default when there is none)."""

    evaluator: EvaluatorConfig
    guardrails: tuple[GuardrailConfig, ...] = ()
    journal: JournalConfig = field(
        default_factory=lambda: JournalConfig(default_journal_path(Path.cwd()))
    )
    approvals: ApprovalsConfig = field(default_factory=ApprovalsConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    tools: ToolsConfig = field(default_factory=ToolsConfig)
    store: str | None = None
    """``store = "postgresql://..."``: the PostgreSQL database that keeps the grants, the
    asks and the journal, shared by several hosts (``None``: the SQLite files of
    ``[journal]`` and ``[approvals]``)."""
    path: Path | None = None
    """The file this came from; ``None`` for the built-in default."""
    base_dir: Path = field(default_factory=Path.cwd)
    """The directory relative paths were resolved against."""

    @property
    def grants_path(self) -> Path:
        """The grant store file: ``[approvals] grants``, else the journal file."""
        return self.approvals.grants or self.journal.path

    @classmethod
    def default(cls, base_dir: str | os.PathLike[str] | None = None) -> Config:
        """The configuration used when no ``clearance.toml`` is found.

        The bundled ``coding`` Cedar pack decides; the ``files``, ``git`` and ``process``
        tools work in ``base_dir`` (default: the current directory) and ``shell.run`` runs
        the default programs there (``process.start`` any program, decided by the pack's
        command rules as ``shell.run`` is); a ``PathScope`` keeps file paths inside it; the
        journal and grants go to ``clearance.db`` in the state directory
        (:func:`default_journal_path`), outside the workspace.
        """
        base = Path(base_dir if base_dir is not None else Path.cwd()).resolve()
        return cls(
            evaluator=EvaluatorConfig("cedar", policies=pack_path("coding")),
            guardrails=(default_path_scope(),),
            journal=JournalConfig(default_journal_path(base)),
            tools=ToolsConfig(
                files=FilesToolsConfig(base),
                shell=ShellToolsConfig(base),
                git=GitToolsConfig(base),
                process=ProcessToolsConfig(base),
            ),
            path=None,
            base_dir=base,
        )


GUARDRAIL_KINDS: tuple[str, ...] = (
    "path_scope",
    "secret_scanner",
    "pii_redactor",
    "url_allowlist",
    "size_limit",
    "pattern",
)
"""The built-in guardrails a ``[[guardrails]]`` entry may name."""

DEFAULT_STAGE: Mapping[str, GuardrailStage] = {
    "path_scope": "arguments",
    "secret_scanner": "result",
    "pii_redactor": "result",
    "url_allowlist": "arguments",
    "size_limit": "arguments",
    "pattern": "arguments",
}
"""The stage of each built-in when its entry names none."""

FILE_PATH_FIELDS: tuple[str, ...] = ("/path", "/source", "/destination")
"""The path arguments of the bundled ``files`` tools, which the default ``PathScope`` checks."""


def default_path_scope() -> GuardrailConfig:
    """The ``PathScope`` of the built-in default: the ``files`` tools' paths stay in the
    workspace."""
    return GuardrailConfig(
        "path_scope", "arguments", tools=("files.*",), fields=FILE_PATH_FIELDS, name="workspace"
    )
