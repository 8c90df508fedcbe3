"""``clearance policy test`` as ``opa test`` and Cerbos users expect it (issue 15), through
the real console script: ``--filter``, ``--junit``, ``--verbose``, ``--coverage`` with
``--coverage-threshold``, ``--rules``, and cases naming the model alias."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from clearance.config import pack_path

CODING = pack_path("coding")


def _case(name: str, tool: str, arguments: dict[str, Any], expect: str, **extra: Any) -> Any:
    return {
        "name": name,
        "principal": 'User::"alice"',
        "tool": tool,
        "arguments": arguments,
        "expect": expect,
        **extra,
    }


@pytest.fixture
def pack(tmp_path: Path) -> Path:
    """The coding pack with its tests, plus two cases of ours: one failing."""
    d = tmp_path / "pack"
    shutil.copytree(CODING, d)
    (d / "extra.tests.json").write_text(
        json.dumps(
            {
                "tests": [
                    _case("alias write asks", "files__write_file", {"path": "a", "content": "b"},
                          "ask", policies=["ask-before-write"]),
                    _case("writes are free?", "files__write_file", {"path": "a", "content": "b"},
                          "allow"),
                ]
            }
        )
    )  # fmt: skip
    return d


def _summary(out: str) -> tuple[int, int]:
    found = re.fullmatch(r"(\d+) passed, (\d+) failed", out.strip().splitlines()[-1])
    assert found is not None, out
    return int(found[1]), int(found[2])


def test_filter_runs_the_matching_cases(cli: Any, pack: Path) -> None:
    r = cli("policy", "test", "pack", "--filter", "^alias ")
    assert r.code == 0, r.out + r.err
    assert _summary(r.out) == (1, 0)
    # The file name selects too ("file.tests.json: name"), as the report shows cases.
    r = cli("policy", "test", "pack", "--filter", r"extra\.tests", "-v")
    assert r.code == 1 and _summary(r.out) == (1, 1)
    assert "pass  extra.tests.json: alias write asks  (ask by ask-before-write)" in r.out
    assert "coding.tests.json" not in r.out
    # A filter that matches nothing is an error, not a green run of zero tests.
    r = cli("policy", "test", "pack", "--filter", "no such case")
    assert r.code == 2 and "matches none of the" in r.err
    r = cli("policy", "test", "pack", "--filter", "(")
    assert r.code == 2 and "--filter '(' is not a regular expression" in r.err


def test_verbose_shows_the_stage_and_the_deciding_policies(cli: Any, pack: Path) -> None:
    plain = cli("policy", "test", "pack")
    assert plain.code == 1
    assert "FAIL  extra.tests.json: writes are free?" in plain.out
    assert "stage:" not in plain.out
    r = cli("policy", "test", "pack", "--verbose")
    assert r.code == 1
    block = r.out.split("FAIL  extra.tests.json: writes are free?\n", 1)[1]
    lines = block.splitlines()[:4]
    assert lines[0] == "      expected allow, got ask by ask-before-write"
    assert "      stage: evaluator (cedar)" in lines
    line = next(n for n, text in enumerate((CODING / "coding.cedar").read_text().splitlines(), 1)
                if text.startswith('@id("ask-before-write")'))  # fmt: skip
    assert f"      deciding policy: ask-before-write (pack/coding.cedar:{line})" in lines


def test_junit_report_for_ci(cli: Any, pack: Path, tmp_path: Path) -> None:
    r = cli("policy", "test", "pack", "--junit", "report.xml")
    assert r.code == 1  # the failing case fails the run; the report is written anyway
    passed, failed = _summary(r.out)
    root = ElementTree.parse(tmp_path / "report.xml").getroot()
    assert (root.get("tests"), root.get("failures")) == (str(passed + failed), "1")
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert set(suites) == {"pack/coding.tests.json", "pack/extra.tests.json"}
    cases = {c.get("name"): c for c in suites["pack/extra.tests.json"].findall("testcase")}
    assert cases["alias write asks"].find("failure") is None
    failure = cases["writes are free?"].find("failure")
    assert failure is not None and failure.text is not None
    assert "actual: ask by ask-before-write" in failure.text
    r = cli("policy", "test", "pack", "--junit", str(tmp_path / "no" / "such" / "dir.xml"))
    assert r.code == 2 and "cannot write" in r.err


def test_coverage_lists_the_policies_no_case_exercises(cli: Any, tmp_path: Path) -> None:
    d = tmp_path / "pack"
    shutil.copytree(CODING, d)
    # Keep only the cases that exercise reads and writes: the others are untested now.
    tests = json.loads((d / "coding.tests.json").read_text())["tests"]
    kept = [t for t in tests if t.get("policies") in (["read-freely"], ["ask-before-write"])]
    assert kept
    (d / "coding.tests.json").write_text(json.dumps({"tests": kept}))
    policies = re.findall(r'@id\("([^"]+)"\)', (d / "coding.cedar").read_text())
    r = cli("policy", "test", "pack", "--coverage")
    assert r.code == 0, r.out + r.err
    assert f"coverage: 2/{len(policies)} policies exercised" in r.out
    untested = re.findall(r"  not exercised: (\S+) \(pack/coding\.cedar:\d+\)", r.out)
    assert sorted(untested) == sorted(set(policies) - {"read-freely", "ask-before-write"})
    percent = 100 * 2 / len(policies)
    below = cli("policy", "test", "pack", "--coverage-threshold", f"{percent + 1:.0f}")
    assert below.code == 1
    assert "is below the threshold" in below.err
    at = cli("policy", "test", "pack", "--coverage-threshold", f"{percent - 1:.0f}")
    assert at.code == 0, at.out + at.err
    js = cli("policy", "test", "pack", "--coverage", "--json")
    doc = json.loads(js.out)
    assert doc["coverage"]["exercised"] == 2
    assert {u["policy"] for u in doc["coverage"]["unexercised"]} == set(untested)
    # The starter pack's own tests exercise every policy.
    full = cli("policy", "test", str(CODING), "--coverage-threshold", "100")
    assert full.code == 0, full.out + full.err
    assert f"coverage: {len(policies)}/{len(policies)} policies exercised (100.0%)" in full.out
    # The help says "N%", not click's unformatted "N%%".
    helped = cli("policy", "test", "--help")
    assert "less than N% of" in " ".join(helped.out.split()) and "%%" not in helped.out


def test_coverage_of_local_rules(cli: Any, tmp_path: Path) -> None:
    d = tmp_path / "cases"
    d.mkdir()
    (d / "rules.tests.json").write_text(
        json.dumps(
            {
                "tests": [
                    _case("read", "files.read_file", {"path": "a.txt"}, "allow"),
                    _case("write", "files__write_file", {"path": "a", "content": "b"}, "ask",
                          policies=["ask:files.write_file"]),
                ]
            }
        )
    )  # fmt: skip
    (tmp_path / "rules.toml").write_text(
        'allow = ["files.read_file", "files.list_dir"]\n'
        'ask = ["files.write_file"]\n'
        'deny = ["shell.run(command=rm *)"]\n'
    )
    r = cli("policy", "test", "cases", "--rules", "rules.toml", "--coverage-threshold", "60")
    assert r.code == 1, r.out + r.err
    assert _summary(r.out) == (2, 0)
    assert "coverage: 2/4 policies exercised (50.0%)" in r.out
    assert "  not exercised: allow:files.list_dir (rules.toml:1)" in r.out
    assert "  not exercised: deny:shell.run(command=rm *) (rules.toml:3)" in r.out
    r = cli("policy", "test", "cases", "--rules", "missing.toml")
    assert r.code == 2 and "missing.toml: no such file" in r.err
