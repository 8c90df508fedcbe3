"""Checking a policy directory against the tools, reporting every problem of every file.

:meth:`CedarEvaluator.from_directory` stops at the first set that does not parse: Cedar
parses all the files as one text, so a syntax error in one file keeps the others from
being validated at all. :func:`check_directory` is what ``clearance policy validate`` and
``clearance gateway --check`` run: the syntax errors of the files that do not parse, and
the validation problems of the files that do (validated as they would be, against the
schema generated from the tools), in one list::

    check = check_directory("policies/coding", registry)
    for problem in check.problems:
        print(PolicyError.format_problem(problem))
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from clearance.errors import ConfigError, PolicyError
from clearance.policy.cedar._sources import ENTITIES_FILE, SCHEMA_FILE, PolicyDirectory, Sources
from clearance.policy.cedar.entities import EntitiesSource
from clearance.policy.cedar.evaluator import CedarEvaluator
from clearance.types import ToolCatalog, ToolLike

__all__ = ["PolicyCheck", "check_directory"]


@dataclass(frozen=True, slots=True)
class PolicyCheck:
    """What :func:`check_directory` found."""

    directory: Path
    policies: int
    """Policies (templates and links left out) in the files that parse."""
    problems: tuple[Mapping[str, object], ...]
    """Every problem, in ``PolicyError.problems`` form, sorted by file, line and column."""
    ungoverned: tuple[str, ...]
    """Tools no permit can match (only known when every policy loads)."""

    @property
    def valid(self) -> bool:
        """True when there is no problem."""
        return not self.problems


def check_directory(
    directory: str | os.PathLike[str],
    catalog: ToolCatalog | Iterable[ToolLike],
    *,
    entities: EntitiesSource | None = None,
    principal_types: Sequence[str] | None = None,
    namespace: str = "",
) -> PolicyCheck:
    """Parse every ``*.cedar`` file under ``directory`` and validate those that parse
    against the schema generated from ``catalog`` (see :meth:`CedarEvaluator.bind`).

    Args:
        directory: the policy directory (``schema.json`` and ``entities.json`` are read as
            :meth:`CedarEvaluator.from_directory` reads them).
        catalog: the tools the policies are for.
        entities: extra entities instead of ``entities.json``.
        principal_types: see :class:`CedarEvaluator`.
        namespace: see :class:`CedarEvaluator`.

    Raises:
        ConfigError: the directory is missing or holds no policy, its ``entities.json`` or
            ``schema.json`` is malformed, or the entities do not fit the schema.
    """
    tools = list(catalog)
    path = Path(directory)
    sources = PolicyDirectory(path, entities).read()
    problems: list[Mapping[str, object]] = []
    pairs = sources.policies

    def evaluator_of(pairs: list[tuple[str, str]]) -> CedarEvaluator:
        return CedarEvaluator(
            pairs,
            schema=sources.schema,
            entities=sources.entities,
            principal_types=principal_types,
            namespace=namespace,
        )

    try:
        evaluator = evaluator_of(pairs)
    except PolicyError as exc:
        problems.extend(exc.problems or [_whole(exc)])
        broken = {p.get("path") for p in problems}
        pairs = [(name, text) for name, text in pairs if name not in broken]
        # The files that parse are validated all the same: one typo does not hide the rest.
        try:
            evaluator = evaluator_of(pairs)
        except PolicyError:  # the error could not be pinned to a file
            return PolicyCheck(path, 0, tuple(sorted(problems, key=_where)), ())
    count = sum(1 for info in evaluator.engine.policies if info.kind != "template")
    ungoverned: tuple[str, ...] = ()
    try:
        evaluator.bind(tools)
        ungoverned = evaluator.ungoverned if not problems else ()
    except PolicyError as exc:
        problems.extend(exc.problems or [_whole(exc)])
    except ConfigError as exc:
        # Name the file the problem is in (the evaluator here was given their contents).
        raise ConfigError(exc.message, path=exc.path or _file_of(exc.message, sources)) from None
    problems.sort(key=_where)
    return PolicyCheck(path, count, tuple(problems), ungoverned)


def _file_of(message: str, sources: Sources) -> str | None:
    """The directory's ``schema.json`` or ``entities.json``, whichever ``message`` is about."""
    name = (
        SCHEMA_FILE
        if message.startswith("the schema declarations")
        else ENTITIES_FILE
        if message.startswith("the entities")
        else None
    )
    return next((n for n, _ in sources.contents or () if Path(n).name == name), None)


def _whole(exc: PolicyError) -> dict[str, object]:
    """A problem in ``problems`` form for an error that lists none."""
    return {
        "path": exc.path,
        "line": exc.line,
        "column": exc.column,
        "policy_id": exc.policy_id,
        "message": exc.message,
        "frame": None,
    }


def _where(problem: Mapping[str, object]) -> tuple[str, int, int]:
    line, column = problem.get("line"), problem.get("column")
    return (
        str(problem.get("path") or ""),
        line if isinstance(line, int) else 0,
        column if isinstance(column, int) else 0,
    )
