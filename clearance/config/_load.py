"""Reading ``clearance.toml`` into a :class:`~clearance.config.Config`.

:func:`load_config` checks every table of the main configuration (``[evaluator]``,
``[[guardrails]]``, ``[journal]``, ``[approvals]``, ``[limits]``, ``[tools]``) through a
:class:`~clearance.config._toml.TomlReader`, so that each error names its key and line.
``[gateway]`` and ``[[mcp_servers]]`` are allowed here and read by
:func:`~clearance.config.load_gateway_config`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from clearance.config._model import (
    DEFAULT_SHELL_PROGRAMS,
    DEFAULT_STAGE,
    GUARDRAIL_KINDS,
    ApprovalsConfig,
    AuthZenConfig,
    Config,
    EvaluatorConfig,
    FilesToolsConfig,
    GitToolsConfig,
    GuardrailConfig,
    JournalConfig,
    LandlockConfig,
    LimitsConfig,
    ProcessToolsConfig,
    ShellToolsConfig,
    ToolsConfig,
)
from clearance.config._paths import default_journal_path, find_config, pack_path
from clearance.config._toml import TomlReader, Where
from clearance.errors import ConfigError

__all__ = ["load_config", "resolve_config"]

_AUTHZEN = (
    "url",
    "token_env",
    "timeout",
    "ask_field",
    "send_arguments",
    "send_provenance",
    "ca_file",
    "discovery",
    "max_connections",
    "batch_size",
)
"""The keys of ``[evaluator]`` with ``kind = "authzen"`` (besides ``kind``)."""


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
    return _ConfigReader.open(path).load()


class _ConfigReader(TomlReader):
    """The main configuration's tables, each checked against what it may hold."""

    def load(self) -> Config:
        """The whole file as a :class:`Config`."""
        data = self.data
        # [gateway] and [[mcp_servers]] belong to the gateway (load_gateway_config reads
        # them from the same file).
        self.table(
            data,
            (),
            (
                *("evaluator", "guardrails", "journal", "approvals", "limits", "tools"),
                *("store", "gateway", "mcp_servers"),
            ),
        )
        if "evaluator" not in data:
            raise ConfigError(
                'no [evaluator] table: choose kind = "cedar", "local", "authzen" or "noop"',
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
        journal = self.load_journal(data.get("journal", {}), store="store" in data)
        return Config(
            evaluator=evaluator,
            guardrails=guardrails,
            journal=journal,
            approvals=self.load_approvals(data.get("approvals", {})),
            limits=self.load_limits(data.get("limits", {})),
            tools=tools,
            store=self.load_store(data["store"]) if "store" in data else None,
            path=self.file.resolve(),
            base_dir=self.base,
        )

    def load_store(self, raw: Any) -> str:
        """``store``: a ``postgresql://`` URL (checked here; connected to when used)."""
        url = self.string(raw, ("store",))
        try:
            scheme = urlsplit(url).scheme
        except ValueError:
            scheme = ""
        if scheme not in ("postgresql", "postgres"):
            raise self.error(
                ("store",),
                'store must be a PostgreSQL URL ("postgresql://user@host:5432/db"); '
                "the SQLite files are set by [journal] path and [approvals] grants",
            )
        return url

    def _shadow(self, raw: dict[str, Any], w: Where) -> Path | None:
        return self.existing_dir(raw["shadow"], (*w, "shadow")) if "shadow" in raw else None

    def load_evaluator(self, raw: Any) -> EvaluatorConfig:
        w: Where = ("evaluator",)
        raw = self.table(
            raw,
            w,
            (
                "kind",
                "policies",
                "pack",
                "entities",
                "watch",
                "shadow",
                "rules",
                "allow",
                "ask",
                "deny",
                *_AUTHZEN,
            ),
        )
        kind = raw.get("kind")
        if kind not in ("cedar", "local", "noop", "authzen"):
            raise self.error(
                (*w, "kind"), 'evaluator.kind must be "cedar", "local", "authzen" or "noop"'
            )
        allowed = {
            "cedar": {"kind", "policies", "pack", "entities", "watch", "shadow"},
            "local": {"kind", "rules", "allow", "ask", "deny", "shadow"},
            "noop": {"kind"},
            "authzen": {"kind", *_AUTHZEN},
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
            watch = self.boolean(raw["watch"], (*w, "watch")) if "watch" in raw else True
            return EvaluatorConfig(
                "cedar",
                policies=policies,
                entities=entities,
                watch=watch,
                shadow=self._shadow(raw, w),
            )
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
                shadow=self._shadow(raw, w),
            )
        if kind == "authzen":
            return EvaluatorConfig("authzen", authzen=self.load_authzen(raw))
        return EvaluatorConfig("noop")

    def load_authzen(self, raw: dict[str, Any]) -> AuthZenConfig:
        """``[evaluator] kind = "authzen"``: the PDP's URL and how to reach it."""
        w: Where = ("evaluator",)
        if "url" not in raw:
            raise self.error(w, 'an authzen evaluator needs url (the PDP: "https://...")')
        try:
            from clearance.policy.authzen_wire import pdp_url

            url = pdp_url(self.string(raw["url"], (*w, "url")))
        except ValueError as exc:
            raise self.error((*w, "url"), f"evaluator.url: {exc}") from None
        d = AuthZenConfig(url)
        timeout = self.number(raw.get("timeout", d.timeout), (*w, "timeout"))
        if timeout > 300:
            raise self.error((*w, "timeout"), "evaluator.timeout must be at most 300 seconds")
        flags = {
            k: self.boolean(raw.get(k, getattr(d, k)), (*w, k))
            for k in ("send_arguments", "send_provenance", "discovery")
        }
        return AuthZenConfig(
            url,
            token_env=self.string(raw.get("token_env", d.token_env), (*w, "token_env")),
            timeout=timeout,
            ask_field=(
                self.string(raw["ask_field"], (*w, "ask_field")) if "ask_field" in raw else None
            ),
            ca_file=(
                self.existing_file(raw["ca_file"], (*w, "ca_file")) if "ca_file" in raw else None
            ),
            max_connections=self.integer(
                raw.get("max_connections", d.max_connections), (*w, "max_connections")
            ),
            batch_size=self.integer(raw.get("batch_size", d.batch_size), (*w, "batch_size")),
            **flags,
        )

    def load_guardrail(self, raw: Any, index: int) -> GuardrailConfig:
        w: Where = ("guardrails", index)
        raw = self.table(
            raw, w, ("kind", "stage", "tools", "fields", "advisory", "name", "options")
        )
        kind = raw.get("kind")
        if kind not in GUARDRAIL_KINDS:
            raise self.error(
                (*w, "kind"),
                f"guardrails[{index}].kind must be one of {', '.join(GUARDRAIL_KINDS)}",
            )
        stage = raw.get("stage", DEFAULT_STAGE[kind])
        if stage not in ("arguments", "result"):
            raise self.error((*w, "stage"), 'stage must be "arguments" or "result"')
        if stage == "result" and kind in ("path_scope", "url_allowlist"):
            raise self.error((*w, "stage"), f"{kind} checks arguments only; it has no result stage")
        from clearance.config._guardrails import option_names

        options = self.table(raw.get("options", {}), (*w, "options"), option_names(kind, stage))
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

    def load_journal(self, raw: Any, *, store: bool) -> JournalConfig:
        raw = self.table(raw, ("journal",), ("path", "start_log", "messages"))
        start_log = None
        if "start_log" in raw:
            if not store:
                raise self.error(
                    ("journal", "start_log"),
                    'start_log is the PostgreSQL journal\'s (store = "postgresql://..."); '
                    "the SQLite journal keeps its own start log beside its file",
                )
            start_log = self.path(raw["start_log"], ("journal", "start_log"))
        messages = self.boolean(raw.get("messages", False), ("journal", "messages"))
        path = (
            self.path(raw["path"], ("journal", "path"))
            if "path" in raw
            else default_journal_path(self.base)
        )
        return JournalConfig(path, start_log, messages)

    def load_approvals(self, raw: Any) -> ApprovalsConfig:
        w: Where = ("approvals",)
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
        w: Where = ("limits",)
        raw = self.table(
            raw, w, ("max_concurrency", "max_queue", "max_argument_bytes", "max_session_calls")
        )
        d = LimitsConfig()
        return LimitsConfig(
            max_concurrency=self.integer(
                raw.get("max_concurrency", d.max_concurrency), (*w, "max_concurrency")
            ),
            max_queue=self.integer(raw.get("max_queue", d.max_queue), (*w, "max_queue"), minimum=0),
            max_argument_bytes=self.integer(
                raw.get("max_argument_bytes", d.max_argument_bytes), (*w, "max_argument_bytes")
            ),
            max_session_calls=self.integer(
                raw.get("max_session_calls", d.max_session_calls), (*w, "max_session_calls")
            ),
        )

    def load_tools(self, raw: Any) -> ToolsConfig:
        raw = self.table(
            raw, ("tools",), ("files", "shell", "git", "process", "confinement", "landlock")
        )
        files = None
        if "files" in raw:
            w: Where = ("tools", "files")
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
        confinement = raw.get("confinement", "landlock")
        if confinement not in ("landlock", "none"):
            raise self.error(
                ("tools", "confinement"), 'tools.confinement must be "landlock" or "none"'
            )
        git = None
        if "git" in raw:
            w = ("tools", "git")
            section = self.table(raw["git"], w, ("root",))
            git = GitToolsConfig(
                self.existing_dir(section["root"], (*w, "root"))
                if "root" in section
                else files.root
                if files
                else self.base
            )
        default_root = files.root if files else self.base
        process = self.load_process(raw["process"], default_root) if "process" in raw else None
        landlock = self.load_landlock(raw["landlock"]) if "landlock" in raw else LandlockConfig()
        return ToolsConfig(
            files=files,
            shell=shell,
            git=git,
            process=process,
            confinement=confinement,
            landlock=landlock,
        )

    def load_process(self, raw: Any, default_root: Path) -> ProcessToolsConfig:
        w: Where = ("tools", "process")
        keys = ("root", "allowed_programs", "max_processes", "max_output", "lifetime", "grace")
        section = self.table(raw, w, keys)

        def given(key: str, read: Callable[[Any, Where], Any]) -> Any:
            return read(section[key], (*w, key)) if key in section else None

        return ProcessToolsConfig(
            given("root", self.existing_dir) or default_root,
            given("allowed_programs", self.strings),
            max_processes=given("max_processes", self.integer),
            max_output=given("max_output", self.integer),
            lifetime=given("lifetime", self.number),
            grace=given("grace", self.number),
        )

    def load_landlock(self, raw: Any) -> LandlockConfig:
        w: Where = ("tools", "landlock")
        keys = ("read_paths", "write_paths", "protected", "connect_ports", "bind_ports")
        raw = self.table(raw, w, keys)
        d = LandlockConfig()

        def paths(key: str) -> tuple[Path, ...]:
            if key not in raw:
                return ()
            return tuple(self.path(p, (*w, key)) for p in self.strings(raw[key], (*w, key)))

        def ports(key: str) -> tuple[int, ...]:
            value = raw.get(key, [])
            if not isinstance(value, list) or not all(
                isinstance(p, int) and not isinstance(p, bool) and 0 < p <= 65535 for p in value
            ):
                raise self.error((*w, key), f"tools.landlock.{key} must be a list of TCP ports")
            return tuple(value)

        return LandlockConfig(
            read_paths=paths("read_paths"),
            write_paths=paths("write_paths"),
            protected=(
                self.strings(raw["protected"], (*w, "protected"))
                if "protected" in raw
                else d.protected
            ),
            connect_ports=ports("connect_ports"),
            bind_ports=ports("bind_ports"),
        )
