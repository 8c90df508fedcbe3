"""docs/hosts.md "Many hosts, one store" (once in the README): its shell commands are
real. Each parses as the installed ``clearance`` script reads it (every option it shows
exists), and after the section's two-host example has run against a schema of its own on
the test server, the commands run as written against that store: the inbox serves it,
``clearance journal`` lists the calls both hosts made, and the rest do what their comments
say."""

from __future__ import annotations

import json
import re
import shlex
import signal
from pathlib import Path

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from console_script import clearance, command, env
from postgres_support import PG_URL, fresh_schema, sql
from support import approver

PAGE = Path(__file__).resolve().parents[2] / "docs" / "hosts.md"
WRITTEN_URL = "postgresql://clearance@db.internal:5432/clearance"


def section() -> str:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index("## Many hosts, one store")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def commands() -> list[list[str]]:
    """The ``clearance`` command lines of the section's shell block, without their
    comments and ``VAR=value`` prefixes."""
    (block,) = re.findall(r"^```sh\n(.*?)^```$", section(), re.DOTALL | re.MULTILINE)
    found = []
    for line in block.splitlines():
        words = shlex.split(line, comments=True)
        while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
            words.pop(0)
        if words and words[0] == "clearance":
            found.append(words[1:])
    return found


def test_the_block_shows_the_inbox_and_the_journal_on_one_store() -> None:
    shown = commands()
    assert ["inbox", "--db", WRITTEN_URL, "--user", "alice"] in shown
    assert ["journal"] in shown
    (line,) = re.findall(r"^store = \"(.*?)\"", section(), re.MULTILINE)
    assert line == WRITTEN_URL  # the inbox's --db is the store every host names


@pytest.mark.parametrize("args", commands(), ids=" ".join)
def test_each_command_parses_with_the_options_shown(args: list[str], tmp_path: Path) -> None:
    done = clearance(*args, "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    usage = done.stdout.splitlines()[0].split(" [OPTIONS]")[0]
    verbs = [" ".join(args[:k]) for k in range(1, len(args) + 1)]
    assert usage in [f"Usage: clearance {v}" for v in verbs], usage
    for option in (a for a in args if a.startswith("-")):
        assert re.search(rf"(^|\s){re.escape(option)}\b", done.stdout, re.MULTILINE), option


def run_the_two_hosts(url: str) -> None:
    (code,) = re.findall(r"^```python\n(.*?)^```$", section(), re.DOTALL | re.MULTILINE)
    written = 'STORE = "postgresql://postgres@127.0.0.1:5432/test?schema=clearance"'
    assert written in code
    code = code.replace(written, f"STORE = {url!r}")
    exec(compile(code, "docs/hosts.md (Many hosts, one store)", "exec"), {"__name__": "readme"})


def as_written(args: list[str], url: str) -> list[str]:
    return [url if a == WRITTEN_URL else a for a in args]


def test_the_commands_run_on_the_store_two_hosts_share(tmp_path: Path) -> None:
    shown = {" ".join(args[:2]): args for args in commands()}
    with fresh_schema() as (url, schema):
        run_the_two_hosts(url)
        (tmp_path / "clearance.toml").write_text(
            f'store = "{url}"\n[evaluator]\nkind = "noop"\n', encoding="utf-8"
        )
        events = sql(schema, "SELECT count(*) FROM {s}.events")
        sessions = sql(schema, "SELECT session_id, host_id FROM {s}.journal_sessions")
        hosts = {str(session): str(host) for session, host in sessions}
        assert sorted(hosts.values()) == ["a", "b"]

        done = clearance(*shown["store migrate"], cwd=tmp_path)
        assert done.returncode == 0 and "nothing to do" in done.stdout, done.stderr

        # clearance journal: the calls both hosts made, from the store line alone.
        done = clearance(*shown["journal"], cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        rows = [line.split() for line in done.stdout.splitlines()[1:]]
        assert [(r[4], r[5], r[8]) for r in rows] == [
            ('User::"alice"', "files.delete", "ok"),
            ('User::"alice"', "files.delete", "ok"),
            ('User::"alice"', "files.delete", "denied"),
        ]
        done = clearance(*shown["journal"], "--json", cwd=tmp_path)
        by_host = [hosts[r["session_id"]] for r in json.loads(done.stdout)]
        assert by_host == ["a", "b", "b"]

        done = clearance(*shown["journal export"], cwd=tmp_path)
        assert done.returncode == 0 and "exported 3 call(s)" in done.stderr, done.stderr
        corpus = (tmp_path / "calls.jsonl").read_text().splitlines()
        assert len({json.loads(line)["group"] for line in corpus}) == 2

        done = clearance(*shown["asks list"], cwd=tmp_path)
        assert done.returncode == 0, done.stderr

        done = clearance(*shown["grants revoke"], cwd=tmp_path)  # the page's id is made up
        assert done.returncode == 2 and "no grant with id 'g_1234abcd'" in done.stderr

        done = clearance(*shown["store recover"], cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "host a: 0 unfinished call(s) closed" in done.stdout  # a closed cleanly

        # Reading wrote nothing; recovering a stopped host adds no record either.
        assert sql(schema, "SELECT count(*) FROM {s}.events") == events

        # clearance inbox --db URL: serves this store's asks, to people who are approvers
        # (rule R13: `clearance approvers add alice`, as docs/hosts.md says).
        approver("alice")
        inbox = [*as_written(shown["inbox --db"], url), "--port", "0"]  # any free port
        assert url in inbox
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()  # no clearance.toml there: --db alone names the store
        anyio.run(serve_inbox, inbox, elsewhere)


async def serve_inbox(args: list[str], cwd: Path) -> None:
    async with await anyio.open_process([*command(), *args], cwd=cwd, env=env()) as process:
        assert process.stdout is not None and process.stderr is not None
        lines = BufferedByteReceiveStream(process.stdout)
        try:
            with anyio.fail_after(30):
                first = (await lines.receive_until(b"\n", 1 << 16)).decode()
                await lines.receive_until(b"\n", 1 << 16)
                link = (await lines.receive_until(b"\n", 1 << 16)).decode()
            assert first.startswith("clearance inbox on http://127.0.0.1:")
            assert first.endswith(f" for {PG_URL}"), first  # the store, without its password
            # The token is in the link's fragment: the browser never sends it (R13).
            assert re.fullmatch(r"  alice: http://127\.0\.0\.1:\d+/#token=\S+", link), link
        finally:
            process.send_signal(signal.SIGINT)
            with anyio.fail_after(20):
                code = await process.wait()
        errors = b"".join([chunk async for chunk in process.stderr]).decode()
    assert code == 0, errors
    assert "Traceback" not in errors
