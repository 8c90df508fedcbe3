"""docs/authzen.md: its Python example runs (a PDP on loopback, an enforcement point asking
it), and the configuration keys it lists are the ones the loader reads."""

from __future__ import annotations

import re

from doc_examples import DOCS, python_blocks, run_block


def test_the_python_example_runs() -> None:
    blocks = python_blocks("authzen.md")
    assert len(blocks) == 1
    for line, code in blocks:
        run_block("authzen.md", line, code)


def test_the_table_of_keys_is_the_loaders() -> None:
    from clearance.config import AuthZenConfig

    text = (DOCS / "authzen.md").read_text(encoding="utf-8")
    section = text.split("## Deciding with a PDP", 1)[1].split("### What is sent", 1)[0]
    listed = set(re.findall(r"^\| `([a-z_]+)` \|", section, re.MULTILINE))
    assert listed == set(AuthZenConfig.__dataclass_fields__)
