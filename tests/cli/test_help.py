"""Every verb has --help; the root lists them (one real subprocess, the rest in-process)."""

from __future__ import annotations

from typing import Any

import click
import pytest
from click.testing import CliRunner

from clearance.cli import cli as root
from clearance.cli import commands  # noqa: F401  (registers the verbs)

VERBS = [
    ["demo"],
    ["run"],
    ["policy"],
    ["policy", "schema"],
    ["policy", "validate"],
    ["policy", "format"],
    ["policy", "test"],
    ["policy", "explain"],
    ["grants"],
    ["grants", "list"],
    ["grants", "revoke"],
]


def test_root_help_lists_the_verbs(cli: Any) -> None:
    r = cli("--help")
    assert r.code == 0
    for verb in ("demo", "run", "policy", "grants"):
        assert f"\n  {verb} " in r.out


@pytest.mark.parametrize("verb", VERBS, ids=" ".join)
def test_every_verb_has_help(verb: list[str]) -> None:
    result = CliRunner().invoke(root, [*verb, "--help"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("Usage: ")
    command: Any = root
    for name in verb:
        command = command.commands[name]
    assert command.help and len(command.help.strip()) > 20


def test_json_flag_wherever_a_table_is_printed() -> None:
    for verb in (
        ["demo"],
        ["run"],
        ["grants", "list"],
        ["policy", "test"],
        ["policy", "validate"],
        ["policy", "explain"],
    ):
        command: Any = root
        for name in verb:
            command = command.commands[name]
        assert isinstance(command, click.Command)
        assert any("--json" in p.opts for p in command.params), verb
