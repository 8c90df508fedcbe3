"""What a replay names (issue 15): the benign groups not fully allowed and the attack groups
not stopped, with their deciding policies, the same with worker processes; progress reports
and stopping early with the partial report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clearance.tuning import HarnessSpec, ReplayProgress, replay


def _spec(tmp_path: Path) -> HarnessSpec:
    (tmp_path / "rules.toml").write_text(
        'allow = ["files.read_file(path=src/**)"]\nask = ["files.write_file"]\n'
        'deny = ["shell.run(command=rm *)"]\n'
    )
    config = tmp_path / "clearance.toml"
    config.write_text(
        '[evaluator]\nkind = "local"\nrules = "rules.toml"\n\n[tools.files]\nroot = "."\n\n'
        "[tools.shell]\n"
    )
    return HarnessSpec(config=str(config))


def _line(tool: str, arguments: Any, label: str, group: str, **extra: Any) -> str:
    return json.dumps(
        {
            "principal": 'User::"alice"',
            "tool": tool,
            "arguments": arguments,
            "label": label,
            "group": group,
            **extra,
        }
    )


def _corpus(tasks: int) -> list[str]:
    """Per task number n: a benign task (its write is asked when n % 3 == 0), and an
    attack that reads twice (stopped by its second, denied, read when n % 2 == 0).

    Each task's calls are spread over the corpus (one pass per call position), so with
    chunks of 512 lines a group's calls fall to different worker processes."""
    lines = []
    for step in range(3):
        for n in range(tasks):
            if step == 0:
                lines.append(_line("files.read_file", {"path": f"src/{n}"}, "benign", f"u{n}"))
                lines.append(_line("files.read_file", {"path": f"src/x{n}"}, "attack", f"a{n}"))
            elif step == 1:
                tool, args = (
                    ("files.write_file", {"path": f"src/{n}", "content": "x"})
                    if n % 3 == 0
                    else ("files.read_file", {"path": f"src/{n}"})
                )
                lines.append(_line(tool, args, "benign", f"u{n}", id=f"u{n}-2"))
                path = f"secrets/{n}" if n % 2 == 0 else f"src/y{n}"
                lines.append(_line("files.read_file", {"path": path}, "attack", f"a{n}"))
            else:
                lines.append(_line("files.read_file", {"path": f"src/z{n}"}, "attack", f"a{n}"))
    return lines


def test_findings_name_the_groups_and_their_deciding_policies(tmp_path: Path) -> None:
    report = replay(_corpus(6), _spec(tmp_path))
    assert [f.group for f in report.benign_not_allowed] == ["u0", "u3"]
    [u0, _] = report.benign_not_allowed
    assert len(u0.calls) == 1
    assert (u0.calls[0].id, u0.calls[0].tool, u0.calls[0].outcome) == (
        "u0-2",
        "files.write_file",
        "ask",
    )
    assert u0.policies == ("ask:files.write_file",)
    assert [f.group for f in report.attacks_not_stopped] == ["a1", "a3", "a5"]
    a1 = report.attacks_not_stopped[0]
    assert [c.outcome for c in a1.calls] == ["allow", "allow", "allow"]
    assert a1.policies == ("allow:files.read_file(path=src/**)",)
    assert report.benign_groups - report.utility_groups == len(report.benign_not_allowed)
    assert report.attack_groups - report.security_groups == len(report.attacks_not_stopped)


def test_worker_processes_find_the_same(tmp_path: Path) -> None:
    corpus = tmp_path / "big.jsonl"
    corpus.write_text("\n".join(_corpus(400)) + "\n")  # 2,000 lines: chunks in both workers
    spec = _spec(tmp_path)
    one = replay(corpus, spec).to_json()
    two = replay(corpus, spec, jobs=2).to_json()
    assert one["utility"]["not_fully_allowed"] == two["utility"]["not_fully_allowed"]
    assert one["security"]["not_stopped"] == two["security"]["not_stopped"]
    assert len(two["utility"]["not_fully_allowed"]) == 134  # n % 3 == 0 below 400
    assert len(two["security"]["not_stopped"]) == 200
    # The benign finding is the group's first call that was not allowed, in corpus order.
    first = two["utility"]["not_fully_allowed"][0]
    assert first["group"] == "u0" and first["calls"][0]["line"] == 801


@pytest.mark.parametrize("jobs", [1, 2])
def test_progress_and_stop_give_a_partial_report(tmp_path: Path, jobs: int) -> None:
    corpus = tmp_path / "big.jsonl"
    # 100,000 lines: with two workers, the parent polls every tenth of a second.
    corpus.write_text("\n".join(_corpus(20_000)) + "\n")
    seen: list[ReplayProgress] = []

    def stop() -> bool:
        return bool(seen) and seen[-1].lines >= 1500

    report = replay(corpus, _spec(tmp_path), jobs=jobs, progress=seen.append, stop=stop)
    assert report.interrupted and report.to_json()["interrupted"] is True
    assert 1500 <= report.lines < 100_000
    assert all(p.total == 100_000 for p in seen)
    assert [p.lines for p in seen] == sorted(p.lines for p in seen)
    last = seen[-1]
    assert last.fraction is not None and 0 < last.fraction < 1
    assert last.eta is not None and last.eta > 0 and last.rate > 0


def test_progress_reaches_the_end(tmp_path: Path) -> None:
    corpus = tmp_path / "small.jsonl"
    corpus.write_text("\n".join(_corpus(400)) + "\n")
    seen: list[ReplayProgress] = []
    finished = replay(corpus, _spec(tmp_path), progress=seen.append, stop=lambda: False)
    assert not finished.interrupted and finished.lines == 2000
    assert len(seen) > 100  # every few lines
    assert seen[-1].lines == 2000 and seen[-1].fraction == 1.0 and seen[-1].eta == 0
