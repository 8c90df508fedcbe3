"""``[gateway]`` and ``[[mcp_servers]]`` are read by clearance.config's loader: every error
names the file and the line of the key that is wrong."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from clearance.config import load_config, load_gateway_config
from clearance.errors import ConfigError

CONFIG = """\
[evaluator]
kind = "noop"

[gateway]
transport = "http"
port = {port}

[[gateway.tokens]]
principal = 'User::"alice"'
token_env = "CLEARANCE_TEST_TOKEN"

[[mcp_servers]]
name = "up"
program = "python"

[[mcp_servers]]
name = "git"
program = "mcp-server-git"
restart = {restart}
"""


@pytest.mark.parametrize(
    ("port", "restart", "line", "message"),
    [
        ("'x'", '"never"', 6, "[gateway] port must be an integer from 0 to 65535"),
        ("0", '"sometimes"', 19, "[[mcp_servers]] 'git' restart must be 'on_next_call' or 'never'"),
    ],
)
def test_gateway_errors_name_their_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    port: str,
    restart: str,
    line: int,
    message: str,
) -> None:
    monkeypatch.setenv("CLEARANCE_TEST_TOKEN", "a-long-enough-token-for-alice")
    path = tmp_path / "clearance.toml"
    path.write_text(CONFIG.format(port=port, restart=restart))
    with pytest.raises(ConfigError) as caught:
        load_gateway_config(path)
    assert caught.value.line == line
    assert caught.value.path == str(path)
    assert str(caught.value) == f"{path}:{line}: {message}"
    # The main configuration of the same file is read by the same loader and ignores them.
    assert load_config(path).evaluator.kind == "noop"


def test_an_unknown_key_and_a_token_problem_name_their_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CLEARANCE_TEST_TOKEN", raising=False)
    path = tmp_path / "clearance.toml"
    path.write_text(CONFIG.format(port="0", restart='"never"'))
    with pytest.raises(ConfigError, match="CLEARANCE_TEST_TOKEN is not set") as caught:
        load_gateway_config(path)
    assert caught.value.line == 10
    path.write_text(
        textwrap.dedent(
            """\
            [gateway]
            port = 0

            [[mcp_servers]]
            name = "up"
            program = "python"
            tols = ["up.*"]
            """
        )
    )
    with pytest.raises(ConfigError, match=r"unknown key 'mcp_servers\[0\]\.tols'") as caught:
        load_gateway_config(path)
    assert caught.value.line == 7


def test_not_toml_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "clearance.toml"
    path.write_text('[gateway]\nport = 0\nhost = "127.0.0.1\n')
    with pytest.raises(ConfigError, match="not valid TOML") as caught:
        load_gateway_config(path)
    assert caught.value.line == 3


def test_the_http_bounds_and_call_timeout_have_defaults_and_are_checked(tmp_path: Path) -> None:
    """Issue 38: every bound has a default that holds; a configured one is checked."""
    from clearance.mcp.gateway import DEFAULT_CALL_TIMEOUT, HttpLimits

    path = tmp_path / "clearance.toml"
    path.write_text('[gateway]\n\n[[mcp_servers]]\nname = "up"\nprogram = "python"\n')
    config = load_gateway_config(path)
    assert config.limits == HttpLimits()
    assert config.servers[0].call_timeout == DEFAULT_CALL_TIMEOUT == 300.0
    path.write_text(
        "[gateway]\nmax_connections = 64\nheader_timeout = 2.5\nwrite_timeout = 5\n"
        '\n[[mcp_servers]]\nname = "up"\nprogram = "python"\ncall_timeout = 12\n'
    )
    config = load_gateway_config(path)
    assert config.limits == HttpLimits(max_connections=64, header_timeout=2.5, write_timeout=5)
    assert config.servers[0].call_timeout == 12.0
    for bad, message in [
        ("max_connections = 0", "max_connections must be a positive integer"),
        ("max_requests = 1.5", "max_requests must be a positive integer"),
        ("idle_timeout = -1", "idle_timeout must be a positive number of seconds"),
        ("header_timeout = nan", "header_timeout must be a positive number of seconds"),
    ]:
        path.write_text(f"[gateway]\n{bad}\n")
        with pytest.raises(ConfigError, match=message) as caught:
            load_gateway_config(path)
        assert ":2" in str(caught.value)  # the line of the key
