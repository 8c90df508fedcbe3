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
is a commented example. The same file's ``[gateway]`` and ``[[mcp_servers]]`` are read by
:func:`load_gateway_config` (which needs the ``mcp`` extra); :func:`load_mcp_servers`
reads only the servers (the policy commands start them to learn their tools).

Where things live:

- ``_model``: the configuration as frozen dataclasses, one per table;
- ``_paths``: default places (the config file, the bundled packs, the state directory);
- ``_toml``: reading TOML so that every error names its line;
- ``_load``: the main configuration's tables; ``_gateway``: the gateway's;
- ``_guardrails`` and ``_build``: building the guardrails, the tools, the evaluator, the
  journal and the harness from a :class:`Config`.
"""

from typing import TYPE_CHECKING

from clearance import _lazy
from clearance.config._load import load_config, resolve_config
from clearance.config._model import (
    DEFAULT_SHELL_PROGRAMS,
    FILE_PATH_FIELDS,
    GUARDRAIL_KINDS,
    ApprovalsConfig,
    AuthZenConfig,
    Config,
    EvaluatorConfig,
    FilesToolsConfig,
    GitToolsConfig,
    GuardrailConfig,
    GuardrailStage,
    JournalConfig,
    LandlockConfig,
    LimitsConfig,
    NonInteractiveAnswer,
    ProcessToolsConfig,
    ShellToolsConfig,
    ToolsConfig,
)
from clearance.config._paths import (
    CONFIG_FILE,
    PACKS_DIR,
    default_journal_path,
    find_config,
    pack_path,
    state_directory,
)

if TYPE_CHECKING:
    from clearance.config._build import (
        build_confinement,
        build_evaluator,
        build_harness,
        build_journal,
        build_registry,
        open_journal,
        open_store,
    )
    from clearance.config._gateway import load_gateway_config, load_mcp_servers
    from clearance.config._guardrails import build_guardrails

__all__ = [
    "CONFIG_FILE",
    "DEFAULT_SHELL_PROGRAMS",
    "FILE_PATH_FIELDS",
    "GUARDRAIL_KINDS",
    "PACKS_DIR",
    "ApprovalsConfig",
    "AuthZenConfig",
    "Config",
    "EvaluatorConfig",
    "FilesToolsConfig",
    "GitToolsConfig",
    "GuardrailConfig",
    "GuardrailStage",
    "JournalConfig",
    "LandlockConfig",
    "LimitsConfig",
    "NonInteractiveAnswer",
    "ProcessToolsConfig",
    "ShellToolsConfig",
    "ToolsConfig",
    "build_confinement",
    "build_evaluator",
    "build_guardrails",
    "build_harness",
    "build_journal",
    "build_registry",
    "default_journal_path",
    "find_config",
    "load_config",
    "load_gateway_config",
    "load_mcp_servers",
    "open_journal",
    "open_store",
    "pack_path",
    "resolve_config",
    "state_directory",
]

# Imported when first read: building the tools, the evaluator and the harness imports most
# of clearance, which reading a configuration (``clearance asks list``) never needs.
__getattr__, __dir__ = _lazy.lazy_attributes(
    __name__,
    {
        "clearance.config._build": (
            "build_confinement",
            "build_evaluator",
            "build_harness",
            "build_journal",
            "build_registry",
            "open_journal",
            "open_store",
        ),
        "clearance.config._gateway": ("load_gateway_config", "load_mcp_servers"),
        "clearance.config._guardrails": ("build_guardrails",),
    },
)
