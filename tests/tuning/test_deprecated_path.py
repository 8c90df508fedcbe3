"""``clearance.policy.replay`` (the path docs/replay.md used to show) forwards to
``clearance.tuning`` with a DeprecationWarning, and offers nothing it did not have."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

import clearance.tuning

OLD_NAMES = [
    "OUTCOMES",
    "STAGES",
    "CorpusCall",
    "CorpusError",
    "Flip",
    "HarnessFactory",
    "HarnessSpec",
    "ReplayReport",
    "load_tool_declarations",
    "parse_corpus_line",
    "policy_ids",
    "read_corpus",
    "register_tool_declarations",
    "replay",
    "replay_async",
]


@pytest.mark.parametrize("name", OLD_NAMES)
def test_each_old_name_is_the_new_object_and_warns(name: str) -> None:
    old = importlib.import_module("clearance.policy.replay")
    with pytest.warns(DeprecationWarning, match=f"import {name} from clearance.tuning"):
        value = getattr(old, name)
    assert value is getattr(clearance.tuning, name)


def test_importing_the_module_alone_does_not_warn() -> None:
    # Walking every module (tests/test_exports.py does) must not trip the warning.
    code = (
        "import warnings; warnings.simplefilter('error');"
        "import clearance.policy.replay; print('ok')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_the_documented_import_still_works_and_warns_at_the_import() -> None:
    code = (
        "import warnings\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    warnings.simplefilter('always')\n"
        "    from clearance.policy.replay import HarnessSpec, replay\n"
        "from clearance.tuning import HarnessSpec as New\n"
        "assert HarnessSpec is New\n"
        "print(sorted({str(w.message) for w in seen if w.category is DeprecationWarning}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "import HarnessSpec from clearance.tuning" in done.stdout
    assert "import replay from clearance.tuning" in done.stdout


def test_names_it_never_had_are_not_forwarded() -> None:
    old = importlib.import_module("clearance.policy.replay")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in ("suggest", "SuggestionSet", "calls_from_events", "Tally", "nope"):
            with pytest.raises(AttributeError, match=name):
                getattr(old, name)
    assert old.__all__ == []
