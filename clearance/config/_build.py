"""Building a harness, or one part of it, from a :class:`~clearance.config.Config`.

Each part is built from the configuration alone and may be replaced by the caller
(:func:`build_harness` takes a registry, evaluator, journal or grant store of its own).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from clearance.config._guardrails import build_guardrails
from clearance.config._model import AuthZenConfig, Config
from clearance.config._paths import CONFIG_FILE
from clearance.errors import ConfigError
from clearance.harness.approvals import GrantStore, SqliteGrantStore
from clearance.harness.ask_store import AskStore
from clearance.harness.ask_store_sqlite import SqliteAskStore
from clearance.harness.journal import Journal, SqliteJournal
from clearance.harness.session import Harness
from clearance.harness.tools import ToolRegistry
from clearance.policy.base import AuthorityEvaluator
from clearance.policy.local import LocalEvaluator
from clearance.policy.noop import NoopEvaluator
from clearance.provenance import TrustList
from clearance.toolsets.confinement import Confinement
from clearance.toolsets.files import register_files
from clearance.toolsets.git import register_git
from clearance.toolsets.process import ProcessLimits, register_process
from clearance.toolsets.shell import register_shell

__all__ = [
    "build_confinement",
    "build_evaluator",
    "build_harness",
    "build_journal",
    "build_registry",
    "open_journal",
    "open_store",
]


def open_journal(path: Path) -> Journal:
    """The SQLite journal at ``path`` (created when missing).

    Raises:
        JournalError: the file is not a SQLite database or is open in another writer.
    """
    try:
        # The state directory is private: the journal holds every call's arguments.
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the journal's directory: {exc.strerror}") from None
    return SqliteJournal(path)


def build_journal(config: Config) -> Journal:
    """The journal the configuration names: a ``PostgresJournal`` when ``store`` is a
    PostgreSQL database (with ``[journal] start_log``), else the SQLite journal at
    ``[journal] path`` (for ``clearance pdp``, which builds no other store).

    Raises:
        ConfigError, JournalError: it cannot be opened.
    """
    if config.store is None:
        return open_journal(config.journal.path)
    return _postgres_journal(config.store, config.journal.start_log)


def _postgres_journal(url: str, start_log: Path | None) -> Journal:
    from clearance.harness.journal import PostgresJournal

    if start_log is not None:
        _private_directory(start_log)
    return PostgresJournal(url, start_log=start_log)


def build_registry(config: Config) -> ToolRegistry:
    """A registry holding the bundled toolsets that ``[tools]`` enables."""
    registry = ToolRegistry()
    if config.tools.files is not None:
        # The journal and grant store are refused to the files tools wherever they are; the
        # configuration and the policies it names may be read, never changed (an agent
        # that rewrote them would decide its own next run).
        register_files(
            registry,
            config.tools.files.root,
            protected_files=_store_files(config),
            read_only_paths=_decisive_files(config),
            secrets=config.tools.landlock.protected,
        )
    if config.tools.shell is not None:
        shell = config.tools.shell
        options: dict[str, Any] = {"allowed_programs": shell.allowed_programs}
        if shell.timeout is not None:
            options["timeout"] = shell.timeout
        register_shell(registry, shell.root, confinement=build_confinement(config), **options)
    if config.tools.git is not None:
        register_git(registry, config.tools.git.root, confinement=build_confinement(config))
    if config.tools.process is not None:
        process = config.tools.process
        register_process(
            registry,
            process.root,
            allowed_programs=process.allowed_programs,
            limits=ProcessLimits(**process.limits()),
            confinement=build_confinement(config),
        )
    return registry


def build_confinement(config: Config) -> Confinement:
    """The kernel confinement of the bundled tools that run programs (R15): the
    ``[tools]`` options, with clearance's stores hidden and the files that decide the next
    run (configuration, policies) readable but never writable.
    """
    tools = config.tools
    landlock = tools.landlock
    return Confinement(
        kind=tools.confinement,
        read_paths=landlock.read_paths,
        write_paths=landlock.write_paths,
        protected=landlock.protected,
        hidden_paths=_store_files(config),
        read_only_paths=_decisive_files(config),
        connect_ports=landlock.connect_ports,
        bind_ports=landlock.bind_ports,
    )


def build_evaluator(config: Config) -> AuthorityEvaluator:
    """The configured authority evaluator (Cedar policies are parsed here; they are
    validated against the tools when the harness binds it to its registry).

    Raises:
        ConfigError: the rules or policies do not load (``PolicyError`` / ``RuleError``).
    """
    ev = config.evaluator
    if ev.kind == "noop":
        return NoopEvaluator()
    if ev.kind == "authzen":
        assert ev.authzen is not None
        return _authzen_evaluator(ev.authzen)
    if ev.kind == "local":
        if ev.rules is not None:
            return LocalEvaluator.from_file(ev.rules)
        return LocalEvaluator(allow=ev.allow, ask=ev.ask, deny=ev.deny)
    # Imported when needed: the Cedar engine is the slowest import of the package, and
    # the commands that read a configuration without deciding (journal, grants) skip it.
    from clearance.policy.cedar import CedarEvaluator

    assert ev.policies is not None
    options: dict[str, Any] = {"watch": ev.watch}
    if ev.entities is not None:
        options["entities"] = ev.entities
    return cast("AuthorityEvaluator", CedarEvaluator.from_directory(ev.policies, **options))


def _authzen_evaluator(settings: AuthZenConfig) -> AuthorityEvaluator:
    """The AuthZEN evaluator of ``[evaluator] kind = "authzen"`` (its token read from the
    environment now).

    Raises:
        MissingExtraError: the ``authzen`` extra is not installed.
        ConfigError: an option is refused.
    """
    from clearance.policy.authzen import AuthZenEvaluator

    try:
        return AuthZenEvaluator(
            settings.url,
            token_env=settings.token_env,
            timeout=settings.timeout,
            ask_field=settings.ask_field,
            send_arguments=settings.send_arguments,
            send_provenance=settings.send_provenance,
            ca_file=settings.ca_file,
            discovery=settings.discovery,
            max_connections=settings.max_connections,
            batch_size=settings.batch_size,
        )
    except ValueError as exc:
        raise ConfigError(f"[evaluator]: {exc}") from None


def build_harness(
    config: Config,
    *,
    registry: ToolRegistry | None = None,
    evaluator: AuthorityEvaluator | None = None,
    journal: Journal | None = None,
    grant_store: GrantStore | None = None,
    ask_store: AskStore | None = None,
    **options: Any,
) -> Harness:
    """A harness as the configuration describes it (enter it with ``async with``).

    Args:
        config: the loaded configuration.
        registry: the tools (default: :func:`build_registry`); more tools may be registered
            on it before the first session.
        evaluator: overrides ``[evaluator]``.
        journal: overrides ``[journal]`` (default: a ``SqliteJournal`` at its path, or a
            ``PostgresJournal`` when ``store`` names a PostgreSQL database).
        grant_store: overrides the grant store (default: a ``SqliteGrantStore`` at
            ``[approvals] grants``, or a ``PostgresGrantStore`` with ``store``).
        ask_store: overrides the ask store (default: a ``SqliteAskStore`` in the grant
            store's file when that is the default too, so that ``clearance asks`` can
            answer from another process; a ``PostgresAskStore`` with ``store``; else in
            memory).
        **options: further keyword options for :class:`~clearance.Harness`; ``trust``
            defaults to the trust list beside the Cedar policies (``provenance.toml``).

    Raises:
        ConfigError: a part of the configuration cannot be built.
    """
    if registry is None:
        registry = build_registry(config)
    if evaluator is None:
        evaluator = build_evaluator(config)
    argument_guardrails, result_guardrails = build_guardrails(config)
    closing: list[Callable[[], None]] = []
    if config.store is not None:
        journal, grant_store, ask_store = _postgres_stores(
            config.store, journal, grant_store, ask_store, closing, config.journal.start_log
        )
    if journal is None:
        journal = open_journal(config.journal.path)
    if grant_store is None:
        _private_directory(config.grants_path)
        grant_store = SqliteGrantStore(config.grants_path)
        if ask_store is None:
            # Asks live beside the grants, so that `clearance asks` answers from elsewhere.
            ask_store = SqliteAskStore(config.grants_path)
    if "shadow_evaluator" not in options and config.evaluator.shadow is not None:
        from clearance.policy.cedar import CedarEvaluator

        options["shadow_evaluator"] = CedarEvaluator.from_directory(
            config.evaluator.shadow, watch=config.evaluator.watch
        )
    if "trust" not in options and config.evaluator.policies is not None:
        # A pack ships its trust list beside its policies (provenance.toml).
        options["trust"] = TrustList.from_directory(config.evaluator.policies)
    limits = config.limits
    harness = Harness(
        registry,
        evaluator=evaluator,
        argument_guardrails=argument_guardrails,
        result_guardrails=result_guardrails,
        journal=journal,
        grant_store=grant_store,
        ask_store=ask_store,
        max_concurrency=limits.max_concurrency,
        max_queue=limits.max_queue,
        max_argument_bytes=limits.max_argument_bytes,
        max_session_calls=limits.max_session_calls,
        ask_timeout=config.approvals.ask_timeout,
        journal_messages=config.journal.messages,
        **options,
    )
    for close in closing:

        async def hook(close: Callable[[], None] = close) -> None:
            close()

        harness.close_hooks.append(hook)
    if config.evaluator.kind == "authzen":
        from clearance.policy.authzen import AuthZenEvaluator

        if isinstance(evaluator, AuthZenEvaluator):  # its connections close with the harness
            harness.close_hooks.append(evaluator.aclose)
    return harness


def open_store(url: str) -> tuple[GrantStore, AskStore, Callable[[], None]]:
    """The PostgreSQL grant and ask stores of ``store = "postgresql://..."``, sharing one
    pool, and the function that closes them.

    Raises:
        MissingExtraError: the ``postgres`` extra is not installed.
        ConfigError: the URL is not a PostgreSQL URL.
    """
    # Imported here: psycopg is an optional extra, and only a configured store needs it.
    from clearance.harness.ask_store_postgres import PostgresAskStore
    from clearance.harness.grants_postgres import PostgresGrantStore
    from clearance.harness.postgres import PostgresDatabase

    database = PostgresDatabase(url)
    grants = PostgresGrantStore(database)

    def close() -> None:
        grants.close()
        database.close()

    return grants, PostgresAskStore(database), close


def _postgres_stores(
    url: str,
    journal: Journal | None,
    grant_store: GrantStore | None,
    ask_store: AskStore | None,
    closing: list[Callable[[], None]],
    start_log: Path | None,
) -> tuple[Journal, GrantStore, AskStore | None]:
    """The journal, grant store and ask store of ``store = "postgresql://..."`` for those
    the caller did not give (the journal with ``[journal] start_log`` when set)."""
    if grant_store is None or ask_store is None:
        grants, asks, close = open_store(url)
        closing.append(close)
        grant_store = grant_store if grant_store is not None else grants
        ask_store = ask_store if ask_store is not None else asks
    if journal is None:
        try:
            journal = _postgres_journal(url, start_log)
        except BaseException:
            for close in closing:
                close()
            raise
    return journal, grant_store, ask_store


def _store_files(config: Config) -> tuple[Path, ...]:
    """The files no tool may touch: the journal and grant store, and the PostgreSQL
    journal's start log (its rows go into the shared journal when the host restarts: a
    tool that wrote it would forge records) with its moved-aside part."""
    files = [config.journal.path, config.grants_path]
    if config.journal.start_log is not None:
        log = config.journal.start_log
        files += [log, Path(f"{log}.old")]
    return tuple(files)


def _private_directory(path: Path) -> None:
    """Create the directory of a store file (private: it holds every call's arguments)."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the directory of {str(path)!r}: {exc.strerror}") from None


def _decisive_files(config: Config) -> tuple[Path, ...]:
    """The files and directories that decide what the agent may do: the configuration
    file, the ``clearance.toml`` the command line would load in the base directory and in
    each tool root even when there is none yet (one planted by an approved write would
    decide the next ``clearance run`` there), the policies, entities and rules it names."""
    ev = config.evaluator
    tools = config.tools
    roots = [config.base_dir]
    roots += [t.root for t in (tools.files, tools.shell, tools.git) if t is not None]
    found = [config.path, *(root / CONFIG_FILE for root in roots)]
    found += [ev.policies, ev.entities, ev.rules]
    if ev.authzen is not None:
        found.append(ev.authzen.ca_file)  # the CAs that vouch for the PDP decide too
    return tuple(Path(p) for p in found if p is not None)
