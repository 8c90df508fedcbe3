"""Run the real ``clearance`` command on a pseudo-terminal, answering its questions.

On a terminal the command behaves as it does for a person: stdin is a TTY (asks are
prompted), stdout is one (styles are printed), and nothing is stripped by click.
"""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["on_a_terminal", "strip_styles"]

QUESTION = b"allow it [o]nce"


def on_a_terminal(cwd: Path, args: list[str], answers: list[bytes], *, code: int = 0) -> str:
    """Run ``clearance *args`` with stdin, stdout and stderr on one pseudo-terminal,
    writing the next of ``answers`` each time a new question appears; what the terminal
    received, decoded (strict UTF-8), CR LF as LF. Asserts the exit code is ``code``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLEARANCE")}
    env["COLUMNS"] = "120"
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "clearance", *args],
        cwd=cwd,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        close_fds=True,
    )
    os.close(slave)
    shown = b""
    pending = list(answers)
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the other end closed
                    break
                if not chunk:
                    break
                shown += chunk
                if pending and shown.count(QUESTION) > len(answers) - len(pending):
                    os.write(master, pending.pop(0))
            elif proc.poll() is not None:
                break
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        os.close(master)
    text = shown.decode("utf-8").replace("\r\n", "\n")
    assert proc.returncode == code, text
    return text


def strip_styles(text: str) -> str:
    """``text`` without the SGR sequences (colours, bold) click prints on a terminal."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)
