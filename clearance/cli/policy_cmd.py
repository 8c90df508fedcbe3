"""``clearance policy``: write, check and understand Cedar policies for your tools.

The group and what its verbs share; each verb is its own module (``policy_schema_cmd``,
``policy_validate_cmd``, ``policy_format_cmd``, ``policy_test_cmd``,
``policy_explain_cmd``, ``policy_analyze_cmd``). The Cedar schema is generated from the tools, so every verb that
needs one builds the registry from the configuration (``--config``, ./clearance.toml, or the
built-in default: the bundled ``files`` and ``shell`` tools), starting its
``[[mcp_servers]]`` to list their tools, or reads it from ``--tools FILE`` (see
:mod:`clearance.cli._tools`). Exit codes: 0 ok, 1 a check
failed (policies do not validate, a decision test fails, files need formatting), 2 bad
usage or input.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from clearance.cli.main import cli, fail
from clearance.harness.tools import ToolRegistry

__all__ = ["bind_quietly", "policy", "policy_directory", "quiet_cedar_log"]


@cli.group("policy")
def policy() -> None:
    """Write, check and understand Cedar policies for your tools.

    \b
      clearance policy schema             the Cedar schema generated from the tools
      clearance policy validate DIR       check policies against that schema
      clearance policy analyze DIR        prove which policies can never apply or are
                                          shadowed; --against OLD: what DIR changes
      clearance policy format DIR         format .cedar files (--check: only report)
      clearance policy test DIR           run the *.tests.json decision tests
      clearance policy explain --tool T   decide one call and say why
    """


def policy_directory(value: str) -> Path:
    """``value`` as a directory, or exit 2 saying it is missing or not one."""
    path = Path(value)
    if not path.is_dir():
        fail(f"{value}: not a directory" if path.exists() else f"{value}: no such directory")
    return path


@contextmanager
def quiet_cedar_log() -> Iterator[None]:
    """Without the "no policy can permit ..." warning: a command that reports the
    ungoverned tools itself (or expects them, with no policies) says it once, its way."""
    logger = logging.getLogger("clearance.policy.cedar")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def bind_quietly(evaluator: Any, registry: ToolRegistry) -> None:
    """Bind without the "no policy can permit ..." warning (expected with no policies)."""
    with quiet_cedar_log():
        evaluator.bind(registry)
