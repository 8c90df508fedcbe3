"""What a remote decision costs: clearance asking ``clearance pdp`` over loopback (AuthZEN),
beside the same decision made in process.

Measured in the same run, interleaved in rounds (``_bench.interleave``), each call with
distinct arguments (the call's number is in its path):

* ``local``: ``Harness.decide`` with the ``coding`` Cedar pack in process (schema, the path
  fact, the evaluator);
* ``authzen``: ``Harness.decide`` with an ``AuthZenEvaluator`` whose PDP is a
  ``clearance pdp`` subprocess on 127.0.0.1 deciding with the same pack: the same stages
  here, then one ``/access/v1/evaluation`` request over a pooled keep-alive connection,
  where the PDP runs the schema, the fact and Cedar again;
* ``authzen-batch``: ``AuthZenEvaluator.evaluate_many`` of ``--batch`` calls, one
  ``/access/v1/evaluations`` request (what ``clearance replay`` sends), per call;
* ``http-floor``: an ``httpx`` GET of the PDP's metadata document on a pooled connection:
  the HTTP round trip alone, nothing decided;
* ``socket-floor``: the same GET written and read on one kept-alive socket by hand (anyio
  stream, no HTTP library): the loopback round trip and the server's HTTP, without the
  client's.

Run: ``python benchmarks/bench_authzen.py`` (``--rounds N``, ``--block N``, ``--batch N``,
``--quick``). Prints the median and p99 per call in microseconds and the range of the
per-round medians.
"""

from __future__ import annotations

import argparse
import os
import queue
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import anyio
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench import Contender, interleave, summarize

from clearance import Harness, MemoryJournal, Principal
from clearance.config import build_evaluator, build_registry, load_config
from clearance.policy.authzen import AuthZenEvaluator
from clearance.policy.base import AuthzRequest
from clearance.types import SessionInfo

CONFIG = """
[evaluator]
kind = "cedar"
pack = "coding"

[tools.files]
root = "ws"

[tools.shell]
root = "ws"

[journal]
path = "state/clearance.db"
"""

ALICE = Principal("User", "alice")


def start_pdp(directory: Path, token: str) -> tuple[subprocess.Popen[str], str]:
    """``clearance pdp`` on 127.0.0.1 (any port) for the configuration in ``directory``."""
    env = {**os.environ, "CLEARANCE_PDP_TOKEN": token}
    process = subprocess.Popen(
        [sys.executable, "-m", "clearance", "pdp", "--config", "clearance.toml", "--port", "0"],
        cwd=directory,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
        lines.put("")

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = lines.get(timeout=60)
        if not line:
            break
        if line.startswith("clearance pdp on "):
            return process, line.split()[3]
    process.kill()
    raise SystemExit(f"clearance pdp did not start: {process.communicate()[1]}")


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-authzen-") as tmp:
        directory = Path(tmp)
        (directory / "ws" / "src").mkdir(parents=True)
        (directory / "clearance.toml").write_text(CONFIG)
        token = secrets.token_hex(24)
        process, url = start_pdp(directory, token)
        try:
            config = load_config(directory / "clearance.toml")
            local = Harness(
                build_registry(config), evaluator=build_evaluator(config), journal=MemoryJournal()
            )
            remote = AuthZenEvaluator(url, token=token, batch_size=args.batch)
            through = Harness(build_registry(config), evaluator=remote, journal=MemoryJournal())
            tool = through.registry.get("files.read_file")
            assert tool is not None
            floor = httpx.AsyncClient(base_url=url)

            async def local_call(i: int) -> object:
                return await local.decide(
                    principal=ALICE, tool="files.read_file", arguments={"path": f"src/f{i}.py"}
                )

            async def remote_call(i: int) -> object:
                decision = await through.decide(
                    principal=ALICE, tool="files.read_file", arguments={"path": f"src/f{i}.py"}
                )
                assert decision.outcome == "allow", decision
                return decision

            async def batch_call(i: int) -> object:
                requests = [
                    AuthzRequest(ALICE, tool.info, {"path": f"src/b{i}-{k}.py"}, SessionInfo("s"))
                    for k in range(args.batch)
                ]
                verdicts = await remote.evaluate_many(requests)
                assert all(v.effect == "allow" for v in verdicts), verdicts[0]
                return verdicts

            host, port = url.removeprefix("http://").rsplit(":", 1)
            stream = await anyio.connect_tcp(host, int(port))
            raw = (
                f"GET /.well-known/authzen-configuration HTTP/1.1\r\nHost: {host}\r\n\r\n"
            ).encode()

            async def socket_call(i: int) -> object:
                await stream.send(raw)
                data = b""
                while b"\r\n\r\n" not in data:
                    data += await stream.receive()
                head, _, body = data.partition(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                while len(body) < length:
                    body += await stream.receive()
                return body

            async def floor_call(i: int) -> object:
                answer = await floor.get("/.well-known/authzen-configuration")
                assert answer.status_code == 200
                return answer

            contenders = [
                Contender("local", local_call),
                Contender("authzen", remote_call),
                Contender("authzen-batch", batch_call),
                Contender("http-floor", floor_call),
                Contender("socket-floor", socket_call),
            ]
            block = {
                "local": args.block,
                "authzen": args.block,
                "authzen-batch": max(1, args.block // args.batch),
                "http-floor": args.block,
                "socket-floor": args.block,
            }
            await interleave(contenders, rounds=args.rounds, block=block, warmup=50)
            await remote.aclose()
            await floor.aclose()
            await stream.aclose()
        finally:
            process.terminate()
            process.communicate(timeout=30)
    print(f"decisions per call, microseconds ({args.rounds} rounds; batch of {args.batch})")
    print(f"{'contender':<16}{'calls':>8}{'median':>10}{'p99':>10}   round medians")
    for contender in contenders:
        s = summarize(contender)
        per = args.batch if contender.name == "authzen-batch" else 1
        calls = s.calls * per
        print(
            f"{s.name:<16}{calls:>8}{s.median / per:>10.1f}{s.p99 / per:>10.1f}   "
            f"{s.low / per:.1f}-{s.high / per:.1f}"
        )
    load = os.getloadavg()[0]
    print(f"(load average {load:.1f} on {os.cpu_count()} cores while it ran)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--block", type=int, default=200, help="calls per contender per round")
    parser.add_argument("--batch", type=int, default=64, help="calls per evaluations request")
    parser.add_argument("--quick", action="store_true", help="3 rounds of 50")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.block = 3, 50
    anyio.run(run, args)


if __name__ == "__main__":
    main()
