"""R15 tools are confined below the policy, against the real kernel.

Trees of directories, files and symlinks (leading in and out of the workspace, dangling,
looping) are built on disk for every example, with a secret ``.env`` at the workspace's
top and in a subdirectory. One program, started by ``shell.run``'s real handler under its
default confinement (no policy at all), tries every generated path: append to it,
truncate it, create it, make a directory and a symlink there, rename it, remove it, and
read it. Whatever it managed, nothing outside the workspace changed (every name, content
and mode of the tree around it is the same), the secrets are unchanged and never read,
and every write that succeeded landed inside the workspace. (Paths that resolve beyond
the example's directory are left out: nothing would watch them.)
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from trees import Op, paths, trees, workspace

from clearance import CallContext, CallToolResult, Principal
from clearance.toolsets import shell_tools
from clearance.toolsets.confinement import landlock_abi

pytestmark = pytest.mark.skipif(landlock_abi() < 1, reason="the kernel offers no Landlock")

SECRET = "API_KEY=sk-R15-secret"

ATTEMPT = r"""
import json, os, sys
done = []
for path in json.loads(bytes.fromhex(sys.argv[1])):
    for what in ("append", "truncate", "create", "mkdir", "symlink", "rename", "remove", "read"):
        try:
            if what == "append":
                with open(path, "a") as f:
                    f.write("pwned")
            elif what == "truncate":
                os.truncate(path, 0)
            elif what == "create":
                with open(path + ".new", "x") as f:
                    f.write("pwned")
            elif what == "mkdir":
                os.mkdir(path + ".d")
            elif what == "symlink":
                os.symlink("/etc/passwd", path + ".l")
            elif what == "rename":
                os.rename(path, path + ".moved")
                os.rename(path + ".moved", path)
            elif what == "remove":
                os.unlink(path)
            else:
                with open(path) as f:
                    print(f.read(200))
            done.append([what, path])
        except (OSError, ValueError):
            pass
print("DONE " + json.dumps(done))
"""

SECRET_SPELLINGS = [".env", "a/.env", "in/../.env", "a/../.env", "in/.env", "./.env"]
"""Spellings of the secrets (``in`` is a link to ``a``)."""


def context() -> CallContext:
    return CallContext(
        session_id="s",
        turn_id=None,
        call_id="c",
        qualified_name="shell.run",
        model_alias="shell__run",
        principal=Principal("User", "u"),
    )


def snapshot(base: str, root: str) -> dict[str, tuple[int, bytes | str]]:
    """Every entry under ``base`` outside ``root``: its mode and content (or link target)."""
    found: dict[str, tuple[int, bytes | str]] = {}
    for directory, dirnames, filenames in os.walk(base):
        if directory == root or directory.startswith(root + os.sep):
            dirnames[:] = []
            continue
        for name in dirnames + filenames:
            path = os.path.join(directory, name)
            if path == root:
                continue
            st = os.lstat(path)
            if os.path.islink(path):
                found[path] = (st.st_mode, os.readlink(path))
            elif os.path.isfile(path):
                found[path] = (st.st_mode, Path(path).read_bytes())
            else:
                found[path] = (st.st_mode, b"")
    return found


def within(directory: str, path: str) -> bool:
    real = os.path.realpath(path)
    return real == directory or real.startswith(directory + os.sep)


@given(
    ops=trees,
    tried=st.lists(st.one_of(paths, st.sampled_from(SECRET_SPELLINGS)), min_size=1, max_size=6),
)
def test_a_confined_command_never_writes_outside_nor_reads_a_secret(
    ops: list[Op], tried: list[str]
) -> None:
    with workspace(ops) as (root, _outside):
        base = os.path.dirname(root)
        os.makedirs(os.path.join(root, "a"), exist_ok=True)
        for secret in (os.path.join(root, ".env"), os.path.join(root, "a", ".env")):
            Path(secret).write_text(SECRET + "\n")
        before = snapshot(base, root)
        (tool,) = shell_tools(root, allowed_programs=None, timeout=60)
        # Only what the snapshot watches: a path that resolves beyond the example's own
        # directory (to "/", say) would be unobserved, and written for real if the
        # confinement ever broke.
        tried = [p for p in tried if "\x00" not in p and within(base, os.path.join(root, p))]
        # One line of printable words: the command fact refuses control characters.
        program = f"exec(bytes.fromhex({ATTEMPT.encode().hex()!r}))"
        command = shlex.join([sys.executable, "-c", program, json.dumps(tried).encode().hex()])
        result = tool.handler({"command": command}, context())
        assert isinstance(result, CallToolResult)
        content = result.structured_content
        assert isinstance(content, dict) and content.get("exit_code") == 0, result.text
        assert SECRET not in content["stdout"]
        assert snapshot(base, root) == before
        for secret in (os.path.join(root, ".env"), os.path.join(root, "a", ".env")):
            assert Path(secret).read_text() == SECRET + "\n"
        done = json.loads(content["stdout"].rsplit("DONE ", 1)[1])
        for what, path in done:
            if what != "read":
                assert within(root, os.path.join(root, path)), (what, path)
