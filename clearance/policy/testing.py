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
``[["Team", "infra"]]``); ``tool`` is the qualified name (``files.read_file``) or the model
alias (``files__read_file``), as ``call_tool`` accepts; ``arguments`` defaults to ``{}``;
``expect`` is ``allow``, ``deny``, ``ask``, ``invalid`` (the arguments fail the tool's
schema) or ``blocked`` (a declared fact cannot be canonicalized, such as a path that leaves
the workspace: the pipeline refuses the call before any policy sees it); ``policies``, when
given, must equal the set of policies that decided (their ``@id`` names, as in
``Verdict.reasons``). Optional ``session`` (``{"id", "turn"}``) and ``context`` (extra
application context) complete the request, and ``conversation`` (the messages and tool
results before the call, as a replay corpus line carries them:
``[{"role": "user", "content": "..."}, {"role": "tool", "tool": "...", "call_id": "...",
"content": ...}]``) is what ``context.provenance`` is read from, under the trust list beside
the tests (``provenance.toml``); without one every value is made up. An argument naming
something a session holds (a process id) has no fact outside a session: ``facts`` gives the
record the case supposes (``{"id": {"command": "npm run dev", "program": "npm"}}``), with
exactly the kind's attributes. The files are read by :mod:`clearance.policy._decision_cases`.

Arguments are checked against the tool's JSON Schema first and canonicalized through the
tool's declared facts, as the pipeline does (rule R11): the evaluator sees the canonical
arguments and ``context.facts``. A case whose arguments the pipeline would reject is
``invalid`` or ``blocked``; unless it expects that, it fails with the pipeline's message
rather than testing a call that can never reach the evaluator.

``run_decision_tests(directory, registry=registry)`` runs every case (or those ``select``
keeps) and returns a :class:`DecisionReport`: each case's result with the stage that decided
it, the evaluator's policies and which of them no case exercises
(:meth:`DecisionReport.coverage`), and the whole as JSON or JUnit XML
(:meth:`DecisionReport.to_junit_xml`). ``clearance policy test DIR`` prints it.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio

from clearance._validation import schema_problem
from clearance.errors import ConfigError
from clearance.facts.base import Canonical, FactError, FactKind, SessionFact
from clearance.facts.declared import DeclaredFact, apply_facts
from clearance.policy._coverage import PolicyCoverage, policy_coverage, policy_locations
from clearance.policy._decision_cases import (
    TEST_GLOB,
    CaseResult,
    DecisionTest,
    Expectation,
    Stage,
    load_decision_tests,
)
from clearance.policy._junit import junit_xml
from clearance.policy.base import (
    AuthorityEvaluator,
    AuthzRequest,
    Verdict,
    as_evaluator,
    check_verdict,
)
from clearance.provenance import Provenance, TrustList
from clearance.types import ToolCatalog, ToolLike

__all__ = [
    "TEST_GLOB",
    "CaseResult",
    "DecisionReport",
    "DecisionTest",
    "Expectation",
    "PolicyCoverage",
    "Stage",
    "load_decision_tests",
    "run_decision_tests",
]


@dataclass(frozen=True, slots=True)
class DecisionReport:
    """Every case's result, in file and case order.

    (Formerly ``TestReport``; that name still imports, with a DeprecationWarning.
    A class named ``Test*`` is what pytest collects from a test module that imports it.)
    """

    results: tuple[CaseResult, ...]
    policies: tuple[str, ...] | None = None
    """Every policy or rule id the evaluator holds (``None``: it cannot say)."""
    locations: Mapping[str, str] = field(default_factory=dict)
    """Policy id → ``file:line`` where it is written, when the evaluator knows."""

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

    def coverage(self) -> PolicyCoverage | None:
        """Which policies the cases exercise (are among the deciding policies of at least
        one case) and which none does; ``None`` when the evaluator cannot list its
        policies."""
        if self.policies is None:
            return None
        return policy_coverage(self.policies, (r.reasons for r in self.results), self.locations)

    def to_json(self) -> dict[str, Any]:
        coverage = self.coverage()
        return {
            **self.counts,
            "results": [r.to_json() for r in self.results],
            "coverage": coverage.to_json() if coverage is not None else None,
        }

    def to_junit_xml(self) -> str:
        """The results as JUnit XML (one test suite per file), for CI systems."""
        return junit_xml(self.results)

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


def run_decision_tests(
    directory: str | os.PathLike[str],
    evaluator: AuthorityEvaluator | None = None,
    registry: ToolCatalog | None = None,
    *,
    progress: Callable[[int, int], None] | None = None,
    select: Callable[[DecisionTest], bool] | None = None,
) -> DecisionReport:
    """Run every decision test under ``directory``.

    Args:
        directory: where the ``*.tests.json`` files are (searched recursively).
        evaluator: the evaluator to test. Default: ``CedarEvaluator.from_directory(directory)``.
        registry: the tools the cases call. Needed unless ``evaluator`` is already bound to
            one; an evaluator that has a ``bind`` hook and is not bound yet is bound to it.
        progress: called as ``progress(done, total)`` after each case (for a progress bar).
        select: run only the cases for which it returns true (``clearance policy test
            --filter``); the report's coverage then counts only those.

    Returns:
        One result per case; ``report.passed`` tells whether all passed.

    Raises:
        ConfigError: a test file is malformed, there are no tests (or none selected), or
            no registry is known.
        PolicyError: the default evaluator's policies do not parse or validate.
    """
    cases = load_decision_tests(directory)
    if not cases:
        raise ConfigError(f"no decision tests ({TEST_GLOB}) found", path=str(directory))
    if select is not None:
        cases = [case for case in cases if select(case)]
        if not cases:
            raise ConfigError("no decision test is selected", path=str(directory))
    if evaluator is None:
        # Imported here, not at the top: cedarpy loads only when the default is wanted.
        from clearance.policy.cedar import CedarEvaluator

        evaluator = CedarEvaluator.from_directory(directory)
    tools = _tools(evaluator, registry)
    trust = TrustList.from_directory(directory)
    results = []
    for done, case in enumerate(cases, 1):
        start = time.perf_counter()
        result = _run(case, evaluator, tools, trust)
        results.append(dataclasses.replace(result, seconds=time.perf_counter() - start))
        if progress is not None:
            progress(done, len(cases))
    return DecisionReport(
        tuple(results), as_evaluator(evaluator).policy_ids(), policy_locations(evaluator)
    )


def _tools(evaluator: AuthorityEvaluator, registry: ToolCatalog | None) -> Mapping[str, ToolLike]:
    """The tools by qualified name and by model alias (the two never collide: a qualified
    name has a dot, an alias none)."""
    contract = as_evaluator(evaluator)
    if registry is not None:
        if not contract.bound:
            contract.bind(registry)
        listed: Iterable[ToolLike] = registry
    else:
        bound_tools = contract.bound_tools
        if bound_tools is None or not contract.bound:
            raise ConfigError("decision tests need the tools they call: pass registry=")
        listed = bound_tools
    tools: dict[str, ToolLike] = {}
    for t in listed:
        tools[t.qualified_name] = t
        tools[t.model_alias] = t
    return tools


def _run(
    case: DecisionTest,
    evaluator: AuthorityEvaluator,
    tools: Mapping[str, ToolLike],
    trust: TrustList | None = None,
) -> CaseResult:
    tool = tools.get(case.tool)
    if tool is None:
        return CaseResult(
            case, False, "error", problem=f"no registered tool {case.tool!r}", stage="resolve"
        )
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
                "schema",
            )
    facts: dict[str, Any] = {}
    declared = tool.declared_facts
    if declared:
        supposed = _supposed(declared, case.facts)
        if isinstance(supposed, str):
            return CaseResult(case, False, "error", problem=supposed, stage="facts")
        try:
            arguments, facts = apply_facts(supposed, arguments)
        except FactError as exc:
            return _refused(
                case,
                "blocked",
                f"the pipeline would refuse the call before any evaluator: {exc}",
                "facts",
            )
    provenance: Mapping[str, Any] = {}
    if case.conversation:
        ledger = Provenance.from_conversation(case.conversation, trust=trust)
        provenance = dict(ledger.describe(arguments))
    request = AuthzRequest(
        case.principal, tool.info, arguments, case.session, case.context, facts, provenance
    )
    try:
        verdict = _evaluate(evaluator, request)
    except Exception as exc:  # the pipeline would deny; the report says why
        return CaseResult(
            case,
            False,
            "error",
            problem=f"the evaluator raised {type(exc).__name__}: {exc}",
            stage="evaluator",
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
        "evaluator",
        verdict.evaluator,
    )


class _Supposed:
    """A session fact as a decision test supposes it: the value kept, the case's record."""

    def __init__(self, kind: FactKind, record: Mapping[str, Any]) -> None:
        self.name, self.attributes, self.json_types = kind.name, kind.attributes, kind.json_types
        self._record = dict(record)

    def canonicalize(self, value: Any) -> Canonical:
        return Canonical(value, self._record)


def _supposed(
    declared: Iterable[DeclaredFact], given: Mapping[str, Mapping[str, Any]]
) -> list[DeclaredFact] | str:
    """The declared facts with each session fact the case gives a record for read from
    it; why the case is wrong when a record does not have exactly the kind's attributes or
    names an argument without a session fact. A session fact without a record is left as
    it is: it refuses, as outside a session it always does."""
    result = []
    for fact in declared:
        record = given.get(fact.field)
        if record is not None and isinstance(fact.kind, SessionFact):
            if set(record) != set(fact.kind.attributes):
                want = ", ".join(sorted(fact.kind.attributes))
                return f"the case's facts for {fact.field!r} must have exactly: {want}"
            fact = dataclasses.replace(fact, kind=_Supposed(fact.kind, record))
        result.append(fact)
    kinds = {f.field for f in declared if isinstance(f.kind, SessionFact)}
    stray = sorted(set(given) - kinds)
    if stray:
        return f"the case gives facts for {', '.join(stray)}, which name nothing of a session"
    return result


def _refused(
    case: DecisionTest, actual: Literal["invalid", "blocked"], message: str, stage: Stage
) -> CaseResult:
    """The pipeline refuses the call before any evaluator: passed iff expected."""
    if case.expect == actual:
        return CaseResult(case, True, actual, message=message, stage=stage)
    return CaseResult(case, False, actual, message=message, problem=message, stage=stage)


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
