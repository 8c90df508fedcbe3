"""Why an adapter's framework does not import: not installed, or installed and unusable.

An adapter imports its framework first thing. A framework that is not there (a
``ModuleNotFoundError`` naming one of its own packages) is the missing optional extra:
:class:`~clearance.errors.MissingExtraError`, whose message ends in the command that
installs it. Any other import failure (a name the installed version lacks, a dependency of
the framework missing or broken) is not reported as "not installed": it is an
``ImportError`` that names the installed versions and what failed, so that a user who has
the framework is not told to install it again.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import metadata

from clearance.errors import MissingExtraError

__all__ = ["FRAMEWORKS", "framework_import_error"]

FRAMEWORKS: Mapping[str, tuple[str, Mapping[str, str]]] = {
    "claude-agent-sdk": (
        "The Claude Agent SDK adapter (clearance.integrations.claude_agent_sdk)",
        {"claude_agent_sdk": "claude-agent-sdk"},
    ),
    "langgraph": (
        "The LangGraph adapter (clearance.integrations.langgraph)",
        {
            "langgraph": "langgraph",
            "langchain_core": "langchain-core",
            "langgraph.prebuilt": "langgraph-prebuilt",
        },
    ),
    "openai-agents": (
        "The OpenAI Agents SDK adapter (clearance.integrations.openai_agents)",
        {"agents": "openai-agents"},
    ),
    "pydantic-ai": (
        "The PydanticAI adapter (clearance.integrations.pydantic_ai)",
        {"pydantic_ai": "pydantic-ai-slim"},
    ),
}
"""By extra: what the adapter is called in messages, and its framework's import names ->
their distributions."""


def framework_import_error(
    exc: ImportError, extra: str, *, feature: str | None = None
) -> ImportError:
    """The error to raise for ``exc``, raised while an adapter imported its framework.

    Args:
        exc: what the import raised.
        extra: the optional extra that installs the framework (a key of
            :data:`FRAMEWORKS`).
        feature: what needs it, as messages name it (default: the adapter).
    """
    named, packages = FRAMEWORKS[extra]
    feature = feature or named
    missing = exc.name if isinstance(exc, ModuleNotFoundError) else None
    if missing is not None and missing.partition(".")[0] in packages:
        return MissingExtraError(extra, feature)
    installed = []
    for dist in dict.fromkeys(packages.values()):
        try:
            installed.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            installed.append(f"{dist} (not installed)")
    return ImportError(
        f"{feature} cannot use the installed {', '.join(installed)}: {exc}. The framework "
        f"is there but does not import as the adapter needs it; install a version the "
        f"'{extra}' extra supports: pip install -U 'clearance[{extra}]'"
    )
