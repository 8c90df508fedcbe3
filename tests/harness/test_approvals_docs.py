"""Every example in docs/approvals.md runs and its assertions hold."""

import tempfile
from pathlib import Path

import pytest
from doc_examples import python_blocks, run_block

BLOCKS = python_blocks("approvals.md")


def test_the_page_has_examples() -> None:
    assert len(BLOCKS) >= 4  # callback, stream, scopes, a shared grant store


@pytest.mark.parametrize(("line", "code"), BLOCKS, ids=[f"line {n}" for n, _ in BLOCKS])
def test_example_runs(
    line: int, code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The examples make their files with tempfile: keep them under this test's tmp_path.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    run_block("approvals.md", line, code)
