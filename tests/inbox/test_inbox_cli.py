"""``clearance inbox``, the real command in a subprocess: the links it prints, what it
refuses, and the one-line hint without the extra it needs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
from inbox_support import Running, cli_env

from clearance.harness.ask_store_sqlite import SqliteAskStore

HINT = "pip install 'clearance[mcp]'"


def test_it_prints_one_link_per_person_and_serves_them(inbox_process: Running) -> None:
    assert inbox_process.url.startswith("http://127.0.0.1:")
    assert sorted(inbox_process.links) == ["alice", "bob"]
    assert len(set(inbox_process.links.values())) == 2
    with httpx.Client(base_url=inbox_process.url) as client:
        assert client.get("/").status_code == 401
        login = client.get(inbox_process.links["bob"])
        assert login.status_code == 200 and "Sign in as <strong>bob</strong>" in login.text
        token = inbox_process.links["bob"].partition("token=")[2]
        done = client.post("/login", data={"token": token})
        assert done.status_code == 303
        page = client.get("/")
        assert page.status_code == 200 and "signed in as <strong>bob</strong>" in page.text
        assert "No asks waiting" in page.text


def test_sigterm_stops_it(inbox_process: Running) -> None:
    inbox_process.process.send_signal(signal.SIGTERM)
    _, err = inbox_process.process.communicate(timeout=20)
    assert inbox_process.process.returncode == 0, err
    assert "Traceback" not in err


def test_a_missing_store_or_a_repeated_user_exits_2(tmp_path: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "clearance", "inbox", *args],
            cwd=tmp_path,
            env=cli_env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )

    missing = run("--db", str(tmp_path / "none.db"), "--port", "0")
    assert missing.returncode == 2 and "no ask store at" in missing.stderr
    assert not (tmp_path / "none.db").exists()
    db = tmp_path / "clearance.db"
    SqliteAskStore(db).close()
    twice = run("--db", str(db), "--port", "0", "--user", "alice", "--user", "alice")
    assert twice.returncode == 2 and "different names" in twice.stderr


def test_a_port_in_use_is_said_plainly(inbox_process: Running, tmp_path: Path) -> None:
    port = inbox_process.url.rstrip("/").rsplit(":", 1)[1]
    db = str(tmp_path / "clearance.db")  # the running inbox's store
    done = subprocess.run(
        [sys.executable, "-m", "clearance", "inbox", "--db", db, "--port", port],
        cwd=tmp_path,
        env=cli_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert f"the inbox cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr


# Starlette and uvicorn come with the mcp extra; hidden as on an installation without it.
SITECUSTOMIZE = """
import importlib.abc
import sys

HIDDEN = frozenset({"mcp", "mcp_types", "starlette", "uvicorn", "sse_starlette"})


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
    db = tmp_path / "clearance.db"
    SqliteAskStore(db).close()
    for args in (["inbox", "--help"], ["inbox", "--db", str(db)]):
        done = subprocess.run(
            [sys.executable, "-m", "clearance", *args],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, (args, done.stderr)
        assert done.stdout == ""
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: the approval inbox needs")
        assert lines[0].endswith(HINT)
    listed = subprocess.run(
        [sys.executable, "-m", "clearance", "--help"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0 and "  inbox " in listed.stdout
