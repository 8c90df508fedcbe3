"""Without the ``mcp`` extra: everything but MCP works, and MCP features say how to install it.

Each test runs a real subprocess whose ``sitecustomize`` hides the ``mcp`` distribution and
everything it brings that clearance itself does not depend on (a meta path finder that
refuses those imports), as on an installation without ``clearance[mcp]``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HINT = "pip install 'clearance[mcp]'"

# The mcp distribution and what it pulls in beyond clearance's own dependencies (Starlette
# and uvicorn for the HTTP gateway, httpx2 for the client, OpenTelemetry, ...).
HIDDEN = (
    "mcp",
    "mcp_types",
    "httpx2",
    "httpcore2",
    "h11",
    "idna",
    "truststore",
    "jsonschema",
    "jwt",
    "multipart",
    "python_multipart",
    "opentelemetry",
    "sse_starlette",
    "starlette",
    "uvicorn",
)

SITECUSTOMIZE = f"""
import importlib.abc
import sys

HIDDEN = frozenset({HIDDEN!r})


class HideMcp(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {{name!r}} (hidden by the test)", name=name)
        return None


sys.meta_path.insert(0, HideMcp())
"""


@pytest.fixture
def without_mcp(tmp_path: Path) -> dict[str, str]:
    """An environment whose Python cannot import the mcp distribution."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLEARANCE")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), *filter(None, [env.get("PYTHONPATH")])])
    env["CLEARANCE_STATE_DIR"] = str(tmp_path / "state")
    return env


def run(
    args: list[str], env: dict[str, str], cwd: Path, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args,
        cwd=cwd,
        env=env,
        input=input,
        stdin=subprocess.DEVNULL if input is None else None,
        capture_output=True,
        text=True,
        timeout=120,
    )


def python(code: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return run([sys.executable, "-c", textwrap.dedent(code)], env, cwd)


def console_script() -> str:
    path = Path(sys.executable).parent / "clearance"
    assert path.exists(), "the clearance console script is not installed in this environment"
    return str(path)


def test_the_hiding_works(without_mcp: dict[str, str], tmp_path: Path) -> None:
    for name in ("mcp", "mcp_types", "starlette", "uvicorn", "httpx2"):
        done = python(f"import {name}", without_mcp, tmp_path)
        assert done.returncode == 1 and "hidden by the test" in done.stderr, name


def test_the_library_imports_without_mcp(without_mcp: dict[str, str], tmp_path: Path) -> None:
    done = python(
        f"""
        import sys
        import clearance, clearance.policy, clearance.toolsets, clearance.guardrails
        import clearance.policy.cedar, clearance.config, clearance.cli, clearance.tuning
        hidden = {HIDDEN!r}
        loaded = sorted(m for m in sys.modules if m.partition(".")[0] in hidden)
        assert not loaded, loaded
        print("ok")
        """,
        without_mcp,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_the_demo_runs_without_mcp(without_mcp: dict[str, str], tmp_path: Path) -> None:
    done = run([console_script(), "demo"], without_mcp, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "clearance demo" in done.stdout
    assert "ask-before-write" in done.stdout and "shell-no-chaining" in done.stdout
    assert "hidden by the test" not in done.stderr


def test_the_gateway_command_says_how_to_install_mcp(
    without_mcp: dict[str, str], tmp_path: Path
) -> None:
    config = tmp_path / "clearance.toml"
    config.write_text('[evaluator]\nkind = "noop"\n\n[[mcp_servers]]\nname = "up"\nprogram = "x"\n')
    for args in (["gateway", "--help"], ["gateway"], ["gateway", "--config", str(config)]):
        done = run([console_script(), *args], without_mcp, tmp_path)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert done.stdout == ""
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and lines[0].endswith(HINT)
        assert "Traceback" not in done.stderr
    # The other commands are all still there.
    listed = run([console_script(), "--help"], without_mcp, tmp_path)
    assert listed.returncode == 0
    for verb in ("demo", "run", "policy", "journal", "grants", "replay", "gateway"):
        assert f"  {verb} " in listed.stdout


def test_mcp_features_raise_one_error_with_the_hint(
    without_mcp: dict[str, str], tmp_path: Path
) -> None:
    config = tmp_path / "clearance.toml"
    config.write_text('[evaluator]\nkind = "noop"\n\n[[mcp_servers]]\nname = "up"\nprogram = "x"\n')
    done = python(
        f"""
        import anyio
        from clearance import Harness, ToolRegistry
        from clearance.config import load_config, load_gateway_config
        from clearance.errors import ClearanceError, MissingExtraError
        from clearance.policy import NoopEvaluator

        HINT = {HINT!r}

        def expect(what, fn):
            try:
                fn()
            except MissingExtraError as exc:
                assert isinstance(exc, ImportError) and isinstance(exc, ClearanceError)
                assert exc.extra == "mcp" and str(exc).endswith(HINT), str(exc)
                assert "\\n" not in str(exc)
                print(what, "hint")
            else:
                raise AssertionError(what + " did not raise")

        def import_mcp():
            import clearance.mcp

        def import_gateway():
            from clearance.mcp.gateway import Gateway

        async def start(how):
            async with Harness(ToolRegistry(), evaluator=NoopEvaluator()) as harness:
                if how == "stdio":
                    from clearance.mcp import start_stdio_server

                    await start_stdio_server(harness, name="up", program="x")
                else:
                    from clearance.mcp import connect_server

                    await connect_server(harness, name="up", url="http://127.0.0.1:1/mcp")

        expect("import clearance.mcp", import_mcp)
        expect("import clearance.mcp.gateway", import_gateway)
        expect("start_mcp_server", lambda: anyio.run(start, "stdio"))
        expect("connect_mcp_server", lambda: anyio.run(start, "http"))
        expect("[[mcp_servers]]", lambda: load_gateway_config({str(config)!r}))
        # The main configuration of the same file loads: it does not use the servers.
        assert load_config({str(config)!r}).evaluator.kind == "noop"
        print("main config ok")
        """,
        without_mcp,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "import clearance.mcp hint",
        "import clearance.mcp.gateway hint",
        "start_mcp_server hint",
        "connect_mcp_server hint",
        "[[mcp_servers]] hint",
        "main config ok",
    ]
