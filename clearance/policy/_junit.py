"""Decision test results as JUnit XML, the report format CI systems read.

One ``<testsuite>`` per ``*.tests.json`` file, one ``<testcase>`` per case; a case that
got another decision than expected has a ``<failure>``, one that could not be decided (an
unknown tool, an evaluator that raised) an ``<error>``. Everything a case carries (names,
arguments quoted in messages, policy ids) is written with its control characters escaped
(:func:`clearance._text.printable`): XML 1.0 cannot hold most of them, and a report that
does not parse is worse than none.
"""

from __future__ import annotations

from collections.abc import Sequence
from xml.etree import ElementTree

from clearance._text import printable
from clearance.policy._decision_cases import CaseResult

__all__ = ["junit_xml"]


def junit_xml(results: Sequence[CaseResult], *, name: str = "clearance policy test") -> str:
    """The results as a JUnit XML document (UTF-8 text with an XML declaration)."""
    suites: dict[str, list[CaseResult]] = {}
    for result in results:
        suites.setdefault(result.test.path, []).append(result)
    root = ElementTree.Element("testsuites", name=printable(name))
    _counts(root, results)
    for path, cases in suites.items():
        suite = ElementTree.SubElement(root, "testsuite", name=printable(path))
        _counts(suite, cases)
        for result in cases:
            _case(suite, result)
    ElementTree.indent(root)
    body = ElementTree.tostring(root, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"


def _counts(element: ElementTree.Element, results: Sequence[CaseResult]) -> None:
    errors = sum(1 for r in results if not r.passed and r.actual == "error")
    failures = sum(1 for r in results if not r.passed) - errors
    element.set("tests", str(len(results)))
    element.set("failures", str(failures))
    element.set("errors", str(errors))
    element.set("skipped", "0")
    element.set("time", f"{sum(r.seconds for r in results):.6f}")


def _case(suite: ElementTree.Element, result: CaseResult) -> None:
    case = ElementTree.SubElement(
        suite,
        "testcase",
        name=printable(result.test.name),
        classname=printable(result.test.path),
        time=f"{result.seconds:.6f}",
    )
    if result.passed:
        return
    kind = "error" if result.actual == "error" else "failure"
    problem = printable(result.problem or "failed")
    detail = ElementTree.SubElement(case, kind, message=problem, type=str(result.actual))
    detail.text = "\n".join(printable(line) for line in _details(result))


def _details(result: CaseResult) -> list[str]:
    """What a person needs to see of a failed case, one line each."""
    test = result.test
    expected: str = test.expect
    if test.policies is not None:
        expected += " by " + (", ".join(test.policies) or "no policy")
    lines = [
        f"tool: {test.tool}",
        f"principal: {test.principal}",
        f"expected: {expected}",
        f"actual: {result.actual}" + (f" by {', '.join(result.reasons)}" if result.reasons else ""),
    ]
    if result.stage:
        lines.append(f"stage: {result.stage}")
    if result.message:
        lines.append(f"message: {result.message}")
    lines.extend(f"error: {error}" for error in result.errors)
    if result.problem:
        lines.append(f"problem: {result.problem}")
    return lines
