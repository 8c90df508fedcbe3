"""``clearance pdp``, the real command in a subprocess: what it needs to start, what it
refuses, HTTPS, its socket, and the one-line hint without the extra it needs."""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import pytest
from authzen_support import self_signed, start_pdp
from console_script import env as cli_env

from clearance import Harness, Principal, Tool, ToolRegistry
from clearance.errors import ConfigError
from clearance.harness.journal import MemoryJournal
from clearance.pdp import AuthZenPdp, PdpStarted, serve_pdp
from clearance.policy import LocalEvaluator
from clearance.policy.authzen import AuthZenEvaluator

RULES = """
[evaluator]
kind = "local"
allow = ["notes.write(path=a*)"]
ask = ["notes.write(path=b*)"]
"""
TOOLS = """{"version": 1, "tools": [{"name": "notes.write", "input_schema": {"type": "object",
 "properties": {"path": {"type": "string"}}, "required": ["path"],
 "additionalProperties": false}}]}"""


def _project(tmp_path: Path, rules: str = RULES) -> Path:
    (tmp_path / "clearance.toml").write_text(rules)
    (tmp_path / "tools.json").write_text(TOOLS)
    return tmp_path


def _run(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "clearance", "pdp", *args],
        cwd=cwd,
        env=env if env is not None else cli_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_it_serves_the_configured_rules_and_stops_on_sigterm(tmp_path: Path) -> None:
    _project(tmp_path)
    pdp = start_pdp("--tools", "tools.json", cwd=tmp_path)
    try:
        assert pdp.url.startswith("http://127.0.0.1:")
        assert "1 tool (notes 1)" in pdp.lines[0]
        metadata = httpx.get(f"{pdp.url}/.well-known/authzen-configuration", timeout=30).json()
        assert metadata["policy_decision_point"] == pdp.url

        async def decide() -> list[str]:
            async with AuthZenEvaluator(pdp.url, token=pdp.token, ask_field="ask") as ev:
                registry = ToolRegistry()
                registry.register(
                    "notes",
                    [Tool("write", lambda a, c: "", input_schema={"type": "object"})],
                )
                harness = Harness(registry, evaluator=ev, journal=MemoryJournal())
                return [
                    (
                        await harness.decide(
                            principal=Principal("User", "alice"),
                            tool="notes.write",
                            arguments={"path": p},
                        )
                    ).outcome
                    for p in ("a.txt", "b.txt", "c.txt")
                ]

        assert anyio.run(decide) == ["allow", "ask", "deny"]
    finally:
        pdp.process.send_signal(signal.SIGTERM)
        try:
            _, err = pdp.process.communicate(timeout=20)
        finally:
            pdp.stop()
    assert pdp.process.returncode == 0, err
    assert "Traceback" not in err


@pytest.mark.parametrize("token", [None, "", "too-short"])
def test_without_a_token_of_16_characters_it_does_not_start(
    tmp_path: Path, token: str | None
) -> None:
    _project(tmp_path)
    env = cli_env()
    if token is not None:
        env["CLEARANCE_PDP_TOKEN"] = token
    done = _run("--tools", "tools.json", "--port", "0", cwd=tmp_path, env=env)
    assert done.returncode == 2
    assert "set CLEARANCE_PDP_TOKEN to the bearer token" in done.stderr
    assert done.stdout == ""


def test_a_policy_that_does_not_fit_the_tools_stops_the_start(tmp_path: Path) -> None:
    _project(tmp_path, '[evaluator]\nkind = "local"\nallow = ["notes.erase"]\n')
    env = {**cli_env(), "CLEARANCE_PDP_TOKEN": "t" * 32}
    done = _run("--tools", "tools.json", "--port", "0", cwd=tmp_path, env=env)
    assert done.returncode == 2
    assert "notes.erase" in done.stderr
    assert "clearance pdp on" not in done.stdout


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--host", "0.0.0.0"], "would send bearer tokens and decisions in clear"),
        (
            ["--tls-cert", "missing.pem", "--tls-key", "missing.key"],
            "--tls-cert missing.pem: no such file",
        ),
        (
            ["--public-url", "http://pdp.example.com"],
            "--public-url: the PDP's URL must use https://",
        ),
    ],
)
def test_what_it_refuses_to_serve(tmp_path: Path, args: list[str], words: str) -> None:
    _project(tmp_path)
    env = {**cli_env(), "CLEARANCE_PDP_TOKEN": "t" * 32}
    done = _run("--tools", "tools.json", "--port", "0", *args, cwd=tmp_path, env=env)
    assert done.returncode == 2, done.stderr
    assert words in done.stderr
    assert "Traceback" not in done.stderr


def test_a_port_in_use_is_said_plainly(tmp_path: Path) -> None:
    _project(tmp_path)
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    try:
        port = str(busy.getsockname()[1])
        env = {**cli_env(), "CLEARANCE_PDP_TOKEN": "t" * 32}
        done = subprocess.run(
            [sys.executable, "-m", "clearance", "pdp", "--tools", "tools.json", "--port", port],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        busy.close()
    assert done.returncode == 2
    assert f"the PDP cannot listen on 127.0.0.1:{port}" in done.stderr


def test_over_https_with_a_public_url(tmp_path: Path) -> None:
    _project(tmp_path)
    cert, key = self_signed(tmp_path)
    pdp = start_pdp(
        "--tools",
        "tools.json",
        "--tls-cert",
        str(cert),
        "--tls-key",
        str(key),
        "--public-url",
        "https://pdp.example.com/",
        cwd=tmp_path,
    )
    try:
        assert pdp.url == "https://pdp.example.com"
        local = "https://127.0.0.1"
        with httpx.Client(verify=ssl.create_default_context(cafile=cert), timeout=30) as client:
            # The printed URL is the public one; the socket is the one it bound.
            bound = _bound_port(pdp.process.pid)
            metadata = client.get(f"{local}:{bound}/.well-known/authzen-configuration").json()
            assert metadata["access_evaluation_endpoint"] == (
                "https://pdp.example.com/access/v1/evaluation"
            )
            answer = client.post(
                f"{local}:{bound}/access/v1/evaluation",
                headers={"Authorization": f"Bearer {pdp.token}"},
                json={
                    "subject": {"type": "User", "id": "alice"},
                    "action": {"name": "notes.write"},
                    "resource": {"type": "tool", "id": "notes.write"},
                    "context": {"arguments": {"path": "a1"}},
                },
            )
            assert answer.json() == {"decision": True}
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{bound}/.well-known/authzen-configuration", timeout=10)
    finally:
        pdp.stop()


def _bound_port(pid: int) -> int:
    """The TCP port process ``pid`` listens on (from /proc: the PDP prints its public URL)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd)
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                return int(fields[1].rsplit(":", 1)[1], 16)
    raise AssertionError("the PDP listens on no TCP port")


@pytest.mark.anyio
async def test_its_listening_socket_has_tcp_nodelay() -> None:
    # The socket is handed over (as a service manager would): serve_pdp sets the option on
    # it as on one it binds itself, and Linux hands it on to every connection accepted.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    assert listener.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0
    registry = ToolRegistry()
    registry.register("notes", [Tool("write", lambda a, c: "", input_schema={"type": "object"})])
    app = AuthZenPdp(
        Harness(registry, evaluator=LocalEvaluator(allow=["notes.write"])), token="k" * 20
    )
    started = anyio.Event()
    seen: list[PdpStarted] = []

    def ready(info: PdpStarted) -> None:
        seen.append(info)
        started.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve_pdp(app, sock=listener, ready=ready))
        with anyio.fail_after(30):
            await started.wait()
        assert listener.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        assert seen[0].port == listener.getsockname()[1]
        assert seen[0].url == f"http://127.0.0.1:{seen[0].port}"
        tg.cancel_scope.cancel()
    assert listener.fileno() == -1


@pytest.mark.anyio
async def test_a_handed_over_socket_elsewhere_needs_tls() -> None:
    listener = socket.socket()
    listener.bind(("0.0.0.0", 0))
    app = AuthZenPdp(Harness(ToolRegistry(), evaluator=LocalEvaluator()), token="k" * 20)
    with pytest.raises(ConfigError, match=r"plain HTTP on 0\.0\.0\.0"):
        await serve_pdp(app, sock=listener)
    assert listener.fileno() == -1


SITECUSTOMIZE = """
import importlib.abc
import sys

HIDDEN = frozenset({"uvicorn"})


class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r} (hidden by the test)", name=name)
        return None


sys.meta_path.insert(0, Hide())
"""


def test_without_the_extra_it_says_how_to_install_it(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = cli_env()
    env["PYTHONPATH"] = os.pathsep.join([str(site), *filter(None, [env.get("PYTHONPATH")])])
    env["CLEARANCE_PDP_TOKEN"] = "t" * 32
    for args in (["--help"], ["--port", "0"]):
        done = _run(*args, cwd=tmp_path, env=env)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stdout == ""
        (line,) = done.stderr.splitlines()
        assert line.endswith("pip install 'clearance[authzen]'"), line
