"""Building the harness a replay decides with: from a configuration, or from a factory.

:class:`HarnessSpec` is the recipe the command line builds (a configuration, other
policies, declared tools); being a small frozen dataclass it pickles, so each worker
process of ``replay(jobs=N)`` builds its own harness from it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clearance.config import (
    build_evaluator,
    build_guardrails,
    build_registry,
    find_config,
    resolve_config,
)
from clearance.harness.approvals import MemoryGrantStore
from clearance.harness.journal import MemoryJournal
from clearance.harness.session import Harness
from clearance.harness.tools import ToolRegistry
from clearance.policy.local import LocalEvaluator
from clearance.provenance import TrustList
from clearance.tuning._declarations import load_tool_declarations, register_tool_declarations

__all__ = ["HarnessFactory", "HarnessSpec", "as_harness"]

HarnessFactory = Callable[[], Harness]
"""A zero-argument callable that builds a fresh harness (picklable for ``jobs > 1``)."""


@dataclass(frozen=True, slots=True)
class HarnessSpec:
    """A picklable recipe for a replay harness, as the command line builds it.

    Tools come from the configuration's bundled toolsets (``--config``, else
    ``./clearance.toml``, else the built-in default: ``files`` and ``shell``) plus the
    declarations in ``tools`` (a JSON file; see :func:`load_tool_declarations`); with
    declarations and no configuration file, only the declared tools. Handlers never run.
    The evaluator is the configuration's, unless ``policies`` (a Cedar directory, or a TOML
    rules file) or ``rules`` (a TOML rules file) replaces it; the provenance trust list is
    the one beside the Cedar policies that decide (``provenance.toml``, see
    :meth:`build_trust`). The configuration's argument guardrails apply. Nothing is
    journaled.
    """

    config: str | None = None
    policies: str | None = None
    """A directory of ``.cedar`` files, or a ``.toml`` file of local rules."""
    rules: str | None = None
    """A TOML file with ``allow`` / ``ask`` / ``deny`` lists (LocalEvaluator)."""
    tools: str | None = None
    """A JSON file of tool declarations registered beside the configured toolsets."""
    evaluator: Any = None
    """An evaluator object to use instead (it must be picklable for ``jobs > 1``)."""

    def with_policies(self, policies: str) -> HarnessSpec:
        """The same tools and guardrails, deciding with other policies (a baseline)."""
        return HarnessSpec(self.config, policies, None, self.tools, None)

    def build_registry(self) -> ToolRegistry:
        """The tools: the configured toolsets plus the declared ones. With declarations
        and no configuration file at all, only the declared tools (the built-in default's
        ``files`` and ``shell`` would be noise in someone else's corpus)."""
        if self.tools is not None and self.config is None and find_config() is None:
            registry = ToolRegistry()
        else:
            registry = build_registry(resolve_config(self.config))
        if self.tools is not None:
            register_tool_declarations(registry, load_tool_declarations(self.tools))
        return registry

    def build_evaluator(self) -> Any:
        """The evaluator: ``evaluator``, else ``rules``, else ``policies``, else the
        configuration's."""
        if self.evaluator is not None:
            return self.evaluator
        if self.rules is not None:
            return LocalEvaluator.from_file(self.rules)
        if self.policies is not None:
            path = Path(self.policies)
            if path.is_file():
                return LocalEvaluator.from_file(path)
            # cedarpy loads only when Cedar is used (as in clearance.policy and config).
            from clearance.policy.cedar import CedarEvaluator

            return CedarEvaluator.from_directory(path)
        return build_evaluator(resolve_config(self.config))

    def build_trust(self) -> TrustList | None:
        """The trust list of the Cedar directory that decides: ``policies`` when it is a
        directory, else the configuration's Cedar policies (their ``provenance.toml``, or
        the default list when there is none); None (the default list) for local rules and
        a given evaluator."""
        if self.evaluator is not None or self.rules is not None:
            return None
        if self.policies is not None:
            path = Path(self.policies)
            return TrustList.from_directory(path) if path.is_dir() else None
        policies = resolve_config(self.config).evaluator.policies
        if policies is None or not Path(policies).is_dir():
            return None
        return TrustList.from_directory(policies)

    def __call__(self) -> Harness:
        config = resolve_config(self.config)
        registry = self.build_registry()
        # Without a configuration file, the built-in default's guardrails that guard none of
        # these tools (declared ones) are left out instead of warned about.
        names = [tool.qualified_name for tool in registry]
        argument_guardrails, _ = build_guardrails(config, tools=names)
        harness = Harness(
            registry,
            evaluator=self.build_evaluator(),
            argument_guardrails=argument_guardrails,
            journal=MemoryJournal(),
            grant_store=MemoryGrantStore(),
            max_argument_bytes=config.limits.max_argument_bytes,
            trust=self.build_trust(),
        )
        harness.freeze()  # bind now: a policy error surfaces before the first line
        return harness


def as_harness(value: Harness | HarnessFactory) -> Harness:
    """``value`` itself when it is a harness, else the harness it builds.

    Raises:
        TypeError: the factory built something else.
    """
    if isinstance(value, Harness):
        return value
    built = value()
    if not isinstance(built, Harness):
        raise TypeError(f"the harness factory returned {type(built).__name__}, not a Harness")
    return built
