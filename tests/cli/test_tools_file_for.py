"""``tools_file_for``: the ``--tools`` file a replay or suggest harness reads when the
configuration has MCP servers and no ``--tools`` was given (a real mcp-server-time)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from clearance.cli._tools import tools_file_for
from clearance.tuning import HarnessSpec, replay

TIME_SERVER = Path(sys.executable).parent / "mcp-server-time"


def test_a_snapshot_of_the_servers_while_it_is_needed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "t.cedar").write_text(
        '@id("t")\npermit (principal, action == Action::"time.get_current_time", resource);\n'
    )
    config = tmp_path / "clearance.toml"
    config.write_text(
        '[evaluator]\nkind = "cedar"\npolicies = "p"\n\n'
        f'[[mcp_servers]]\nname = "time"\nprogram = "{TIME_SERVER}"\n'
    )
    with tools_file_for(None, None) as snapshot:
        assert snapshot is not None
        names = {t["name"] for t in json.loads(Path(snapshot).read_text())["tools"]}
        assert names == {"time.get_current_time", "time.convert_time"}
        line = json.dumps(
            {
                "principal": 'User::"a"',
                "tool": "time.get_current_time",
                "arguments": {"timezone": "UTC"},
                "expected": "allow",
            }
        )
        report = replay([line], HarnessSpec(tools=snapshot))
        assert report.outcomes["allow"] == 1
    assert not Path(snapshot).exists()

    with tools_file_for(None, "given.json") as given:
        assert given == "given.json"
    config.write_text('[evaluator]\nkind = "noop"\n')
    with tools_file_for(None, None) as nothing:
        assert nothing is None
