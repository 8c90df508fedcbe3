"""Decision tests: example calls and the decision a policy set must give them.

Decision tests live next to the policies, in ``*.tests.json`` files::

    {"tests": [
        {"name": "reading is free",
         "principal": "User::\\"alice\\"",
         "tool": "files.read_file",
         "arguments": {"path": "README.md"},
         "expect": "allow",
         "policies": ["read-freely"]}
    ]}

``principal`` is ``Type::"id"`` text or ``{"type", "id", "attrs", "parents"}`` (parents as
``[["Team", "infra"]]``); ``arguments`` defaults to ``{}``; ``expect`` is ``allow``,
``deny``, ``ask``, ``invalid`` (the arguments fail the tool's schema) or ``blocked`` (a
declared fact cannot be canonicalized, such as a path that leaves the workspace: the
pipeline refuses the call before any policy sees it); ``policies``, when given, must equal
the set of policies that decided
(their ``@id`` names, as in ``Verdict.reasons``). Optional ``session`` (``{"id", "turn"}``)
and ``context`` (extra application context) complete the request.

Arguments are checked against the tool's JSON Schema first and canonicalized through the
tool's declared facts, as the pipeline does (rule R11): the evaluator sees the canonical
arguments and ``context.facts``. A case whose arguments the pipeline would reject is
``invalid`` or ``blocked``; unless it expects that, it fails with the pipeline's message
rather than testing a call that can never reach the evaluator.

``run_decision_tests(directory, registry=registry)`` runs every case and returns a
:class:`DecisionReport`; ``clearance policy test DIR`` prints it.
"""

from __future__ import annotations

import inspect
import json
import os
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio

from clearance._validation import schema_problem
from clearance.errors import ConfigError
from clearance.facts.base import FactError
from clearance.facts.declared import apply_facts
from clearance.policy.base import (
    AuthorityEvaluator,
    AuthzRequest,
    Effect,
    Verdict,
    as_evaluator,
    check_verdict,
)
from clearance.types import Principal, SessionInfo, ToolCatalog, ToolLike

__all__ = [
    "TEST_GLOB",
    "CaseResult",
    "DecisionReport",
    "DecisionTest",
    "Expectation",
    "load_decision_tests",
    "run_decision_tests",
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
    """The tool's qualified name (``files.write_file``)."""
    arguments: Mapping[str, Any]
    expect: Expectation
    policies: tuple[str, ...] | None = None
    """The ``@id`` names expected as the verdict's reasons (compared as a set), if given."""
    session: SessionInfo = field(default_factory=lambda: SessionInfo("decision-test"))
    context: Mapping[str, Any] = field(default_factory=dict)
    path: str = ""
    """The file the case came from."""
    index: int = 0
    """The case's 0-based position in its file."""


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
        }


@dataclass(frozen=True, slots=True)
class DecisionReport:
    """Every case's result, in file and case order.

    (Formerly ``TestReport``; that name still imports, with a DeprecationWarning.
    A class named ``Test*`` is what pytest collects from a test module that imports it.)
    """

    results: tuple[CaseResult, ...]

    @property
    def passed(self) -> bool:
        """True when every case passed (and there was at least one)."""
        return bool(self.results) and all(r.passed for r in self.results)

    @property
    def failures(self) -> tuple[CaseResult, ...]:
        return tuple(r for r in self.results if not r.passed)

    @property
    def counts(self) -> dict[str, int]:
        failed = len(self.failures)
        return {"total": len(self.results), "passed": len(self.results) - failed, "failed": failed}

    def to_json(self) -> dict[str, Any]:
        return {**self.counts, "results": [r.to_json() for r in self.results]}

    def format(self) -> str:
        """A plain-text report: one line per case, then the totals."""
        lines = []
        for r in self.results:
            mark = "PASS" if r.passed else "FAIL"
            why = f" ({', '.join(r.reasons)})" if r.reasons else ""
            line = f"{mark}  {Path(r.test.path).name}: {r.test.name}: {r.actual}{why}"
            if r.problem:
                line += f"\n      {r.problem}"
            lines.append(line)
        c = self.counts
        lines.append(f"{c['passed']} passed, {c['failed']} failed, {c['total']} total")
        return "\n".join(lines)


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
    }  # fmt: skip
    if unknown:
        raise bad(f"unknown keys {sorted(unknown)}")
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise bad("'name' must be a non-empty string")
    tool = item.get("tool")
    if not isinstance(tool, str) or not tool:
        raise bad("'tool' must be a qualified tool name like files.read_file")
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
    return DecisionTest(
        name=name,
        principal=principal,
        tool=tool,
        arguments=dict(arguments),
        expect=expect,
        policies=tuple(policies) if policies is not None else None,
        session=session_info,
        context=dict(context),
        path=path,
        index=index,
    )


def _principal(value: Any) -> Principal:
    return Principal.from_json(value)


def run_decision_tests(
    directory: str | os.PathLike[str],
    evaluator: AuthorityEvaluator | None = None,
    registry: ToolCatalog | None = None,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> DecisionReport:
    """Run every decision test under ``directory``.

    Args:
        directory: where the ``*.tests.json`` files are (searched recursively).
        evaluator: the evaluator to test. Default: ``CedarEvaluator.from_directory(directory)``.
        registry: the tools the cases call. Needed unless ``evaluator`` is already bound to
            one; an evaluator that has a ``bind`` hook and is not bound yet is bound to it.
        progress: called as ``progress(done, total)`` after each case (for a progress bar).

    Returns:
        One result per case; ``report.passed`` tells whether all passed.

    Raises:
        ConfigError: a test file is malformed, there are no tests, or no registry is known.
        PolicyError: the default evaluator's policies do not parse or validate.
    """
    cases = load_decision_tests(directory)
    if not cases:
        raise ConfigError(f"no decision tests ({TEST_GLOB}) found", path=str(directory))
    if evaluator is None:
        # Imported here, not at the top: cedarpy loads only when the default is wanted.
        from clearance.policy.cedar import CedarEvaluator

        evaluator = CedarEvaluator.from_directory(directory)
    tools = _tools(evaluator, registry)
    results = []
    for done, case in enumerate(cases, 1):
        results.append(_run(case, evaluator, tools))
        if progress is not None:
            progress(done, len(cases))
    return DecisionReport(tuple(results))


def _tools(evaluator: AuthorityEvaluator, registry: ToolCatalog | None) -> Mapping[str, ToolLike]:
    contract = as_evaluator(evaluator)
    if registry is not None:
        if not contract.bound:
            contract.bind(registry)
        return {t.qualified_name: t for t in registry}
    bound_tools = contract.bound_tools
    if bound_tools is None or not contract.bound:
        raise ConfigError("decision tests need the tools they call: pass registry=")
    return {t.qualified_name: t for t in bound_tools}


def _run(
    case: DecisionTest, evaluator: AuthorityEvaluator, tools: Mapping[str, ToolLike]
) -> CaseResult:
    tool = tools.get(case.tool)
    if tool is None:
        return CaseResult(case, False, "error", problem=f"no registered tool {case.tool!r}")
    validator = tool.validator
    arguments = dict(case.arguments)
    if validator is not None:
        # The pipeline's own check (clearance._validation), so that a case is refused
        # exactly when a call would be.
        try:
            problem = schema_problem(validator, arguments)
        except Exception as exc:  # a validator failure is a failed case, not a crash
            problem = f"{type(exc).__name__}: {exc}"
        if problem is not None:
            return _refused(
                case,
                "invalid",
                "the arguments do not match the tool's schema (the pipeline would "
                f"reject the call before any evaluator): {problem}",
            )
    facts: dict[str, Any] = {}
    declared = tool.declared_facts
    if declared:
        try:
            arguments, facts = apply_facts(declared, arguments)
        except FactError as exc:
            return _refused(
                case,
                "blocked",
                f"the pipeline would refuse the call before any evaluator: {exc}",
            )
    request = AuthzRequest(case.principal, tool.info, arguments, case.session, case.context, facts)
    try:
        verdict = _evaluate(evaluator, request)
    except Exception as exc:  # the pipeline would deny; the report says why
        return CaseResult(
            case, False, "error", problem=f"the evaluator raised {type(exc).__name__}: {exc}"
        )
    problems = []
    if verdict.effect != case.expect:
        problems.append(f"expected {case.expect}, got {verdict.effect}")
    if case.policies is not None and set(case.policies) != set(verdict.reasons):
        want = ", ".join(case.policies) or "none"
        got = ", ".join(verdict.reasons) or "none"
        problems.append(f"expected policies [{want}], got [{got}]")
    if problems and verdict.message:
        problems.append(f"message: {verdict.message}")
    return CaseResult(
        case,
        not problems,
        verdict.effect,
        verdict.reasons,
        verdict.message,
        verdict.errors,
        "; ".join(problems) or None,
    )


def _refused(case: DecisionTest, actual: Literal["invalid", "blocked"], message: str) -> CaseResult:
    """The pipeline refuses the call before any evaluator: passed iff expected."""
    if case.expect == actual:
        return CaseResult(case, True, actual, message=message)
    return CaseResult(case, False, actual, message=message, problem=message)


def _evaluate(evaluator: AuthorityEvaluator, request: AuthzRequest) -> Verdict:
    """The verdict, outside an event loop: an async evaluator's answer is awaited in one
    started for it; :func:`~clearance.policy.base.check_verdict` checks either answer."""
    result: Any = evaluator.evaluate(request)
    if inspect.isawaitable(result):
        awaitable = result

        async def wait() -> Any:
            return await awaitable

        result = anyio.run(wait)
    return check_verdict(evaluator, result)


def __getattr__(name: str) -> object:
    # The old name of DecisionReport, kept importable for code written against 0.1. Not a
    # plain alias: a module-level ``TestReport`` would be collected by pytest from any test
    # module that imports it (the reason for the rename).
    if name == "TestReport":
        warnings.warn(
            "clearance.policy.testing.TestReport is now DecisionReport",
            DeprecationWarning,
            stacklevel=2,
        )
        return DecisionReport
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
