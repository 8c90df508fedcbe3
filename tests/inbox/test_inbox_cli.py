"""``clearance inbox``, the real command in a subprocess: the links it prints, what it
refuses, and the one-line hint without the extra it needs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
from inbox_support import Running, bearer, cli_env, hostile_ask, token_of

from clearance.harness.ask_store_sqlite import SqliteAskStore

HINT = "pip install 'clearance[mcp]'"


def test_it_prints_one_link_per_person_and_serves_them(inbox_process: Running) -> None:
    assert inbox_process.url.startswith("http://127.0.0.1:")
    assert sorted(inbox_process.links) == ["alice", "bob"]
    assert len(set(inbox_process.links.values())) == 2
    assert all(
        link.startswith(inbox_process.url + "#token=") for link in inbox_process.links.values()
    )
    with httpx.Client(base_url=inbox_process.url) as client:
        page = client.get(inbox_process.links["bob"])  # the fragment stays in the browser
        assert page.status_code == 200 and "set-cookie" not in page.headers
        assert "/static/inbox.js" in page.text and "bob" not in page.text
        assert client.get("/asks").status_code == 401
        bob = token_of(inbox_process.links["bob"])
        listed = client.get("/asks", headers=bearer(bob))
        assert listed.status_code == 200
        assert listed.json() == {
            "user": "bob",
            "cards": "",
            "total": 0,
            "waiting": 0,
            "offset": 0,
            "limit": 50,
        }


def test_a_server_on_another_port_holding_every_cookie_cannot_answer(
    inbox_process: Running, tmp_path: Path
) -> None:
    """Rule R13: the person uses the inbox; another local server gets every cookie the
    browser holds for 127.0.0.1 (browsers do not keep cookies per port) and sends what it
    likes, from the browser (its own Origin) or by itself (no Origin): nothing answers."""
    db = tmp_path / "clearance.db"
    store = SqliteAskStore(db)
    store.put(hostile_ask("ask_r13"))
    alice = token_of(inbox_process.links["alice"])
    jar: dict[str, str] = {}
    with httpx.Client(base_url=inbox_process.url) as person:
        for response in (
            person.get(inbox_process.links["alice"]),
            person.get("/asks", headers=bearer(alice)),
            person.get("/static/inbox.js"),
        ):
            assert response.status_code == 200
            assert "set-cookie" not in response.headers  # nothing ambient to steal
        jar.update(dict(person.cookies))
    jar.update({"clearance_inbox": alice[:8], "session": "x"})  # and whatever else it has
    other = "http://127.0.0.1:1"  # the other server's origin
    with httpx.Client(base_url=inbox_process.url, cookies=jar) as thief:
        form = {"ask_id": "ask_r13", "decision": "allow_always", "scope": "3"}
        for headers in (
            {"origin": other},
            {"origin": other, **bearer("x")},
            {},
            {"sec-fetch-site": "same-site"},
            bearer("not-alices"),
        ):
            sent = thief.post("/answer", data=form, headers=headers)
            assert sent.status_code in (401, 403), (headers, sent.text)
            listed = thief.get(
                "/asks", headers={k: v for k, v in headers.items() if k != "sec-fetch-site"}
            )
            assert listed.status_code in (401, 403) and "ask_r13" not in listed.text
        page = thief.get("/")  # the page it can read holds no token
        assert alice not in page.text and "ask_r13" not in page.text
    found = store.get("ask_r13")
    assert found is not None and found.status == "pending"
    store.close()


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
