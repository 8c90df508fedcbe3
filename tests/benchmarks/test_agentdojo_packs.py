"""The AgentDojo packs (issue 16): they validate against the schema generated from their
suite's tools (provenance and facts included), they are exactly what ``make_packs.py``
writes from the user's own data, and no rule or trust list names an attacker's value."""

from __future__ import annotations

import json
import lzma
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks" / "agentdojo"
PACKS = ROOT / "clearance" / "packs" / "agentdojo"
SUITES = ("workspace", "travel", "banking", "slack")


def _clearance(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "clearance", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("suite", SUITES)
def test_a_pack_validates_against_its_tools_schema(suite: str, tmp_path: Path) -> None:
    done = _clearance(
        "policy",
        "validate",
        str(PACKS / suite),
        "--tools",
        str(BENCH / "data" / f"{suite}.tools.json"),
        "--json",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert result["valid"] is True and result["problems"] == []
    cedar = (PACKS / suite / f"{suite}.cedar").read_text()
    assert result["policies"] == cedar.count("@id(")
    # The schema the policies are checked against types provenance: the same pack reading
    # an attribute a provenance record does not have is refused, so the pack's are checked.
    wrong = tmp_path / "wrong"
    shutil.copytree(PACKS / suite, wrong)
    assert ".user" in cedar
    (wrong / f"{suite}.cedar").write_text(cedar.replace(".user", ".from_user"))
    done = _clearance(
        "policy",
        "validate",
        str(wrong),
        "--tools",
        str(BENCH / "data" / f"{suite}.tools.json"),
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "from_user" in done.stdout


@pytest.mark.parametrize("suite", SUITES)
def test_a_packs_decision_tests_pass_and_cover_every_policy(suite: str, tmp_path: Path) -> None:
    """``<suite>.tests.json`` beside the pack: each case carries the conversation before its
    call (a value the user named, one only a tool result named, a trusted source) and the
    policies expected to decide it; together they exercise every policy of the pack."""
    done = _clearance(
        "policy",
        "test",
        str(PACKS / suite),
        "--tools",
        str(BENCH / "data" / f"{suite}.tools.json"),
        "--coverage-threshold",
        "100",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    cases = json.loads((PACKS / suite / f"{suite}.tests.json").read_text())["tests"]
    assert f"{len(cases)} passed, 0 failed" in done.stdout
    assert {c["expect"] for c in cases} >= {"allow", "deny"}


def test_the_packs_are_what_make_packs_writes(tmp_path: Path) -> None:
    bench = tmp_path / "benchmarks" / "agentdojo"
    bench.mkdir(parents=True)
    shutil.copy(BENCH / "make_packs.py", bench)
    shutil.copytree(BENCH / "data", bench / "data")
    done = subprocess.run(
        [sys.executable, str(bench / "make_packs.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    written = tmp_path / "clearance" / "packs" / "agentdojo"
    for suite in SUITES:
        for name in (f"{suite}.cedar", "provenance.toml"):
            assert (written / suite / name).read_text() == (PACKS / suite / name).read_text()


_IDENTIFIERS = re.compile(
    r"[\w.+\-]+@[\w\-]+(?:\.[\w\-]+)+"  # addresses
    r"|\b[A-Z]{2}[0-9]{2}[A-Z0-9]{10,30}\b"  # IBAN-like ids
    r"|(?:https?://)?(?:www\.)?[\w\-]+(?:\.[\w\-]+)*\.(?:com|net|org|co|me|ly)(?:/[\w\-/]*)?",
    re.IGNORECASE,
)


def _attacker_values(suite: str) -> set[str]:
    """Identifiers (addresses, accounts, hosts) in the injection tasks' goals and calls and
    in the variants, that the user's environment and prompts never contain."""
    data = json.loads((BENCH / "data" / f"{suite}.json").read_text())
    attack_text = json.dumps(data["injection_tasks"])
    with lzma.open(BENCH / "data" / f"{suite}.variants.jsonl.xz", "rt") as handle:
        for line in handle:
            attack_text += json.dumps(json.loads(line)["arguments"])
    user_text = json.dumps(data["environment"]) + json.dumps(
        [t["prompt"] for t in data["user_tasks"]]
    )
    found = {m.group(0).lower() for m in _IDENTIFIERS.finditer(attack_text)}
    return {value for value in found if value not in user_text.lower()}


@pytest.mark.parametrize("suite", SUITES)
def test_no_pack_names_an_attacker_value(suite: str) -> None:
    values = _attacker_values(suite)
    assert values  # the check looks for something
    pack = "".join(p.read_text() for p in sorted((PACKS / suite).iterdir())).lower()
    named = sorted(value for value in values if value in pack)
    assert named == []
