"""``clearance.toml``: the configuration file of the ``clearance`` command.

One file names the authority evaluator, the guardrails, the journal, how asks are answered,
the harness limits and which bundled toolsets to register. :func:`load_config` reads and
checks it; :func:`build_harness` turns it into a ready :class:`~clearance.Harness`::

    config = load_config("clearance.toml")
    async with build_harness(config) as harness:
        session = await harness.create_session(principal=Principal("User", "alice"))

Every relative path in the file is relative to the file's own directory. A key the loader
does not know is an error naming the key, the file and the line: a misspelt option is never
silently ignored. The format is documented in ``docs/config.md``; ``examples/clearance.toml``
is a commented example.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from clearance.errors import ConfigError

if TYPE_CHECKING:
    from clearance.guardrails.base import ArgumentGuardrail, ResultGuardrail
    from clearance.harness.approvals import GrantStore
    from clearance.harness.journal import Journal
    from clearance.harness.session import Harness
    from clearance.harness.tools import ToolRegistry
    from clearance.policy.base import AuthorityEvaluator

__all__ = [
    "CONFIG_FILE",
    "GUARDRAIL_KINDS",
    "PACKS_DIR",
    "ApprovalsConfig",
    "Config",
    "EvaluatorConfig",
    "FilesToolsConfig",
    "GuardrailConfig",
    "JournalConfig",
    "LimitsConfig",
    "ShellToolsConfig",
    "ToolsConfig",
    "build_evaluator",
    "build_guardrails",
    "build_harness",
    "build_registry",
    "default_journal_path",
    "find_config",
    "load_config",
    "open_journal",
    "pack_path",
    "resolve_config",
]

CONFIG_FILE = "clearance.toml"
"""The file name looked for in the current directory when no ``--config`` is given."""

PACKS_DIR = Path(__file__).resolve().parent / "packs"
"""Where the bundled starter policy packs live (``pack = "coding"``)."""

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


def state_directory(base_dir: str | os.PathLike[str]) -> Path:
    """Where the journal and grants of the workspace ``base_dir`` live by default:
    ``$CLEARANCE_STATE_DIR``, else ``$XDG_STATE_HOME/clearance``, else
    ``~/.local/state/clearance``, then ``<name>-<hash of the resolved path>``.

    Outside the workspace on purpose: an agent whose tools work in the workspace must not
    be able to read, rewrite or delete the record of what it did, nor its grants.
    """
    top_env = os.environ.get("CLEARANCE_STATE_DIR")
    if top_env:
        top = Path(top_env)
    else:
        xdg = os.environ.get("XDG_STATE_HOME")
        top = (Path(xdg) if xdg else Path.home() / ".local" / "state") / "clearance"
    real = os.path.realpath(os.fspath(base_dir))
    digest = hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    name = re.sub(r"[^A-Za-z0-9._-]", "_", os.path.basename(real) or "root")[:40]
    return top / f"{name}-{digest}"


def default_journal_path(base_dir: str | os.PathLike[str]) -> Path:
    """The journal (and grant store) file used when none is configured: ``clearance.db``
    in :func:`state_directory`."""
    return state_directory(base_dir) / "clearance.db"
GuardrailStage = Literal["arguments", "result"]


# --- the configuration values ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EvaluatorConfig:
    """``[evaluator]``: who decides allow / deny / ask."""

    kind: Literal["cedar", "local", "noop"]
    """``"cedar"`` (a directory of ``.cedar`` policies), ``"local"`` (allow/ask/deny rules)
    or ``"noop"`` (allow everything; for development only)."""
    policies: Path | None = None
    """Cedar: the policy directory (``pack = "coding"`` names a bundled pack instead)."""
    entities: Path | None = None
    """Cedar: an optional entities JSON file (users, groups and their attributes)."""
    rules: Path | None = None
    """Local: a TOML file with ``allow``, ``ask`` and ``deny`` lists."""
    allow: tuple[str, ...] = ()
    """Local: inline allow rules (instead of ``rules``)."""
    ask: tuple[str, ...] = ()
    """Local: inline ask rules."""
    deny: tuple[str, ...] = ()
    """Local: inline deny rules."""


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
class ToolsConfig:
    """``[tools]``: which bundled toolsets to register; a missing table leaves it out."""

    files: FilesToolsConfig | None = None
    shell: ShellToolsConfig | None = None


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

        The bundled ``coding`` Cedar pack decides; the ``files`` tools work in
        ``base_dir`` (default: the current directory) and ``shell.run`` runs the default
        programs there; a ``PathScope`` keeps file paths inside it; the journal and grants
        go to ``clearance.db`` in the state directory (:func:`default_journal_path`),
        outside the workspace.
        """
        base = Path(base_dir if base_dir is not None else Path.cwd()).resolve()
        return cls(
            evaluator=EvaluatorConfig("cedar", policies=pack_path("coding")),
            guardrails=(_default_path_scope(),),
            journal=JournalConfig(default_journal_path(base)),
            tools=ToolsConfig(files=FilesToolsConfig(base), shell=ShellToolsConfig(base)),
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

_DEFAULT_STAGE: dict[str, GuardrailStage] = {
    "path_scope": "arguments",
    "secret_scanner": "result",
    "pii_redactor": "result",
    "url_allowlist": "arguments",
    "size_limit": "arguments",
    "pattern": "arguments",
}

_FILE_PATH_FIELDS = ("/path", "/source", "/destination")


def _default_path_scope() -> GuardrailConfig:
    return GuardrailConfig(
        "path_scope", "arguments", tools=("files.*",), fields=_FILE_PATH_FIELDS, name="workspace"
    )


def pack_path(name: str) -> Path:
    """The directory of a bundled policy pack.

    Raises:
        ConfigError: no bundled pack has this name.
    """
    path = PACKS_DIR / name
    if not re.fullmatch(r"[a-z0-9_-]+(/[a-z0-9_-]+)?", name) or not any(path.glob("*.cedar")):
        known = sorted(str(p.parent.relative_to(PACKS_DIR)) for p in PACKS_DIR.glob("**/*.cedar"))
        known = sorted(set(known))
        raise ConfigError(
            f"no bundled policy pack named {name!r}"
            + (f" (bundled: {', '.join(known)})" if known else "")
        )
    return path


# --- finding and reading the file ------------------------------------------------------------


def find_config(directory: str | os.PathLike[str] | None = None) -> Path | None:
    """``clearance.toml`` in ``directory`` (default: the current directory), if it exists."""
    candidate = Path(directory) / CONFIG_FILE if directory is not None else Path(CONFIG_FILE)
    return candidate if candidate.is_file() else None


def resolve_config(
    path: str | os.PathLike[str] | None = None, *, directory: str | os.PathLike[str] | None = None
) -> Config:
    """The configuration the command line uses: ``path`` when given, else
    ``clearance.toml`` in ``directory`` (default: the current directory), else
    :meth:`Config.default`.

    Raises:
        ConfigError: the file named or found is wrong.
    """
    if path is not None:
        return load_config(path)
    found = find_config(directory)
    return load_config(found) if found is not None else Config.default(directory)


def load_config(path: str | os.PathLike[str]) -> Config:
    """Read and check a ``clearance.toml``.

    Args:
        path: the file. Relative paths inside it are resolved against its directory.

    Returns:
        The configuration; nothing is opened or created yet.

    Raises:
        ConfigError: the file cannot be read, is not TOML, has an unknown key or a value of
            the wrong kind (the message names the key, the file and the line).
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the config file: {exc.strerror}", path=str(file)) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = _toml_error_line(exc)
        raise ConfigError(
            f"not valid TOML: {_toml_error_message(exc)}", path=str(file), line=line
        ) from None
    return _Loader(file, text).load(data)


def _toml_error_line(exc: tomllib.TOMLDecodeError) -> int | None:
    m = re.search(r"\(at line (\d+)", str(exc))
    return int(m.group(1)) if m else None


def _toml_error_message(exc: tomllib.TOMLDecodeError) -> str:
    return re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc)) or "syntax error"


_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_\-\"'. ]+?)\s*=")


def _split_key(text: str) -> tuple[str, ...]:
    return tuple(part.strip().strip("\"'") for part in text.split("."))


def _key_lines(text: str) -> dict[tuple[Any, ...], int]:
    """Where each table and key starts: ``("guardrails", 1, "options", "root") -> 14``.

    A light scan, enough to point at a line in error messages: array-of-tables entries are
    numbered from 0, dotted keys are split, keys inside inline tables are not located (the
    key holding the inline table is).
    """
    lines: dict[tuple[Any, ...], int] = {}
    current: tuple[Any, ...] = ()
    arrays: dict[tuple[str, ...], int] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        header = _HEADER.match(raw)
        if header:
            names = _split_key(header.group(2))
            path = _with_indexes(names, arrays, header.group(1) == "[[")
            current = path
            lines.setdefault(path, number)
            continue
        key = _KEY.match(raw)
        if key:
            lines.setdefault(current + _split_key(key.group(1)), number)
    return lines


def _with_indexes(
    names: tuple[str, ...], arrays: dict[tuple[str, ...], int], is_array: bool
) -> tuple[Any, ...]:
    path: list[Any] = []
    for n in range(1, len(names) + 1):
        path.append(names[n - 1])
        prefix = names[:n]
        if n == len(names) and is_array:
            arrays[prefix] = arrays.get(prefix, -1) + 1
            path.append(arrays[prefix])
        elif prefix in arrays:
            path.append(arrays[prefix])
    return tuple(path)


class _Loader:
    """Checks one parsed file, pointing every error at its key's line."""

    def __init__(self, file: Path, text: str) -> None:
        self.file = file
        self.base = file.resolve().parent
        self.lines = _key_lines(text)

    def error(self, where: Sequence[Any], message: str) -> ConfigError:
        line = None
        for n in range(len(where), 0, -1):
            line = self.lines.get(tuple(where[:n]))
            if line is not None:
                break
        return ConfigError(message, path=str(self.file), line=line)

    def table(self, value: Any, where: tuple[Any, ...], known: Iterable[str]) -> dict[str, Any]:
        name = _dotted(where)
        if not isinstance(value, dict):
            raise self.error(where, f"{name} must be a table")
        allowed = set(known)
        for key in value:
            if key not in allowed:
                raise self.error(
                    (*where, key),
                    f"unknown key {_dotted((*where, key))!r}"
                    + (f" (expected one of: {', '.join(sorted(allowed))})" if allowed else ""),
                )
        return value

    def string(self, value: Any, where: tuple[Any, ...]) -> str:
        if not isinstance(value, str) or not value:
            raise self.error(where, f"{_dotted(where)} must be a non-empty string")
        return value

    def strings(self, value: Any, where: tuple[Any, ...]) -> tuple[str, ...]:
        if isinstance(value, str):
            return (value,)
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.error(where, f"{_dotted(where)} must be a list of strings")
        return tuple(value)

    def path(self, value: Any, where: tuple[Any, ...]) -> Path:
        text = self.string(value, where)
        p = Path(os.path.expanduser(text))
        return p if p.is_absolute() else (self.base / p)

    def existing_dir(self, value: Any, where: tuple[Any, ...]) -> Path:
        p = self.path(value, where)
        if not p.is_dir():
            raise self.error(where, f"{_dotted(where)}: {str(p)!r} is not a directory")
        return p

    def existing_file(self, value: Any, where: tuple[Any, ...]) -> Path:
        p = self.path(value, where)
        if not p.is_file():
            raise self.error(where, f"{_dotted(where)}: {str(p)!r} does not exist")
        return p

    def integer(self, value: Any, where: tuple[Any, ...], minimum: int = 1) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.error(where, f"{_dotted(where)} must be an integer >= {minimum}")
        return value

    def number(self, value: Any, where: tuple[Any, ...]) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise self.error(where, f"{_dotted(where)} must be a positive number")
        return float(value)

    def boolean(self, value: Any, where: tuple[Any, ...]) -> bool:
        if not isinstance(value, bool):
            raise self.error(where, f"{_dotted(where)} must be true or false")
        return value

    # -- sections -------------------------------------------------------------------------

    def load(self, data: dict[str, Any]) -> Config:
        # [gateway] and [[mcp_servers]] belong to the gateway (clearance.mcp.gateway), which
        # reads them from the same file.
        self.table(
            data,
            (),
            (
                *("evaluator", "guardrails", "journal", "approvals", "limits", "tools"),
                *("gateway", "mcp_servers"),
            ),
        )
        if "evaluator" not in data:
            raise ConfigError(
                'no [evaluator] table: choose kind = "cedar", "local" or "noop"',
                path=str(self.file),
            )
        tools = self.load_tools(data.get("tools", {}))
        evaluator = self.load_evaluator(data["evaluator"])
        raw_guards = data.get("guardrails", [])
        if not isinstance(raw_guards, list):
            raise self.error(
                ("guardrails",), "guardrails must be an array of tables ([[guardrails]])"
            )
        guardrails = tuple(self.load_guardrail(g, i) for i, g in enumerate(raw_guards))
        journal = self.load_journal(data.get("journal", {}))
        return Config(
            evaluator=evaluator,
            guardrails=guardrails,
            journal=journal,
            approvals=self.load_approvals(data.get("approvals", {})),
            limits=self.load_limits(data.get("limits", {})),
            tools=tools,
            path=self.file.resolve(),
            base_dir=self.base,
        )

    def load_evaluator(self, raw: Any) -> EvaluatorConfig:
        w: tuple[Any, ...] = ("evaluator",)
        raw = self.table(
            raw, w, ("kind", "policies", "pack", "entities", "rules", "allow", "ask", "deny")
        )
        kind = raw.get("kind")
        if kind not in ("cedar", "local", "noop"):
            raise self.error((*w, "kind"), 'evaluator.kind must be "cedar", "local" or "noop"')
        allowed = {
            "cedar": {"kind", "policies", "pack", "entities"},
            "local": {"kind", "rules", "allow", "ask", "deny"},
            "noop": {"kind"},
        }[kind]
        for key in raw:
            if key not in allowed:
                raise self.error((*w, key), f"evaluator.{key} does not apply to kind = {kind!r}")
        if kind == "cedar":
            if ("policies" in raw) == ("pack" in raw):
                raise self.error(
                    w,
                    "a cedar evaluator needs exactly one of policies (a directory) or pack (a bundled pack name)",
                )
            if "pack" in raw:
                try:
                    policies = pack_path(self.string(raw["pack"], (*w, "pack")))
                except ConfigError as exc:
                    raise self.error((*w, "pack"), exc.message) from None
            else:
                policies = self.existing_dir(raw["policies"], (*w, "policies"))
            entities = (
                self.existing_file(raw["entities"], (*w, "entities")) if "entities" in raw else None
            )
            return EvaluatorConfig("cedar", policies=policies, entities=entities)
        if kind == "local":
            inline = {
                k: self.strings(raw[k], (*w, k)) for k in ("allow", "ask", "deny") if k in raw
            }
            if "rules" in raw and inline:
                raise self.error(
                    w,
                    "a local evaluator takes rules (a file) or inline allow/ask/deny lists, not both",
                )
            if "rules" not in raw and not inline:
                raise self.error(
                    w, "a local evaluator needs rules (a file) or allow/ask/deny lists"
                )
            rules = self.existing_file(raw["rules"], (*w, "rules")) if "rules" in raw else None
            return EvaluatorConfig(
                "local",
                rules=rules,
                allow=inline.get("allow", ()),
                ask=inline.get("ask", ()),
                deny=inline.get("deny", ()),
            )
        return EvaluatorConfig("noop")

    def load_guardrail(self, raw: Any, index: int) -> GuardrailConfig:
        w: tuple[Any, ...] = ("guardrails", index)
        raw = self.table(
            raw, w, ("kind", "stage", "tools", "fields", "advisory", "name", "options")
        )
        kind = raw.get("kind")
        if kind not in GUARDRAIL_KINDS:
            raise self.error(
                (*w, "kind"),
                f"guardrails[{index}].kind must be one of {', '.join(GUARDRAIL_KINDS)}",
            )
        stage = raw.get("stage", _DEFAULT_STAGE[kind])
        if stage not in ("arguments", "result"):
            raise self.error((*w, "stage"), 'stage must be "arguments" or "result"')
        if stage == "result" and kind in ("path_scope", "url_allowlist"):
            raise self.error((*w, "stage"), f"{kind} checks arguments only; it has no result stage")
        options = self.table(raw.get("options", {}), (*w, "options"), _option_names(kind, stage))
        options = dict(options)
        if kind == "path_scope" and "root" in options:
            options["root"] = self.existing_dir(options["root"], (*w, "options", "root"))
        return GuardrailConfig(
            kind=kind,
            stage=stage,
            tools=self.strings(raw["tools"], (*w, "tools")) if "tools" in raw else ("*",),
            fields=self.strings(raw["fields"], (*w, "fields")) if "fields" in raw else None,
            advisory=self.boolean(raw.get("advisory", False), (*w, "advisory")),
            name=self.string(raw["name"], (*w, "name")) if "name" in raw else None,
            options=options,
            line=self.lines.get(w),
        )

    def load_journal(self, raw: Any) -> JournalConfig:
        raw = self.table(raw, ("journal",), ("path",))
        if "path" not in raw:
            return JournalConfig(default_journal_path(self.base))
        return JournalConfig(self.path(raw["path"], ("journal", "path")))

    def load_approvals(self, raw: Any) -> ApprovalsConfig:
        w: tuple[Any, ...] = ("approvals",)
        raw = self.table(raw, w, ("ask_timeout", "grants", "non_interactive"))
        answer = raw.get("non_interactive", "deny")
        if answer not in ("deny", "allow_once", "allow_session"):
            raise self.error(
                (*w, "non_interactive"),
                'approvals.non_interactive must be "deny", "allow_once" or "allow_session"',
            )
        return ApprovalsConfig(
            ask_timeout=self.number(raw.get("ask_timeout", 300.0), (*w, "ask_timeout")),
            grants=self.path(raw["grants"], (*w, "grants")) if "grants" in raw else None,
            non_interactive=answer,
        )

    def load_limits(self, raw: Any) -> LimitsConfig:
        w: tuple[Any, ...] = ("limits",)
        raw = self.table(raw, w, ("max_concurrency", "max_queue", "max_argument_bytes"))
        d = LimitsConfig()
        return LimitsConfig(
            max_concurrency=self.integer(
                raw.get("max_concurrency", d.max_concurrency), (*w, "max_concurrency")
            ),
            max_queue=self.integer(raw.get("max_queue", d.max_queue), (*w, "max_queue"), minimum=0),
            max_argument_bytes=self.integer(
                raw.get("max_argument_bytes", d.max_argument_bytes), (*w, "max_argument_bytes")
            ),
        )

    def load_tools(self, raw: Any) -> ToolsConfig:
        raw = self.table(raw, ("tools",), ("files", "shell"))
        files = None
        if "files" in raw:
            w: tuple[Any, ...] = ("tools", "files")
            section = self.table(raw["files"], w, ("root",))
            files = FilesToolsConfig(self.existing_dir(section.get("root", "."), (*w, "root")))
        shell = None
        if "shell" in raw:
            w = ("tools", "shell")
            section = self.table(raw["shell"], w, ("root", "allowed_programs", "timeout"))
            root = (
                self.existing_dir(section["root"], (*w, "root"))
                if "root" in section
                else files.root
                if files
                else self.base
            )
            allowed = (
                self.strings(section["allowed_programs"], (*w, "allowed_programs"))
                if "allowed_programs" in section
                else DEFAULT_SHELL_PROGRAMS
            )
            timeout = (
                self.number(section["timeout"], (*w, "timeout")) if "timeout" in section else None
            )
            shell = ShellToolsConfig(root, allowed, timeout)
        return ToolsConfig(files=files, shell=shell)


def _dotted(where: Sequence[Any]) -> str:
    out = ""
    for part in where:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "the file"


# --- guardrail built-ins ---------------------------------------------------------------------


def _guardrail_class(kind: str, stage: GuardrailStage) -> Callable[..., Any]:
    from clearance import guardrails as g

    table: dict[tuple[str, str], Callable[..., Any]] = {
        ("path_scope", "arguments"): g.PathScope,
        ("secret_scanner", "arguments"): g.ArgumentSecretScanner,
        ("secret_scanner", "result"): g.SecretScanner,
        ("pii_redactor", "arguments"): g.ArgumentPiiRedactor,
        ("pii_redactor", "result"): g.PiiRedactor,
        ("url_allowlist", "arguments"): g.UrlAllowlist,
        ("size_limit", "arguments"): g.SizeLimit,
        ("size_limit", "result"): g.ResultSizeLimit,
        ("pattern", "arguments"): g.Pattern,
        ("pattern", "result"): g.ResultPattern,
    }
    return table[(kind, stage)]


_COMMON_OPTIONS = frozenset({"tools", "fields", "advisory", "name", "self"})


def _option_names(kind: str, stage: GuardrailStage) -> tuple[str, ...]:
    """The ``options`` a built-in takes: its constructor's parameters minus the common ones."""
    params = inspect.signature(_guardrail_class(kind, stage)).parameters
    return tuple(
        name
        for name, p in params.items()
        if name not in _COMMON_OPTIONS and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    )


def build_guardrails(
    config: Config,
) -> tuple[list[ArgumentGuardrail], list[ResultGuardrail]]:
    """The configured guardrails, built: ``(argument guardrails, result guardrails)``.

    A ``path_scope`` without a ``root`` option uses the ``[tools.files]`` root (else the
    config file's directory).

    Raises:
        ConfigError: a guardrail rejects its options (naming the entry's line).
    """
    arguments: list[ArgumentGuardrail] = []
    results: list[ResultGuardrail] = []
    for index, entry in enumerate(config.guardrails):
        cls = _guardrail_class(entry.kind, entry.stage)
        options: dict[str, Any] = dict(entry.options)
        if entry.kind == "path_scope" and "root" not in options:
            options["root"] = config.tools.files.root if config.tools.files else config.base_dir
        kwargs: dict[str, Any] = {"tools": entry.tools, "advisory": entry.advisory}
        kwargs["name"] = entry.name or entry.kind
        if entry.fields is not None:
            kwargs["fields"] = entry.fields
        try:
            guard = cls(**options, **kwargs)
        except (TypeError, ValueError, ConfigError) as exc:
            message = exc.message if isinstance(exc, ConfigError) else str(exc)
            raise ConfigError(
                f"guardrails[{index}] ({entry.kind}): {message}",
                path=str(config.path) if config.path else None,
                line=entry.line,
            ) from None
        if entry.stage == "arguments":
            arguments.append(guard)
        else:
            results.append(guard)
    return arguments, results


# --- building the parts ----------------------------------------------------------------------


def open_journal(path: Path) -> Journal:
    """The SQLite journal at ``path`` (created when missing).

    Raises:
        JournalError: the file is not a SQLite database or is open in another writer.
    """
    from clearance.harness.journal_sqlite import SqliteJournal

    try:
        # The state directory is private: the journal holds every call's arguments.
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the journal's directory: {exc.strerror}") from None
    return SqliteJournal(path)


def build_registry(config: Config) -> ToolRegistry:
    """A registry holding the bundled toolsets that ``[tools]`` enables."""
    from clearance.harness.tools import ToolRegistry

    registry = ToolRegistry()
    if config.tools.files is not None:
        from clearance.toolsets.files import register_files

        # The journal and grant store are refused to the files tools wherever they are.
        register_files(
            registry,
            config.tools.files.root,
            protected_files=(config.journal.path, config.grants_path),
        )
    if config.tools.shell is not None:
        from clearance.toolsets.shell import register_shell

        shell = config.tools.shell
        options: dict[str, Any] = {"allowed_programs": shell.allowed_programs}
        if shell.timeout is not None:
            options["timeout"] = shell.timeout
        register_shell(registry, shell.root, **options)
    return registry


def build_evaluator(config: Config) -> AuthorityEvaluator:
    """The configured authority evaluator (Cedar policies are parsed here; they are
    validated against the tools when the harness binds it to its registry).

    Raises:
        ConfigError: the rules or policies do not load (``PolicyError`` / ``RuleError``).
    """
    ev = config.evaluator
    if ev.kind == "noop":
        from clearance.policy.noop import NoopEvaluator

        return NoopEvaluator()
    if ev.kind == "local":
        from clearance.policy.local import LocalEvaluator

        if ev.rules is not None:
            return LocalEvaluator.from_file(ev.rules)
        return LocalEvaluator(allow=ev.allow, ask=ev.ask, deny=ev.deny)
    from clearance.policy.cedar import CedarEvaluator

    assert ev.policies is not None
    options: dict[str, Any] = {}
    if ev.entities is not None:
        options["entities"] = ev.entities
    return cast("AuthorityEvaluator", CedarEvaluator.from_directory(ev.policies, **options))


def build_harness(
    config: Config,
    *,
    registry: ToolRegistry | None = None,
    evaluator: AuthorityEvaluator | None = None,
    journal: Journal | None = None,
    grant_store: GrantStore | None = None,
    **options: Any,
) -> Harness:
    """A harness as the configuration describes it (enter it with ``async with``).

    Args:
        config: the loaded configuration.
        registry: the tools (default: :func:`build_registry`); more tools may be registered
            on it before the first session.
        evaluator: overrides ``[evaluator]``.
        journal: overrides ``[journal]`` (default: a ``SqliteJournal`` at its path).
        grant_store: overrides the grant store (default: a ``SqliteGrantStore`` at
            ``[approvals] grants``).
        **options: further keyword options for :class:`~clearance.Harness`.

    Raises:
        ConfigError: a part of the configuration cannot be built.
    """
    from clearance.harness.approvals import SqliteGrantStore
    from clearance.harness.session import Harness

    if registry is None:
        registry = build_registry(config)
    if evaluator is None:
        evaluator = build_evaluator(config)
    argument_guardrails, result_guardrails = build_guardrails(config)
    if journal is None:
        journal = open_journal(config.journal.path)
    if grant_store is None:
        grant_store = SqliteGrantStore(config.grants_path)
    limits = config.limits
    return Harness(
        registry,
        evaluator=evaluator,
        argument_guardrails=argument_guardrails,
        result_guardrails=result_guardrails,
        journal=journal,
        grant_store=grant_store,
        max_concurrency=limits.max_concurrency,
        max_queue=limits.max_queue,
        max_argument_bytes=limits.max_argument_bytes,
        ask_timeout=config.approvals.ask_timeout,
        **options,
    )
