"""``process.*`` against real subprocesses and the real kernel's Landlock: start, read,
write and stop a process; the limits (count, output ring, lifetime); every process of a
session stopped when it closes (and when the harness closes); a confined process kept in
the workspace and away from ``.env``; another session's process id refused."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from process_support import (
    ECHO,
    LANDLOCK,
    PY,
    Calls,
    content,
    context,
    python,
    registry,
    same_words,
    script,
)
from support import ALICE, BOB, harness

from clearance import ConfinementError
from clearance.config import build_registry, load_config
from clearance.policy import NoopEvaluator
from clearance.toolsets import _landlock, process_tools
from clearance.toolsets._process_table import Ring
from clearance.toolsets.confinement import Confinement
from clearance.toolsets.process import ProcessLimits

needs_landlock = pytest.mark.skipif(not LANDLOCK, reason="the kernel offers no Landlock")

SPAWNER = (
    "import signal, subprocess, sys, time\n"
    "if sys.argv[1:] == ['stubborn']:\n"
    "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
    "print('child', child.pid, flush=True)\n"
    "time.sleep(600)\n"
)
"""Starts a child in its process group, prints its pid and sleeps; ``stubborn`` ignores
SIGTERM."""


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie nobody reaped counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            state = file.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def gone(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.fixture
def work(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / ".env").write_text("API_KEY=sk-process-secret\n")
    (tmp_path / "outside").mkdir()
    return ws


@pytest.mark.anyio
async def test_start_read_write_stop(work: Path) -> None:
    async with harness(registry(work), evaluator=NoopEvaluator()) as h:
        calls = Calls(await h.create_session(principal=ALICE))
        started = await calls.start(script(work, "echo.py", ECHO))
        pid, process_id = started["pid"], started["id"]
        assert started["command"] == shlex.join([PY, "echo.py"])
        assert await calls.read_until(process_id, "ready\n") == "ready\n"
        # nothing new: a read without wait comes back at once, empty, still running
        quiet = content(await calls("read", id=process_id))
        assert quiet["output"] == "" and quiet["running"] and quiet["exit_code"] is None
        written = await calls("write", id=process_id, input="hello\n")
        assert content(written) == {"id": process_id, "written": 6, "closed": False}
        assert "got hello" in await calls.read_until(process_id, "got hello")
        await calls("write", id=process_id, input="last\n", close=True)
        assert "got last" in await calls.read_until(process_id, "got last")
        stopped = content(await calls("stop", id=process_id))
        assert stopped["running"] is False
        assert gone(pid)
        again = await calls("read", id=process_id)  # refused at its fact, before any policy
        assert again.status == "blocked" and "no process" in again.text


@pytest.mark.anyio
async def test_stop_kills_the_whole_group_after_the_grace_period(work: Path) -> None:
    """A process that ignores SIGTERM and started a child: both are gone after stop."""
    async with harness(registry(work), evaluator=NoopEvaluator()) as h:
        calls = Calls(await h.create_session(principal=ALICE))
        started = await calls.start(script(work, "spawner.py", SPAWNER) + " stubborn")
        seen = await calls.read_until(started["id"], "\n")
        child = int(seen.split()[1])
        assert alive(child)
        began = time.monotonic()
        stopped = content(await calls("stop", id=started["id"]))
        assert time.monotonic() - began >= 0.5  # the grace period was given
        assert stopped["exit_code"] == -9 and stopped["ended"] == "stopped"
        assert gone(started["pid"]) and gone(child)


@pytest.mark.anyio
async def test_a_session_holds_at_most_max_processes(work: Path) -> None:
    sleeper = python("import time; time.sleep(600)")
    async with harness(registry(work, max_processes=2), evaluator=NoopEvaluator()) as h:
        calls = Calls(await h.create_session(principal=ALICE))
        first = await calls.start(sleeper)
        await calls.start(sleeper)
        third = await calls("start", command=sleeper)
        assert third.status == "error" and "holds 2 processes" in third.text
        assert first["id"] in third.text
        # another session has its own count
        other = Calls(await h.create_session(principal=BOB))
        await other.start(sleeper)
        # a stopped process frees its slot
        await calls("stop", id=first["id"])
        await calls.start(sleeper)


@pytest.mark.anyio
async def test_output_is_a_ring_buffer_and_reads_are_capped(work: Path) -> None:
    code = "import sys; sys.stdout.write(''.join(f'{i:04d}\\n' for i in range(1000)))"
    async with harness(registry(work, max_output=1000), evaluator=NoopEvaluator()) as h:
        calls = Calls(await h.create_session(principal=ALICE))
        started = await calls.start(python(code))
        assert gone(started["pid"])  # it wrote 5000 bytes and exited: 1000 are kept
        first = content(await calls("read", id=started["id"], max_bytes=300))
        assert first["dropped"] == 4000 and first["more"] is True
        assert first["output"] == "".join(f"{i:04d}\n" for i in range(800, 860))
        rest = content(await calls("read", id=started["id"]))
        assert rest["dropped"] == 0 and rest["more"] is False
        assert rest["output"] == "".join(f"{i:04d}\n" for i in range(860, 1000))
        assert rest["running"] is False and rest["exit_code"] == 0 and rest["ended"] is None


@pytest.mark.anyio
async def test_a_read_never_splits_a_character(work: Path) -> None:
    code = "import sys; sys.stdout.write('é' * 50); sys.stdout.flush(); sys.stdin.read()"
    async with harness(registry(work), evaluator=NoopEvaluator()) as h:
        calls = Calls(await h.create_session(principal=ALICE))
        started = await calls.start(python(code))
        text = ""
        while len(text) < 50:
            part = content(await calls("read", id=started["id"], wait=2, max_bytes=7))
            assert "\ufffd" not in part["output"]
            assert len(part["output"].encode()) <= 7
            text += part["output"]
        assert text == "é" * 50


@pytest.mark.anyio
async def test_a_process_is_stopped_at_the_end_of_its_lifetime(work: Path) -> None:
    async with harness(registry(work, lifetime=0.5), evaluator=NoopEvaluator()) as h:
        calls = Calls(await h.create_session(principal=ALICE))
        started = await calls.start(python("import time; time.sleep(600)"))
        assert gone(started["pid"], within=5)
        read = content(await calls("read", id=started["id"], wait=1))
        assert read["running"] is False and read["ended"] == "lifetime"
        assert read["exit_code"] == -15  # terminated within its grace period


@pytest.mark.anyio
async def test_closing_a_session_stops_every_process_it_started(work: Path) -> None:
    sleeper = python("import time; time.sleep(600)")
    async with harness(registry(work), evaluator=NoopEvaluator()) as h:
        session = await h.create_session(principal=ALICE)
        calls = Calls(session)
        one = await calls.start(sleeper)
        two = await calls.start(script(work, "spawner.py", SPAWNER))
        child = int((await calls.read_until(two["id"], "\n")).split()[1])
        other = Calls(await h.create_session(principal=BOB))
        kept = await other.start(sleeper)
        pids = [one["pid"], two["pid"], child]
        assert all(alive(pid) for pid in pids)
        await session.aclose()
        assert all(gone(pid) for pid in pids)
        # the other session's process is not touched
        assert alive(kept["pid"])
    # ... until the harness closes
    assert gone(kept["pid"])


@pytest.mark.anyio
async def test_a_reused_session_id_does_not_reach_the_earlier_processes(work: Path) -> None:
    async with harness(registry(work), evaluator=NoopEvaluator()) as h:
        first = Calls(await h.create_session(principal=ALICE, session_id="s_same"))
        started = await first.start(python("import time; time.sleep(600)"))
        await first.session.aclose()
        again = Calls(await h.create_session(principal=ALICE, session_id="s_same"))
        read = await again("read", id=started["id"])
        assert read.status == "blocked" and "no process" in read.text
        assert gone(started["pid"])


@pytest.mark.anyio
async def test_another_sessions_process_id_is_refused(work: Path) -> None:
    async with harness(registry(work), evaluator=NoopEvaluator()) as h:
        alice = Calls(await h.create_session(principal=ALICE))
        bob = Calls(await h.create_session(principal=BOB))
        started = await alice.start(script(work, "echo.py", ECHO))
        for tool, arguments in (
            ("read", {}),
            ("write", {"input": "from bob\n"}),
            ("stop", {}),
        ):
            outcome = await bob(tool, id=started["id"], **arguments)
            assert outcome.status == "blocked", outcome
            assert f"no process {started['id']!r} in this session" in outcome.text
            # an id never given is refused in the same words: nothing tells them apart
            never = "p_" + "0" * 32
            unknown = await bob(tool, id=never, **arguments)
            assert unknown.status == outcome.status
            assert same_words(unknown.text.replace(never, started["id"]), outcome.text)
        # Alice's process still runs and never got Bob's input
        seen = await alice.read_until(started["id"], "ready\n")
        assert "from bob" not in seen and alive(started["pid"])
        assert content(await alice("read", id=started["id"]))["running"] is True


@needs_landlock
@pytest.mark.anyio
async def test_a_confined_process_cannot_write_outside_or_read_the_secrets(work: Path) -> None:
    outside = work.parent / "outside"
    attempts = (
        "import sys\n"
        "for name, action in (('write', lambda: open(sys.argv[1], 'w').write('x')),\n"
        "                     ('env', lambda: print(open('.env').read()))):\n"
        "    try:\n"
        "        action()\n"
        "        print(name, 'done', flush=True)\n"
        "    except OSError as exc:\n"
        "        print(name, 'refused', exc.errno, flush=True)\n"
        "open('src/inside.txt', 'w').write('ok')\n"
        "print('finished', flush=True)\n"
    )
    (work / "attempts.py").write_text(attempts)
    async with harness(registry(work), evaluator=NoopEvaluator()) as h:
        calls = Calls(await h.create_session(principal=ALICE))
        command = shlex.join([PY, "attempts.py", str(outside / "planted.txt")])
        started = await calls.start(command)
        seen = await calls.read_until(started["id"], "finished")
    assert "write refused 13" in seen and "env refused 13" in seen, seen
    assert "sk-process-secret" not in seen
    assert not (outside / "planted.txt").exists()
    assert (work / "src" / "inside.txt").read_text() == "ok"  # what it may do, it does


def test_without_landlock_the_toolset_refuses_to_start(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_landlock, "abi", lambda: 0)
    with pytest.raises(ConfinementError) as raised:
        process_tools(work)
    assert raised.value.toolset == "process" and 'confinement = "none"' in str(raised.value)
    toml = work.parent / "clearance.toml"
    toml.write_text(f'[evaluator]\nkind = "noop"\n\n[tools.process]\nroot = "{work}"\n')
    with pytest.raises(ConfinementError):
        build_registry(load_config(toml))
    # said in words, it starts unconfined
    assert len(process_tools(work, confinement=Confinement(kind="none"))) == 4


def test_the_configuration_sets_the_limits(work: Path) -> None:
    toml = work.parent / "clearance.toml"
    toml.write_text(
        '[evaluator]\nkind = "noop"\n\n[tools]\nconfinement = "none"\n\n'
        f'[tools.process]\nroot = "{work}"\nallowed_programs = ["npm"]\nmax_processes = 2\n'
        "max_output = 5000\nlifetime = 60\ngrace = 1.5\n"
    )
    config = load_config(toml)
    assert config.tools.process is not None
    assert config.tools.process.limits() == {
        "max_processes": 2,
        "max_output": 5000,
        "lifetime": 60.0,
        "grace": 1.5,
    }
    start = build_registry(config).get("process.start")
    assert "Allowed programs: npm." in start.description
    toml.write_text('[evaluator]\nkind = "noop"\n\n[tools.process]\nmax_processes = 0\n')
    with pytest.raises(Exception, match="max_processes must be an integer >= 1"):
        load_config(toml)


def test_the_limits_are_checked() -> None:
    for bad in ({"max_processes": 0}, {"max_output": True}, {"lifetime": 0}, {"grace": -1}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            ProcessLimits(**bad)


def test_only_the_session_that_started_a_process_reaches_it(work: Path) -> None:
    """Property: whatever id a session gives, read, write and stop reach a process only
    when that session started it; ids are 128 random bits, never reissued."""
    tools = {
        t.name: t.handler
        for t in process_tools(
            work, confinement=Confinement(kind="none"), limits=ProcessLimits(grace=0.2)
        )
    }
    sleeper = python("import time; time.sleep(600)")
    owned = {}
    try:
        for session in ("s_a", "s_b"):
            result = tools["start"]({"command": sleeper}, context(session))
            owned[session] = json.loads(result.text)["id"]
        ids = list(owned.values())
        assert len(set(ids)) == 2 and all(len(i) == 34 for i in ids)

        def mutated(text: str, at: int, digit: str) -> str:
            at = 2 + at % 32
            return text[:at] + digit + text[at + 1 :]

        candidates = st.one_of(
            st.sampled_from(ids),
            st.builds(
                mutated,
                st.sampled_from(ids),
                st.integers(0, 31),
                st.sampled_from("0123456789abcdef"),
            ),
            st.from_regex(r"\Ap_[0-9a-f]{32}\Z"),
        )

        @settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(
            st.sampled_from(["s_a", "s_b", "s_c"]), candidates, st.sampled_from(["read", "write"])
        )
        def check(session: str, process_id: str, tool: str) -> None:
            arguments: dict[str, Any] = {"id": process_id}
            if tool == "write":
                arguments["input"] = ""
            result = tools[tool](arguments, context(session))
            mine = owned.get(session) == process_id
            assert result.is_error is not mine, (session, process_id, result.text)

        check()
        # a foreign stop is refused too, and both processes still run
        assert tools["stop"]({"id": owned["s_a"]}, context("s_b")).is_error
        for session, process_id in owned.items():
            read = json.loads(tools["read"]({"id": process_id}, context(session)).text)
            assert read["running"] is True
    finally:
        for session, process_id in owned.items():
            tools["stop"]({"id": process_id}, context(session))


@settings(max_examples=200, deadline=None)
@given(
    st.text(min_size=0, max_size=200),
    st.integers(1, 64),
    st.lists(st.tuples(st.booleans(), st.integers(1, 40)), max_size=40),
)
def test_the_output_ring_loses_nothing_it_does_not_count(
    text: str, limit: int, steps: list[tuple[bool, int]]
) -> None:
    """Property: however writes and reads interleave, each read is the stream's next
    bytes after the ones it says were dropped; reads move on (but for a character whose
    end is not written yet); all reads and drops add up to the stream; a read of 4 bytes
    or more that starts at a character's start ends at one."""
    stream = text.encode("utf-8")
    ring = Ring(limit)
    written = position = 0
    lost = 0
    pieces: list[bytes] = []

    def read(cap: int, final: bool) -> bool:
        nonlocal position, lost
        output, after = ring.take(position, cap, final)
        start = position + output.dropped
        assert after == start + len(output.data) and len(output.data) <= cap
        assert output.data == stream[start:after]
        if ring.total > position and (final or ring.total - position >= 4):
            assert output.data or output.dropped  # a read moves on
        at_boundary = start >= len(stream) or stream[start] & 0xC0 != 0x80
        if at_boundary and cap >= 4 and not final:
            output.data.decode("utf-8")  # whole characters only
        lost += output.dropped
        pieces.append(output.data)
        position = after
        return output.more or after < ring.total

    for is_write, size in steps:
        if is_write and written < len(stream):
            ring.append(stream[written : written + size])
            written += min(size, len(stream) - written)
        else:
            read(size, final=False)
    if written < len(stream):
        ring.append(stream[written:])
    while read(7, final=True):
        pass
    assert lost + sum(map(len, pieces)) == len(stream)
    if len(stream) <= limit:
        assert lost == 0 and b"".join(pieces) == stream


HARNESS = r"""
import json, shlex, sys, time
from clearance import CallContext, Principal
from clearance.toolsets.confinement import Confinement
from clearance.toolsets.process import ProcessLimits, process_tools

work, confinement = sys.argv[1], sys.argv[2]
start, read, write, stop = (
    t.handler
    for t in process_tools(
        work, confinement=Confinement(kind=confinement), limits=ProcessLimits(grace=0.5)
    )
)
ctx = CallContext(session_id="s", turn_id=None, call_id="c", qualified_name="process.start",
                  model_alias="process__start", principal=Principal("User", "a"))
started = json.loads(start({"command": shlex.join([sys.executable, "spawner.py"])}, ctx).text)
seen = ""
while "\n" not in seen:
    seen += json.loads(read({"id": started["id"], "wait": 5}, ctx).text)["output"]
print(json.dumps({"pid": started["pid"], "child": int(seen.split()[1])}), flush=True)
time.sleep(600)
"""


def test_a_harness_killed_outright_leaves_no_process_running(work: Path) -> None:
    """SIGKILL to the harness: its processes (and what they started) are stopped by the
    watchdog once the harness is gone."""
    (work / "src" / "spawner.py").write_text(SPAWNER)
    kind = "landlock" if LANDLOCK else "none"
    harness_process = subprocess.Popen(
        [PY, "-c", HARNESS, str(work / "src"), kind],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert harness_process.stdout is not None
    try:
        pids = json.loads(harness_process.stdout.readline())
        assert alive(pids["pid"]) and alive(pids["child"])
        harness_process.kill()
        harness_process.wait(10)
        assert gone(pids["pid"], within=5) and gone(pids["child"], within=5)
    finally:
        harness_process.kill()
        harness_process.wait(10)
        harness_process.stdout.close()


NS_LAST_PID = Path("/proc/sys/kernel/ns_last_pid")
"""The last process number given out (root may set it: the next process gets the next)."""


def taken(number: int) -> bool:
    """Whether a process (a zombie too) has the process id ``number``."""
    return os.path.exists(f"/proc/{number}")


def started_on(number: int) -> list[subprocess.Popen[bytes]]:
    """New process groups (each its own session), started until one has ``number`` as
    its process id (tried a few times: other processes of the machine take numbers too),
    or none when this process may not choose the next number (not root)."""
    groups: list[subprocess.Popen[bytes]] = []
    for _ in range(20):
        try:
            NS_LAST_PID.write_text(str(number - 1))
        except OSError:
            return groups
        group = subprocess.Popen([PY, "-c", "import time; time.sleep(60)"], start_new_session=True)
        groups.append(group)
        if group.pid == number:
            break
    return groups


@pytest.mark.anyio
async def test_stop_never_signals_a_group_that_took_an_ended_process_number(work: Path) -> None:
    """A process that ended on its own keeps its number until it is stopped, so that the
    stop's group signal (and the watchdog's) reaches its own group only. Reaped at once,
    its number was free for any new process group of the harness's user (the numbers wrap
    at 32,768 on many systems), and process.stop, or the end of its lifetime an hour
    later, SIGKILLed that group. Where the test may choose the next process number
    (root), it starts a group on the ended process's number to show it."""
    async with harness(registry(work), evaluator=NoopEvaluator()) as h:
        calls = Calls(await h.create_session(principal=ALICE))
        started = await calls.start(python("pass"))
        pid, process_id = started["pid"], started["id"]
        deadline = time.monotonic() + 10
        while content(await calls("read", id=process_id, wait=1))["running"]:
            assert time.monotonic() < deadline
        ended = content(await calls("read", id=process_id))
        assert ended["exit_code"] == 0 and ended["ended"] is None
        groups: list[subprocess.Popen[bytes]] = []
        try:
            groups = started_on(pid)
            assert all(group.pid != pid for group in groups)
            assert taken(pid)  # its number is held until the stop
            stopped = await calls("stop", id=process_id)
            assert content(stopped)["exit_code"] == 0
            await anyio.sleep(0.3)  # a SIGKILL sent to a group would have ended it by now
            assert [group.poll() for group in groups] == [None] * len(groups)
            assert not taken(pid)  # reaped by the stop
        finally:
            for group in groups:
                group.kill()
                group.wait()
