"""What the AuthZEN tests share: PDPs that misbehave on a real socket, a real
``clearance pdp`` subprocess, and a self-signed certificate made by ``openssl``.

:class:`RawPdp` listens on 127.0.0.1 and answers each request with a behaviour, byte for
byte: ``hang`` (read the request, never answer), ``reset`` (read it, then close with
``SO_LINGER`` 0: a TCP reset), ``close`` (close without a word), ``trickle`` (a valid
answer, one byte every 0.2 s), raw bytes (any status line, headers and body; the
connection stays open for the next request), ``(bytes, "close")`` (those bytes, then the
connection closed) or a function of the request's bytes giving the answer's. It counts
the requests it read.
"""

from __future__ import annotations

import json
import os
import queue
import re
import secrets
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console_script import env as cli_env

Behaviour = str | bytes | tuple[bytes, str] | Callable[[bytes], bytes]


def http_response(
    status: int = 200,
    body: bytes | str | Any = b"",
    *,
    content_type: str = "application/json",
    headers: tuple[tuple[str, str], ...] = (),
    reason: str = "OK",
) -> bytes:
    """One HTTP/1.1 answer: ``body`` as is when bytes or text, else as JSON."""
    if not isinstance(body, bytes | str):
        body = json.dumps(body)
    data = body.encode() if isinstance(body, str) else body
    lines = [f"HTTP/1.1 {status} {reason}", f"Content-Type: {content_type}"]
    lines += [f"{k}: {v}" for k, v in headers]
    lines.append(f"Content-Length: {len(data)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


def _read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    found = re.search(rb"(?i)content-length:\s*(\d+)", head)
    length = int(found.group(1)) if found else 0
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


@dataclass
class RawPdp:
    """A PDP that answers every request with ``behaviour`` (see the module docstring)."""

    behaviour: Behaviour
    requests: list[bytes] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self._sock.settimeout(0.1)
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._threads: list[threading.Thread] = []
        self._conns: list[socket.socket] = []
        self.ended = threading.Event()
        """Set when a connection has ended (the client closed it, or the behaviour did)."""
        accept = threading.Thread(target=self._accept, daemon=True)
        accept.start()
        self._threads.append(accept)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except (TimeoutError, OSError):
                continue
            self._conns.append(conn)
            worker = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            worker.start()
            self._threads.append(worker)

    def _serve(self, conn: socket.socket) -> None:
        try:
            while not self._stop.is_set():
                request = _read_request(conn)
                if not request:
                    return
                self.requests.append(request)
                behaviour = self.behaviour
                if behaviour == "hang":
                    self._stop.wait()
                    return
                if behaviour == "reset":
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    return
                if behaviour == "close":
                    return
                if behaviour == "trickle":
                    for byte in http_response(200, {"decision": True}):
                        if self._stop.wait(0.2):
                            return
                        conn.sendall(bytes([byte]))
                    return
                if isinstance(behaviour, tuple):
                    conn.sendall(behaviour[0])
                    return
                answer = behaviour(request) if callable(behaviour) else behaviour
                assert isinstance(answer, bytes)
                conn.sendall(answer)
        except OSError:
            return
        finally:
            conn.close()
            self.ended.set()

    @property
    def connections(self) -> int:
        """Connections accepted so far."""
        return len(self._conns)

    def open_connections(self) -> int:
        """Connections accepted and not ended."""
        return sum(1 for conn in self._conns if conn.fileno() != -1)

    def close(self) -> None:
        self._stop.set()
        self._sock.close()
        for conn in self._conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for thread in self._threads:
            thread.join(timeout=5)

    def __enter__(self) -> RawPdp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def request_id(request: bytes) -> str:
    """The X-Request-ID a request carried."""
    found = re.search(rb"(?i)\r\nx-request-id:\s*(\S+)", request)
    assert found is not None
    return found.group(1).decode()


def request_body(request: bytes) -> Any:
    """The JSON body of a request."""
    return json.loads(request.partition(b"\r\n\r\n")[2])


# --- a real `clearance pdp` --------------------------------------------------------------------


@dataclass
class RunningPdp:
    """A ``clearance pdp`` process, its URL and token."""

    process: subprocess.Popen[str]
    url: str
    token: str
    lines: list[str]

    def stop(self) -> tuple[int, str]:
        """Stop it (SIGTERM) and return its exit code and stderr."""
        if self.process.poll() is None:
            self.process.terminate()
        try:
            _, err = self.process.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, err = self.process.communicate(timeout=10)
        return self.process.returncode, err


def start_pdp(
    *args: str,
    cwd: Path,
    token: str | None = None,
    extra_env: dict[str, str] | None = None,
    timeout: float = 60,
) -> RunningPdp:
    """Start ``clearance pdp --port 0 ARGS`` with a fresh token and wait until it listens."""
    token = token or secrets.token_hex(24)
    env = cli_env()
    env["CLEARANCE_PDP_TOKEN"] = token
    env.update(extra_env or {})
    process = subprocess.Popen(
        [sys.executable, "-m", "clearance", "pdp", "--port", "0", *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:  # a thread: a pipe's buffered lines are invisible to select()
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
        lines.put("")

    threading.Thread(target=read, daemon=True).start()
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    url = ""
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            continue
        if not line:
            break
        seen.append(line)
        if line.startswith("clearance pdp on "):
            url = line.split()[3]
        elif line.startswith("Callers present the token"):
            return RunningPdp(process, url, token, seen)
    process.kill()
    _, err = process.communicate(timeout=10)
    raise AssertionError(f"clearance pdp did not start: {''.join(seen)}{err}")


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and localhost and its key, made by ``openssl``."""
    cert, key = directory / "pdp.crt", directory / "pdp.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=clearance-test-pdp",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=60,
        env={**os.environ, "OPENSSL_CONF": "/dev/null"},
    )
    return cert, key
