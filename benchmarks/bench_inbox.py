"""The inbox with 10,000 pending asks: what a page costs, and what open tabs cost the
server (issues 34 and 38).

A real ``clearance inbox`` process serves a SQLite store of N pending asks (three hosts,
two tools, two policies). The script measures, against that process:

- ``page``: one ``GET /asks`` as the page loads it (bytes, milliseconds);
- ``tabs``: ``--tabs`` open pages for ``--seconds`` seconds doing what the page's script
  does: before issue 34 it read ``/asks`` (every card) a second after each reply; now it
  keeps one event stream open, fetches only the cards an event names, and the filters'
  menus (their counts) at most every 5 s. Meanwhile
  another process adds one ask a second (so the live view has something to show), and
  the script answers ``--answers`` asks one at a time;
- the server's CPU (its ``utime + stime`` from ``/proc``) over that window, in per cent
  of one core, the bytes the tabs read, and how long an answer took (median, slowest).

Which inbox answers is detected (no ``/events``: the one before issue 34), so the same
script measures both: run it once with ``PYTHONPATH`` at a checkout from before, once at
this one, and compare the rows.

    python benchmarks/bench_inbox.py [--asks 10000] [--tabs 5] [--seconds 10] [--answers 5]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from clearance.harness.approvers import Approvers
from clearance.harness.ask_store import StoredAsk
from clearance.harness.ask_store_sqlite import SqliteAskStore
from clearance.harness.grants import GrantScope


def an_ask(n: int, now: float) -> StoredAsk:
    tool = ("notes.write", "mail.send")[n % 2]
    arguments = (
        {"path": f"notes/{n}.md", "content": f"Release notes, part {n}. " * 8}
        if tool == "notes.write"
        else {"to": f"team-{n % 40}@example.com", "body": f"Status {n}. " * 10}
    )
    return StoredAsk(
        ask_id=f"ask_{n:06d}",
        principal=f'User::"user{n % 25}"',
        tool=tool,
        call_id=f"call-{n}",
        session_id=f"s{n % 50}",
        arguments_hash=f"h{n}",
        arguments=arguments,
        reason="writes need a person" if tool == "notes.write" else "mail needs a person",
        policies=("ask-writes",) if tool == "notes.write" else ("ask-mail",),
        suggestions=(GrantScope.exact(arguments), GrantScope.tool()),
        deciding=("path",) if tool == "notes.write" else ("to",),
        host=("build-1", "build-2", "laptop")[n % 3],
        created_at=now - 3600 + n * 0.01,
    )


def fill(db: Path, count: int) -> None:
    store = SqliteAskStore(db)
    now = time.time()
    store._db.execute("BEGIN")
    for n in range(count):
        store.put(an_ask(n, now))
    store._db.execute("COMMIT")
    store.close()


def cpu_seconds(pid: int) -> float:
    """The process's user + system CPU time (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start(db: Path) -> tuple[subprocess.Popen[str], str, str]:
    command = [sys.executable, "-m", "clearance", "inbox", "--db", str(db)]
    process = subprocess.Popen(
        [*command, "--port", "0", "--user", "alice"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    for line in process.stdout:
        if found := re.search(r"alice: (http://127\.0\.0\.1:\d+/)#token=(\S+)", line):
            return process, found[1], found[2]
    raise SystemExit("clearance inbox did not start")


class Tab:
    """One open page (see the module docstring): what it read, in bytes."""

    def __init__(self, url: str, token: str, pushed: bool, stop: threading.Event) -> None:
        self.url, self.pushed, self.stop = url, pushed, stop
        self.headers = {"authorization": f"Bearer {token}", "accept": "application/json"}
        self.read = 0
        self.requests = 0
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        with httpx.Client(base_url=self.url, headers=self.headers, timeout=60) as client:
            if not self.pushed:
                while not self.stop.is_set():  # the page before: every card, every second
                    self.read += len(client.get("/asks").content)
                    self.requests += 1
                    self.stop.wait(1.0)
                return
            self.read += len(client.get("/asks", params={"groups": "1"}).content)
            menus = time.monotonic()
            with client.stream("GET", "/events") as stream:
                for line in stream.iter_lines():
                    self.read += len(line) + 1
                    if self.stop.is_set():
                        return
                    if line.startswith("data: ") and '"added"' in line:
                        ids = re.findall(r'"(ask_[^"]+)"', line)
                        params = [("limit", "0"), *(("id", i) for i in ids)]
                        self.read += len(client.get("/asks", params=params).content)
                        self.requests += 1
                        if time.monotonic() - menus >= 5.0:  # the menus' counts
                            menus = time.monotonic()
                            params = [("limit", "0"), ("groups", "1")]
                            self.read += len(client.get("/asks", params=params).content)
                            self.requests += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--asks", type=int, default=10_000)
    parser.add_argument("--tabs", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--answers", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["XDG_CONFIG_HOME"] = str(Path(tmp) / "config")
        Approvers.default().add("alice")
        db = Path(tmp) / "clearance.db"
        fill(db, args.asks)
        process, url, token = start(db)
        try:
            measure(args, db, process.pid, url, token)
        finally:
            process.terminate()
            process.wait(timeout=30)


def measure(args: Any, db: Path, pid: int, url: str, token: str) -> None:
    headers = {"authorization": f"Bearer {token}", "accept": "application/json"}
    with (
        httpx.Client(base_url=url, headers=headers, timeout=120) as client,
        client.stream("GET", "/events") as events,
    ):
        # The inbox before issue 34 has no /events (404); this one streams.
        is_pushed = events.status_code != 404
    with httpx.Client(base_url=url, headers=headers, timeout=120) as client:
        t = time.perf_counter()
        page = client.get("/asks")
        page_ms = (time.perf_counter() - t) * 1000
        stop = threading.Event()
        tabs = [Tab(url, token, is_pushed, stop) for _ in range(args.tabs)]
        cpu0, wall0 = cpu_seconds(pid), time.monotonic()
        for tab in tabs:
            tab.thread.start()
        adder = SqliteAskStore(db)  # another host raising an ask a second
        answers: list[float] = []
        n = args.asks
        deadline = wall0 + args.seconds
        step = args.seconds / max(args.answers, 1)
        while time.monotonic() < deadline:
            adder.put(an_ask(n, time.time()))
            n += 1
            if len(answers) < args.answers:
                t = time.perf_counter()
                given = client.post(
                    "/answer",
                    data={"ask_id": f"ask_{len(answers):06d}", "decision": "deny"},
                    headers={"origin": url.rstrip("/")},
                )
                assert given.status_code == 200, given.text
                answers.append((time.perf_counter() - t) * 1000)
            time.sleep(min(step, 1.0, max(0.0, deadline - time.monotonic())))
        cpu = cpu_seconds(pid) - cpu0
        wall = time.monotonic() - wall0
        stop.set()
        adder.put(an_ask(n, time.time()))  # wakes the streams so they see stop
        adder.close()
        for tab in tabs:
            tab.thread.join(timeout=30)
    mode = "events (now)" if is_pushed else "polls (before)"
    print(f"inbox over {args.asks} pending asks, {args.tabs} tabs for {wall:.1f} s: {mode}")
    print(f"{'':22} {'value':>14}")
    print(f"{'page (GET /asks)':22} {len(page.content) / 1e6:>11.3f} MB")
    print(f"{'page time':22} {page_ms:>11.0f} ms")
    print(f"{'server CPU':22} {100 * cpu / wall:>11.1f} %  (of one core)")
    print(f"{'server CPU, in all':22} {cpu:>11.2f} s")
    read = sum(tab.read for tab in tabs)
    requests = sum(tab.requests for tab in tabs)
    print(f"{'tabs read':22} {read / wall / 1e3:>11.1f} KB/s (all tabs)")
    print(f"{'tabs requests':22} {requests:>11d}    (after the first page)")
    print(f"{'CPU per tab-second':22} {1000 * cpu / (wall * args.tabs):>11.1f} ms")
    print(f"{'answer, median':22} {statistics.median(answers):>11.0f} ms")
    print(f"{'answer, slowest':22} {max(answers):>11.0f} ms")


if __name__ == "__main__":
    main()
