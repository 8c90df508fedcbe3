"""`clearance gateway` refuses a configuration that cannot work before it serves anything,
and `clearance gateway --check` says so without serving: the real gateway process, with a
real MCP server (mcp-server-time) behind it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

TIME_SERVER = Path(sys.executable).parent / "mcp-server-time"

TYPO = """\
@id("clock")
permit (principal, action == Action::"time.get_curent_time", resource);
"""
SYNTAX = """\
@id("broken")
permit (principal, action, resource)
when { context.input.timezone >< "UTC" };
"""
GOOD = """\
@id("clock")
permit (principal, action == Action::"time.get_current_time", resource);
"""


def _project(tmp_path: Path, **files: str) -> Path:
    policies = tmp_path / "policies"
    policies.mkdir()
    for name, text in files.items():
        (policies / f"{name}.cedar").write_text(text)
    config = tmp_path / "gateway.toml"
    config.write_text(
        '[evaluator]\nkind = "cedar"\npolicies = "policies"\n\n'
        '[journal]\npath = "journal.db"\n\n'
        f'[[mcp_servers]]\nname = "time"\nprogram = "{TIME_SERVER}"\n'
    )
    return config


def _gateway(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "clearance", "gateway", "--config", str(config), *args],
        cwd=config.parent,
        stdin=subprocess.DEVNULL,  # a stdio gateway with no client: stdin closes at once
        capture_output=True,
        text=True,
        timeout=90,
    )


@pytest.fixture(autouse=True)
def _time_server() -> None:
    assert TIME_SERVER.exists(), "pip install mcp-server-time (the test extra)"


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_an_invalid_policy_stops_the_gateway_before_it_serves(
    tmp_path: Path, transport: str
) -> None:
    config = _project(tmp_path, clock=TYPO)
    token = tmp_path / "gateway.token"
    extra = ["--transport", "http", "--port", "0", "--token-file", str(token)]
    r = _gateway(config, *(extra if transport == "http" else []))
    assert r.returncode == 2, r.stderr
    lines = r.stderr.splitlines()
    assert lines[0] == (
        f"error: {tmp_path / 'policies' / 'clock.cedar'}:2:38: policy clock: "
        'Action::"time.get_curent_time" is not a tool action or action group; '
        'did you mean Action::"time.get_current_time"?'
    )
    assert lines[-1].strip() == "|                                      " + "^" * 22
    assert "listening" not in r.stderr
    assert not token.exists()  # nothing was served, no token made


def test_check_reports_every_file_and_serves_nothing(tmp_path: Path) -> None:
    config = _project(tmp_path, a_syntax=SYNTAX, clock=TYPO)
    r = _gateway(config, "--check")
    assert r.returncode == 2, r.stderr
    where = [line.split(": policy")[0] for line in r.stderr.splitlines() if ": policy " in line]
    # the syntax error (at its column) does not hide the other file's problem
    assert where == [
        f"error: {tmp_path / 'policies' / 'a_syntax.cedar'}:3:32",
        f"{tmp_path / 'policies' / 'clock.cedar'}:2:38",
    ]
    assert not (tmp_path / "journal.db").exists()


def test_check_passes_a_configuration_that_would_start(tmp_path: Path) -> None:
    config = _project(tmp_path, clock=GOOD)
    r = _gateway(config, "--check")
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"ok: {config}: 2 tools (1 MCP server), 1 Cedar policies validate\n"
    assert not (tmp_path / "journal.db").exists()  # no store is opened to check

    # a server that does not start is a bad configuration too
    config.write_text(config.read_text().replace(str(TIME_SERVER), "/nonexistent/server"))
    bad = _gateway(config, "--check")
    assert bad.returncode == 2 and "/nonexistent/server" in bad.stderr


@pytest.mark.parametrize(
    ("schema", "error"),
    [
        ("pg_things", "names starting with pg_ are reserved for PostgreSQL's own schemas"),
        ("Things", "use lower-case letters, digits and _"),
    ],
)
def test_check_refuses_a_store_schema_postgresql_would_refuse(
    tmp_path: Path, schema: str, error: str
) -> None:
    """Issue 38: a ``pg_*`` schema passed ``--check``, then failed every request."""
    config = _project(tmp_path, clock=GOOD)
    text = config.read_text()
    # Port 1: nothing listens there; --check parses the URL and never connects.
    config.write_text(f'store = "postgresql://127.0.0.1:1/db?schema={schema}"\n' + text)
    r = _gateway(config, "--check")
    assert r.returncode == 2, r.stderr
    assert error in r.stderr and schema in r.stderr
    config.write_text('store = "postgresql://127.0.0.1:1/db?schema=things"\n' + text)
    ok = _gateway(config, "--check")
    assert ok.returncode == 0, ok.stderr
