"""Decision tests: the ``*.tests.json`` files, the cases they hold, and what a run of one
case gave (:class:`CaseResult`, which the JUnit report reads too).

The format is described in :mod:`clearance.policy.testing`, which runs the cases.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from clearance.errors import ConfigError
from clearance.policy.base import Effect
from clearance.provenance import Provenance
from clearance.types import Principal, SessionInfo

__all__ = [
    "TEST_GLOB",
    "CaseResult",
    "DecisionTest",
    "Expectation",
    "Stage",
    "load_decision_tests",
]

TEST_GLOB = "*.tests.json"
"""The files decision tests live in (searched recursively)."""
_EFFECTS = ("allow", "deny", "ask", "invalid", "blocked")
Expectation = Literal["allow", "deny", "ask", "invalid", "blocked"]


@dataclass(frozen=True, slots=True)
class DecisionTest:
    """One case from a ``*.tests.json`` file."""

    name: str
    principal: Principal
    tool: str
    """The tool as the case names it: its qualified name (``files.write_file``) or its
    model alias (``files__write_file``)."""
    arguments: Mapping[str, Any]
    expect: Expectation
    policies: tuple[str, ...] | None = None
    """The ``@id`` names expected as the verdict's reasons (compared as a set), if given."""
    session: SessionInfo = field(default_factory=lambda: SessionInfo("decision-test"))
    context: Mapping[str, Any] = field(default_factory=dict)
    conversation: tuple[Mapping[str, Any], ...] = ()
    """The messages and tool results before the call (the replay corpus's shape), which
    its ``context.provenance`` is read from; none: every value made up."""
    facts: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Per argument naming something of a session (a process id: a
    :class:`~clearance.facts.base.SessionFact`), the fact record the case supposes it has
    (``{"id": {"command": "npm run dev", "program": "npm"}}``): no session holds it."""
    path: str = ""
    """The file the case came from."""
    index: int = 0
    """The case's 0-based position in its file."""

    @property
    def label(self) -> str:
        """``<file name>: <case name>``, as reports show the case."""
        return f"{Path(self.path).name}: {self.name}"


def load_decision_tests(directory: str | os.PathLike[str]) -> list[DecisionTest]:
    """Read every ``*.tests.json`` under ``directory`` (sorted by path).

    Raises:
        ConfigError: a file is not JSON or a case is malformed (``.path``, ``.line``).
    """
    root = Path(directory)
    if not root.is_dir():
        raise ConfigError("the policy directory does not exist", path=str(root))
    cases: list[DecisionTest] = []
    for path in sorted(root.rglob(TEST_GLOB)):
        cases.extend(_load_file(path))
    return cases


def _load_file(path: Path) -> list[DecisionTest]:
    where = str(path)
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
    except OSError as exc:
        raise ConfigError(f"cannot read decision tests: {exc.strerror}", path=where) from None
    except UnicodeDecodeError:
        raise ConfigError("decision tests are not UTF-8 text", path=where) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"decision tests are not JSON: {exc.msg}", path=where, line=exc.lineno
        ) from None
    if not isinstance(data, Mapping) or not isinstance(data.get("tests"), list):
        raise ConfigError('decision tests must be {"tests": [...]}', path=where)
    return [_case(item, where, i) for i, item in enumerate(data["tests"])]


def _case(item: Any, path: str, index: int) -> DecisionTest:
    def bad(message: str) -> ConfigError:
        name = item.get("name") if isinstance(item, Mapping) else None
        label = f"test {name!r}" if isinstance(name, str) else f"test #{index + 1}"
        return ConfigError(f"{label}: {message}", path=path)

    if not isinstance(item, Mapping):
        raise bad("each test must be an object")
    unknown = set(item) - {
        "name", "principal", "tool", "arguments", "expect", "policies", "session", "context",
        "conversation", "facts",
    }  # fmt: skip
    if unknown:
        raise bad(f"unknown keys {sorted(unknown)}")
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise bad("'name' must be a non-empty string")
    tool = item.get("tool")
    if not isinstance(tool, str) or not tool:
        raise bad("'tool' must be a tool name like files.read_file (or its alias files__read_file)")
    expect = item.get("expect")
    if expect not in _EFFECTS:
        raise bad("'expect' must be allow, deny, ask, invalid or blocked")
    arguments = item.get("arguments", {})
    if not isinstance(arguments, Mapping):
        raise bad("'arguments' must be an object")
    policies = item.get("policies")
    if policies is not None and (
        not isinstance(policies, list) or not all(isinstance(p, str) for p in policies)
    ):
        raise bad("'policies' must be a list of policy ids")
    context = item.get("context", {})
    if not isinstance(context, Mapping):
        raise bad("'context' must be an object")
    facts = item.get("facts", {})
    if not isinstance(facts, Mapping) or not all(isinstance(f, Mapping) for f in facts.values()):
        raise bad("'facts' must be an object of fact records by argument name")
    session = item.get("session")
    if session is None:
        session_info = SessionInfo("decision-test")
    elif isinstance(session, Mapping) and isinstance(session.get("id"), str):
        turn = session.get("turn")
        if turn is not None and not isinstance(turn, str):
            raise bad("'session.turn' must be a string")
        session_info = SessionInfo(session["id"], turn)
    else:
        raise bad('\'session\' must be {"id": ..., "turn": ...}')
    try:
        principal = _principal(item.get("principal"))
    except ValueError as exc:
        raise bad(str(exc)) from None
    conversation = item.get("conversation", [])
    if not isinstance(conversation, list):
        raise bad("'conversation' must be a list of messages and tool results")
    try:
        Provenance.from_conversation(conversation)  # checked here, read when run
    except ValueError as exc:
        raise bad(str(exc)) from None
    return DecisionTest(
        name=name,
        principal=principal,
        tool=tool,
        arguments=dict(arguments),
        expect=expect,
        policies=tuple(policies) if policies is not None else None,
        session=session_info,
        context=dict(context),
        conversation=tuple(conversation),
        facts={name: dict(record) for name, record in facts.items()},
        path=path,
        index=index,
    )


def _principal(value: Any) -> Principal:
    return Principal.from_json(value)


Stage = Literal["resolve", "schema", "facts", "evaluator"]
"""Where a case was decided, named as the pipeline names its stages: ``resolve`` (no such
tool), ``schema`` (the arguments fail the tool's schema), ``facts`` (a declared fact cannot
be canonicalized), ``evaluator``."""


@dataclass(frozen=True, slots=True)
class CaseResult:
    """What happened to one case."""

    test: DecisionTest
    passed: bool
    actual: Effect | Literal["invalid", "blocked", "error"]
    """The decision the evaluator gave; ``"invalid"`` or ``"blocked"`` when the pipeline
    refuses the arguments first; ``"error"`` when the case could not be evaluated."""
    reasons: tuple[str, ...] = ()
    message: str | None = None
    """The verdict's message (the ``@ask`` reason, why it was denied)."""
    errors: tuple[str, ...] = ()
    problem: str | None = None
    """Why the case failed, in one sentence; ``None`` when it passed."""
    stage: Stage | None = None
    """The stage that decided the case (``None``: it could not be decided)."""
    evaluator: str | None = None
    """The name of the evaluator that decided it (``Verdict.evaluator``), at that stage."""
    seconds: float = 0.0
    """How long the case took to decide."""

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.test.name,
            "path": self.test.path,
            "index": self.test.index,
            "tool": self.test.tool,
            "principal": str(self.test.principal),
            "expect": self.test.expect,
            "expect_policies": list(self.test.policies) if self.test.policies is not None else None,
            "actual": self.actual,
            "reasons": list(self.reasons),
            "message": self.message,
            "errors": list(self.errors),
            "passed": self.passed,
            "problem": self.problem,
            "stage": self.stage,
            "evaluator": self.evaluator,
            "seconds": round(self.seconds, 6),
        }
