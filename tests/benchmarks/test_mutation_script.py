"""``benchmarks/mutation.py`` (issue 20): mutation testing of the deciding set.

The script runs as a real subprocess, with real mutmut, on a dozen mutants of
``clearance/facts/numbers.py`` and two tests that check only part of it: the mutants those
tests catch are counted killed, the others survive with their diffs, and one listed in
``docs/mutation.md`` as equivalent is counted apart. A few seconds."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

# mutmut comes with the dev extra (`pip install -e '.[dev]'`, as CI installs), not with test.
pytest.importorskip("mutmut", reason="needs mutmut: pip install -e '.[dev]'")

ROOT = Path(__file__).resolve().parents[2]
NUMBERS = "clearance.facts.numbers"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "mutation_script", ROOT / "benchmarks" / "mutation.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_a_run_counts_killed_survived_and_equivalent_mutants(tmp_path: Path) -> None:
    weak_tests = [
        "tests/facts/test_numbers.py::test_a_fraction_stays_a_float_and_a_whole_number_becomes_an_int",
        "tests/facts/test_numbers.py::test_a_fraction_decimal_can_hold_is_its_shortest_spelling",
    ]
    run = subprocess.run(
        [
            sys.executable,
            "benchmarks/mutation.py",
            "clearance/facts/numbers.py",
            "--tests",
            *weak_tests,
            "--only",
            f"{NUMBERS}.x_canonical_number__mutmut_*",
            f"{NUMBERS}.xǁNumberFactǁcanonicalize__mutmut_4",
            "--work",
            str(tmp_path / "work"),
            "--json",
            str(tmp_path / "figures.json"),
            "--survivors",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 1, run.stdout + run.stderr  # survivors that are not listed
    [figures] = json.loads((tmp_path / "figures.json").read_text())
    assert figures["module"] == "clearance/facts/numbers.py"
    assert figures["mutants"] == 13
    # float(value) -> float(None) breaks every fraction: the tests see it.
    assert figures["killed"] >= 1
    assert f"{NUMBERS}.x_canonical_number__mutmut_12" not in figures["survived"]
    # The refusal of a string goes unchecked by these two tests: its message can change.
    refusal = f"{NUMBERS}.x_canonical_number__mutmut_3"
    assert refusal in figures["survived"]
    assert "+        raise FactError(None)" in figures["diffs"][refusal]
    assert f"# {refusal}: survived" in run.stdout
    assert figures["equivalent"] == [f"{NUMBERS}.xǁNumberFactǁcanonicalize__mutmut_4"]
    assert figures["killed"] + figures["timeout"] + len(figures["survived"]) == 12
    assert figures["score"] == round(100 * figures["killed"] / 12, 1)
    assert "clearance/facts/numbers.py" in run.stdout.splitlines()[-1]
    # Everything happened in the work directory, nothing in the checkout.
    assert (tmp_path / "work" / "clearance_facts_numbers" / "mutants").is_dir()
    assert not (ROOT / "mutants").exists()


@pytest.mark.timeout(900)  # two runs of mutmut, on a machine others share
def test_a_resumed_run_tests_again_only_the_mutants_left_and_adds_the_killed(
    tmp_path: Path,
) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "benchmarks/mutation.py", "clearance/facts/numbers.py", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=400,
            check=False,
        )

    weak = "tests/facts/test_numbers.py::test_a_fraction_stays_a_float_and_a_whole_number_becomes_an_int"
    first = run(
        "--tests",
        weak,
        "--only",
        f"{NUMBERS}.x_canonical_number__mutmut_*",
        "--work",
        str(tmp_path / "first"),
        "--json",
        str(tmp_path / "first.json"),
    )
    [before] = json.loads((tmp_path / "first.json").read_text())
    assert before["survived"], first.stdout + first.stderr
    second = run(
        "--tests",
        "tests/facts/test_numbers.py",
        "--resume",
        str(tmp_path / "first.json"),
        "--work",
        str(tmp_path / "second"),
        "--json",
        str(tmp_path / "second.json"),
    )
    [after] = json.loads((tmp_path / "second.json").read_text())
    assert after["mutants"] == before["mutants"] == 12, second.stdout + second.stderr
    assert after["killed"] > before["killed"]
    assert set(after["survived"]) < set(before["survived"])
    assert after["source_sha256"] == before["source_sha256"]
    # Only the survivors were tested again.
    meta = json.loads(
        (
            tmp_path / "second/clearance_facts_numbers/mutants/clearance/facts/numbers.py.meta"
        ).read_text()
    )
    tested = {name for name, code in meta["exit_code_by_key"].items() if code is not None}
    assert tested == set(before["survived"])
    # A run of another version of the module is not resumed.
    changed = json.loads((tmp_path / "first.json").read_text())
    changed[0]["source_sha256"] = "0" * 64
    (tmp_path / "changed.json").write_text(json.dumps(changed))
    refused = run("--resume", str(tmp_path / "changed.json"), "--work", str(tmp_path / "third"))
    assert refused.returncode != 0
    assert "changed since the run being resumed" in refused.stderr


def test_mutants_mutmut_stopped_before_are_counted_not_checked(tmp_path: Path) -> None:
    # No test of the export list calls the number fact: mutmut stops after making the
    # mutants, and leaves them untested in its meta file.
    run = subprocess.run(
        [
            sys.executable,
            "benchmarks/mutation.py",
            "clearance/facts/numbers.py",
            "--tests",
            "tests/test_exports.py",
            "--only",
            f"{NUMBERS}.x_canonical_number__mutmut_*",
            "--work",
            str(tmp_path / "work"),
            "--json",
            str(tmp_path / "figures.json"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "counted 'not checked'" in run.stderr
    [figures] = json.loads((tmp_path / "figures.json").read_text())
    assert figures["mutants"] == 12
    assert len(figures["not_checked"]) == 12
    assert figures["killed"] == figures["timeout"] == 0
    assert figures["survived"] == figures["no_tests"] == []
    assert figures["score"] == 0.0


def test_equivalents_are_read_from_their_headings_diffs_and_reasons() -> None:
    text = """# Title

## Equivalent mutants

### `clearance/x.py` `Thing.check`
```diff
-    if a > b:
+    if a >= b:
```
Never equal: a is odd and b even.
More reason.

### `clearance/y.py` `helper`
```diff
-    return 1
+    return 2
```
Nobody reads it.

### `clearance/z.py` `Cache.get`
```diff
-    if len(cache) < 10:
+    if len(cache) <= 10:
```

```diff
-    value = cache.get(key)
+    value = None
```
A cache: what it holds changes no answer.
"""
    first, second, third, fourth = _script().parse_equivalents(text)
    assert (first.module, first.function) == ("clearance/x.py", "Thing.check")
    assert first.change == ("-if a > b:", "+if a >= b:")
    assert first.reason == "Never equal: a is odd and b even. More reason."
    assert (second.module, second.function, second.change) == (
        "clearance/y.py",
        "helper",
        ("-return 1", "+return 2"),
    )
    assert (third.module, third.function, fourth.module, fourth.function) == (
        "clearance/z.py",
        "Cache.get",
        "clearance/z.py",
        "Cache.get",
    )
    assert third.change == ("-if len(cache) < 10:", "+if len(cache) <= 10:")
    assert fourth.change == ("-value = cache.get(key)", "+value = None")
    assert third.reason == fourth.reason == "A cache: what it holds changes no answer."


def test_an_entry_with_unchanged_lines_matches_only_where_they_are() -> None:
    script = _script()
    [entry] = script.parse_equivalents(
        """### `clearance/x.py` `under`
```diff
     if value.startswith("/") and not prefix.startswith("/"):
-        return False
+        return True
```
Dead: a prefix of an absolute path is absolute.
"""
    )
    assert entry.context == ('if value.startswith("/") and not prefix.startswith("/"):',)
    here = """--- clearance/x.py
+++ clearance/x.py
@@ -1,3 +1,3 @@
     if value.startswith("/") and not prefix.startswith("/"):
-        return False
+        return True
     rest = value[len(prefix) :]
"""
    elsewhere = here.replace('value.startswith("/") and not prefix.startswith("/")', "bad")
    assert entry.matches("clearance/x.py", "under", here)
    assert not entry.matches("clearance/x.py", "under", elsewhere)
    assert not entry.matches("clearance/x.py", "other", here)
    assert not entry.matches("clearance/y.py", "under", here)


def test_every_equivalent_listed_in_the_docs_names_a_module_and_a_change() -> None:
    script = _script()
    listed = script.parse_equivalents((ROOT / "docs" / "mutation.md").read_text())
    assert listed
    for entry in listed:
        assert entry.module in script.DECIDING_SET, entry
        assert any(line.startswith("-") for line in entry.change), entry  # a line dropped
        assert entry.reason, entry


def test_mutant_names_read_as_the_function_they_mutate() -> None:
    function_of = _script().function_of
    assert function_of(f"{NUMBERS}.x_canonical_number__mutmut_3") == "canonical_number"
    assert function_of(f"{NUMBERS}.xǁNumberFactǁcanonicalize__mutmut_4") == (
        "NumberFact.canonicalize"
    )


def test_every_module_of_the_deciding_set_and_its_tests_exist() -> None:
    for module, tests in _script().DECIDING_SET.items():
        assert (ROOT / module).is_file(), module
        for test in tests:
            assert (ROOT / test).exists(), test
